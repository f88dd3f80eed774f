//! The seam traits between Strata's parts: token counting, embedding, generation, storage and
//! context strategies.
//!
//! Each trait is object safe and `Send + Sync`, so that callers hold `&dyn Trait` or
//! `Arc<dyn Trait>` and never learn which backend sits behind it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Context, History, Role, Timestamp, ToolCall, Turn};

/// The per-message framing a chat model adds around each message's text.
///
/// These are the numbers of OpenAI's published counting recipe for the gpt-4 and gpt-4o
/// families: every message costs `per_message` tokens of framing plus its role and content,
/// a `name` costs `per_name` more, and the reply is primed with `reply_priming` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatFormat {
    pub per_message: u32,
    pub per_name: u32,
    pub reply_priming: u32,
}

impl ChatFormat {
    pub const OPENAI: ChatFormat = ChatFormat { per_message: 3, per_name: 1, reply_priming: 3 };
}

/// Counts tokens exactly as one tokenizer would.
pub trait TokenCounter: Send + Sync {
    /// A stable name such as `o200k_base`; recorded in results so numbers can be compared.
    fn name(&self) -> &str;

    /// Tokens in plain text, with special-token strings treated as ordinary text (as chat APIs
    /// treat message content).
    fn count(&self, text: &str) -> usize;

    fn chat_format(&self) -> ChatFormat {
        ChatFormat::OPENAI
    }

    /// Tokens one chat message costs, framing included.
    ///
    /// Every field that is sent is counted: role, name, content, a tool result's call id, and
    /// each tool call's id, function name and arguments.
    fn count_message(
        &self,
        role: Role,
        name: Option<&str>,
        content: &str,
        tool_call_id: Option<&str>,
        tool_calls: &[ToolCall],
    ) -> usize {
        let format = self.chat_format();
        let mut n = format.per_message as usize + self.count(role.as_str()) + self.count(content);
        if let Some(name) = name {
            n += format.per_name as usize + self.count(name);
        }
        if let Some(id) = tool_call_id {
            n += self.count(id);
        }
        for call in tool_calls {
            n += self.count(&call.id) + self.count(&call.name) + self.count(&call.arguments);
        }
        n
    }

    /// Tokens a turn costs when sent verbatim as one message.
    fn count_turn(&self, turn: &Turn) -> usize {
        let name = turn.speaker.as_deref().and_then(crate::message_name);
        let tool_call_id = if turn.role == Role::Tool { turn.tool_call_id.as_deref() } else { None };
        self.count_message(turn.role, name.as_deref(), &turn.content, tool_call_id, &turn.tool_calls)
    }
}

/// Turns text into fixed-size vectors (unit length, so a dot product is a cosine).
pub trait Embedder: Send + Sync {
    /// Identifies the model (and its revision) so caches never mix vectors of two models.
    fn model_id(&self) -> &str;
    fn dim(&self) -> usize;
    /// One vector per text, in the order given: texts to be found (turns, sentences).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// One vector per text, for texts that search (questions). Models trained with task
    /// prefixes (nomic-embed: `search_query: ` against `search_document: `) embed the two
    /// sides differently; a symmetric model embeds both alike, as this default does.
    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(texts)
    }
    /// One vector per text, for grouping texts by topic (the segmenter): nomic-embed reads
    /// `clustering: ` there; a model without task prefixes embeds as [`Embedder::embed`] does.
    fn embed_clustering(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(texts)
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    #[error("embedding model {model}: {message}")]
    Backend { model: String, message: String },
}

/// Scores passages against a query, reading the two together (a cross-encoder): finer than
/// comparing their vectors, and far costlier, so it reorders a short list of candidates.
pub trait Reranker: Send + Sync {
    /// Identifies the model, so caches never mix scores of two models.
    fn model_id(&self) -> &str;
    /// One relevance score per passage, in the order given; higher is more relevant. Scores
    /// are logits: comparable across calls of one model, not probabilities.
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, RerankError>;
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RerankError {
    #[error("reranking model {model}: {message}")]
    Backend { model: String, message: String },
}

/// One message of a prompt for a [`Generator`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

/// A message's text as a model that reads plain chat (no tool fields) is given it: the
/// content, then each tool call written out on a line of its own. The server renders tool
/// calls this way for a local model, and that model's token counter counts them this way, so
/// that what is counted is what is sent.
pub fn plain_chat_content<'a>(content: &'a str, tool_calls: &[crate::ToolCall]) -> std::borrow::Cow<'a, str> {
    if tool_calls.is_empty() {
        return std::borrow::Cow::Borrowed(content);
    }
    let mut text = content.to_string();
    for c in tool_calls {
        text.push_str(&format!("\n[tool call {} {}({})]", c.id, c.name, c.arguments));
    }
    std::borrow::Cow::Owned(text)
}

