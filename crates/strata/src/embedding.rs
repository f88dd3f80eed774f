//! Stored turns embedded after `push` has returned: one queue that the memories of a process
//! share (a server's conversations), which gathers the turns waiting from every conversation
//! into small model calls, runs each only when no question is waiting for the model, and
//! writes the vectors to the store. Until its vectors are written, a turn is found by its
//! words.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

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

/// Turns waiting for their vectors, at most. Past it a stored turn is not queued and keeps no
/// vectors until its conversation is opened again (a memory queues its turns without vectors
/// when it opens): under a load of questions that keeps the model busy the queue only grows
/// (4,049 turns after one load run with MiniLM), and each waiting turn holds its text in
/// memory.
pub(crate) const BACKLOG_MAX: usize = 20_000;

/// Embeds stored turns in the background for every memory given it (see [`crate::Parts`]).
pub struct EmbedQueue {
    model_id: String,
    questions: Arc<dyn Embedder>,
    background: Background<Deferred>,
    backlog_max: usize,
    /// Turns not queued because the backlog was full.
    shed: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for EmbedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedQueue").field("model", &self.model_id).field("background", &self.background).finish()
    }
}

/// One model call at a time, questions first, and questions that arrive together in one
/// call. The model spreads one call over every core already, so calls at once only fight
/// over them (measured: 50 conversations embedding at once through MiniLM took 67 s for 150
/// requests, most of it the kernel's); a question is what a request waits for, where a
/// stored turn can wait; and one call for many short questions costs little more than one.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    /// A model call is under way.
    busy: bool,
    /// Questions' texts waiting for the next call, and for each question its ticket and how
    /// many texts are its.
    texts: Vec<String>,
    asked: Vec<(u64, usize)>,
    next_ticket: u64,
    /// Answers not yet picked up, by ticket.
    answers: HashMap<u64, Result<Vec<Vec<f32>>, EmbedError>>,
    /// Other calls a caller waits on (`embed`, `embed_clustering`), waiting for the model.
    others_waiting: usize,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, s: MutexGuard<'a, GateState>) -> MutexGuard<'a, GateState> {
        self.changed.wait(s).unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` as the one model call under way (the caller has waited its turn).
    fn exclusive<T>(&self, mut s: MutexGuard<'_, GateState>, f: impl FnOnce() -> T) -> T {
        s.busy = true;
        drop(s);
        // Released even if the model panics, so that nobody waits forever.
        struct Release<'g>(&'g Gate);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.lock().busy = false;
                self.0.changed.notify_all();
            }
        }
        let _release = Release(self);
        f()
    }
}

/// The model as questions reach it: through the gate, ahead of the queue.
struct QuestionsFirst {
    inner: Arc<dyn Embedder>,
    gate: Arc<Gate>,
}

impl QuestionsFirst {
    /// A call the caller waits on, ahead of the queue's.
    fn first<T>(&self, f: impl FnOnce(&dyn Embedder) -> T) -> T {
        let mut s = self.gate.lock();
        s.others_waiting += 1;
        while s.busy {
            s = self.gate.wait(s);
        }
        s.others_waiting -= 1;
        self.gate.exclusive(s, || f(self.inner.as_ref()))
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
        self.first(|e| e.embed(texts))
    }
    /// Questions asked while a call is under way wait for it together, and the first of them
    /// to find the model free embeds them all in one call.
    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let gate = &self.gate;
        let mut s = gate.lock();
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        s.texts.extend(texts.iter().map(|t| t.to_string()));
        s.asked.push((ticket, texts.len()));
        loop {
            if let Some(answer) = s.answers.remove(&ticket) {
                return answer;
            }
            if !s.busy && !s.asked.is_empty() {
                let texts = std::mem::take(&mut s.texts);
                let asked = std::mem::take(&mut s.asked);
                let vectors = gate.exclusive(s, || {
                    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                    // A model that panics fails every question of the call, never leaves
                    // the others waiting for answers nobody will deal.
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.inner.embed_query(&refs)))
                        .unwrap_or_else(|_| {
                            Err(EmbedError::Backend {
                                model: self.inner.model_id().to_string(),
                                message: "the model panicked".to_string(),
                            })
                        })
                });
                s = gate.lock();
                deal(&mut s.answers, &asked, vectors, self.inner.model_id());
                gate.changed.notify_all();
                continue;
            }
            s = gate.wait(s);
        }
    }
    fn embed_clustering(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.first(|e| e.embed_clustering(texts))
    }
}

/// One call's vectors dealt to the questions in it, in order; a failed call (or one that
/// gave too few vectors) fails each of them with its message.
fn deal(
    answers: &mut HashMap<u64, Result<Vec<Vec<f32>>, EmbedError>>,
    asked: &[(u64, usize)],
    vectors: Result<Vec<Vec<f32>>, EmbedError>,
    model: &str,
) {
    let wanted: usize = asked.iter().map(|(_, n)| n).sum();
    let vectors = vectors.and_then(|v| {
        if v.len() == wanted {
            Ok(v)
        } else {
            Err(EmbedError::Backend {
                model: model.to_string(),
                message: format!("{} vectors for {wanted} texts", v.len()),
            })
        }
    });
    match vectors {
        Ok(v) => {
            let mut v = v.into_iter();
            for &(ticket, n) in asked {
                answers.insert(ticket, Ok(v.by_ref().take(n).collect()));
            }
        }
        Err(e) => {
            let message = e.to_string();
            for &(ticket, _) in asked {
                answers.insert(ticket, Err(EmbedError::Backend { model: model.to_string(), message: message.clone() }));
            }
        }
    }
}

/// A turn to embed, with the store and conversation that hold it.
pub(crate) struct EmbedJob {
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
            background: Background::start(Deferred { embedder, gate }),
            backlog_max: BACKLOG_MAX,
            shed: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The queue with a backlog of at most `n` turns (20,000 by default).
    pub fn with_backlog_max(mut self, n: usize) -> EmbedQueue {
        self.backlog_max = n;
        self
    }

    /// Turns left without vectors because the backlog was full when they were stored.
    pub fn shed(&self) -> usize {
        self.shed.load(std::sync::atomic::Ordering::Relaxed)
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
        if self.background.pending() >= self.backlog_max {
            self.shed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        self.background.submit(EmbedJob { store: store.clone(), conversation: conversation.to_string(), turn });
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
        let mut s = self.gate.lock();
        while s.busy || !s.asked.is_empty() || s.others_waiting > 0 {
            s = self.gate.wait(s);
        }
        self.gate.exclusive(s, || self.embedder.embed(texts))
    }

    /// One model call for `jobs`, and their vectors written: one transaction per
    /// conversation.
    fn batch(&self, jobs: &[EmbedJob], out: &Outbox<'_, ()>) {
        let own = match embed_turns(self.embedder.model_id(), jobs.iter().map(|j| &j.turn), |t| self.embed(t)) {
            Ok(own) => own,
            Err(e) => return warn_each(jobs, &e.to_string(), out),
        };
        // Runs of one conversation in one store, in the order they came.
        let mut start = 0;
        while start < jobs.len() {
            let same = |j: &EmbedJob| {
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

fn warn_each(jobs: &[EmbedJob], problem: &str, out: &Outbox<'_, ()>) {
    for j in jobs {
        out.warn(format!(
            "conversation {}: turn {} not embedded ({problem}); it is found by its words until the conversation is \
             opened again",
            j.conversation, j.turn.id
        ));
    }
}

impl Work for Deferred {
    type Job = EmbedJob;
    type Done = ();

    fn run(&mut self, jobs: Vec<EmbedJob>, out: &Outbox<'_, ()>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives each text a vector of its length; the first call waits until `released`, and
    /// every call's texts are recorded.
    #[derive(Default)]
    struct Held {
        calls: Mutex<Vec<Vec<String>>>,
        released: Mutex<bool>,
        changed: Condvar,
    }

    impl Embedder for Held {
        fn model_id(&self) -> &str {
            "held"
        }
        fn dim(&self) -> usize {
            1
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            let mut calls = self.calls.lock().unwrap();
            calls.push(texts.iter().map(|t| t.to_string()).collect());
            let first = calls.len() == 1;
            drop(calls);
            self.changed.notify_all();
            let mut released = self.released.lock().unwrap();
            while first && !*released {
                released = self.changed.wait(released).unwrap();
            }
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }

    /// Questions that come while the model is busy wait together and go to it in one call,
    /// each getting its own vectors back.
    #[test]
    fn questions_asked_together_share_one_model_call() {
        let held = Arc::new(Held::default());
        let gate = Arc::new(Gate::default());
        let questions = Arc::new(QuestionsFirst { inner: held.clone(), gate: gate.clone() });
        let ask = |texts: Vec<String>| {
            let questions = questions.clone();
            std::thread::spawn(move || {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                questions.embed_query(&refs).unwrap()
            })
        };
        let first = ask(vec!["a".into()]);
        while held.calls.lock().unwrap().is_empty() {
            std::thread::yield_now();
        }
        let waiting: Vec<_> = (1..=5).map(|i| (i, ask(vec!["q".repeat(i), "w".repeat(10 * i)]))).collect();
        while gate.lock().asked.len() < 5 {
            std::thread::yield_now();
        }
        *held.released.lock().unwrap() = true;
        held.changed.notify_all();
        assert_eq!(first.join().unwrap(), [vec![1.0]]);
        for (i, asked) in waiting {
            assert_eq!(asked.join().unwrap(), [vec![i as f32], vec![10.0 * i as f32]]);
        }
        let sizes: Vec<usize> = held.calls.lock().unwrap().iter().map(Vec::len).collect();
        assert_eq!(sizes, [1, 10], "the five questions in one call");
    }

    /// Past the backlog's bound a turn is not queued, and counted; below it again, it is.
    #[test]
    fn a_full_backlog_sheds_turns_and_counts_them() {
        let held = Arc::new(Held::default());
        let queue = EmbedQueue::start(held.clone()).with_backlog_max(2);
        let store: Arc<dyn Store> = Arc::new(strata_store::SqliteStore::in_memory().unwrap());
        for i in 0..5 {
            let t = Turn::new(format!("t{i}"), strata_core::Role::User, format!("turn {i}"));
            store.append("c", &t).unwrap();
            queue.submit(&store, "c", t);
        }
        // The first call holds the model: at most two turns wait, the rest are shed.
        assert!(queue.pending() <= 2, "{}", queue.pending());
        assert_eq!(queue.shed() + queue.pending(), 5, "every turn queued or counted");
        *held.released.lock().unwrap() = true;
        held.changed.notify_all();
        queue.settle();
        let t = Turn::new("t5", strata_core::Role::User, "turn 5");
        store.append("c", &t).unwrap();
        let shed = queue.shed();
        queue.submit(&store, "c", t);
        queue.settle();
        assert_eq!(queue.shed(), shed, "queued once the backlog drained");
    }

    /// A stored turn's call waits while a question waits, and a question waits for at most
    /// the call under way.
    #[test]
    fn a_stored_turn_waits_for_the_questions() {
        let held = Arc::new(Held::default());
        let gate = Arc::new(Gate::default());
        let questions = Arc::new(QuestionsFirst { inner: held.clone(), gate: gate.clone() });
        let deferred = Arc::new(Deferred { embedder: held.clone(), gate: gate.clone() });
        let q = questions.clone();
        let first = std::thread::spawn(move || q.embed_query(&["a"]).unwrap());
        while held.calls.lock().unwrap().is_empty() {
            std::thread::yield_now();
        }
        let d = deferred.clone();
        let turn = std::thread::spawn(move || d.embed(&["stored turn"]).unwrap());
        let q = questions.clone();
        let question = std::thread::spawn(move || q.embed_query(&["bb"]).unwrap());
        while gate.lock().asked.is_empty() {
            std::thread::yield_now();
        }
        *held.released.lock().unwrap() = true;
        held.changed.notify_all();
        first.join().unwrap();
        question.join().unwrap();
        turn.join().unwrap();
        assert_eq!(*held.calls.lock().unwrap(), [["a"], ["bb"], ["stored turn"]]);
    }
}
