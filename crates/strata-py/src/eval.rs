//! `strata.eval`: the harness the CLI runs (`strata_eval::run`), with strategies registered
//! from Python among the built-in ones; results and records come back as dicts.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use strata_eval::EvalConfig;
use strata_eval::Mode;
use strata_models::Kind;

use crate::errors::{input_error, IntoPy as _};
use crate::{list_of_dicts, to_python};

/// Runs the evaluation and returns `results` (what `results.json` holds), `records` (one per
/// probe, strategy, budget and mode), `builds` (one per context built), `segments`,
/// `summaries`, `answers` (one per question a reader answered) and `markdown` (the CLI's table). The Python wrapper in `strata/__init__.py`
/// makes an `EvalResult` of it.
#[pyfunction]
#[pyo3(signature = (
    datasets, strategies, budgets, mode, tokenizer, out, config, data_dir, models_dir, embedder,
    reranker, model, limit, segmenters, summarizers, progress, root, reader=None, judge=None, sample=None
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_eval<'py>(
    py: Python<'py>,
    datasets: Vec<String>,
    strategies: Vec<String>,
    budgets: Vec<i64>,
    mode: &str,
    tokenizer: String,
    out: Option<PathBuf>,
    config: Option<&Bound<'py, PyAny>>,
    data_dir: Option<PathBuf>,
    models_dir: Option<PathBuf>,
    embedder: String,
    reranker: String,
    model: Option<String>,
    limit: Option<usize>,
    segmenters: Vec<String>,
    summarizers: Vec<String>,
    progress: bool,
    root: Option<PathBuf>,
    reader: Option<String>,
    judge: Option<String>,
    sample: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let modes = match mode {
        "agnostic" => vec![Mode::Agnostic],
        "aware" => vec![Mode::Aware],
        "both" => vec![Mode::Agnostic, Mode::Aware],
        m => return Err(input_error(format!("eval: mode `{m}`: expected agnostic, aware or both"))),
    };
    for (kind, name) in [(Kind::Embedder, &embedder), (Kind::Reranker, &reranker)] {
        let known = strata_models::aliases(kind);
        if !known.contains(&name.as_str()) && name != "none" {
            return Err(input_error(format!("eval: {kind} `{name}`: expected {} or none", known.join(", "))));
        }
    }
    let strategy_config = crate::data::strategies_config(config)?;
    let repo_root = root.or_else(|| std::env::var_os("STRATA_ROOT").map(PathBuf::from)).unwrap_or_else(find_root);
    let data_dir = data_dir
        .or_else(|| std::env::var_os("STRATA_DATA").map(PathBuf::from))
        .unwrap_or_else(|| repo_root.join("../shared/datasets"));
    // Without `out`, the outputs go to a directory removed when the run is read back.
    let scratch = match &out {
        Some(_) => None,
        None => Some(tempfile::tempdir().map_err(|e| crate::errors::strata_error(e.to_string()))?),
    };
    let out_dir = out.clone().unwrap_or_else(|| scratch.as_ref().expect("made above").path().to_path_buf());
    let config = EvalConfig {
        datasets,
        strategies,
        budgets: budgets.into_iter().map(|b| crate::errors::budget("budgets", b)).collect::<PyResult<_>>()?,
        modes,
        tokenizer,
        out: out_dir,
        shard: None,
        data_dir,
        repo_root,
        strategy_config,
        segmenters,
        models_dir: crate::models_dir(models_dir),
        summarizers,
        progress,
        generator: model,
        limit,
        embedder,
        reranker,
        save_contexts: false,
        reader,
        judge,
        sample,
    };
    let outcome = py.detach(|| strata_eval::run(&config)).into_py()?;
    let d = PyDict::new(py);
    d.set_item("results", to_python(py, &outcome.results)?)?;
    d.set_item("records", list_of_dicts(py, &outcome.records.probes)?)?;
    d.set_item("builds", list_of_dicts(py, &outcome.records.builds)?)?;
    d.set_item("segments", list_of_dicts(py, &outcome.records.segments)?)?;
    d.set_item("summaries", list_of_dicts(py, &outcome.records.summaries)?)?;
    d.set_item("answers", list_of_dicts(py, &outcome.records.answers)?)?;
    d.set_item("markdown", outcome.markdown)?;
    d.set_item("out", out)?;
    Ok(d)
}

/// The checkout the suites' generated files (`datasets/probes/`) are read from: the current
/// directory or the nearest folder above it that holds them.
fn find_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    cwd.ancestors().find(|d| d.join(strata_eval::suite::PROBES_FILE).exists()).map_or(cwd.clone(), Path::to_path_buf)
}
