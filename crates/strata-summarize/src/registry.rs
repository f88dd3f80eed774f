//! The fact and entity registry: what a conversation has established (identifiers, numbers
//! with units, money, dates, paths, commands, URLs, decisions with their reasons, preferences,
//! names), each with the turn that said it, deduplicated, superseded rather than deleted when a
//! later turn changes it, rendered compactly into a context, and searchable.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use strata_core::{Role, Timestamp, TokenCounter, Turn};

use strata_text::{is_stopword, split_sentences, words, Specificity};

/// What kind of fact a span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    Command,
    Path,
    Url,
    /// Ticket and incident ids, versions, hashes, configuration keys.
    Identifier,
    Money,
    Date,
    /// A number with a unit.
    Quantity,
    /// A sentence that records a decision (and, when it gives one, its reason).
    Decision,
    /// A sentence in which someone states a preference.
    Preference,
    /// A capitalised name that is not the first word of a sentence: people, products, places.
    Name,
}

impl FactKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FactKind::Command => "command",
            FactKind::Path => "path",
            FactKind::Url => "url",
            FactKind::Identifier => "identifier",
            FactKind::Money => "money",
            FactKind::Date => "date",
            FactKind::Quantity => "quantity",
            FactKind::Decision => "decision",
            FactKind::Preference => "preference",
            FactKind::Name => "name",
        }
    }

    /// How much a sentence carrying this kind deserves a place in a tight context. Names
    /// alone do not make a sentence worth keeping; they matter to the keep-set check.
    pub fn weight(self) -> f32 {
        match self {
            FactKind::Command | FactKind::Path | FactKind::Decision | FactKind::Preference => 1.0,
            FactKind::Url | FactKind::Identifier | FactKind::Money => 0.9,
            FactKind::Date => 0.8,
            FactKind::Quantity => 0.6,
            FactKind::Name => 0.0,
        }
    }
}

/// A span of text that is a fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub kind: FactKind,
    pub value: String,
    pub start: usize,
    pub end: usize,
}

const MONTH: &str = "(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)";

const UNITS: &str = "ms|milliseconds?|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|%|percent|[kKMGTP]i?B|bytes?|rps|qps|req/s|ops/s|tokens?|users?|requests?|nodes?|replicas?|cores?|threads?|px|°C|°F|km|kg|miles?|lbs?|x";

static URL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"https?://[^\s<>()\[\]"'`]+"#).unwrap());
static BACKTICK: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"`([^`\n]+)`").unwrap());
static PROMPT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^\s*\$ (.+)$").unwrap());
static PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:~|\.{1,2})?/?(?:[A-Za-z0-9_.@-]+/)+[A-Za-z0-9_.@-]*[A-Za-z0-9_]|(?:^|\s)/[A-Za-z0-9_.-]+").unwrap()
});
static MONEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|K|m|M|bn|million|billion|thousand)\b)?|\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|dollars|euros|pounds)\b",
    )
    .unwrap()
});
static DATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s(?:of\s)?{MONTH}\b(?:,?\s\d{{4}})?|\b{MONTH}\s\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s\d{{4}})?"
    ))
    .unwrap()
});
static IDENTIFIER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Z][A-Z0-9]{1,9}-\d+\b|\bv?\d+\.\d+\.\d+(?:[-+][\w.]+)?\b|\bv\d+(?:\.\d+)?\b|#\d+\b|\b[0-9a-f]{7,40}\b|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
        .unwrap()
});
static QUANTITY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"\b\d+(?:[.,]\d+)*\s?(?:{UNITS})(?:\b|$)|\b\d+(?:\.\d+)?%")).unwrap());
static NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)*\b|\b[A-Z]{2,}[a-z]*\b").unwrap());
static DECISION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:decided|we'll go with|we will go with|going with|go with|final choice|agreed to|agreed on|we chose|settled on|opted for)\b").unwrap()
});
static PREFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:i prefer|i'd prefer|i would prefer|i'd rather|i would rather|i like|i love|i hate|i don't like|i do not like|i want|please always|please never|from now on)\b").unwrap()
});

/// Whether a sentence records a decision ("decided to", "we'll go with", "final choice", ...).
pub fn is_decision(sentence: &str) -> bool {
    DECISION.is_match(sentence)
}

