//! The wire format: OpenAI chat requests read into turns (every fault named by its JSON
//! field), conversation ids, and the JSON errors the server answers with.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use strata_core::{Message, Role, ToolCall, Turn};

/// An error answered as OpenAI's servers do: a status and one line of JSON,
/// `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// The request field at fault (`messages[2].content`), when one is.
    pub param: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), param: None }
    }

    /// A 400 naming the field at fault.
    pub fn field(param: impl Into<String>, message: impl std::fmt::Display) -> ApiError {
        let param = param.into();
        ApiError { status: StatusCode::BAD_REQUEST, message: format!("{param}: {message}"), param: Some(param) }
    }

    pub fn body(&self) -> Value {
        let kind = match self.status.as_u16() {
            400 | 404 | 405 | 409 | 413 | 415 | 422 => "invalid_request_error",
            401 | 403 => "authentication_error",
            _ => "server_error",
        };
        json!({"error": {"message": self.message, "type": kind, "param": self.param, "code": self.status.as_u16()}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

/// Conversation ids: what a header or a URL may carry, and what the store keys by. Never
/// dots alone: `.` and `..` name folders wherever an id becomes part of a path or a URL.
pub fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:@-".contains(&b))
        && !id.bytes().all(|b| b == b'.')
}

/// What a chat request holds that the server acts on; everything else in the body is passed
/// to the upstream untouched.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub body: Map<String, Value>,
    /// The messages as turns (ids are given when they are stored).
    pub turns: Vec<Turn>,
    pub stream: bool,
    /// `max_completion_tokens`, else `max_tokens`.
    pub max_tokens: Option<usize>,
    pub user: Option<String>,
}

/// Reads a chat completions request body; a fault is a 400 naming its field.
pub fn parse_chat(bytes: &[u8]) -> Result<ChatRequest, ApiError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| ApiError {
        status: StatusCode::BAD_REQUEST,
        message: format!("body: invalid JSON ({e})"),
        param: None,
    })?;
    let Value::Object(body) = value else {
        return Err(ApiError::field("body", "expected a JSON object"));
    };
    let messages = match body.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        Some(Value::Array(_)) => return Err(ApiError::field("messages", "is empty")),
        Some(_) => return Err(ApiError::field("messages", "expected an array of messages")),
        None => return Err(ApiError::field("messages", "missing")),
    };
    let turns = messages.iter().enumerate().map(|(i, m)| turn(i, m)).collect::<Result<Vec<_>, _>>()?;
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::field("stream", "expected true or false")),
    };
    let mut max_tokens = None;
    for key in ["max_tokens", "max_completion_tokens"] {
        match body.get(key) {
            None | Some(Value::Null) => {}
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => max_tokens = Some(n as usize),
                _ => return Err(ApiError::field(key, "expected a positive integer")),
            },
        }
    }
    let user = match body.get("user") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ApiError::field("user", "expected a string")),
    };
    if let Some(v) = body.get("model") {
        if !v.is_string() {
            return Err(ApiError::field("model", "expected a string"));
        }
    }
    Ok(ChatRequest { body, turns, stream, max_tokens, user })
}

/// One message as a turn; the id is a placeholder until the turn is stored.
fn turn(i: usize, m: &Value) -> Result<Turn, ApiError> {
    let at = |field: &str| format!("messages[{i}].{field}");
    let Value::Object(m) = m else {
        return Err(ApiError::field(format!("messages[{i}]"), "expected an object"));
    };
    let role = match m.get("role") {
        Some(Value::String(r)) => match r.as_str() {
            // The newer name for a system message.
            "developer" => Role::System,
            r => Role::parse(r).ok_or_else(|| {
                ApiError::field(at("role"), format!("`{r}` is not one of system, developer, user, assistant, tool"))
            })?,
        },
        Some(_) => return Err(ApiError::field(at("role"), "expected a string")),
        None => return Err(ApiError::field(at("role"), "missing")),
    };
    let content = match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        // An assistant message that only calls tools has no content.
        None | Some(Value::Null) if role == Role::Assistant => String::new(),
        None | Some(Value::Null) => return Err(ApiError::field(at("content"), "missing")),
        Some(Value::Array(parts)) => text_parts(i, parts)?,
        Some(_) => return Err(ApiError::field(at("content"), "expected a string or an array of text parts")),
    };
    let mut t = Turn::new(String::new(), role, content);
    match m.get("name") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => t.speaker = Some(s.clone()),
        Some(_) => return Err(ApiError::field(at("name"), "expected a string")),
    }
    if role == Role::Tool {
        match m.get("tool_call_id") {
            Some(Value::String(s)) if !s.is_empty() => t.tool_call_id = Some(s.clone()),
            Some(_) => return Err(ApiError::field(at("tool_call_id"), "expected a non-empty string")),
            None => return Err(ApiError::field(at("tool_call_id"), "missing (a tool message answers a call)")),
        }
    }
    match m.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) if role == Role::Assistant => {
            for (j, c) in calls.iter().enumerate() {
                t.tool_calls.push(tool_call(&format!("messages[{i}].tool_calls[{j}]"), c)?);
            }
        }
        Some(Value::Array(_)) => {
            return Err(ApiError::field(at("tool_calls"), "only an assistant message calls tools"))
        }
        Some(_) => return Err(ApiError::field(at("tool_calls"), "expected an array")),
    }
    Ok(t)
}

