//! Extractive summaries: whole sentences chosen by importance, centrality and novelty, kept
//! verbatim with the id of the turn that said them, to a target compression ratio.
//!
//! Importance follows the seed's rules: a decision phrase +0.3; a code block, URL or stack
//! trace +0.2; a fact referenced again by a later turn +0.4; said by a key stakeholder (an
//! architect, a team lead) +0.1. To that come the facts a sentence carries (identifiers,
//! numbers with units, dates, paths: +0.2) and its centrality: how similar it is to the rest of
//! the text, by embeddings when an [`Embedder`] is given and by shared content words when not,
//! balanced by specificity (rare words), since boilerplate is central because it recurs.
//! Selection is maximal marginal relevance, so a second sentence saying the same thing loses to
//! one that adds something. Profiles shift the weights: `exploration` keeps alternatives, pros
//! and cons and open questions; `implementation` keeps decisions, code and configuration and
//! drops questions that were answered. Small talk is dropped in every profile.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use strata_core::{Embedder, Participant, TokenCounter, Turn};

use crate::registry::{extract, FactKind, Registry};
use strata_text::{is_stopword, split_turns, words, Sentence, Specificity};

/// What the conversation is doing, which decides what a summary must keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// No task-specific weighting.
    #[default]
    General,
    /// Weighing options: keep alternatives, pros and cons, open questions (about 40% kept).
    Exploration,
    /// Building: keep decisions, code and configuration; drop small talk and resolved
    /// questions (about 20% kept).
    Implementation,
}

impl Profile {
    /// The share of the source's tokens the profile keeps when no ratio is asked for.
    pub fn keep_share(self) -> f64 {
        match self {
            Profile::General => 1.0 / 3.0,
            Profile::Exploration => 0.4,
            Profile::Implementation => 0.2,
        }
    }
}

/// Settings for one extractive summary.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractiveConfig {
    /// Source tokens per summary token: 3 for warm, 10 for cool.
    pub ratio: f64,
    pub profile: Profile,
    /// Relevance against redundancy in MMR: 1 ignores redundancy.
    pub lambda: f32,
    /// Never longer than this many tokens, whatever the ratio gives.
    pub max_tokens: Option<usize>,
}

impl Default for ExtractiveConfig {
    fn default() -> Self {
        ExtractiveConfig { ratio: 3.0, profile: Profile::General, lambda: 0.7, max_tokens: None }
    }
}

/// A sentence a summary kept, with its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    pub turn_id: String,
    pub text: String,
    pub score: f32,
}

/// An extractive summary: kept sentences in conversation order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extract {
    pub sentences: Vec<Kept>,
    pub source_tokens: usize,
    pub tokens: usize,
}

impl Extract {
    /// One line per source turn: `t12: first kept sentence. second kept sentence.`
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut last: Option<&str> = None;
        for k in &self.sentences {
            if last == Some(k.turn_id.as_str()) {
                out.push(' ');
            } else {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&k.turn_id);
                out.push_str(": ");
            }
            out.push_str(&k.text);
            last = Some(&k.turn_id);
        }
        out
    }

    pub fn source_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for k in &self.sentences {
            if ids.last() != Some(&k.turn_id) {
                ids.push(k.turn_id.clone());
            }
        }
        ids
    }
}

const STAKEHOLDER_ROLES: &[&str] = &["architect", "lead", "manager", "head", "director", "cto", "owner", "principal"];
const ALTERNATIVE_CUES: &[&str] =
    &["alternatively", "instead", "option", "pros", "cons", "trade-off", "tradeoff", "versus", " vs ", "downside"];
const SMALL_TALK: &[&str] =
    &["thanks", "thank you", "great", "sounds good", "hello", "hi ", "cheers", "awesome", "cool"];