/// Whether a sentence states a preference ("I prefer", "I'd rather", "from now on", ...).
pub fn is_preference(sentence: &str) -> bool {
    PREFERENCE.is_match(sentence)
}

/// Words that start sentences or name calendar things: capitalised, but not names.
fn is_common_capital(w: &str) -> bool {
    const COMMON: &[&str] = &[
        "April",
        "August",
        "But",
        "December",
        "February",
        "For",
        "Friday",
        "I",
        "If",
        "In",
        "It",
        "January",
        "July",
        "June",
        "Let",
        "March",
        "May",
        "Monday",
        "No",
        "November",
        "OK",
        "October",
        "Ok",
        "Saturday",
        "September",
        "So",
        "Sunday",
        "That",
        "The",
        "Then",
        "This",
        "Thursday",
        "Tuesday",
        "We",
        "Wednesday",
        "What",
        "When",
        "Yes",
        "You",
    ];
    COMMON.binary_search(&w).is_ok()
}

/// Every fact span in `text`, leftmost first; where spans overlap, the earlier kind in
/// [`FactKind`]'s order wins (a URL's digits are not also a quantity).
pub fn extract(text: &str) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut add = |kind: FactKind, start: usize, end: usize, value: &str| {
        let value = value.trim().trim_end_matches(['.', ',', ';', ':', '!', '?', ')']).trim();
        if value.is_empty() || spans.iter().any(|s| start < s.end && s.start < end) {
            return;
        }
        spans.push(Span { kind, value: value.to_string(), start, end });
    };
    for m in PROMPT.captures_iter(text) {
        let g = m.get(1).unwrap();
        add(FactKind::Command, g.start(), g.end(), g.as_str());
    }
    for m in URL.find_iter(text) {
        add(FactKind::Url, m.start(), m.end(), m.as_str());
    }
    for m in BACKTICK.captures_iter(text) {
        let g = m.get(1).unwrap();
        let inner = g.as_str();
        // A backticked span with a space or a flag is something to run; otherwise it names a
        // thing (a path, a key, a function).
        let kind = if inner.contains(' ') {
            FactKind::Command
        } else if inner.contains('/') {
            FactKind::Path
        } else {
            FactKind::Identifier
        };
        add(kind, g.start(), g.end(), inner);
    }
    for m in PATH.find_iter(text) {
        let v = m.as_str().trim();
        // A path has a folder and a file with an extension, or starts at a root.
        let rooted = v.starts_with('/') || v.starts_with("./") || v.starts_with("~/") || v.starts_with("../");
        let has_ext = v.rsplit('/').next().is_some_and(|f| f.contains('.') && !f.ends_with('.'));
        if rooted && v.len() > 2 || v.contains('/') && has_ext {
            add(FactKind::Path, m.end() - v.len(), m.end(), v);
        }
    }
    for m in MONEY.find_iter(text) {
        add(FactKind::Money, m.start(), m.end(), m.as_str());
    }
    for m in DATE.find_iter(text) {
        add(FactKind::Date, m.start(), m.end(), m.as_str());
    }
    for m in IDENTIFIER.find_iter(text) {
        let v = m.as_str();
        // Hex runs must look like hashes (letters and digits), not words like "deadbeef".
        let hexish = v.len() >= 7 && v.chars().all(|c| c.is_ascii_hexdigit());
        if hexish && !(v.chars().any(|c| c.is_ascii_digit()) && v.chars().any(|c| c.is_ascii_alphabetic())) {
            continue;
        }
        add(FactKind::Identifier, m.start(), m.end(), v);
    }
    for m in QUANTITY.find_iter(text) {
        add(FactKind::Quantity, m.start(), m.end(), m.as_str());
    }
    for m in NAME.find_iter(text) {
        let v = m.as_str();
        let first = text[..m.start()].trim_end();
        let sentence_start = first.is_empty() || first.ends_with(['.', '!', '?', ':', '\n', '"']);
        if sentence_start || is_common_capital(v) {
            continue;
        }
        add(FactKind::Name, m.start(), m.end(), v);
    }
    spans.sort_by_key(|s| s.start);
    spans
}

