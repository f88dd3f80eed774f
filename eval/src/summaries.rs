//! The summary suite: summaries of whole conversations against people's reference summaries,
//! by ROUGE-1/2/L F1 (the best over the references), with the time each took.
//!
//! Methods: `lead-N`, the first N turns as they were said (the usual reference point), and
//! `extractive-R`, strata-summarize's extractive summary at R source tokens per summary token,
//! each kept sentence prefixed by its speaker; with `--model`, `model` (the generator's summary
//! as written) and `checked` (after the keep-set check, extractive where it failed); a
//! conversation longer than `strata_summarize::RUN_TOKENS` goes to the model in runs of turns, folded.

use std::time::Instant;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use strata_core::Conversation;

use crate::metrics::rouge_multi;

/// Writes a summary of a whole conversation.
pub trait Summarizer: Send + Sync {
    fn name(&self) -> &str;
    fn summarize(&self, conversation: &Conversation) -> Result<String>;
}

/// The first `n` turns, each as `speaker: text`.
#[derive(Debug)]
pub struct Lead {
    name: String,
    n: usize,
}

impl Summarizer for Lead {
    fn name(&self) -> &str {
        &self.name
    }
    fn summarize(&self, c: &Conversation) -> Result<String> {
        Ok(c.turns
            .iter()
            .take(self.n)
            .map(|t| format!("{}: {}", t.speaker_or_role(), t.content))
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

/// strata-summarize's extractive summary at a fixed ratio.
pub struct Extractive {
    name: String,
    ratio: f64,
    counter: strata_tokens::Tiktoken,
}

impl std::fmt::Debug for Extractive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extractive").field("name", &self.name).field("ratio", &self.ratio).finish()
    }
}

impl Summarizer for Extractive {
    fn name(&self) -> &str {
        &self.name
    }
    fn summarize(&self, c: &Conversation) -> Result<String> {
        let config = strata_summarize::ExtractiveConfig { ratio: self.ratio, ..Default::default() };
        let e = strata_summarize::extractive::summarize(&c.turns, &c.participants, &self.counter, None, &config);
        Ok(e.sentences
            .iter()
            .map(|k| {
                let t = c.turns.iter().find(|t| t.id == k.turn_id).expect("kept sentences name their turns");
                format!("{}: {}", t.speaker_or_role(), k.text)
            })
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

/// A generator's summary: `model` as it wrote it, `checked` after the keep-set check (the
/// extractive summary where the check or the generator failed).
pub struct Abstractive {
    name: String,
    generator: std::sync::Arc<dyn strata_core::Generator>,
    checked: bool,
    counter: strata_tokens::Tiktoken,
}

impl std::fmt::Debug for Abstractive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Abstractive").field("name", &self.name).field("model", &self.generator.model_id()).finish()
    }
}

impl Summarizer for Abstractive {
    fn name(&self) -> &str {
        &self.name
    }
    fn summarize(&self, c: &Conversation) -> Result<String> {
        let config = strata_summarize::SummaryConfig::default();
        if self.checked {
            let out = strata_summarize::summarize_folded(
                &c.turns,
                &c.participants,
                Some(&*self.generator),
                None,
                &self.counter,
                strata_core::Tier::Cool,
                &config,
                strata_summarize::RUN_TOKENS,
            );
            return Ok(out.last().map(|o| o.summary.text.clone()).unwrap_or_default());
        }
        // The model as it is, however long it takes: this row measures the model. A long
        // conversation goes in runs, folded, as `checked` and the strategies send it.
        let config = strata_summarize::SummaryConfig { deadline: None, ..config };
        let mut previous: Option<String> = None;
        for run in strata_summarize::runs(&c.turns, &self.counter, strata_summarize::RUN_TOKENS) {
            let g = self.generator.generate(&strata_summarize::request(run, previous.as_deref(), &config))?;
            previous = Some(g.text.trim().to_string());
        }
        Ok(previous.unwrap_or_default())
    }
}

/// The summarizer a name selects: `lead-N`, `extractive-R`, or, with a generator, `model`
/// and `checked`.
pub fn by_name(
    name: &str,
    generator: &mut dyn FnMut() -> Result<std::sync::Arc<dyn strata_core::Generator>>,
) -> Result<Box<dyn Summarizer>> {
    if name == "model" || name == "checked" {
        return Ok(Box::new(Abstractive {
            name: name.to_string(),
            generator: generator()?,
            checked: name == "checked",
            counter: strata_tokens::Tiktoken::o200k(),
        }));
    }
    if let Some(r) = name.strip_prefix("extractive-").and_then(|r| r.parse::<f64>().ok()).filter(|&r| r >= 1.0) {
        return Ok(Box::new(Extractive {
            name: name.to_string(),
            ratio: r,
            counter: strata_tokens::Tiktoken::o200k(),
        }));
    }
    if let Some(n) = name.strip_prefix("lead-").and_then(|n| n.parse::<usize>().ok()).filter(|&n| n > 0) {
        return Ok(Box::new(Lead { name: name.to_string(), n }));
    }
    bail!(crate::BadInput(format!("unknown summarizer `{name}`: expected lead-N, extractive-R, model or checked")))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRecord {
    pub dataset: String,
    pub conversation_index: usize,
    pub method: String,
    pub rouge1: f64,
    pub rouge2: f64,
    #[serde(rename = "rougeL")]
    pub rouge_l: f64,
    pub words: usize,
    pub seconds: f64,
}

pub fn score(
    dataset: &str,
    index: usize,
    c: &Conversation,
    summarizers: &[Box<dyn Summarizer>],
) -> Result<Vec<SummaryRecord>> {
    if c.references.is_empty() {
        return Ok(Vec::new());
    }
    summarizers
        .iter()
        .map(|s| {
            let start = Instant::now();
            let summary = s.summarize(c)?;
            let seconds = start.elapsed().as_secs_f64();
            let r = rouge_multi(&summary, &c.references);
            Ok(SummaryRecord {
                dataset: dataset.to_string(),
                conversation_index: index,
                method: s.name().to_string(),
                rouge1: r.rouge1.f1,
                rouge2: r.rouge2.f1,
                rouge_l: r.rouge_l.f1,
                words: summary.split_whitespace().count(),
                seconds,
            })
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRun {
    pub dataset: String,
    pub method: String,
    pub summaries: usize,
    pub rouge1: f64,
    pub rouge2: f64,
    #[serde(rename = "rougeL")]
    pub rouge_l: f64,
    pub words_mean: f64,
    pub seconds_per_summary: f64,
}

pub fn aggregate(records: &[SummaryRecord], datasets: &[String], methods: &[String]) -> Vec<SummaryRun> {
    crate::report::by_dataset_and_method(records, datasets, methods, |r| (&r.dataset, &r.method))
        .into_iter()
        .map(|g| SummaryRun {
            dataset: g.dataset.to_string(),
            method: g.method.to_string(),
            summaries: g.records.len(),
            rouge1: g.mean(|r| r.rouge1),
            rouge2: g.mean(|r| r.rouge2),
            rouge_l: g.mean(|r| r.rouge_l),
            words_mean: g.mean(|r| r.words as f64),
            seconds_per_summary: g.mean(|r| r.seconds),
        })
        .collect()
}
