//! `POST /v1/chat/completions`: store what is new, send the memory's context instead of the
//! whole list, pass the reply back unchanged and store it when it completes.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde_json::{json, Value};
use strata::MemoryError;
use strata_core::{ChatMessage, GenerateError, GenerateRequest, Message, Role, Timestamp, ToolCall, Turn};

use crate::api::{self, ApiError, ChatRequest};
use crate::sent::SentPrompt;
use crate::{failed, internal, AppState, Backend};

/// What the model is sent for a request, and where its reply goes.
struct Prepared {
    /// The memory's context; `None` when the client's own list fits the budget, and is sent
    /// as it came (nothing to gain by changing it).
    messages: Option<Vec<Message>>,
    /// The reply is stored only while the conversation still ends where the client's list
    /// does.
    reply_at: usize,
    /// Tokens of the client's list, and of what the model is sent.
    tokens: (usize, usize),
}

/// What a request comes to once its new messages are stored.
enum Step {
    /// Ask the model.
    Ask(Prepared),
    /// The conversation already holds every message sent and the reply that followed them:
    /// a client retrying after a lost response gets the stored reply, so its history and the
    /// store stay the same.
    Replay(Turn),
}

pub(crate) async fn completions(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let started = Instant::now();
    let mut trace = Trace::default();
    let response = match answer(state.clone(), headers, body, started, &mut trace).await {
        Ok(r) => r,
        Err(e) => {
            if e.status.is_client_error() {
                state.metrics.refused();
            } else {
                state.metrics.failed();
            }
            e.into_response()
        }
    };
    if requests_logged() {
        let tokens =
            trace.tokens.map_or(String::new(), |(sent, forwarded)| format!(" {sent} tokens in, {forwarded} sent;"));
        log(&format!(
            "conversation {}: {}{tokens} {:.1} ms{}",
            trace.conversation.as_deref().unwrap_or("-"),
            response.status().as_u16(),
            started.elapsed().as_secs_f64() * 1000.0,
            if trace.streamed { " to the stream's start" } else { "" }
        ));
    }
    response
}

/// What one request's log line says, filled in as the request goes.
#[derive(Default)]
struct Trace {
    conversation: Option<String>,
    tokens: Option<(usize, usize)>,
    streamed: bool,
}

/// One line per request unless `STRATA_LOG` is `warn` (or `error`, `off`): then only problems.
fn requests_logged() -> bool {
    static LOGGED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LOGGED.get_or_init(|| {
        let level = std::env::var("STRATA_LOG").unwrap_or_default().to_ascii_lowercase();
        !matches!(level.as_str(), "warn" | "error" | "off")
    })
}

async fn answer(
    state: Arc<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    started: Instant,
    trace: &mut Trace,
) -> Result<Response, ApiError> {
    let bytes = body.map_err(|r| match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body: larger than the limit of {} bytes", state.config.max_body),
        ),
        status => ApiError::new(status, format!("body: {}", r.body_text())),
    })?;
    let request = api::parse_chat(&bytes)?;
    let header = match headers.get("x-strata-conversation") {
        Some(v) => Some(v.to_str().map_err(|_| ApiError::field("X-Strata-Conversation", "expected text"))?),
        None => None,
    };
    let id = api::conversation_id(header, &request)?;
    trace.conversation = Some(id.clone());
    trace.streamed = request.stream;
    let budget = state.config.budget_for(request.max_tokens);
    let step = blocking({
        let (state, id, turns) = (state.clone(), id.clone(), request.turns.clone());
        move || prepare(&state, &id, turns, budget)
    })
    .await?;
    let overhead = started.elapsed();
    let prepared = match step {
        Step::Ask(p) => {
            trace.tokens = Some(p.tokens);
            let messages = match &p.messages {
                Some(m) => Value::Array(api::wire_messages(m)),
                None => request.body.get("messages").cloned().unwrap_or(Value::Null),
            };
            let prompt = SentPrompt { at: unix_now(), tokens: p.tokens, compressed: p.messages.is_some(), messages };
            state.sent.record(&id, prompt);
            p
        }
        Step::Replay(reply) => {
            state.metrics.answered(started.elapsed(), overhead);
            let model = request.body.get("model").and_then(Value::as_str).unwrap_or("strata").to_string();
            let at = request.turns.len();
            return Ok(completion(&format!("chatcmpl-{id}-{at}"), &model, &reply, "stop", None, request.stream));
        }
    };
    match &state.config.backend {
        Backend::Upstream { base, key, timeout } => {
            let (base, key, timeout) = (base.clone(), key.clone(), *timeout);
            forward(state, id, request, prepared, Upstream { base, key, timeout }, started, overhead).await
        }
        Backend::Local { generator, .. } => {
            let generator = generator.clone();
            local(state, id, request, prepared, generator, started, overhead).await
        }
    }
}

