//! `strata serve`: an OpenAI-compatible chat completions server with the tiered memory in
//! front of the model.
//!
//! A client sends its whole message list as usual. The server finds the conversation (see
//! [`api::conversation_id`]), stores the messages it has not seen before anything else
//! happens, replaces the list with the memory's context for the newest user message within
//! the budget, and forwards that to the upstream (or answers with a local model). The reply
//! goes back unchanged, streamed or not, and is stored when it completes. Summaries are made
//! by each memory's background worker; a request never waits on one.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use sha2::{Digest, Sha256};
use strata::{Clock, EmbedQueue, Memory, MemoryConfig, Parts};
use strata_core::Generator;
use strata_store::Store;

pub mod api;
mod chat;
mod inspect;
mod metrics;
mod sent;
#[cfg(test)]
mod tests;

pub use api::ApiError;
pub use chat::SseReply;
use metrics::Metrics;

/// Who answers the chat requests.
#[derive(Clone)]
pub enum Backend {
    /// An OpenAI-compatible server: its base URL (ending in `/v1` as a rule), the key sent to
    /// it, and how long it may stay silent before the request fails with 504.
    Upstream { base: String, key: Option<String>, timeout: Duration },
    /// Strata's own engine, one generation at a time; `window` is the model's context length.
    Local { generator: Arc<dyn Generator>, window: usize },
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Upstream { base, timeout, .. } => {
                f.debug_struct("Upstream").field("base", base).field("timeout", timeout).finish()
            }
            Backend::Local { generator, window } => {
                f.debug_struct("Local").field("model", &generator.model_id()).field("window", window).finish()
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// Clients must send `Authorization: Bearer KEY` when this is set. Required to listen on
    /// anything but a loopback address.
    pub api_key: Option<String>,
    pub backend: Backend,
    /// The budget of every context; `None`: the model's window less the request's
    /// `max_tokens` (or [`ServeConfig::reply_tokens`]).
    pub budget: Option<usize>,
    /// The model's context length, where the backend does not know it.
    pub window: Option<usize>,
    /// Tokens kept for the reply when a request sets no `max_tokens`.
    pub reply_tokens: usize,
    /// The memory's settings for every conversation (its id is set per conversation).
    pub memory: MemoryConfig,
    /// Largest request body, in bytes.
    pub max_body: usize,
    /// Memories held open at once (each has a worker thread); the one unused longest is
    /// closed to make room.
    pub max_open: usize,
}

impl ServeConfig {
    /// Defaults for a backend: loopback port 8080, no key, the memory sized for 8,000 tokens
    /// with half of each context for recall and the newest message always sent, a 4 MiB body
    /// limit.
    pub fn new(backend: Backend) -> ServeConfig {
        let mut memory = MemoryConfig::for_budget("", 8000);
        memory.clock = Clock::System;
        // The question is the newest message, which the model must see; recall gets half.
        memory.layout.keep_newest = true;
        memory.layout.recall = 0.5;
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            api_key: None,
            backend,
            budget: None,
            window: None,
            reply_tokens: 1024,
            memory,
            max_body: 4 << 20,
            max_open: 256,
        }
    }

