//! The baseline context strategies, reproducing the seed documents: `full`, `window`,
//! `recent-8-summary-12` and `summary-buffer`.
//!
//! Each is a named implementation of [`strata_core::Strategy`] configured by a plain struct
//! whose defaults are the seeds' numbers; users override them in a TOML or JSON file with one
//! table per strategy name (see [`StrategiesConfig`]). They share two mechanisms from
//! [`select`]: the pinned system prompt, and "the newest units that fit", which walks back from
//! the newest turn and keeps a tool call with its results or drops both.

mod full;
mod recent;
mod segments;
pub mod select;
mod summary_buffer;
mod window;

use std::sync::Arc;

use serde::Deserialize;
use strata_core::{Generator, Strategy};

pub use full::Full;
pub use recent::{RecentSummary, RecentSummaryConfig};
pub use segments::{Segments, SegmentsConfig};
pub use summary_buffer::{SummaryBuffer, SummaryBufferConfig};
pub use window::{Window, WindowConfig};

/// Every strategy this crate provides, by the name users select it with.
pub const NAMES: &[&str] = &["full", "window", "recent-8-summary-12", "summary-buffer", "segments"];

/// Settings for every strategy; each table is optional and defaults to the seed's numbers.
///
/// ```toml
/// [recent-8-summary-12]
/// recent = 10
///
/// [summary-buffer]
/// trigger = 0.9
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrategiesConfig {
    #[serde(default)]
    pub window: WindowConfig,
    #[serde(default, rename = "recent-8-summary-12")]
    pub recent_summary: RecentSummaryConfig,
    #[serde(default, rename = "summary-buffer")]
    pub summary_buffer: SummaryBufferConfig,
    /// Shared by `segments` and `segments-abstractive`.
    #[serde(default)]
    pub segments: SegmentsConfig,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
    #[error("unknown strategy `{name}`: expected one of {}, or segments-abstractive", NAMES.join(", "))]
    UnknownStrategy { name: String },
    #[error("strategy `{name}` needs a generator (a local model: pass --model)")]
    NeedsGenerator { name: String },
}

impl StrategiesConfig {
    /// Parses a config file's text; `file` names it in errors, and its extension picks TOML
    /// (`.toml`) or JSON (anything else).
    pub fn parse(file: &str, text: &str) -> Result<StrategiesConfig, ConfigError> {
        let parsed: StrategiesConfig = if file.ends_with(".toml") {
            toml::from_str(text)
                .map_err(|e| ConfigError::Parse { file: file.to_string(), message: e.message().to_string() })?
        } else {
            serde_json::from_str(text)
                .map_err(|e| ConfigError::Parse { file: file.to_string(), message: e.to_string() })?
        };
        parsed.validate().map_err(|message| ConfigError::Invalid { file: file.to_string(), message })?;
        Ok(parsed)
    }

    fn validate(&self) -> Result<(), String> {
        self.summary_buffer.validate()?;
        self.segments.validate()?;
        self.recent_summary.validate()
    }
}

/// The strategy a name selects. `generator` writes the summaries of strategies that need a
/// model (`summary-buffer`); without one they fall back as their seeds say.
pub fn build(
    name: &str,
    config: &StrategiesConfig,
    generator: Option<Arc<dyn Generator>>,
) -> Result<Box<dyn Strategy>, ConfigError> {
    Ok(match name {
        "full" => Box::new(Full),
        "window" => Box::new(Window::new(config.window.clone())),
        "recent-8-summary-12" => Box::new(RecentSummary::new(config.recent_summary.clone())),
        "summary-buffer" => Box::new(SummaryBuffer::new(config.summary_buffer.clone(), generator)),
        "segments" => Box::new(Segments::extractive(config.segments.clone())),
        "segments-abstractive" => match generator {
            Some(g) => Box::new(Segments::abstractive(config.segments.clone(), g)),
            None => return Err(ConfigError::NeedsGenerator { name: name.to_string() }),
        },
        _ => return Err(ConfigError::UnknownStrategy { name: name.to_string() }),
    })
}

#[cfg(test)]
mod tests;
