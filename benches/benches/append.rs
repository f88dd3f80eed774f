//! Appending one turn and rebuilding a `window` context, at 100 to 100k turns of history.
//!
//! The claim under test: per-turn token counts are cached and `window` walks back only as far
//! as the budget reaches, so the cost of an append plus rebuild does not grow with history.
//! Each iteration pushes a turn, builds the context, and rolls the history back, so every
//! iteration sees the same length.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use strata_benches::synthetic_turn;
use strata_core::{History, Strategy, TokenCounter};
use strata_strategies::{Window, WindowConfig};
use strata_tokens::Tiktoken;

fn append_and_rebuild(c: &mut Criterion) {
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::o200k());
    let window = Window::new(WindowConfig::default());
    let mut group = c.benchmark_group("append_window_2000");
    for n in [100usize, 1_000, 10_000, 100_000] {
        let mut history = History::new("bench", counter.clone());
        for i in 0..n {
            history.push(synthetic_turn(i)).unwrap();
        }
        // The same text at every length, so only the history differs.
        let next = strata_core::Turn { id: "appended".into(), ..synthetic_turn(7) };
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter(|| {
                history.push(next.clone()).unwrap();
                let ctx = window.build(&history, 2000, None).unwrap();
                // The checksum: a real context, within budget, ending with the new turn.
                assert!(ctx.total_tokens() <= 2000 && ctx.blocks.len() > 10);
                assert_eq!(ctx.blocks.last().unwrap().source_ids[0], next.id);
                history.truncate(n);
                ctx.total_tokens()
            });
        });
    }
    group.finish();
}

criterion_group!(benches, append_and_rebuild);
criterion_main!(benches);
