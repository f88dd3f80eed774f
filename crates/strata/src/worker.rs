//! The background compaction worker: summarises spans of turns off the caller's thread and
//! hands back finished summaries, which the memory swaps in at turn boundaries.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use strata_core::{Generator, Summary, SummaryLevel, Tier, TokenCounter, Turn};
use strata_store::{MemoryStore, StoredSummary};
use strata_summarize::SummaryConfig;

use crate::shared::Shared;

/// A span of turns in one tier: positions `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SpanKey {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) tier: Tier,
}

#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) key: SpanKey,
    pub(crate) turns: Vec<Turn>,
    pub(crate) config: SummaryConfig,
}

#[derive(Debug, Default)]
struct State {
    /// Spans summarised (here or before a reopen): never queued again.
    done: BTreeSet<SpanKey>,
    /// Summaries finished since the memory last took them.
    fresh: Vec<(SpanKey, Summary)>,
    pending: BTreeSet<SpanKey>,
    /// Summaries that could not be saved; the summary itself is still used.
    errors: Vec<String>,
    closing: bool,
}

/// One thread per memory; jobs run in the order they were queued.
pub(crate) struct Worker {
    tx: Option<Sender<Job>>,
    shared: Arc<Shared<State>>,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.shared.lock();
        f.debug_struct("Worker").field("done", &s.done.len()).field("pending", &s.pending.len()).finish()
    }
}

pub(crate) struct Context {
    pub(crate) store: Arc<dyn MemoryStore>,
    pub(crate) conversation: String,
    pub(crate) generator: Option<Arc<dyn Generator>>,
    pub(crate) counter: Arc<dyn TokenCounter>,
}

impl Worker {
    /// Starts the worker, knowing the spans already summarised (read back from the store).
    pub(crate) fn start(ctx: Context, done: BTreeSet<SpanKey>) -> Worker {
        let shared = Arc::new(Shared::<State>::default());
        shared.lock().done = done;
        let (tx, rx) = mpsc::channel();
        let handle = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("strata-compaction".into())
                .spawn(move || run(ctx, rx, &shared))
                .expect("spawning the compaction thread")
        };
        Worker { tx: Some(tx), shared, handle: Some(handle) }
    }

    /// Queues a span unless it is finished or already queued.
    pub(crate) fn submit(&self, job: Job) {
        let mut s = self.shared.lock();
        if s.done.contains(&job.key) || !s.pending.insert(job.key) {
            return;
        }
        drop(s);
        if let Some(tx) = &self.tx {
            if tx.send(job).is_err() {
                // The thread is gone (it panicked); the span stays unsummarised and the
                // registry and cold store stand for its turns.
                self.shared.lock().pending.clear();
            }
        }
    }

    /// The summaries finished since the last call (each is handed over once: the memory
    /// holds them, so a long conversation's summaries are not copied at every turn).
    pub(crate) fn take_finished(&self) -> Vec<(SpanKey, Summary)> {
        std::mem::take(&mut self.shared.lock().fresh)
    }

    pub(crate) fn pending(&self) -> usize {
        self.shared.lock().pending.len()
    }

    pub(crate) fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut self.shared.lock().errors)
    }

    /// Blocks until every queued job has finished.
    pub(crate) fn settle(&self) {
        drop(self.shared.wait_while(|s| !s.pending.is_empty()));
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Jobs not started are dropped: their spans are summarised again after a reopen.
        self.shared.lock().closing = true;
        self.tx.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn run(ctx: Context, rx: Receiver<Job>, shared: &Shared<State>) {
    while let Ok(job) = rx.recv() {
        if shared.lock().closing {
            break;
        }
        // A summarizer that panics loses its summary, never the worker: the span stays
        // unsummarised (the registry and the cold store stand for it) and `settle` returns.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let summarize = || {
                strata_summarize::summarize(
                    &job.turns,
                    None,
                    &[],
                    ctx.generator.as_deref(),
                    None,
                    ctx.counter.as_ref(),
                    job.key.tier,
                    &job.config,
                )
            };
            // A local model's arithmetic goes to the background pool (see `in_background`).
            if ctx.generator.is_some() {
                crate::in_background(summarize)
            } else {
                summarize()
            }
        }));
        let summary = match outcome {
            Ok(outcome) => outcome.summary,
            Err(_) => {
                let mut s = shared.lock();
                s.errors.push(format!("the summarizer panicked on positions {}..{}", job.key.start, job.key.end));
                s.pending.remove(&job.key);
                shared.notify();
                continue;
            }
        };
        let stored = StoredSummary {
            level: job.key.tier.as_str().to_string(),
            first_seq: job.key.start as u64,
            last_seq: job.key.end.saturating_sub(1) as u64,
            model: summary.method.clone(),
            text: summary.text.clone(),
            sources: summary.source_ids.clone(),
        };
        let saved = ctx.store.put_summary(&ctx.conversation, &stored);
        let mut s = shared.lock();
        if let Err(e) = saved {
            s.errors.push(format!("saving the summary of positions {}..{}: {e}", job.key.start, job.key.end));
        }
        s.done.insert(job.key);
        s.fresh.push((job.key, summary));
        s.pending.remove(&job.key);
        shared.notify();
    }
    let mut s = shared.lock();
    s.pending.clear();
    shared.notify();
}

/// Reads stored summaries back into the worker's map; unknown levels are skipped.
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
