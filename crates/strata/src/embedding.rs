//! Stored turns embedded after `push` has returned: one queue that the memories of a process
//! share (a server's conversations), which gathers the turns waiting from every conversation
//! into small model calls, runs each only when no question is waiting for the model, and
//! writes the vectors to the store. Until its vectors are written, a turn is found by its
//! words.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strata_core::{EmbedError, Embedder, Turn};
use strata_store::{Store, TurnVectors};

use crate::background::{Background, Outbox, Work};

/// Each turn's vectors from one model call (`embed`), in [`TurnVectors`]' order: the whole
/// text's ([`strata_store::embedded_texts`]), then each sentence's. A call that gives fewer
/// usable vectors than texts is an error naming both counts. Shared by the push path, the
/// queue and `reembed`.
pub(crate) fn embed_turns<'t>(
    model: &str,
    turns: impl IntoIterator<Item = &'t Turn>,
    embed: impl FnOnce(&[&str]) -> Result<Vec<Vec<f32>>, EmbedError>,
) -> Result<Vec<Vec<Vec<f32>>>, EmbedError> {
    let texts: Vec<Vec<String>> = turns.into_iter().map(strata_store::embedded_texts).collect();
    let flat: Vec<&str> = texts.iter().flatten().map(String::as_str).collect();
    let vectors = embed(&flat)?;
    let usable = vectors.iter().filter(|v| !v.is_empty()).count();
    if vectors.len() != flat.len() || usable != flat.len() {
        return Err(EmbedError::Backend {
            model: model.to_string(),
            message: format!("{usable} usable vectors for {} texts", flat.len()),
        });
    }
    let mut vectors = vectors.into_iter();
    Ok(texts.iter().map(|t| vectors.by_ref().take(t.len()).collect()).collect())
}

/// Turns per model call: a question waits at most for one such call (a turn and its
/// sentences are about 20 ms of MiniLM on two cores), and a queue being closed stops soon.
const BATCH: usize = 4;

/// Embeds stored turns in the background for every memory given it (see [`crate::Parts`]).
pub struct EmbedQueue {
    model_id: String,
    questions: Arc<dyn Embedder>,
    background: Background<Deferred>,
}

impl std::fmt::Debug for EmbedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedQueue").field("model", &self.model_id).field("background", &self.background).finish()
    }
}

/// One model call at a time, questions first. The model spreads one call over every core
/// already, so calls at once only fight over them (measured: 50 conversations embedding at
/// once through MiniLM took 67 s for 150 requests, most of it the kernel's); and a question
/// is what a request waits for, where a stored turn can wait.
#[derive(Default)]
struct Gate {
    turn: Mutex<()>,
    questions_waiting: AtomicUsize,
}

/// The model as questions reach it: through the gate, ahead of the queue.
struct QuestionsFirst {
    inner: Arc<dyn Embedder>,
    gate: Arc<Gate>,
}

impl QuestionsFirst {
    fn run<T>(&self, f: impl FnOnce(&dyn Embedder) -> T) -> T {
        self.gate.questions_waiting.fetch_add(1, Ordering::SeqCst);
        let turn = self.gate.turn.lock().unwrap_or_else(|p| p.into_inner());
        self.gate.questions_waiting.fetch_sub(1, Ordering::SeqCst);
        let out = f(self.inner.as_ref());
        drop(turn);
        out
    }
}

impl Embedder for QuestionsFirst {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.run(|e| e.embed(texts))
    }
    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.run(|e| e.embed_query(texts))
    }
    fn embed_clustering(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.run(|e| e.embed_clustering(texts))
    }
}

/// A turn to embed, with the store and conversation that hold it.
pub(crate) struct Job {
    store: Arc<dyn Store>,
    conversation: String,
    turn: Turn,
}

impl EmbedQueue {
    /// Starts the queue's thread. Its model calls wait while a question waits: embed
    /// questions with [`EmbedQueue::questions`], not with `embedder` itself.
    pub fn start(embedder: Arc<dyn Embedder>) -> EmbedQueue {
        let gate = Arc::new(Gate::default());
        EmbedQueue {
            model_id: embedder.model_id().to_string(),
            questions: Arc::new(QuestionsFirst { inner: embedder.clone(), gate: gate.clone() }),
            background: Background::start("strata-embed-queue", Deferred { embedder, gate }),
        }
    }

    /// The model for questions (and anything a caller waits on): one call at a time, each
    /// ahead of the queue's next.
    pub fn questions(&self) -> Arc<dyn Embedder> {
        self.questions.clone()
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

struct Deferred {
    embedder: Arc<dyn Embedder>,
    gate: Arc<Gate>,
}

impl Deferred {
    /// One call once no question waits; a question that comes while it runs waits for this
    /// call only.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        loop {
            while self.gate.questions_waiting.load(Ordering::SeqCst) > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            let turn = self.gate.turn.lock().unwrap_or_else(|p| p.into_inner());
            if self.gate.questions_waiting.load(Ordering::SeqCst) == 0 {
                let out = self.embedder.embed(texts);
                drop(turn);
                return out;
            }
        }
    }

    /// One model call for `jobs`, and their vectors written: one transaction per
    /// conversation.
    fn batch(&self, jobs: &[Job], out: &Outbox<'_, ()>) {
        let own = match embed_turns(self.embedder.model_id(), jobs.iter().map(|j| &j.turn), |t| self.embed(t)) {
            Ok(own) => own,
            Err(e) => return warn_each(jobs, &e.to_string(), out),
        };
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
