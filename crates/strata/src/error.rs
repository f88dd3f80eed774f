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