/// Runs blocking work (the store, the embedder, a local model) off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, ApiError> + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| internal(format!("request task failed: {e}")))?
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// What is left to do once the request's messages are stored.
enum Stored {
    Done(Step),
    /// Build the context from this snapshot, for this question; the client's history cost
    /// this much as sent.
    Build {
        snapshot: strata::Snapshot,
        question: Option<String>,
        sent_by_client: usize,
    },
}

/// Stores the messages the conversation does not hold yet (each durably, before anything is
/// forwarded) and builds the context for the newest user message: from the memory's snapshot,
/// outside the conversation's lock, so a slow context holds up no writer.
fn prepare(state: &AppState, id: &str, turns: Vec<Turn>, budget: usize) -> Result<Step, ApiError> {
    let reply_at = turns.len();
    let stored = state.with_memory(id, |memory| {
        let stored = memory.history().turns();
        let common = turns.iter().zip(stored).take_while(|(a, b)| api::same_message(a, b)).count();
        if common < stored.len() && common < turns.len() {
            let at = format!("messages[{common}]");
            return Err(ApiError {
                status: StatusCode::CONFLICT,
                message: format!(
                    "{at}: differs from turn {} that conversation {id} holds there; a history that was edited \
                     needs another conversation id (X-Strata-Conversation)",
                    stored[common].id
                ),
                param: Some(at),
            });
        }
        if common == turns.len() {
            if let Some(reply) = stored.get(common).filter(|t| t.role == Role::Assistant) {
                return Ok(Stored::Done(Step::Replay(reply.clone())));
            }
        }
        let first_new = memory.len();
        check_new(memory.history().turns(), &turns, first_new)?;
        // Timestamps never go back, even when the clock does.
        let now = unix_now().max(memory.history().last_timestamp().map_or(0, |(_, t)| t.0));
        let mut added = 0;
        for (k, mut t) in turns.iter().cloned().enumerate().skip(first_new) {
            t.id = format!("m{}", memory.len());
            t.timestamp = Some(Timestamp(now));
            memory.push(t).map_err(|e| match e {
                MemoryError::History(h) => ApiError::field(format!("messages[{k}]"), h),
                e => failed(format!("conversation {id}: messages[{k}] not stored: {e}"), &e),
            })?;
            added += 1;
        }
        state.metrics.stored(added);
        for note in memory.take_warnings() {
            log(&format!("conversation {id}: {note}"));
        }
        // The queue's warnings name their own conversations.
        for note in state.parts.embed_queue.iter().flat_map(|q| q.take_warnings()) {
            log(&note);
        }
        let history = memory.history();
        let sent_by_client: usize = (0..turns.len().min(history.len())).map(|i| history.tokens(i)).sum::<usize>()
            + history.counter().chat_format().reply_priming as usize;
        if sent_by_client <= budget {
            state.metrics.tokens(sent_by_client, sent_by_client);
            let tokens = (sent_by_client, sent_by_client);
            return Ok(Stored::Done(Step::Ask(Prepared { messages: None, reply_at, tokens })));
        }
        let question = turns.iter().rev().find(|t| t.role == Role::User).map(|t| t.content.clone());
        Ok(Stored::Build { snapshot: memory.snapshot(), question, sent_by_client })
    })?;
    match stored {
        Stored::Done(step) => Ok(step),
        Stored::Build { snapshot, question, sent_by_client } => {
            let context = snapshot
                .context(budget, question.as_deref())
                .map_err(|e| internal(format!("conversation {id}: {e}")))?;
            state.metrics.tokens(sent_by_client, context.total_tokens());
            let tokens = (sent_by_client, context.total_tokens());
            Ok(Step::Ask(Prepared { messages: Some(context.messages()), reply_at, tokens }))
        }
    }
}

