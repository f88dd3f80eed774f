//! Reads conversations from files: the Strata transcript format (JSON and JSONL), OpenAI
//! chat-message arrays, and LoCoMo's benchmark file.
//!
//! Loading is all or nothing. A file that breaks a rule is rejected whole with an error that
//! names the file and the line (for syntax errors and JSONL) or the transcript and turn id (for
//! everything found after parsing); nothing is half-loaded. Dataset quirks that the benchmark's
//! own pitfalls list says to tolerate (LoCoMo's malformed evidence ids) are skipped and counted
//! in [`Loaded::warnings`], never dropped silently.

pub mod datasets;
mod error;
pub mod locomo;
mod openai;
mod strata;
mod time;

use std::path::Path;

use strata_core::Conversation;

pub use error::{LoadError, LoadErrorKind};
pub use strata::{to_json, JsonlReader};
pub use time::{format_rfc3339, parse_rfc3339};

/// The input formats Strata reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// `strata.transcript/1`, one object per `.json` file or one per line of a `.jsonl` file.
    Strata,
    /// An array of OpenAI chat messages, or an object with a `messages` array.
    OpenAiMessages,
    /// LoCoMo's `locomo10.json`: every conversation becomes one transcript.
    Locomo,
}

impl InputFormat {
    pub fn parse(s: &str) -> Option<InputFormat> {
        Some(match s {
            "strata" => InputFormat::Strata,
            "messages" | "openai" => InputFormat::OpenAiMessages,
            "locomo" => InputFormat::Locomo,
            _ => return None,
        })
    }
}

/// What a file held.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub format: InputFormat,
    pub conversations: Vec<Conversation>,
    /// Dataset quirks that were skipped and counted, one line each, naming where they are.
    pub warnings: Vec<String>,
}

/// Loads every conversation in a file, detecting its format unless `format` says it.
pub fn load_path(path: &Path, format: Option<InputFormat>) -> Result<Loaded, LoadError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| LoadError::io(&file, &e))?;
    let jsonl = path.extension().is_some_and(|e| e == "jsonl");
    load_bytes(&file, &bytes, jsonl, format)
}

/// Loads from bytes already in memory; `file` is the name errors use.
pub fn load_bytes(file: &str, bytes: &[u8], jsonl: bool, format: Option<InputFormat>) -> Result<Loaded, LoadError> {
    let text = error::utf8(file, bytes)?;
    if jsonl {
        let mut conversations = Vec::new();
        for item in JsonlReader::from_str(file, text) {
            conversations.push(item?);
        }
        error::unique_ids(file, &conversations)?;
        return Ok(Loaded { format: InputFormat::Strata, conversations, warnings: Vec::new() });
    }
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| LoadError::syntax(file, None, &e))?;
    let format = match format {
        Some(f) => f,
        None => detect(&value).ok_or_else(|| {
            LoadError::new(
                file,
                LoadErrorKind::UnknownFormat,
                "cannot tell the format: expected a Strata transcript (an object with `turns`), \
                 an array of chat messages, or LoCoMo's list of conversations",
            )
        })?,
    };
    let stem = Path::new(file).file_stem().and_then(|s| s.to_str()).unwrap_or("conversation");
    let loaded = match format {
        InputFormat::Strata => {
            Loaded { format, conversations: vec![strata::from_str(file, None, text)?], warnings: Vec::new() }
        }
        InputFormat::OpenAiMessages => {
            Loaded { format, conversations: vec![openai::from_value(file, stem, value)?], warnings: Vec::new() }
        }
        InputFormat::Locomo => locomo::from_value(file, value)?,
    };
    error::unique_ids(file, &loaded.conversations)?;
    Ok(loaded)
}

/// Writes conversations where `load_path` reads them back: one Strata JSON object, or JSONL
/// (one conversation a line) when `path` ends in `.jsonl`. Written whole beside the target and
/// renamed over it, so a reader never sees half a file. Several conversations need `.jsonl`
/// (an `InvalidInput` error otherwise).
pub fn save_path(path: &Path, conversations: &[Conversation]) -> std::io::Result<()> {
    let jsonl = path.extension().is_some_and(|e| e == "jsonl");
    if !jsonl && conversations.len() != 1 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} conversations need a .jsonl file", conversations.len()),
        ));
    }
    let mut text = String::new();
    for c in conversations {
        text.push_str(&to_json(c));
        text.push('\n');
    }
    write_whole(path, &text)
}

/// Writes `text` to `path` whole: to `PATH.partial` first, then renamed over `path`.
pub fn write_whole(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

fn detect(value: &serde_json::Value) -> Option<InputFormat> {
    match value {
        serde_json::Value::Object(map) => {
            if map.contains_key("turns") || map.contains_key("format") {
                Some(InputFormat::Strata)
            } else if map.contains_key("messages") {
                Some(InputFormat::OpenAiMessages)
            } else {
                None
            }
        }
        serde_json::Value::Array(items) => match items.first() {
            None => Some(InputFormat::OpenAiMessages),
            Some(serde_json::Value::Object(first)) if first.contains_key("role") => Some(InputFormat::OpenAiMessages),
            Some(serde_json::Value::Object(first))
                if first.contains_key("conversation") && first.contains_key("qa") =>
            {
                Some(InputFormat::Locomo)
            }
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests;