/// What to generate: a chat prompt with limits. Decoding is greedy, so the same request gives
/// the same text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateRequest {
    pub messages: Vec<ChatMessage>,
    pub max_tokens: usize,
    /// Give up (with [`GenerateError::Timeout`]) after this long.
    pub deadline: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    pub text: String,
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    /// Prompt tokens the model did not run again because its cache held them from an earlier
    /// prompt that began the same way (0 where the backend does not say).
    pub reused_tokens: usize,
}

/// Writes text from a prompt: a local model, a server, or a fake in tests.
pub trait Generator: Send + Sync {
    fn model_id(&self) -> &str;
    fn generate(&self, request: &GenerateRequest) -> Result<Generation, GenerateError>;

    /// As [`Generator::generate`], handing each piece of the reply to `on_text` as soon as it
    /// is decided (a chat user feels the first token's wait, not the last's); the pieces
    /// joined are the reply's text. By default the whole reply is one piece, at the end.
    fn generate_streaming(
        &self,
        request: &GenerateRequest,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<Generation, GenerateError> {
        let g = self.generate(request)?;
        on_text(&g.text);
        Ok(g)
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    #[error("generator {model}: no answer within {after:?}")]
    Timeout { model: String, after: Duration },
    #[error("generator {model}: {message}")]
    Backend { model: String, message: String },
}

/// A search over one conversation's stored turns.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallQuery {
    pub text: String,
    pub k: usize,
    /// The query's embedding, for stores that score by vector similarity as well.
    pub embedding: Option<Vec<f32>>,
    /// Only turns whose timestamp lies in `[from, to]`.
    pub time_range: Option<(Timestamp, Timestamp)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub turn: Turn,
    pub score: f32,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("store {location}: {message}")]
    Backend { location: String, message: String },
    /// The disk (or the database server's) has no room: the write failed whole and nothing
    /// of it is read back; the same write succeeds once there is room again.
    #[error("store {location}: the disk is full ({message}); nothing of the failed write was kept")]
    Full { location: String, message: String },
    /// The database server cannot be reached (it restarted, or the network failed): nothing
    /// of the failed call was kept; the next call connects again.
    #[error("store {location}: the database server cannot be reached ({message}); try again")]
    Unreachable { location: String, message: String },
    /// The file or its folder cannot be written (a read-only file system or file).
    #[error("store {location}: cannot be written ({message}); give a writable path")]
    ReadOnly { location: String, message: String },
    /// The file is not a Strata store (another program's database, or not a database at all);
    /// it is left untouched.
    #[error("store {location}: {message}; the file was left untouched")]
    Foreign { location: String, message: String },
    /// The file is a Strata store whose contents fail SQLite's integrity check.
    #[error("store {location}: corrupt database: {message}; the file was left untouched")]
    Corrupt { location: String, message: String },
    /// Written by a newer Strata; opening it could lose what that version stores.
    #[error(
        "store {location}: schema version {found} is newer than this build supports ({supported}); upgrade strata"
    )]
    NewerSchema { location: String, found: i64, supported: i64 },
    /// The caller asked for something the store cannot do, such as appending a turn id twice.
    #[error("store {location}: {message}")]
    Invalid { location: String, message: String },
    /// The store's vectors were written by another embedding model: searching them with this
    /// one's vectors would rank by noise.
    #[error(
        "store {location}: its vectors were written by {stored}, not {given}; open it with that embedder, or re-embed it (`strata reembed --db {location} --embedder ...`)"
    )]
    OtherEmbedder { location: String, stored: String, given: String },
}

impl StoreError {
    /// Whether the store was refused as the user gave it (not a store, corrupt, too new, the
    /// wrong embedder, an impossible request), as opposed to one that failed while working.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, StoreError::Backend { .. } | StoreError::Full { .. } | StoreError::Unreachable { .. })
    }

    /// Whether the store cannot take writes for now but will once the disk has room or its
    /// server is back: a server answers 503, and the client may send the same request again.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Full { .. } | StoreError::Unreachable { .. })
    }
}

/// Decides what of a history goes into the context under a token budget.
pub trait Strategy: Send + Sync {
    /// The name users select it by, such as `window`.
    fn name(&self) -> &str;

    /// Whether the context it builds stays within the budget. Only the `full` upper bound
    /// says no: it sends everything, whatever the budget.
    fn bounded(&self) -> bool {
        true
    }

    /// Whether `build` uses the question. Strategies that do not are scored in question-aware
    /// mode exactly as in question-agnostic mode.
    fn question_aware(&self) -> bool {
        false
    }

    /// Builds the context for the history as it stands. `question` is the question about to
    /// be asked, for strategies that can use it (question-aware mode); others ignore it.
    fn build(&self, history: &History, budget: usize, question: Option<&str>) -> Result<Context, StrategyError>;
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StrategyError {
    #[error("strategy {strategy}: {message}")]
    Failed { strategy: String, message: String },
}
