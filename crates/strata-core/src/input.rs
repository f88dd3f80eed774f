//! An error caused by what the user gave, for every front end and the harness alike. Its
//! message names where the input is wrong (a flag, a file and line, a JSON field); the CLI
//! exits with status 2 on it, and the Python package raises `InputError`.

/// The user's input is wrong, and the message says where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);
