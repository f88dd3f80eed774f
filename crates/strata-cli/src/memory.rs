//! `strata replay`, `strata recall` and `strata context`: the tiered memory on a store file.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result};
use strata::TieredConfig;
use strata::{Clock, Memory, MemoryConfig, Parts};
use strata_core::{Embedder, Tier};
use strata_store::{SqliteStore, Store};

use crate::input::{load, Input};
use crate::BadInput;

/// Where the memory lives and what it runs with.
#[derive(clap::Args, Debug)]
pub(crate) struct StoreArgs {
    /// The store file (SQLite); created by `replay` if absent.
    #[arg(long, value_name = "PATH")]
    db: PathBuf,
    /// Sentence embeddings for recall and topic shifts, or none (words only)
    /// [default: the model that wrote the store's vectors, else minilm]. A store is searched
    /// only with the model that wrote it; `strata reembed` moves it to another.
    #[arg(long, value_parser = crate::models::names(strata_models::Kind::Embedder, true))]
    embedder: Option<String>,
    /// Where model weights are [default: $STRATA_MODELS, else ./models, else the checkout's].
    #[arg(long, value_name = "DIR")]
    models_dir: Option<PathBuf>,
    /// The context budget the tiers are sized for.
    #[arg(long, default_value_t = 8000, value_parser = crate::input::budget, allow_negative_numbers = true)]
    tier_budget: usize,
    /// Strategy settings, a TOML or JSON file; its `[tiered]` table shapes the context.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ReplayArgs {
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    store: StoreArgs,
    /// Print a line every N turns (and whenever the policy acts).
    #[arg(long, default_value_t = 25)]
    every: usize,
    /// Summarise with a model (qwen, qwen1.5b, smollm2, a GGUF path, or an OpenAI-compatible
    /// endpoint as URL#MODEL) instead of extractively.
    #[arg(long, value_name = "NAME|PATH")]
    model: Option<String>,
}

#[derive(clap::Args, Debug)]
pub(crate) struct RecallArgs {
    query: String,
    #[command(flatten)]
    store: StoreArgs,
    /// The conversation to search; needed when the store holds several.
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// How many turns to return, best first.
    #[arg(short, long, default_value_t = 5)]
    k: usize,
    /// Reorder recall's deeper candidates with a cross-encoder, or none (the fused order).
    #[arg(long, default_value = "none", value_parser = crate::models::names(strata_models::Kind::Reranker, true))]
    reranker: String,
    /// Counts tokens: o200k, cl100k, or a tokenizer.json.
    #[arg(long, default_value = "o200k", value_name = "NAME|PATH")]
    tokenizer: String,
}

#[derive(clap::Args, Debug)]
pub(crate) struct CompactArgs {
    /// The store file (SQLite).
    #[arg(long = "db", value_name = "PATH")]
    path: PathBuf,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ContextArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The conversation to read; needed when the store holds several.
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// The context's size in tokens.
    #[arg(long, value_parser = crate::input::budget, allow_negative_numbers = true)]
    budget: usize,
    /// Recall turns for this question (question-aware context).
    #[arg(long)]
    question: Option<String>,
    /// OpenAI-style messages, readable text, or the context's blocks as JSON.
    #[arg(long, default_value = "messages", value_parser = ["messages", "text", "json"])]
    format: String,
    /// List every block on stderr.
    #[arg(long)]
    explain: bool,
    /// Reorder recall's deeper candidates with a cross-encoder, or none (the fused order).
    #[arg(long, default_value = "none", value_parser = crate::models::names(strata_models::Kind::Reranker, true))]
    reranker: String,
    /// Counts the budget: o200k, cl100k, or a tokenizer.json.
    #[arg(long, default_value = "o200k", value_name = "NAME|PATH")]
    tokenizer: String,
}

/// The embedder `--embedder` names, else the one that wrote `db`'s vectors, else MiniLM.
fn embedder(store: &StoreArgs, db: Option<&SqliteStore>) -> Result<Option<Arc<dyn Embedder>>> {
    let name = match &store.embedder {
        Some(name) => name.clone(),
        // Model ids are the model's folder name (with `+int8` for 8-bit vectors), which
        // `load_embedder` also takes.
        None => match db.map(SqliteStore::embedder).transpose()?.flatten() {
            Some((model, _)) => model.split('+').next().unwrap_or("minilm").to_string(),
            None => "minilm".to_string(),
        },
    };
    if name == "none" {
        return Ok(None);
    }
    Ok(Some(strata_models::embedder(&name, &crate::models::dir(store.models_dir.as_deref()))?))
}

