//! The library's plain data as Python classes: `Turn`, `Conversation`, `Block`, `Context` and
//! `Hit`, each to and from the dicts of the transcript format (and OpenAI messages).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use strata_core::{Role, Timestamp, ToolCall};
use strata_transcript::InputFormat;

use crate::errors::input_error;
use crate::{dict_get, json_text, list_of_dicts, to_python};

/// One message of a conversation.
#[pyclass(module = "strata", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub(crate) struct Turn {
    pub(crate) inner: strata_core::Turn,
}

#[pymethods]
impl Turn {
    #[new]
    #[pyo3(signature = (id, role, content, speaker=None, timestamp=None, tool_call_id=None, tool_calls=None))]
    fn py_new(
        id: String,
        role: &str,
        content: String,
        speaker: Option<String>,
        timestamp: Option<&Bound<'_, PyAny>>,
        tool_call_id: Option<String>,
        tool_calls: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Turn> {
        let at = format!("turn {id}");
        if id.is_empty() {
            return Err(input_error("turn: `id` is empty"));
        }
        let mut t = strata_core::Turn::new(id, parse_role(&at, role)?, content);
        t.speaker = speaker;
        t.timestamp = timestamp.map(|v| parse_timestamp(&at, v)).transpose()?;
        t.tool_call_id = tool_call_id;
        if let Some(calls) = tool_calls {
            t.tool_calls = parse_tool_calls(&at, calls)?;
        }
        Ok(Turn { inner: t })
    }

    /// A turn from a dict of the transcript format (`id`, `role`, `content`, `speaker`,
    /// `timestamp` as RFC 3339 text or seconds, `tool_call_id`, `tool_calls`), or an OpenAI
    /// message (`name` for the speaker); `id` may be left out where a default is given.
    #[staticmethod]
    #[pyo3(signature = (d, id=None))]
    fn from_dict(d: &Bound<'_, PyAny>, id: Option<String>) -> PyResult<Turn> {
        turn_from_dict(d, id)
    }

    /// The turn as a dict of the transcript format (timestamps as RFC 3339 text).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let c = strata_core::Conversation { id: "x".into(), turns: vec![self.inner.clone()], ..Default::default() };
        let whole = to_python(
            py,
            &serde_json::from_str::<serde_json::Value>(&strata_transcript::to_json(&c))
                .map_err(|e| crate::errors::strata_error(e.to_string()))?,
        )?;
        whole.get_item("turns")?.get_item(0)
    }

    /// The turn's id, unique within its conversation.
    #[getter]
    fn id(&self) -> &str {
        &self.inner.id
    }

    /// `system`, `user`, `assistant` or `tool`.
    #[getter]
    fn role(&self) -> &str {
        self.inner.role.as_str()
    }

    /// What was said.
    #[getter]
    fn content(&self) -> &str {
        &self.inner.content
    }

    /// Who said it, when the transcript names them.
    #[getter]
    fn speaker(&self) -> Option<&str> {
        self.inner.speaker.as_deref()
    }

    /// Seconds since the Unix epoch, UTC.
    #[getter]
    fn timestamp(&self) -> Option<i64> {
        self.inner.timestamp.map(Timestamp::seconds)
    }

    /// On a tool turn, the call it answers.
    #[getter]
    fn tool_call_id(&self) -> Option<&str> {
        self.inner.tool_call_id.as_deref()
    }

    /// On an assistant turn, the calls it makes, as dicts with `id`, `name` and `arguments`.
    #[getter]
    fn tool_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        list_of_dicts(py, &self.inner.tool_calls)
    }

    fn __repr__(&self) -> String {
        let mut content: String = self.inner.content.chars().take(60).collect();
        if content.len() < self.inner.content.len() {
            content.push('…');
        }
        format!("Turn(id={:?}, role={:?}, content={content:?})", self.inner.id, self.inner.role.as_str())
    }
}

fn parse_role(at: &str, role: &str) -> PyResult<Role> {
    match role {
        // OpenAI's newer name for the system message.
        "developer" => Ok(Role::System),
        r => Role::parse(r).ok_or_else(|| {
            input_error(format!("{at}: `role`: `{r}` is not one of system, developer, user, assistant, tool"))
        }),
    }
}

