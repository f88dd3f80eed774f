//! OpenAI chat-completion message arrays: `[{"role": ..., "content": ...}, ...]` or
//! `{"messages": [...]}`.

use serde::Deserialize;
use strata_core::{Conversation, Role, ToolCall, Turn};

use crate::error::{LoadError, LoadErrorKind};

#[derive(Deserialize)]
pub(crate) struct RawToolCall {
    id: Option<String>,
    /// OpenAI nests the call under `function`; the Strata format may write it flat.
    function: Option<RawFunction>,
    name: Option<String>,
    arguments: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawFunction {
    name: Option<String>,
    arguments: Option<serde_json::Value>,
}

fn arguments_text(v: Option<serde_json::Value>) -> String {
    match v {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s,
        Some(other) => other.to_string(),
    }
}

impl From<RawToolCall> for ToolCall {
    fn from(raw: RawToolCall) -> ToolCall {
        let (name, arguments) = match raw.function {
            Some(f) => (f.name, f.arguments),
            None => (raw.name, raw.arguments),
        };
        ToolCall {
            id: raw.id.unwrap_or_default(),
            name: name.unwrap_or_default(),
            arguments: arguments_text(arguments),
        }
    }
}

#[derive(Deserialize)]
struct RawMessage {
    role: Option<String>,
    #[serde(default)]
    content: serde_json::Value,
    name: Option<String>,
    tool_call_id: Option<String>,
    #[serde(default)]
    tool_calls: Vec<RawToolCall>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawMessages {
    Bare(Vec<RawMessage>),
    Wrapped { messages: Vec<RawMessage> },
}

/// Message content may be a string, `null`, or an array of parts of which the text parts
/// count.
fn content_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Null => Some(String::new()),
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(parts) => {
            let texts: Vec<&str> = parts.iter().filter_map(|p| p.get("text").and_then(|t| t.as_str())).collect();
            Some(texts.join("\n"))
        }
        _ => None,
    }
}

pub(crate) fn from_value(file: &str, id: &str, value: serde_json::Value) -> Result<Conversation, LoadError> {
    let raw: RawMessages = serde_json::from_value(value)
        .map_err(|e| LoadError::new(file, LoadErrorKind::Schema, format!("not an array of chat messages: {e}")))?;
    let messages = match raw {
        RawMessages::Bare(m) | RawMessages::Wrapped { messages: m } => m,
    };
    let mut turns = Vec::with_capacity(messages.len());
    for (index, m) in messages.into_iter().enumerate() {
        // Ids count from m0, as the server and `strata.Memory` number the turns they store.
        let turn_id = format!("m{index}");
        let at = format!("transcript {id}: message {turn_id} (index {index})");
        let role = match m.role.as_deref() {
            None => return Err(LoadError::new(file, LoadErrorKind::Schema, format!("{at}: missing `role`"))),
            // Newer APIs call the system role `developer` and the old tool role `function`.
            Some("developer") => Role::System,
            Some("function") => Role::Tool,
            Some(r) => Role::parse(r)
                .ok_or_else(|| LoadError::new(file, LoadErrorKind::Schema, format!("{at}: unknown role `{r}`")))?,
        };
        let content = content_text(&m.content)
            .ok_or_else(|| LoadError::new(file, LoadErrorKind::Schema, format!("{at}: `content` is not text")))?;
        turns.push(Turn {
            id: turn_id,
            role,
            speaker: m.name,
            content,
            timestamp: None,
            tool_call_id: m.tool_call_id,
            tool_calls: m.tool_calls.into_iter().map(Into::into).collect(),
        });
    }
    let conversation = Conversation { id: id.to_string(), turns, ..Default::default() };
    conversation
        .validate(true)
        .map_err(|e| LoadError::new(file, LoadErrorKind::Invalid, format!("transcript {id}: {e}")))?;
    Ok(conversation)
}
