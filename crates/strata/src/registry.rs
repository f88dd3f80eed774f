//! The one registry of every strategy: the names users select, the config file with one table
//! per strategy, and [`build`]. The CLI's `compress`, `eval` and `serve` and the Python package
//! all build strategies here, the tiered memory included, so a name means the same everywhere.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use strata_core::{Context, Embedder, Generator, History, Strategy, StrategyError};
use strata_strategies::select::whole_if_it_fits;
use strata_strategies::{
    Full, RecentSummary, RecentSummaryConfig, Segments, SegmentsConfig, Specific, SummaryBuffer, SummaryBufferConfig,
    Window, WindowConfig,
};

use crate::config::TieredConfig;
use crate::recall::Reranking;
use crate::tiered::Tiered;

/// Every strategy, by the name users select it with (`segments-abstractive` besides, which
/// needs a generator).
pub const NAMES: &[&str] =
    &["full", "window", "recent-8-summary-12", "summary-buffer", "segments", "specific", "tiered"];

/// Settings for every strategy; each table is optional and defaults to the seed's numbers.
///
/// ```toml
/// [recent-8-summary-12]
/// recent = 10
///
/// [tiered]
/// salient = 0.8
///
/// [tiered.salience]
/// redundancy = 0.3
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
    #[serde(default)]
    pub tiered: TieredConfig,
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

/// `[tiered]` keys that moved into `[tiered.salience]` when the tiered table stopped copying
/// the salience config's fields. A file that still has one is refused with its new place.
const MOVED_TO_SALIENCE: &[&str] =
    &["length_exponent", "redundancy", "dated", "min_words", "asides", "names", "rarity_exponent"];

/// `[tiered]` keys of experiments that did not hold out and were removed (docs/experiments.md
/// keeps their records).
const REMOVED: &[&str] = &["background", "clause_words", "shapes", "templates", "phrases", "notes"];

impl StrategiesConfig {
    /// Parses a config file's text; `file` names it in errors, and its extension picks TOML
    /// (`.toml`) or JSON (anything else).
    pub fn parse(file: &str, text: &str) -> Result<StrategiesConfig, ConfigError> {
        let parse_error = |message: String| ConfigError::Parse { file: file.to_string(), message };
        let toml_file = file.ends_with(".toml");
        // The tiered table's keys, read first so that a key from before the table was split
        // gets a message naming where it went rather than "unknown field".
        let tiered_keys: Vec<String> = if toml_file {
            let v: toml::Table = toml::from_str(text).map_err(|e| parse_error(e.message().to_string()))?;
            v.get("tiered").and_then(toml::Value::as_table).map(|t| t.keys().cloned().collect()).unwrap_or_default()
        } else {
            let v: serde_json::Value = serde_json::from_str(text).map_err(|e| parse_error(e.to_string()))?;
            v.get("tiered")
                .and_then(serde_json::Value::as_object)
                .map(|t| t.keys().cloned().collect())
                .unwrap_or_default()
        };
        for key in &tiered_keys {
            let message = if MOVED_TO_SALIENCE.contains(&key.as_str()) {
                format!("`[tiered] {key}` is now `[tiered.salience] {key}`")
            } else if REMOVED.contains(&key.as_str()) {
                format!("`[tiered] {key}` was removed: an experiment that did not hold out (see docs/experiments.md)")
            } else {
                continue;
            };
            return Err(ConfigError::Invalid { file: file.to_string(), message });
        }
        let parsed: StrategiesConfig = if toml_file {
            toml::from_str(text).map_err(|e| parse_error(e.message().to_string()))?
        } else {
            serde_json::from_str(text).map_err(|e| parse_error(e.to_string()))?
        };
        parsed.validate().map_err(|message| ConfigError::Invalid { file: file.to_string(), message })?;
        Ok(parsed)
    }

    /// The settings a strategy runs with, as its config-file table (defaults filled in), for
    /// `--explain`; `None` for a name without a table.
    pub fn settings(&self, strategy: &str) -> Option<String> {
        match strategy {
            "window" => table("window", &self.window),
            "recent-8-summary-12" => table("recent-8-summary-12", &self.recent_summary),
            "summary-buffer" => table("summary-buffer", &self.summary_buffer),
            "segments" | "segments-abstractive" => table("segments", &self.segments),
            "tiered" => table("tiered", &self.tiered),
            _ => None,
        }
    }

