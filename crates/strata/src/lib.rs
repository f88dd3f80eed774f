//! Strata's library API: a conversation memory that keeps every turn durably, decides tier by
//! tier what the model sees, and recalls what it needs.
//!
//! [`Memory`] is what a deployment embeds: `push` stores a turn (on disk before it returns),
//! `context` builds what to send within a budget, optionally for a question, `checkpoint`
//! asks the policy to compact now, `recall` searches the cold store. Summaries are made by a
//! background worker, so `context` never waits on a model: it uses the freshest finished
//! summaries, and new ones are swapped in only at turn boundaries (on `push`), so the context's
//! prefix stays the same between swaps and provider prompt caches stay valid.
//!
//! [`Tiered`] is the same machinery as an eval [`Strategy`](strata_core::Strategy).

mod memory;
mod phrases;
mod ranker;
mod recall;
mod reembed;
mod tiered;
mod worker;

pub use memory::{Clock, Layout, Memory, MemoryConfig, MemoryError, Parts};
pub use recall::RecallConfig;
pub use reembed::reembed;
pub use tiered::Tiered;

#[cfg(test)]
mod tests;
