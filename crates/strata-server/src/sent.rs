//! What the server forwarded: the last few prompts of each conversation, as they were sent,
//! so that a user can see the context a model was given (the inspection routes recompute a
//! context from what is stored now, which may differ). Bounded twice: a few prompts per
//! conversation, and as many conversations as the server holds open.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::{json, Value};

/// Prompts kept per conversation, newest last.
pub(crate) const KEPT: usize = 8;

/// One forwarded prompt.
#[derive(Debug, Clone)]
pub(crate) struct SentPrompt {
    /// Unix seconds when it was forwarded.
    pub(crate) at: i64,
    /// Tokens of the client's list, and of what was sent (the same when it was sent as it came).
    pub(crate) tokens: (usize, usize),
    /// The memory's context replaced the client's list.
    pub(crate) compressed: bool,
    /// The messages as forwarded, in the chat API's form.
    pub(crate) messages: Value,
}

impl SentPrompt {
    pub(crate) fn to_json(&self) -> Value {
        json!({"at": self.at, "tokens_from_client": self.tokens.0, "tokens_sent": self.tokens.1,
            "compressed": self.compressed, "messages": self.messages})
    }
}

/// The last [`KEPT`] prompts of at most `conversations` conversations; the conversation sent
/// to longest ago is forgotten first.
#[derive(Debug)]
pub(crate) struct SentLog {
    conversations: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    tick: u64,
    by_conversation: HashMap<String, (u64, VecDeque<SentPrompt>)>,
}

impl SentLog {
    pub(crate) fn new(conversations: usize) -> SentLog {
        SentLog { conversations: conversations.max(1), inner: Mutex::new(Inner::default()) }
    }

    pub(crate) fn record(&self, conversation: &str, prompt: SentPrompt) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.tick += 1;
        let tick = inner.tick;
        if !inner.by_conversation.contains_key(conversation) && inner.by_conversation.len() >= self.conversations {
            let oldest = inner.by_conversation.iter().min_by_key(|(_, (t, _))| *t).map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                inner.by_conversation.remove(&k);
            }
        }
        let entry = inner.by_conversation.entry(conversation.to_string()).or_insert_with(|| (tick, VecDeque::new()));
        entry.0 = tick;
        if entry.1.len() == KEPT {
            entry.1.pop_front();
        }
        entry.1.push_back(prompt);
    }

    /// A conversation's kept prompts, oldest first.
    pub(crate) fn of(&self, conversation: &str) -> Vec<SentPrompt> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.by_conversation.get(conversation).map(|(_, q)| q.iter().cloned().collect()).unwrap_or_default()
    }
}
