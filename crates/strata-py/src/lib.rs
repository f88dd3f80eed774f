//! `strata._strata`, the native half of the Python package: the library's vocabulary as Python
//! classes, and the functions a researcher calls from a notebook (`load`, `count_tokens`,
//! `compress`, `Memory`, `eval`, `make_probes`, `register_strategy`, and the models `Embedder` and `Generator`).
//!
//! The key design choice is that Python sees the same machinery as the CLI, not a second
//! implementation: transcripts go through `strata-transcript`'s loaders (dicts are handed over
//! as JSON), contexts through the same strategies, and `eval` through `strata_eval::run`, so
//! its numbers are the CLI's. A strategy written in Python becomes a [`strata_core::Strategy`]
//! (`strategy.rs`) and is scored by the same harness. Long work runs with the interpreter
//! released; errors become the package's exceptions with the CLI's one-line messages.

mod data;
mod errors;
mod eval;
mod memory;
mod models;
mod probes;
mod strategy;

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use strata_core::{History, Strategy, TokenCounter};

use crate::data::{Block, Context, Conversation, Hit, Turn};
use crate::errors::{input_error, IntoPy as _};

/// The package's native module; `strata/__init__.py` re-exports it.
#[pymodule(name = "_strata")]
fn strata_py(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<Turn>()?;
    m.add_class::<Conversation>()?;
    m.add_class::<Block>()?;
    m.add_class::<Context>()?;
    m.add_class::<Hit>()?;
    m.add_class::<strategy::HistoryView>()?;
    m.add_class::<memory::Memory>()?;
    m.add_class::<models::Embedder>()?;
    m.add_class::<models::Generator>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(compress, m)?)?;
    m.add_function(wrap_pyfunction!(strategy::register_strategy, m)?)?;
    m.add_function(wrap_pyfunction!(strategy::registered_strategies, m)?)?;
    m.add_function(wrap_pyfunction!(eval::run_eval, m)?)?;
    m.add_function(wrap_pyfunction!(probes::make_probes, m)?)?;
    m.add("BUILTIN_STRATEGIES", builtin_strategies())?;
    // The harness's list, so that `strata.eval` and `strata eval` compare the same by default.
    m.add("DEFAULT_STRATEGIES", strata::catalog::default_names())?;
    Ok(())
}

/// Every strategy name the catalog knows without registration.
fn builtin_strategies() -> Vec<&'static str> {
    strata::catalog::STRATEGIES.iter().map(|e| e.name).collect()
}

/// Loads every conversation in a file (Strata JSON or JSONL, OpenAI messages, LoCoMo),
/// detecting its format unless `format` names it.
#[pyfunction]
#[pyo3(signature = (path, format=None))]
fn load(py: Python<'_>, path: PathBuf, format: Option<&str>) -> PyResult<Vec<Conversation>> {
    let format = data::input_format(format)?;
    let loaded = py.detach(|| strata_transcript::load_path(&path, format)).map_err(|e| input_error(e.to_string()))?;
    if !loaded.warnings.is_empty() {
        let message = format!(
            "{}: {} dataset quirks skipped and counted, the first: {}",
            path.display(),
            loaded.warnings.len(),
            loaded.warnings[0]
        );
        PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyUserWarning>(), &std::ffi::CString::new(message)?, 1)?;
    }
    Ok(loaded.conversations.into_iter().map(Conversation::from).collect())
}

/// Tokens in a text, or what a conversation or a list of OpenAI messages costs as one chat
/// request (every message's framing and the reply priming), as `strata tokens` counts it.
#[pyfunction]
#[pyo3(signature = (text_or_messages, tokenizer="o200k"))]
fn count_tokens(py: Python<'_>, text_or_messages: &Bound<'_, PyAny>, tokenizer: &str) -> PyResult<usize> {
    let counter = counter(tokenizer)?;
    if let Ok(text) = text_or_messages.cast::<PyString>() {
        let text: String = text.extract()?;
        return Ok(py.detach(|| counter.count(&text)));
    }
    let conversation = data::conversation_arg(text_or_messages, "text_or_messages")?;
    let history = py.detach(|| History::from_conversation(&conversation, counter)).into_py()?;
    Ok(history.full_context_tokens())
}

