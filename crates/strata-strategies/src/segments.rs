//! `segments` (the seed's OpenCLaw): the conversation is cut into segments by a token threshold
//! (4k by default), time gaps (30 minutes) and cue phrases that announce a new topic; the newest
//! turns stay verbatim, the segments before them become "[Earlier conversation summary: ...]"
//! messages, and the fact registry of everything older is rendered beside them so that ids,
//! numbers, paths, commands, decisions and preferences survive however far back they were said.
//!
//! Summaries are hierarchical: the newest older segments keep a summary each, and everything
//! before them is folded into one narrative of bounded size. `segments` summarises
//! extractively; `segments-abstractive` asks a [`Generator`] and falls back to the extractive
//! summary whenever the generator fails, times out, or its text fails the keep-set check.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use strata_core::{Block, BlockKind, Context, Generator, History, Role, Strategy, StrategyError, Summary, Tier, Turn};
use strata_summarize::{ExtractiveConfig, Registry, SummaryConfig};

use crate::select::{finish, newest_fitting, pin_system, push_verbatim};

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SegmentsConfig {
    /// A segment closes once it holds this many tokens.
    pub segment_tokens: usize,
    /// A pause at least this long starts a segment.
    pub time_gap_seconds: i64,
    /// Share of the budget for the newest turns, verbatim.
    pub recent: f64,
    /// Share of the budget for the registry of older facts.
    pub registry: f64,
    /// Source tokens per summary token (10 is the cool tier).
    pub ratio: f64,
    /// No one summary is longer than this.
    pub max_summary_tokens: usize,
    /// The length abstractive summaries are asked for.
    pub max_summary_words: usize,
    /// How long the generator may take for one summary.
    pub deadline_ms: Option<u64>,
}

impl Default for SegmentsConfig {
    fn default() -> Self {
        SegmentsConfig {
            segment_tokens: 4000,
            time_gap_seconds: 30 * 60,
            recent: 0.4,
            registry: 0.4,
            ratio: 10.0,
            max_summary_tokens: 300,
            max_summary_words: 150,
            deadline_ms: Some(120_000),
        }
    }
}

impl SegmentsConfig {
    /// Every value in its range, or a message naming the first that is not.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [("recent", self.recent), ("registry", self.registry)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("segments: `{name}` must be between 0 and 1, not {v}"));
            }
        }
        if self.recent + self.registry > 1.0 {
            return Err("segments: `recent` and `registry` together must not pass 1".to_string());
        }
        if self.ratio < 1.0 {
            return Err(format!("segments: `ratio` must be at least 1, not {}", self.ratio));
        }
        Ok(())
    }

    fn summary_config(&self) -> SummaryConfig {
        SummaryConfig {
            max_words: self.max_summary_words,
            max_tokens: self.max_summary_tokens * 2,
            deadline: self.deadline_ms.map(Duration::from_millis),
            extractive: ExtractiveConfig {
                ratio: self.ratio,
                max_tokens: Some(self.max_summary_tokens),
                ..ExtractiveConfig::default()
            },
        }
    }
}

/// Phrases that open a new segment when a turn contains them.
const CUE_PHRASES: &[&str] = &[
    "let's switch to",
    "new topic",
    "different topic",
    "moving on",
    "back to",
    "different question",
    "on another note",
];

pub struct Segments {
    name: &'static str,
    config: SegmentsConfig,
    generator: Option<Arc<dyn Generator>>,
}

impl std::fmt::Debug for Segments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segments")
            .field("name", &self.name)
            .field("config", &self.config)
            .field("generator", &self.generator.as_ref().map(|g| g.model_id().to_string()))
            .finish()
    }
}

impl Segments {
    /// Extractive summaries.
    pub fn extractive(config: SegmentsConfig) -> Segments {
        Segments { name: "segments", config, generator: None }
    }

    /// Summaries by `generator`, checked, with the extractive ones as the fallback.
    pub fn abstractive(config: SegmentsConfig, generator: Arc<dyn Generator>) -> Segments {
        Segments { name: "segments-abstractive", config, generator: Some(generator) }
    }

    /// Segment boundaries over turns `from..to`: half-open ranges covering them.
    pub fn split(&self, history: &History, from: usize, to: usize) -> Vec<(usize, usize)> {
        let turns = history.turns();
        let mut out = Vec::new();
        let mut start = from;
        let mut tokens = 0usize;
        for i in from..to {
            let gap = i > start
                && matches!((turns[i - 1].timestamp, turns[i].timestamp),
                    (Some(a), Some(b)) if b.seconds() - a.seconds() >= self.config.time_gap_seconds);
            let lower = turns[i].content.to_lowercase();
            let cue = i > start && CUE_PHRASES.iter().any(|p| lower.contains(p));
            let full = i > start && tokens + history.tokens(i) > self.config.segment_tokens;
            // A tool result stays with the call it answers.
            let splittable = history.unit_of(i).turns.first() == Some(&i);
            if (gap || cue || full) && splittable {
                out.push((start, i));
                start = i;
                tokens = 0;
            }
            tokens += history.tokens(i);
        }
        if start < to {
            out.push((start, to));
        }
        out
    }