/// Summarises `turns` extractively. `participants` names roles (for the stakeholder rule);
/// `embedder`, when given, measures centrality and redundancy by meaning instead of words.
pub fn summarize(
    turns: &[Turn],
    participants: &[Participant],
    counter: &dyn TokenCounter,
    embedder: Option<&dyn Embedder>,
    config: &ExtractiveConfig,
) -> Extract {
    let sentences = split_turns(turns);
    let source_tokens: usize = turns.iter().map(|t| counter.count(&t.content)).sum();
    if sentences.is_empty() {
        return Extract { sentences: Vec::new(), source_tokens, tokens: 0 };
    }
    let mut target = (source_tokens as f64 / config.ratio.max(1.0)).ceil() as usize;
    if let Some(max) = config.max_tokens {
        target = target.min(max);
    }
    let scores = importance(turns, participants, &sentences, config.profile);
    let vectors = similarity_vectors(&sentences, embedder);
    let centrality = centrality(&vectors);
    // Centrality alone favours boilerplate, which is central because it recurs; specificity
    // (how rare the words are) pulls the other way, so the two together favour sentences that
    // are on topic and say something once.
    let specificity = Specificity::new(sentences.iter().map(|s| s.text.as_str()));
    let relevance: Vec<f32> = scores
        .iter()
        .zip(&centrality)
        .zip(&sentences)
        .map(|((s, c), sentence)| s + 0.5 * c + 0.5 * specificity.of(&sentence.text))
        .collect();
    let costs: Vec<usize> = sentences.iter().map(|s| counter.count(&s.text) + 1).collect();

    // Maximal marginal relevance, greedily, within the token target. Each candidate's
    // redundancy (its highest similarity to a chosen sentence) is updated as sentences are
    // chosen, so a pass costs O(sentences).
    let n = sentences.len();
    let mut chosen: Vec<usize> = Vec::new();
    let mut redundancy = vec![0f32; n];
    let mut open = vec![true; n];
    let mut used = 0usize;
    for _ in 0..n {
        let mut best: Option<(usize, f32)> = None;
        // A sentence the profile scores below zero (small talk, an answered question) is never
        // worth its tokens, even when there is room.
        for i in (0..n).filter(|&i| open[i] && relevance[i] >= 0.0) {
            let mmr = config.lambda * relevance[i] - (1.0 - config.lambda) * redundancy[i];
            if best.is_none_or(|(_, b)| mmr > b) {
                best = Some((i, mmr));
            }
        }
        let Some((i, _)) = best else { break };
        open[i] = false;
        if used + costs[i] <= target {
            used += costs[i];
            chosen.push(i);
            for j in (0..n).filter(|&j| open[j]) {
                redundancy[j] = redundancy[j].max(vectors.similarity(i, j));
            }
        }
    }
    chosen.sort_unstable();
    let kept: Vec<Kept> = chosen
        .into_iter()
        .map(|i| Kept { turn_id: sentences[i].turn_id.clone(), text: sentences[i].text.clone(), score: relevance[i] })
        .collect();
    Extract { sentences: kept, source_tokens, tokens: used }
}

