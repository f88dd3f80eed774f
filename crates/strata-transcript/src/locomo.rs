//! LoCoMo (`locomo10.json`): ten very long two-person chats with QA about them.
//!
//! Each conversation becomes one transcript: `speaker_a` speaks as `user` and `speaker_b` as
//! `assistant` (both keep their names as speakers), turn ids are LoCoMo's `dia_id`s, every turn
//! takes its session's date-time, the first turn of each session is a topic boundary, and QA
//! items become probes. Shared photos are kept as `[shares a photo: caption]`, since questions
//! ask about them.

use std::collections::HashSet;

use serde_json::Value;
use strata_core::{Conversation, Participant, Probe, Role, Turn};

use crate::error::{LoadError, LoadErrorKind};
use crate::strata::scalar_text;
use crate::time::parse_locomo;
use crate::{InputFormat, Loaded};

/// LoCoMo's QA categories, by number.
pub(crate) fn category_name(n: i64) -> Option<&'static str> {
    Some(match n {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => return None,
    })
}

/// What an abstention probe's gold answer is: the conversation does not say.
pub const NOT_MENTIONED: &str = "Not mentioned in the conversation";

pub(crate) fn from_value(file: &str, value: Value) -> Result<Loaded, LoadError> {
    let schema = |msg: String| LoadError::new(file, LoadErrorKind::Schema, msg);
    let Value::Array(samples) = value else {
        return Err(schema("LoCoMo: expected a list of conversations".into()));
    };
    let mut conversations = Vec::with_capacity(samples.len());
    let mut warnings = Vec::new();
    for (index, sample) in samples.iter().enumerate() {
        let id = sample.get("sample_id").and_then(scalar_text).unwrap_or_else(|| format!("sample-{index}"));
        let at = |msg: &str| schema(format!("transcript {id}: {msg}"));
        let conv = sample.get("conversation").and_then(Value::as_object).ok_or_else(|| at("missing `conversation`"))?;
        let speaker = |key: &str| conv.get(key).and_then(Value::as_str).map(str::to_string);
        let (Some(a), Some(b)) = (speaker("speaker_a"), speaker("speaker_b")) else {
            return Err(at("missing `speaker_a` or `speaker_b`"));
        };
        // Sessions are numbered from 1; iterate by number, not by key order.
        let mut sessions: Vec<(u32, &Vec<Value>)> = conv
            .iter()
            .filter_map(|(k, v)| {
                let n = k.strip_prefix("session_")?.parse().ok()?;
                Some((n, v.as_array()?))
            })
            .collect();
        sessions.sort_by_key(|(n, _)| *n);
        let mut turns = Vec::new();
        let mut boundaries = Vec::new();
        for (n, session) in sessions {
            let key = format!("session_{n}_date_time");
            let timestamp =
                match conv.get(&key).and_then(Value::as_str) {
                    Some(s) => Some(parse_locomo(s).ok_or_else(|| {
                        at(&format!("`{key}` = `{s}` is not a date-time like `1:56 pm on 8 May, 2023`"))
                    })?),
                    None => {
                        warnings.push(format!(
                            "{file}: transcript {id}: session {n} has no `{key}`; its turns carry no timestamp"
                        ));
                        None
                    }
                };
            for (i, t) in session.iter().enumerate() {
                let turn_id = t
                    .get("dia_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| at(&format!("session {n} turn {}: missing `dia_id`", i + 1)))?;
                let who = t
                    .get("speaker")
                    .and_then(Value::as_str)
                    .ok_or_else(|| at(&format!("turn {turn_id}: missing `speaker`")))?;
                let text = t
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| at(&format!("turn {turn_id}: missing `text`")))?;
                let role = if who == a {
                    Role::User
                } else if who == b {
                    Role::Assistant
                } else {
                    return Err(at(&format!("turn {turn_id}: speaker `{who}` is neither `{a}` nor `{b}`")));
                };
                let mut content = text.to_string();
                if let Some(caption) = t.get("blip_caption").and_then(Value::as_str) {
                    content.push_str(&format!(" [shares a photo: {caption}]"));
                }
                if i == 0 {
                    boundaries.push(turn_id.to_string());
                }
                turns.push(Turn {
                    id: turn_id.to_string(),
                    role,
                    speaker: Some(who.to_string()),
                    content,
                    timestamp,
                    tool_call_id: None,
                    tool_calls: Vec::new(),
                });
            }
        }
        let known: HashSet<&str> = turns.iter().map(|t| t.id.as_str()).collect();
        let mut probes = Vec::new();
        for (qi, qa) in
            sample.get("qa").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default().iter().enumerate()
        {
            let probe_id = format!("{id}/q{}", qi + 1);
            let question = qa
                .get("question")
                .and_then(Value::as_str)
                .ok_or_else(|| at(&format!("probe {probe_id}: missing `question`")))?;
            let category = qa.get("category").and_then(Value::as_i64);
            let category_label = category.and_then(category_name);
            let adversarial_answer = qa.get("adversarial_answer").and_then(scalar_text);
            let answer = match qa.get("answer").and_then(scalar_text) {
                Some(a) => a,
                None if category == Some(5) => NOT_MENTIONED.to_string(),
                None => return Err(at(&format!("probe {probe_id}: missing `answer`"))),
            };
            // Evidence ids: a few are malformed (`D8:6; D9:17`, `D9:1 D4:4`, `D30:05`, `D`,
            // `D:11:26`). Split on `;` and spaces, read `D<session>:<turn>` with numbers
            // normalised, keep what names a turn, and count the rest.
            let mut evidence = Vec::new();
            for raw in qa.get("evidence").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
                let raw = raw.as_str().unwrap_or_default();
                for part in raw.split(|c: char| c == ';' || c.is_whitespace()).filter(|p| !p.is_empty()) {
                    match normalise_dia_id(part).filter(|id| known.contains(id.as_str())) {
                        Some(id) => evidence.push(id),
                        None => warnings.push(format!(
                            "{file}: transcript {id}: probe {probe_id}: evidence `{part}` names no turn; skipped"
                        )),
                    }
                }
                if raw.trim().is_empty() {
                    warnings.push(format!("{file}: transcript {id}: probe {probe_id}: empty evidence id; skipped"));
                }
            }
            let mut seen = HashSet::new();
            evidence.retain(|e| seen.insert(e.clone()));
            probes.push(Probe {
                id: probe_id,
                question: question.to_string(),
                answer,
                evidence,
                after: None,
                category: category_label.map(str::to_string).or_else(|| category.map(|c| c.to_string())),
                adversarial_answer,
            });
        }
        let conversation = Conversation {
            id: id.clone(),
            participants: vec![Participant { name: a, role: None }, Participant { name: b, role: None }],
            turns,
            probes,
            boundaries,
            references: Vec::new(),
        };
        conversation
            .validate(true)
            .map_err(|e| LoadError::new(file, LoadErrorKind::Invalid, format!("transcript {id}: {e}")))?;
        conversations.push(conversation);
    }
    Ok(Loaded { format: InputFormat::Locomo, conversations, warnings })
}

/// `D<session>:<turn>` with its numbers written without leading zeros, or `None`.
fn normalise_dia_id(s: &str) -> Option<String> {
    let (session, turn) = s.strip_prefix('D')?.split_once(':')?;
    let (session, turn): (u32, u32) = (session.parse().ok()?, turn.parse().ok()?);
    Some(format!("D{session}:{turn}"))
}
