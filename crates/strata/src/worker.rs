//! Background summaries: spans of turns summarised off the caller's thread and stored; the
//! memory swaps finished ones in at turn boundaries.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_core::{Generator, Summary, SummaryLevel, Tier, TokenCounter, Turn};
use strata_store::{Store, StoredSummary};
use strata_summarize::SummaryConfig;

use crate::background::{Outbox, Work};

/// A span of turns in one tier: positions `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SpanKey {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) tier: Tier,
}

#[derive(Debug)]
pub(crate) struct SummaryJob {
    pub(crate) key: SpanKey,
    pub(crate) turns: Vec<Turn>,
    pub(crate) config: SummaryConfig,
}

/// Summarises spans off the caller's thread, in the order they were queued, and stores each
/// summary; a finished span comes back with its summary, or with none when the summarizer
/// panicked (the registry and the cold store stand for it).
pub(crate) struct Summaries {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) conversation: String,
    pub(crate) generator: Option<Arc<dyn Generator>>,
    pub(crate) counter: Arc<dyn TokenCounter>,
}

impl Work for Summaries {
    type Job = SummaryJob;
    type Done = (SpanKey, Option<Summary>);

    fn what(&self) -> &'static str {
        "summarising"
    }

    fn holds_the_model(&self) -> bool {
        self.generator.is_some()
    }

    fn run(&mut self, jobs: Vec<SummaryJob>, out: &Outbox<'_, Self::Done>) {
        for job in jobs {
            // Jobs not started when the memory closes are left: their spans are summarised
            // again after a reopen.
            if out.closing() {
                return;
            }
            out.done((job.key, self.summarize(&job, out)));
        }
    }
}

impl Summaries {
    fn summarize(&self, job: &SummaryJob, out: &Outbox<'_, (SpanKey, Option<Summary>)>) -> Option<Summary> {
        // A summarizer that panics loses its summary, never the thread.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let summarize = || {
                strata_summarize::summarize(
                    &job.turns,
                    None,
                    &[],
                    self.generator.as_deref(),
                    None,
                    self.counter.as_ref(),
                    job.key.tier,
                    &job.config,
                )
            };
            // A local model's arithmetic goes to the background pool (see `in_background`).
            if self.generator.is_some() {
                crate::in_background(summarize)
            } else {
                summarize()
            }
        }));
        let Ok(outcome) = outcome else {
            out.warn(format!("the summarizer panicked on positions {}..{}", job.key.start, job.key.end));
            return None;
        };
        let summary = outcome.summary;
        let stored = StoredSummary {
            level: job.key.tier.as_str().to_string(),
            first_seq: job.key.start as u64,
            last_seq: job.key.end.saturating_sub(1) as u64,
            model: summary.method.clone(),
            text: summary.text.clone(),
            sources: summary.source_ids.clone(),
        };
        if let Err(e) = self.store.put_summary(&self.conversation, &stored) {
            out.warn(format!("saving the summary of positions {}..{}: {e}", job.key.start, job.key.end));
        }
        Some(summary)
    }
}

/// Reads stored summaries back into the memory's map; unknown levels are skipped.
pub(crate) fn from_stored(stored: Vec<StoredSummary>) -> BTreeMap<SpanKey, Summary> {
    let mut out = BTreeMap::new();
    for s in stored {
        let Some(tier) = Tier::parse(&s.level).filter(|t| *t != Tier::Hot) else { continue };
        let key = SpanKey { start: s.first_seq as usize, end: s.last_seq as usize + 1, tier };
        out.insert(
            key,
            Summary { text: s.text, source_ids: s.sources, tier, level: SummaryLevel::Segment, method: s.model },
        );
    }
    out
}