    /// The budget of a request that asks for `max_tokens` of reply.
    /// A budget set is kept, except that it never reaches past a window that is known (the
    /// local model's, or `window` when set): the prompt and the reply must both fit.
    fn budget_for(&self, max_tokens: Option<usize>) -> usize {
        let (window, known) = match &self.backend {
            Backend::Local { window, .. } => (self.window.unwrap_or(*window), true),
            Backend::Upstream { .. } => (self.window.unwrap_or(8192), self.window.is_some()),
        };
        let room = window.saturating_sub(max_tokens.unwrap_or(self.reply_tokens)).max(1);
        match self.budget {
            Some(b) if known => b.min(room),
            Some(b) => b,
            None => room,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error("--listen {0}: refusing to listen beyond loopback without an API key (--api-key-file)")]
    Exposed(SocketAddr),
    #[error("--listen {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
    #[error("upstream client: {0}")]
    Client(String),
    #[error(transparent)]
    Store(#[from] strata_core::StoreError),
}

/// One conversation's memory, opened on first use.
type Slot = Arc<Mutex<Option<Memory>>>;

/// What every handler shares.
pub struct AppState {
    config: ServeConfig,
    store: Arc<dyn Store>,
    parts: Parts,
    /// Open memories by conversation, each with the tick of its last use.
    memories: Mutex<HashMap<String, (Slot, u64)>>,
    tick: std::sync::atomic::AtomicU64,
    metrics: Metrics,
    client: reqwest::Client,
    /// One local generation at a time: two would only share the cores.
    local: tokio::sync::Semaphore,
    /// The key's digest, compared in constant time.
    key_digest: Option<[u8; 32]>,
    /// The last prompts forwarded per conversation (`/v1/conversations/{id}/requests`).
    sent: sent::SentLog,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").field("config", &self.config).field("store", &self.store.location()).finish()
    }
}

impl AppState {
    pub fn new(config: ServeConfig, store: Arc<dyn Store>, mut parts: Parts) -> Result<Arc<AppState>, ServeError> {
        // Stored turns are embedded by a queue in the background, across conversations,
        // whenever no question waits for the model; a request embeds only its question.
        parts.embed_queue = parts.embedder.take().map(|e| Arc::new(EmbedQueue::start(e)));
        parts.embedder = parts.embed_queue.as_ref().map(|q| q.questions());
        if let Some(e) = &parts.embedder {
            // Checked here and not at the first request: a store written by another model
            // would otherwise fail every request.
            store.bind_embedder(e.model_id(), e.dim())?;
        }
        // Waits on the upstream are bounded where they happen (`chat.rs`).
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ServeError::Client(e.to_string()))?;
        let key_digest = config.api_key.as_deref().map(digest);
        let sent = sent::SentLog::new(config.max_open);
        Ok(Arc::new(AppState {
            config,
            store,
            parts,
            memories: Mutex::new(HashMap::new()),
            tick: std::sync::atomic::AtomicU64::new(0),
            metrics: Metrics::default(),
            client,
            local: tokio::sync::Semaphore::new(1),
            key_digest,
            sent,
        }))
    }

    /// A conversation's slot. Past `max_open` memories, the one unused longest (and not in use
    /// now) is closed: its turns, tiers and summaries are in the store, and it is opened again
    /// when its conversation comes back. Its worker is joined after the map is released.
    fn slot(&self, id: &str) -> Slot {
        let now = self.tick.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut closed = None;
        let slot = {
            let mut map = self.memories.lock().unwrap_or_else(|p| p.into_inner());
            if !map.contains_key(id) && map.len() >= self.config.max_open {
                let idle = map
                    .iter()
                    .filter(|(_, (slot, _))| Arc::strong_count(slot) == 1)
                    .min_by_key(|(_, (_, used))| *used)
                    .map(|(k, _)| k.clone());
                closed = idle.and_then(|k| map.remove(&k));
            }
            let entry = map.entry(id.to_string()).or_insert_with(|| (Slot::default(), now));
            entry.1 = now;
            entry.0.clone()
        };
        drop(closed);
        slot
    }

    /// Runs `f` on a conversation's memory, opening it from the store on first use. Blocking:
    /// call from `spawn_blocking`.
    fn with_memory<T>(&self, id: &str, f: impl FnOnce(&mut Memory) -> Result<T, ApiError>) -> Result<T, ApiError> {
        let slot = self.slot(id);
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        // Another server sharing the store (PostgreSQL behind a load balancer) may have added
        // turns since this one last saw the conversation: then it is read again.
        if let Some(m) = guard.as_ref() {
            let stored = self.store.len(id).map_err(|e| failed(format!("conversation {id}: {e}"), &e))?;
            if stored != m.len() as u64 {
                *guard = None;
            }
        }
        if guard.is_none() {
            let mut config = self.config.memory.clone();
            config.conversation = id.to_string();
            config.path = None;
            let memory = Memory::with_store(self.store.clone(), config, self.parts.clone())
                .map_err(|e| failed(format!("conversation {id}: {e}"), &e))?;
            *guard = Some(memory);
        }
        f(guard.as_mut().expect("opened above"))
    }

    /// Whether a conversation exists: open here, or stored by this or an earlier run.
    fn exists(&self, id: &str) -> Result<bool, ApiError> {
        let open =
            self.memories.lock().unwrap_or_else(|p| p.into_inner()).get(id).is_some_and(|(s, _)| {
                s.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_some_and(|m| !m.is_empty())
            });
        Ok(open || self.store.conversations().map_err(|e| internal(e.to_string()))?.iter().any(|c| c == id))
    }