/// Refuses the whole request before anything is stored when one of its new messages could
/// not be: a tool result that answers no call made before it.
fn check_new(stored: &[Turn], turns: &[Turn], first_new: usize) -> Result<(), ApiError> {
    let made = |calls: &[Turn], call: &str| {
        calls.iter().rev().any(|t| t.role == Role::Assistant && t.tool_calls.iter().any(|c| c.id == call))
    };
    for (k, t) in turns.iter().enumerate().skip(first_new) {
        if let (Role::Tool, Some(call)) = (t.role, &t.tool_call_id) {
            if !made(&turns[first_new..k], call) && !made(stored, call) {
                return Err(ApiError::field(
                    format!("messages[{k}].tool_call_id"),
                    format!("`{call}` answers no tool call made before it"),
                ));
            }
        }
    }
    Ok(())
}

/// Stores a completed reply when the conversation still ends where the request's list did.
fn store_reply(state: &AppState, id: &str, mut reply: Turn, at: usize) {
    let stored = state.with_memory(id, |memory| {
        if memory.len() != at {
            return Ok(false);
        }
        reply.id = format!("m{}", memory.len());
        let now = unix_now().max(memory.history().last_timestamp().map_or(0, |(_, t)| t.0));
        reply.timestamp = Some(Timestamp(now));
        memory.push(reply).map_err(|e| failed(e.to_string(), &e))?;
        Ok(true)
    });
    match stored {
        Ok(true) => state.metrics.stored(1),
        Ok(false) => log(&format!(
            "conversation {id}: a reply to turn m{} not stored: the conversation moved on",
            at.saturating_sub(1)
        )),
        Err(e) => log(&format!("conversation {id}: reply not stored: {}", e.message)),
    }
}

#[allow(clippy::print_stderr)]
fn log(line: &str) {
    eprintln!("strata serve: {line}");
}

struct Upstream {
    base: String,
    key: Option<String>,
    timeout: Duration,
}

fn upstream_error(url: &str, timeout: Duration, e: &reqwest::Error) -> ApiError {
    if e.is_timeout() {
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!("upstream {url}: no answer within {}s", timeout.as_secs_f64()),
        )
    } else if e.is_connect() {
        ApiError::new(StatusCode::BAD_GATEWAY, format!("upstream {url}: cannot connect ({e})"))
    } else {
        ApiError::new(StatusCode::BAD_GATEWAY, format!("upstream {url}: {e}"))
    }
}

