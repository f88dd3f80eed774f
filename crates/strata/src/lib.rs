//! Strata's library API: a conversation memory that keeps every turn durably, decides tier by
//! tier what the model sees, and recalls what it needs.
//!
//! [`Memory`] is what a deployment embeds: `push` stores a turn (on disk before it returns),
//! `context` builds what to send within a budget, optionally for a question, `checkpoint`
//! asks the policy to compact now, `recall` searches the cold store. `Memory` is the writer:
//! at each turn boundary it publishes a [`Snapshot`], and `context` and `recall` are plain
//! reads of one, so a server builds contexts without holding the writer. Summaries and
//! sentence rankings are made in the background, so `context` never waits on a model: it
//! uses the freshest finished ones, swapped in only at turn boundaries (on `push`), so the
//! context's prefix stays the same between swaps and provider prompt caches stay valid.
//!
//! [`catalog`] lists every strategy, the tiered memory included, for every front end.
//!
//! [`Tiered`] is the same machinery as an eval [`Strategy`](strata_core::Strategy).

mod background;
pub mod catalog;
mod config;
mod embedding;
mod error;
mod memory;
mod ranker;
mod recall;
mod reembed;
mod tiered;
mod worker;

pub use catalog::{ConfigError, StrategiesConfig};
pub use config::{Clock, Layout, MemoryConfig, RecallConfig, TieredConfig};
pub use embedding::EmbedQueue;
pub use error::MemoryError;
pub use memory::{Memory, Parts, Snapshot};
pub use recall::{question_texts, RerankCounts, Reranking};
pub use reembed::reembed;
pub use tiered::Tiered;

/// Runs background model work (summaries by a model) on a pool of threads of its own,
/// one call at a time for every memory of the process. Why a pool: a model's calls into rayon would otherwise go
/// to the caller's pool, whose threads may all be blocked waiting for that very work
/// (`Memory::settle` inside a parallel evaluation). Why one at a time: a pool thread waiting
/// inside a model's parallel loop steals queued jobs, and a second call would then wait on
/// the model's lock held further down the same thread's stack.
fn in_background<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let pool =
        POOL.get_or_init(|| rayon::ThreadPoolBuilder::new().thread_name(|i| format!("strata-model-{i}")).build().ok());
    match pool {
        Some(pool) => pool.install(f),
        // No threads to be had: the caller's pool, as before.
        None => f(),
    }
}

#[cfg(test)]
mod tests;
