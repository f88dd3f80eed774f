//! `Memory::push` with 1k, 10k and 100k turns already pushed, without an embedder and with a
//! deterministic cheap one (so the vector paths run): the claim under test is that a push
//! costs the same however long the conversation (issue 16: at most 2x from 1k to 100k).
//!
//! A memory cannot be rolled back, so each measured push grows it; it is rebuilt (untimed)
//! once it has grown by a tenth, so every push measured at "n" sees between n and 1.1·n turns.
//! The store is in RAM: the file's sync per turn is the disk's cost, not the memory's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use strata::{Clock, Memory, MemoryConfig, Parts};
use strata_benches::{synthetic_turn, HashedWords};
use strata_core::{Embedder, Timestamp, TokenCounter, Turn};
use strata_tokens::Tiktoken;

/// The `i`th turn, three minutes after the one before (ages and pauses matter to the policy).
fn turn(i: usize) -> Turn {
    let mut t = synthetic_turn(i);
    t.timestamp = Some(Timestamp(1_700_000_000 + 180 * i as i64));
    t
}

fn memory_at(n: usize, counter: &Arc<dyn TokenCounter>, embedder: Option<Arc<dyn Embedder>>) -> Memory {
    let mut config = MemoryConfig::for_budget("bench", 2000);
    config.clock = Clock::LastTurn;
    let parts = Parts { counter: counter.clone(), embedder, generator: None, embed_queue: None, reranker: None };
    let mut m = Memory::open(config, parts).expect("an in-memory store opens");
    let turns: Vec<Turn> = (0..n).map(turn).collect();
    for chunk in turns.chunks(1000) {
        m.push_all(chunk).expect("synthetic turns are valid");
    }
    m
}

fn push(c: &mut Criterion) {
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::o200k());
    let mut group = c.benchmark_group("memory_push");
    group.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    let embedders: [(&str, Option<Arc<dyn Embedder>>); 2] =
        [("no-embedder", None), ("hashed-embedder", Some(Arc::new(HashedWords)))];
    for (name, embedder) in embedders {
        for n in [1_000usize, 10_000, 100_000] {
            let mut memory = memory_at(n, &counter, embedder.clone());
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, &n| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        if memory.len() >= n + n / 10 {
                            memory = memory_at(n, &counter, embedder.clone());
                        }
                        let t = turn(memory.len());
                        let start = Instant::now();
                        memory.push(t).expect("a valid turn");
                        total += start.elapsed();
                    }
                    total
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, push);
criterion_main!(benches);
