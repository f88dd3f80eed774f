//! Arguments shared by the commands that read a transcript, and loading it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use strata::StrategiesConfig;
use strata_core::{Conversation, TokenCounter};
use strata_transcript::InputFormat;

use crate::BadInput;

#[derive(clap::Args, Debug)]
pub(crate) struct Input {
    /// A transcript: Strata JSON or JSONL, OpenAI chat messages, or LoCoMo's file.
    pub(crate) file: PathBuf,
    /// Only this conversation of a file that holds several.
    #[arg(long, value_name = "ID")]
    pub(crate) conversation: Option<String>,
    /// Read the file as this format instead of detecting it: strata, messages, locomo.
    #[arg(long, value_name = "FORMAT")]
    pub(crate) input_format: Option<String>,
    /// Count tokens with o200k, cl100k, estimate, or a tokenizer.json path.
    #[arg(long, default_value = "o200k", value_name = "NAME|PATH")]
    pub(crate) tokenizer: String,
}

/// A token budget given on the command line: a positive whole number. Clap reports a refusal
/// with the flag's name and exits with status 2; a negative number reaches this parser (the
/// flags set `allow_negative_numbers`) rather than clap's advice to write `-- -5`.
pub(crate) fn budget(text: &str) -> Result<usize, String> {
    match text.trim().parse::<i64>() {
        Ok(n) if n > 0 => Ok(n as usize),
        Ok(n) => Err(format!("a budget is a positive number of tokens, not {n}")),
        Err(_) => Err(format!("expected a positive number of tokens, not `{text}`")),
    }
}

pub(crate) struct Loaded {
    pub(crate) conversations: Vec<Conversation>,
    pub(crate) warnings: Vec<String>,
    pub(crate) counter: Arc<dyn TokenCounter>,
}

pub(crate) fn load(input: &Input) -> Result<Loaded> {
    let format = match &input.input_format {
        None => None,
        Some(f) => Some(
            InputFormat::parse(f)
                .ok_or_else(|| BadInput(format!("unknown input format `{f}`: expected strata, messages or locomo")))?,
        ),
    };
    let counter = strata_tokens::from_spec(&input.tokenizer)?;
    let loaded = strata_transcript::load_path(&input.file, format)?;
    let mut conversations = loaded.conversations;
    if let Some(id) = &input.conversation {
        conversations.retain(|c| &c.id == id);
        if conversations.is_empty() {
            return Err(BadInput(format!("{}: no conversation with id `{id}`", input.file.display())).into());
        }
    }
    // Keep the warnings about the conversations chosen; they name their transcript.
    let warnings = loaded
        .warnings
        .into_iter()
        .filter(|w| conversations.iter().any(|c| w.contains(&format!(" transcript {}: ", c.id))))
        .collect();
    Ok(Loaded { conversations, warnings, counter })
}

/// The strategy settings of `--config FILE` (TOML or JSON), or the seeds' defaults.
/// The values `--strategy` takes: every strategy of the catalog, with its help line.
pub(crate) fn strategies() -> clap::builder::PossibleValuesParser {
    let values = strata::catalog::STRATEGIES.iter().map(|e| clap::builder::PossibleValue::new(e.name).help(e.about));
    clap::builder::PossibleValuesParser::new(values)
}

pub(crate) fn strategy_config(path: Option<&Path>) -> Result<StrategiesConfig> {
    let Some(path) = path else { return Ok(StrategiesConfig::default()) };
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| BadInput(format!("{file}: {e}")))?;
    Ok(StrategiesConfig::parse(&file, &text)?)
}
