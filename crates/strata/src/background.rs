//! One type for the memory's background work, run by one executor for the whole process.
//!
//! Each memory's kind of work (summaries, sentence rankings) and the embedding queue is a
//! *lane*: its jobs run in order, one batch at a time, and what it finished waits for the
//! memory to take at its next turn boundary. Lanes own no thread. The executor's few threads
//! take lanes that have jobs from one queue, in the order they became ready, so that a server
//! holding hundreds of conversations runs a fixed number of threads, and a memory opened and
//! closed leaves none behind. Each kind says only what a batch of jobs does ([`Work`]);
//! submitting, settling, closing and warnings live here once.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

/// What one kind of background work does with its jobs.
pub(crate) trait Work: Send + 'static {
    type Job: Send + 'static;
    type Done: Send + 'static;

    /// Does `jobs` (every job waiting, oldest first), handing each result to `out` as it
    /// finishes. A panic here stops the lane: later jobs are dropped and the memory is told.
    fn run(&mut self, jobs: Vec<Self::Job>, out: &Outbox<'_, Self::Done>);

    /// What the work is, for warnings ("ranking the salient sentences").
    fn what(&self) -> &'static str;

    /// Whether a batch holds the process's background model for its whole run (summaries by
    /// a local model: see `in_background`). The executor runs one such batch at a time, so
    /// that its other threads stay free for the lanes that can run.
    fn holds_the_model(&self) -> bool {
        false
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update under these locks is a few assignments, and the panics caught are the
    // work's, outside them: a poisoned lock is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Debug)]
struct State<W: Work> {
    jobs: VecDeque<W::Job>,
    /// The work itself; taken out while a batch runs.
    work: Option<W>,
    /// In the executor's queue, or running: not to be queued again.
    scheduled: bool,
    sent: u64,
    /// Jobs finished (or dropped: after a panic, or when closing).
    finished: u64,
    /// Results not yet taken by the memory.
    done: Vec<W::Done>,
    warnings: Vec<String>,
    /// A batch panicked: the lane takes no more jobs, and `settle` no longer waits for it.
    stopped: bool,
    /// The memory is being dropped: jobs not started are left.
    closing: bool,
}

/// A lane: its state and a condition variable rung whenever the state moves.
struct Lane<W: Work> {
    state: Mutex<State<W>>,
    changed: Condvar,
    holds_the_model: bool,
}

/// Where [`Work::run`] puts what it finished and what the user should know.
pub(crate) struct Outbox<'a, D> {
    done: &'a dyn Fn(D),
    warn: &'a dyn Fn(String),
    closing: &'a dyn Fn() -> bool,
}

impl<D> Outbox<'_, D> {
    pub(crate) fn done(&self, result: D) {
        (self.done)(result);
    }

    pub(crate) fn warn(&self, warning: String) {
        (self.warn)(warning);
    }

    /// The memory is being dropped: a long batch may stop between jobs.
    pub(crate) fn closing(&self) -> bool {
        (self.closing)()
    }
}

/// A lane as the executor sees it.
trait Runnable: Send + Sync {
    /// Runs every job waiting as one batch; queues the lane again if more came meanwhile.
    fn run_batch(self: Arc<Self>);
    fn holds_the_model(&self) -> bool;
}

impl<W: Work> Runnable for Lane<W> {
    fn holds_the_model(&self) -> bool {
        self.holds_the_model
    }

    fn run_batch(self: Arc<Self>) {
        let (jobs, mut work) = {
            let mut s = lock(&self.state);
            if s.closing || s.stopped || s.jobs.is_empty() {
                s.scheduled = false;
                self.changed.notify_all();
                return;
            }
            let Some(work) = s.work.take() else { return };
            (s.jobs.drain(..).collect::<Vec<_>>(), work)
        };
        let n = jobs.len() as u64;
        let out = Outbox {
            done: &|d| {
                lock(&self.state).done.push(d);
                self.changed.notify_all();
            },
            warn: &|w| lock(&self.state).warnings.push(w),
            closing: &|| lock(&self.state).closing,
        };
        // Work that panics stops its lane, never the memory or the executor: what it would
        // have made stays unmade (contexts go on without it), and the memory says so.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.run(jobs, &out)));
        let mut s = lock(&self.state);
        s.finished += n;
        if outcome.is_err() {
            s.warnings.push(format!("{} panicked; the memory goes on without it", work.what()));
            s.stopped = true;
        }
        s.work = Some(work);
        if s.stopped || s.closing {
            // Nothing more runs here: what is left counts as finished, so nobody waits on it.
            s.jobs.clear();
            s.finished = s.sent;
        }
        let again = !s.jobs.is_empty();
        s.scheduled = again;
        drop(s);
        self.changed.notify_all();
        if again {
            executor().push(self);
        }
    }
}

