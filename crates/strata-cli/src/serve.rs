//! `strata serve`: the memory server's flags, turned into a `ServeConfig`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use strata::Parts;
use strata_server::{Backend, ServeConfig};
use strata_store::{PgStore, SqliteStore, Store};

use crate::BadInput;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The OpenAI-compatible server to forward to, its base URL (e.g. http://127.0.0.1:8081/v1).
    #[arg(long, value_name = "URL", required_unless_present = "local_model", conflicts_with = "local_model")]
    upstream: Option<String>,
    /// A file holding the key sent to the upstream as `Authorization: Bearer` [default:
    /// $STRATA_UPSTREAM_KEY, else none].
    #[arg(long, value_name = "FILE")]
    upstream_key_file: Option<PathBuf>,
    /// Seconds the upstream may stay silent before a request fails with 504.
    #[arg(long, default_value_t = 600, value_name = "SECS")]
    upstream_timeout: u64,
    /// Answer with a local model instead (qwen, qwen1.5b, smollm2 or a GGUF path), on Strata's
    /// own engine.
    #[arg(long, value_name = "NAME|PATH")]
    local_model: Option<String>,
    /// Where to listen. Anything but a loopback address needs --api-key-file.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// A file holding the key clients must send as `Authorization: Bearer KEY`.
    #[arg(long, value_name = "FILE")]
    api_key_file: Option<PathBuf>,
    /// The store (SQLite), created if absent; conversations survive restarts in it.
    #[arg(long, default_value = "strata-memory.db", value_name = "PATH")]
    db: PathBuf,
    /// Store on PostgreSQL instead (`host=... dbname=... user=...` or a postgres:// URL), for
    /// several servers behind a load balancer sharing one database.
    #[arg(long, value_name = "PARAMS", conflicts_with = "db")]
    pg: Option<String>,
    /// Tokens in every context sent to the model [default: the model's window less the
    /// request's max_tokens, or less --reply-tokens when it sets none].
    #[arg(long, value_parser = crate::input::budget, allow_negative_numbers = true)]
    budget: Option<usize>,
    /// The model's context length [default: 8192 for an upstream; a local model's own, at
    /// most 4096].
    #[arg(long, value_name = "TOKENS")]
    context_window: Option<usize>,
    /// Tokens kept for the reply when a request sets no max_tokens.
    #[arg(long, default_value_t = 1024, value_name = "TOKENS")]
    reply_tokens: usize,
    /// Share of the budget for turns recalled for the newest user message; the rest goes to
    /// the newest turns, summaries and salient sentences.
    #[arg(long, default_value_t = 0.5, value_name = "SHARE")]
    recall_share: f64,
    /// Sentence embeddings for recall and topic shifts, or none (words only)
    /// [default: the model that wrote the store's vectors, else minilm].
    #[arg(long, value_parser = crate::models::names(strata_models::Kind::Embedder, true))]
    embedder: Option<String>,
    /// Reorder recall's deeper candidates for each question with a cross-encoder, or none (the
    /// fused order). It reads as many as could reach the context, each long message as its
    /// part that matches the question; --rerank-ms bounds the time it takes.
    #[arg(long, default_value = "none", value_parser = crate::models::names(strata_models::Kind::Reranker, true))]
    reranker: String,
    /// With --reranker: milliseconds one context may spend reranking; candidates not yet
    /// scored keep the fused order. Each model call is sized by the pace of the one before,
    /// so a context overruns it by at most one passage.
    #[arg(long, default_value_t = 300, value_name = "MS")]
    rerank_ms: u64,
    /// Summarise with a model (qwen, qwen1.5b, smollm2, a GGUF path, or URL#MODEL) instead of
    /// extractively; summaries are made in the background either way.
    #[arg(long, value_name = "NAME|PATH")]
    summary_model: Option<String>,
    /// Counts every budget: o200k, cl100k, or a tokenizer.json (the model's own is exact).
    /// With --local-model the model's own tokenizer counts, whatever this says.
    #[arg(long, default_value = "o200k", value_name = "NAME|PATH")]
    tokenizer: String,
    /// Strategy settings, a TOML or JSON file; its `[tiered]` table shapes the context.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Where model weights are [default: $STRATA_MODELS, else ./models, else the checkout's].
    #[arg(long, value_name = "DIR")]
    models_dir: Option<PathBuf>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 4 << 20, value_name = "BYTES")]
    max_body: usize,
    /// Conversations held open at once; the one unused longest is closed to make room (it
    /// reopens from the store).
    #[arg(long, default_value_t = 256, value_name = "N")]
    max_open: usize,
}

