//! The public benchmark sets in their own shapes: QMSum meetings, TIAGE and the dialogue
//! segmentation hub (gold topic boundaries), and DialogSum (reference summaries).
//!
//! Each becomes ordinary conversations. Two-party chats alternate `user` and `assistant`;
//! meetings are spoken by `user`s with their speaker names. Turn ids are the datasets' own
//! indices where they have them (QMSum's spans refer to them), else 1-based positions.

use serde_json::Value;
use strata_core::{Conversation, Probe, Role, Turn};

use crate::error::{LoadError, LoadErrorKind};

fn schema(file: &str, message: String) -> LoadError {
    LoadError::new(file, LoadErrorKind::Schema, message)
}

fn parse_json(file: &str, bytes: &[u8]) -> Result<Value, LoadError> {
    let text = crate::error::utf8(file, bytes)?;
    serde_json::from_str(text).map_err(|e| LoadError::syntax(file, None, &e))
}

fn alternating(id: &str, utterances: impl IntoIterator<Item = String>) -> Vec<Turn> {
    utterances
        .into_iter()
        .enumerate()
        .map(|(i, text)| {
            let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
            Turn::new(format!("{id}:{}", i + 1), role, text)
        })
        .collect()
}

fn validated(file: &str, c: Conversation) -> Result<Conversation, LoadError> {
    c.validate(true).map_err(|e| LoadError::new(file, LoadErrorKind::Invalid, format!("transcript {}: {e}", c.id)))?;
    Ok(c)
}

/// One QMSum meeting. Specific queries become probes whose evidence is every turn of their
/// spans; gold boundaries are the sorted distinct starts of the topic spans (69 topics have
/// several spans and 32 spans overlap, so starts are the only consistent reading); the general
/// queries' answers are reference summaries. `id` is the meeting's file stem.
pub fn qmsum(file: &str, id: &str, bytes: &[u8]) -> Result<Conversation, LoadError> {
    let v = parse_json(file, bytes)?;
    let at = |m: &str| schema(file, format!("transcript {id}: {m}"));
    let transcript =
        v.get("meeting_transcripts").and_then(Value::as_array).ok_or_else(|| at("missing `meeting_transcripts`"))?;
    let mut turns = Vec::with_capacity(transcript.len());
    for (i, t) in transcript.iter().enumerate() {
        let content =
            t.get("content").and_then(Value::as_str).ok_or_else(|| at(&format!("turn {i}: missing `content`")))?;
        let mut turn = Turn::new(i.to_string(), Role::User, content);
        turn.speaker = t.get("speaker").and_then(Value::as_str).map(str::to_string);
        turns.push(turn);
    }
    let n = turns.len();
    let span = |s: &Value, what: &str| -> Result<(usize, usize), LoadError> {
        let pair = s
            .as_array()
            .filter(|p| p.len() == 2)
            .ok_or_else(|| at(&format!("{what}: a span is not a [start, end] pair")))?;
        let num = |x: &Value| {
            x.as_str().and_then(|s| s.trim().parse::<usize>().ok()).or_else(|| x.as_u64().map(|u| u as usize))
        };
        match (num(&pair[0]), num(&pair[1])) {
            (Some(a), Some(b)) if a <= b && b < n => Ok((a, b)),
            _ => Err(at(&format!("{what}: span {s} is not within turns 0..{}", n.saturating_sub(1)))),
        }
    };
    let mut starts = std::collections::BTreeSet::new();
    for topic in v.get("topic_list").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        for s in topic.get("relevant_text_span").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
            starts.insert(span(s, "topic")?.0);
        }
    }
    let mut probes = Vec::new();
    for (qi, q) in
        v.get("specific_query_list").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default().iter().enumerate()
    {
        let probe_id = format!("{id}/s{}", qi + 1);
        let question =
            q.get("query").and_then(Value::as_str).ok_or_else(|| at(&format!("probe {probe_id}: missing `query`")))?;
        let answer = q
            .get("answer")
            .and_then(Value::as_str)
            .ok_or_else(|| at(&format!("probe {probe_id}: missing `answer`")))?;
        let mut evidence = std::collections::BTreeSet::new();
        for s in q.get("relevant_text_span").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
            let (a, b) = span(s, &format!("probe {probe_id}"))?;
            evidence.extend(a..=b);
        }
        probes.push(Probe {
            id: probe_id,
            question: question.to_string(),
            answer: answer.to_string(),
            evidence: evidence.into_iter().map(|i| i.to_string()).collect(),
            after: None,
            category: Some("specific".to_string()),
            adversarial_answer: None,
        });
    }
    let references = v
        .get("general_query_list")
        .and_then(Value::as_array)
        .map(|qs| qs.iter().filter_map(|q| q.get("answer").and_then(Value::as_str).map(str::to_string)).collect())
        .unwrap_or_default();
    validated(
        file,
        Conversation {
            id: id.to_string(),
            turns,
            probes,
            boundaries: starts.into_iter().map(|i| i.to_string()).collect(),
            references,
            ..Default::default()
        },
    )
}