fn parse_timestamp(at: &str, v: &Bound<'_, PyAny>) -> PyResult<Timestamp> {
    if let Ok(s) = v.cast::<PyString>() {
        let s: String = s.extract()?;
        return strata_transcript::parse_rfc3339(&s)
            .ok_or_else(|| input_error(format!("{at}: `timestamp`: `{s}` is not an RFC 3339 time")));
    }
    if v.hasattr("timestamp")? && !v.is_instance_of::<pyo3::types::PyInt>() {
        // A datetime; a naive one is taken as local time, as Python's own `timestamp()` does.
        let seconds: f64 = v.call_method0("timestamp")?.extract()?;
        return Ok(Timestamp(seconds.floor() as i64));
    }
    v.extract::<i64>()
        .map(Timestamp)
        .map_err(|_| input_error(format!("{at}: `timestamp`: expected RFC 3339 text, seconds or a datetime")))
}

fn parse_tool_calls(at: &str, calls: &Bound<'_, PyAny>) -> PyResult<Vec<ToolCall>> {
    let text = json_text(calls)?;
    // The OpenAI shape (`function.name`, `function.arguments`) or the transcript's flat one.
    let conversation =
        format!(r#"{{"id":"x","turns":[{{"id":"a","role":"assistant","content":"","tool_calls":{text}}}]}}"#);
    let loaded = strata_transcript::load_bytes("tool_calls", conversation.as_bytes(), false, Some(InputFormat::Strata))
        .map_err(|e| input_error(format!("{at}: `tool_calls`: {e}")))?;
    Ok(loaded.conversations[0].turns[0].tool_calls.clone())
}

pub(crate) fn turn_from_dict(d: &Bound<'_, PyAny>, default_id: Option<String>) -> PyResult<Turn> {
    if let Ok(t) = d.extract::<Turn>() {
        return Ok(t);
    }
    let d = d.cast::<PyDict>().map_err(|_| input_error("turn: expected a Turn or a dict"))?;
    let id = match dict_get(d, "id")? {
        Some(v) => v.str()?.to_string(),
        None => default_id.ok_or_else(|| input_error("turn: missing `id`"))?,
    };
    let at = format!("turn {id}");
    let field = |name: &str| -> PyResult<Option<String>> {
        match dict_get(d, name)? {
            None => Ok(None),
            Some(v) => {
                v.extract::<String>().map(Some).map_err(|_| input_error(format!("{at}: `{name}`: expected a string")))
            }
        }
    };
    let role = field("role")?.ok_or_else(|| input_error(format!("{at}: missing `role`")))?;
    let content = match dict_get(d, "content")? {
        None => String::new(),
        Some(v) => match v.extract::<String>() {
            Ok(s) => s,
            // OpenAI's content parts: the text parts, joined.
            Err(_) => content_parts(&at, &v)?,
        },
    };
    let speaker = field("speaker")?.or(field("name")?);
    let timestamp = dict_get(d, "timestamp")?;
    Turn::py_new(
        id,
        &role,
        content,
        speaker,
        timestamp.as_ref(),
        field("tool_call_id")?,
        dict_get(d, "tool_calls")?.as_ref(),
    )
}

fn content_parts(at: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    let bad = || input_error(format!("{at}: `content`: expected a string or a list of text parts"));
    let parts = v.cast::<PyList>().map_err(|_| bad())?;
    let mut texts = Vec::new();
    for p in parts.iter() {
        let p = p.cast::<PyDict>().map_err(|_| bad())?;
        if let Some(text) = dict_get(p, "text")? {
            texts.push(text.extract::<String>().map_err(|_| bad())?);
        }
    }
    Ok(texts.join("\n"))
}

/// A whole transcript: turns, and what a dataset says about them (probes, gold boundaries,
/// reference summaries).
#[pyclass(module = "strata", frozen, from_py_object)]
#[derive(Clone)]
pub(crate) struct Conversation {
    pub(crate) inner: strata_core::Conversation,
}

impl From<strata_core::Conversation> for Conversation {
    fn from(inner: strata_core::Conversation) -> Conversation {
        Conversation { inner }
    }
}

#[pymethods]
impl Conversation {
    /// A conversation from turns (`Turn`s or turn dicts), checked as a transcript file is.
    #[new]
    #[pyo3(signature = (id, turns))]
    fn py_new(id: String, turns: &Bound<'_, PyAny>) -> PyResult<Conversation> {
        let mut list = Vec::new();
        for (i, t) in turns.try_iter()?.enumerate() {
            list.push(turn_from_dict(&t?, Some(format!("t{}", i + 1)))?.inner);
        }
        let c = strata_core::Conversation { id, turns: list, ..Default::default() };
        c.validate(true).map_err(|e| input_error(format!("transcript {}: {e}", c.id)))?;
        Ok(Conversation { inner: c })
    }

    /// A conversation from a dict of the transcript format (`strata.transcript/1`).
    #[staticmethod]
    fn from_dict(d: &Bound<'_, PyAny>) -> PyResult<Conversation> {
        load_one("<dict>", &json_text(d)?, InputFormat::Strata, None)
    }

    /// A conversation from OpenAI chat messages (a list, or a dict with `messages`).
    #[staticmethod]
    #[pyo3(signature = (messages, id="conversation"))]
    fn from_messages(messages: &Bound<'_, PyAny>, id: &str) -> PyResult<Conversation> {
        load_one("<messages>", &json_text(messages)?, InputFormat::OpenAiMessages, Some(id))
    }

    /// The conversation as a dict of the transcript format.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?.call_method1("loads", (strata_transcript::to_json(&self.inner),))
    }

    /// The turns as OpenAI chat messages.
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let messages: Vec<strata_core::Message> = self
            .inner
            .turns
            .iter()
            .map(|t| strata_core::Block::from_turn(strata_core::BlockKind::VerbatimTurn, t, 0))
            .map(|b| strata_core::Message {
                role: b.role,
                name: b.name,
                content: b.content,
                tool_call_id: b.tool_call_id,
                tool_calls: b.tool_calls,
            })
            .collect();
        list_of_dicts(py, &messages)
    }

    /// The conversation's id.
    #[getter]
    fn id(&self) -> &str {
        &self.inner.id
    }

    /// Every turn, oldest first.
    #[getter]
    fn turns(&self) -> Vec<Turn> {
        self.inner.turns.iter().map(|t| Turn { inner: t.clone() }).collect()
    }

    /// Questions with their gold answers and evidence turns, as dicts.
    #[getter]
    fn probes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        list_of_dicts(py, &self.inner.probes)
    }

    fn __len__(&self) -> usize {
        self.inner.turns.len()
    }

    fn __getitem__(&self, index: isize) -> PyResult<Turn> {
        let n = self.inner.turns.len() as isize;
        let i = if index < 0 { index + n } else { index };
        if !(0..n).contains(&i) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!("turn index {index} out of range")));
        }
        Ok(Turn { inner: self.inner.turns[i as usize].clone() })
    }

    fn __repr__(&self) -> String {
        format!(
            "Conversation(id={:?}, turns={}, probes={})",
            self.inner.id,
            self.inner.turns.len(),
            self.inner.probes.len()
        )
    }
}

