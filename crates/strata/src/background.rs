//! One type for the memory's background work: a thread per kind of work (summaries, sentence
//! rankings) that takes jobs in order, hands back what it finished for the memory to take at
//! its next turn boundary, and lets `settle` wait for it. Each kind says only what a batch of
//! jobs does ([`Work`]); starting, sending, settling, closing and warnings live here once.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// What one kind of background work does with its jobs.
pub(crate) trait Work: Send + 'static {
    type Job: Send + 'static;
    type Done: Send + 'static;

    /// Does `jobs` (every job waiting, oldest first), handing each result to `out` as it
    /// finishes. A panic here stops the thread: later jobs are dropped and the memory is told.
    fn run(&mut self, jobs: Vec<Self::Job>, out: &Outbox<'_, Self::Done>);

    /// What the work is, for warnings ("ranking the salient sentences").
    fn what(&self) -> &'static str;
}

#[derive(Debug)]
struct State<D> {
    sent: u64,
    /// Jobs finished (or dropped after a panic).
    finished: u64,
    /// Results not yet taken by the memory.
    done: Vec<D>,
    warnings: Vec<String>,
    /// The thread has stopped: `settle` no longer waits for it.
    stopped: bool,
    /// The memory is being dropped: jobs not started are left.
    closing: bool,
}

/// The state a background thread shares with its memory: a mutex that outlives a panicking
/// holder, and a condition variable rung whenever the state moves.
#[derive(Debug)]
struct Shared<D> {
    state: Mutex<State<D>>,
    changed: Condvar,
}

impl<D> Shared<D> {
    /// A thread that panicked while holding the lock left the state consistent enough: every
    /// update is a few assignments, and the panics caught are the work's, outside the lock.
    fn lock(&self) -> MutexGuard<'_, State<D>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Where [`Work::run`] puts what it finished and what the user should know.
pub(crate) struct Outbox<'a, D> {
    shared: &'a Shared<D>,
}

impl<D> Outbox<'_, D> {
    pub(crate) fn done(&self, result: D) {
        self.shared.lock().done.push(result);
        self.shared.changed.notify_all();
    }

    pub(crate) fn warn(&self, warning: String) {
        self.shared.lock().warnings.push(warning);
    }

    /// The memory is being dropped: a long batch may stop between jobs.
    pub(crate) fn closing(&self) -> bool {
        self.shared.lock().closing
    }
}

/// One kind of background work for one memory.
pub(crate) struct Background<W: Work> {
    tx: Option<Sender<W::Job>>,
    shared: Arc<Shared<W::Done>>,
    handle: Option<JoinHandle<()>>,
}

impl<W: Work> std::fmt::Debug for Background<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.shared.lock();
        f.debug_struct("Background").field("sent", &s.sent).field("finished", &s.finished).finish()
    }
}

impl<W: Work> Background<W> {
    pub(crate) fn start(thread: &str, work: W) -> Background<W> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                sent: 0,
                finished: 0,
                done: Vec::new(),
                warnings: Vec::new(),
                stopped: false,
                closing: false,
            }),
            changed: Condvar::new(),
        });
        let (tx, rx) = mpsc::channel();
        let handle = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(thread.to_string())
                .spawn(move || run(work, &rx, &shared))
                .unwrap_or_else(|e| panic!("spawning the {thread} thread: {e}"))
        };
        Background { tx: Some(tx), shared, handle: Some(handle) }
    }

    pub(crate) fn submit(&self, job: W::Job) {
        let mut s = self.shared.lock();
        if s.stopped {
            return;
        }
        s.sent += 1;
        drop(s);
        if let Some(tx) = &self.tx {
            if tx.send(job).is_err() {
                // The thread is gone: what it would have made stays unmade, and said so.
                let mut s = self.shared.lock();
                s.finished = s.sent;
                s.stopped = true;
                self.shared.changed.notify_all();
            }
        }
    }

    /// Results finished since the last call, oldest first; each is handed over once.
    pub(crate) fn take_done(&self) -> Vec<W::Done> {
        std::mem::take(&mut self.shared.lock().done)
    }

    pub(crate) fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut self.shared.lock().warnings)
    }

    /// Jobs sent and not yet finished.
    pub(crate) fn pending(&self) -> usize {
        let s = self.shared.lock();
        (s.sent - s.finished) as usize
    }

    /// Blocks until every job sent so far has finished (or the thread has stopped).
    pub(crate) fn settle(&self) {
        let blocked = |s: &mut State<W::Done>| !s.stopped && s.finished < s.sent;
        drop(self.shared.changed.wait_while(self.shared.lock(), blocked).unwrap_or_else(|p| p.into_inner()));
    }
}

impl<W: Work> Drop for Background<W> {
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.tx.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn run<W: Work>(mut work: W, rx: &Receiver<W::Job>, shared: &Shared<W::Done>) {
    let out = Outbox { shared };
    while let Ok(first) = rx.recv() {
        if shared.lock().closing {
            break;
        }
        let jobs: Vec<W::Job> = std::iter::once(first).chain(rx.try_iter()).collect();
        let n = jobs.len() as u64;
        // Work that panics stops its thread, never the memory: what it would have made stays
        // unmade (contexts go on without it), and the memory says so.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.run(jobs, &out)));
        let mut s = shared.lock();
        s.finished += n;
        if outcome.is_err() {
            s.warnings.push(format!("{} panicked; the memory goes on without it", work.what()));
            s.finished = s.sent;
            s.stopped = true;
            shared.changed.notify_all();
            return;
        }
        shared.changed.notify_all();
    }
    let mut s = shared.lock();
    s.finished = s.sent;
    s.stopped = true;
    shared.changed.notify_all();
}
