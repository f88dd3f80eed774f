//! The baseline context strategies, reproducing the seed documents: `full`, `window`,
//! `recent-8-summary-12` and `summary-buffer`; `segments`; and `specific`, the prototype the
//! tiered memory's question-agnostic context is measured against.
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
mod specific;
mod summary_buffer;
mod window;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use strata_core::{Generator, Strategy};

pub use full::Full;
pub use recent::{RecentSummary, RecentSummaryConfig};
pub use segments::{Segments, SegmentsConfig};
pub use specific::Specific;
pub use summary_buffer::{SummaryBuffer, SummaryBufferConfig};
pub use window::{Window, WindowConfig};

/// Every strategy this crate provides, by the name users select it with.
pub const NAMES: &[&str] = &["full", "window", "recent-8-summary-12", "summary-buffer", "segments", "specific"];

/// Settings for every strategy; each table is optional and defaults to the seed's numbers.
///
/// ```toml
/// [recent-8-summary-12]
/// recent = 10
///
/// [summary-buffer]
/// trigger = 0.9
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
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
    /// The tiered memory's context layout (the strategy itself lives in the `strata` crate).
    #[serde(default)]
    pub tiered: TieredConfig,
}

/// The tiered memory's context knobs, as the config file's `[tiered]` table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TieredConfig {
    /// Share of the budget, without a question, for the most specific sentences of turns not
    /// shown verbatim; summaries and hot turns share the rest, and what they leave comes back.
    pub salient: f64,
    /// The same share of what the recall share leaves, with a question (recalled turns take
    /// what the rest does not use).
    pub salient_with_question: f64,
    /// A sentence's information over its length in words to this power.
    pub length_exponent: f64,
    /// How much of a sentence's score the information already kept takes away (0 to 1).
    pub redundancy: f64,
    /// A date line per day and relative dates resolved in the salient sentences.
    pub dated: bool,
    /// Sentences with fewer content words are never salient.
    pub min_words: usize,
    /// How much a word's rarity outside the conversation (from the tokenizer's vocabulary
    /// ranks) weighs its within-conversation rarity: 0 ignores it, 1 multiplies by it.
    pub background: f64,
    /// Sentences of at least this many words compete clause by clause, so filler clauses of a
    /// kept sentence can be left out (0: whole sentences).
    pub clause_words: usize,
    /// A bracketed aside ending a sentence ("[shares a photo: ...]") competes on its own.
    pub asides: bool,
    /// How much more a word written as a name (capitalised where a sentence does not start)
    /// weighs: its IDF times `1 + names * share`, the share of its uses written so.
    pub names: f64,
    /// Each word's IDF to this power before a sentence sums them: above 1, a word used once
    /// outweighs several merely uncommon ones.
    pub rarity_exponent: f64,
    /// How much a word holding a digit is weighed by the rarity of its shape (digits as `0`,
    /// letters as `a`: "57.7" is `0.0`) rather than its own: 0 uses its own IDF, 1 its shape's.
    pub shapes: f64,
    /// How much a sentence made by a template (its skeleton of words as `a`, numbers as their
    /// shapes and punctuation, shared with other sentences: a table row, a log line) loses: its
    /// score times `(idf(skeleton) / ln(sentences))^templates`. 0 ignores skeletons.
    pub templates: f64,
    /// With a question: a burst (one speaker's messages in a row within a session, at most
    /// this many tokens; a longer run becomes several) is ranked as one turn and recalled
    /// whole. 0 treats every message alone.
    pub burst_tokens: usize,
    /// With a question and an embedder: the weight of a third ranking beside the question's
    /// and its content words', by phrase vectors (every turn's runs of up to three content
    /// words, embedded once each at store time; a turn scores its best phrase against the
    /// question's content words). 0 embeds no phrases.
    pub phrases: f64,
    /// With a question, an embedder and a notes model: the weight of a ranking by notes the
    /// model wrote on each closed session at store time (what it tells about each speaker),
    /// each linked to the turns holding its words; a turn scores its best note against the
    /// question. 0 writes no notes.
    pub notes: f64,
}

