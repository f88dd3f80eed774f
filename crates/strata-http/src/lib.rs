//! [`HttpGenerator`]: a [`Generator`] for any OpenAI-compatible `/v1/chat/completions`
//! endpoint (llama.cpp's server, Ollama, vLLM, a hosted API), so that summaries can be written
//! by the model a deployment already runs.
//!
//! A model is named `BASE_URL#MODEL`, for example `http://127.0.0.1:8080/v1#qwen2.5-coder`
//! (the name after `#` is what the request's `model` field says; without it, `default`). The
//! API key, when the endpoint wants one, comes from `$OPENAI_API_KEY`, or from the file that
//! `$STRATA_API_KEY_FILE` names; it is sent as a bearer token and never printed.
//!
//! Each attempt has its own timeout; a 429, a 5xx or a failed connection is retried with
//! exponential backoff (a `Retry-After` in seconds is honoured); the request's deadline bounds
//! all of it, retries and waits included, and ends in [`GenerateError::Timeout`]. Decoding is
//! asked to be greedy (`temperature` 0), as the local engine decodes.

use std::time::{Duration, Instant};

use serde::Deserialize;
use strata_core::{GenerateError, GenerateRequest, Generation, Generator};

/// Where and how to reach the endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Up to and including the API version, without a trailing slash:
    /// `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// The `model` field of each request.
    pub model: String,
    pub api_key: Option<String>,
    /// How long one attempt may take.
    pub timeout: Duration,
    /// Attempts after the first, on 429, 5xx and connection failures.
    pub retries: u32,
    /// The wait before the first retry; doubled for each one after.
    pub backoff: Duration,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecError {
    #[error("model `{spec}`: an endpoint is http:// or https:// followed by a host")]
    NotUrl { spec: String },
    #[error("model `{spec}`: the API key file {path}: {message}")]
    KeyFile { spec: String, path: String, message: String },
}

impl HttpConfig {
    /// Whether `--model` names an endpoint rather than a local model.
    pub fn is_endpoint(spec: &str) -> bool {
        spec.starts_with("http://") || spec.starts_with("https://")
    }

    /// Reads `BASE_URL#MODEL`, with the defaults for the rest (a 120 s attempt, three retries
    /// from half a second) and the API key from the environment (see the crate docs).
    pub fn parse(spec: &str) -> Result<HttpConfig, SpecError> {
        let (url, model) = spec.split_once('#').unwrap_or((spec, "default"));
        let host = url.split_once("://").map_or("", |(_, rest)| rest);
        if !HttpConfig::is_endpoint(url) || host.is_empty() || host.starts_with('/') {
            return Err(SpecError::NotUrl { spec: spec.to_string() });
        }
        let api_key = match std::env::var_os("STRATA_API_KEY_FILE") {
            Some(path) => {
                let path = std::path::PathBuf::from(path);
                let key = std::fs::read_to_string(&path).map_err(|e| SpecError::KeyFile {
                    spec: spec.to_string(),
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?;
                Some(key.trim().to_string()).filter(|k| !k.is_empty())
            }
            None => std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty()),
        };
        Ok(HttpConfig {
            base_url: url.trim_end_matches('/').to_string(),
            model: if model.is_empty() { "default" } else { model }.to_string(),
            api_key,
            timeout: Duration::from_secs(120),
            retries: 3,
            backoff: Duration::from_millis(500),
        })
    }
}

/// See the crate documentation.
pub struct HttpGenerator {
    config: HttpConfig,
    /// `model@base_url`: what summaries record as their method.
    id: String,
    agent: ureq::Agent,
}

impl std::fmt::Debug for HttpGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("HttpGenerator").field("id", &self.id).field("timeout", &self.config.timeout).finish()
    }
}

#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
    /// "content_filter" where the endpoint withheld or cut the reply.
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<String>,
    /// OpenAI's refusal message, where the model declined instead of answering.
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    prompt_tokens: usize,
    #[serde(default)]
    completion_tokens: usize,
    /// OpenAI's report of prompt tokens served from its prompt cache.
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: usize,
}

/// What one attempt came to.
enum Attempt {
    Done(Generation),
    /// Worth another try, after at least this long (from `Retry-After`).
    Again {
        why: String,
        after: Option<Duration>,
    },
    Failed(String),
}

