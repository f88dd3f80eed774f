//! Strategies written in Python: a callable `(history, budget, question) -> picks` registered
//! by name becomes a [`Strategy`] that the harness scores beside the built-in ones.
//!
//! The callable sees a `History` (turns, what each costs as a message, the pinned system
//! prompt, tool units) and returns turn ids, `Turn`s or texts; `strata_strategies::select::
//! assemble` turns them into a context the same way for every caller, and refuses a context
//! over the budget. The interpreter is taken only around the call: the harness's threads run
//! everything else without it.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use strata_core::{Context, History, Role, Strategy, StrategyError, TokenCounter, ToolCall};
use strata_strategies::select::{assemble, Pick};

use crate::data::Turn;
use crate::errors::{input_error, keep_raised};

/// Registers `fn(history, budget, question) -> list of (turn id | Turn | text)` as the strategy
/// `name`, for `compress` and `eval`. A string that is the id of a turn in the history stands
/// for that turn verbatim; any other string is a note sent as a system message. With
/// `question_aware=True` the question is passed in question-aware runs (else always `None`,
/// and one context serves every question at a turn, as for the built-in strategies).
/// Registering a name again replaces it; the built-in names are refused. The strategy joins
/// the catalog (`strata::catalog`), where `compress`, `eval` and the harness find it.
#[pyfunction]
#[pyo3(signature = (name, fn_, question_aware=false))]
pub(crate) fn register_strategy(name: String, fn_: Py<PyAny>, question_aware: bool) -> PyResult<()> {
    Python::attach(|py| {
        if !fn_.bind(py).is_callable() {
            return Err(input_error(format!("register_strategy: `{name}`: expected a callable")));
        }
        Ok(())
    })?;
    let strategy = Arc::new(PyStrategy { name, function: fn_, question_aware });
    strata::catalog::register(strategy).map_err(|e| input_error(format!("register_strategy: {e}")))
}

/// The names registered so far.
#[pyfunction]
pub(crate) fn registered_strategies() -> Vec<String> {
    strata::catalog::registered()
}

struct PyStrategy {
    name: String,
    function: Py<PyAny>,
    question_aware: bool,
}

impl Strategy for PyStrategy {
    fn name(&self) -> &str {
        &self.name
    }

    fn question_aware(&self) -> bool {
        self.question_aware
    }

    fn build(&self, history: &History, budget: usize, question: Option<&str>) -> Result<Context, StrategyError> {
        let failed = |message: String| StrategyError::Failed { strategy: self.name.clone(), message };
        let view = HistoryView::of(history);
        let question = if self.question_aware { question } else { None };
        let picks = Python::attach(|py| -> PyResult<Result<Vec<Pick>, String>> {
            let returned = match self.function.bind(py).call1((view, budget, question)) {
                Ok(r) => r,
                Err(e) => {
                    let described =
                        format!("raised {}", e.value(py).repr().map_or_else(|_| "?".into(), |r| r.to_string()));
                    keep_raised(e);
                    return Ok(Err(described));
                }
            };
            let Ok(items) = returned.try_iter() else {
                return Ok(Err(format!(
                    "returned {}; expected a list of turn ids, Turns or texts",
                    returned.get_type().name()?
                )));
            };
            let mut picks = Vec::new();
            for (i, item) in items.enumerate() {
                let item = item?;
                if let Ok(t) = item.extract::<Turn>() {
                    picks.push(Pick::Turn(t.inner.id));
                } else if let Ok(s) = item.cast::<PyString>() {
                    let s: String = s.extract()?;
                    picks.push(if history.index_of(&s).is_some() { Pick::Turn(s) } else { Pick::Text(s) });
                } else {
                    return Ok(Err(format!(
                        "item {i} is {}; expected a turn id, a Turn or a text",
                        item.get_type().name()?
                    )));
                }
            }
            Ok(Ok(picks))
        })
        .map_err(|e| failed(e.to_string()))?
        .map_err(failed)?;
        assemble(&self.name, history, budget, &picks)
    }
}