fn load_one(file: &str, json: &str, format: InputFormat, id: Option<&str>) -> PyResult<Conversation> {
    let loaded = strata_transcript::load_bytes(file, json.as_bytes(), false, Some(format))
        .map_err(|e| input_error(e.to_string()))?;
    let mut c =
        loaded.conversations.into_iter().next().ok_or_else(|| input_error(format!("{file}: no conversation")))?;
    if let Some(id) = id {
        c.id = id.to_string();
    }
    Ok(Conversation { inner: c })
}

pub(crate) fn input_format(name: Option<&str>) -> PyResult<Option<InputFormat>> {
    name.map(|f| {
        InputFormat::parse(f)
            .ok_or_else(|| input_error(format!("unknown input format `{f}`: expected strata, messages or locomo")))
    })
    .transpose()
}

/// A conversation given as a `Conversation`, a transcript dict, or a list of OpenAI messages.
pub(crate) fn conversation_arg(v: &Bound<'_, PyAny>, name: &str) -> PyResult<strata_core::Conversation> {
    if let Ok(c) = v.extract::<Conversation>() {
        return Ok(c.inner);
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<pyo3::types::PyTuple>() {
        return Ok(Conversation::from_messages(v, "conversation")?.inner);
    }
    if let Ok(d) = v.cast::<PyDict>() {
        if d.contains("turns")? || d.contains("format")? {
            return Ok(Conversation::from_dict(v)?.inner);
        }
        if d.contains("messages")? {
            return Ok(Conversation::from_messages(v, "conversation")?.inner);
        }
    }
    Err(input_error(format!(
        "`{name}`: expected a Conversation, a transcript dict or a list of OpenAI messages, not {}",
        v.get_type().name()?
    )))
}

/// Strategy settings: a TOML or JSON file's path, a dict with one table per strategy, or
/// `None` for the defaults.
pub(crate) fn strategies_config(v: Option<&Bound<'_, PyAny>>) -> PyResult<strata::StrategiesConfig> {
    let Some(v) = v.filter(|v| !v.is_none()) else { return Ok(Default::default()) };
    let (file, text) = if v.is_instance_of::<PyDict>() {
        ("config.json".to_string(), json_text(v)?)
    } else {
        let path: std::path::PathBuf =
            v.extract().map_err(|_| input_error("`config`: expected a dict or the path of a TOML or JSON file"))?;
        let text = std::fs::read_to_string(&path).map_err(|e| input_error(format!("{}: {e}", path.display())))?;
        (path.display().to_string(), text)
    };
    strata::StrategiesConfig::parse(&file, &text).map_err(|e| input_error(e.to_string()))
}

/// One message of a context: what it is, the turns it stands for, what it costs.
#[pyclass(module = "strata", frozen)]
pub(crate) struct Block {
    inner: strata_core::Block,
}

#[pymethods]
impl Block {
    /// `pinned_system`, `summary`, `registry`, `salient`, `verbatim_turn` or `recalled`.
    #[getter]
    fn kind(&self) -> &str {
        self.inner.kind.as_str()
    }

    /// The message's role.
    #[getter]
    fn role(&self) -> &str {
        self.inner.role.as_str()
    }

    /// The message's `name` (the speaker of a verbatim turn), if any.
    #[getter]
    fn name(&self) -> Option<&str> {
        self.inner.name.as_deref()
    }

    /// The message's content.
    #[getter]
    fn text(&self) -> &str {
        &self.inner.content
    }

    /// The ids of the turns this block stands for.
    #[getter]
    fn source_ids(&self) -> Vec<String> {
        self.inner.source_ids.clone()
    }

    /// What the block costs as a chat message, framing included.
    #[getter]
    fn tokens(&self) -> usize {
        self.inner.tokens
    }

    /// The block as a dict, as `strata compress --format json` prints it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner)
    }

    fn __repr__(&self) -> String {
        format!("Block(kind={:?}, source_ids={:?}, tokens={})", self.kind(), self.inner.source_ids, self.inner.tokens)
    }
}

