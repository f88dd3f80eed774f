//! The assembled context: what a strategy decided to send, block by block, with the turns each
//! block stands for and what it costs.

use serde::{Deserialize, Serialize};

use crate::{message_name, Role, TokenCounter, ToolCall, Turn};

/// What a block of the context is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    /// The system prompt, kept whatever else is dropped.
    PinnedSystem,
    /// Text that stands for older turns.
    Summary,
    /// Facts and entities extracted from the conversation.
    Registry,
    /// The most specific sentences of turns not shown verbatim, quoted with their speaker
    /// and day (sentences, not whole turns: they do not count as the turns verbatim).
    Salient,
    /// A turn sent as it was said.
    VerbatimTurn,
    /// Turns brought back from the cold store for the question at hand, quoted verbatim (one
    /// block may hold several, each named in `source_ids`).
    Recalled,
}

impl BlockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockKind::PinnedSystem => "pinned_system",
            BlockKind::Summary => "summary",
            BlockKind::Registry => "registry",
            BlockKind::Salient => "salient",
            BlockKind::VerbatimTurn => "verbatim_turn",
            BlockKind::Recalled => "recalled",
        }
    }
}

/// One message of the context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub kind: BlockKind,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The turns this block stands for (the turn itself for a verbatim block).
    pub source_ids: Vec<String>,
    /// What this block costs as a chat message, framing included.
    pub tokens: usize,
}

impl Block {
    /// A turn sent as it was said; `tokens` is the turn's cached count.
    pub fn from_turn(kind: BlockKind, turn: &Turn, tokens: usize) -> Block {
        Block {
            kind,
            role: turn.role,
            name: turn.speaker.as_deref().and_then(message_name),
            content: turn.content.clone(),
            tool_call_id: if turn.role == Role::Tool { turn.tool_call_id.clone() } else { None },
            tool_calls: turn.tool_calls.clone(),
            source_ids: vec![turn.id.clone()],
            tokens,
        }
    }

    /// A block of new text (a summary, a registry), counted with `counter`.
    pub fn text(
        kind: BlockKind,
        role: Role,
        content: String,
        source_ids: Vec<String>,
        counter: &dyn TokenCounter,
    ) -> Block {
        let tokens = counter.count_message(role, None, &content, None, &[]);
        Block { kind, role, name: None, content, tool_call_id: None, tool_calls: Vec::new(), source_ids, tokens }
    }
}

/// One OpenAI-style chat message, as `--format messages` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

/// The assembled output of a strategy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    pub strategy: String,
    pub budget: usize,
    pub blocks: Vec<Block>,
    /// Tokens the chat format adds once per request (the reply priming).
    pub overhead: usize,
    /// Decisions worth telling a user who asked `--explain`: fallbacks, truncations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Context {
    pub fn new(strategy: &str, budget: usize, counter: &dyn TokenCounter) -> Context {
        Context {
            strategy: strategy.to_string(),
            budget,
            blocks: Vec::new(),
            overhead: counter.chat_format().reply_priming as usize,
            notes: Vec::new(),
        }
    }

    /// What the whole context costs: every block plus the per-request overhead.
    pub fn total_tokens(&self) -> usize {
        self.overhead + self.blocks.iter().map(|b| b.tokens).sum::<usize>()
    }

    /// Refuses a context over its budget, naming the strategy that built it: the one rule
    /// every bounded strategy is held to, wherever a context is checked.
    pub fn check_budget(&self) -> Result<(), crate::StrategyError> {
        if self.total_tokens() <= self.budget {
            return Ok(());
        }
        Err(crate::StrategyError::Failed {
            strategy: self.strategy.clone(),
            message: format!("a context of {} tokens, over the budget of {}", self.total_tokens(), self.budget),
        })
    }

    /// A turn the context quotes in two blocks (verbatim, pinned, recalled, or as salient
    /// sentences), the first found: a context that says the same thing twice pays for it
    /// twice. Summaries and the registry cite turns rather than quote them, so they are not
    /// counted.
    pub fn repeated_turn(&self) -> Option<&str> {
        let mut seen = std::collections::BTreeSet::new();
        self.blocks
            .iter()
            .filter(|b| !matches!(b.kind, BlockKind::Summary | BlockKind::Registry))
            .flat_map(|b| b.source_ids.iter().map(String::as_str))
            .find(|id| !seen.insert(*id))
    }

    /// Ids of every turn the context holds verbatim (or recalled), in context order.
    pub fn verbatim_ids(&self) -> impl Iterator<Item = &str> {
        self.blocks
            .iter()
            .filter(|b| matches!(b.kind, BlockKind::PinnedSystem | BlockKind::VerbatimTurn | BlockKind::Recalled))
            .flat_map(|b| b.source_ids.iter().map(String::as_str))
    }

    pub fn messages(&self) -> Vec<Message> {
        self.blocks
            .iter()
            .map(|b| Message {
                role: b.role,
                name: b.name.clone(),
                content: b.content.clone(),
                tool_call_id: b.tool_call_id.clone(),
                tool_calls: b.tool_calls.clone(),
            })
            .collect()
    }

    /// The context as plain text: one paragraph per message, headed by its role and name.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for (i, b) in self.blocks.iter().enumerate() {
            if i > 0 {
                out.push_str("\n\n");
            }
            out.push_str(b.role.as_str());
            if let Some(name) = &b.name {
                out.push_str(" (");
                out.push_str(name);
                out.push(')');
            }
            out.push_str(": ");
            out.push_str(&b.content);
            for call in &b.tool_calls {
                out.push_str(&format!("\n[tool call {} {}({})]", call.id, call.name, call.arguments));
            }
        }
        out
    }
}