pub(crate) fn counter(spec: &str) -> PyResult<Arc<dyn TokenCounter>> {
    strata_tokens::from_spec(spec).map_err(|e| input_error(e.to_string()))
}

/// Where model weights are: the argument, else `$STRATA_MODELS`, else `./models`, else the
/// checkout the package was built from ([`strata_models::dir`], as the CLI).
pub(crate) fn models_dir(arg: Option<PathBuf>) -> PathBuf {
    strata_models::dir(arg.as_deref())
}

/// The context `strategy` builds for a conversation within `budget` tokens.
#[pyfunction]
#[pyo3(signature = (
    conversation, strategy="window", budget=2000, question=None, config=None, *, at=None,
    tokenizer="o200k", model=None, embedder="minilm", models_dir=None, reranker="none"
))]
#[allow(clippy::too_many_arguments)]
fn compress(
    py: Python<'_>,
    conversation: &Bound<'_, PyAny>,
    strategy: &str,
    budget: i64,
    question: Option<String>,
    config: Option<&Bound<'_, PyAny>>,
    at: Option<&str>,
    tokenizer: &str,
    model: Option<&str>,
    embedder: &str,
    models_dir: Option<PathBuf>,
    reranker: &str,
) -> PyResult<Context> {
    let budget = errors::budget("budget", budget)?;
    let conversation = data::conversation_arg(conversation, "conversation")?;
    let turns = match at {
        None => &conversation.turns[..],
        Some(at) => match conversation.position(at) {
            Some(i) => &conversation.turns[..=i],
            None => return Err(input_error(format!("transcript {}: no turn `{at}`", conversation.id))),
        },
    };
    let config = data::strategies_config(config)?;
    let counter = counter(tokenizer)?;
    let history = History::from_turns(&conversation.id, turns, counter).into_py()?;
    // The reranker reads a question only.
    let reranker = if question.is_some() { reranker } else { "none" };
    let strategy = build_strategy(py, strategy, &config, model, embedder, reranker, models_dir)?;
    let built = py.detach(|| strategy.build(&history, budget, question.as_deref()));
    let ctx = built.map_err(|e| errors::strategy_failed(py, e))?;
    if strategy.bounded() {
        ctx.check_budget().map_err(|e| errors::strategy_failed(py, e))?;
    }
    Ok(Context::new(ctx, history.full_context_tokens()))
}

/// A strategy by name from the catalog: a built-in one, or one registered from Python.
fn build_strategy(
    py: Python<'_>,
    name: &str,
    config: &strata::StrategiesConfig,
    model: Option<&str>,
    embedder: &str,
    reranker: &str,
    models_dir: Option<PathBuf>,
) -> PyResult<Arc<dyn Strategy>> {
    let models = crate::models_dir(models_dir);
    let generator = match model {
        None => None,
        Some(name) => Some(py.detach(|| strata_models::generator(name, &models)).into_py()?),
    };
    // Vectors cached on disk, as `strata compress` and the harness cache them.
    let embedder = match embedder {
        "none" => None,
        e if strata::catalog::needs(name).embedder => {
            Some(py.detach(|| strata_models::cached_embedder(e, &models)).into_py()?)
        }
        _ => None,
    };
    let reranker = match reranker {
        "none" => None,
        r if strata::catalog::needs(name).reranker => Some(crate::memory::reranking(py, r, &models)?),
        _ => None,
    };
    strata::catalog::build(name, config, &strata::catalog::Models { generator, embedder, reranker }).into_py()
}

/// A Python dict from a serde value, through the `json` module (one conversion path for
/// every structure the library serialises).
pub(crate) fn to_python<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(|e| errors::strata_error(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// JSON text of a Python value, through the `json` module.
pub(crate) fn json_text(value: &Bound<'_, PyAny>) -> PyResult<String> {
    value.py().import("json")?.call_method1("dumps", (value,))?.extract()
}

pub(crate) fn list_of_dicts<'py>(py: Python<'py>, items: &[impl serde::Serialize]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for item in items {
        list.append(to_python(py, item)?)?;
    }
    Ok(list)
}

pub(crate) fn dict_get<'py>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(d.get_item(key)?.filter(|v| !v.is_none()))
}
