//! Strata's vocabulary: the types every other crate speaks and the seam traits between them.
//!
//! The key design choice is that this crate holds *data and contracts only*. A [`Turn`] is what
//! was said, a [`History`] is a conversation with its token counts cached per turn, a
//! [`Context`] is what a [`Strategy`] decided to send to the model. The seams to the heavy parts
//! ([`TokenCounter`], [`Embedder`], [`Generator`], [`Strategy`]) are traits here so that feature
//! crates depend on this small crate rather than on each other, and so that tests can plug in
//! fakes; the store's trait lives with its two implementations in strata-store, and what it
//! speaks ([`RecallQuery`], [`Hit`], [`StoreError`]) lives here. Nothing here reads a clock, a file or a model.

mod context;
mod history;
mod input;
mod seams;
mod turn;

pub use context::{Block, BlockKind, Context, Message};
pub use history::{History, HistoryError, Unit};
pub use input::{blames_input, BadInput};
pub use seams::{
    plain_chat_content, ChatFormat, ChatMessage, EmbedError, Embedder, GenerateError, GenerateRequest, Generation,
    Generator, Hit, RecallQuery, RerankError, Reranker, StoreError, Strategy, StrategyError, TokenCounter,
};
pub use turn::{
    message_name, Conversation, ConversationError, Participant, Probe, Role, Segment, Summary, SummaryLevel, Tier,
    Timestamp, ToolCall, Turn,
};

#[cfg(test)]
mod tests;
