//! Load errors that say where the problem is, and the checks shared by every format.

use std::fmt;

use strata_core::Conversation;

/// What went wrong, for callers (and tests) that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadErrorKind {
    Io,
    InvalidUtf8,
    /// Not JSON, or JSON cut short.
    Syntax,
    /// JSON of the wrong shape: a missing or mistyped field.
    Schema,
    /// Well-formed, but breaks a rule of the format (duplicate ids, decreasing time, ...).
    Invalid,
    UnknownFormat,
}

/// A file that could not be loaded, with the place: `file[:line[:column]]: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    pub kind: LoadErrorKind,
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// Names the transcript and turn where they are known.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for LoadError {}

impl LoadError {
    pub(crate) fn new(file: &str, kind: LoadErrorKind, message: impl Into<String>) -> LoadError {
        LoadError { kind, file: file.to_string(), line: None, column: None, message: message.into() }
    }

    pub(crate) fn at_line(mut self, line: Option<usize>) -> LoadError {
        self.line = line;
        self
    }

    pub(crate) fn io(file: &str, e: &std::io::Error) -> LoadError {
        LoadError::new(file, LoadErrorKind::Io, e.to_string())
    }

    /// An error reading `file`.
    pub fn from_io(file: &str, e: &std::io::Error) -> LoadError {
        LoadError::io(file, e)
    }

    /// A serde_json error; `line` overrides its line for JSONL, where each line is parsed alone.
    pub(crate) fn syntax(file: &str, line: Option<usize>, e: &serde_json::Error) -> LoadError {
        let kind = match e.classify() {
            serde_json::error::Category::Data => LoadErrorKind::Schema,
            _ => LoadErrorKind::Syntax,
        };
        let message = match e.classify() {
            serde_json::error::Category::Eof => "unexpected end of file: the JSON is truncated".to_string(),
            _ => strip_position(&e.to_string()),
        };
        LoadError {
            kind,
            file: file.to_string(),
            line: line.or(Some(e.line())),
            column: if line.is_some() || e.line() == 0 { None } else { Some(e.column()) },
            message,
        }
    }
}

/// serde_json appends " at line L column C" to its messages; the error prints the position in
/// front instead, like a compiler.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// The text of a file, or an error naming the line of the first byte that is not UTF-8.
pub(crate) fn utf8<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, LoadError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = good.len() - good.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
        LoadError {
            kind: LoadErrorKind::InvalidUtf8,
            file: file.to_string(),
            line: Some(line),
            column: Some(column),
            message: format!("invalid UTF-8 at byte {}", e.valid_up_to()),
        }
    })
}

pub(crate) fn unique_ids(file: &str, conversations: &[Conversation]) -> Result<(), LoadError> {
    let mut seen = std::collections::HashSet::new();
    for c in conversations {
        if !seen.insert(c.id.as_str()) {
            return Err(LoadError::new(
                file,
                LoadErrorKind::Invalid,
                format!("transcript {}: duplicate transcript id", c.id),
            ));
        }
    }
    Ok(())
}
