//! The keep-set check: a summary may replace turns only if every fact of those turns survives
//! (in the summary, or held elsewhere such as the registry), and it states nothing the turns
//! did not: no identifier, number or name that is not in its source.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use strata_core::Turn;

use crate::registry::{extract, normalize, Fact, FactKind, Registry};
use strata_text::{is_stopword, words};

/// What a check found wrong; empty lists mean the summary may be used.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Verdict {
    /// Facts of the source that neither the summary nor the holder keeps: `(kind, value, turn id)`.
    pub missing: Vec<(FactKind, String, String)>,
    /// Identifiers, numbers and names in the summary that the source never states.
    pub invented: Vec<(FactKind, String)>,
    /// The share of the summary's content words found in the source, when below one half.
    pub unsupported: Option<f32>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.missing.is_empty() && self.invented.is_empty() && self.unsupported.is_none()
    }

    /// A one-line reason, for explanations and logs.
    pub fn reason(&self) -> String {
        let mut parts = Vec::new();
        if let Some((k, v, id)) = self.missing.first() {
            parts.push(format!("drops {} {v:?} from {id} ({} dropped in all)", k.as_str(), self.missing.len()));
        }
        if let Some((k, v)) = self.invented.first() {
            parts.push(format!("invents {} {v:?} ({} invented in all)", k.as_str(), self.invented.len()));
        }
        if let Some(share) = self.unsupported {
            parts.push(format!("only {:.0}% of its words are in the source", share * 100.0));
        }
        parts.join("; ")
    }
}

static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+(?:[.,]\d+)*").unwrap());

/// Words a summary may use of the conversation itself without them being names in it.
const FRAME_WORDS: &[&str] = &["assistant", "summary", "system", "the user", "user"];

/// Checks `summary` against the `source` turns it would replace. `held` says which facts are
/// kept elsewhere (in the registry that is rendered into the context); with none, every fact
/// must be in the summary itself.
pub fn check(summary: &str, source: &[Turn], held: Option<&dyn Fn(&Fact) -> bool>) -> Verdict {
    let mut verdict = Verdict::default();
    let source_text: String = source.iter().map(|t| t.content.as_str()).collect::<Vec<_>>().join("\n");
    let source_norm = normalize(&source_text);
    let summary_norm = normalize(summary);
    let registry = Registry::from_turns(source);

    // Names are checked for invention only: a summary that must repeat every capitalised word
    // of its source (products, places, shouting) could not be a summary.
    for fact in registry.facts().iter().filter(|f| f.kind != FactKind::Name) {
        if held.is_some_and(|h| h(fact)) {
            continue;
        }
        let survives = match fact.kind {
            // A sentence-long fact survives as its substance: most of its content words.
            FactKind::Decision | FactKind::Preference => {
                let ws: Vec<String> = words(&fact.sentence).filter(|w| !is_stopword(w)).collect();
                let found = ws.iter().filter(|w| summary_norm.contains(w.as_str())).count();
                ws.is_empty() || found * 5 >= ws.len() * 3
            }
            _ => summary_norm.contains(&normalize(&fact.value)),
        };
        if !survives {
            verdict.missing.push((fact.kind, fact.value.clone(), fact.turn_id.clone()));
        }
    }

    for span in extract(summary) {
        let v = normalize(&span.value);
        if span.kind == FactKind::Name && FRAME_WORDS.contains(&v.as_str()) {
            continue;
        }
        let speaker = source.iter().any(|t| t.speaker.as_deref().is_some_and(|s| normalize(s) == v));
        if !source_norm.contains(&v) && !speaker {
            verdict.invented.push((span.kind, span.value));
        }
    }
    for m in NUMBER.find_iter(summary) {
        let n = m.as_str();
        if !source_text.contains(n) && !verdict.invented.iter().any(|(_, v)| v.contains(n)) {
            verdict.invented.push((FactKind::Quantity, n.to_string()));
        }
    }

    let content: Vec<String> = words(summary).filter(|w| !is_stopword(w)).collect();
    if content.len() >= 4 {
        let found = content.iter().filter(|w| source_norm.contains(w.as_str())).count();
        let share = found as f32 / content.len() as f32;
        if share < 0.5 {
            verdict.unsupported = Some(share);
        }
    }
    verdict
}
