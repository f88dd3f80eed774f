//! State shared between a memory and one of its background threads (compaction, salience,
//! notes): a mutex that outlives a panicking holder, and a condition variable rung whenever the
//! state moves, so that `settle` can wait for the thread.

use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Debug, Default)]
pub(crate) struct Shared<S> {
    state: Mutex<S>,
    changed: Condvar,
}

impl<S> Shared<S> {
    /// The state. A thread that panicked while holding it left it consistent enough: every
    /// update is a few assignments, and the panics caught are the models', outside the lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, S> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks while `blocked` holds, re-checking at every [`Shared::notify`].
    pub(crate) fn wait_while(&self, blocked: impl FnMut(&mut S) -> bool) -> MutexGuard<'_, S> {
        self.changed.wait_while(self.lock(), blocked).unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn notify(&self) {
        self.changed.notify_all();
    }
}