/// The process's background threads and the lanes ready to run, oldest first.
struct Executor {
    queue: Mutex<Queue>,
    ready: Condvar,
}

#[derive(Default)]
struct Queue {
    lanes: VecDeque<Arc<dyn Runnable>>,
    /// A batch that holds the background model is running.
    model_busy: bool,
}

/// The executor, its threads started on first use. As many threads as cores (at least two,
/// so that a batch holding the model never stops the others): the work is arithmetic, and
/// more threads would only share the same cores.
fn executor() -> &'static Executor {
    static EXECUTOR: OnceLock<&'static Executor> = OnceLock::new();
    EXECUTOR.get_or_init(|| {
        let executor: &'static Executor =
            Box::leak(Box::new(Executor { queue: Mutex::new(Queue::default()), ready: Condvar::new() }));
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).max(2);
        for i in 0..threads {
            let spawned =
                std::thread::Builder::new().name(format!("strata-background-{i}")).spawn(move || executor.serve());
            // Without threads no background work would ever run; the first must start.
            if let Err(e) = spawned {
                assert!(i > 0, "starting the background executor's first thread: {e}");
            }
        }
        executor
    })
}

impl Executor {
    fn push(&self, lane: Arc<dyn Runnable>) {
        lock(&self.queue).lanes.push_back(lane);
        self.ready.notify_one();
    }

    /// One thread's loop: the oldest ready lane it may run (one that holds the model only
    /// when no other does), one batch, again.
    fn serve(&self) {
        loop {
            let (lane, model) = {
                let mut q = lock(&self.queue);
                loop {
                    let busy = q.model_busy;
                    if let Some(i) = q.lanes.iter().position(|l| !(busy && l.holds_the_model())) {
                        let lane = q.lanes.remove(i).expect("found above");
                        let model = lane.holds_the_model();
                        q.model_busy |= model;
                        break (lane, model);
                    }
                    q = self.ready.wait(q).unwrap_or_else(|p| p.into_inner());
                }
            };
            lane.run_batch();
            if model {
                lock(&self.queue).model_busy = false;
                // A lane skipped while the model was busy may run now, on any thread.
                self.ready.notify_all();
            }
        }
    }
}

/// One kind of background work for one memory (or the process's embedding queue).
pub(crate) struct Background<W: Work> {
    lane: Arc<Lane<W>>,
}

impl<W: Work> std::fmt::Debug for Background<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = lock(&self.lane.state);
        f.debug_struct("Background").field("sent", &s.sent).field("finished", &s.finished).finish()
    }
}

impl<W: Work> Background<W> {
    pub(crate) fn start(work: W) -> Background<W> {
        let holds_the_model = work.holds_the_model();
        let state = State {
            jobs: VecDeque::new(),
            work: Some(work),
            scheduled: false,
            sent: 0,
            finished: 0,
            done: Vec::new(),
            warnings: Vec::new(),
            stopped: false,
            closing: false,
        };
        Background { lane: Arc::new(Lane { state: Mutex::new(state), changed: Condvar::new(), holds_the_model }) }
    }

    pub(crate) fn submit(&self, job: W::Job) {
        let mut s = lock(&self.lane.state);
        if s.stopped || s.closing {
            return;
        }
        s.sent += 1;
        s.jobs.push_back(job);
        let queue = !s.scheduled;
        s.scheduled = true;
        drop(s);
        if queue {
            executor().push(self.lane.clone());
        }
    }

    /// Results finished since the last call, oldest first; each is handed over once.
    pub(crate) fn take_done(&self) -> Vec<W::Done> {
        std::mem::take(&mut lock(&self.lane.state).done)
    }

    pub(crate) fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.lane.state).warnings)
    }

    /// Jobs sent and not yet finished.
    pub(crate) fn pending(&self) -> usize {
        let s = lock(&self.lane.state);
        (s.sent - s.finished) as usize
    }

    /// Blocks until every job sent so far has finished (or the lane has stopped).
    pub(crate) fn settle(&self) {
        let blocked = |s: &mut State<W>| !s.stopped && s.finished < s.sent;
        drop(self.lane.changed.wait_while(lock(&self.lane.state), blocked).unwrap_or_else(|p| p.into_inner()));
    }
}

impl<W: Work> Drop for Background<W> {
    /// Jobs not started are left; a batch under way finishes its current job first (it is
    /// told through [`Outbox::closing`]), so that no work of this memory runs after it is gone.
    fn drop(&mut self) {
        let mut s = lock(&self.lane.state);
        s.closing = true;
        let left = s.jobs.len() as u64;
        s.jobs.clear();
        s.finished += left;
        let running = |s: &mut State<W>| s.work.is_none();
        drop(self.lane.changed.wait_while(s, running).unwrap_or_else(|p| p.into_inner()));
    }
}
