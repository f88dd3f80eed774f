//! Turns, conversations and the other plain data that transcripts are made of.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Who produced a turn, in the chat-completion sense.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Parses the four role names of the transcript format; anything else is `None`.
    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            _ => return None,
        })
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A point in time as whole seconds since the Unix epoch, UTC.
///
/// Loaders normalise every offset to UTC, so comparing two timestamps is comparing integers.
/// The policy receives "now" as one of these: nothing in Strata's core reads the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn seconds(self) -> i64 {
        self.0
    }
}

/// One function call made by an assistant turn (OpenAI's `tool_calls` entries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments exactly as the model wrote them (usually a JSON object as text).
    pub arguments: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub id: String,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Timestamp>,
    /// On a `tool` turn: the call it answers, either the id of the assistant turn that made
    /// the call or the id of one of that turn's [`ToolCall`]s. On an assistant turn: the id of
    /// the call it makes, for transcripts that record one call per turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

impl Turn {
    /// Who said it, as a transcript line names them: the speaker's name, else the role.
    pub fn speaker_or_role(&self) -> &str {
        self.speaker.as_deref().unwrap_or(self.role.as_str())
    }

    /// A plain turn with no speaker, timestamp or tool link.
    pub fn new(id: impl Into<String>, role: Role, content: impl Into<String>) -> Turn {
        Turn {
            id: id.into(),
            role,
            speaker: None,
            content: content.into(),
            timestamp: None,
            tool_call_id: None,
            tool_calls: Vec::new(),
        }
    }

    pub fn with_speaker(mut self, speaker: impl Into<String>) -> Turn {
        self.speaker = Some(speaker.into());
        self
    }

    pub fn with_timestamp(mut self, ts: Timestamp) -> Turn {
        self.timestamp = Some(ts);
        self
    }

    pub fn with_tool_call_id(mut self, id: impl Into<String>) -> Turn {
        self.tool_call_id = Some(id.into());
        self
    }
}

/// The `name` a chat message carries for a speaker.
///
/// OpenAI accepts only `[A-Za-z0-9_-]{1,64}` there, so other characters become `_`. Counting
/// and rendering both go through this function so that what is counted is what is sent.
pub fn message_name(speaker: &str) -> Option<String> {
    let name: String = speaker
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(64)
        .collect();
    if name.is_empty() {
        None
    } else {
        Some(name)
    }
}

/// Someone taking part in a multi-party conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    pub name: String,
    /// Free text: architect, team_lead, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// A question about the conversation with its gold answer: the unit of retention scoring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    pub id: String,
    pub question: String,
    pub answer: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    /// The probe is asked right after this turn; `None` means after the last turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// For questions the conversation cannot answer (LoCoMo's adversarial category): the
    /// tempting wrong answer. The right behaviour is to abstain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adversarial_answer: Option<String>,
}

/// A whole transcript: turns plus what a dataset says about them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    pub id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub participants: Vec<Participant>,
    pub turns: Vec<Turn>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<Probe>,
    /// Ids of turns that start a new topic (gold segmentation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boundaries: Vec<String>,
    /// Reference summaries of the whole conversation, written by people (an extension field
    /// that summary datasets carry).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<String>,
}

/// Why a conversation breaks the transcript format's rules. Each variant names the turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConversationError {
    #[error("turn {id}: duplicate turn id (first used at index {first})")]
    DuplicateTurnId { id: String, first: usize },
    #[error("turn at index {index}: empty turn id")]
    EmptyTurnId { id: String, index: usize },
    #[error("turn {id}: timestamp {ts} is earlier than the previous turn {prev_id}'s {prev_ts}")]
    DecreasingTimestamp { id: String, ts: i64, prev_id: String, prev_ts: i64 },
    #[error("turn {id}: tool_call_id `{call}` matches no earlier assistant turn or tool call")]
    UnknownToolCall { id: String, call: String },
    #[error("turn {id}: content is {bytes} bytes, over the limit of {limit} bytes per turn")]
    TurnTooLarge { id: String, bytes: usize, limit: usize },
    #[error("probe {probe}: `{field}` names turn {turn}, which is not in the transcript")]
    UnknownProbeTurn { probe: String, field: &'static str, turn: String },
    #[error("boundary names turn {turn}, which is not in the transcript")]
    UnknownBoundary { turn: String },
    #[error("probe {probe}: duplicate probe id")]
    DuplicateProbeId { probe: String },
}

impl Conversation {
    /// The largest turn Strata accepts, in bytes of content.
    ///
    /// A single message this large is almost certainly a pasted file or a corrupt export, and
    /// accepting it would make every per-turn cost (tokenising, hashing, storing) unbounded.
    pub const MAX_TURN_BYTES: usize = 16 * 1024 * 1024;

