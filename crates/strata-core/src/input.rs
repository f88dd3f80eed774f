//! An error caused by what the user gave, for every front end and the harness alike. Its
//! message names where the input is wrong (a flag, a file and line, a JSON field); the CLI
//! exits with status 2 on it, and the Python package raises `InputError`. Each library says
//! the same of its own errors (`is_bad_input` on those that can be either, the type alone on
//! those that are always the user's); [`blames_input`] judges the core's.

/// The user's input is wrong, and the message says where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// Whether `cause`, one error of a chain, is one of the core's that the user caused: a
/// [`BadInput`], a history that does not hold together, or a store refused as given. Front ends
/// walk an error's chain with this and their libraries' own judgements.
pub fn blames_input(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause.is::<BadInput>()
        || cause.is::<crate::HistoryError>()
        || cause.downcast_ref::<crate::StoreError>().is_some_and(crate::StoreError::is_bad_input)
}
