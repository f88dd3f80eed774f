//! The server's counters, rendered in Prometheus' text format for `GET /metrics`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency histograms' buckets, in seconds.
const BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0];

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (c, &b) in self.counts.iter_mut().zip(&BUCKETS) {
            if seconds <= b {
                *c += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (c, b) in self.counts.iter().zip(BUCKETS) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {}", self.sum, self.count);
    }
}

/// What `/metrics` reports. Counters only grow; the gauges are read when rendered.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Chat requests by outcome: answered, refused (4xx), failed (5xx or upstream error).
    answered: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
    /// Tokens of the message lists clients sent, and of the contexts the model was sent.
    tokens_in: AtomicU64,
    tokens_sent: AtomicU64,
    turns_stored: AtomicU64,
    latency: Mutex<Histogram>,
    overhead: Mutex<Histogram>,
}

impl Metrics {
    pub(crate) fn answered(&self, total: Duration, overhead: Duration) {
        self.answered.fetch_add(1, Ordering::Relaxed);
        self.latency.lock().unwrap_or_else(|p| p.into_inner()).observe(total.as_secs_f64());
        self.overhead.lock().unwrap_or_else(|p| p.into_inner()).observe(overhead.as_secs_f64());
    }

    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn tokens(&self, sent_by_client: usize, sent_to_model: usize) {
        self.tokens_in.fetch_add(sent_by_client as u64, Ordering::Relaxed);
        self.tokens_sent.fetch_add(sent_to_model as u64, Ordering::Relaxed);
    }

    pub(crate) fn stored(&self, turns: usize) {
        self.turns_stored.fetch_add(turns as u64, Ordering::Relaxed);
    }

    /// The text `/metrics` answers with; the gauges of `census` are read by the caller.
    pub(crate) fn render(&self, census: crate::Census) -> String {
        let crate::Census { conversations, summaries, embeddings, reranked } = census;
        let mut out = String::new();
        let _ = writeln!(out, "# HELP strata_requests_total Chat completion requests by outcome.");
        let _ = writeln!(out, "# TYPE strata_requests_total counter");
        for (outcome, n) in [("answered", &self.answered), ("refused", &self.refused), ("failed", &self.failed)] {
            let _ = writeln!(out, "strata_requests_total{{outcome=\"{outcome}\"}} {}", n.load(Ordering::Relaxed));
        }
        let tokens_in = self.tokens_in.load(Ordering::Relaxed);
        let tokens_sent = self.tokens_sent.load(Ordering::Relaxed);
        let reduction = if tokens_in == 0 { 0.0 } else { 1.0 - tokens_sent as f64 / tokens_in as f64 };
        for (name, help, kind, value) in [
            ("strata_tokens_in_total", "Tokens of the message lists clients sent.", "counter", tokens_in as f64),
            ("strata_tokens_sent_total", "Tokens of the contexts sent to the model.", "counter", tokens_sent as f64),
            ("strata_token_reduction", "1 - tokens sent / tokens in, over all requests.", "gauge", reduction),
            (
                "strata_turns_stored_total",
                "Turns stored (messages and replies).",
                "counter",
                self.turns_stored.load(Ordering::Relaxed) as f64,
            ),
            ("strata_conversations_open", "Conversations held in memory.", "gauge", conversations as f64),
            ("strata_summaries_pending", "Summaries queued or running in the background.", "gauge", summaries as f64),
            (
                "strata_embeddings_pending",
                "Stored turns waiting for their vectors (found by their words until then).",
                "gauge",
                embeddings.0 as f64,
            ),
            (
                "strata_embeddings_shed_total",
                "Stored turns not queued for vectors because the backlog was full (found by their words until their conversation is opened again).",
                "counter",
                embeddings.1 as f64,
            ),
            (
                "strata_token_memo_bytes",
                "Text bytes the tokenizers' count memos hold (each starts afresh past 32 MiB).",
                "gauge",
                strata_tokens::memo_bytes() as f64,
            ),
            (
                "strata_sqlite_heap_bytes",
                "Bytes SQLite holds on the heap: page caches, schemas and statements of every connection.",
                "gauge",
                strata_store::sqlite_heap_bytes() as f64,
            ),
            (
                "strata_reranked_total",
                "Question-aware contexts whose recall candidates the reranker read.",
                "counter",
                reranked.contexts as f64,
            ),
            (
                "strata_rerank_cut_short_total",
                "Reranked contexts that ran out of --rerank-ms (or had a model call fail); the fused order stood for the rest.",
                "counter",
                reranked.cut_short as f64,
            ),
            (
                "strata_rerank_cut_short_ratio",
                "Share of the reranked contexts that were cut short (0 before any).",
                "gauge",
                reranked.cut_short_share(),
            ),
            (
                "strata_rerank_passages_total",
                "Passages the reranker scored, over all contexts: its cost.",
                "counter",
                reranked.passages as f64,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        }
        self.latency.lock().unwrap_or_else(|p| p.into_inner()).render(
            &mut out,
            "strata_request_seconds",
            "Time to answer a chat request, the model's time included.",
        );
        self.overhead.lock().unwrap_or_else(|p| p.into_inner()).render(
            &mut out,
            "strata_overhead_seconds",
            "Time a chat request spent in Strata: storing turns, building the context, storing the reply.",
        );
        out
    }
}
