//! The segmentation suite: topic boundaries against the gold ones, by Pk, WindowDiff and
//! boundary F1 per dialogue, averaged over dialogues as segeval does.
//!
//! Methods are named: `none` (one segment per dialogue) and `even-N` (a boundary every N
//! turns) need no model and serve as reference points; `fixed`, `depth` and `combined` are
//! strata-topic's detector over MiniLM embeddings.

use std::sync::Arc;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use strata_core::{Conversation, Embedder};
use strata_topic::TopicConfig;

use crate::metrics::{boundary_bits, boundary_f1, pk, window_diff, window_size};

/// A way of finding topic boundaries in a conversation.
pub trait Segmenter: Send + Sync {
    fn name(&self) -> &str;
    /// Indices of the turns that start a new segment (never 0).
    fn boundaries(&self, conversation: &Conversation) -> Result<Vec<usize>>;
}

/// No boundaries at all.
#[derive(Debug)]
pub struct NoBoundaries;

impl Segmenter for NoBoundaries {
    fn name(&self) -> &str {
        "none"
    }
    fn boundaries(&self, _: &Conversation) -> Result<Vec<usize>> {
        Ok(Vec::new())
    }
}

/// A boundary every `every` turns, whatever is said.
#[derive(Debug)]
pub struct Even {
    name: String,
    every: usize,
}

impl Segmenter for Even {
    fn name(&self) -> &str {
        &self.name
    }
    fn boundaries(&self, c: &Conversation) -> Result<Vec<usize>> {
        Ok((self.every..c.turns.len()).step_by(self.every).collect())
    }
}

/// strata-topic's detector with one configuration, over a shared embedder.
pub struct Detector {
    name: String,
    config: TopicConfig,
    embedder: Arc<dyn Embedder>,
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detector").field("name", &self.name).field("config", &self.config).finish()
    }
}

impl Segmenter for Detector {
    fn name(&self) -> &str {
        &self.name
    }
    fn boundaries(&self, c: &Conversation) -> Result<Vec<usize>> {
        let found = strata_topic::detect(&c.turns, &*self.embedder, &self.config)?;
        Ok(found.into_iter().map(|b| b.index).collect())
    }
}

/// The segmenter a name selects; detectors get `embedder`, loaded only when one is named.
pub fn by_name(name: &str, embedder: &mut dyn FnMut() -> Result<Arc<dyn Embedder>>) -> Result<Box<dyn Segmenter>> {
    if name == "none" {
        return Ok(Box::new(NoBoundaries));
    }
    if let Some(n) = name.strip_prefix("even-").and_then(|n| n.parse::<usize>().ok()).filter(|&n| n > 0) {
        return Ok(Box::new(Even { name: name.to_string(), every: n }));
    }
    if let Some(config) = TopicConfig::from_name(name) {
        return Ok(Box::new(Detector { name: name.to_string(), config, embedder: embedder()? }));
    }
    bail!(crate::BadInput(format!(
        "unknown segmenter `{name}`: expected none, even-N, fixed, fixed-T, depth, depth-W-C or combined"
    )))
}

/// One dialogue segmented by one method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentRecord {
    pub dataset: String,
    pub conversation_index: usize,
    pub method: String,
    pub turns: usize,
    pub window: usize,
    pub gold_boundaries: usize,
    pub found_boundaries: usize,
    pub pk: f64,
    pub windowdiff: f64,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

/// The gold boundaries of a conversation as turn indices.
pub fn gold(c: &Conversation) -> Vec<usize> {
    c.boundaries.iter().filter_map(|id| c.position(id)).filter(|&i| i > 0).collect()
}

/// Scores one conversation. `require_gold` skips conversations without gold boundaries: in a
/// benchmark of topic shifts a dialogue without one is a real case (no shift), but in any
/// other file it only means nobody labelled it.
pub fn score(
    dataset: &str,
    index: usize,
    c: &Conversation,
    segmenters: &[Box<dyn Segmenter>],
    require_gold: bool,
) -> Result<Vec<SegmentRecord>> {
    let n = c.turns.len();
    if n < 2 || (require_gold && c.boundaries.is_empty()) {
        return Ok(Vec::new());
    }
    let reference = boundary_bits(n, &gold(c));
    let k = window_size(n, &reference);
    segmenters
        .iter()
        .map(|s| {
            let found = s.boundaries(c)?;
            let hypothesis = boundary_bits(n, &found);
            let (precision, recall, f1) = boundary_f1(&reference, &hypothesis, 1);
            Ok(SegmentRecord {
                dataset: dataset.to_string(),
                conversation_index: index,
                method: s.name().to_string(),
                turns: n,
                window: k,
                gold_boundaries: reference.iter().filter(|&&b| b).count(),
                found_boundaries: hypothesis.iter().filter(|&&b| b).count(),
                pk: pk(&reference, &hypothesis, k),
                windowdiff: window_diff(&reference, &hypothesis, k),
                precision,
                recall,
                f1,
            })
        })
        .collect()
}

/// Mean scores of one method on one dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentationRun {
    pub dataset: String,
    pub method: String,
    pub dialogues: usize,
    pub pk: f64,
    pub windowdiff: f64,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

pub fn aggregate(records: &[SegmentRecord], datasets: &[String], methods: &[String]) -> Vec<SegmentationRun> {
    crate::report::by_dataset_and_method(records, datasets, methods, |r| (&r.dataset, &r.method))
        .into_iter()
        .map(|g| SegmentationRun {
            dataset: g.dataset.to_string(),
            method: g.method.to_string(),
            dialogues: g.records.len(),
            pk: g.mean(|r| r.pk),
            windowdiff: g.mean(|r| r.windowdiff),
            precision: g.mean(|r| r.precision),
            recall: g.mean(|r| r.recall),
            f1: g.mean(|r| r.f1),
        })
        .collect()
}
