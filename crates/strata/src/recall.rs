//! Question-aware recall: the store's fused BM25 + embedding ranking, re-scored by each turn's
//! neighbours in the same session and by the speaker the question names, and searched twice
//! by meaning: with the question's vector and with its content words' vector.
//!
//! Why neighbours: in chat, the turn that answers a question is often the reply to the turn
//! that matches it ("What did you adopt?" / "A puppy!"), so a turn's score borrows from the
//! turns around it. Why sessions: neighbours across a long pause are unrelated. Why a second
//! vector: a question's vector leans on its speaker's name and its question words, which every
//! turn of that speaker shares (turns are embedded with their speaker's name); the vector of
//! "activities partake" alone, for "What activities does Melanie partake in?", ranks turns by
//! what the question asks about. Why bursts: people often send one thought as several short
//! messages; the messages of one speaker in a row (up to a token cap) are ranked as one turn
//! (the best of their scores) and recalled together, so evidence spread over a burst arrives
//! whole.

use std::collections::{BTreeMap, BTreeSet};

use strata_core::{RecallQuery, Role, Turn};
use strata_store::MemoryStore;
use strata_text::is_stopword;

use crate::memory::MemoryError;

#[derive(Debug, Clone, PartialEq)]
pub struct RecallConfig {
    /// Candidates taken from each ranking (BM25, embeddings) before fusion.
    pub depth: usize,
    /// Share of a neighbour's score a turn gets, at distance 1 and 2 in the same session.
    pub neighbours: [f32; 2],
    /// Relative boost for turns by a speaker the question names.
    pub speaker_boost: f32,
    /// A pause at least this long starts a new session (seconds).
    pub session_gap_seconds: i64,
    /// Weight of the ranking by the question's content words (see [`content_words`]) beside
    /// the question's own, each scaled to its best score; 0 searches with the question only.
    pub content_query: f32,
}

impl Default for RecallConfig {
    fn default() -> RecallConfig {
        RecallConfig {
            depth: 100,
            neighbours: [0.5, 0.25],
            speaker_boost: 0.5,
            session_gap_seconds: 30 * 60,
            content_query: 1.0,
        }
    }
}

/// How turns group for recall: sessions (split by pauses) and bursts (a speaker's messages in
/// a row within a session, up to a token cap), one number of each per turn, both ascending.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grouping {
    pub(crate) sessions: Vec<u32>,
    pub(crate) bursts: Vec<u32>,
    /// What the last burst costs so far.
    last_cost: usize,
}

impl Grouping {
    /// Extends the grouping to cover `turns` (what it covers already is kept). `costs[i][0]`
    /// is turn `i`'s tokens as recalled; a burst closes before the message that would take it
    /// past `cap`, so a long monologue becomes several bursts and what is ranked as one is
    /// what is recalled as one. A cap of 0 makes every message its own burst.
    pub(crate) fn extend(&mut self, turns: &[Turn], costs: &[[usize; 2]], config: &RecallConfig, cap: usize) {
        extend_sessions(&mut self.sessions, turns, config.session_gap_seconds);
        for i in self.bursts.len()..turns.len() {
            let same = i.checked_sub(1).is_some_and(|p| {
                let (a, b) = (&turns[p], &turns[i]);
                cap > 0
                    && self.last_cost + costs[i][0] <= cap
                    && self.sessions[p] == self.sessions[i]
                    && a.role == b.role
                    && a.speaker == b.speaker
                    // Tool traffic has its own units (a call with its results).
                    && a.role != Role::Tool
                    && a.tool_calls.is_empty()
                    && b.tool_calls.is_empty()
            });
            let last = self.bursts.last().copied().unwrap_or(0);
            if same {
                self.last_cost += costs[i][0];
                self.bursts.push(last);
            } else {
                self.last_cost = costs[i][0];
                self.bursts.push(if i == 0 { 0 } else { last + 1 });
            }
        }
    }
}

/// Extends `sessions` (one number per turn, from pauses between timestamps) to cover `turns`.
pub(crate) fn extend_sessions(sessions: &mut Vec<u32>, turns: &[Turn], gap: i64) {
    for i in sessions.len()..turns.len() {
        let mut session = sessions.last().copied().unwrap_or(0);
        if let (Some(a), Some(b)) = (i.checked_sub(1).and_then(|p| turns[p].timestamp), turns[i].timestamp) {
            if b.seconds() - a.seconds() >= gap {
                session += 1;
            }
        }
        sessions.push(session);
    }
}

