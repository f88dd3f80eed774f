//! The Strata transcript format, version 1 (`../shared/formats/transcript.md`).

use serde::{Deserialize, Serialize};
use strata_core::{Conversation, Participant, Probe, Role, ToolCall, Turn};

use crate::error::{LoadError, LoadErrorKind};
use crate::time::{format_rfc3339, parse_rfc3339};

pub(crate) const FORMAT_MARKER: &str = "strata.transcript/1";

/// Ids may be written as strings or as integers; both become strings.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum RawId {
    Str(String),
    Int(i64),
}

impl RawId {
    pub(crate) fn into_string(self) -> String {
        match self {
            RawId::Str(s) => s,
            RawId::Int(i) => i.to_string(),
        }
    }
}

#[derive(Deserialize)]
struct RawTranscript {
    format: Option<String>,
    id: Option<RawId>,
    #[serde(default)]
    participants: Vec<Participant>,
    turns: Option<Vec<RawTurn>>,
    #[serde(default)]
    probes: Vec<RawProbe>,
    #[serde(default)]
    boundaries: Vec<RawId>,
    #[serde(default)]
    references: Vec<String>,
}

#[derive(Deserialize)]
struct RawTurn {
    id: Option<RawId>,
    role: Option<String>,
    speaker: Option<String>,
    /// `Some(None)` is an explicit `null`, which counts as empty content.
    #[serde(default, deserialize_with = "present")]
    content: Option<Option<String>>,
    timestamp: Option<String>,
    tool_call_id: Option<String>,
    #[serde(default)]
    tool_calls: Vec<crate::openai::RawToolCall>,
}

#[derive(Deserialize)]
struct RawProbe {
    id: Option<RawId>,
    question: Option<String>,
    answer: Option<serde_json::Value>,
    #[serde(default)]
    evidence: Vec<RawId>,
    after: Option<RawId>,
    category: Option<serde_json::Value>,
    adversarial_answer: Option<String>,
}

/// Distinguishes a missing field (`None`) from an explicit `null` (`Some(None)`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// A JSON scalar as text: answers and categories are sometimes numbers in datasets.
pub(crate) fn scalar_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Parses one transcript from JSON text. `line` is the JSONL line it came from, if any.
pub(crate) fn from_str(file: &str, line: Option<usize>, text: &str) -> Result<Conversation, LoadError> {
    let raw: RawTranscript = serde_json::from_str(text).map_err(|e| LoadError::syntax(file, line, &e))?;
    convert(file, line, raw)
}

pub(crate) fn from_value(file: &str, line: Option<usize>, value: serde_json::Value) -> Result<Conversation, LoadError> {
    let raw: RawTranscript = serde_json::from_value(value).map_err(|e| LoadError::syntax(file, line, &e))?;
    convert(file, line, raw)
}

fn convert(file: &str, line: Option<usize>, raw: RawTranscript) -> Result<Conversation, LoadError> {
    let fail = |kind, message: String| Err(LoadError::new(file, kind, message).at_line(line));
    if let Some(marker) = &raw.format {
        if marker != FORMAT_MARKER {
            return fail(
                LoadErrorKind::UnknownFormat,
                format!("unknown format marker `{marker}`: this version reads `{FORMAT_MARKER}`"),
            );
        }
    }
    let Some(id) = raw.id.map(RawId::into_string) else {
        return fail(LoadErrorKind::Schema, "transcript has no `id`".to_string());
    };
    let Some(raw_turns) = raw.turns else {
        return fail(LoadErrorKind::Schema, format!("transcript {id}: missing `turns`"));
    };
    let mut turns = Vec::with_capacity(raw_turns.len());
    for (index, t) in raw_turns.into_iter().enumerate() {
        let Some(turn_id) = t.id.map(RawId::into_string) else {
            return fail(LoadErrorKind::Schema, format!("transcript {id}: turn at index {index}: missing `id`"));
        };
        let at = format!("transcript {id}: turn {turn_id}");
        let role = match t.role.as_deref() {
            None => return fail(LoadErrorKind::Schema, format!("{at}: missing `role`")),
            Some(r) => match Role::parse(r) {
                Some(role) => role,
                None => {
                    return fail(
                        LoadErrorKind::Schema,
                        format!("{at}: unknown role `{r}` (expected system, user, assistant or tool)"),
                    )
                }
            },
        };
        let Some(content) = t.content else {
            return fail(LoadErrorKind::Schema, format!("{at}: missing `content`"));
        };
        let timestamp = match t.timestamp.as_deref() {
            None => None,
            Some(s) => match parse_rfc3339(s) {
                Some(ts) => Some(ts),
                None => return fail(LoadErrorKind::Schema, format!("{at}: timestamp `{s}` is not RFC 3339")),
            },
        };
        turns.push(Turn {
            id: turn_id,
            role,
            speaker: t.speaker,
            content: content.unwrap_or_default(),
            timestamp,
            tool_call_id: t.tool_call_id,
            tool_calls: t.tool_calls.into_iter().map(Into::into).collect(),
        });
    }
    let mut probes = Vec::with_capacity(raw.probes.len());
    for (index, p) in raw.probes.into_iter().enumerate() {
        let probe_id = p.id.map(RawId::into_string).unwrap_or_else(|| format!("#{}", index + 1));
        let at = format!("transcript {id}: probe {probe_id}");
        let Some(question) = p.question else {
            return fail(LoadErrorKind::Schema, format!("{at}: missing `question`"));
        };
        let Some(answer) = p.answer.as_ref().and_then(scalar_text) else {
            return fail(LoadErrorKind::Schema, format!("{at}: missing `answer`"));
        };
        probes.push(Probe {
            id: probe_id,
            question,
            answer,
            evidence: p.evidence.into_iter().map(RawId::into_string).collect(),
            after: p.after.map(RawId::into_string),
            category: p.category.as_ref().and_then(scalar_text),
            adversarial_answer: p.adversarial_answer,
        });
    }
    let conversation = Conversation {
        id: id.clone(),
        participants: raw.participants,
        turns,
        probes,
        boundaries: raw.boundaries.into_iter().map(RawId::into_string).collect(),
        references: raw.references,
    };
    if let Err(e) = conversation.validate(true) {
        return fail(LoadErrorKind::Invalid, format!("transcript {id}: {e}"));
    }
    Ok(conversation)
}