/// Lowercase, single spaces: how values are compared.
pub fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// One fact the conversation established.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    pub kind: FactKind,
    pub value: String,
    /// What the value is about: its sentence's content words with the value masked (for
    /// decisions and preferences, the words before the decision or preference phrase). A later
    /// fact of the same kind and key with another value supersedes this one.
    pub key: String,
    /// The sentence that states it, verbatim.
    pub sentence: String,
    pub turn_id: String,
    pub turn_index: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// The turn whose fact replaced this one; the fact stays, marked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// How many later turns mention the value again in other words.
    pub mentions: usize,
}

/// The facts of a conversation, in the order they were first stated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Registry {
    facts: Vec<Fact>,
    #[serde(skip)]
    by_value: BTreeMap<(FactKind, String), usize>,
    #[serde(skip)]
    by_key: BTreeMap<(FactKind, String), usize>,
    /// Sentences already seen, so that a repeated line mentions nothing new.
    #[serde(skip)]
    sentences: BTreeMap<String, usize>,
}

/// The sentence's content words with the value masked: the frame a new value must repeat to
/// replace an old one ("the budget for the billing revamp is <v>").
fn frame(sentence: &str, start: usize, end: usize) -> String {
    // After a label ("Update: the budget is ...") the frame starts afresh.
    let clause_start = sentence[..start].rfind(": ").map_or(0, |i| i + 2);
    let before = words(&sentence[clause_start..start]).filter(|w| !is_stopword(w));
    let after = words(&sentence[end..]).filter(|w| !is_stopword(w));
    before.chain(std::iter::once("<v>".to_string())).chain(after).collect::<Vec<_>>().join(" ")
}