/// The upstream's answer as the client gets it: its status, content type and bytes.
fn pass(status: StatusCode, content_type: Option<HeaderValue>, body: Body) -> Response {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    if let Some(ct) = content_type {
        r.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    r
}

async fn forward(
    state: Arc<AppState>,
    id: String,
    request: ChatRequest,
    prepared: Prepared,
    upstream: Upstream,
    started: Instant,
    overhead: Duration,
) -> Result<Response, ApiError> {
    let mut body = request.body;
    if let Some(messages) = &prepared.messages {
        body.insert("messages".into(), Value::Array(api::wire_messages(messages)));
    }
    let url = format!("{}/chat/completions", upstream.base.trim_end_matches('/'));
    let mut call = state
        .client
        .post(&url)
        .header(header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&body).map_err(|e| internal(e.to_string()))?);
    if let Some(k) = &upstream.key {
        call = call.bearer_auth(k);
    }
    // The timeout bounds each wait on the upstream (its headers, the body, each chunk of a
    // stream), not the whole reply: a long stream that keeps coming is not cut.
    let silent = || {
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!("upstream {url}: no answer within {}s", upstream.timeout.as_secs_f64()),
        )
    };
    let response = tokio::time::timeout(upstream.timeout, call.send())
        .await
        .map_err(|_| silent())?
        .map_err(|e| upstream_error(&url, upstream.timeout, &e))?;
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    if !status.is_success() {
        // The client sees the upstream's own status and error; its turns stay stored.
        state.metrics.failed();
        let bytes = tokio::time::timeout(upstream.timeout, response.bytes())
            .await
            .map_err(|_| silent())?
            .map_err(|e| upstream_error(&url, upstream.timeout, &e))?;
        if serde_json::from_slice::<Value>(&bytes).is_ok() {
            return Ok(pass(status, content_type, Body::from(bytes)));
        }
        let text = String::from_utf8_lossy(&bytes);
        return Ok(ApiError::new(status, format!("upstream {url}: {}", text.trim())).into_response());
    }
    if !request.stream {
        let bytes = tokio::time::timeout(upstream.timeout, response.bytes())
            .await
            .map_err(|_| silent())?
            .map_err(|e| upstream_error(&url, upstream.timeout, &e))?;
        let reply = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| reply_turn(&v));
        let stored_at = Instant::now();
        if let Some(reply) = reply {
            let state = state.clone();
            let at = prepared.reply_at;
            blocking(move || {
                store_reply(&state, &id, reply, at);
                Ok(())
            })
            .await?;
        } else {
            log(&format!("conversation {id}: the upstream's reply had no message to store"));
        }
        state.metrics.answered(started.elapsed(), overhead + stored_at.elapsed());
        return Ok(pass(status, content_type, Body::from(bytes)));
    }
    // Streamed: every chunk goes to the client as it comes, and is read on the side for the
    // reply. The upstream is read to its end even if the client leaves, so the reply is
    // stored whenever it completes.
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let timeout = upstream.timeout;
    tokio::spawn(async move {
        let mut stream = response.bytes_stream();
        let mut sse = SseReply::default();
        let mut client = Some(tx);
        loop {
            let chunk = match tokio::time::timeout(timeout, stream.next()).await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(_) => {
                    let message = format!("upstream {url}: the stream stalled for {}s", timeout.as_secs_f64());
                    log(&format!("conversation {id}: {message}; reply not stored"));
                    broken_off(client.as_ref(), StatusCode::GATEWAY_TIMEOUT, message).await;
                    state.metrics.failed();
                    return;
                }
            };
            match chunk {
                Ok(bytes) => {
                    sse.feed(&bytes);
                    if let Some(tx) = &client {
                        if tx.send(bytes).await.is_err() {
                            client = None;
                        }
                    }
                }
                Err(e) => {
                    let error = upstream_error(&url, timeout, &e);
                    log(&format!("conversation {id}: {}; reply not stored", error.message));
                    broken_off(client.as_ref(), error.status, error.message).await;
                    state.metrics.failed();
                    return;
                }
            }
        }
        drop(client);
        let stored_at = Instant::now();
        let too_long = sse.too_long();
        match sse.finish() {
            Some(reply) => {
                let at = prepared.reply_at;
                let s = state.clone();
                let _ = tokio::task::spawn_blocking(move || store_reply(&s, &id, reply, at)).await;
            }
            None if too_long => log(&format!(
                "conversation {id}: the reply grew past {} bytes; passed on, not stored",
                strata_core::Conversation::MAX_TURN_BYTES
            )),
            None => log(&format!("conversation {id}: the stream ended before the reply finished; not stored")),
        }
        state.metrics.answered(started.elapsed(), overhead + stored_at.elapsed());
    });
    Ok(pass(status, content_type, stream_body(rx)))
}

