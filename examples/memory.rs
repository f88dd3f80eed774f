//! The README's library quick start as a program that compiles with every `cargo test`: a
//! memory on a SQLite file, a turn pushed, a context for a question and a recall.
//!
//! Run it with `cargo run --release -p strata --example memory` (after `cargo xtask
//! fetch-models`, for MiniLM).

#![allow(clippy::print_stdout)]

use std::sync::Arc;

use strata::{Memory, MemoryConfig, Parts};
use strata_core::{Role, Turn};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Models are found by --models-dir, $STRATA_MODELS, ./models, then the checkout's models/.
    let minilm = strata_models::embedder("minilm", &strata_models::dir(None))?;
    let mut config = MemoryConfig::for_budget("support-chat-42", 4000); // half an 8k model's window
    config.path = Some(std::env::temp_dir().join("strata-example-memory.db")); // SQLite (WAL)
                                                                               // Every model is optional: a generator writes abstractive summaries, a reranker reorders
                                                                               // recall's candidates, and a server shares one strata::EmbedQueue between its memories.
    let parts = Parts { embedder: Some(minilm), ..Parts::new(Arc::new(strata_tokens::Tiktoken::o200k())) };
    let mut memory = Memory::open(config, parts)?;
    let id = format!("m{}", memory.len());
    memory.push(Turn::new(id, Role::User, "We settled on port 8443 for the admin API."))?; // durable
    let ctx = memory.context(4000, Some("which port did we pick?"))?; // blocks: kind, turn ids, tokens
    for block in &ctx.blocks {
        println!("{:?} {:?} {} tokens", block.kind, block.source_ids, block.tokens);
    }
    for hit in memory.recall("admin port", 3)? {
        println!("{:.3} {}: {}", hit.score, hit.turn.id, hit.turn.content); // BM25 and embeddings, fused
    }
    let snapshot = memory.snapshot(); // a plain read, without the writer
    println!("{} turns", snapshot.history().len());
    Ok(())
}