/// Opens the store; a store file that does not exist is an error for the reading commands.
fn open_store(path: &Path, create: bool) -> Result<Arc<SqliteStore>> {
    if !create && !path.exists() {
        return Err(BadInput(format!(
            "{}: no such store (create one with `strata replay FILE --db PATH`)",
            path.display()
        ))
        .into());
    }
    Ok(Arc::new(SqliteStore::open(path)?))
}

/// The conversation to read: the one named, or the only one stored.
fn pick_conversation(store: &SqliteStore, named: Option<String>) -> Result<String> {
    let stored = store.conversations()?;
    match named {
        Some(id) if stored.contains(&id) => Ok(id),
        Some(id) => Err(BadInput(format!(
            "{}: no conversation `{id}` (stored: {})",
            store.location(),
            if stored.is_empty() { "none".to_string() } else { stored.join(", ") }
        ))
        .into()),
        None if stored.len() == 1 => Ok(stored[0].clone()),
        None if stored.is_empty() => {
            Err(BadInput(format!("{}: the store holds no conversation", store.location())).into())
        }
        None => Err(BadInput(format!(
            "{}: the store holds {} conversations; pick one with --conversation ({})",
            store.location(),
            stored.len(),
            stored.join(", ")
        ))
        .into()),
    }
}

/// The `[tiered]` table of `--config`, or the defaults.
fn tiered_config(store: &StoreArgs) -> Result<TieredConfig> {
    Ok(crate::input::strategy_config(store.config.as_deref())?.tiered)
}

fn memory_config(conversation: &str, store: &StoreArgs, tiered: &TieredConfig) -> MemoryConfig {
    let mut config = MemoryConfig::for_budget(conversation, store.tier_budget);
    config.path = Some(store.db.clone());
    // A transcript is replayed, not lived: "now" is when its newest turn was said.
    config.clock = Clock::LastTurn;
    config.layout.tiered = tiered.clone();
    config
}

pub(crate) fn replay(args: ReplayArgs) -> Result<String> {
    // Load and validate the whole transcript (and the settings) before writing anything.
    let loaded = load(&args.input)?;
    let tiered = tiered_config(&args.store)?;
    // A new store is created only once its models are open: a model that cannot be opened
    // leaves no empty store behind.
    let generator = crate::models::generator(args.model.as_deref(), args.store.models_dir.as_deref())?;
    let (store, embedder) = if args.store.db.exists() {
        let store = open_store(&args.store.db, true)?;
        let embedder = embedder(&args.store, Some(&store))?;
        (store, embedder)
    } else {
        let embedder = embedder(&args.store, None)?;
        (open_store(&args.store.db, true)?, embedder)
    };
    let mut summary = String::new();
    let mut stdout = std::io::stdout().lock();
    for c in &loaded.conversations {
        let parts = Parts {
            counter: loaded.counter.clone(),
            embedder: embedder.clone(),
            generator: generator.clone(),
            embed_queue: None,
            reranker: None,
        };
        let mut memory = Memory::with_store(store.clone(), memory_config(&c.id, &args.store, &tiered), parts)?;
        // Resuming: the turns already stored must be this transcript's first turns.
        let stored = memory.len();
        for (i, t) in memory.history().turns().iter().enumerate() {
            if c.turns.get(i).map(|x| &x.id) != Some(&t.id) {
                return Err(BadInput(format!(
                    "{}: conversation {} already holds turn {} at position {i}, which the transcript does not have there",
                    args.store.db.display(),
                    c.id,
                    t.id
                ))
                .into());
            }
        }
        // Progress goes out as it happens: every line describes turns already on disk.
        let _ = writeln!(stdout, "# {}: {} turns ({} already stored)", c.id, c.turns.len(), stored);
        let _ = writeln!(
            stdout,
            "# each line: the turn, how many turns each tier holds, summaries pending, the policy's decision"
        );
        for (i, turn) in c.turns.iter().enumerate().skip(stored) {
            let id = turn.id.clone();
            memory.push(turn.clone()).with_context(|| format!("transcript {}: turn {id}", c.id))?;
            let plan = memory.last_plan().expect("push plans");
            if plan.act || (i + 1) % args.every.max(1) == 0 || i + 1 == c.turns.len() {
                let [h, w, k, d] = Tier::occupancy(memory.tiers());
                let _ = writeln!(
                    stdout,
                    "{id:>12}  turns hot {h:>5}  warm {w:>5}  cool {k:>5}  cold {d:>5}  summaries pending {:>3}  {}: {}",
                    memory.pending(),
                    if plan.act { "act" } else { "hold" },
                    plan.reason
                );
                let _ = stdout.flush();
            }
        }
        memory.settle();
        for n in memory.take_warnings() {
            let _ = writeln!(stdout, "note: {n}");
        }
        let [h, w, k, d] = Tier::occupancy(memory.tiers());
        writeln!(
            summary,
            "{}: {} turns stored in {}; hot {h}, warm {w}, cool {k}, cold {d}; {} summaries",
            c.id,
            memory.len(),
            args.store.db.display(),
            store.summaries(&c.id)?.len()
        )?;
    }
    Ok(summary)
}

