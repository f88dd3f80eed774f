//! The routes that show what the server holds: the models, a conversation's context and why,
//! its stored turns, the prompts it last forwarded, and the metrics.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use strata_core::{Context, Tier};

use crate::api::{self, ApiError};
use crate::{internal, AppState, Backend};

pub(crate) async fn models(State(state): State<Arc<AppState>>) -> Response {
    match &state.config.backend {
        Backend::Local { generator, .. } => Json(json!({"object": "list", "data": [
            {"id": generator.model_id(), "object": "model", "created": 0, "owned_by": "strata"}
        ]}))
        .into_response(),
        Backend::Upstream { base, key, .. } => {
            let url = format!("{}/models", base.trim_end_matches('/'));
            let mut call = state.client.get(&url);
            if let Some(k) = key {
                call = call.bearer_auth(k);
            }
            let response = match call.send().await {
                Ok(r) => r,
                Err(e) => {
                    return ApiError::new(StatusCode::BAD_GATEWAY, format!("upstream {url}: {e}")).into_response()
                }
            };
            let status = response.status();
            let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
            match response.bytes().await {
                Ok(bytes) => {
                    let mut r = Response::new(axum::body::Body::from(bytes));
                    *r.status_mut() = status;
                    if let Some(ct) = content_type {
                        r.headers_mut().insert(header::CONTENT_TYPE, ct);
                    }
                    r
                }
                Err(e) => ApiError::new(StatusCode::BAD_GATEWAY, format!("upstream {url}: {e}")).into_response(),
            }
        }
    }
}

/// The conversation in the path, checked, and known to this server or its store.
fn known(state: &AppState, id: &str) -> Result<(), ApiError> {
    if !api::valid_id(id) {
        return Err(ApiError::field("id", "expected 1 to 128 characters of letters, digits and . _ : @ -"));
    }
    if !state.exists(id)? {
        return Err(ApiError::new(StatusCode::NOT_FOUND, format!("conversation {id}: not found")));
    }
    Ok(())
}

/// `budget` (default: the server's for a request without `max_tokens`) and `question`
/// (default: none, the question-agnostic context).
fn query(state: &AppState, q: &HashMap<String, String>) -> Result<(usize, Option<String>), ApiError> {
    let budget = match q.get("budget") {
        Some(b) => match b.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => return Err(ApiError::field("budget", format!("expected a positive integer, got `{b}`"))),
        },
        None => state.config.budget_for(None),
    };
    Ok((budget, q.get("question").cloned()))
}

fn blocks(context: &Context) -> Vec<Value> {
    context
        .blocks
        .iter()
        .map(|b| json!({"kind": b.kind, "role": b.role, "source_ids": b.source_ids, "tokens": b.tokens}))
        .collect()
}

async fn on_memory<T: Send + 'static>(
    state: Arc<AppState>,
    id: String,
    f: impl FnOnce(&mut strata::Memory) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(move || {
        known(&state, &id)?;
        state.with_memory(&id, f)
    })
    .await
    .map_err(|e| internal(format!("request task failed: {e}")))?
}

/// The context for `budget` and `question`, and what both inspection routes say of it: the
/// conversation, the budget, tokens, turns, and per block its kind, source turns and tokens.
fn described(
    id: &str,
    m: &mut strata::Memory,
    budget: usize,
    question: Option<&str>,
) -> Result<(Context, Value), ApiError> {
    let c = m.context(budget, question).map_err(|e| internal(e.to_string()))?;
    let v = json!({
        "conversation": id, "budget": budget, "tokens": c.total_tokens(), "turns": m.len(),
        "blocks": blocks(&c), "notes": c.notes,
    });
    Ok((c, v))
}

/// What the model would be sent now: the messages and, per block, its kind, source turns and
/// tokens.
pub(crate) async fn context(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let (budget, question) = query(&state, &q)?;
    on_memory(state, id.clone(), move |m| {
        let (c, mut v) = described(&id, m, budget, question.as_deref())?;
        v["messages"] = Value::Array(api::wire_messages(&c.messages()));
        Ok(Json(v))
    })
    .await
}

/// Why: the tiers, the policy's last plan in words, the context's blocks and notes.
pub(crate) async fn explain(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let (budget, question) = query(&state, &q)?;
    on_memory(state, id.clone(), move |m| {
        let (_, mut v) = described(&id, m, budget, question.as_deref())?;
        let [hot, warm, cool, cold] = match m.last_plan() {
            Some(p) => p.occupancy(),
            None => Tier::occupancy(m.tiers()),
        };
        v["tiers"] = json!({"hot": hot, "warm": warm, "cool": cool, "cold": cold});
        v["summaries_pending"] = json!(m.pending());
        v["plan"] = json!(m.last_plan().map(|p| p.explain()));
        Ok(Json(v))
    })
    .await
}

/// Every stored turn, in order, as the store holds it.
pub(crate) async fn turns(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let conversation = id.clone();
    on_memory(state, id, move |m| Ok(Json(json!({"conversation": conversation, "turns": m.history().turns()})))).await
}

/// The last prompts this server forwarded for the conversation (at most `sent::KEPT`, oldest
/// first), each as it was sent: what the model was actually given, where `context` shows what
/// it would be given now.
pub(crate) async fn requests(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if !api::valid_id(&id) {
        return Err(ApiError::field("id", "expected 1 to 128 characters of letters, digits and . _ : @ -"));
    }
    let data: Vec<Value> = state.sent.of(&id).iter().map(crate::sent::SentPrompt::to_json).collect();
    Ok(Json(json!({"conversation": id, "object": "list", "data": data})))
}

pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render(state.census())).into_response()
}