impl Default for TieredConfig {
    fn default() -> TieredConfig {
        let s = strata_summarize::SalienceConfig::default();
        TieredConfig {
            salient: 0.9,
            salient_with_question: 0.25,
            length_exponent: s.length_exponent,
            redundancy: s.redundancy,
            dated: s.dated,
            min_words: s.min_words,
            background: s.background,
            clause_words: s.clause_words,
            asides: s.asides,
            names: s.names,
            rarity_exponent: s.rarity_exponent,
            shapes: s.shapes,
            templates: s.templates,
            burst_tokens: 200,
            phrases: 0.0,
            notes: 0.0,
        }
    }
}

impl TieredConfig {
    pub fn salience(&self) -> strata_summarize::SalienceConfig {
        strata_summarize::SalienceConfig {
            length_exponent: self.length_exponent,
            redundancy: self.redundancy,
            dated: self.dated,
            min_words: self.min_words,
            background: self.background,
            clause_words: self.clause_words,
            asides: self.asides,
            names: self.names,
            rarity_exponent: self.rarity_exponent,
            shapes: self.shapes,
            templates: self.templates,
        }
    }

    fn validate(&self) -> Result<(), String> {
        for (name, v) in [("salient", self.salient), ("salient_with_question", self.salient_with_question)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("tiered: `{name}` must be between 0 and 1, not {v}"));
            }
        }
        for (name, v) in [("redundancy", self.redundancy), ("background", self.background), ("shapes", self.shapes)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("tiered: `{name}` must be between 0 and 1, not {v}"));
            }
        }
        if !(0.0..=8.0).contains(&self.templates) {
            return Err(format!("tiered: `templates` must be between 0 and 8, not {}", self.templates));
        }
        if !(0.0..=4.0).contains(&self.phrases) {
            return Err(format!("tiered: `phrases` must be between 0 and 4, not {}", self.phrases));
        }
        if !(0.0..=4.0).contains(&self.notes) {
            return Err(format!("tiered: `notes` must be between 0 and 4, not {}", self.notes));
        }
        if !(0.0..=2.0).contains(&self.length_exponent) {
            return Err(format!("tiered: `length_exponent` must be between 0 and 2, not {}", self.length_exponent));
        }
        if !(0.25..=8.0).contains(&self.rarity_exponent) {
            return Err(format!("tiered: `rarity_exponent` must be between 0.25 and 8, not {}", self.rarity_exponent));
        }
        if !(0.0..=100.0).contains(&self.names) {
            return Err(format!("tiered: `names` must be between 0 and 100, not {}", self.names));
        }
        Ok(())
    }
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

    /// The settings a strategy runs with, as its config-file table (defaults filled in), for
    /// `--explain`; `None` for a name without a table. `tiered` is the tiered memory.
    pub fn settings(&self, strategy: &str) -> Option<String> {
        let (table, body) = match strategy {
            "window" => ("window", toml::to_string(&self.window)),
            "recent-8-summary-12" => ("recent-8-summary-12", toml::to_string(&self.recent_summary)),
            "summary-buffer" => ("summary-buffer", toml::to_string(&self.summary_buffer)),
            "segments" | "segments-abstractive" => ("segments", toml::to_string(&self.segments)),
            "tiered" => ("tiered", toml::to_string(&self.tiered)),
            _ => return None,
        };
        // Plain structs of numbers and flags: serialising them cannot fail. An unset limit
        // is left out, as a file would leave it out.
        let body = body.ok()?;
        let body = body.trim_end();
        Some(if body.is_empty() { format!("[{table}] (no settings)") } else { format!("[{table}]\n{body}") })
    }

    fn validate(&self) -> Result<(), String> {
        self.summary_buffer.validate()?;
        self.segments.validate()?;
        self.tiered.validate()?;
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
        "specific" => Box::new(Specific),
        "segments-abstractive" => match generator {
            Some(g) => Box::new(Segments::abstractive(config.segments.clone(), g)),
            None => return Err(ConfigError::NeedsGenerator { name: name.to_string() }),
        },
        _ => return Err(ConfigError::UnknownStrategy { name: name.to_string() }),
    })
}

#[cfg(test)]
mod tests;