/// A key from a file, its surrounding whitespace trimmed; an empty file is refused.
fn read_key(path: &Path, flag: &str) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| BadInput(format!("{flag} {}: {e}", path.display())))?;
    let key = text.trim().to_string();
    if key.is_empty() {
        return Err(BadInput(format!("{flag} {}: the file is empty", path.display())).into());
    }
    Ok(key)
}

pub(crate) fn run(args: Args) -> Result<String> {
    if !(0.0..=1.0).contains(&args.recall_share) {
        return Err(BadInput(format!("--recall-share {}: expected a share from 0 to 1", args.recall_share)).into());
    }
    let models = crate::models::dir(args.models_dir.as_deref());
    // With a local model, budgets are counted in its own tokens (exactly the prompt it gets).
    let mut counter = strata_tokens::from_spec(&args.tokenizer)?;
    let backend = match (&args.upstream, &args.local_model) {
        (Some(url), _) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(BadInput(format!("--upstream {url}: expected an http:// or https:// URL")).into());
            }
            let key = match &args.upstream_key_file {
                Some(p) => Some(read_key(p, "--upstream-key-file")?),
                None => std::env::var("STRATA_UPSTREAM_KEY").ok().filter(|k| !k.is_empty()),
            };
            Backend::Upstream { base: url.clone(), key, timeout: Duration::from_secs(args.upstream_timeout) }
        }
        (None, Some(name)) => {
            let local = strata_models::local_generator(name, &models)?;
            counter = local.counter;
            Backend::Local { generator: local.generator, window: local.window.min(4096) }
        }
        (None, None) => unreachable!("clap requires one of them"),
    };
    let mut config = ServeConfig::new(backend);
    config.listen = args.listen;
    config.api_key = args.api_key_file.as_deref().map(|p| read_key(p, "--api-key-file")).transpose()?;
    config.budget = args.budget;
    config.window = args.context_window;
    config.reply_tokens = args.reply_tokens;
    config.max_body = args.max_body;
    config.max_open = args.max_open.max(1);
    // The tiers are sized for the budget contexts are built for.
    let nominal = config.budget.unwrap_or_else(|| match &config.backend {
        Backend::Local { window, .. } => config.window.unwrap_or(*window).saturating_sub(args.reply_tokens),
        Backend::Upstream { .. } => config.window.unwrap_or(8192).saturating_sub(args.reply_tokens),
    });
    let mut memory = strata::MemoryConfig {
        layout: config.memory.layout.clone(),
        clock: config.memory.clock,
        ..strata::MemoryConfig::for_budget("", nominal.max(200))
    };
    memory.layout.tiered = crate::input::strategy_config(args.config.as_deref())?.tiered;
    memory.layout.recall = args.recall_share;
    config.memory = memory;

    let store: Arc<dyn Store> = match &args.pg {
        Some(params) => Arc::new(PgStore::connect(params)?),
        None => {
            let store = SqliteStore::open(&args.db)?;
            // A conversation's search indexes live as long as its memory is likely open.
            store.keep_indexes(config.max_open);
            Arc::new(store)
        }
    };
    let bound = store.embedder()?.map(|(model, _)| model);
    let embedder = match args.embedder.as_deref() {
        Some("none") => None,
        Some(name) => Some(strata_models::embedder(name, &models)?),
        // Model ids are the model's folder name (with `+int8` for 8-bit vectors).
        None => Some(strata_models::embedder(
            bound.as_deref().and_then(|m| m.split('+').next()).unwrap_or("minilm"),
            &models,
        )?),
    };
    // Nothing kept on disk: a server's summary prompts do not repeat, and a cache of them
    // would grow for as long as it runs.
    let generator = match args.summary_model.as_deref() {
        Some(name) => Some(strata_models::fresh_generator(name, &models)?),
        None => None,
    };
    let reranker = crate::models::reranking(
        &args.reranker,
        args.models_dir.as_deref(),
        Some(std::time::Duration::from_millis(args.rerank_ms)),
    )?;
    let parts = Parts { counter, embedder, generator, embed_queue: None, reranker };
    let db = store.location().to_string();
    strata_server::run(config, store, parts, |addr| {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("strata serve: listening on http://{addr}/v1 (store {db})");
        }
    })
    .context("strata serve")?;
    Ok(String::new())
}