    /// A summary of `turns` (folding in `previous`); by the generator, when there is one and
    /// `abstractive` allows it, and extractive otherwise.
    fn summarize(
        &self,
        turns: &[Turn],
        previous: Option<&Summary>,
        history: &History,
        registry: &Registry,
        abstractive: bool,
        config: &SummaryConfig,
    ) -> Summary {
        let held = |f: &strata_summarize::Fact| registry.holds(&f.value);
        strata_summarize::summarize(
            turns,
            previous,
            &[],
            if abstractive { self.generator.as_deref() } else { None },
            Some(&held),
            history.counter(),
            Tier::Cool,
            config,
        )
        .summary
    }
}

impl Segments {
    /// Summaries of summaries: each older summary is folded into the narrative in turn, so the
    /// narrative stays bounded however many segments it covers, and it quotes (extractive) or
    /// restates (abstractive) what the segment summaries said, not the turns again.
    fn fold(&self, summaries: &[Summary], history: &History, registry: &Registry) -> Summary {
        // A fold keeps what fits its bound; it does not compress the summaries again by the
        // segment ratio.
        let mut config = self.config.summary_config();
        config.extractive.ratio = 1.0;
        let mut folded: Option<Summary> = None;
        for s in summaries {
            let abstractive = s.method != "extractive";
            let mut next = self.summarize(
                &strata_summarize::abstractive::as_turns(s),
                folded.as_ref(),
                history,
                registry,
                abstractive,
                &config,
            );
            let mut ids = folded.map(|f| f.source_ids).unwrap_or_default();
            ids.extend(s.source_ids.iter().cloned());
            next.source_ids = ids;
            folded = Some(next);
        }
        folded.expect("fold is called with at least one summary")
    }
}

fn summary_block(summary: &Summary, history: &History) -> Block {
    Block::text(
        BlockKind::Summary,
        Role::System,
        format!("[Earlier conversation summary: {}]", summary.text),
        summary.source_ids.clone(),
        history.counter(),
    )
}

impl Strategy for Segments {
    fn name(&self) -> &str {
        self.name
    }

    fn build(&self, history: &History, budget: usize, _question: Option<&str>) -> Result<Context, StrategyError> {
        let mut ctx = Context::new(self.name, budget, history.counter());
        let left = pin_system(history, &mut ctx);
        let (all, _) = newest_fitting(history, left);
        if all.len() + history.pinned() == history.len() {
            // Everything fits: nothing to summarise.
            push_verbatim(history, &mut ctx, &all);
            return Ok(finish(ctx));
        }
        let recent_allowance = (budget as f64 * self.config.recent) as usize;
        let (recent, recent_tokens) = newest_fitting(history, recent_allowance.min(left));
        let older_end = recent.first().copied().unwrap_or(history.len());
        let mut left = left - recent_tokens;

        let registry = Registry::from_turns(&history.turns()[..older_end]);
        let registry_allowance = ((budget as f64 * self.config.registry) as usize).min(left);
        let registry_block = registry
            .render(registry_allowance, history.counter())
            .map(|(text, ids)| Block::text(BlockKind::Registry, Role::System, text, ids, history.counter()));
        if let Some(b) = &registry_block {
            left -= b.tokens;
        }

        // Segments over the whole history, so that a closed segment is the same at every later
        // turn (and a generator's summary of it is asked for once, then cached); the segment
        // that runs into the recent turns is still open, and its older part is summarised
        // extractively until it closes.
        let turns = history.turns();
        let config = self.config.summary_config();
        let mut summaries: Vec<Summary> = Vec::new();
        for (a, b) in self.split(history, history.pinned(), history.len()) {
            if b <= older_end {
                summaries.push(self.summarize(&turns[a..b], None, history, &registry, true, &config));
            } else if a < older_end {
                summaries.push(self.summarize(&turns[a..older_end], None, history, &registry, false, &config));
            }
        }
        // The newest summaries that fit; everything older is folded, summary by summary, into
        // one narrative of bounded size. While narrative and summaries overflow the allowance,
        // one more summary moves into the narrative.
        // A summary that nothing fitted (every sentence over its bound) would cost its framing
        // and say nothing.
        summaries.retain(|s| !s.text.trim().is_empty());
        let blocks: Vec<Block> = summaries.iter().map(|s| summary_block(s, history)).collect();
        let mut k = 0;
        let mut used = 0;
        for b in blocks.iter().rev() {
            if used + b.tokens > left {
                break;
            }
            used += b.tokens;
            k += 1;
        }
        let mut narrative: Option<Block> = None;
        while k < blocks.len() {
            let older = &summaries[..blocks.len() - k];
            let folded = self.fold(older, history, &registry);
            if folded.text.trim().is_empty() {
                break;
            }
            let newest: usize = blocks[blocks.len() - k..].iter().map(|b| b.tokens).sum();
            let block = summary_block(&folded, history);
            if newest + block.tokens <= left {
                narrative = Some(block);
                break;
            }
            if k == 0 {
                let upto = turns.get(older_end.saturating_sub(1)).map_or("", |t| t.id.as_str());
                ctx.notes
                    .push(format!("the narrative of turns up to {upto} does not fit; the registry stands for them"));
                break;
            }
            k -= 1;
        }
        let kept = blocks[blocks.len() - k..].to_vec();
        ctx.blocks.extend(narrative);
        ctx.blocks.extend(kept);
        ctx.blocks.extend(registry_block);
        push_verbatim(history, &mut ctx, &recent);
        Ok(finish(ctx))
    }
}
