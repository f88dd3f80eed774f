//! The generator against a minimal HTTP/1.1 server on loopback that answers from a script:
//! what it sends, how it reads answers, when it retries and when it gives up.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use strata_core::{ChatMessage, GenerateError, GenerateRequest, Generator, Role};

use crate::{HttpConfig, HttpGenerator, SpecError};

/// One scripted answer: a status, extra headers, a body, and how long to wait before it.
struct Answer {
    status: u16,
    headers: &'static str,
    body: String,
    delay: Duration,
}

fn ok(content: &str) -> Answer {
    Answer {
        status: 200,
        headers: "",
        body: serde_json::json!({
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": content } }],
            "usage": { "prompt_tokens": 31, "completion_tokens": 7 }
        })
        .to_string(),
        delay: Duration::ZERO,
    }
}

fn status(status: u16, body: &str) -> Answer {
    Answer { status, headers: "", body: body.to_string(), delay: Duration::ZERO }
}

/// A request as the server read it: the request line, the headers (lowercased names) and the body.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    headers: Vec<(String, String)>,
    body: String,
}

/// Serves `answers` in order, one per connection, and records each request.
fn serve(answers: Vec<Answer>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for answer in answers {
            let Ok((stream, _)) = listener.accept() else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let mut headers = Vec::new();
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                let h = h.trim_end().to_string();
                if h.is_empty() {
                    break;
                }
                let (name, value) = h.split_once(':').unwrap();
                headers.push((name.to_lowercase(), value.trim().to_string()));
            }
            let length: usize =
                headers.iter().find(|(n, _)| n == "content-length").map_or(0, |(_, v)| v.parse().unwrap());
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            log.lock().unwrap().push(Seen {
                line: line.trim_end().to_string(),
                headers,
                body: String::from_utf8(body).unwrap(),
            });
            std::thread::sleep(answer.delay);
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n{}",
                answer.status,
                answer.body.len(),
                answer.headers,
                answer.body
            );
        }
    });
    (url, seen)
}

fn generator(url: &str, key: Option<&str>) -> HttpGenerator {
    HttpGenerator::new(HttpConfig {
        base_url: url.to_string(),
        model: "tiny".to_string(),
        api_key: key.map(str::to_string),
        timeout: Duration::from_secs(5),
        retries: 2,
        backoff: Duration::from_millis(20),
    })
}

fn request(deadline: Option<Duration>) -> GenerateRequest {
    GenerateRequest {
        messages: vec![
            ChatMessage { role: Role::System, content: "Summarise.".to_string() },
            ChatMessage { role: Role::User, content: "We chose Kafka.".to_string() },
        ],
        max_tokens: 64,
        deadline,
    }
}

#[test]
fn a_completion_is_asked_for_and_read() {
    let (url, seen) = serve(vec![ok("The team chose Kafka.")]);
    let g = generator(&url, Some("sk-test"));
    let out = g.generate(&request(None)).unwrap();
    assert_eq!((out.text.as_str(), out.prompt_tokens, out.generated_tokens), ("The team chose Kafka.", 31, 7));
    assert_eq!(g.model_id(), format!("tiny@{url}"));
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].line, "POST /v1/chat/completions HTTP/1.1");
    assert!(seen[0].headers.contains(&("authorization".to_string(), "Bearer sk-test".to_string())));
    let body: serde_json::Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(body["model"], "tiny");
    assert_eq!(body["max_tokens"], 64);
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["messages"][0], serde_json::json!({ "role": "system", "content": "Summarise." }));
    assert_eq!(body["messages"][1], serde_json::json!({ "role": "user", "content": "We chose Kafka." }));
    // The key never shows in debug output.
    assert!(!format!("{g:?}").contains("sk-test"));
}

#[test]
fn busy_and_failing_servers_are_retried_with_backoff() {
    let mut busy = status(429, r#"{"error":"slow down"}"#);
    busy.headers = "Retry-After: 0\r\n";
    let (url, seen) = serve(vec![busy, status(503, "overloaded"), ok("fine")]);
    assert_eq!(generator(&url, None).generate(&request(None)).unwrap().text, "fine");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|s| !s.headers.iter().any(|(n, _)| n == "authorization")));
}

#[test]
fn retries_end_with_the_last_error_named() {
    let (url, seen) = serve((0..3).map(|_| status(500, "boom\n<html>")).collect());
    let err = generator(&url, None).generate(&request(None)).unwrap_err().to_string();
    assert_eq!(err, format!("generator tiny@{url}: 3 attempts failed; the last: HTTP 500: boom"));
    assert_eq!(seen.lock().unwrap().len(), 3);
}

#[test]
fn a_client_error_is_not_retried() {
    let (url, seen) = serve(vec![status(400, r#"{"error":{"message":"unknown model tiny"}}"#), ok("never")]);
    let err = generator(&url, None).generate(&request(None)).unwrap_err().to_string();
    assert!(err.contains("HTTP 400") && err.contains("unknown model tiny"), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn an_answer_that_is_not_a_completion_is_an_error() {
    let (url, _) = serve(vec![status(200, r#"{"choices": []}"#)]);
    let err = generator(&url, None).generate(&request(None)).unwrap_err().to_string();
    assert!(err.contains("no choices[0].message.content"), "{err}");
}

#[test]
fn a_refusal_or_a_filtered_reply_is_an_error_not_text() {
    let refused = r#"{"choices": [{"message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}, "finish_reason": "stop"}]}"#;
    let filtered = r#"{"choices": [{"message": {"role": "assistant", "content": "The answer is"}, "finish_reason": "content_filter"}]}"#;
    let (url, seen) = serve(vec![status(200, refused), status(200, filtered)]);
    let g = generator(&url, None);
    let err = g.generate(&request(None)).unwrap_err().to_string();
    assert!(err.contains("the model refused: I can't help with that."), "{err}");
    let err = g.generate(&request(None)).unwrap_err().to_string();
    assert!(err.contains("content filter"), "{err}");
    // Neither is retried: asking again would only be refused again.
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn the_deadline_bounds_attempts_and_waits() {
    let mut slow = ok("too late");
    slow.delay = Duration::from_secs(3);
    let (url, _) = serve(vec![slow]);
    let start = Instant::now();
    let err = generator(&url, None).generate(&request(Some(Duration::from_millis(300)))).unwrap_err();
    assert!(matches!(err, GenerateError::Timeout { .. }), "{err}");
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
}

#[test]
fn endpoints_are_named_by_url_and_model() {
    let c = HttpConfig::parse("http://127.0.0.1:8080/v1/#qwen2.5-coder").unwrap();
    assert_eq!((c.base_url.as_str(), c.model.as_str()), ("http://127.0.0.1:8080/v1", "qwen2.5-coder"));
    assert_eq!(HttpConfig::parse("https://example.org/v1").unwrap().model, "default");
    for bad in ["http://", "ftp://host/v1", "qwen", "http:///v1"] {
        assert_eq!(HttpConfig::parse(bad), Err(SpecError::NotUrl { spec: bad.to_string() }));
    }
    assert!(HttpConfig::is_endpoint("https://x") && !HttpConfig::is_endpoint("smollm2"));
}
