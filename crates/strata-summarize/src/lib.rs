//! Summaries that keep the facts, with no IO: models come in through `strata-core`'s seams.
//!
//! - [`registry`]: the fact and entity registry (identifiers, numbers with units, money,
//!   dates, paths, commands, URLs, decisions with reasons, preferences, names), each with its
//!   source turn, superseded rather than deleted, rendered compactly, searchable.
//! - [`extractive`]: sentence selection by the seed's importance rules, centrality and MMR, to
//!   a target ratio, with task profiles; kept text is verbatim with its turn id.
//! - [`keep`]: the keep-set check a summary must pass before it replaces turns.
//! - [`abstractive`]: summaries written by a [`strata_core::Generator`], checked, with the
//!   extractive summary as the fallback, and folding for hierarchical summaries.

pub mod abstractive;
pub mod extractive;
pub mod keep;
pub mod registry;
pub mod salience;

pub use abstractive::{request, runs, summarize, summarize_folded, Outcome, SummaryConfig, RUN_TOKENS};
pub use extractive::{Extract, ExtractiveConfig, Kept, Profile};
pub use keep::{check, Verdict};
pub use registry::{extract, Fact, FactKind, Registry, Span};
pub use salience::{Ranking, Salience, SalienceConfig, Salient, SALIENT_HEADING};

#[cfg(test)]
mod tests;