/// TIAGE's `{dialog_id: [[utterance, label], ...]}`: label `1` starts a new topic.
pub fn tiage(file: &str, bytes: &[u8]) -> Result<Vec<Conversation>, LoadError> {
    let v = parse_json(file, bytes)?;
    let map = v.as_object().ok_or_else(|| schema(file, "TIAGE: expected an object of dialogues".into()))?;
    let mut out = Vec::with_capacity(map.len());
    // Dialogue ids are numbers written as strings; order them numerically for stable output.
    let mut ids: Vec<&String> = map.keys().collect();
    ids.sort_by_key(|k| (k.parse::<u64>().unwrap_or(u64::MAX), (*k).clone()));
    for key in ids {
        let id = format!("tiage-{key}");
        let rows = map[key]
            .as_array()
            .ok_or_else(|| schema(file, format!("transcript {id}: expected a list of [utterance, label]")))?;
        let mut texts = Vec::with_capacity(rows.len());
        let mut starts = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let pair = row.as_array().filter(|p| p.len() == 2);
            let (Some(text), Some(label)) =
                (pair.and_then(|p| p[0].as_str()), pair.and_then(|p| crate::strata::scalar_text(&p[1])))
            else {
                return Err(schema(file, format!("transcript {id}: utterance {}: expected [text, label]", i + 1)));
            };
            if label.trim() == "1" && i > 0 {
                starts.push(i);
            }
            texts.push(text.to_string());
        }
        let turns = alternating(&id, texts);
        let boundaries = starts.iter().map(|&i| turns[i].id.clone()).collect();
        out.push(validated(file, Conversation { id, turns, boundaries, ..Default::default() })?);
    }
    Ok(out)
}

/// The dialogue segmentation hub's `[{dial_id, utterances, segments: [lengths]}]`.
pub fn dialseg(file: &str, bytes: &[u8]) -> Result<Vec<Conversation>, LoadError> {
    let v = parse_json(file, bytes)?;
    let items = v.as_array().ok_or_else(|| schema(file, "dialseg: expected a list of dialogues".into()))?;
    let mut out = Vec::with_capacity(items.len());
    for (index, d) in items.iter().enumerate() {
        let id = d.get("dial_id").and_then(crate::strata::scalar_text).unwrap_or_else(|| format!("dialogue-{index}"));
        let utterances: Vec<String> = d
            .get("utterances")
            .and_then(Value::as_array)
            .map(|u| u.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .ok_or_else(|| schema(file, format!("transcript {id}: missing `utterances`")))?;
        let lengths: Vec<usize> = d
            .get("segments")
            .and_then(Value::as_array)
            .map(|s| s.iter().filter_map(Value::as_u64).map(|x| x as usize).collect())
            .ok_or_else(|| schema(file, format!("transcript {id}: missing `segments`")))?;
        if lengths.iter().sum::<usize>() != utterances.len() {
            return Err(LoadError::new(
                file,
                LoadErrorKind::Invalid,
                format!(
                    "transcript {id}: segments add up to {} but there are {} utterances",
                    lengths.iter().sum::<usize>(),
                    utterances.len()
                ),
            ));
        }
        let turns = alternating(&id, utterances);
        let mut boundaries = Vec::new();
        let mut at = 0;
        for len in &lengths[..lengths.len().saturating_sub(1)] {
            at += len;
            boundaries.push(turns[at].id.clone());
        }
        out.push(validated(file, Conversation { id, turns, boundaries, ..Default::default() })?);
    }
    Ok(out)
}

/// One DialogSum row (`{fname, dialogue, summary | summary1..3}`): `#PersonN#: text` lines.
pub fn dialogsum_row(file: &str, line: usize, row: &Value) -> Result<Conversation, LoadError> {
    let fail = |m: String| schema(file, m).at_line(Some(line));
    let id = row.get("fname").and_then(Value::as_str).ok_or_else(|| fail("missing `fname`".into()))?.to_string();
    let dialogue = row
        .get("dialogue")
        .and_then(Value::as_str)
        .ok_or_else(|| fail(format!("transcript {id}: missing `dialogue`")))?;
    let mut turns: Vec<Turn> = Vec::new();
    for text in dialogue.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (speaker, content) = match text.strip_prefix('#').and_then(|r| r.split_once("#:")) {
            Some((who, rest)) => (Some(who.to_string()), rest.trim()),
            None => (None, text),
        };
        if speaker.is_none() {
            // A line without a speaker continues the previous turn.
            if let Some(last) = turns.last_mut() {
                last.content.push('\n');
                last.content.push_str(content);
                continue;
            }
        }
        let role = if speaker.as_deref() == Some("Person2") { Role::Assistant } else { Role::User };
        let mut turn = Turn::new(format!("{}", turns.len() + 1), role, content);
        turn.speaker = speaker;
        turns.push(turn);
    }
    let references: Vec<String> = ["summary", "summary1", "summary2", "summary3"]
        .iter()
        .filter_map(|k| row.get(*k).and_then(Value::as_str).map(str::to_string))
        .collect();
    if references.is_empty() {
        return Err(fail(format!("transcript {id}: no reference summary")));
    }
    validated(file, Conversation { id, turns, references, ..Default::default() }).map_err(|e| e.at_line(Some(line)))
}
