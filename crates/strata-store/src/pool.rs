//! Read connections kept for reuse, so that a read never takes the lock the one writer holds.
//!
//! Both backends read beside their writer: SQLite in WAL mode gives each read transaction the
//! last committed state while an append is under way, and PostgreSQL's readers never wait on
//! a writer. What used to serialise them was one connection per store, shared by every
//! conversation; a read now checks a connection out of this pool (opening one when none is
//! idle) and gives it back when done.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

use strata_core::StoreError;

/// Idle read connections; at most `keep` are kept, any more are closed when given back, and
/// so is one that `usable` says has failed (a server that went away).
pub(crate) struct Pool<C> {
    idle: Mutex<Vec<C>>,
    keep: usize,
    usable: fn(&C) -> bool,
}

impl<C> Pool<C> {
    pub(crate) fn new(keep: usize, usable: fn(&C) -> bool) -> Pool<C> {
        Pool { idle: Mutex::new(Vec::new()), keep, usable }
    }

    /// An idle connection, or a new one from `open`. The pool's lock is held only to pop
    /// one, never while a connection is opened or used.
    pub(crate) fn get(&self, open: impl FnOnce() -> Result<C, StoreError>) -> Result<Pooled<'_, C>, StoreError> {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match idle {
            Some(c) => c,
            None => open()?,
        };
        Ok(Pooled { pool: self, conn: Some(conn) })
    }

    #[cfg(test)]
    pub(crate) fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl<C> std::fmt::Debug for Pool<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("keep", &self.keep).finish_non_exhaustive()
    }
}

/// A connection checked out of a [`Pool`]; back to it when dropped.
pub(crate) struct Pooled<'a, C> {
    pool: &'a Pool<C>,
    conn: Option<C>,
}

impl<C> Deref for Pooled<'_, C> {
    type Target = C;
    fn deref(&self) -> &C {
        self.conn.as_ref().expect("present until dropped")
    }
}

impl<C> DerefMut for Pooled<'_, C> {
    fn deref_mut(&mut self) -> &mut C {
        self.conn.as_mut().expect("present until dropped")
    }
}

impl<C> Drop for Pooled<'_, C> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        if !(self.pool.usable)(&conn) {
            return;
        }
        let mut idle = self.pool.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < self.pool.keep {
            idle.push(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_at_most_its_number_and_never_a_failed_connection() {
        // A connection here is a number; odd ones have "failed".
        let pool: Pool<u32> = Pool::new(2, |c| c % 2 == 0);
        let mut opened = 0;
        let mut open = || {
            opened += 2;
            Ok(opened)
        };
        {
            let (a, b, c) = (pool.get(&mut open).unwrap(), pool.get(&mut open).unwrap(), pool.get(&mut open).unwrap());
            assert_eq!((*a, *b, *c), (2, 4, 6));
        }
        assert_eq!(pool.idle(), 2, "the third is closed");
        let mut reused = pool.get(|| unreachable!("an idle one is there")).unwrap();
        *reused += 1;
        drop(reused);
        assert_eq!(pool.idle(), 1, "a failed one is not given back");
    }
}
