//! Phrase vectors, written at store time: every turn's short runs of content words ("pottery
//! class", "car workshop", "boston") embedded once each, so that a question about a kind of
//! thing ("activities", "cities") meets the turns that name an instance of it, which neither
//! its words nor a whole turn's vector reach.
//!
//! Why phrases and not the turn: a turn's vector is the mean of everything it says, and a
//! sentence's is still mostly its verbs and feelings; a phrase of one to three content words is
//! close to what it names and nothing else. Each distinct phrase of the conversation is
//! embedded once (an embedder's disk cache keeps it across runs), and a turn scores its best
//! phrase's cosine to the question's content words.

use std::collections::{HashMap, HashSet};

use strata_core::{EmbedError, Embedder, Turn};
use strata_text::is_stopword;

/// Longest phrase, in words: a longer run of content words is cut into runs this long.
const MAX_WORDS: usize = 3;

/// The phrases of `text`: maximal runs of content words (letters and digits, with inner `-`
/// and `'`), broken at stopwords and at any punctuation, cut into runs of at most
/// [`MAX_WORDS`]; lowercased, each once, in order of first appearance. Words of one character
/// are left out.
pub(crate) fn phrases(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<String> = Vec::new();
    let flush = |run: &mut Vec<String>, out: &mut Vec<String>| {
        for chunk in run.chunks(MAX_WORDS) {
            let p = chunk.join(" ");
            if !out.contains(&p) {
                out.push(p);
            }
        }
        run.clear();
    };
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    loop {
        let c = chars.next();
        let inner = |c: char, next: Option<&char>| {
            (c == '-' || c == '\'' || c == '’') && next.is_some_and(|n| n.is_alphanumeric())
        };
        match c {
            Some(c) if c.is_alphanumeric() || (!word.is_empty() && inner(c, chars.peek())) => {
                word.extend(c.to_lowercase());
            }
            _ => {
                if !word.is_empty() {
                    let w = content_word(std::mem::take(&mut word));
                    if w.as_deref().is_none_or(|w| is_stopword(w) || w.chars().count() < 2) {
                        flush(&mut run, &mut out);
                    } else {
                        run.extend(w);
                    }
                }
                match c {
                    None => {
                        flush(&mut run, &mut out);
                        return out;
                    }
                    // Words go on across spaces; anything else ends the phrase.
                    Some(c) if c.is_whitespace() => {}
                    Some(_) => flush(&mut run, &mut out),
                }
            }
        }
    }
}

/// A word as a phrase holds it: a possessive without its `'s` ("melanie's" is "melanie"), and
/// `None` for other contractions ("don't", "we're"), which name nothing.
fn content_word(w: String) -> Option<String> {
    match w.split_once(['\'', '’']) {
        None => Some(w),
        Some((head, "s")) => Some(head.to_string()),
        Some(_) => None,
    }
}

/// The conversation's phrases with their vectors, and which phrases each turn holds.
#[derive(Debug, Default)]
pub(crate) struct PhraseIndex {
    ids: HashMap<String, u32>,
    /// Unit vectors by phrase id; empty where the embedder gave none.
    vectors: Vec<Vec<f32>>,
    /// Phrase ids of each turn, in turn order.
    turns: Vec<Vec<u32>>,
}

impl PhraseIndex {
    /// Turns indexed so far.
    pub(crate) fn len(&self) -> usize {
        self.turns.len()
    }

    /// Embeds the phrases of `turns` not embedded yet, in one call. A failed call leaves them
    /// without vectors (they score nothing) and is returned for the caller to note.
    pub(crate) fn embed_new(&mut self, turns: &[Turn], embedder: &dyn Embedder) -> Result<(), EmbedError> {
        // A set beside the list: at open, `turns` is the whole conversation.
        let mut seen: HashSet<String> = HashSet::new();
        let mut new: Vec<String> = Vec::new();
        for t in turns {
            for p in phrases(&t.content) {
                if !self.ids.contains_key(&p) && seen.insert(p.clone()) {
                    new.push(p);
                }
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        let refs: Vec<&str> = new.iter().map(String::as_str).collect();
        let result = embedder.embed(&refs);
        let vectors = match &result {
            Ok(vs) if vs.len() == new.len() => vs.iter().map(|v| unit(v)).collect(),
            _ => vec![Vec::new(); new.len()],
        };
        for (p, v) in new.into_iter().zip(vectors) {
            self.ids.insert(p, self.vectors.len() as u32);
            self.vectors.push(v);
        }
        result.map(|_| ())
    }

    /// Indexes the next turn; its phrases must have been through [`PhraseIndex::embed_new`]
    /// (one that was not scores nothing).
    pub(crate) fn push(&mut self, turn: &Turn) {
        let ids = phrases(&turn.content).iter().filter_map(|p| self.ids.get(p).copied()).collect();
        self.turns.push(ids);
    }

    /// Each turn's best phrase cosine to `query`, for the `depth` best turns, shifted so that
    /// the best turn left out would score 0; the others 0.
    pub(crate) fn scores(&self, query: &[f32], depth: usize) -> Vec<f32> {
        let q = unit(query);
        let by_phrase: Vec<f32> = self
            .vectors
            .iter()
            .map(|v| if v.len() == q.len() { v.iter().zip(&q).map(|(a, b)| a * b).sum() } else { f32::MIN })
            .collect();
        let mut best: Vec<f32> = self
            .turns
            .iter()
            .map(|ids| ids.iter().map(|&id| by_phrase[id as usize]).fold(f32::MIN, f32::max))
            .collect();
        let mut sorted: Vec<f32> = best.iter().copied().filter(|&s| s > f32::MIN).collect();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let floor = sorted.get(depth).copied().unwrap_or(sorted.last().copied().unwrap_or(0.0) - 1e-3);
        for s in &mut best {
            *s = (*s - floor).max(0.0);
        }
        best
    }
}

fn unit(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 {
        return Vec::new();
    }
    v.iter().map(|x| x / norm).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_are_runs_of_content_words() {
        assert_eq!(
            phrases("I just signed up for a pottery class yesterday! It's calming, and my kids' art-show was great."),
            ["signed", "pottery class yesterday", "calming", "kids", "art-show", "great"]
        );
        // Runs longer than three words are cut; repeats are kept once.
        assert_eq!(
            phrases("San Francisco Bay Area tech scene. San Francisco Bay"),
            ["san francisco bay", "area tech scene"]
        );
        assert!(phrases("Don't! It's a b c.").is_empty());
    }
}
