//! The server over loopback against a recording upstream that answers at once: what is
//! stored, what is forwarded, what each bad request gets.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::{get, post};
use serde_json::{json, Value};
use strata::Parts;
use strata_core::{EmbedError, Embedder, Role, TokenCounter};
use strata_store::{SqliteStore, Store};

use super::*;
use crate::chat::SseReply;

/// What the fake upstream was sent, and how it answers.
#[derive(Default)]
struct Upstream {
    requests: Mutex<Vec<Value>>,
    /// Answer with this status and body instead of a completion.
    fail: Mutex<Option<(u16, String)>>,
    /// Wait this long before answering.
    delay: Mutex<Option<Duration>>,
}

/// The reply echoes how many messages the upstream got, so a test can tell replies apart.
fn completion(messages: usize) -> Value {
    json!({"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("got {messages} messages")}, "finish_reason": "stop"}]})
}

const STREAM: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"streamed \"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"reply\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

async fn start_upstream() -> (SocketAddr, Arc<Upstream>) {
    let up = Arc::new(Upstream::default());
    let app =
        axum::Router::new()
            .route(
                "/v1/chat/completions",
                post(
                    |axum::extract::State(up): axum::extract::State<Arc<Upstream>>,
                     axum::Json(v): axum::Json<Value>| async move {
                        let n = v["messages"].as_array().map_or(0, Vec::len);
                        let stream = v["stream"] == json!(true);
                        up.requests.lock().unwrap().push(v);
                        let delay = *up.delay.lock().unwrap();
                        if let Some(d) = delay {
                            tokio::time::sleep(d).await;
                        }
                        if let Some((status, body)) = up.fail.lock().unwrap().clone() {
                            return (axum::http::StatusCode::from_u16(status).unwrap(), body).into_response();
                        }
                        if stream {
                            return ([(axum::http::header::CONTENT_TYPE, "text/event-stream")], STREAM).into_response();
                        }
                        axum::Json(completion(n)).into_response()
                    },
                ),
            )
            .route("/v1/models", get(|| async { axum::Json(json!({"object": "list", "data": [{"id": "fake"}]})) }))
            .with_state(up.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, up)
}

fn counter() -> Arc<dyn TokenCounter> {
    Arc::new(strata_tokens::Tiktoken::o200k())
}

struct Running {
    base: String,
    state: Arc<AppState>,
    client: reqwest::Client,
}

async fn start(upstream: SocketAddr, tweak: impl FnOnce(&mut ServeConfig)) -> Running {
    start_on(upstream, Arc::new(SqliteStore::in_memory().unwrap()), tweak).await
}

async fn start_on(upstream: SocketAddr, store: Arc<dyn Store>, tweak: impl FnOnce(&mut ServeConfig)) -> Running {
    start_with(upstream, store, None, tweak).await
}

async fn start_with(
    upstream: SocketAddr,
    store: Arc<dyn Store>,
    embedder: Option<Arc<dyn Embedder>>,
    tweak: impl FnOnce(&mut ServeConfig),
) -> Running {
    let mut config = ServeConfig::new(Backend::Upstream {
        base: format!("http://{upstream}/v1"),
        key: None,
        timeout: Duration::from_secs(5),
    });
    config.budget = Some(300);
    config.memory =
        strata::MemoryConfig { layout: config.memory.layout.clone(), ..strata::MemoryConfig::for_budget("", 300) };
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    tweak(&mut config);
    let state = AppState::new(
        config,
        store,
        Parts { counter: counter(), embedder, generator: None, embed_queue: None, reranker: None },
    )
    .unwrap();
    let listener = bind(&state.config).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve(listener, state.clone()));
    Running { base, state, client: reqwest::Client::new() }
}

impl Running {
    async fn chat(&self, conversation: &str, messages: &[(&str, &str)]) -> (u16, Value) {
        let msgs: Vec<Value> = messages.iter().map(|(r, c)| json!({"role": r, "content": c})).collect();
        self.post_json(conversation, &json!({"model": "fake", "messages": msgs})).await
    }

    /// The response itself, for reading a stream.
    async fn send(&self, conversation: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(format!("{}/v1/chat/completions", self.base))
            .header("X-Strata-Conversation", conversation)
            .body(serde_json::to_vec(body).unwrap())
            .send()
            .await
            .unwrap()
    }

    async fn post_json(&self, conversation: &str, body: &Value) -> (u16, Value) {
        self.post_raw(conversation, serde_json::to_vec(body).unwrap(), None).await
    }

    async fn post_raw(&self, conversation: &str, body: Vec<u8>, key: Option<&str>) -> (u16, Value) {
        let mut r = self.client.post(format!("{}/v1/chat/completions", self.base)).body(body);
        if !conversation.is_empty() {
            r = r.header("X-Strata-Conversation", conversation);
        }
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.client.get(format!("{}{path}", self.base)).send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    async fn stored(&self, conversation: &str) -> Vec<(String, String)> {
        let (status, v) = self.get(&format!("/v1/conversations/{conversation}/turns")).await;
        assert_eq!(status, 200, "{v}");
        v["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["role"].as_str().unwrap().to_string(), t["content"].as_str().unwrap().to_string()))
            .collect()
    }
}

/// A one-line JSON error of the OpenAI shape, whose message names `names`.
fn assert_error(status: u16, v: &Value, want: u16, names: &str) {
    assert_eq!(status, want, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_else(|| panic!("not a JSON error: {v}"));
    assert!(message.contains(names), "{message:?} should name {names:?}");
    assert!(!serde_json::to_string(v).unwrap().contains('\n'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_are_stored_once_and_the_reply_after_them() {
    let (up, log) = start_upstream().await;
    let s = start(up, |_| {}).await;
    let (status, v) = s.chat("c1", &[("system", "Be brief."), ("user", "hello")]).await;
    assert_eq!(status, 200, "{v}");
    let reply = v["choices"][0]["message"]["content"].as_str().unwrap().to_string();
    // The client resends its whole history with the reply and a new message.
    let (status, _) =
        s.chat("c1", &[("system", "Be brief."), ("user", "hello"), ("assistant", &reply), ("user", "again")]).await;
    assert_eq!(status, 200);
    let stored = s.stored("c1").await;
    let roles: Vec<&str> = stored.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "assistant"]);
    assert_eq!(stored[1].1, "hello");
    assert_eq!(stored[3].1, "again");
    // A retry of the same request (its response lost) gets the stored reply, and the
    // upstream is not asked again: the client's history and the store stay the same.
    let asked = log.requests.lock().unwrap().len();
    let (status, v) =
        s.chat("c1", &[("system", "Be brief."), ("user", "hello"), ("assistant", &reply), ("user", "again")]).await;
    assert_eq!(status, 200);
    assert_eq!(v["choices"][0]["message"]["content"].as_str(), Some(stored[4].1.as_str()));
    assert_eq!(log.requests.lock().unwrap().len(), asked);
    assert_eq!(s.stored("c1").await.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_gets_the_context_within_the_budget_and_only_its_own_conversation() {
    let (up, log) = start_upstream().await;
    let s = start(up, |c| c.budget = Some(300)).await;
    let mut a: Vec<(String, String)> = vec![("system".into(), "You are a helpful assistant.".into())];
    let mut b = a.clone();
    for i in 0..40 {
        for (list, who, fact) in [(&mut a, "a", "apricot"), (&mut b, "b", "blueberry")] {
            list.push(("user".into(), format!("Message {i} of conversation {who}: today the {fact} crate needed work on module {i}, and it went fine.")));
            let refs: Vec<(&str, &str)> = list.iter().map(|(r, c)| (r.as_str(), c.as_str())).collect();
            let (status, v) = s.chat(who, &refs).await;
            assert_eq!(status, 200, "{v}");
            list.push(("assistant".into(), v["choices"][0]["message"]["content"].as_str().unwrap().to_string()));
        }
    }
    let counter = counter();
    let requests = log.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 80);
    for r in &requests {
        let text = serde_json::to_string(&r["messages"]).unwrap();
        // Each request carries only its own conversation's turns.
        assert!(!(text.contains("apricot") && text.contains("blueberry")), "{text}");
        let tokens: usize = r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let role = Role::parse(m["role"].as_str().unwrap()).unwrap();
                counter.count_message(role, m["name"].as_str(), m["content"].as_str().unwrap(), None, &[])
            })
            .sum::<usize>()
            + 3;
        assert!(tokens <= 300, "{tokens} tokens sent at a budget of 300");
    }
    // The full history is far over the budget, and the newest message is always sent.
    let last = requests.last().unwrap()["messages"].as_array().unwrap().clone();
    assert!(last.last().unwrap()["content"].as_str().unwrap().starts_with("Message 39 of conversation b"));
    assert_eq!(s.stored("a").await.len(), 81);
    let metrics = s.client.get(format!("{}/metrics", s.base)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("strata_requests_total{outcome=\"answered\"} 80"), "{metrics}");
    let reduction: f64 =
        metrics.lines().find_map(|l| l.strip_prefix("strata_token_reduction ")).unwrap().parse().unwrap();
    assert!(reduction > 0.5, "{metrics}");
    // No reranker: the counters are there, at zero.
    assert!(metrics.contains("\nstrata_reranked_total 0\n") && metrics.contains("\nstrata_rerank_cut_short_total 0\n"));
    // The bounded caches are reported: 80 contexts counted turns through the memo, and the
    // store's connections hold pages.
    let gauge = |name: &str| -> f64 {
        metrics.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')).unwrap().parse().unwrap()
    };
    assert!(gauge("strata_token_memo_bytes") > 0.0, "{metrics}");
    assert!(gauge("strata_sqlite_heap_bytes") > 0.0, "{metrics}");
}

/// The last prompts forwarded are shown as they were sent (what the upstream received,
/// compressed or not), a few per conversation, behind the key like every other route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompts_last_forwarded_are_shown_as_sent() {
    let (up, log) = start_upstream().await;
    let s = start(up, |c| {
        c.budget = Some(300);
        c.api_key = Some("k".into());
    })
    .await;
    let mut list: Vec<(String, String)> = Vec::new();
    for i in 0..12 {
        list.push((
            "user".into(),
            format!("Message {i}: the orchard's irrigation schedule moved to {i} in the morning."),
        ));
        let msgs: Vec<Value> = list.iter().map(|(r, c)| json!({"role": r, "content": c})).collect();
        let body = serde_json::to_vec(&json!({"model": "fake", "messages": msgs})).unwrap();
        let (status, v) = s.post_raw("shown", body, Some("k")).await;
        assert_eq!(status, 200, "{v}");
        list.push(("assistant".into(), v["choices"][0]["message"]["content"].as_str().unwrap().to_string()));
    }
    let get = |path: &str, key: Option<&str>| {
        let mut r = s.client.get(format!("{}{path}", s.base));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status().as_u16(), serde_json::from_str::<Value>(&r.text().await.unwrap()).unwrap_or(Value::Null))
        }
    };
    assert_eq!(get("/v1/conversations/shown/requests", None).await.0, 401);
    let (status, shown) = get("/v1/conversations/shown/requests", Some("k")).await;
    assert_eq!(status, 200, "{shown}");
    let data = shown["data"].as_array().unwrap();
    assert_eq!(data.len(), 8, "the newest eight of twelve");
    let received = log.requests.lock().unwrap().clone();
    for (d, r) in data.iter().zip(&received[4..]) {
        assert_eq!(d["messages"], r["messages"], "shown as the upstream received it");
        assert!(d["tokens_sent"].as_u64().unwrap() <= 300);
    }
    // The history outgrew the budget: the newest prompts are the memory's context.
    assert_eq!(data.last().unwrap()["compressed"], true);
    assert!(data[0]["tokens_from_client"].as_u64().unwrap() <= data[7]["tokens_from_client"].as_u64().unwrap());
    assert_eq!(get("/v1/conversations/other/requests", Some("k")).await.1["data"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_reply_passes_unchanged_and_is_stored_when_it_completes() {
    let (up, _) = start_upstream().await;
    let s = start(up, |_| {}).await;
    let body = json!({"model": "fake", "stream": true, "messages": [{"role": "user", "content": "stream please"}]});
    let r = s.send("st", &body).await;
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    assert_eq!(r.text().await.unwrap(), STREAM);
    // Stored after the last byte went out: wait for it briefly.
    for _ in 0..100 {
        if s.stored("st").await.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        s.stored("st").await,
        [("user".into(), "stream please".into()), ("assistant".into(), "streamed reply".into())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_and_results_pass_through_and_are_stored_as_pairs() {
    let (up, log) = start_upstream().await;
    let s = start(up, |c| c.budget = Some(2000)).await;
    let call = json!({"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}});
    let body = json!({"model": "fake", "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "4 degrees, rain"},
    ]});
    let (status, v) = s.post_json("tools", &body).await;
    assert_eq!(status, 200, "{v}");
    let sent = log.requests.lock().unwrap().last().unwrap()["messages"].clone();
    assert_eq!(sent[1]["tool_calls"][0], call);
    assert_eq!(sent[2]["tool_call_id"], "call_1");
    let (_, turns) = s.get("/v1/conversations/tools/turns").await;
    assert_eq!(turns["turns"][1]["tool_calls"][0]["name"], "weather");
    assert_eq!(turns["turns"][2]["tool_call_id"], "call_1");
    // A tool result that answers no call is refused before anything is stored.
    let bad = json!({"model": "fake", "messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "y"}]});
    let (status, v) = s.post_json("tools2", &bad).await;
    assert_error(status, &v, 400, "messages[1].tool_call_id");
    assert_eq!(s.get("/v1/conversations/tools2/turns").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_failure_reaches_the_client_and_the_user_turn_stays_stored() {
    let (up, log) = start_upstream().await;
    let s = start(up, |_| {}).await;
    *log.fail.lock().unwrap() = Some((503, r#"{"error":{"message":"overloaded"}}"#.into()));
    let (status, v) = s.chat("f", &[("user", "are you there?")]).await;
    assert_eq!(status, 503);
    assert_eq!(v["error"]["message"], "overloaded");
    assert_eq!(s.stored("f").await, [("user".into(), "are you there?".into())]);
    // The retry, once the upstream is back, is answered and its reply stored after the turn.
    *log.fail.lock().unwrap() = None;
    let (status, _) = s.chat("f", &[("user", "are you there?")]).await;
    assert_eq!(status, 200);
    assert_eq!(s.stored("f").await.len(), 2);

    // An upstream that is not there: 502, and the turn is stored all the same.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let s = start(gone, |_| {}).await;
    let (status, v) = s.chat("g", &[("user", "anyone?")]).await;
    assert_error(status, &v, 502, "cannot connect");
    assert_eq!(s.stored("g").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_request_gets_its_status_and_a_one_line_json_error() {
    let (up, _) = start_upstream().await;
    let s = start(up, |c| c.max_body = 10_000).await;
    let raw = |b: &str| b.as_bytes().to_vec();
    for (body, want, names) in [
        (raw("{not json"), 400, "invalid JSON"),
        (raw("[1, 2]"), 400, "body"),
        (raw(r#"{"model": "m"}"#), 400, "messages"),
        (raw(r#"{"messages": "hi"}"#), 400, "messages"),
        (raw(r#"{"messages": []}"#), 400, "messages"),
        (raw(r#"{"messages": [{"role": "robot", "content": "x"}]}"#), 400, "messages[0].role"),
        (raw(r#"{"messages": [{"role": "user", "content": 7}]}"#), 400, "messages[0].content"),
        (raw(r#"{"messages": [{"role": "user"}]}"#), 400, "messages[0].content"),
        (
            raw(r#"{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}"#),
            400,
            "messages[0].content[0].type",
        ),
        (raw(r#"{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}"#), 400, "stream"),
        (raw(r#"{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}"#), 400, "max_tokens"),
        (raw(r#"{"messages": [{"role": "user", "content": "x"}], "user": "no spaces allowed"}"#), 400, "user"),
        (vec![b' '; 20_000], 413, "limit"),
    ] {
        let (status, v) = s.post_raw("", body, None).await;
        assert_error(status, &v, want, names);
    }
    let (status, v) = s.chat("bad id!", &[("user", "x")]).await;
    assert_error(status, &v, 400, "X-Strata-Conversation");
    // The inspection routes.
    assert_error(
        s.get("/v1/conversations/nobody/context").await.0,
        &s.get("/v1/conversations/nobody/context").await.1,
        404,
        "nobody",
    );
    let (status, v) = s.get("/v1/conversations/nobody/explain").await;
    assert_error(status, &v, 404, "nobody");
    s.chat("known", &[("user", "x")]).await;
    let (status, v) = s.get("/v1/conversations/known/context?budget=abc").await;
    assert_error(status, &v, 400, "budget");
    let (status, v) = s.get("/nowhere").await;
    assert_error(status, &v, 404, "route");
    let (status, v) = s.get("/v1/chat/completions").await;
    assert_error(status, &v, 405, "method");
    // A history that was edited under a conversation id: 409, naming the message.
    let (status, v) = s.chat("known", &[("user", "y")]).await;
    assert_error(status, &v, 409, "messages[0]");
    // The server is still up.
    assert_eq!(s.get("/healthz").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_key_every_route_but_healthz_wants_it() {
    let (up, _) = start_upstream().await;
    let s = start(up, |c| c.api_key = Some("s3cret".into())).await;
    let body = serde_json::to_vec(&json!({"messages": [{"role": "user", "content": "x"}]})).unwrap();
    let (status, v) = s.post_raw("k", body.clone(), None).await;
    assert_error(status, &v, 401, "missing");
    let (status, v) = s.post_raw("k", body.clone(), Some("wrong")).await;
    assert_error(status, &v, 401, "wrong API key");
    assert_eq!(s.post_raw("k", body, Some("s3cret")).await.0, 200);
    assert_eq!(s.get("/metrics").await.0, 401);
    assert_eq!(s.get("/healthz").await.0, 200);
}

#[tokio::test]
async fn listening_beyond_loopback_needs_a_key() {
    let mut config =
        ServeConfig::new(Backend::Upstream { base: "http://x".into(), key: None, timeout: Duration::from_secs(1) });
    config.listen = SocketAddr::from(([0, 0, 0, 0], 0));
    assert!(matches!(bind(&config).await, Err(ServeError::Exposed(_))));
    config.api_key = Some("k".into());
    assert!(bind(&config).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspection_routes_show_the_context_and_why() {
    let (up, _) = start_upstream().await;
    let s = start(up, |_| {}).await;
    s.chat("i", &[("system", "Be brief."), ("user", "My locker code is 4817.")]).await;
    let (status, v) = s.get("/v1/conversations/i/context?budget=200&question=locker").await;
    assert_eq!(status, 200, "{v}");
    assert!(v["tokens"].as_u64().unwrap() <= 200);
    assert!(serde_json::to_string(&v["messages"]).unwrap().contains("4817"));
    let (status, v) = s.get("/v1/conversations/i/explain").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["turns"], 3);
    assert!(v["plan"].as_str().unwrap().contains("score"));
    let (status, v) = s.get("/v1/models").await;
    assert_eq!((status, v["data"][0]["id"].as_str()), (200, Some("fake")));
}

#[test]
fn a_reply_is_put_back_together_from_events_split_anywhere() {
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"c9\",\"function\":{\"name\":\"look\",\"arguments\":\"{\\\"q\\\":\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n",
        ": a comment\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"tool_calls\"}]}\n\n",
    );
    for split in [1, 7, 50, stream.len()] {
        let mut sse = SseReply::default();
        for chunk in stream.as_bytes().chunks(split) {
            sse.feed(chunk);
        }
        let t = sse.finish().expect("finished");
        assert_eq!(t.content, "ok");
        assert_eq!(t.tool_calls.len(), 1);
        assert_eq!((t.tool_calls[0].id.as_str(), t.tool_calls[0].name.as_str()), ("c9", "look"));
        assert_eq!(t.tool_calls[0].arguments, "{\"q\":1}");
    }
    // A stream cut before it finished gives nothing to store.
    let mut sse = SseReply::default();
    sse.feed(&stream.as_bytes()[..100]);
    assert!(sse.finish().is_none());

    // What a stream holds is bounded: a reply past what a turn may hold, or a line that never
    // ends, is let go and not stored, however it goes on.
    let delta = format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n", "x".repeat(1 << 20));
    let endless = vec![b'y'; 1 << 20];
    for piece in [delta.as_bytes(), &endless[..]] {
        let mut sse = SseReply::default();
        for _ in 0..17 {
            sse.feed(piece);
        }
        assert!(sse.too_long());
        sse.feed(b"data: [DONE]\n\n");
        assert!(sse.finish().is_none());
    }
}

#[test]
fn the_conversation_rule() {
    let req = |user: Option<&str>, system: &str, first: &str| {
        let mut body = json!({"messages": [{"role": "system", "content": system}, {"role": "user", "content": first}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "later"}]});
        if let Some(u) = user {
            body["user"] = json!(u);
        }
        api::parse_chat(&serde_json::to_vec(&body).unwrap()).unwrap()
    };
    assert_eq!(api::conversation_id(Some("hdr"), &req(Some("u1"), "s", "q")).unwrap(), "hdr");
    assert_eq!(api::conversation_id(None, &req(Some("u1"), "s", "q")).unwrap(), "u1");
    let h = api::conversation_id(None, &req(None, "s", "q")).unwrap();
    assert!(h.starts_with("h-") && api::valid_id(&h));
    // Later messages do not change it; the system prompt or the first message does.
    let mut longer = req(None, "s", "q");
    longer.turns.truncate(2);
    assert_eq!(api::conversation_id(None, &longer).unwrap(), h);
    assert_ne!(api::conversation_id(None, &req(None, "s2", "q")).unwrap(), h);
    assert_ne!(api::conversation_id(None, &req(None, "s", "q2")).unwrap(), h);
    assert!(!api::valid_id("") && !api::valid_id("a/b") && !api::valid_id(&"x".repeat(129)));
    // Found by the chat_request fuzz target's property: ids that name a folder in a path.
    assert!(!api::valid_id(".") && !api::valid_id("..") && !api::valid_id("..."));
    assert!(api::valid_id("a..b") && api::valid_id(".hidden"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_open_limit_the_idle_memory_closes_and_reopens_from_the_store() {
    let (up, _) = start_upstream().await;
    let s = start(up, |c| c.max_open = 2).await;
    for id in ["x1", "x2", "x3"] {
        assert_eq!(s.chat(id, &[("user", &format!("I am {id}"))]).await.0, 200);
    }
    assert_eq!(s.state.census().conversations, 2);
    // x1 was closed; it comes back with its turns and goes on.
    let stored = s.stored("x1").await;
    assert_eq!(stored.len(), 2);
    let (status, _) = s.chat("x1", &[("user", "I am x1"), ("assistant", &stored[1].1), ("user", "still here")]).await;
    assert_eq!(status, 200);
    assert_eq!(s.stored("x1").await.len(), 4);
    assert_eq!(s.state.census().conversations, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_stays_silent_gets_a_504_and_the_turn_stays_stored() {
    let (up, log) = start_upstream().await;
    let s = start(up, |c| {
        c.backend =
            Backend::Upstream { base: format!("http://{up}/v1"), key: None, timeout: Duration::from_millis(300) }
    })
    .await;
    *log.delay.lock().unwrap() = Some(Duration::from_secs(3));
    let (status, v) = s.chat("slow", &[("user", "take your time")]).await;
    assert_error(status, &v, 504, "no answer within");
    assert_eq!(s.stored("slow").await, [("user".into(), "take your time".into())]);
}

/// A local model stand-in: it answers with the last message it was shown, reversed.
struct Mirror;

impl strata_core::Generator for Mirror {
    fn model_id(&self) -> &str {
        "mirror"
    }
    fn generate(
        &self,
        request: &strata_core::GenerateRequest,
    ) -> Result<strata_core::Generation, strata_core::GenerateError> {
        let last = request.messages.last().map_or(String::new(), |m| m.content.chars().rev().collect());
        Ok(strata_core::Generation { text: last, prompt_tokens: 10, generated_tokens: 3, reused_tokens: 0 })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_model_answers_plain_and_streamed_and_its_replies_are_stored() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let s = start(unused, |c| c.backend = Backend::Local { generator: Arc::new(Mirror), window: 2048 }).await;
    let (status, v) = s.chat("loc", &[("user", "abc")]).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "cba");
    assert_eq!(v["usage"]["total_tokens"], 13);
    assert_eq!(v["model"], "mirror");
    let body = json!({"model": "x", "stream": true, "messages": [
        {"role": "user", "content": "abc"}, {"role": "assistant", "content": "cba"}, {"role": "user", "content": "xyz"}]});
    let r = s.send("loc", &body).await;
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let mut sse = SseReply::default();
    sse.feed(r.text().await.unwrap().as_bytes());
    assert_eq!(sse.finish().map(|t| t.content), Some("zyx".to_string()));
    assert_eq!(s.stored("loc").await.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>(), ["abc", "cba", "xyz", "zyx"]);
    let (status, v) = s.get("/v1/models").await;
    assert_eq!((status, v["data"][0]["id"].as_str()), (200, Some("mirror")));
}

/// Connection parameters of a fresh, empty database on the server `STRATA_PG` names.
fn fresh_pg_database() -> String {
    let admin = std::env::var("STRATA_PG").expect("STRATA_PG must name a PostgreSQL server; .ci/run starts one");
    // One database per test: the tests of this process run at once.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("strata_serve_test_{}_{n}", std::process::id());
    let mut client = postgres::Client::connect(&admin, postgres::NoTls).expect("connecting to STRATA_PG");
    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).expect("dropping an old test database");
    client.batch_execute(&format!("CREATE DATABASE {name}")).expect("creating the test database");
    format!("{admin} dbname={name}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server named by STRATA_PG; .ci/run runs it with --ignored"]
async fn pg_two_servers_behind_a_balancer_share_one_conversation() {
    let params = tokio::task::spawn_blocking(fresh_pg_database).await.unwrap();
    let (up, _) = start_upstream().await;
    let mut servers = Vec::new();
    for _ in 0..2 {
        let params = params.clone();
        // Connecting blocks: off the async threads.
        let store =
            tokio::task::spawn_blocking(move || strata_store::PgStore::connect(&params).unwrap()).await.unwrap();
        servers.push(start_on(up, Arc::new(store), |_| {}).await);
    }
    let (a, b) = (&servers[0], &servers[1]);
    let mut list: Vec<(String, String)> = Vec::new();
    // The balancer alternates: each server gets every other request of the one conversation.
    for (i, s) in [a, b, a, b].into_iter().enumerate() {
        list.push(("user".into(), format!("message {i}: the {} sends its regards", ["owl", "fox", "elk", "yak"][i])));
        let refs: Vec<(&str, &str)> = list.iter().map(|(r, c)| (r.as_str(), c.as_str())).collect();
        let (status, v) = s.chat("shared", &refs).await;
        assert_eq!(status, 200, "request {i}: {v}");
        list.push(("assistant".into(), v["choices"][0]["message"]["content"].as_str().unwrap().to_string()));
    }
    for s in [a, b] {
        assert_eq!(s.stored("shared").await, list);
    }
    let (_, v) = a.get("/v1/conversations/shared/context?budget=300").await;
    assert!(serde_json::to_string(&v["messages"]).unwrap().contains("yak"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_fits_the_budget_goes_upstream_as_it_came() {
    let (up, log) = start_upstream().await;
    let s = start(up, |c| c.budget = Some(2000)).await;
    let messages = json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "name": "ana", "content": [{"type": "text", "text": "hello"}], "x-extra": 1},
    ]);
    let body = json!({"model": "fake", "temperature": 0.3, "messages": messages});
    assert_eq!(s.post_json("fits", &body).await.0, 200);
    let sent = log.requests.lock().unwrap().last().unwrap().clone();
    assert_eq!(sent["messages"], messages);
    assert_eq!(sent["temperature"], 0.3);
    // Past the budget the memory's context goes instead, within it.
    let s = start(up, |c| c.budget = Some(40)).await;
    let long = json!({"model": "fake", "messages": [
        {"role": "user", "content": "The first message talks about the weather in Lisbon in some detail, at length."},
        {"role": "assistant", "content": "It does, and the second message answers it with equal length and detail."},
        {"role": "user", "content": "And now?"},
    ]});
    assert_eq!(s.post_json("over", &long).await.0, 200);
    let sent = log.requests.lock().unwrap().last().unwrap().clone();
    assert_ne!(sent["messages"], long["messages"]);
    assert_eq!(sent["messages"].as_array().unwrap().last().unwrap()["content"], "And now?");
}

/// Letters counted into 26 buckets: a deterministic stand-in for a sentence model.
struct Letters;

impl Embedder for Letters {
    fn model_id(&self) -> &str {
        "test-letters"
    }
    fn dim(&self) -> usize {
        26
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = [0.0f32; 26];
                for b in t.bytes().filter(u8::is_ascii_alphabetic) {
                    v[usize::from(b.to_ascii_lowercase() - b'a')] += 1.0;
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / norm).collect()
            })
            .collect())
    }
}

/// With an embedder, the server stores each turn before it answers and embeds it later,
/// in the background: every stored turn gets its vectors, and `/metrics` says how many
/// are still waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_turns_are_embedded_in_the_background() {
    let (up, _) = start_upstream().await;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::in_memory().unwrap());
    let s = start_with(up, store.clone(), Some(Arc::new(Letters)), |_| {}).await;
    let mut history = Vec::new();
    for i in 0..6 {
        history.push(("user", format!("Question {i} about the apricot orchard and its irrigation.")));
        let msgs: Vec<(&str, &str)> = history.iter().map(|(r, c)| (*r, c.as_str())).collect();
        let (status, v) = s.chat("orchard", &msgs).await;
        assert_eq!(status, 200, "{v}");
        history.push(("assistant", v["choices"][0]["message"]["content"].as_str().unwrap().to_string()));
    }
    let metrics = s.client.get(format!("{}/metrics", s.base)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("strata_embeddings_pending "), "{metrics}");
    let queue = s.state.parts.embed_queue.clone().expect("a queue beside the embedder");
    tokio::task::spawn_blocking(move || queue.settle()).await.unwrap();
    let vectors = store.whole_vectors("orchard").unwrap();
    assert_eq!(vectors.len(), 12);
    assert!(vectors.iter().all(|v| v.len() == 26), "{vectors:?}");
    let metrics = s.client.get(format!("{}/metrics", s.base)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("strata_embeddings_pending 0"), "{metrics}");
}

/// A local model that notes how many tokens each prompt costs (counted as the server counts).
struct Measuring {
    prompts: Mutex<Vec<usize>>,
}

impl strata_core::Generator for Measuring {
    fn model_id(&self) -> &str {
        "measuring"
    }
    fn generate(
        &self,
        request: &strata_core::GenerateRequest,
    ) -> Result<strata_core::Generation, strata_core::GenerateError> {
        let c = counter();
        let tokens =
            request.messages.iter().map(|m| c.count_message(m.role, None, &m.content, None, &[])).sum::<usize>()
                + c.chat_format().reply_priming as usize;
        self.prompts.lock().unwrap().push(tokens);
        Ok(strata_core::Generation {
            text: "Noted.".into(),
            prompt_tokens: tokens,
            generated_tokens: 2,
            reused_tokens: 0,
        })
    }
}

/// A local model's window holds the prompt and the reply: a budget set above it is cut to
/// the window less the reply, however long the history grows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_model_is_never_sent_more_than_its_window_less_the_reply() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let model = Arc::new(Measuring { prompts: Mutex::new(Vec::new()) });
    let s = start(unused, |c| {
        c.backend = Backend::Local { generator: model.clone(), window: 600 };
        c.budget = Some(5000);
        c.reply_tokens = 100;
    })
    .await;
    let mut history: Vec<(String, String)> = Vec::new();
    for i in 0..20 {
        let text = format!("Message {i}: ") + &"the orchard's irrigation schedule changed again today. ".repeat(12);
        history.push(("user".into(), text));
        let msgs: Vec<(&str, &str)> = history.iter().map(|(r, c)| (r.as_str(), c.as_str())).collect();
        let (status, v) = s.chat("window", &msgs).await;
        assert_eq!(status, 200, "{v}");
        history.push(("assistant".into(), "Noted.".into()));
    }
    let prompts = model.prompts.lock().unwrap().clone();
    assert_eq!(prompts.len(), 20);
    assert!(prompts.iter().all(|&t| t <= 500), "{prompts:?}");
    // The history outgrew the window long before the end: the cut was needed.
    assert!(prompts.iter().rev().take(5).all(|&t| t > 300), "{prompts:?}");
}

/// A local model that decides its reply in three pieces.
struct Pieces;

impl strata_core::Generator for Pieces {
    fn model_id(&self) -> &str {
        "pieces"
    }
    fn generate(
        &self,
        request: &strata_core::GenerateRequest,
    ) -> Result<strata_core::Generation, strata_core::GenerateError> {
        self.generate_streaming(request, &mut |_| {})
    }
    fn generate_streaming(
        &self,
        _request: &strata_core::GenerateRequest,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<strata_core::Generation, strata_core::GenerateError> {
        for piece in ["Hel", "lo, ", "there."] {
            on_text(piece);
        }
        Ok(strata_core::Generation {
            text: "Hello, there.".into(),
            prompt_tokens: 5,
            generated_tokens: 3,
            reused_tokens: 0,
        })
    }
}

/// A streamed request to a local model gets each piece as its own chunk, as the model
/// decides it, and the reply they make is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_model_streams_its_reply_piece_by_piece() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let s = start(unused, |c| c.backend = Backend::Local { generator: Arc::new(Pieces), window: 2048 }).await;
    let body = json!({"model": "x", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let r = s.send("pieces", &body).await;
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let text = r.text().await.unwrap();
    let contents: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|l| *l != "[DONE]")
        .filter_map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["choices"][0]["delta"]["content"].as_str().map(String::from)
        })
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(contents, ["Hel", "lo, ", "there."], "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let mut sse = SseReply::default();
    sse.feed(text.as_bytes());
    assert_eq!(sse.finish().map(|t| t.content), Some("Hello, there.".to_string()));
    // Stored once the stream completes.
    let mut stored = s.stored("pieces").await;
    for _ in 0..50 {
        if stored.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        stored = s.stored("pieces").await;
    }
    assert_eq!(stored.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>(), ["hi", "Hello, there."]);
}

/// An upstream speaking raw HTTP, for faults a real server cannot be asked to make: it reads
/// each request, then writes `first`, waits `pause`, writes `rest`, and closes the connection.
/// Nothing at all written is a reset (the socket closed with SO_LINGER 0).
async fn raw_upstream(first: &'static str, pause: Duration, rest: &'static str) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                // The request: its headers, then as many body bytes as they announce.
                let mut got = Vec::new();
                let mut buf = [0u8; 8192];
                loop {
                    let Ok(n) = socket.read(&mut buf).await else { return };
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if got.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                if first.is_empty() && rest.is_empty() {
                    let _ = socket.set_zero_linger();
                    return;
                }
                let _ = socket.write_all(first.as_bytes()).await;
                let _ = socket.flush().await;
                tokio::time::sleep(pause).await;
                let _ = socket.write_all(rest.as_bytes()).await;
                let _ = socket.flush().await;
            });
        }
    });
    addr
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";

/// `STREAM`'s first two events as one chunk of the chunked coding.
fn first_events() -> String {
    let events: String = STREAM.split_inclusive("\n\n").take(2).collect();
    format!("{:x}\r\n{events}\r\n", events.len())
}

async fn wait_stored(s: &Running, conversation: &str, n: usize) -> Vec<(String, String)> {
    for _ in 0..100 {
        if s.stored(conversation).await.len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.stored(conversation).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_resets_the_connection_gets_a_502_and_the_turn_stays_stored() {
    let up = raw_upstream("", Duration::ZERO, "").await;
    let s = start(up, |_| {}).await;
    let (status, v) = s.chat("reset", &[("user", "hello?")]).await;
    assert!(status == 502, "{status} {v}");
    assert_error(status, &v, 502, "upstream");
    assert_eq!(s.stored("reset").await, [("user".into(), "hello?".into())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_broken_off_halfway_ends_with_an_error_event_and_stores_no_reply() {
    // Leaked once per test run: the raw upstream wants `'static` text.
    let first: &'static str = Box::leak(format!("{SSE_HEAD}{}", first_events()).into_boxed_str());
    let up = raw_upstream(first, Duration::from_millis(50), "").await;
    let s = start(up, |_| {}).await;
    let body = json!({"model": "fake", "stream": true, "messages": [{"role": "user", "content": "stream please"}]});
    let r = s.send("cut", &body).await;
    assert_eq!(r.status().as_u16(), 200);
    let text = r.text().await.expect("the stream to the client is closed properly");
    assert!(text.starts_with(&STREAM[..40]), "{text}");
    let last = text.trim_end().rsplit("\n\n").next().unwrap();
    let error: Value = serde_json::from_str(last.strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(error["error"]["code"], 502, "{last}");
    assert!(!text.contains("[DONE]"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(s.stored("cut").await, [("user".into(), "stream please".into())], "a partial reply was stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_stream_leaves_the_server_serving_and_the_reply_whole() {
    let first: &'static str = Box::leak(format!("{SSE_HEAD}{}", first_events()).into_boxed_str());
    let rest: &'static str = Box::leak(
        {
            let events: String = STREAM.split_inclusive("\n\n").skip(2).collect();
            format!("{:x}\r\n{events}\r\n0\r\n\r\n", events.len())
        }
        .into_boxed_str(),
    );
    let up = raw_upstream(first, Duration::from_millis(300), rest).await;
    let s = start(up, |_| {}).await;
    let body = json!({"model": "fake", "stream": true, "messages": [{"role": "user", "content": "stream please"}]});
    let mut r = s.send("left", &body).await;
    let piece = r.chunk().await.unwrap().expect("the first events");
    assert!(String::from_utf8_lossy(&piece).contains("data:"));
    drop(r);
    // The upstream is read to its end all the same, and the reply stored whole.
    let stored = wait_stored(&s, "left", 2).await;
    assert_eq!(stored, [("user".into(), "stream please".into()), ("assistant".into(), "streamed reply".into())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "mounts a tmpfs: needs root (CI runs it)"]
async fn disk_full_gets_a_503_keeps_every_acknowledged_turn_and_recovers() {
    let disk = strata_store::testing::SmallDisk::mount(2 << 20).unwrap();
    let store = Arc::new(SqliteStore::open(&disk.path().join("serve.db")).unwrap());
    let (up, _) = start_upstream().await;
    let s = start_on(up, store, |c| c.budget = Some(100_000)).await;
    let message = |i: usize| format!("message {i}: {}", "words to fill the disk ".repeat(150));
    let mut acknowledged = 0;
    let (status, v) = loop {
        let text = message(acknowledged);
        let (status, v) = tokio::time::timeout(
            Duration::from_secs(20),
            s.chat(&format!("d{acknowledged}"), &[("user", text.as_str())]),
        )
        .await
        .expect("the server hung on a full disk");
        if status != 200 {
            break (status, v);
        }
        acknowledged += 1;
        assert!(acknowledged < 10_000, "the disk never filled");
    };
    assert!(acknowledged > 10, "only {acknowledged} requests fit");
    assert_error(status, &v, 503, "disk is full");
    for i in 0..acknowledged {
        let stored = s.stored(&format!("d{i}")).await;
        assert_eq!(stored[0], ("user".to_string(), message(i)), "conversation d{i}");
    }
    // Space returns: the same request is answered, and its turn stored once.
    disk.resize(32 << 20).unwrap();
    let text = message(acknowledged);
    let (status, v) = s.chat(&format!("d{acknowledged}"), &[("user", text.as_str())]).await;
    assert_eq!(status, 200, "{v}");
    let stored = s.stored(&format!("d{acknowledged}")).await;
    assert_eq!(stored.iter().filter(|t| t.0 == "user").count(), 1);
}

/// PostgreSQL restarted (`STRATA_PG_RESTART`, a command `.ci/run` sets) while clients keep
/// sending: requests in the gap get 503 and are sent again, as a client would; afterwards
/// every conversation holds every message and reply its client was answered with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs STRATA_PG and STRATA_PG_RESTART (.ci/run sets both)"]
async fn pg_restarted_mid_load_loses_nothing_acknowledged() {
    let restart = std::env::var("STRATA_PG_RESTART").expect("STRATA_PG_RESTART must restart the server of STRATA_PG");
    let params = tokio::task::spawn_blocking(fresh_pg_database).await.unwrap();
    let (up, _) = start_upstream().await;
    let store = tokio::task::spawn_blocking(move || strata_store::PgStore::connect(&params).unwrap()).await.unwrap();
    let s = Arc::new(start_on(up, Arc::new(store), |c| c.budget = Some(100_000)).await);
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut clients = Vec::new();
    for k in 0..4 {
        let (s, answered) = (s.clone(), answered.clone());
        clients.push(tokio::spawn(async move {
            let mut list: Vec<(String, String)> = Vec::new();
            let mut refused = 0;
            for t in 0..=30 {
                list.push(("user".into(), format!("client {k}, message {t}")));
                let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                loop {
                    let refs: Vec<(&str, &str)> = list.iter().map(|(r, c)| (r.as_str(), c.as_str())).collect();
                    let (status, v) = s.chat(&format!("r{k}"), &refs).await;
                    if status == 200 {
                        list.push(("assistant".into(), v["choices"][0]["message"]["content"].as_str().unwrap().into()));
                        answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        break;
                    }
                    assert!(status == 503, "client {k}, message {t}: {status} {v}");
                    assert!(tokio::time::Instant::now() < deadline, "client {k}: the store never came back");
                    refused += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (k, list, refused)
        }));
    }
    while answered.load(std::sync::atomic::Ordering::Relaxed) < 40 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let status = tokio::task::spawn_blocking(move || std::process::Command::new("sh").args(["-c", &restart]).status())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "the restart command failed: {status}");
    let before = answered.load(std::sync::atomic::Ordering::Relaxed);
    let mut refused = 0;
    for c in clients {
        let (k, list, r) = c.await.unwrap();
        refused += r;
        // The last message's reply is stored when the next request carries it (if storing it
        // met the restart), so everything but that reply must be there.
        let stored = s.stored(&format!("r{k}")).await;
        assert!(stored.len() + 1 >= list.len(), "client {k}: {} stored of {}", stored.len(), list.len());
        assert_eq!(stored[..list.len() - 1], list[..list.len() - 1], "client {k}");
    }
    assert!(before < 4 * 31, "the restart came after the load had ended");
    assert!(refused > 0, "no request met the restart");
}
