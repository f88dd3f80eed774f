//! A conversation as strategies see it: turns with token counts cached per turn, tool pairs
//! grouped into units, and the pinned system prompt, all maintained incrementally.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::{Conversation, ConversationError, Role, TokenCounter, Turn};

/// Turns that a strategy keeps or drops together: one turn, or an assistant turn that made
/// tool calls together with the tool results that answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// Indices into the history, ascending.
    pub turns: Vec<usize>,
    /// Message tokens of all its turns.
    pub tokens: usize,
}

/// A growing conversation with everything strategies need precomputed. Cloned only where a
/// snapshot of it is still read while its writer moves on.
///
/// Appending a turn costs O(that turn): its tokens are counted once, lookups go through hash
/// maps, and nothing walks the older history. That is what lets a strategy rebuild a context
/// after every turn of a 100k-turn conversation at a flat cost.
#[derive(Clone)]
pub struct History {
    conversation_id: String,
    counter: Arc<dyn TokenCounter>,
    turns: Vec<Turn>,
    /// Message tokens of each turn, framing included.
    tokens: Vec<usize>,
    /// Which unit each turn belongs to.
    unit_of: Vec<usize>,
    units: Vec<Unit>,
    by_id: HashMap<String, usize>,
    /// Tool call ids declared by assistant turns, mapped to the declaring turn.
    call_owner: HashMap<String, usize>,
    /// The leading system turns: the system prompt, which strategies keep pinned.
    pinned: usize,
    total_tokens: usize,
    /// The newest turn that carries a timestamp: a conversation without any would otherwise
    /// be walked whole at every turn.
    last_stamped: Option<usize>,
}

impl fmt::Debug for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("History")
            .field("conversation_id", &self.conversation_id)
            .field("counter", &self.counter.name())
            .field("turns", &self.turns.len())
            .field("total_tokens", &self.total_tokens)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("conversation {conversation}: {source}")]
pub struct HistoryError {
    pub conversation: String,
    #[source]
    pub source: ConversationError,
}

impl History {
    pub fn new(conversation_id: impl Into<String>, counter: Arc<dyn TokenCounter>) -> History {
        History {
            conversation_id: conversation_id.into(),
            counter,
            turns: Vec::new(),
            tokens: Vec::new(),
            unit_of: Vec::new(),
            units: Vec::new(),
            by_id: HashMap::new(),
            call_owner: HashMap::new(),
            pinned: 0,
            total_tokens: 0,
            last_stamped: None,
        }
    }

    /// A history of these turns, pushed one by one.
    pub fn from_turns(
        conversation_id: &str,
        turns: &[Turn],
        counter: Arc<dyn TokenCounter>,
    ) -> Result<History, HistoryError> {
        let mut history = History::new(conversation_id, counter);
        history.turns.reserve(turns.len());
        for turn in turns {
            history.push(turn.clone())?;
        }
        Ok(history)
    }

    pub fn from_conversation(
        conversation: &Conversation,
        counter: Arc<dyn TokenCounter>,
    ) -> Result<History, HistoryError> {
        History::from_turns(&conversation.id, &conversation.turns, counter)
    }