/// Tells a client whose stream the upstream broke off why, as the last event before the
/// stream closes: an `error` event, as OpenAI's API sends one, so that a client library
/// raises instead of taking the partial reply for a whole one.
async fn broken_off(client: Option<&tokio::sync::mpsc::Sender<Bytes>>, status: StatusCode, message: String) {
    if let Some(tx) = client {
        let error = ApiError::new(status, message).body();
        let _ = tx.send(Bytes::from(format!("data: {error}\n\n"))).await;
    }
}

/// A response body that sends what arrives on `rx`, as it arrives, until every sender is gone.
fn stream_body(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Body {
    Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    }))
}

/// The events of one streamed completion, as OpenAI's API frames them.
struct Chunks {
    id: String,
    created: i64,
    model: String,
}

impl Chunks {
    fn new(id: String, model: String) -> Chunks {
        Chunks { id, created: unix_now(), model }
    }

    /// One `data:` event carrying `delta`, and the finish reason on the last.
    fn frame(&self, delta: Value, finish: Option<&str>) -> String {
        let v = json!({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {v}\n\n")
    }
}

/// The assistant turn of a non-streamed completion: `choices[0].message`.
fn reply_turn(v: &Value) -> Option<Turn> {
    let m = v.get("choices")?.get(0)?.get("message")?;
    let content = m.get("content").and_then(Value::as_str).unwrap_or("");
    let mut t = Turn::new(String::new(), Role::Assistant, content);
    if let Some(Value::Array(calls)) = m.get("tool_calls") {
        for (j, c) in calls.iter().enumerate() {
            t.tool_calls.push(api::tool_call(&format!("choices[0].message.tool_calls[{j}]"), c).ok()?);
        }
    }
    Some(t)
}

/// A streamed reply put back together from its server-sent events: the content deltas and the
/// tool calls' pieces, complete once a choice finished or `[DONE]` came.
#[derive(Debug, Default)]
pub struct SseReply {
    pending: Vec<u8>,
    /// How much of `pending` holds no line end: a line that comes a few bytes at a time is
    /// scanned once, not once per piece.
    scanned: usize,
    content: String,
    /// Tool calls by their `index`: id, name, arguments so far.
    calls: Vec<(String, String, String)>,
    done: bool,
    /// The reply grew past what a turn may hold: nothing more is kept, and nothing is stored.
    too_long: bool,
}

impl SseReply {
    /// Reads the next piece of the stream. What it holds is bounded: past
    /// `Conversation::MAX_TURN_BYTES` (a reply the store would refuse anyway), or a line that
    /// long without an end, it lets everything go and reads no more.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.too_long {
            return;
        }
        self.pending.extend_from_slice(bytes);
        self.read_lines();
        // Checked once the whole lines are read, so that where the stream was cut into pieces
        // does not change what is kept.
        let held = self.pending.len()
            + self.content.len()
            + self.calls.iter().map(|(id, name, args)| id.len() + name.len() + args.len()).sum::<usize>();
        if held > strata_core::Conversation::MAX_TURN_BYTES {
            *self = SseReply { too_long: true, ..SseReply::default() };
        }
    }

