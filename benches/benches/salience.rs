//! The question-agnostic salience pass against the registry it replaced, on the same 1,000
//! turns of the committed probe set: building the statistics turn by turn, ranking every
//! sentence (what the memory's background thread does after a push), packing a ranking into a
//! 2,000-token block (what `context()` does), and both at once (`select`).
//!
//! The reference is `Registry::from_turns` and `Registry::render` into the same allowance, in
//! the same run, so the numbers are read as ratios. Each iteration asserts what it built
//! (a block within the allowance that quotes turns), so it cannot measure nothing.

use criterion::{criterion_group, criterion_main, Criterion};
use strata_core::{Role, TokenCounter, Turn};
use strata_summarize::{Registry, Salience, SalienceConfig};
use strata_tokens::Tiktoken;

/// The first 1,000 turns of the committed probe set (its conversations one after another).
fn turns() -> Vec<Turn> {
    let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/probes/probes.jsonl"));
    let loaded = strata_transcript::load_path(path, None).expect("the committed probe set");
    let mut out = Vec::new();
    for c in loaded.conversations {
        for t in c.turns {
            if out.len() == 1000 {
                return out;
            }
            out.push(Turn { id: format!("t{}", out.len() + 1), ..t });
        }
    }
    out
}

fn salience(c: &mut Criterion) {
    let turns = turns();
    let counter = Tiktoken::o200k();
    let config = SalienceConfig::default();
    let none = |_: usize, _: &str| None;
    let mut group = c.benchmark_group("agnostic_1000_turns");
    group.sample_size(20);
    group.bench_function("salience_add_turns", |b| {
        b.iter(|| {
            let mut s = Salience::new();
            for (i, t) in turns.iter().enumerate() {
                s.add_turn(i, t);
            }
            s
        })
    });
    group.bench_function("registry_add_turns", |b| b.iter(|| Registry::from_turns(&turns)));
    let mut s = Salience::new();
    for (i, t) in turns.iter().enumerate() {
        s.add_turn(i, t);
    }
    let registry = Registry::from_turns(&turns);
    group.bench_function("salience_rank", |b| {
        b.iter(|| {
            let r = s.rank(0..turns.len(), &counter, &config);
            assert!(r.len() > 100);
            r.len()
        })
    });
    let ranking = s.rank(0..turns.len(), &counter, &config);
    group.bench_function("salience_pack_2000", |b| {
        b.iter(|| {
            let got = ranking.pack(&turns, &|_| true, 2000, &counter, &config, &none).expect("a block");
            assert!(counter.count_message(Role::System, None, &got.text, None, &[]) <= 2000 && got.turn_ids.len() > 10);
            got.turn_ids.len()
        })
    });
    group.bench_function("salience_select_2000", |b| {
        b.iter(|| {
            let got = s.select(&turns, 0..turns.len(), 2000, &counter, &config, &none).expect("a block");
            assert!(counter.count_message(Role::System, None, &got.text, None, &[]) <= 2000 && got.turn_ids.len() > 10);
            got.turn_ids.len()
        })
    });
    group.bench_function("registry_render_2000", |b| {
        b.iter(|| {
            let (text, ids) = registry.render(2000, &counter).expect("a block");
            assert!(counter.count_message(Role::System, None, &text, None, &[]) <= 2000 && ids.len() > 10);
            ids.len()
        })
    });
    group.finish();
}

criterion_group!(benches, salience);
criterion_main!(benches);
