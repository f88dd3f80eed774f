//! The baseline context strategies, reproducing the seed documents: `full`, `window`,
//! `recent-8-summary-12` and `summary-buffer`; `segments`; and `specific`, the prototype the
//! tiered memory's question-agnostic context is measured against.
//!
//! Each is a named implementation of [`strata_core::Strategy`] configured by a plain struct
//! whose defaults are the seeds' numbers; users select them by name and override them in a
//! TOML or JSON file through the one registry of every strategy, `strata::registry` (which
//! adds the tiered memory). They share two mechanisms from
//! [`select`]: the pinned system prompt, and "the newest units that fit", which walks back from
//! the newest turn and keeps a tool call with its results or drops both.

mod full;
mod recent;
mod segments;
pub mod select;
mod specific;
mod summary_buffer;
mod window;

pub use full::Full;
pub use recent::{RecentSummary, RecentSummaryConfig};
pub use segments::{Segments, SegmentsConfig};
pub use specific::Specific;
pub use summary_buffer::{SummaryBuffer, SummaryBufferConfig};
pub use window::{Window, WindowConfig};