    /// Appends a turn, checking the same rules as [`Conversation::validate`]: a unique id,
    /// a timestamp no earlier than the last one, a tool result that answers a known call.
    pub fn push(&mut self, turn: Turn) -> Result<(), HistoryError> {
        let err = |source| HistoryError { conversation: self.conversation_id.clone(), source };
        if turn.id.is_empty() {
            return Err(err(ConversationError::EmptyTurnId { id: turn.id.clone(), index: self.turns.len() }));
        }
        if let Some(&first) = self.by_id.get(&turn.id) {
            return Err(err(ConversationError::DuplicateTurnId { id: turn.id.clone(), first }));
        }
        if turn.content.len() > Conversation::MAX_TURN_BYTES {
            return Err(err(ConversationError::TurnTooLarge {
                id: turn.id.clone(),
                bytes: turn.content.len(),
                limit: Conversation::MAX_TURN_BYTES,
            }));
        }
        if let Some(ts) = turn.timestamp {
            if let Some((prev_id, prev_ts)) = self.last_timestamp() {
                if ts < prev_ts {
                    return Err(err(ConversationError::DecreasingTimestamp {
                        id: turn.id.clone(),
                        ts: ts.0,
                        prev_id: prev_id.to_string(),
                        prev_ts: prev_ts.0,
                    }));
                }
            }
        }
        let index = self.turns.len();
        let owner = match (turn.role, &turn.tool_call_id) {
            (Role::Tool, Some(call)) => {
                let owner = self
                    .call_owner
                    .get(call)
                    .copied()
                    .or_else(|| self.by_id.get(call).copied().filter(|&i| self.turns[i].role == Role::Assistant));
                match owner {
                    Some(owner) => Some(owner),
                    None => {
                        return Err(err(ConversationError::UnknownToolCall { id: turn.id.clone(), call: call.clone() }))
                    }
                }
            }
            _ => None,
        };
        let tokens = self.counter.count_turn(&turn);
        match owner {
            Some(owner) => {
                let unit = self.unit_of[owner];
                self.units[unit].turns.push(index);
                self.units[unit].tokens += tokens;
                self.unit_of.push(unit);
            }
            None => {
                self.unit_of.push(self.units.len());
                self.units.push(Unit { turns: vec![index], tokens });
            }
        }
        if turn.role == Role::Assistant {
            if let Some(call) = &turn.tool_call_id {
                self.call_owner.insert(call.clone(), index);
            }
            for call in &turn.tool_calls {
                self.call_owner.insert(call.id.clone(), index);
            }
        }
        if turn.role == Role::System && self.pinned == index {
            self.pinned += 1;
        }
        self.by_id.insert(turn.id.clone(), index);
        if turn.timestamp.is_some() {
            self.last_stamped = Some(index);
        }
        self.tokens.push(tokens);
        self.total_tokens += tokens;
        self.turns.push(turn);
        Ok(())
    }

    /// Rolls the history back to its first `len` turns, as when a user edits an earlier
    /// message and the conversation continues from there. Costs O(turns removed).
    pub fn truncate(&mut self, len: usize) {
        while self.turns.len() > len {
            let index = self.turns.len() - 1;
            let turn = self.turns.pop().expect("len > 0");
            let tokens = self.tokens.pop().expect("one count per turn");
            let unit = self.unit_of.pop().expect("one unit per turn");
            // A unit's turns are ascending, so the turn being removed is its last one.
            self.units[unit].turns.pop();
            self.units[unit].tokens -= tokens;
            if self.units[unit].turns.is_empty() {
                debug_assert_eq!(unit, self.units.len() - 1, "a unit starts at its first turn");
                self.units.pop();
            }
            if turn.role == Role::Assistant {
                if let Some(call) = &turn.tool_call_id {
                    self.call_owner.remove(call);
                }
                for call in &turn.tool_calls {
                    self.call_owner.remove(&call.id);
                }
            }
            self.by_id.remove(&turn.id);
            self.total_tokens -= tokens;
            self.pinned = self.pinned.min(index);
        }
        if self.last_stamped.is_some_and(|i| i >= len) {
            self.last_stamped = self.turns.iter().rposition(|t| t.timestamp.is_some());
        }
    }

    /// The newest turn that carries a timestamp, with it.
    pub fn last_timestamp(&self) -> Option<(&str, crate::Timestamp)> {
        let t = &self.turns[self.last_stamped?];
        t.timestamp.map(|ts| (t.id.as_str(), ts))
    }

    pub fn conversation_id(&self) -> &str {
        &self.conversation_id
    }

    pub fn counter(&self) -> &dyn TokenCounter {
        &*self.counter
    }

    pub fn counter_arc(&self) -> Arc<dyn TokenCounter> {
        Arc::clone(&self.counter)
    }

    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }

    pub fn len(&self) -> usize {
        self.turns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    /// Message tokens of the turn at `index`, framing included.
    pub fn tokens(&self, index: usize) -> usize {
        self.tokens[index]
    }

    /// Message tokens of every turn together, without the reply priming.
    pub fn total_tokens(&self) -> usize {
        self.total_tokens
    }

    /// What sending the whole history would cost: every message plus the reply priming.
    pub fn full_context_tokens(&self) -> usize {
        self.total_tokens + self.counter.chat_format().reply_priming as usize
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// How many leading turns are system turns: the system prompt that strategies pin.
    pub fn pinned(&self) -> usize {
        self.pinned
    }

    /// The unit the turn at `index` belongs to.
    pub fn unit_of(&self, index: usize) -> &Unit {
        &self.units[self.unit_of[index]]
    }

    /// The unit's position among all units, for marking units as taken.
    pub fn unit_index(&self, index: usize) -> usize {
        self.unit_of[index]
    }

    pub fn unit_count(&self) -> usize {
        self.units.len()
    }
}
