//! The catalog of strategies: one entry per strategy (its name, what it reads besides the
//! history, its help line, its settings table and how it is built), and the strategies a
//! program registers at run time (Python's `register_strategy`) beside them. The CLI's
//! `compress`, `eval` and `serve`, the harness and the Python package all list, describe and
//! build strategies here, the tiered memory included, so a name means the same everywhere.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

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

/// Whether a strategy reads a chat model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelUse {
    /// Never.
    None,
    /// When there is one; without it, it falls back as its design says.
    Optional,
    /// It cannot run without one.
    Required,
}

/// What a strategy reads besides the history: the models a caller loads for it, and only for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    pub embedder: bool,
    pub reranker: bool,
    pub generator: ModelUse,
}

impl Needs {
    /// A strategy that reads the history alone.
    pub const NOTHING: Needs = Needs { embedder: false, reranker: false, generator: ModelUse::None };
}

/// One strategy of the catalog.
pub struct Entry {
    /// The name users select it by.
    pub name: &'static str,
    /// One line for `--help` and the guide.
    pub about: &'static str,
    pub needs: Needs,
    /// Its table in the config file, for `--explain`: `None` for a strategy with no table.
    settings: fn(&StrategiesConfig) -> Option<String>,
    make: Make,
}

/// How an entry builds its strategy from the config file's tables and the models given.
type Make = fn(&StrategiesConfig, Models) -> Result<Box<dyn Strategy>, ConfigError>;

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry").field("name", &self.name).field("needs", &self.needs).finish()
    }
}

impl Entry {
    /// Whether a run compares it when no strategy is named: every strategy that can run
    /// without a model.
    pub fn by_default(&self) -> bool {
        self.needs.generator != ModelUse::Required
    }
}

/// The one table of built-in strategies, in the order help texts and default runs list them.
pub static STRATEGIES: &[Entry] = &[
    Entry {
        name: "full",
        about: "every turn verbatim, over the budget if need be: the reference nothing is lost against",
        needs: Needs::NOTHING,
        settings: |_| None,
        make: |_, _| Ok(Box::new(Full)),
    },
    Entry {
        name: "window",
        about: "the newest turns that fit",
        needs: Needs::NOTHING,
        settings: |c| table("window", &c.window),
        make: |c, _| Ok(Box::new(Window::new(c.window.clone()))),
    },
    Entry {
        name: "recent-8-summary-12",
        about: "the seed's memory: the last 8 interactions verbatim, a heuristic summary of the 12 before",
        needs: Needs::NOTHING,
        settings: |c| table("recent-8-summary-12", &c.recent_summary),
        make: |c, _| Ok(Box::new(RecentSummary::new(c.recent_summary.clone()))),
    },
    Entry {
        name: "summary-buffer",
        about: "the newest turns, and a running summary of what fell out (a model's, with --model)",
        needs: Needs { generator: ModelUse::Optional, ..Needs::NOTHING },
        settings: |c| table("summary-buffer", &c.summary_buffer),
        make: |c, m| Ok(Box::new(SummaryBuffer::new(c.summary_buffer.clone(), m.generator))),
    },
    Entry {
        name: "segments",
        about: "the seed's segments: the newest turns, the fact registry, extractive summaries of older segments",
        needs: Needs::NOTHING,
        settings: |c| table("segments", &c.segments),
        make: |c, _| Ok(Box::new(Segments::extractive(c.segments.clone()))),
    },
    Entry {
        name: "specific",
        about: "the conversation's most specific sentences (summed IDF over the square root of length)",
        needs: Needs::NOTHING,
        settings: |_| None,
        make: |_, _| Ok(Box::new(Specific)),
    },
    Entry {
        name: Tiered::NAME,
        about: "Strata's tiered memory: hot turns, summaries, salient sentences, and recall for a question",
        needs: Needs { embedder: true, reranker: true, generator: ModelUse::Optional },
        settings: |c| table(Tiered::NAME, &c.tiered),
        make: |c, m| {
            Ok(Box::new(Tiered::with_config(m.embedder, m.generator, c.tiered.clone()).with_reranker(m.reranker)))
        },
    },
    Entry {
        name: "segments-abstractive",
        about: "segments, with older segments summarised by a model (needs --model)",
        needs: Needs { generator: ModelUse::Required, ..Needs::NOTHING },
        settings: |c| table("segments", &c.segments),
        make: |c, m| match m.generator {
            Some(g) => Ok(Box::new(Segments::abstractive(c.segments.clone(), g))),
            None => Err(ConfigError::NeedsGenerator { name: "segments-abstractive".to_string() }),
        },
    },
];

