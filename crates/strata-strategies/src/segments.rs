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

use serde::Deserialize;
use strata_core::{Block, BlockKind, Context, Generator, History, Role, Strategy, StrategyError, Summary, Tier, Turn};
use strata_summarize::{ExtractiveConfig, Registry, SummaryConfig};

use crate::select::{finish, newest_fitting, pin_system, push_verbatim};

#[derive(Debug, Clone, PartialEq, Deserialize)]
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
    pub(crate) fn validate(&self) -> Result<(), String> {
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

    fn summarize(&self, turns: &[Turn], previous: Option<&Summary>, history: &History, registry: &Registry) -> Summary {
        let held = |f: &strata_summarize::Fact| registry.holds(&f.value);
        strata_summarize::summarize(
            turns,
            previous,
            &[],
            self.generator.as_deref(),
            Some(&held),
            history.counter(),
            Tier::Cool,
            &self.config.summary_config(),
        )
        .summary
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

        // Summaries, newest segment first, until the allowance is spent; what is older than
        // the last one that fits is folded into one narrative, if that fits too.
        let segments = self.split(history, history.pinned(), older_end);
        let turns = history.turns();
        let summaries: Vec<Summary> =
            segments.iter().map(|&(a, b)| self.summarize(&turns[a..b], None, history, &registry)).collect();
        let mut kept: Vec<Block> = Vec::new();
        let mut used = 0usize;
        let mut first_kept = segments.len();
        for (i, s) in summaries.iter().enumerate().rev() {
            let block = summary_block(s, history);
            if used + block.tokens > left {
                break;
            }
            used += block.tokens;
            kept.push(block);
            first_kept = i;
        }
        kept.reverse();
        let mut narrative: Option<Block> = None;
        if first_kept > 0 {
            // Fold the older segments, oldest first, each fold bounded in size.
            let mut folded: Option<Summary> = None;
            for &(a, b) in &segments[..first_kept] {
                folded = Some(self.summarize(&turns[a..b], folded.as_ref(), history, &registry));
            }
            if let Some(f) = folded {
                let block = summary_block(&f, history);
                if used + block.tokens <= left {
                    narrative = Some(block);
                } else {
                    ctx.notes.push(format!(
                        "the narrative of turns before {} does not fit; the registry stands for them",
                        turns[segments[first_kept.min(segments.len() - 1)].0].id
                    ));
                }
            }
        }
        ctx.blocks.extend(narrative);
        ctx.blocks.extend(kept);
        ctx.blocks.extend(registry_block);
        push_verbatim(history, &mut ctx, &recent);
        Ok(finish(ctx))
    }
}