/// The question without its stopwords, question words and the conversation's speaker names:
/// "When did Melanie paint a sunrise?" → "paint sunrise". `None` when nothing is left or
/// nothing was removed (the second search would repeat the first).
pub(crate) fn content_words(question: &str, turns: &[Turn]) -> Option<String> {
    // Question words and the possessive's "s" that the shared stopword list does not hold.
    const QUESTION: &[&str] = &["where", "why", "whom", "whose", "s"];
    let speakers: BTreeSet<String> = turns
        .iter()
        .filter_map(|t| t.speaker.as_deref())
        .flat_map(str::split_whitespace)
        .map(str::to_lowercase)
        .collect();
    let words: Vec<&str> = question.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let kept: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| {
            let w = w.to_lowercase();
            !is_stopword(&w) && !QUESTION.contains(&w.as_str()) && !speakers.contains(&w)
        })
        .collect();
    (!kept.is_empty() && kept.len() < words.len()).then(|| kept.join(" "))
}

/// Turn positions for `question`, best first: every turn with a positive score. With
/// `content` (the vector of the question's [`content_words`]), the ranking with the question's
/// `embedding` and the one with `content` (both with the question's words for BM25) are each
/// scaled to their best score and added, the second weighted by `config.content_query`. Each
/// of `extra` (a weight and one score per turn: from the phrase index, from the notes) is
/// added the same way.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rank(
    store: &dyn MemoryStore,
    conversation: &str,
    turns: &[Turn],
    grouping: &Grouping,
    question: &str,
    embedding: Option<Vec<f32>>,
    content: Option<Vec<f32>>,
    extra: Vec<(f32, Vec<f32>)>,
    config: &RecallConfig,
) -> Result<Vec<(usize, f32)>, MemoryError> {
    let named = named_speakers(turns, question);
    // A ranking (one score per turn) re-scored by neighbours and the named speaker.
    let rescore = |base: Vec<f32>| -> Vec<(usize, f32)> {
        // Bursts as [start, end) with the best score of their messages.
        let mut bursts: Vec<(usize, usize, f32)> = Vec::new();
        for (i, &score) in base.iter().enumerate() {
            match bursts.last_mut() {
                Some(b) if grouping.bursts[b.0] == grouping.bursts[i] => {
                    b.1 = i + 1;
                    b.2 = b.2.max(score);
                }
                _ => bursts.push((i, i + 1, score)),
            }
        }
        let session = |b: usize| grouping.sessions[bursts[b].0];
        let mut scored: Vec<(usize, f32, f32)> = Vec::new();
        for b in 0..bursts.len() {
            let (start, end, own) = bursts[b];
            let mut s = own;
            for (d, w) in config.neighbours.iter().enumerate() {
                let d = d + 1;
                for c in [b.checked_sub(d), b.checked_add(d).filter(|&c| c < bursts.len())].into_iter().flatten() {
                    if session(c) == session(b) {
                        s += w * bursts[c].2;
                    }
                }
            }
            if turns[start].speaker.as_ref().is_some_and(|sp| named.contains(&sp.to_lowercase())) {
                s *= 1.0 + config.speaker_boost;
            }
            if s > 0.0 {
                // Every message of the burst carries its score; its own orders it within.
                scored.extend((start..end).map(|i| (i, s, base[i])));
            }
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)).then(a.0.cmp(&b.0)));
        scored.into_iter().map(|(i, s, _)| (i, s)).collect()
    };
    // One search: the store's fused ranking.
    let search = |embedding: Option<Vec<f32>>| -> Result<Vec<(usize, f32)>, MemoryError> {
        let query = RecallQuery { text: question.to_string(), k: config.depth, embedding, time_range: None };
        let mut base = vec![0f32; turns.len()];
        for r in store.search_ranked(conversation, &query)? {
            if let Some(s) = base.get_mut(r.seq as usize) {
                *s = r.score;
            }
        }
        Ok(rescore(base))
    };
    let mut rankings = vec![(1.0, search(embedding)?)];
    if let Some(v) = content.filter(|_| config.content_query > 0.0) {
        rankings.push((config.content_query, search(Some(v))?));
    }
    for (weight, base) in extra.into_iter().filter(|(w, _)| *w > 0.0) {
        rankings.push((weight, rescore(base)));
    }
    Ok(if rankings.len() == 1 { rankings.pop().map(|(_, r)| r).unwrap_or_default() } else { combine(&rankings) })
}

/// Weighted sum of rankings, each scaled to its best score; best first, ties by position.
pub(crate) fn combine(rankings: &[(f32, Vec<(usize, f32)>)]) -> Vec<(usize, f32)> {
    let mut total: BTreeMap<usize, f32> = BTreeMap::new();
    for (weight, ranking) in rankings {
        let Some(&(_, top)) = ranking.first() else { continue };
        for &(i, s) in ranking {
            *total.entry(i).or_default() += weight * s / top;
        }
    }
    let mut out: Vec<(usize, f32)> = total.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// Lowercased speaker names that the question mentions as words.
fn named_speakers(turns: &[Turn], question: &str) -> BTreeSet<String> {
    let words: BTreeSet<String> =
        question.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    turns
        .iter()
        .filter_map(|t| t.speaker.as_deref())
        .map(str::to_lowercase)
        .filter(|s| s.split_whitespace().any(|part| words.contains(part)))
        .collect()
}
