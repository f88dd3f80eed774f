//! What the generator is asked for each kind of probe, and how its reply is read. The
//! instructions name what to ask about by kind (a name, a number, a plan), never by example
//! phrasing, and ask for one JSON object, which is read leniently (the first `{` to the last
//! `}`), since small local models wrap it in prose or a code fence.

use strata_core::{ChatMessage, Conversation, Role};
use strata_text::{relative_note, Date};

use super::pick::{Kind, Pick};

/// The system message of every request.
pub(super) const SYSTEM: &str = "You write quiz questions that test whether someone remembers a conversation. \
Each question must make sense on its own to a reader of the whole conversation (name people and things; \
no 'this message'), must not contain its answer, and has a short answer (a few words) taken from the messages. \
Reply with one JSON object and nothing else.";

/// A turn's text in a prompt is cut to this many characters: a question needs a fact, not a
/// whole long message, and the prompt stays small for a local model.
const SHOWN_CHARS: usize = 1500;

/// The messages for `pick`.
pub(super) fn request(conversation: &Conversation, pick: &Pick) -> Vec<ChatMessage> {
    let shown: Vec<String> = pick.turns.iter().map(|&i| line(conversation, i)).collect();
    let ids: Vec<&str> = pick.turns.iter().map(|&i| conversation.turns[i].id.as_str()).collect();
    let task = match pick.kind {
        Kind::Fact => format!(
            "{}\n\nWrite one question that message [{}] answers, about a specific fact it states (a name, number, \
             place, object, plan, preference or event). Reply as {{\"question\": \"...\", \"answer\": \"...\", \
             \"evidence\": [\"{}\"]}}.",
            shown[0], ids[0], ids[0]
        ),
        Kind::Date => format!(
            "{}\n\nWrite one question asking when the event that message [{}] tells of happened (begin with \
             \"When\"). Reply as {{\"question\": \"When ...?\", \"evidence\": [\"{}\"]}}.",
            shown[0], ids[0], ids[0]
        ),
        Kind::Update => format!(
            "{}\n{}\n\nMessage [{}] was said before message [{}]. If [{}] changes something [{}] stated (a number, \
             place, plan, preference or status), write one question whose answer is the newer value, from [{}]. \
             Reply as {{\"question\": \"...\", \"answer\": \"...\", \"evidence\": [\"{}\"]}}. If nothing changed, \
             reply {{\"none\": true}}.",
            shown[0], shown[1], ids[0], ids[1], ids[1], ids[0], ids[1], ids[1]
        ),
        Kind::MultiDay => format!(
            "{}\n{}\n\nMessages [{}] and [{}] were said on different days. Write one question that needs both \
             messages to answer (combining or comparing what each says); its answer uses a fact from each. Reply as \
             {{\"question\": \"...\", \"answer\": \"...\", \"evidence\": [\"{}\", \"{}\"]}}. If they have nothing \
             to combine, reply {{\"none\": true}}.",
            shown[0], shown[1], ids[0], ids[1], ids[0], ids[1]
        ),
    };
    vec![
        ChatMessage { role: Role::System, content: SYSTEM.to_string() },
        ChatMessage { role: Role::User, content: task },
    ]
}

/// `[id] Speaker (8 May 2023): text`, with what a relative date in it meant.
fn line(conversation: &Conversation, i: usize) -> String {
    let t = &conversation.turns[i];
    let text: String = t.content.chars().take(SHOWN_CHARS).collect();
    match t.timestamp {
        Some(ts) => {
            format!(
                "[{}] {} ({}): {}{}",
                t.id,
                t.speaker_or_role(),
                Date::of(ts),
                relative_note([text.as_str()], ts),
                text
            )
        }
        None => format!("[{}] {}: {}", t.id, t.speaker_or_role(), text),
    }
}

/// A reply, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reply {
    Probe {
        question: String,
        answer: Option<String>,
        evidence: Vec<String>,
    },
    /// The generator said there is nothing to ask (`{"none": true}`).
    Declined,
    /// No JSON object with a question in it.
    NotUnderstood,
}

pub(super) fn read(text: &str) -> Reply {
    let (Some(open), Some(close)) = (text.find('{'), text.rfind('}')) else { return Reply::NotUnderstood };
    if close < open {
        return Reply::NotUnderstood;
    }
    let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(&text[open..=close]) else {
        return Reply::NotUnderstood;
    };
    if o.get("none").is_some_and(|v| v.as_bool() == Some(true)) {
        return Reply::Declined;
    }
    let string = |key: &str| o.get(key).and_then(|v| v.as_str()).map(str::trim).filter(|s| !s.is_empty());
    let Some(question) = string("question") else { return Reply::NotUnderstood };
    let evidence = match o.get("evidence") {
        Some(serde_json::Value::Array(ids)) => ids.iter().filter_map(|v| v.as_str()).map(clean_id).collect(),
        Some(serde_json::Value::String(id)) => vec![clean_id(id)],
        _ => Vec::new(),
    };
    Reply::Probe { question: question.to_string(), answer: string("answer").map(str::to_string), evidence }
}

/// An id as the prompt showed it, without the brackets a model may copy along.
fn clean_id(id: &str) -> String {
    id.trim().trim_start_matches('[').trim_end_matches(']').trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_leniently() {
        let fenced = "Sure!\n```json\n{\"question\": \"Where did Ana move?\", \"answer\": \"Lisbon\", \"evidence\": [\"[t3]\"]}\n```";
        assert_eq!(
            read(fenced),
            Reply::Probe {
                question: "Where did Ana move?".into(),
                answer: Some("Lisbon".into()),
                evidence: vec!["t3".into()]
            }
        );
        assert_eq!(read("{\"none\": true}"), Reply::Declined);
        assert_eq!(read("I cannot think of one."), Reply::NotUnderstood);
        assert_eq!(read("{\"answer\": \"Lisbon\"}"), Reply::NotUnderstood);
        assert_eq!(read("} {"), Reply::NotUnderstood);
        assert_eq!(
            read("{\"question\": \"When did it open?\", \"evidence\": \"t9\"}"),
            Reply::Probe { question: "When did it open?".into(), answer: None, evidence: vec!["t9".into()] }
        );
    }
}
