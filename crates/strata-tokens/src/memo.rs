//! Counts remembered by text, so that a text counted again costs a lookup: a memory counts the
//! same sentences, turns and summaries at every context it builds (a profile of `cargo xtask
//! serve-load` had 43% of the server's time in the tokenizer), and a count is a pure function
//! of the text, so remembering it changes no result.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Text bytes a memo holds before it starts afresh: a bound on its memory, far above what one
/// conversation's texts take, so that a process serving many keeps the recent ones.
const CAPACITY_BYTES: usize = 32 << 20;

/// Texts shorter than this are counted afresh: a role name or a word costs less to count than
/// to look up and keep.
const MIN_BYTES: usize = 24;

/// Text bytes held by every memo of the process, for the server's `/metrics`: it grows to
/// `CAPACITY_BYTES` a tokenizer and falls when a memo starts afresh.
static HELD_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Text bytes the process's memos hold (their keys; the map adds about 40 bytes a text).
pub fn held_bytes() -> usize {
    HELD_BYTES.load(Ordering::Relaxed)
}

/// Token counts by text, for one tokenizer. Shared by every counter of that tokenizer in the
/// process.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    counts: HashMap<Box<str>, u32>,
    bytes: usize,
}

impl Memo {
    pub(crate) fn new() -> Memo {
        Memo::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Updates are a map insert and an addition: a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `text`'s count, from the memo or from `count` (called without the lock held, so that
    /// threads count different texts at once).
    pub(crate) fn count(&self, text: &str, count: impl FnOnce(&str) -> usize) -> usize {
        if text.len() < MIN_BYTES {
            return count(text);
        }
        if let Some(&n) = self.lock().counts.get(text) {
            return n as usize;
        }
        let n = count(text);
        let Ok(kept) = u32::try_from(n) else { return n };
        let mut s = self.lock();
        if s.bytes + text.len() > CAPACITY_BYTES {
            // Starting afresh is simpler than an eviction order, and a memo refills in one
            // context's worth of counting.
            s.counts.clear();
            HELD_BYTES.fetch_sub(s.bytes, Ordering::Relaxed);
            s.bytes = 0;
        }
        if s.counts.insert(text.into(), kept).is_none() {
            s.bytes += text.len();
            HELD_BYTES.fetch_add(text.len(), Ordering::Relaxed);
        }
        n
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().counts.len()
    }
}

impl Drop for Memo {
    fn drop(&mut self) {
        HELD_BYTES.fetch_sub(self.lock().bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn a_text_is_counted_once_and_short_ones_every_time() {
        let memo = Memo::new();
        let calls = AtomicUsize::new(0);
        let count = |t: &str| {
            calls.fetch_add(1, Ordering::Relaxed);
            t.split_whitespace().count()
        };
        let long = "the deployment moved to the eu-west cluster on Tuesday";
        assert_eq!(memo.count(long, count), 9);
        assert_eq!(memo.count(long, count), 9);
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        assert_eq!(memo.count("a b", count), 2);
        assert_eq!(memo.count("a b", count), 2);
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        assert_eq!(memo.len(), 1);
    }

    #[test]
    fn a_full_memo_starts_afresh_and_counts_stay_right() {
        let memo = Memo::new();
        let text = "x".repeat(CAPACITY_BYTES / 2 + 1);
        let other = "y".repeat(CAPACITY_BYTES / 2 + 1);
        assert_eq!(memo.count(&text, str::len), text.len());
        assert_eq!(memo.count(&other, str::len), other.len());
        // The second would have gone over the bound: only it is kept.
        assert_eq!(memo.len(), 1);
        assert_eq!(memo.count(&text, |_| 7), 7, "counted again, not remembered");
    }
}
