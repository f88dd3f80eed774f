//! Inputs shared by Strata's benchmarks: deterministic synthetic conversations.

use strata_core::{Role, Turn};

const WORDS: &[&str] = &[
    "the",
    "deploy",
    "failed",
    "because",
    "config",
    "service",
    "billing",
    "we",
    "should",
    "use",
    "Kafka",
    "instead",
    "of",
    "queue",
    "latency",
    "is",
    "about",
    "42",
    "ms",
    "on",
    "staging",
    "and",
    "production",
    "let's",
    "check",
    "logs",
    "in",
    "/var/log/app.log",
    "database",
    "migration",
    "ran",
    "twice",
    "yesterday",
    "team",
    "decided",
    "to",
    "roll",
    "back",
    "version",
    "v2.3.1",
    "cache",
    "hit",
    "rate",
    "dropped",
    "after",
    "the",
    "change",
    "could",
    "you",
    "summarize",
    "options",
];

/// The `i`th turn of a synthetic user/assistant conversation: 20 to 60 words drawn from a
/// fixed vocabulary by a seeded generator, so every run measures the same text.
pub fn synthetic_turn(i: usize) -> Turn {
    let mut state = (i as u64)
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let len = 20 + next() % 41;
    let words: Vec<&str> = (0..len).map(|_| WORDS[next() % WORDS.len()]).collect();
    let role = if i.is_multiple_of(2) {
        Role::User
    } else {
        Role::Assistant
    };
    Turn::new(format!("t{i}"), role, words.join(" "))
}
