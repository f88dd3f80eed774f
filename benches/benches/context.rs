//! `Memory::context` with a question on an open memory of 2,000, 50,000 and 100,000 turns
//! (LoCoMo's turns cycled, as `cargo xtask long-transcript` writes them; no embedder; budget
//! 2,000): p50, p95 and the worst of LoCoMo's first questions, asked on the settled memory
//! (after a warm-up pass), then each right after a push of one more turn (what a server does
//! per request: nothing computed for the last turn is reused). What grows with the
//! conversation's length is what this shows.
//!
//! Not criterion: one context is milliseconds and the memory minutes to build, and the claim
//! (issue 35: at most 10 ms p50 at 100,000 turns) is about the spread, worst case included.
//! `STRATA_DATA` names the datasets folder (default `../shared/datasets` beside the checkout);
//! `STRATA_CONTEXT_SIZES` (comma-separated) overrides the sizes.

// A benchmark's report is its output.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use strata::{Clock, Memory, MemoryConfig, Parts};
use strata_core::{Role, Timestamp, TokenCounter, Turn};
use strata_tokens::Tiktoken;

const BUDGET: usize = 2000;
const QUESTIONS: usize = 30;

fn main() {
    let data = std::env::var_os("STRATA_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/datasets"));
    let path = data.join("locomo/locomo10.json");
    let loaded = strata_transcript::load_path(&path, Some(strata_transcript::InputFormat::Locomo))
        .unwrap_or_else(|e| panic!("{}: {e} (set STRATA_DATA)", path.display()));
    let source: Vec<&str> = loaded.conversations.iter().flat_map(|c| &c.turns).map(|t| t.content.as_str()).collect();
    let questions: Vec<&str> =
        loaded.conversations.iter().flat_map(|c| &c.probes).map(|p| p.question.as_str()).take(QUESTIONS).collect();
    let sizes: Vec<usize> = std::env::var("STRATA_CONTEXT_SIZES")
        .ok()
        .map(|s| s.split(',').map(|n| n.trim().parse().expect("a number of turns")).collect())
        .unwrap_or_else(|| vec![2_000, 50_000, 100_000]);
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::o200k());
    println!("context latency, budget {BUDGET}, {} questions, no embedder", questions.len());
    for n in sizes {
        let mut config = MemoryConfig::for_budget("bench", BUDGET);
        config.clock = Clock::LastTurn;
        let parts =
            Parts { counter: counter.clone(), embedder: None, generator: None, embed_queue: None, reranker: None };
        let mut memory = Memory::open(config, parts).expect("an in-memory store opens");
        // As `cargo xtask long-transcript` writes them: roles alternating, three minutes apart.
        let turns: Vec<Turn> = (0..n)
            .map(|i| {
                let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
                let mut t = Turn::new(format!("t{i}"), role, source[i % source.len()]);
                t.timestamp = Some(Timestamp(1_672_531_200 + 180 * i as i64));
                t
            })
            .collect();
        let start = Instant::now();
        for chunk in turns.chunks(1000) {
            memory.push_all(chunk).expect("LoCoMo's turns are valid");
        }
        memory.settle();
        let built = start.elapsed().as_secs_f64();
        // One pass to warm the store's indexes, then the timed pass.
        for q in &questions {
            memory.context(BUDGET, Some(q)).expect("a context");
        }
        let time = |memory: &Memory, q: &str| {
            let start = Instant::now();
            let ctx = memory.context(BUDGET, Some(q)).expect("a context");
            assert!(ctx.total_tokens() <= BUDGET);
            start.elapsed().as_secs_f64() * 1e3
        };
        let settled: Vec<f64> = questions.iter().map(|q| time(&memory, q)).collect();
        let pushed: Vec<f64> = questions
            .iter()
            .enumerate()
            .map(|(k, q)| {
                let i = n + k;
                let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
                let mut t = Turn::new(format!("t{i}"), role, source[i % source.len()]);
                t.timestamp = Some(Timestamp(1_672_531_200 + 180 * i as i64));
                memory.push(t).expect("a valid turn");
                time(&memory, q)
            })
            .collect();
        println!("{n:>7} turns (memory built in {built:.0} s):");
        for (what, mut ms) in [("settled", settled), ("after a push", pushed)] {
            ms.sort_by(f64::total_cmp);
            let at = |p: f64| ms[((ms.len() - 1) as f64 * p).round() as usize];
            println!("  {what:>12}: p50 {:.2} ms, p95 {:.2} ms, worst {:.2} ms", at(0.5), at(0.95), ms[ms.len() - 1]);
        }
    }
}