/// The seed's importance rules, the facts a sentence carries, and the profile's shifts.
fn importance(turns: &[Turn], participants: &[Participant], sentences: &[Sentence], profile: Profile) -> Vec<f32> {
    let registry = Registry::from_turns(turns);
    // A value mentioned again by a later turn marks its sentence as referenced later.
    let referenced: BTreeSet<(String, String)> = registry
        .facts()
        .iter()
        .filter(|f| f.mentions > 0 && f.kind != FactKind::Name)
        .map(|f| (f.turn_id.clone(), f.sentence.clone()))
        .collect();
    let stakeholder = |t: &Turn| {
        t.speaker.as_deref().is_some_and(|name| {
            participants.iter().any(|p| {
                p.name == name
                    && p.role.as_deref().is_some_and(|r| {
                        let r = r.to_lowercase();
                        STAKEHOLDER_ROLES.iter().any(|k| r.contains(k))
                    })
            })
        })
    };
    sentences
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let lower = s.text.to_lowercase();
            let spans = extract(&s.text);
            let mut score = 0f32;
            let decision = crate::registry::is_decision(&s.text);
            if decision {
                score += 0.3;
            }
            if s.code || spans.iter().any(|f| matches!(f.kind, FactKind::Url | FactKind::Command)) {
                score += 0.2;
            }
            if referenced.contains(&(s.turn_id.clone(), s.text.clone())) {
                score += 0.4;
            }
            if stakeholder(&turns[s.turn]) {
                score += 0.1;
            }
            if spans.iter().any(|f| f.kind != FactKind::Name) || crate::registry::is_preference(&s.text) {
                score += 0.2;
            }
            let question = s.text.trim_end().ends_with('?');
            // Greetings and thanks are cheap and made of rare words, so without this they would
            // fill every leftover gap; no task needs them.
            if SMALL_TALK.iter().any(|c| lower.starts_with(c.trim()) || lower == c.trim()) {
                score -= 0.5;
            }
            match profile {
                Profile::General => {}
                Profile::Exploration => {
                    if question || ALTERNATIVE_CUES.iter().any(|c| lower.contains(c)) {
                        score += 0.3;
                    }
                }
                Profile::Implementation => {
                    if decision
                        || s.code
                        || spans.iter().any(|f| matches!(f.kind, FactKind::Path | FactKind::Identifier))
                    {
                        score += 0.3;
                    }
                    // A question the next sentence, from someone else, answers is resolved.
                    let answered = sentences.get(i + 1).is_some_and(|n| n.turn != s.turn);
                    if question && answered {
                        score -= 0.3;
                    }
                }
            }
            score
        })
        .collect()
}

/// Sentence vectors for similarity: embeddings, or bags of content words.
enum Vectors {
    Dense(Vec<Vec<f32>>),
    Words(Vec<BTreeSet<String>>),
}

impl Vectors {
    fn similarity(&self, i: usize, j: usize) -> f32 {
        match self {
            Vectors::Dense(v) => v[i].iter().zip(&v[j]).map(|(a, b)| a * b).sum(),
            Vectors::Words(v) => {
                let inter = v[i].intersection(&v[j]).count();
                let union = v[i].len() + v[j].len() - inter;
                if union == 0 {
                    0.0
                } else {
                    inter as f32 / union as f32
                }
            }
        }
    }
}

fn similarity_vectors(sentences: &[Sentence], embedder: Option<&dyn Embedder>) -> Vectors {
    if let Some(e) = embedder {
        let texts: Vec<&str> = sentences.iter().map(|s| s.text.as_str()).collect();
        // An embedder that fails costs the summary its centrality signal, not the summary.
        if let Ok(v) = e.embed(&texts) {
            return Vectors::Dense(v);
        }
    }
    Vectors::Words(sentences.iter().map(|s| words(&s.text).filter(|w| !is_stopword(w)).collect()).collect())
}

/// Similarity of each sentence to the text as a whole: to the mean embedding, or, for words,
/// the share of its content words' weight in the text's word counts.
fn centrality(v: &Vectors) -> Vec<f32> {
    match v {
        Vectors::Dense(vs) => {
            let dim = vs.first().map_or(0, Vec::len);
            let mut mean = vec![0f32; dim];
            for x in vs {
                mean.iter_mut().zip(x).for_each(|(m, x)| *m += x);
            }
            let norm = mean.iter().map(|m| m * m).sum::<f32>().sqrt().max(1e-9);
            vs.iter().map(|x| x.iter().zip(&mean).map(|(a, b)| a * b).sum::<f32>() / norm).collect()
        }
        Vectors::Words(ws) => {
            let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
            for w in ws.iter().flatten() {
                *counts.entry(w.as_str()).or_insert(0) += 1;
            }
            let n = ws.len().max(1) as f32;
            ws.iter()
                .map(|s| {
                    if s.is_empty() {
                        return 0.0;
                    }
                    // Words shared with other sentences, per word, damped for length.
                    let shared: f32 = s.iter().map(|w| (counts[w.as_str()] - 1) as f32 / n).sum();
                    (shared / (s.len() as f32).sqrt()).min(1.0)
                })
                .collect()
        }
    }
}
