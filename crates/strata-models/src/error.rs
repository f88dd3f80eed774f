//! Why a model could not be opened, told apart by whose fault it is: what the user passed or
//! fetched (exit status 2, HTTP 400, Python's `InputError`), or a model that failed while
//! running.

use std::path::PathBuf;

use strata_candle::EngineError;

use crate::table::Kind;

/// A model that could not be opened or used. Messages name the file and, for a pinned one,
/// the command that fetches it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error("{}: missing; run `cargo xtask fetch-models {model}` to fetch it", path.display())]
    Missing { path: PathBuf, model: &'static str },
    #[error("{}: {size} bytes where {expected} were expected, so the file is truncated or not the pinned one; run `cargo xtask fetch-models {model}` to fetch it again", path.display())]
    WrongSize { path: PathBuf, size: u64, expected: u64, model: &'static str },
    #[error("{}: sha256 {got} does not match the pinned {expected}; run `cargo xtask fetch-models {model}` to fetch it again", path.display())]
    WrongHash { path: PathBuf, got: String, expected: String, model: &'static str },
    #[error("no {kind} is called `{name}` (known: {known})")]
    Unknown { kind: Kind, name: String, known: String },
    /// A `URL#MODEL` that does not parse.
    #[error(transparent)]
    Endpoint(#[from] strata_http::SpecError),
    /// A file that does not load, or a model that failed while running.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The on-disk cache under the models folder could not be opened.
    #[error("{}: {message}", path.display())]
    Cache { path: PathBuf, message: String },
}

impl ModelError {
    /// Whether the user can fix it by what they pass (a name, a path, fetching the weights, a
    /// models folder that can be written), as opposed to a model that failed while running.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, ModelError::Engine(EngineError::Run { .. }))
    }
}