    fn read_lines(&mut self) {
        loop {
            let Some(end) = self.pending[self.scanned..].iter().position(|&b| b == b'\n') else {
                self.scanned = self.pending.len();
                break;
            };
            let line: Vec<u8> = self.pending.drain(..=self.scanned + end).collect();
            self.scanned = 0;
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim_end_matches(['\r', '\n']).strip_prefix("data:") else { continue };
            let data = data.trim();
            if data == "[DONE]" {
                self.done = true;
                continue;
            }
            let Ok(v) = serde_json::from_str::<Value>(data) else { continue };
            let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else { continue };
            if let Some(delta) = choice.get("delta") {
                if let Some(s) = delta.get("content").and_then(Value::as_str) {
                    self.content.push_str(s);
                }
                for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                    let i = call.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                    if i > 1024 {
                        continue;
                    }
                    if self.calls.len() <= i {
                        self.calls.resize(i + 1, Default::default());
                    }
                    let slot = &mut self.calls[i];
                    if let Some(id) = call.get("id").and_then(Value::as_str) {
                        slot.0 = id.to_string();
                    }
                    let f = call.get("function");
                    if let Some(name) = f.and_then(|f| f.get("name")).and_then(Value::as_str) {
                        slot.1.push_str(name);
                    }
                    if let Some(args) = f.and_then(|f| f.get("arguments")).and_then(Value::as_str) {
                        slot.2.push_str(args);
                    }
                }
            }
            if choice.get("finish_reason").is_some_and(|r| !r.is_null()) {
                self.done = true;
            }
        }
    }

    /// Whether the reply grew past what a turn may hold (and so will not be stored).
    pub fn too_long(&self) -> bool {
        self.too_long
    }

    /// The reply, if the stream finished it within the bound.
    pub fn finish(self) -> Option<Turn> {
        if !self.done || self.too_long {
            return None;
        }
        let mut t = Turn::new(String::new(), Role::Assistant, self.content);
        t.tool_calls = self
            .calls
            .into_iter()
            .filter(|c| !c.0.is_empty())
            .map(|(id, name, arguments)| ToolCall { id, name, arguments })
            .collect();
        Some(t)
    }
}

/// A message for a local model, which reads plain chat: tool calls written into the text.
fn chat_message(m: &Message) -> ChatMessage {
    ChatMessage { role: m.role, content: strata_core::plain_chat_content(&m.content, &m.tool_calls).into_owned() }
}

async fn local(
    state: Arc<AppState>,
    id: String,
    request: ChatRequest,
    prepared: Prepared,
    generator: Arc<dyn strata_core::Generator>,
    started: Instant,
    overhead: Duration,
) -> Result<Response, ApiError> {
    let max_tokens = request.max_tokens.unwrap_or(state.config.reply_tokens);
    let messages: Vec<ChatMessage> = match &prepared.messages {
        Some(m) => m.iter().map(chat_message).collect(),
        None => request
            .turns
            .iter()
            .map(|t| {
                chat_message(&Message {
                    role: t.role,
                    name: None,
                    content: t.content.clone(),
                    tool_call_id: t.tool_call_id.clone(),
                    tool_calls: t.tool_calls.clone(),
                })
            })
            .collect(),
    };
    let model = generator.model_id().to_string();
    if request.stream {
        let request = GenerateRequest { messages, max_tokens, deadline: Some(Duration::from_secs(600)) };
        return Ok(local_streamed(state, id, prepared.reply_at, request, generator, model, started, overhead));
    }
    let generation = {
        let _turn = state.local.acquire().await.map_err(|e| internal(e.to_string()))?;
        let g = generator.clone();
        blocking(move || {
            g.generate(&GenerateRequest { messages, max_tokens, deadline: Some(Duration::from_secs(600)) }).map_err(
                |e| match e {
                    GenerateError::Timeout { .. } => ApiError::new(StatusCode::GATEWAY_TIMEOUT, e.to_string()),
                    e => internal(e.to_string()),
                },
            )
        })
        .await?
    };
    let stored_at = Instant::now();
    let stored = Turn::new(String::new(), Role::Assistant, generation.text.clone());
    let at = prepared.reply_at;
    {
        let (state, id) = (state.clone(), id.clone());
        blocking(move || {
            store_reply(&state, &id, stored, at);
            Ok(())
        })
        .await?;
    }
    state.metrics.answered(started.elapsed(), overhead + stored_at.elapsed());
    let finish = if generation.generated_tokens >= max_tokens { "length" } else { "stop" };
    let usage = json!({"prompt_tokens": generation.prompt_tokens, "completion_tokens": generation.generated_tokens,
        "total_tokens": generation.prompt_tokens + generation.generated_tokens});
    let reply = Turn::new(String::new(), Role::Assistant, generation.text);
    Ok(completion(&format!("chatcmpl-{id}-{at}"), &model, &reply, finish, Some(usage), request.stream))
}