/// The stored memory of the conversation named (or the only one), for the reading commands.
fn open_memory(store: &StoreArgs, conversation: Option<String>, tokenizer: &str, reranker: &str) -> Result<Memory> {
    let db = open_store(&store.db, false)?;
    let conversation = pick_conversation(&db, conversation)?;
    let tiered = tiered_config(store)?;
    let parts = Parts {
        counter: strata_tokens::from_spec(tokenizer)?,
        embedder: embedder(store, Some(&db))?,
        generator: None,
        embed_queue: None,
        // One question, asked once: no time limit, so the answer does not depend on the load.
        reranker: crate::models::reranking(reranker, store.models_dir.as_deref(), None)?,
    };
    Ok(Memory::with_store(db, memory_config(&conversation, store, &tiered), parts)?)
}

pub(crate) fn recall(args: RecallArgs) -> Result<String> {
    let memory = open_memory(&args.store, args.conversation, &args.tokenizer, &args.reranker)?;
    let mut out = String::new();
    for (rank, hit) in memory.recall(&args.query, args.k)?.iter().enumerate() {
        let who = hit.turn.speaker_or_role();
        let when = hit.turn.timestamp.map(|t| strata_store::civil_date(t.seconds())).unwrap_or_default();
        writeln!(out, "{:>2}. {} (score {:.4}) {who} {when}", rank + 1, hit.turn.id, hit.score)?;
        writeln!(out, "    {}", hit.turn.content.replace('\n', "\n    "))?;
    }
    if out.is_empty() {
        out.push_str("no matching turns\n");
    }
    Ok(out)
}

#[derive(clap::Args, Debug)]
pub(crate) struct ReembedArgs {
    /// The store file (SQLite).
    #[arg(long = "db", value_name = "PATH")]
    path: PathBuf,
    /// The model whose vectors replace the store's.
    #[arg(long, value_parser = crate::models::names(strata_models::Kind::Embedder, false))]
    embedder: String,
    /// Where model weights are [default: $STRATA_MODELS, else ./models, else the checkout's].
    #[arg(long, value_name = "DIR")]
    models_dir: Option<PathBuf>,
}

/// Replaces every vector of a store with another model's and binds the store to it.
pub(crate) fn reembed(args: ReembedArgs) -> Result<String> {
    let store = open_store(&args.path, false)?;
    let embedder = strata_models::embedder(&args.embedder, &crate::models::dir(args.models_dir.as_deref()))?;
    let before = store.embedder()?.map_or_else(|| "no recorded model".to_string(), |(m, _)| m);
    let mut stderr = std::io::stderr().lock();
    let n = strata::reembed(&store, &*embedder, |conversation, done, total| {
        let _ = write!(stderr, "\r{conversation}: {done}/{total} turns");
        if done == total {
            let _ = writeln!(stderr);
        }
    })?;
    Ok(format!("{}: {n} turns re-embedded; vectors were {before}, now {}\n", args.path.display(), embedder.model_id()))
}

/// Rewrites a store's f32 vectors (from before schema 6) as int8 and gives the freed pages
/// back to the file system.
pub(crate) fn compact(args: CompactArgs) -> Result<String> {
    let store = open_store(&args.path, false)?;
    let done = store.compact()?;
    Ok(format!(
        "{}: {} vector rows rewritten as int8; {} → {} bytes\n",
        store.location(),
        done.rewritten,
        done.bytes_before,
        done.bytes_after
    ))
}

pub(crate) fn context(args: ContextArgs) -> Result<String> {
    let memory = open_memory(&args.store, args.conversation, &args.tokenizer, &args.reranker)?;
    let conversation = memory.conversation().to_string();
    let ctx = memory.context(args.budget, args.question.as_deref())?;
    if args.explain {
        let mut explain = String::new();
        crate::compress::explain_context(&mut explain, &conversation, memory.history(), &ctx)?;
        let settings = strata::StrategiesConfig { tiered: memory.config().layout.tiered.clone(), ..Default::default() };
        if let Some(table) = settings.settings(strata::Tiered::NAME) {
            writeln!(explain, "settings:\n{table}")?;
        }
        #[allow(clippy::print_stderr)]
        {
            eprint!("{explain}");
        }
    }
    crate::compress::render(&args.format, &[(conversation, ctx)])
}
