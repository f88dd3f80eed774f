//! `Store`: the cold tier as the memory, the server and the CLI use it (turns, vectors, tiers,
//! summaries, the fused ranking), one trait that SQLite and PostgreSQL both implement.

use strata_core::{Hit, RecallQuery, StoreError, Tier, Turn};

use crate::search::{Ranked, TurnVectors};

/// Where turns live in full. Every method is scoped to one conversation id; a store never
/// returns another conversation's turns.
pub trait Store: Send + Sync {
    /// Stores a turn durably, without vectors; when this returns `Ok`, the turn survives a
    /// crash.
    fn append(&self, conversation: &str, turn: &Turn) -> Result<(), StoreError> {
        self.append_with(conversation, turn, None).map(|_| ())
    }
    /// All turns of a conversation, in the order they were appended.
    fn turns(&self, conversation: &str) -> Result<Vec<Turn>, StoreError>;
    /// The conversation's turns for `query`, best first, with their fused scores.
    fn search(&self, conversation: &str, query: &RecallQuery) -> Result<Vec<Hit>, StoreError>;
    /// Where the store is, for messages (never a password).
    fn location(&self) -> &str;
    /// Stores a turn and its vectors in one transaction; returns its position.
    fn append_with(&self, conversation: &str, turn: &Turn, vectors: Option<TurnVectors<'_>>)
        -> Result<u64, StoreError>;
    /// Adds (or replaces) the vectors of stored turns, named by id, in one transaction: for
    /// turns stored before their vectors were computed (a server embeds in the background).
    /// A turn id the conversation does not hold is refused, and nothing is written.
    fn set_vectors(&self, conversation: &str, batch: &[(&str, TurnVectors<'_>)]) -> Result<(), StoreError>;
    /// Refuses ([`StoreError::OtherEmbedder`]) a model other than the one whose vectors the
    /// store holds; binds the store to `model` when it holds none.
    fn bind_embedder(&self, model: &str, dim: usize) -> Result<(), StoreError>;
    /// The embedding model the store is bound to, and its vectors' length.
    fn embedder(&self) -> Result<Option<(String, usize)>, StoreError>;
    /// The stored conversations' ids, sorted.
    fn conversations(&self) -> Result<Vec<String>, StoreError>;
    /// How many turns a conversation has stored.
    fn len(&self, conversation: &str) -> Result<u64, StoreError>;
    /// Each turn's whole-text vector in order, as [`crate::as_stored`] gives it (empty for a
    /// turn stored without one).
    fn whole_vectors(&self, conversation: &str) -> Result<Vec<Vec<f32>>, StoreError>;
    fn put_summary(&self, conversation: &str, summary: &StoredSummary) -> Result<(), StoreError>;
    /// A conversation's summaries, oldest span first.
    fn summaries(&self, conversation: &str) -> Result<Vec<StoredSummary>, StoreError>;
    /// Records the tiers of the turns at positions `from..from + tiers.len()`.
    fn set_tiers(&self, conversation: &str, from: u64, tiers: &[Tier]) -> Result<(), StoreError>;
    /// The recorded tier of every turn, in order; turns never planned are hot.
    fn tiers(&self, conversation: &str) -> Result<Vec<Tier>, StoreError>;
    /// The conversation's turns ranked for `query`, lexical and dense rankings fused.
    fn search_ranked(&self, conversation: &str, query: &RecallQuery) -> Result<Vec<Ranked>, StoreError>;
}

/// Whether a store already bound to `stored` is bound to `model`: `Ok(true)` when it is,
/// `Ok(false)` when it is bound to none, [`StoreError::OtherEmbedder`] when to another.
pub(crate) fn bound_already(stored: Option<String>, model: &str, location: &str) -> Result<bool, StoreError> {
    match stored {
        Some(stored) if stored == model => Ok(true),
        Some(stored) => {
            Err(StoreError::OtherEmbedder { location: location.to_string(), stored, given: model.to_string() })
        }
        None => Ok(false),
    }
}

/// A summary kept in the store: the text, the span of turns it stands for, and its sources.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSummary {
    /// `segment`, `arc` or `narrative`.
    pub level: String,
    /// Sequence numbers (0-based positions in the conversation) of the first and last turn.
    pub first_seq: u64,
    pub last_seq: u64,
    /// The generator's model id, or `extractive`.
    pub model: String,
    pub text: String,
    /// Turn ids the summary stands for.
    pub sources: Vec<String>,
}