/// The conversation so far, as a strategy written in Python sees it.
#[pyclass(name = "History", module = "strata", frozen)]
pub(crate) struct HistoryView {
    id: String,
    turns: Vec<strata_core::Turn>,
    tokens: Vec<usize>,
    /// Each turn's unit (an assistant turn and the tool results answering it form one), and
    /// every unit's turns.
    unit_of: Vec<usize>,
    units: Vec<Vec<usize>>,
    pinned: usize,
    overhead: usize,
    counter: Arc<dyn TokenCounter>,
    /// The `turns` and `tokens` lists, made once, on first use: a strategy reads them in its
    /// loops, and making them afresh at every access would cost O(turns) each time.
    turn_list: Mutex<Option<Py<PyList>>>,
    token_list: Mutex<Option<Py<PyList>>>,
}

impl HistoryView {
    fn of(history: &History) -> HistoryView {
        let n = history.len();
        let unit_of: Vec<usize> = (0..n).map(|i| history.unit_index(i)).collect();
        let mut units = vec![Vec::new(); history.unit_count()];
        for i in 0..n {
            if units[unit_of[i]].is_empty() {
                units[unit_of[i]] = history.unit_of(i).turns.clone();
            }
        }
        HistoryView {
            id: history.conversation_id().to_string(),
            turns: history.turns().to_vec(),
            tokens: (0..n).map(|i| history.tokens(i)).collect(),
            unit_of,
            units,
            pinned: history.pinned(),
            overhead: history.counter().chat_format().reply_priming as usize,
            counter: history.counter_arc(),
            turn_list: Mutex::new(None),
            token_list: Mutex::new(None),
        }
    }

    fn index(&self, index: isize) -> PyResult<usize> {
        let n = self.turns.len() as isize;
        let i = if index < 0 { index + n } else { index };
        if !(0..n).contains(&i) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!("turn index {index} out of range")));
        }
        Ok(i as usize)
    }

    fn turn_list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        cached(py, &self.turn_list, || {
            let turns =
                self.turns.iter().map(|t| Py::new(py, Turn { inner: t.clone() })).collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, turns)
        })
    }
}

fn cached<'py>(
    py: Python<'py>,
    slot: &Mutex<Option<Py<PyList>>>,
    make: impl FnOnce() -> PyResult<Bound<'py, PyList>>,
) -> PyResult<Bound<'py, PyList>> {
    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(list) = &*slot {
        return Ok(list.bind(py).clone());
    }
    let list = make()?;
    *slot = Some(list.clone().unbind());
    Ok(list)
}

#[pymethods]
impl HistoryView {
    /// The conversation's id.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// Every turn so far, oldest first.
    #[getter]
    fn turns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.turn_list(py)
    }

    /// What each turn costs as a chat message, framing included (as the harness counts it).
    #[getter]
    fn tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        cached(py, &self.token_list, || PyList::new(py, &self.tokens))
    }

    /// How many turns at the start are the pinned system prompt.
    #[getter]
    fn pinned(&self) -> usize {
        self.pinned
    }

    /// Tokens a request adds once it holds any message (the reply priming).
    #[getter]
    fn overhead(&self) -> usize {
        self.overhead
    }

    /// Every message plus the reply priming: what sending the whole history costs.
    #[getter]
    fn total_tokens(&self) -> usize {
        if self.turns.is_empty() {
            0
        } else {
            self.overhead + self.tokens.iter().sum::<usize>()
        }
    }

    /// The indices of the turns that must be kept or dropped together with turn `index` (an
    /// assistant turn that calls tools and the results answering it).
    fn unit(&self, index: isize) -> PyResult<Vec<usize>> {
        let i = self.index(index)?;
        Ok(self.units[self.unit_of[i]].clone())
    }

    /// What `text` costs as a system message of the context, framing included.
    fn count(&self, text: &str) -> usize {
        self.counter.count_message(Role::System, None, text, None, &[] as &[ToolCall])
    }

    fn __len__(&self) -> usize {
        self.turns.len()
    }

    fn __getitem__<'py>(&self, py: Python<'py>, index: isize) -> PyResult<Bound<'py, PyAny>> {
        let i = self.index(index)?;
        self.turn_list(py)?.get_item(i)
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.turn_list(py)?.try_iter()?.into_any())
    }

    fn __repr__(&self) -> String {
        format!("History(id={:?}, turns={}, total_tokens={})", self.id, self.turns.len(), self.total_tokens())
    }
}
