//! Text helpers that more than one layer reads: a turn split into the sentences summaries keep
//! or drop (code blocks and stack traces whole), its words, the stopword list, calendar dates
//! and what relative time expressions meant when they were said. No IO, no models: the
//! lowest crate that the store and the summarizers can share.

pub mod dates;
pub mod hash;
pub mod sentences;

pub use dates::{date_line, relative_note, resolve_relative, Date, Resolved};
pub use hash::{hex, sha256_hex};
pub use sentences::{
    alnum_words, is_stopword, split_sentences, split_turns, value_words, words, Sentence, Specificity,
};