/// Up to five content words before `start` in the clause that holds it: what a decision or
/// preference is about.
fn key_before(sentence: &str, start: usize) -> String {
    let before = &sentence[..start];
    let clause_start = before.rfind([';', '.', '!', '?', '(', '\n']).map_or(0, |i| i + 1);
    let ws: Vec<String> = words(&before[clause_start..]).filter(|w| !is_stopword(w)).collect();
    ws[ws.len().saturating_sub(5)..].join(" ")
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The registry of `turns`, as if each had been added in order.
    pub fn from_turns(turns: &[Turn]) -> Registry {
        let mut r = Registry::new();
        for (i, t) in turns.iter().enumerate() {
            r.add_turn(i, t);
        }
        r
    }

    /// Registers the facts of one turn; `index` is its position in the conversation.
    pub fn add_turn(&mut self, index: usize, turn: &Turn) {
        if matches!(turn.role, Role::System) && index == 0 {
            // The pinned system prompt is always in the context; it needs no registry entry.
            return;
        }
        for s in split_sentences(index, turn) {
            let sentence_key = normalize(&s.text);
            let repeated = self.sentences.contains_key(&sentence_key);
            self.sentences.entry(sentence_key).or_insert(index);
            let mut spans: Vec<Span> = extract(&s.text);
            if let Some(m) = DECISION.find(&s.text) {
                spans.push(Span { kind: FactKind::Decision, value: s.text.clone(), start: m.start(), end: m.end() });
            }
            if let Some(m) = PREFERENCE.find(&s.text) {
                spans.push(Span { kind: FactKind::Preference, value: s.text.clone(), start: m.start(), end: m.end() });
            }
            for span in spans {
                let value_key = (span.kind, normalize(&span.value));
                if let Some(&i) = self.by_value.get(&value_key) {
                    if !repeated && self.facts[i].turn_index != index {
                        self.facts[i].mentions += 1;
                    }
                    continue;
                }
                let key = match span.kind {
                    FactKind::Decision | FactKind::Preference => key_before(&s.text, span.start),
                    _ => frame(&s.text, span.start, span.end),
                };
                let fact = Fact {
                    kind: span.kind,
                    value: span.value,
                    key: key.clone(),
                    sentence: s.text.clone(),
                    turn_id: turn.id.clone(),
                    turn_index: index,
                    time: turn.timestamp,
                    speaker: turn.speaker.clone(),
                    superseded_by: None,
                    mentions: 0,
                };
                let id = self.facts.len();
                // Names and keyless facts supersede nothing: only a fact about the same thing can.
                if !key.is_empty() && span.kind != FactKind::Name {
                    if let Some(&old) = self.by_key.get(&(span.kind, key.clone())) {
                        if self.facts[old].superseded_by.is_none() && self.facts[old].turn_index != index {
                            self.facts[old].superseded_by = Some(turn.id.clone());
                        }
                    }
                    self.by_key.insert((span.kind, key), id);
                }
                self.by_value.insert(value_key, id);
                self.facts.push(fact);
            }
        }
    }

    pub fn facts(&self) -> &[Fact] {
        &self.facts
    }

    /// The facts stated in turn `index`. Turns are added in conversation order, so facts are
    /// in turn order and a turn's are found by bisection, without a walk over them all.
    pub fn facts_of_turn(&self, index: usize) -> &[Fact] {
        let start = self.facts.partition_point(|f| f.turn_index < index);
        let end = start + self.facts[start..].partition_point(|f| f.turn_index <= index);
        &self.facts[start..end]
    }

    /// Facts no later turn has replaced.
    pub fn active(&self) -> impl Iterator<Item = &Fact> {
        self.facts.iter().filter(|f| f.superseded_by.is_none())
    }

    /// Whether the registry holds this value (of any kind), normalised.
    pub fn holds(&self, value: &str) -> bool {
        let v = normalize(value);
        self.by_value.keys().any(|(_, held)| *held == v)
    }

    /// Facts whose sentence shares content words with `query`, best first (ties: newer first).
    pub fn query(&self, query: &str, k: usize) -> Vec<&Fact> {
        let q: Vec<String> = words(query).filter(|w| !is_stopword(w)).collect();
        let mut scored: Vec<(usize, &Fact)> = self
            .facts
            .iter()
            .map(|f| {
                let s = normalize(&f.sentence);
                (q.iter().filter(|w| s.contains(w.as_str())).count(), f)
            })
            .filter(|(n, _)| *n > 0)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.turn_index.cmp(&a.1.turn_index)));
        scored.into_iter().take(k).map(|(_, f)| f).collect()
    }

    /// The active facts' sentences that fit in `allowance` tokens as one system message, the
    /// most important first (kind, then later mentions, then recency), shown in conversation
    /// order. Returns the text and the turn ids it quotes; `None` when nothing fits.
    pub fn render(&self, allowance: usize, counter: &dyn TokenCounter) -> Option<(String, Vec<String>)> {
        const HEADER: &str = "[Facts established earlier, with the turn that stated each]";
        let specificity = Specificity::new(self.sentences.keys().map(String::as_str));
        // One line per sentence, scored by the best fact it carries.
        let mut lines: BTreeMap<(usize, String), f32> = BTreeMap::new();
        for f in self.active() {
            let score = (f.kind.weight() + 0.1 * (f.mentions.min(3) as f32)) * (0.5 + specificity.of(&f.sentence));
            if score <= 0.0 {
                continue;
            }
            let line = (f.turn_index, format!("{}: {}", f.turn_id, f.sentence));
            let e = lines.entry(line).or_insert(0.0);
            *e = e.max(score);
        }
        let mut ranked: Vec<(&(usize, String), f32)> = lines.iter().map(|(k, v)| (k, *v)).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0 .0.cmp(&a.0 .0)));
        let base = counter.count_message(Role::System, None, HEADER, None, &[]);
        if base > allowance {
            return None;
        }
        // Greedy by rank with an estimate per line, then exact: drop the lowest-ranked line
        // until the rendered message fits (token merges across lines can differ slightly).
        let mut used = base;
        let mut kept: Vec<&(usize, String)> = Vec::new();
        for (line, _) in ranked {
            let cost = counter.count(&line.1) + 2;
            if used + cost <= allowance {
                used += cost;
                kept.push(line);
            }
        }
        loop {
            if kept.is_empty() {
                return None;
            }
            let mut shown = kept.clone();
            shown.sort();
            let mut text = HEADER.to_string();
            for (_, line) in &shown {
                text.push_str("\n- ");
                text.push_str(line);
            }
            if counter.count_message(Role::System, None, &text, None, &[]) <= allowance {
                let mut ids: Vec<String> = Vec::new();
                for (_, line) in &shown {
                    let id = line.split(": ").next().unwrap_or_default().to_string();
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                return Some((text, ids));
            }
            kept.pop();
        }
    }
}