impl HttpGenerator {
    pub fn new(config: HttpConfig) -> HttpGenerator {
        let id = format!("{}@{}", config.model, config.base_url);
        HttpGenerator { agent: ureq::AgentBuilder::new().build(), config, id }
    }

    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    fn body(&self, request: &GenerateRequest) -> String {
        let messages: Vec<serde_json::Value> = request
            .messages
            .iter()
            .map(|m| serde_json::json!({ "role": m.role.as_str(), "content": m.content }))
            .collect();
        serde_json::json!({
            "model": self.config.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
            "temperature": 0,
            "stream": false,
        })
        .to_string()
    }

    fn attempt(&self, body: &str, timeout: Duration) -> Attempt {
        let mut call = self
            .agent
            .post(&format!("{}/chat/completions", self.config.base_url))
            .timeout(timeout)
            .set("Content-Type", "application/json");
        if let Some(key) = &self.config.api_key {
            call = call.set("Authorization", &format!("Bearer {key}"));
        }
        match call.send_string(body) {
            Ok(response) => match response.into_string() {
                Ok(text) => parse(&text),
                Err(e) => Attempt::Again { why: format!("reading the answer: {e}"), after: None },
            },
            Err(ureq::Error::Status(code, response)) => {
                let after =
                    response.header("Retry-After").and_then(|s| s.trim().parse::<u64>().ok()).map(Duration::from_secs);
                let text = response.into_string().unwrap_or_default();
                let why = format!("HTTP {code}: {}", one_line(&text));
                if code == 429 || code >= 500 {
                    Attempt::Again { why, after }
                } else {
                    Attempt::Failed(why)
                }
            }
            Err(ureq::Error::Transport(t)) => Attempt::Again { why: one_line(&t.to_string()), after: None },
        }
    }
}

/// The text and token counts of a chat completion.
fn parse(text: &str) -> Attempt {
    let completion: Completion = match serde_json::from_str(text) {
        Ok(c) => c,
        Err(e) => return Attempt::Failed(format!("not a chat completion ({e}): {}", one_line(text))),
    };
    // A refusal or a filtered reply is a failure, not text: a summary or an answer made of
    // it would be scored or stored as if the model had written it.
    let missing = || Attempt::Failed(format!("no choices[0].message.content in {}", one_line(text)));
    let Some(choice) = completion.choices.into_iter().next() else { return missing() };
    if let Some(refusal) = choice.message.refusal.filter(|r| !r.trim().is_empty()) {
        return Attempt::Failed(format!("the model refused: {}", one_line(&refusal)));
    }
    if choice.finish_reason.as_deref() == Some("content_filter") {
        return Attempt::Failed("the endpoint's content filter stopped the reply".to_string());
    }
    let Some(content) = choice.message.content else { return missing() };
    let usage = completion.usage.unwrap_or_default();
    Attempt::Done(Generation {
        text: content,
        prompt_tokens: usage.prompt_tokens,
        generated_tokens: usage.completion_tokens,
        reused_tokens: usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
    })
}

/// The first 200 characters of the first line: error bodies can be whole HTML pages.
fn one_line(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or("");
    match line.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line.to_string(),
    }
}

impl Generator for HttpGenerator {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn generate(&self, request: &GenerateRequest) -> Result<Generation, GenerateError> {
        let start = Instant::now();
        let left = || request.deadline.map(|d| d.saturating_sub(start.elapsed()));
        let timed_out =
            || GenerateError::Timeout { model: self.id.clone(), after: request.deadline.unwrap_or_default() };
        let body = self.body(request);
        let mut wait = self.config.backoff;
        let mut last = String::new();
        for attempt in 0..=self.config.retries {
            let timeout = match left() {
                Some(l) if l.is_zero() => return Err(timed_out()),
                Some(l) => l.min(self.config.timeout),
                None => self.config.timeout,
            };
            match self.attempt(&body, timeout) {
                Attempt::Done(g) => return Ok(g),
                Attempt::Failed(why) => return Err(GenerateError::Backend { model: self.id.clone(), message: why }),
                Attempt::Again { why, after } => {
                    last = why;
                    if attempt == self.config.retries {
                        break;
                    }
                    let pause = after.unwrap_or(wait).max(wait);
                    if left().is_some_and(|l| l <= pause) {
                        return Err(timed_out());
                    }
                    std::thread::sleep(pause);
                    wait = wait.saturating_mul(2);
                }
            }
        }
        if left().is_some_and(|l| l.is_zero()) {
            return Err(timed_out());
        }
        Err(GenerateError::Backend {
            model: self.id.clone(),
            message: format!("{} attempts failed; the last: {last}", self.config.retries + 1),
        })
    }
}

#[cfg(test)]
mod tests;