/// Streams the transcripts of a JSONL file, one per line, so that large datasets are never
/// held in memory whole. Blank lines are skipped; errors carry the line number.
#[derive(Debug)]
pub struct JsonlReader<R> {
    file: String,
    reader: R,
    line_no: usize,
    buf: String,
}

impl<'a> JsonlReader<&'a [u8]> {
    pub fn from_str(file: &str, text: &'a str) -> JsonlReader<&'a [u8]> {
        JsonlReader::new(file, text.as_bytes())
    }
}

impl<R: std::io::BufRead> JsonlReader<R> {
    pub fn new(file: &str, reader: R) -> JsonlReader<R> {
        JsonlReader { file: file.to_string(), reader, line_no: 0, buf: String::new() }
    }
}

impl JsonlReader<std::io::BufReader<std::fs::File>> {
    pub fn open(path: &std::path::Path) -> Result<Self, LoadError> {
        let file = path.display().to_string();
        let f = std::fs::File::open(path).map_err(|e| LoadError::io(&file, &e))?;
        Ok(JsonlReader::new(&file, std::io::BufReader::new(f)))
    }
}

impl<R: std::io::BufRead> Iterator for JsonlReader<R> {
    type Item = Result<Conversation, LoadError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.buf.clear();
            self.line_no += 1;
            let line_no = Some(self.line_no);
            match self.reader.read_line(&mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Some(Err(
                        LoadError::new(&self.file, LoadErrorKind::InvalidUtf8, "invalid UTF-8").at_line(line_no)
                    ));
                }
                Err(e) => return Some(Err(LoadError::io(&self.file, &e).at_line(line_no))),
            }
            let line = self.buf.trim();
            if line.is_empty() {
                continue;
            }
            // A line may hold a Strata transcript or an object with OpenAI `messages`.
            let value: serde_json::Value = match serde_json::from_str(line) {
                Ok(v) => v,
                Err(e) => return Some(Err(LoadError::syntax(&self.file, line_no, &e))),
            };
            let is_messages = value.get("messages").is_some() && value.get("turns").is_none();
            return Some(if is_messages {
                let id = value.get("id").and_then(scalar_text).unwrap_or_else(|| format!("line-{}", self.line_no));
                crate::openai::from_value(&self.file, &id, value).map_err(|e| e.at_line(line_no))
            } else {
                from_value(&self.file, line_no, value)
            });
        }
    }
}

#[derive(Serialize)]
struct OutTranscript<'a> {
    format: &'static str,
    id: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    participants: &'a [Participant],
    turns: Vec<OutTurn<'a>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    probes: &'a [Probe],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    boundaries: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    references: &'a [String],
}

#[derive(Serialize)]
struct OutTurn<'a> {
    id: &'a str,
    role: Role,
    #[serde(skip_serializing_if = "Option::is_none")]
    speaker: Option<&'a str>,
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tool_calls: &'a [ToolCall],
}

/// Writes a conversation in the Strata transcript format (one line, for JSONL).
pub fn to_json(c: &Conversation) -> String {
    let out = OutTranscript {
        format: FORMAT_MARKER,
        id: &c.id,
        participants: &c.participants,
        turns: c
            .turns
            .iter()
            .map(|t| OutTurn {
                id: &t.id,
                role: t.role,
                speaker: t.speaker.as_deref(),
                content: &t.content,
                timestamp: t.timestamp.map(format_rfc3339),
                tool_call_id: t.tool_call_id.as_deref(),
                tool_calls: &t.tool_calls,
            })
            .collect(),
        probes: &c.probes,
        boundaries: &c.boundaries,
        references: &c.references,
    };
    serde_json::to_string(&out).expect("a transcript always serialises")
}
