//! The package's exceptions, and how the library's errors become them: the same one-line
//! messages the CLI prints, classified as the CLI classifies its exit statuses.

use std::sync::Mutex;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;

pyo3::create_exception!(strata, StrataError, PyException, "Anything Strata could not do.");
pyo3::create_exception!(
    strata,
    InputError,
    StrataError,
    "Bad input: a file or dict that does not load (the message names the file, line, turn or field), an unknown strategy, tokenizer or setting, model weights missing or not the pinned ones, a store file that is not usable. The CLI exits with status 2 for these."
);
pyo3::create_exception!(
    strata,
    StrategyError,
    StrataError,
    "A strategy failed or broke the harness's rules: a context over its budget, a turn id the history does not hold, an exception raised by a strategy written in Python (set as the cause)."
);
pyo3::create_exception!(strata, ModelError, StrataError, "A model failed while running.");
pyo3::create_exception!(strata, StoreError, StrataError, "The memory's store failed while working.");

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("StrataError", py.get_type::<StrataError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("StrategyError", py.get_type::<StrategyError>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    Ok(())
}

/// A token budget from Python, checked: a positive whole number, else `InputError` naming the
/// argument (a bare `usize` would raise a raw `OverflowError` for -1).
pub(crate) fn budget(name: &str, n: i64) -> PyResult<usize> {
    if n > 0 {
        Ok(n as usize)
    } else {
        Err(input_error(format!("{name}: a budget is a positive number of tokens, not {n}")))
    }
}

pub(crate) fn input_error(message: impl Into<String>) -> PyErr {
    InputError::new_err(message.into())
}

pub(crate) fn strategy_error(message: impl Into<String>) -> PyErr {
    StrategyError::new_err(message.into())
}

pub(crate) fn strata_error(message: impl Into<String>) -> PyErr {
    StrataError::new_err(message.into())
}

/// The exception a strategy written in Python raised, kept so that the `StrategyError` that
/// reports it can name it as its cause. Only the first is kept: a run stops at its first
/// failure, and rayon's other threads may fail after it.
static RAISED: Mutex<Option<PyErr>> = Mutex::new(None);

pub(crate) fn keep_raised(err: PyErr) {
    let mut slot = RAISED.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_none() {
        *slot = Some(err);
    }
}

fn take_raised() -> Option<PyErr> {
    RAISED.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// A strategy's error as a `StrategyError`, caused by what the Python code raised, if it did.
pub(crate) fn strategy_failed(py: Python<'_>, e: strata_core::StrategyError) -> PyErr {
    with_cause(py, strategy_error(e.to_string()))
}

fn with_cause(py: Python<'_>, err: PyErr) -> PyErr {
    if let Some(cause) = take_raised() {
        err.set_cause(py, Some(cause));
    }
    err
}

/// Whether `e` was caused by what the user gave (a file that does not load, an unknown name, a
/// bad config, weights missing or not the pinned ones, a store refused as given): each
/// library's own judgement of its errors, as the CLI exits with status 2 on them.
fn is_bad_input(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        strata_core::blames_input(c)
            || c.is::<strata_transcript::LoadError>()
            || c.is::<strata::ConfigError>()
            || c.is::<strata_tokens::TokenizerError>()
            || c.downcast_ref::<strata_models::ModelError>().is_some_and(strata_models::ModelError::is_bad_input)
            || c.downcast_ref::<strata::MemoryError>().is_some_and(strata::MemoryError::is_bad_input)
    })
}

/// Any error of the library as the matching exception, with its whole chain on one line.
pub(crate) fn from_anyhow(e: anyhow::Error) -> PyErr {
    let message = format!("{e:#}");
    let strategy = e.chain().any(|c| c.is::<strata_core::StrategyError>());
    let err = if strategy {
        StrategyError::new_err(message)
    } else if is_bad_input(&e) {
        InputError::new_err(message)
    } else if e.chain().any(|c| c.is::<strata_models::ModelError>() || c.is::<strata_core::GenerateError>()) {
        ModelError::new_err(message)
    } else if e.chain().any(|c| c.is::<strata_core::StoreError>() || c.is::<strata::MemoryError>()) {
        StoreError::new_err(message)
    } else {
        StrataError::new_err(message)
    };
    Python::attach(|py| with_cause(py, err))
}

/// `?` on the library's results inside the bindings.
pub(crate) trait IntoPy<T> {
    fn into_py(self) -> PyResult<T>;
}

impl<T, E: Into<anyhow::Error>> IntoPy<T> for Result<T, E> {
    fn into_py(self) -> PyResult<T> {
        self.map_err(|e| from_anyhow(e.into()))
    }
}
