//! The memory's error: what a push, a context or recall can fail with, below every module
//! that returns it.

use strata_core::{EmbedError, HistoryError, StoreError};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
}

impl MemoryError {
    /// Whether the user caused it: a store refused as given, or a history that does not hold
    /// together (a turn id twice, time going backwards). An embedder that failed is not.
    pub fn is_bad_input(&self) -> bool {
        match self {
            MemoryError::Store(s) => s.is_bad_input(),
            MemoryError::History(_) => true,
            MemoryError::Embed(_) => false,
        }
    }
}
