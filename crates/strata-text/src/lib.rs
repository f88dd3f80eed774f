//! Text helpers that more than one layer reads: a turn split into the sentences summaries keep
//! or drop (code blocks and stack traces whole), its words, the stopword list, calendar dates
//! and what relative time expressions meant when they were said. No IO, no models: the
//! lowest crate that the store and the summarizers can share.

pub mod dates;
pub mod sentences;

pub use dates::{resolve_relative, Date, Resolved};
pub use sentences::{is_stopword, split, split_turns, words, Sentence, Specificity};