    fn validate(&self) -> Result<(), String> {
        self.summary_buffer.validate()?;
        self.segments.validate()?;
        self.tiered.validate()?;
        self.recent_summary.validate()
    }
}

/// `value` as the config file's table `name` (its own tables below it, as `[name.inner]`).
/// Plain structs of numbers and flags: serialising them cannot fail. An unset limit is left
/// out, as a file would leave it out.
fn table<T: Serialize>(name: &str, value: &T) -> Option<String> {
    if toml::to_string(value).ok()?.trim().is_empty() {
        return Some(format!("[{name}] (no settings)"));
    }
    let named = std::collections::BTreeMap::from([(name, value)]);
    Some(toml::to_string(&named).ok()?.trim_end().to_string())
}

/// Whether the strategy `name` reads an embedder (so a caller loads one only when it does).
pub fn embeds(name: &str) -> bool {
    name == "tiered"
}

/// The models strategies may use, each optional.
#[derive(Clone, Default)]
pub struct Models {
    /// Writes the summaries of strategies that need a model (`summary-buffer`,
    /// `segments-abstractive`, the tiered memory's); without one they fall back as their
    /// seeds say.
    pub generator: Option<Arc<dyn Generator>>,
    /// The tiered memory's (without one it recalls by words).
    pub embedder: Option<Arc<dyn Embedder>>,
    /// Reranks the tiered memory's recall candidates.
    pub reranker: Option<Arc<Reranking>>,
}

impl std::fmt::Debug for Models {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Models")
            .field("generator", &self.generator.as_ref().map(|g| g.model_id().to_string()))
            .field("embedder", &self.embedder.as_ref().map(|e| e.model_id().to_string()))
            .field("reranker", &self.reranker)
            .finish()
    }
}

/// The strategy a name selects, with the models it uses from `models`. Every bounded one sends
/// a history that fits its budget whole (see `WholeWhenItFits`).
pub fn build(name: &str, config: &StrategiesConfig, models: &Models) -> Result<Box<dyn Strategy>, ConfigError> {
    Ok(Box::new(WholeWhenItFits(built_in(name, config, models)?)))
}

/// A built-in strategy held to the rule that a history within the budget is the context: a
/// summary, a salient sentence or a recalled turn beside (or instead of) the turns themselves
/// would cost more and say less. Each strategy's own design starts where the history no
/// longer fits.
struct WholeWhenItFits(Box<dyn Strategy>);

impl std::fmt::Debug for WholeWhenItFits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("WholeWhenItFits").field(&self.0.name()).finish()
    }
}

impl Strategy for WholeWhenItFits {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn bounded(&self) -> bool {
        self.0.bounded()
    }

    fn question_aware(&self) -> bool {
        self.0.question_aware()
    }

    fn build(&self, history: &History, budget: usize, question: Option<&str>) -> Result<Context, StrategyError> {
        match self.0.bounded().then(|| whole_if_it_fits(self.0.name(), history, budget)).flatten() {
            Some(whole) => Ok(whole),
            None => self.0.build(history, budget, question),
        }
    }
}

fn built_in(name: &str, config: &StrategiesConfig, models: &Models) -> Result<Box<dyn Strategy>, ConfigError> {
    let Models { generator, embedder, reranker } = models.clone();
    Ok(match name {
        "full" => Box::new(Full),
        "window" => Box::new(Window::new(config.window.clone())),
        "recent-8-summary-12" => Box::new(RecentSummary::new(config.recent_summary.clone())),
        "summary-buffer" => Box::new(SummaryBuffer::new(config.summary_buffer.clone(), generator)),
        "segments" => Box::new(Segments::extractive(config.segments.clone())),
        "specific" => Box::new(Specific),
        "tiered" => Box::new(Tiered::with_config(embedder, generator, config.tiered.clone()).with_reranker(reranker)),
        "segments-abstractive" => match generator {
            Some(g) => Box::new(Segments::abstractive(config.segments.clone(), g)),
            None => return Err(ConfigError::NeedsGenerator { name: name.to_string() }),
        },
        _ => return Err(ConfigError::UnknownStrategy { name: name.to_string() }),
    })
}

#[cfg(test)]
mod tests;
