//! The memory's background work runs on one executor for the process: a thousand memories
//! open at once run no more threads than one, and closed they leave none behind. Its own test
//! binary, so that no other test's threads come and go while it counts.

use std::sync::Arc;

use strata::{Memory, MemoryConfig, Parts};
use strata_core::{Role, Turn};

/// Threads of this process (Linux's list of them).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").expect("/proc/self/task (Linux)").count()
}

fn memory(i: usize) -> Memory {
    let counter = Arc::new(strata_tokens::Tiktoken::o200k());
    let mut m = Memory::open(MemoryConfig::for_budget(format!("conv{i}"), 200), Parts::new(counter)).unwrap();
    // Work for both lanes: a ranking, and (past the budget) summaries.
    for k in 0..6 {
        let text = format!("Turn {k} of conversation {i}: the deploy script reads the token from the vault.");
        m.push(Turn::new(format!("t{k}"), Role::User, text)).unwrap();
    }
    m
}

#[test]
fn a_thousand_memories_run_on_the_executors_threads_and_leave_none_behind() {
    // The executor starts with the first memory's work.
    let mut first = memory(0);
    first.settle();
    drop(first);
    let before = threads();
    let mut open: Vec<Memory> = (1..=1000).map(memory).collect();
    let while_open = threads();
    for m in &mut open {
        m.settle();
    }
    assert!(open.iter().all(|m| m.pending() == 0));
    drop(open);
    let after = threads();
    assert_eq!((while_open, after), (before, before), "threads: {before} before, {while_open} with 1,000 open");
}
