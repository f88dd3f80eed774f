//! The cold store and the memory: recall latency (p50/p95) at 10k and 100k stored turns, and
//! push throughput with and without embeddings, each beside a named reference in the same run.
//!
//! Turns are LoCoMo's (real chat text, speakers and dates), cycled with fresh ids to reach the
//! sizes; vectors are MiniLM's of the same text and of each sentence of turns with several, as
//! `Memory` stores them (from the embedding cache when the eval has run, computed otherwise);
//! queries are LoCoMo's questions. Needs `cargo xtask fetch-models` and the
//! shared datasets. References: recall by BM25 alone on the same store (hybrid costs a second
//! ranking and the fusion), and pushes against a bare durable SQLite insert of the same rows
//! (the floor set by one synchronous commit per turn).

#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use strata::{Clock, Memory, MemoryConfig, Parts};
use strata_candle::{BertEmbedder, EmbedderConfig};
use strata_core::{Embedder, RecallQuery, Timestamp, Turn};
use strata_models::{CachedEmbedder, Kind};
use strata_store::{SqliteStore, Store, TurnVectors};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn stats(mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    (percentile(&ms, 0.5), percentile(&ms, 0.95))
}

struct Corpus {
    turns: Vec<Turn>,
    vectors: Vec<Vec<f32>>,
    /// Each turn's sentence vectors (none for a turn of one sentence), as `Memory` stores them.
    sentences: Vec<Vec<Vec<f32>>>,
    questions: Vec<String>,
    question_vectors: Vec<Vec<f32>>,
}

fn corpus(embedder: &dyn Embedder) -> Corpus {
    let data = std::env::var_os("STRATA_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/datasets"));
    let loaded = strata_transcript::load_path(&data.join("locomo/locomo10.json"), None).expect("LoCoMo");
    let mut turns = Vec::new();
    let mut questions = Vec::new();
    for c in &loaded.conversations {
        turns.extend(c.turns.iter().cloned());
        questions.extend(c.probes.iter().take(40).map(|p| p.question.clone()));
    }
    let texts: Vec<String> = turns.iter().map(strata_store::indexed_text).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embedder.embed(&refs).expect("embedding the turns");
    let sentences = turns
        .iter()
        .map(|t| {
            let texts = strata_store::sentence_texts(t);
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            if refs.is_empty() {
                return Vec::new();
            }
            embedder.embed(&refs).expect("embedding the sentences")
        })
        .collect();
    let qrefs: Vec<&str> = questions.iter().map(String::as_str).collect();
    let question_vectors = embedder.embed(&qrefs).expect("embedding the questions");
    Corpus { turns, vectors, sentences, questions, question_vectors }
}

/// `n` turns cycled from the corpus with fresh ids and increasing times, in `conversations`
/// conversations of equal size.
fn fill(store: &SqliteStore, corpus: &Corpus, n: usize, conversations: usize) {
    let per = n / conversations;
    for c in 0..conversations {
        let name = format!("conv{c}");
        for chunk in (0..per).collect::<Vec<_>>().chunks(2000) {
            let turns: Vec<Turn> = chunk
                .iter()
                .map(|&i| {
                    let mut t = corpus.turns[(i + c * 7) % corpus.turns.len()].clone();
                    t.id = format!("t{i}");
                    t.timestamp = Some(Timestamp(1_600_000_000 + i as i64 * 60));
                    t
                })
                .collect();
            let vectors: Vec<Option<TurnVectors>> = chunk
                .iter()
                .map(|&i| {
                    let k = (i + c * 7) % corpus.turns.len();
                    Some(TurnVectors { whole: &corpus.vectors[k], sentences: &corpus.sentences[k] })
                })
                .collect();
            store.append_batch(&name, &turns, &vectors).expect("bulk load");
        }
    }
}

