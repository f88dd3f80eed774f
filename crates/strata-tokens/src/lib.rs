//! Exact token counts behind [`strata_core::TokenCounter`].
//!
//! Budgets are only meaningful if they are counted with the tokenizer of the model that will
//! read the context, so the shipped counters are exact: OpenAI's `o200k_base` and
//! `cl100k_base` encodings (their rank files are bundled by `tiktoken-rs`, so this works
//! offline) and any Hugging Face `tokenizer.json`. [`Estimate`] is a fast approximation for
//! callers that know they do not need exactness; its error is measured in the tests.
//!
//! Chat framing (per-message overhead, names, tool calls) is added by the trait's provided
//! methods, so every counter frames messages the same way.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use strata_core::TokenCounter;
use tiktoken_rs::CoreBPE;

mod memo;

pub use memo::held_bytes as memo_bytes;
use memo::Memo;

/// One of the bundled OpenAI encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// gpt-4o, gpt-4.1, o-series.
    O200kBase,
    /// gpt-4, gpt-3.5-turbo.
    Cl100kBase,
}

/// Counts with a bundled tiktoken encoding.
pub struct Tiktoken {
    encoding: Encoding,
    bpe: &'static CoreBPE,
    /// The encoding's counts so far, one memo per encoding for the process.
    memo: &'static Memo,
}

impl std::fmt::Debug for Tiktoken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiktoken").field("encoding", &self.encoding).finish()
    }
}

impl Tiktoken {
    pub fn new(encoding: Encoding) -> Tiktoken {
        // The singletons parse the bundled rank files once per process.
        static O200K: OnceLock<Memo> = OnceLock::new();
        static CL100K: OnceLock<Memo> = OnceLock::new();
        let (bpe, memo) = match encoding {
            Encoding::O200kBase => (tiktoken_rs::o200k_base_singleton(), O200K.get_or_init(Memo::new)),
            Encoding::Cl100kBase => (tiktoken_rs::cl100k_base_singleton(), CL100K.get_or_init(Memo::new)),
        };
        Tiktoken { encoding, bpe, memo }
    }

    pub fn o200k() -> Tiktoken {
        Tiktoken::new(Encoding::O200kBase)
    }

    pub fn cl100k() -> Tiktoken {
        Tiktoken::new(Encoding::Cl100kBase)
    }
}

impl TokenCounter for Tiktoken {
    fn name(&self) -> &str {
        match self.encoding {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    fn count(&self, text: &str) -> usize {
        // `encode_ordinary` treats strings such as "<|endoftext|>" as text, which is what chat
        // APIs do with message content. A text is counted line by line where the encoding
        // cannot merge across the line break (see [`lines`]), so that a block rebuilt from
        // lines counted before (a memory's salient sentences, its summaries) costs lookups.
        lines(text).map(|line| self.memo.count(line, |t| self.bpe.encode_ordinary(t).len())).sum()
    }
}

/// `text` cut after each line break that the next character starts a new pre-token at, so that
/// the pieces' counts sum to the whole's. In both bundled encodings a pre-token holds a line
/// break only in a run of whitespace or line breaks, or after punctuation (`[\r\n/]*` in
/// o200k, `[\r\n]*` in cl100k), and none begins with one; so the pre-token holding a break
/// ends with the run of breaks when a letter or digit follows, and byte-pair merges never
/// cross a pre-token.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut cut = rest.len();
        for (i, _) in rest.match_indices('\n') {
            if rest[i + 1..].chars().next().is_some_and(char::is_alphanumeric) {
                cut = i + 1;
                break;
            }
        }
        let (line, after) = rest.split_at(cut);
        rest = after;
        Some(line)
    })
}

/// Counts with a Hugging Face `tokenizer.json`, without the model's special tokens.
pub struct HfTokenizer {
    name: String,
    tokenizer: tokenizers::Tokenizer,
    memo: Memo,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfTokenizer").field("name", &self.name).finish()
    }
}

impl HfTokenizer {
    pub fn from_file(path: &Path) -> Result<HfTokenizer, TokenizerError> {
        let tokenizer = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| TokenizerError::Load { path: path.to_path_buf(), message: e.to_string() })?;
        Ok(HfTokenizer { name: format!("hf:{}", path.display()), tokenizer, memo: Memo::new() })
    }
}

impl TokenCounter for HfTokenizer {
    fn name(&self) -> &str {
        &self.name
    }

    fn count(&self, text: &str) -> usize {
        self.memo.count(text, |t| match self.tokenizer.encode_fast(t, false) {
            Ok(enc) => enc.len(),
            // Tokenizers only fail on inputs their normaliser cannot handle; counting the
            // bytes over-estimates, which keeps a budget safe rather than silently blowing it.
            Err(_) => t.len(),
        })
    }
}

/// A fast estimate of o200k token counts that needs no vocabulary.
///
/// The rule: every run of ASCII letters costs one token per 6 letters (rounded up),
/// every run of digits one token per 3 digits (BPE vocabularies hold numbers up to three
/// digits), every other non-space ASCII character one token, and every non-ASCII character
/// one token (CJK, emoji and accented letters are rarely merged with their neighbours).
/// Whitespace is free, as BPE attaches a leading space to the following word. On the LoCoMo
/// conversations it is within a few percent of `o200k_base` in total (the unit test pins the
/// bound); on single strings it can be off by much more, so budgets meant to be hard should
/// use an exact counter.
#[derive(Debug, Clone, Copy, Default)]
pub struct Estimate;

impl TokenCounter for Estimate {
    fn name(&self) -> &str {
        "estimate"
    }

    fn count(&self, text: &str) -> usize {
        let mut n = 0usize;
        let mut letters = 0usize;
        let mut digits = 0usize;
        let flush = |letters: &mut usize, digits: &mut usize, n: &mut usize| {
            *n += letters.div_ceil(6) + digits.div_ceil(3);
            *letters = 0;
            *digits = 0;
        };
        for c in text.chars() {
            if c.is_ascii_alphabetic() {
                if digits > 0 {
                    flush(&mut letters, &mut digits, &mut n);
                }
                letters += 1;
            } else if c.is_ascii_digit() {
                if letters > 0 {
                    flush(&mut letters, &mut digits, &mut n);
                }
                digits += 1;
            } else {
                flush(&mut letters, &mut digits, &mut n);
                if !c.is_whitespace() {
                    n += 1;
                }
            }
        }
        flush(&mut letters, &mut digits, &mut n);
        n
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerError {
    #[error("{}: cannot load tokenizer: {message}", path.display())]
    Load { path: PathBuf, message: String },
    #[error("unknown tokenizer `{spec}`: use o200k, cl100k, estimate, or the path of a tokenizer.json")]
    Unknown { spec: String },
}

/// The counter a command-line `--tokenizer` value names: `o200k` (or `o200k_base`), `cl100k`
/// (or `cl100k_base`), `estimate`, or a path to a Hugging Face `tokenizer.json`.
pub fn from_spec(spec: &str) -> Result<Arc<dyn TokenCounter>, TokenizerError> {
    Ok(match spec {
        "o200k" | "o200k_base" => Arc::new(Tiktoken::o200k()),
        "cl100k" | "cl100k_base" => Arc::new(Tiktoken::cl100k()),
        "estimate" => Arc::new(Estimate),
        path if path.ends_with(".json") || Path::new(path).exists() => {
            Arc::new(HfTokenizer::from_file(Path::new(path))?)
        }
        _ => return Err(TokenizerError::Unknown { spec: spec.to_string() }),
    })
}

#[cfg(test)]
mod tests;
