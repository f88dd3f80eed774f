//! The salience ranker: a background thread that keeps a conversation's word statistics and,
//! after turns arrive, ranks its sentences by information (`strata_summarize::Salience`), so
//! that building a context only walks a finished ranking and never ranks.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use strata_core::{TokenCounter, Turn};
use strata_summarize::{Ranking, Salience, SalienceConfig};

use crate::shared::Shared;

#[derive(Debug, Default)]
struct State {
    /// Turns sent so far (the highest index sent, plus one).
    sent: usize,
    /// The newest finished ranking.
    ranking: Option<Arc<Ranking>>,
    /// Why the thread stopped, if it did: `settle` then returns rather than wait forever.
    failed: Option<String>,
    /// Whether `failed` was handed to the memory's notes.
    reported: bool,
    closing: bool,
}

/// One thread per memory. Turns come in batches; the thread takes every batch waiting, adds
/// them to the statistics, and ranks once for all of them, so a burst of pushes costs one
/// ranking, not one each.
pub(crate) struct Ranker {
    tx: Option<Sender<Vec<(usize, Turn)>>>,
    shared: Arc<Shared<State>>,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Ranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.shared.lock();
        f.debug_struct("Ranker").field("sent", &s.sent).field("ranked", &s.ranking.as_ref().map(|r| r.turns())).finish()
    }
}

impl Ranker {
    pub(crate) fn start(counter: Arc<dyn TokenCounter>, config: SalienceConfig) -> Ranker {
        let shared = Arc::new(Shared::<State>::default());
        let (tx, rx) = mpsc::channel();
        let handle = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("strata-salience".into())
                .spawn(move || run(counter.as_ref(), &config, rx, &shared))
                .expect("spawning the salience thread")
        };
        Ranker { tx: Some(tx), shared, handle: Some(handle) }
    }

    /// Sends turns (index, turn) to be ranked with those before them.
    pub(crate) fn send(&self, turns: Vec<(usize, Turn)>) {
        let Some(last) = turns.iter().map(|(i, _)| i + 1).max() else { return };
        let mut s = self.shared.lock();
        s.sent = s.sent.max(last);
        drop(s);
        if let Some(tx) = &self.tx {
            if tx.send(turns).is_err() {
                let mut s = self.shared.lock();
                s.failed.get_or_insert_with(|| "the salience thread stopped".to_string());
                self.shared.notify();
            }
        }
    }

    /// The newest finished ranking, which may not have seen the newest turns yet.
    pub(crate) fn latest(&self) -> Option<Arc<Ranking>> {
        self.shared.lock().ranking.clone()
    }

    /// Why the thread stopped, once.
    pub(crate) fn take_failure(&self) -> Option<String> {
        let mut s = self.shared.lock();
        if s.reported {
            return None;
        }
        s.reported = s.failed.is_some();
        s.failed.clone()
    }

    /// Blocks until the turns sent so far are ranked (or the thread has stopped).
    pub(crate) fn settle(&self) {
        drop(self.shared.wait_while(|s| s.failed.is_none() && s.sent > s.ranking.as_ref().map_or(0, |r| r.turns())));
    }
}

impl Drop for Ranker {
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.tx.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn run(counter: &dyn TokenCounter, config: &SalienceConfig, rx: Receiver<Vec<(usize, Turn)>>, shared: &Shared<State>) {
    let mut salience = Salience::for_config(config);
    while let Ok(first) = rx.recv() {
        for batch in std::iter::once(first).chain(rx.try_iter()) {
            for (i, t) in &batch {
                salience.add_turn(*i, t);
            }
        }
        if shared.lock().closing {
            break;
        }
        // A ranking that panics stops the ranker, never the memory: contexts go on without
        // salient sentences, and the memory says so.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            salience.rank(0..salience.turns(), counter, config)
        }));
        let mut s = shared.lock();
        match outcome {
            Ok(r) => s.ranking = Some(Arc::new(r)),
            Err(_) => {
                s.failed = Some(format!("ranking the salient sentences of {} turns panicked", salience.turns()));
                shared.notify();
                return;
            }
        }
        shared.notify();
    }
    let mut s = shared.lock();
    s.failed.get_or_insert_with(|| "the salience thread stopped".to_string());
    shared.notify();
}
