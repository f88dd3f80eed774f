//! `strata.Memory`: the tiered memory of one conversation on a store file, as the server and
//! `strata replay` use it. Every call that embeds, summarises or searches runs with the
//! interpreter released.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use strata::{Clock, MemoryConfig, Parts};
use strata_core::{Tier, Timestamp};
use strata_store::SqliteStore;

use crate::data::{turn_from_dict, Context, Hit, Turn};
use crate::errors::{input_error, IntoPy as _};

/// A conversation's durable memory: turns stored before `push` returns, tiers planned at every
/// turn, summaries written in the background, contexts within a budget, recall by words and
/// meaning.
#[pyclass(module = "strata")]
pub(crate) struct Memory {
    inner: Mutex<strata::Memory>,
    budget: usize,
    /// Stamp turns that have no timestamp with the time they are pushed (a live chat), rather
    /// than leaving them unstamped (a replay keeps its transcript's times).
    live: bool,
}

#[pymethods]
impl Memory {
    /// Opens (or creates) the memory of `conversation` in the store `db` (a SQLite file;
    /// `":memory:"` for one that lives only as long as this object). `budget` sizes the tiers;
    /// `embedder` is an embedder of docs/models.md (`"minilm"`, ...) or `None` (recall by words
    /// only); `model` summarises with a local model (`"qwen"`, `"smollm2"`, a GGUF path) or an
    /// OpenAI-compatible endpoint (`URL#MODEL`) instead of extractively. `clock="system"` reads
    /// the clock for the time triggers; `"last_turn"` takes "now" from the newest turn
    /// (replaying a transcript).
    /// `reranker="msmarco"` reorders recall's deeper candidates for a question with the
    /// cross-encoder (no time limit); `"none"` (the default) keeps the fused order.
    #[new]
    #[pyo3(signature = (
        db="memory.db", budget=8000, embedder=Some("minilm".to_string()), model=None, *,
        conversation="default", tokenizer="o200k", models_dir=None, config=None, clock="system", reranker="none"
    ), text_signature = "(db=\"memory.db\", budget=8000, embedder=\"minilm\", model=None, *, conversation=\"default\", tokenizer=\"o200k\", models_dir=None, config=None, clock=\"system\", reranker=\"none\")")]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        py: Python<'_>,
        db: &str,
        budget: i64,
        embedder: Option<String>,
        model: Option<&str>,
        conversation: &str,
        tokenizer: &str,
        models_dir: Option<PathBuf>,
        config: Option<&Bound<'_, PyAny>>,
        clock: &str,
        reranker: &str,
    ) -> PyResult<Memory> {
        let clock = match clock {
            "system" => Clock::System,
            "last_turn" => Clock::LastTurn,
            c => return Err(input_error(format!("Memory: clock `{c}`: expected system or last_turn"))),
        };
        let tiered = crate::data::strategies_config(config)?.tiered;
        let counter = crate::counter(tokenizer)?;
        let models = crate::models_dir(models_dir);
        let embedder = match embedder.as_deref() {
            None | Some("none") => None,
            Some(name) => Some(py.detach(|| strata_models::embedder(name, &models)).into_py()?),
        };
        let generator = match model {
            None => None,
            Some(name) => Some(py.detach(|| strata_models::generator(name, &models)).into_py()?),
        };
        let reranker = match reranker {
            "none" => None,
            r => Some(reranking(py, r, &models)?),
        };
        let budget = crate::errors::budget("budget", budget)?;
        let mut memory_config = MemoryConfig::for_budget(conversation, budget);
        memory_config.clock = clock;
        memory_config.layout.tiered = tiered;
        let store = if db == ":memory:" {
            SqliteStore::in_memory()
        } else {
            memory_config.path = Some(PathBuf::from(db));
            SqliteStore::open(std::path::Path::new(db))
        };
        let store = Arc::new(store.into_py()?);
        let parts = Parts { counter, embedder, generator, embed_queue: None, reranker };
        let memory = py.detach(|| strata::Memory::with_store(store, memory_config, parts)).into_py()?;
        Ok(Memory { inner: Mutex::new(memory), budget, live: clock == Clock::System })
    }

    /// Stores a turn (a `Turn`, a turn dict or an OpenAI message) and plans the tiers. A turn
    /// without an id gets `m<index>`, as `strata serve` names them; in a live memory one
    /// without a timestamp is stamped with the time it arrives.
    #[pyo3(signature = (turn=None, *, role=None, content=None))]
    fn push(
        &self,
        py: Python<'_>,
        turn: Option<&Bound<'_, PyAny>>,
        role: Option<&str>,
        content: Option<String>,
    ) -> PyResult<Turn> {
        // The id and the time are the memory's to give, under its lock: parsed with a
        // placeholder id first (the interpreter is needed to read the dict, not the lock).
        const PENDING: &str = "\u{0}pending";
        let mut turn = match (turn, role) {
            (Some(t), None) => turn_from_dict(t, Some(PENDING.to_string()))?,
            (None, Some(role)) => {
                let d = pyo3::types::PyDict::new(py);
                d.set_item("role", role)?;
                d.set_item("content", content.unwrap_or_default())?;
                turn_from_dict(d.as_any(), Some(PENDING.to_string()))?
            }
            _ => return Err(input_error("push: give a turn, or role= and content=")),
        };
        let live = self.live;
        py.detach(|| {
            let mut memory = self.lock();
            if turn.inner.id == PENDING {
                turn.inner.id = format!("m{}", memory.len());
            }
            if turn.inner.timestamp.is_none() && live {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64)
                    .max(memory.history().last_timestamp().map_or(0, |(_, t)| t.0));
                turn.inner.timestamp = Some(Timestamp(now));
            }
            memory.push(turn.inner.clone())
        })
        .into_py()?;
        Ok(turn)
    }

    /// The context within `budget` tokens (the memory's budget by default); with a question,
    /// turns recalled for it take their share.
    #[pyo3(signature = (budget=None, question=None))]
    fn context(&self, py: Python<'_>, budget: Option<i64>, question: Option<String>) -> PyResult<Context> {
        let budget = budget.map(|b| crate::errors::budget("budget", b)).transpose()?.unwrap_or(self.budget);
        let (ctx, full) = py
            .detach(|| {
                let memory = self.lock();
                memory.context(budget, question.as_deref()).map(|c| (c, memory.history().full_context_tokens()))
            })
            .into_py()?;
        Ok(Context::new(ctx, full))
    }

    /// The `k` stored turns that best match `query` (BM25 and embeddings, fused), best first.
    #[pyo3(signature = (query, k=5))]
    fn recall(&self, py: Python<'_>, query: String, k: usize) -> PyResult<Vec<Hit>> {
        let hits = py.detach(|| self.lock().recall(&query, k)).into_py()?;
        Ok(hits.into_iter().map(|h| Hit::new(h.turn, f64::from(h.score))).collect())
    }

    /// Marks a checkpoint (a task done, a natural break): the policy moves what it can out of
    /// the hot tier now. Returns the plan's explanation.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<String> {
        py.detach(|| self.lock().checkpoint().map(|p| p.explain())).into_py()
    }

    /// Waits until the summaries being written in the background are done and in use.
    fn settle(&self, py: Python<'_>) {
        py.detach(|| self.lock().settle());
    }

    /// Why the memory stands as it does: tier occupancy, the last plan's triggers, guards and
    /// moves, and anything worth knowing (a summary that fell back, an embedding that failed).
    fn explain(&self) -> String {
        let mut memory = self.lock();
        let [h, w, c, d] = Tier::occupancy(memory.tiers());
        let mut out = format!(
            "{}: {} turns; hot {h}, warm {w}, cool {c}, cold {d}; {} summaries pending\n",
            memory.conversation(),
            memory.len(),
            memory.pending()
        );
        match memory.last_plan() {
            Some(plan) => out.push_str(&plan.explain()),
            None => out.push_str("no plan yet: nothing pushed since the memory was opened\n"),
        }
        for note in memory.take_warnings() {
            out.push_str(&format!("note: {note}\n"));
        }
        out
    }

    /// Every stored turn, oldest first.
    fn turns(&self) -> Vec<Turn> {
        self.lock().history().turns().iter().map(|t| Turn { inner: t.clone() }).collect()
    }

    /// Each turn's tier: `hot`, `warm`, `cool` or `cold`.
    fn tiers(&self) -> Vec<&'static str> {
        self.lock().tiers().iter().map(|t| t.as_str()).collect()
    }

    /// The conversation this memory holds.
    #[getter]
    fn conversation(&self) -> String {
        self.lock().conversation().to_string()
    }

    /// The budget the tiers are sized for, and `context`'s default.
    #[getter]
    fn budget(&self) -> usize {
        self.budget
    }

    fn __len__(&self) -> usize {
        self.lock().len()
    }

    fn __repr__(&self) -> String {
        let memory = self.lock();
        format!(
            "Memory(conversation={:?}, turns={}, store={:?})",
            memory.conversation(),
            memory.len(),
            memory.store_location()
        )
    }
}

impl Memory {
    fn lock(&self) -> std::sync::MutexGuard<'_, strata::Memory> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The reranking stage `name` selects (`msmarco`) from `models`, with no time limit.
pub(crate) fn reranking(py: Python<'_>, name: &str, models: &std::path::Path) -> PyResult<Arc<strata::Reranking>> {
    if name != "msmarco" {
        return Err(input_error(format!("reranker `{name}`: expected msmarco or none")));
    }
    let model = py.detach(|| strata_models::reranker(name, models)).into_py()?;
    Ok(Arc::new(strata::Reranking::new(model, None)))
}