/// The text of a content array; parts other than text cannot be stored as a turn.
fn text_parts(i: usize, parts: &[Value]) -> Result<String, ApiError> {
    let mut text = String::new();
    for (j, p) in parts.iter().enumerate() {
        let at = format!("messages[{i}].content[{j}]");
        match (p.get("type").and_then(Value::as_str), p.get("text")) {
            (Some("text"), Some(Value::String(s))) => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(s);
            }
            (Some("text"), _) => return Err(ApiError::field(format!("{at}.text"), "expected a string")),
            (Some(other), _) => {
                return Err(ApiError::field(
                    format!("{at}.type"),
                    format!("`{other}` parts are not supported, only text"),
                ))
            }
            (None, _) => return Err(ApiError::field(format!("{at}.type"), "missing")),
        }
    }
    Ok(text)
}

/// One `tool_calls` entry, `{"id", "type": "function", "function": {"name", "arguments"}}`.
pub fn tool_call(at: &str, c: &Value) -> Result<ToolCall, ApiError> {
    let id =
        c.get("id").and_then(Value::as_str).ok_or_else(|| ApiError::field(format!("{at}.id"), "expected a string"))?;
    let f = c.get("function").ok_or_else(|| ApiError::field(format!("{at}.function"), "missing"))?;
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::field(format!("{at}.function.name"), "expected a string"))?;
    let arguments = match f.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(_) => return Err(ApiError::field(format!("{at}.function.arguments"), "expected a string")),
    };
    Ok(ToolCall { id: id.to_string(), name: name.to_string(), arguments })
}

/// The conversation a request belongs to: the `X-Strata-Conversation` header, else the
/// request's `user` field, else a hash of its first system message and first user message
/// (so that a client that resends its whole history keeps landing on one conversation).
pub fn conversation_id(header: Option<&str>, request: &ChatRequest) -> Result<String, ApiError> {
    if let Some(h) = header {
        if !valid_id(h) {
            return Err(ApiError::field(
                "X-Strata-Conversation",
                "expected 1 to 128 characters of letters, digits and . _ : @ -, not dots alone",
            ));
        }
        return Ok(h.to_string());
    }
    if let Some(u) = &request.user {
        if !valid_id(u) {
            return Err(ApiError::field(
                "user",
                "expected 1 to 128 characters of letters, digits and . _ : @ -, not dots alone",
            ));
        }
        return Ok(u.clone());
    }
    let first = |role: Role| request.turns.iter().find(|t| t.role == role).map_or("", |t| t.content.as_str());
    let mut h = Sha256::new();
    for part in [first(Role::System), first(Role::User)] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    Ok(format!("h-{}", strata_text::hex(&h.finalize()[..8])))
}

/// Whether a message the client sent is the turn stored at its place: the same role, speaker,
/// text and tool links (ids and timestamps are the server's).
pub fn same_message(sent: &Turn, stored: &Turn) -> bool {
    sent.role == stored.role
        && sent.speaker == stored.speaker
        && sent.content == stored.content
        && sent.tool_call_id == stored.tool_call_id
        && sent.tool_calls == stored.tool_calls
}

/// A context's messages in OpenAI's wire form (tool calls nested under `function`).
pub fn wire_messages(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| {
            let mut o = Map::new();
            o.insert("role".into(), Value::from(m.role.as_str()));
            if let Some(n) = &m.name {
                o.insert("name".into(), Value::from(n.as_str()));
            }
            o.insert("content".into(), Value::from(m.content.as_str()));
            if let Some(id) = &m.tool_call_id {
                o.insert("tool_call_id".into(), Value::from(id.as_str()));
            }
            if !m.tool_calls.is_empty() {
                let calls: Vec<Value> = m
                    .tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
                o.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(o)
        })
        .collect()
}