fn recall_bench(corpus: &Corpus, n: usize, conversations: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bench.db");
    let start = Instant::now();
    {
        let store = SqliteStore::open(&path).expect("store");
        fill(&store, corpus, n, conversations);
    }
    let load_s = start.elapsed().as_secs_f64();
    let store = SqliteStore::open(&path).expect("reopen");
    let size_mb = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
    // The first search loads the conversation's vectors into memory: timed on its own.
    let start = Instant::now();
    let warm = RecallQuery {
        text: "warm".into(),
        k: 10,
        embedding: Some(corpus.question_vectors[0].clone()),
        time_range: None,
    };
    store.search_ranked("conv0", &warm).expect("search");
    let cold_ms = start.elapsed().as_secs_f64() * 1e3;
    let (mut bm25, mut hybrid, mut full) = (Vec::new(), Vec::new(), Vec::new());
    for (q, v) in corpus.questions.iter().zip(&corpus.question_vectors) {
        let lexical = RecallQuery { text: q.clone(), k: 100, embedding: None, time_range: None };
        let t = Instant::now();
        let a = store.search_ranked("conv0", &lexical).expect("search");
        bm25.push(t.elapsed().as_secs_f64() * 1e3);
        let both = RecallQuery { text: q.clone(), k: 100, embedding: Some(v.clone()), time_range: None };
        let t = Instant::now();
        let b = store.search_ranked("conv0", &both).expect("search");
        hybrid.push(t.elapsed().as_secs_f64() * 1e3);
        // What `recall(query, 10)` returns through the `Store` trait: turns read back.
        let top = RecallQuery { k: 10, ..both };
        let t = Instant::now();
        let c = Store::search(&store, "conv0", &top).expect("search");
        full.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(b.len() >= a.len().min(1) && c.len() <= 10);
    }
    // What the sign-bit first pass costs in ranking: the share of the hybrid top 100 that the
    // exact scan of every vector also ranks in its top 100, and its latency for reference.
    let ranked_ids = |q: &RecallQuery| -> Vec<String> {
        store.search_ranked("conv0", q).expect("search").into_iter().take(100).map(|r| r.turn_id).collect()
    };
    let queries: Vec<RecallQuery> = corpus
        .questions
        .iter()
        .zip(&corpus.question_vectors)
        .map(|(q, v)| RecallQuery { text: q.clone(), k: 100, embedding: Some(v.clone()), time_range: None })
        .collect();
    let fast: Vec<Vec<String>> = queries.iter().map(ranked_ids).collect();
    store.set_exact_scan_up_to(usize::MAX);
    let mut exact_ms = Vec::new();
    let mut shared = 0usize;
    let mut total = 0usize;
    for (q, fast) in queries.iter().zip(&fast) {
        let t = Instant::now();
        let exact = ranked_ids(q);
        exact_ms.push(t.elapsed().as_secs_f64() * 1e3);
        shared += fast.iter().filter(|id| exact.contains(id)).count();
        total += exact.len();
    }
    let (b50, b95) = stats(bm25);
    let (h50, h95) = stats(hybrid);
    let (f50, f95) = stats(full);
    let (e50, e95) = stats(exact_ms);
    println!(
        "| {n} | {conversations} | {:.1} | {load_s:.1} | {cold_ms:.1} | {b50:.2} / {b95:.2} | {h50:.2} / {h95:.2} | {f50:.2} / {f95:.2} | {e50:.2} / {e95:.2} | {:.3} | {:.2} |",
        size_mb,
        shared as f64 / total.max(1) as f64,
        h95 / b95
    );
}