    /// Open conversations, the summaries they have pending (a memory busy with a request is
    /// skipped rather than waited for), the turns waiting for their vectors, and what the
    /// reranker did.
    fn census(&self) -> Census {
        let slots: Vec<Slot> =
            self.memories.lock().unwrap_or_else(|p| p.into_inner()).values().map(|(s, _)| s.clone()).collect();
        let summaries =
            slots.iter().filter_map(|s| s.try_lock().ok().and_then(|m| m.as_ref().map(Memory::pending))).sum();
        let embeddings = self.parts.embed_queue.as_ref().map_or((0, 0), |q| (q.pending(), q.shed()));
        let reranked = self.parts.reranker.as_ref().map_or_else(Default::default, |r| r.counts());
        Census { conversations: slots.len(), summaries, embeddings, reranked }
    }
}

/// The server's gauges, read when `/metrics` is asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Census {
    pub(crate) conversations: usize,
    pub(crate) summaries: usize,
    /// Stored turns waiting for their vectors, and those not queued because too many were.
    pub(crate) embeddings: (usize, usize),
    /// What the reranker did: contexts, those that ran out of time, passages scored.
    pub(crate) reranked: strata::RerankCounts,
}

fn internal(message: String) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
}

/// A memory's or the store's failure as the client sees it: 503 while the store's disk is
/// full or its database server away (nothing of the failed write was kept, and the same
/// request, sent again, stores what is missing), else 500.
fn failed(message: String, e: &(dyn std::error::Error + 'static)) -> ApiError {
    let store = match e.downcast_ref::<strata::MemoryError>() {
        Some(strata::MemoryError::Store(s)) => Some(s),
        _ => e.downcast_ref::<strata_core::StoreError>(),
    };
    if store.is_some_and(strata_core::StoreError::is_transient) {
        return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("{message}; send the request again"));
    }
    internal(message)
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Equal digests, compared without an early exit: the time taken says nothing about where
/// a wrong key first differs.
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn authorize(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if let Some(want) = &state.key_digest {
        let given = request
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let ok = given.is_some_and(|k| same_digest(&digest(k.trim()), want));
        if !ok {
            let message = if given.is_some() {
                "Authorization: wrong API key"
            } else {
                "Authorization: missing (send `Authorization: Bearer KEY`)"
            };
            return ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
        }
    }
    next.run(request).await
}

/// The routes, with the key check on all of them but `/healthz`.
pub fn router(state: Arc<AppState>) -> Router {
    let guarded = Router::new()
        .route("/v1/chat/completions", post(chat::completions))
        .route("/v1/models", get(inspect::models))
        .route("/v1/conversations/{id}/context", get(inspect::context))
        .route("/v1/conversations/{id}/explain", get(inspect::explain))
        .route("/v1/conversations/{id}/turns", get(inspect::turns))
        .route("/v1/conversations/{id}/requests", get(inspect::requests))
        .route("/metrics", get(inspect::metrics))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), authorize));
    Router::new()
        .route("/healthz", get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }))
        .merge(guarded)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "this route does not take that method")
        })
        .layer(DefaultBodyLimit::max(state.config.max_body))
        .with_state(state)
}

/// Checks the address against the key rule and binds it.
pub async fn bind(config: &ServeConfig) -> Result<tokio::net::TcpListener, ServeError> {
    if !config.listen.ip().is_loopback() && config.api_key.is_none() {
        return Err(ServeError::Exposed(config.listen));
    }
    tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Bind { addr: config.listen, source })
}

/// Serves until SIGINT or SIGTERM, then finishes the requests in flight.
pub async fn serve(listener: tokio::net::TcpListener, state: Arc<AppState>) -> Result<(), ServeError> {
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown()).await?;
    Ok(())
}

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// Serves on a runtime of its own until SIGINT or SIGTERM: for the `strata` binary, which is
/// not async. `ready` is called with the bound address before the first request is taken.
pub fn run(
    config: ServeConfig,
    store: Arc<dyn Store>,
    parts: Parts,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let state = AppState::new(config, store, parts)?;
        let listener = bind(&state.config).await?;
        ready(listener.local_addr()?);
        serve(listener, state).await
    })
}