/// What a strategy decided to send: blocks in order, and what they cost.
#[pyclass(module = "strata", frozen)]
pub(crate) struct Context {
    inner: strata_core::Context,
    history_tokens: usize,
}

impl Context {
    pub(crate) fn new(inner: strata_core::Context, history_tokens: usize) -> Context {
        Context { inner, history_tokens }
    }
}

#[pymethods]
impl Context {
    /// The strategy that built it.
    #[getter]
    fn strategy(&self) -> &str {
        &self.inner.strategy
    }

    /// The budget it was built within.
    #[getter]
    fn budget(&self) -> usize {
        self.inner.budget
    }

    /// The messages, in the order they are sent.
    #[getter]
    fn blocks(&self) -> Vec<Block> {
        self.inner.blocks.iter().map(|b| Block { inner: b.clone() }).collect()
    }

    /// Every block plus the reply priming: what the request costs.
    #[getter]
    fn total_tokens(&self) -> usize {
        self.inner.total_tokens()
    }

    /// What the whole history would cost sent as it is.
    #[getter]
    fn history_tokens(&self) -> usize {
        self.history_tokens
    }

    /// 1 − context tokens / history tokens.
    #[getter]
    fn token_reduction(&self) -> f64 {
        if self.history_tokens == 0 {
            0.0
        } else {
            1.0 - self.inner.total_tokens() as f64 / self.history_tokens as f64
        }
    }

    /// Decisions worth knowing: fallbacks, truncations.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.inner.notes.clone()
    }

    /// The ids of every turn held verbatim (or recalled), in context order.
    fn verbatim_ids(&self) -> Vec<String> {
        self.inner.verbatim_ids().map(str::to_string).collect()
    }

    /// The context as OpenAI chat messages, ready for `client.chat.completions.create`.
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        list_of_dicts(py, &self.inner.messages())
    }

    /// The context as plain text, one paragraph per message headed by its role.
    fn text(&self) -> String {
        self.inner.render_text()
    }

    /// The context as a dict, as `strata compress --format json` prints it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner)
    }

    fn __len__(&self) -> usize {
        self.inner.blocks.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Context(strategy={:?}, budget={}, blocks={}, total_tokens={})",
            self.inner.strategy,
            self.inner.budget,
            self.inner.blocks.len(),
            self.inner.total_tokens()
        )
    }
}

/// A turn found by `Memory.recall`, with its fused score.
#[pyclass(module = "strata", frozen)]
pub(crate) struct Hit {
    /// The turn found.
    #[pyo3(get)]
    turn: Turn,
    /// Its fused score (reciprocal ranks of words and meaning, with its neighbours'): higher
    /// is better; comparable within one search only.
    #[pyo3(get)]
    score: f64,
}

impl Hit {
    pub(crate) fn new(turn: strata_core::Turn, score: f64) -> Hit {
        Hit { turn: Turn { inner: turn }, score }
    }
}

#[pymethods]
impl Hit {
    fn __repr__(&self) -> String {
        format!("Hit(turn={:?}, score={:.4})", self.turn.inner.id, self.score)
    }
}