fn push_bench(corpus: &Corpus, model: Arc<dyn Embedder>, n: usize) {
    // Fresh ids and increasing times: LoCoMo's ids repeat across its conversations.
    let turns: Vec<Turn> = corpus.turns[..n]
        .iter()
        .enumerate()
        .map(|(i, t)| Turn {
            id: format!("p{i}"),
            timestamp: Some(Timestamp(1_600_000_000 + i as i64 * 60)),
            ..t.clone()
        })
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    // Reference: one durable insert per turn of the same JSON, nothing else.
    let raw = rusqlite_floor(&dir.path().join("raw.db"), &turns);
    let store = SqliteStore::open(&dir.path().join("store.db")).expect("store");
    let t = Instant::now();
    for turn in &turns {
        Store::append(&store, "c", turn).expect("append");
    }
    let store_s = t.elapsed().as_secs_f64();
    let memory = |name: &str, embedder: Option<Arc<dyn Embedder>>| {
        let mut config = MemoryConfig::for_budget("c", 8000);
        config.path = Some(dir.path().join(name));
        config.clock = Clock::LastTurn;
        let parts = Parts {
            counter: Arc::new(strata_tokens::Tiktoken::o200k()),
            embedder,
            generator: None,
            embed_queue: None,
            reranker: None,
        };
        let mut m = Memory::open(config, parts).expect("memory");
        let t = Instant::now();
        for turn in &turns {
            m.push(turn.clone()).expect("push");
        }
        let s = t.elapsed().as_secs_f64();
        m.settle();
        s
    };
    let plain_s = memory("plain.db", None);
    let embedded_s = memory("embedded.db", Some(model));
    let rate = |s: f64| n as f64 / s;
    println!("| bare SQLite insert, synchronous (reference) | {:.0} | 1.00 |", rate(raw));
    println!("| SqliteStore::append (turn row, own transaction) | {:.0} | {:.2} |", rate(store_s), raw / store_s);
    println!("| Memory::push, no embeddings | {:.0} | {:.2} |", rate(plain_s), raw / plain_s);
    println!("| Memory::push, MiniLM int8 per turn | {:.0} | {:.2} |", rate(embedded_s), raw / embedded_s);
}

fn rusqlite_floor(path: &std::path::Path, turns: &[Turn]) -> f64 {
    let conn = rusqlite::Connection::open(path).expect("raw db");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
         CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL);",
    )
    .expect("raw schema");
    let t = Instant::now();
    for turn in turns {
        let body = serde_json::to_string(turn).expect("json");
        conn.execute("INSERT INTO t (body) VALUES (?1)", [body]).expect("insert");
    }
    t.elapsed().as_secs_f64()
}

fn main() {
    let models = strata_models::dir(None);
    let (dir, minilm) = strata_models::pinned(Kind::Embedder, "minilm", &models).unwrap_or_else(|e| panic!("{e}"));
    let load = || BertEmbedder::load(&dir, minilm.name, EmbedderConfig::default()).expect("MiniLM");
    let model: Arc<dyn Embedder> = Arc::new(load());
    let cached = CachedEmbedder::open(load(), &models.join(".cache")).expect("cache");
    let corpus = corpus(&cached);
    println!(
        "corpus: {} LoCoMo turns, {} questions, vectors of {}",
        corpus.turns.len(),
        corpus.questions.len(),
        model.dim()
    );
    println!();
    println!("recall over one conversation of the store (ms, p50 / p95; k = 100 per ranking)");
    println!("| stored turns | conversations | file MB | load s | first search ms | BM25 alone (reference) | hybrid BM25 + cosine, fused | top 10 read back (k = 10) | hybrid, every vector scored exactly | top 100 shared with exact | hybrid p95 / BM25 p95 |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let sizes: Vec<usize> = match std::env::var("STRATA_BENCH_QUICK") {
        Ok(_) => vec![10_000],
        Err(_) => vec![10_000, 100_000],
    };
    for &n in &sizes {
        recall_bench(&corpus, n, 1);
        recall_bench(&corpus, n, n / 1000);
    }
    println!();
    let n = 1000;
    println!("push throughput, {n} LoCoMo turns, each acknowledged after a synchronous commit (turns/s)");
    println!("| path | turns/s | throughput vs reference |");
    println!("| --- | ---: | ---: |");
    push_bench(&corpus, model, n);
}