/// A local model's reply streamed as it is generated: each piece is a chunk as soon as the
/// model decides it; the reply is stored when it completes, as a streamed upstream reply is.
#[allow(clippy::too_many_arguments)]
fn local_streamed(
    state: Arc<AppState>,
    id: String,
    at: usize,
    request: GenerateRequest,
    generator: Arc<dyn strata_core::Generator>,
    model: String,
    started: Instant,
    overhead: Duration,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let chunks = Arc::new(Chunks::new(format!("chatcmpl-{id}-{at}"), model));
    let _ = tx.try_send(Bytes::from(chunks.frame(json!({"role": "assistant", "content": ""}), None)));
    tokio::spawn(async move {
        let Ok(_turn) = state.local.acquire().await else { return };
        let (pieces, framing) = (tx.clone(), chunks.clone());
        let max_tokens = request.max_tokens;
        let generated = tokio::task::spawn_blocking(move || {
            generator.generate_streaming(&request, &mut |piece| {
                // A client that left stops receiving; the reply is still generated and stored.
                let _ = pieces.blocking_send(Bytes::from(framing.frame(json!({"content": piece}), None)));
            })
        })
        .await
        .map_err(|e| format!("generation task failed: {e}"))
        .and_then(|g| g.map_err(|e| e.to_string()));
        match generated {
            Ok(generation) => {
                let stored_at = Instant::now();
                let reply = Turn::new(String::new(), Role::Assistant, generation.text);
                let s = state.clone();
                let _ = tokio::task::spawn_blocking(move || store_reply(&s, &id, reply, at)).await;
                state.metrics.answered(started.elapsed(), overhead + stored_at.elapsed());
                let finish = if generation.generated_tokens >= max_tokens { "length" } else { "stop" };
                let _ = tx.send(Bytes::from(chunks.frame(json!({}), Some(finish)))).await;
            }
            Err(message) => {
                log(&format!("conversation {id}: {message}"));
                state.metrics.failed();
                let error = json!({"error": {"message": message, "type": "server_error"}});
                let _ = tx.send(Bytes::from(format!("data: {error}\n\n"))).await;
            }
        }
        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
    });
    pass(StatusCode::OK, Some(HeaderValue::from_static("text/event-stream")), stream_body(rx))
}

/// A reply Strata has in hand (from the local model, or stored) as a chat completion: one
/// JSON object, or its events when the client asked for a stream. The whole reply is known
/// before it is sent, so a stream carries it as one delta.
fn completion(id: &str, model: &str, reply: &Turn, finish: &str, usage: Option<Value>, stream: bool) -> Response {
    let created = unix_now();
    let calls = api::wire_messages(&[Message {
        role: Role::Assistant,
        name: None,
        content: String::new(),
        tool_call_id: None,
        tool_calls: reply.tool_calls.clone(),
    }])[0]
        .get("tool_calls")
        .cloned();
    let finish = if calls.is_some() { "tool_calls" } else { finish };
    if stream {
        let chunks = Chunks { id: id.to_string(), created, model: model.to_string() };
        let mut delta = json!({"content": reply.content});
        if let Some(calls) = &calls {
            let indexed: Vec<Value> = calls
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, c)| {
                    let mut c = c.clone();
                    c["index"] = json!(i);
                    c
                })
                .collect();
            delta["tool_calls"] = Value::Array(indexed);
        }
        let body = [
            chunks.frame(json!({"role": "assistant", "content": ""}), None),
            chunks.frame(delta, None),
            chunks.frame(json!({}), Some(finish)),
            "data: [DONE]\n\n".to_string(),
        ]
        .concat();
        return pass(StatusCode::OK, Some(HeaderValue::from_static("text/event-stream")), Body::from(body));
    }
    let mut message = json!({"role": "assistant", "content": reply.content});
    if let Some(calls) = calls {
        message["tool_calls"] = calls;
    }
    let mut v = json!({"id": id, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}]});
    if let Some(u) = usage {
        v["usage"] = u;
    }
    axum::Json(v).into_response()
}