    /// Checks the rules of the transcript format that span turns.
    ///
    /// `strict_probes` also requires probe `after` and evidence ids and boundaries to name real
    /// turns; dataset loaders that count bad evidence instead of failing pass `false`.
    pub fn validate(&self, strict_probes: bool) -> Result<(), ConversationError> {
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(self.turns.len());
        let mut calls: HashMap<&str, ()> = HashMap::new();
        let mut prev: Option<(&str, Timestamp)> = None;
        for (index, turn) in self.turns.iter().enumerate() {
            if turn.id.is_empty() {
                return Err(ConversationError::EmptyTurnId { id: turn.id.clone(), index });
            }
            if let Some(&first) = seen.get(turn.id.as_str()) {
                return Err(ConversationError::DuplicateTurnId { id: turn.id.clone(), first });
            }
            if turn.content.len() > Self::MAX_TURN_BYTES {
                return Err(ConversationError::TurnTooLarge {
                    id: turn.id.clone(),
                    bytes: turn.content.len(),
                    limit: Self::MAX_TURN_BYTES,
                });
            }
            if let Some(ts) = turn.timestamp {
                if let Some((prev_id, prev_ts)) = prev {
                    if ts < prev_ts {
                        return Err(ConversationError::DecreasingTimestamp {
                            id: turn.id.clone(),
                            ts: ts.0,
                            prev_id: prev_id.to_string(),
                            prev_ts: prev_ts.0,
                        });
                    }
                }
                prev = Some((&turn.id, ts));
            }
            if turn.role == Role::Tool {
                if let Some(call) = &turn.tool_call_id {
                    let owner_is_assistant =
                        seen.get(call.as_str()).is_some_and(|&i| self.turns[i].role == Role::Assistant);
                    if !owner_is_assistant && !calls.contains_key(call.as_str()) {
                        return Err(ConversationError::UnknownToolCall { id: turn.id.clone(), call: call.clone() });
                    }
                }
            } else if turn.role == Role::Assistant {
                if let Some(call) = &turn.tool_call_id {
                    calls.insert(call, ());
                }
                for call in &turn.tool_calls {
                    calls.insert(&call.id, ());
                }
            }
            seen.insert(&turn.id, index);
        }
        let mut probe_ids: HashMap<&str, ()> = HashMap::new();
        for probe in &self.probes {
            if probe_ids.insert(&probe.id, ()).is_some() {
                return Err(ConversationError::DuplicateProbeId { probe: probe.id.clone() });
            }
            if !strict_probes {
                continue;
            }
            if let Some(after) = &probe.after {
                if !seen.contains_key(after.as_str()) {
                    return Err(ConversationError::UnknownProbeTurn {
                        probe: probe.id.clone(),
                        field: "after",
                        turn: after.clone(),
                    });
                }
            }
            for ev in &probe.evidence {
                if !seen.contains_key(ev.as_str()) {
                    return Err(ConversationError::UnknownProbeTurn {
                        probe: probe.id.clone(),
                        field: "evidence",
                        turn: ev.clone(),
                    });
                }
            }
        }
        if strict_probes {
            for b in &self.boundaries {
                if !seen.contains_key(b.as_str()) {
                    return Err(ConversationError::UnknownBoundary { turn: b.clone() });
                }
            }
        }
        Ok(())
    }

    /// The index of the turn with this id, by linear search (use [`crate::History`] for
    /// repeated lookups).
    pub fn position(&self, id: &str) -> Option<usize> {
        self.turns.iter().position(|t| t.id == id)
    }
}

/// The memory tiers, from verbatim to archived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Verbatim.
    Hot,
    /// Lightly compressed (about 3x).
    Warm,
    /// Highly summarised (about 10x).
    Cool,
    /// Stored in full outside the context, recalled on demand.
    Cold,
}

impl Tier {
    /// Hot to cold, in order.
    pub const ALL: [Tier; 4] = [Tier::Hot, Tier::Warm, Tier::Cool, Tier::Cold];

    /// The lowercase name, as serde writes it and stores record it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Hot => "hot",
            Tier::Warm => "warm",
            Tier::Cool => "cool",
            Tier::Cold => "cold",
        }
    }

    /// Parses [`Tier::as_str`]'s names; anything else is `None`.
    pub fn parse(s: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Turns per tier, hot to cold.
    pub fn occupancy(tiers: &[Tier]) -> [usize; 4] {
        let mut n = [0; 4];
        for t in tiers {
            n[*t as usize] += 1;
        }
        n
    }
}

/// A run of consecutive turns on one topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// Index of the first turn, inclusive.
    pub start: usize,
    /// Index one past the last turn.
    pub end: usize,
    /// Why the segment starts here (a topic shift, a time gap, a token threshold, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}

/// How far a summary is removed from the turns it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SummaryLevel {
    /// Summarises turns of one segment.
    Segment,
    /// Summarises several segment summaries.
    Arc,
    /// Summarises the whole conversation so far.
    Narrative,
}

/// A summary and the turns it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub text: String,
    pub source_ids: Vec<String>,
    pub tier: Tier,
    pub level: SummaryLevel,
    /// What wrote it: `heuristic`, `extractive`, or a model id.
    pub method: String,
}