/// The built-in strategy called `name`.
pub fn entry(name: &str) -> Option<&'static Entry> {
    STRATEGIES.iter().find(|e| e.name == name)
}

/// What the strategy `name` reads: a registered one reads the history alone.
pub fn needs(name: &str) -> Needs {
    entry(name).map_or(Needs::NOTHING, |e| e.needs)
}

/// The names a run compares when none are named: every built-in strategy that runs without a
/// model, in table order.
pub fn default_names() -> Vec<&'static str> {
    STRATEGIES.iter().filter(|e| e.by_default()).map(|e| e.name).collect()
}

/// `name: about` for every built-in strategy, one per line: for `--help`.
pub fn help() -> String {
    STRATEGIES.iter().map(|e| format!("{}: {}", e.name, e.about)).collect::<Vec<_>>().join("\n")
}

/// Strategies registered at run time, by name (Python's `register_strategy`).
static REGISTERED: RwLock<BTreeMap<String, Arc<dyn Strategy>>> = RwLock::new(BTreeMap::new());

/// Adds `strategy` to the catalog under its own name, replacing one registered before under
/// it. A built-in name, or one that a comma-separated list could not hold, is refused.
pub fn register(strategy: Arc<dyn Strategy>) -> Result<(), ConfigError> {
    let name = strategy.name().to_string();
    if entry(&name).is_some() {
        return Err(ConfigError::Register { name, message: "a built-in strategy; choose another name".into() });
    }
    if name.is_empty() || name.contains(',') || name.chars().any(char::is_whitespace) {
        return Err(ConfigError::Register { name, message: "a name needs no spaces or commas".into() });
    }
    REGISTERED.write().unwrap_or_else(|p| p.into_inner()).insert(name, strategy);
    Ok(())
}

/// The names registered so far, sorted.
pub fn registered() -> Vec<String> {
    REGISTERED.read().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect()
}

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
    #[error("unknown strategy `{name}`: expected one of {}", known_names())]
    UnknownStrategy { name: String },
    #[error("strategy `{name}` cannot be registered: {message}")]
    Register { name: String, message: String },
    #[error("strategy `{name}` needs a generator (a local model: pass --model)")]
    NeedsGenerator { name: String },
}

/// Every name the catalog knows, built-in then registered, for an error message.
fn known_names() -> String {
    let mut names: Vec<String> = STRATEGIES.iter().map(|e| e.name.to_string()).collect();
    names.extend(registered());
    names.join(", ")
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

    /// The settings the strategy `name` runs with, as its config-file table (defaults filled
    /// in), for `--explain`; `None` for a name without a table.
    pub fn settings(&self, name: &str) -> Option<String> {
        entry(name).and_then(|e| (e.settings)(self))
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

/// The strategy `name` selects: a built-in one with the models it reads from `models` (each
/// bounded one sends a history that fits its budget whole, see `WholeWhenItFits`), or one
/// registered at run time.
pub fn build(name: &str, config: &StrategiesConfig, models: &Models) -> Result<Arc<dyn Strategy>, ConfigError> {
    if let Some(s) = REGISTERED.read().unwrap_or_else(|p| p.into_inner()).get(name) {
        return Ok(s.clone());
    }
    Ok(Arc::new(WholeWhenItFits(built_in(name, config, models)?)))
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
    let entry = entry(name).ok_or_else(|| ConfigError::UnknownStrategy { name: name.to_string() })?;
    if entry.needs.generator == ModelUse::Required && models.generator.is_none() {
        return Err(ConfigError::NeedsGenerator { name: name.to_string() });
    }
    (entry.make)(config, models.clone())
}

#[cfg(test)]
mod tests;
