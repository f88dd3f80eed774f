//! `strata.make_probes`: probes for a user's own conversations, written by a generator and
//! checked, as `strata probes` writes them (`strata_probes::write_probes`): the same files,
//! the same verdicts, the same counts.

use std::path::PathBuf;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use strata_probes::{write_probes, WriteConfig};

use crate::data::Conversation;
use crate::errors::{input_error, IntoPy as _};

/// Writes probes for every conversation of the file at `path`; with `out`, saves them there
/// (Strata JSON, or JSONL for `.jsonl`) and the verdicts beside it (or at `log`). Returns
/// `conversations` (with their new probes), `verdicts` (one dict per request), `asked`,
/// `kept`, `dropped` (reason to count) and `report` (the CLI's line).
#[pyfunction]
#[pyo3(signature = (
    path, generator, out=None, *, log=None, count=24, seed=0, recent_tokens=1000, tokenizer="o200k",
    models_dir=None, deadline_ms=300_000, progress=true
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn make_probes<'py>(
    py: Python<'py>,
    path: PathBuf,
    generator: &str,
    out: Option<PathBuf>,
    log: Option<PathBuf>,
    count: usize,
    seed: u64,
    recent_tokens: usize,
    tokenizer: &str,
    models_dir: Option<PathBuf>,
    deadline_ms: u64,
    progress: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let loaded = py.detach(|| strata_transcript::load_path(&path, None)).map_err(|e| input_error(e.to_string()))?;
    let counter = strata_tokens::from_spec(tokenizer).into_py()?;
    let models = crate::models_dir(models_dir);
    let generator = py.detach(|| strata_models::cached_generator(generator, &models)).into_py()?;
    let config = WriteConfig {
        per_conversation: count,
        seed,
        recent_tokens,
        deadline: Some(Duration::from_millis(deadline_ms)),
        ..WriteConfig::default()
    };
    let written = py.detach(|| {
        let mut bar: Option<strata_eval::progress::Progress> = None;
        let written = write_probes(&loaded.conversations, &*generator, &*counter, &config, &mut |_, all| {
            bar.get_or_insert_with(|| strata_eval::progress::Progress::new(progress, "probes", Some(all), "requests"))
                .inc();
        });
        if let Some(bar) = &bar {
            bar.finish();
        }
        written
    });
    if let Some(out) = &out {
        let log = log.unwrap_or_else(|| out.with_extension("verdicts.jsonl"));
        let saved = strata_transcript::write_whole(&log, &written.verdict_lines())
            .map_err(|e| (log.clone(), e))
            .and_then(|()| strata_transcript::save_path(out, &written.conversations).map_err(|e| (out.clone(), e)));
        if let Err((file, e)) = saved {
            return Err(input_error(format!("{}: cannot write: {e}", file.display())));
        }
    }
    let (asked, kept, dropped) = written.counts();
    let d = PyDict::new(py);
    let conversations: Vec<Conversation> = written.conversations.iter().cloned().map(Conversation::from).collect();
    d.set_item("conversations", conversations)?;
    d.set_item("verdicts", crate::list_of_dicts(py, &written.verdicts)?)?;
    d.set_item("asked", asked)?;
    d.set_item("kept", kept)?;
    let reasons = PyDict::new(py);
    for (r, n) in dropped {
        reasons.set_item(r.name(), n)?;
    }
    d.set_item("dropped", reasons)?;
    d.set_item("report", written.report())?;
    Ok(d)
}
