//! Stored turns embedded after `push` has returned: one queue that the memories of a process
//! share (a server's conversations), which gathers the turns waiting from every conversation
//! into few model calls, runs them on threads the scheduler serves only when nothing else
//! wants the cores, and writes the vectors to the store. Until its vectors are written, a
//! turn is found by its words.

use std::sync::Arc;

use strata_core::{EmbedError, Embedder, Turn};
use strata_store::{Store, TurnVectors};

use crate::background::{Background, Outbox, Work};

/// Turns per model call: enough for the embedder to batch texts of similar length, few
/// enough that a queue being closed stops soon.
const BATCH: usize = 16;

/// Embeds stored turns in the background for every memory given it (see [`crate::Parts`]).
pub struct EmbedQueue {
    model_id: String,
    background: Background<Deferred>,
}

impl std::fmt::Debug for EmbedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedQueue").field("model", &self.model_id).field("background", &self.background).finish()
    }
}

/// A turn to embed, with the store and conversation that hold it.
pub(crate) struct Job {
    store: Arc<dyn Store>,
    conversation: String,
    turn: Turn,
}

impl EmbedQueue {
    /// Starts the queue's thread. Model calls run on a pool of their own whose threads have
    /// the idle scheduling class where the system has one (Linux): requests, and the
    /// questions they embed, always come first; the queue uses the cores they leave.
    pub fn start(embedder: Arc<dyn Embedder>) -> EmbedQueue {
        let pool = rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("strata-embed-{i}"))
            .start_handler(|_| lower_priority())
            .build()
            .ok();
        EmbedQueue {
            model_id: embedder.model_id().to_string(),
            background: Background::start("strata-embed-queue", Deferred { embedder, pool }),
        }
    }

    /// The model that writes the vectors.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub(crate) fn submit(&self, store: &Arc<dyn Store>, conversation: &str, turn: Turn) {
        self.background.submit(Job { store: store.clone(), conversation: conversation.to_string(), turn });
    }

    /// Turns waiting for their vectors.
    pub fn pending(&self) -> usize {
        self.background.pending()
    }

    /// Blocks until every turn submitted so far has its vectors written (or failed).
    pub fn settle(&self) {
        self.background.settle();
    }

    /// Turns left without vectors since the last call, and why.
    pub fn take_warnings(&self) -> Vec<String> {
        self.background.take_warnings()
    }
}

/// The scheduler's idle class for the calling thread: it runs only on a core nothing else
/// wants. Best effort: where it cannot be had, the thread keeps its priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::{NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy};
        let _ = thread_priority::set_thread_priority_and_policy(
            thread_priority::thread_native_id(),
            ThreadPriority::Min,
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle),
        );
    }
}

struct Deferred {
    embedder: Arc<dyn Embedder>,
    pool: Option<rayon::ThreadPool>,
}

impl Deferred {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match &self.pool {
            Some(pool) => pool.install(|| self.embedder.embed(texts)),
            None => self.embedder.embed(texts),
        }
    }

    /// One model call for `jobs`, and their vectors written: one transaction per
    /// conversation.
    fn batch(&self, jobs: &[Job], out: &Outbox<'_, ()>) {
        let texts: Vec<Vec<String>> = jobs.iter().map(|j| strata_store::embedded_texts(&j.turn)).collect();
        let flat: Vec<&str> = texts.iter().flatten().map(String::as_str).collect();
        let vectors = match self.embed(&flat) {
            Ok(vs) if vs.len() == flat.len() && vs.iter().all(|v| !v.is_empty()) => vs,
            Ok(vs) => {
                let problem =
                    format!("{} usable vectors for {} texts", vs.iter().filter(|v| !v.is_empty()).count(), flat.len());
                return warn_each(jobs, &problem, out);
            }
            Err(e) => return warn_each(jobs, &e.to_string(), out),
        };
        let mut at = 0;
        let mut own = Vec::with_capacity(jobs.len());
        for t in &texts {
            own.push(&vectors[at..at + t.len()]);
            at += t.len();
        }
        // Runs of one conversation in one store, in the order they came.
        let mut start = 0;
        while start < jobs.len() {
            let same = |j: &Job| {
                j.conversation == jobs[start].conversation
                    && std::ptr::addr_eq(Arc::as_ptr(&j.store), Arc::as_ptr(&jobs[start].store))
            };
            let end = start + jobs[start..].iter().take_while(|j| same(j)).count();
            let batch: Vec<(&str, TurnVectors<'_>)> = (start..end)
                .map(|k| (jobs[k].turn.id.as_str(), TurnVectors { whole: &own[k][0], sentences: &own[k][1..] }))
                .collect();
            if let Err(e) = jobs[start].store.set_vectors(&jobs[start].conversation, &batch) {
                warn_each(&jobs[start..end], &e.to_string(), out);
            }
            start = end;
        }
    }
}

fn warn_each(jobs: &[Job], problem: &str, out: &Outbox<'_, ()>) {
    for j in jobs {
        out.warn(format!(
            "conversation {}: turn {} not embedded ({problem}); it is found by its words until the conversation is \
             opened again",
            j.conversation, j.turn.id
        ));
    }
}

impl Work for Deferred {
    type Job = Job;
    type Done = ();

    fn run(&mut self, jobs: Vec<Job>, out: &Outbox<'_, ()>) {
        for chunk in jobs.chunks(BATCH) {
            // Closing: the turns left keep no vectors until their conversation is opened
            // again (a memory queues its turns without vectors when it opens).
            if out.closing() {
                return;
            }
            self.batch(chunk, out);
        }
    }

    fn what(&self) -> &'static str {
        "embedding stored turns"
    }
}
