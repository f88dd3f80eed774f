//! BM25 over one conversation's turns, held in memory: the lexical half of SQLite recall.
//!
//! Why not FTS5: its `bm25()` is computed for every row that matches any query word, at about
//! 0.8 µs a row, and a question naming a speaker or a year matches a third of a long
//! conversation (34,000 of 100,000 turns), which made one search cost 24 ms. Here a posting is
//! an addition into a score array (a few nanoseconds), and only the best `depth` rows are
//! sorted. The index is built from the durable rows on a conversation's first search and
//! extended with the rows appended since at every later one, like the vectors; the rows in
//! SQLite remain the only copy that matters.

use std::borrow::Cow;
use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};
use strata_text::is_stopword;

/// Okapi BM25's term-frequency saturation and length normalisation, as FTS5 and Lucene set them.
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// The words of `text` as the index sees them: split at anything that is not a letter or a
/// digit (as SQLite's `unicode61` tokenizer does) and lowercased. Stopwords come back as
/// `None`: they count towards a turn's length, as in BM25, but are never searched for.
fn words(text: &str) -> impl Iterator<Item = Option<String>> + '_ {
    strata_text::alnum_words(text).map(|w| {
        let w = w.to_lowercase();
        (!is_stopword(&w)).then_some(w)
    })
}

/// [`words`], stemmed by Snowball's English (Porter 2) stemmer, so that "deploying" finds
/// "deployed".
pub(crate) fn tokens(text: &str) -> impl Iterator<Item = Option<String>> + '_ {
    let stemmer = Stemmer::create(Algorithm::English);
    words(text).map(move |w| w.map(|w| stemmer.stem(&w).into_owned()))
}

/// The distinct searchable words of a query, unstemmed, sorted: for a backend that stems them
/// itself.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn query_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = words(text).flatten().collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// The distinct searchable terms of a query, stemmed, sorted.
pub(crate) fn query_terms(text: &str) -> Vec<String> {
    let mut terms: Vec<String> = tokens(text).flatten().collect();
    terms.sort_unstable();
    terms.dedup();
    terms
}

/// An inverted index of one conversation. Documents are numbered in the order they were added,
/// which is the conversation's order.
#[derive(Debug, Default)]
pub(crate) struct LexicalIndex {
    /// The caller's id of each document (the `turns` row), and its time for range filters.
    rows: Vec<i64>,
    times: Vec<Option<i64>>,
    lengths: Vec<u32>,
    total_length: u64,
    /// Each lowercased word seen, with its term (`None` for a stopword): a word is stemmed
    /// once, not at every occurrence, which makes indexing a long conversation several times
    /// faster.
    words: HashMap<String, Option<u32>>,
    terms: HashMap<String, u32>,
    /// For each term, the documents that hold it, ascending, with how often.
    postings: Vec<Vec<(u32, u32)>>,
}

impl LexicalIndex {
    /// How many documents are indexed.
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    pub(crate) fn add(&mut self, row: i64, time: Option<i64>, text: &str) {
        let doc = self.rows.len() as u32;
        let stemmer = Stemmer::create(Algorithm::English);
        let mut found: Vec<u32> = Vec::new();
        let mut length = 0u32;
        for word in strata_text::alnum_words(text) {
            length += 1;
            let lower: Cow<'_, str> = if word.chars().any(char::is_uppercase) {
                Cow::Owned(word.to_lowercase())
            } else {
                Cow::Borrowed(word)
            };
            let term = match self.words.get(lower.as_ref()) {
                Some(&term) => term,
                None => {
                    let term = (!is_stopword(&lower)).then(|| {
                        let stem = stemmer.stem(&lower).into_owned();
                        let next = self.terms.len() as u32;
                        let id = *self.terms.entry(stem).or_insert(next);
                        if id == next {
                            self.postings.push(Vec::new());
                        }
                        id
                    });
                    self.words.insert(lower.into_owned(), term);
                    term
                }
            };
            found.extend(term);
        }
        found.sort_unstable();
        for run in found.chunk_by(|a, b| a == b) {
            self.postings[run[0] as usize].push((doc, run.len() as u32));
        }
        self.rows.push(row);
        self.times.push(time);
        self.lengths.push(length);
        self.total_length += u64::from(length);
    }

    /// Up to `depth` rows by BM25 for `terms`, best first, ties by row; only rows whose time
    /// `keep` accepts.
    pub(crate) fn search(&self, terms: &[String], depth: usize, keep: impl Fn(Option<i64>) -> bool) -> Vec<i64> {
        let n = self.rows.len();
        if n == 0 || depth == 0 {
            return Vec::new();
        }
        let avg_length = self.total_length as f32 / n as f32;
        let mut scores = vec![0f32; n];
        let mut touched: Vec<u32> = Vec::new();
        for term in terms {
            let Some(list) = self.terms.get(term).map(|&t| &self.postings[t as usize]) else { continue };
            // FTS5's idf, floored the same way: a term in more than half the turns still
            // counts a little rather than negatively.
            let df = list.len() as f32;
            let idf = (((n as f32 - df + 0.5) / (df + 0.5)).ln()).max(1e-6);
            for &(doc, tf) in list {
                let tf = tf as f32;
                let norm = K1 * (1.0 - B + B * self.lengths[doc as usize] as f32 / avg_length);
                let score = &mut scores[doc as usize];
                if *score == 0.0 {
                    touched.push(doc);
                }
                *score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let mut ranked: Vec<(f32, u32)> = touched
            .into_iter()
            .filter(|&doc| keep(self.times[doc as usize]))
            .map(|doc| (scores[doc as usize], doc))
            .collect();
        crate::search::top(&mut ranked, depth, |&(_, doc)| i64::from(doc));
        ranked.into_iter().map(|(_, doc)| self.rows[doc as usize]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(texts: &[&str]) -> LexicalIndex {
        let mut index = LexicalIndex::default();
        for (i, t) in texts.iter().enumerate() {
            index.add(100 + i as i64, Some(i as i64), t);
        }
        index
    }

    #[test]
    fn stems_splits_and_drops_stopwords() {
        assert_eq!(query_terms("Deploying the deploy-scripts, and DEPLOYED!"), ["deploy", "script"]);
        let all: Vec<Option<String>> = tokens("the cat").collect();
        assert_eq!(all, [None, Some("cat".to_string())]);
    }

    #[test]
    fn ranks_rare_terms_and_short_turns_first() {
        let index = index(&[
            "we talked about the weather and the weather again",
            "the deploy script failed on the staging host",
            "weather",
            "a long turn about many things: the deploy, lunch, the weather, the staging host and more",
        ]);
        // "staging" and "deploy" are in two turns each, "weather" in three: the short turn
        // holding both rare words wins; turns with neither come last or not at all.
        assert_eq!(index.search(&query_terms("deploy to staging"), 10, |_| true), [101, 103]);
        assert_eq!(index.search(&query_terms("weather"), 10, |_| true), [102, 100, 103]);
        assert_eq!(index.search(&query_terms("weather"), 2, |_| true), [102, 100]);
        assert_eq!(index.search(&query_terms("weather"), 10, |t| t != Some(2)), [100, 103]);
        assert!(index.search(&query_terms("unrelated"), 10, |_| true).is_empty());
    }

    #[test]
    fn matches_fts5_bm25_on_the_same_text() {
        // The formula and its constants are FTS5's: on a one-column table of the same rows,
        // `bm25()` orders them the same way.
        let texts = [
            "the deploy script failed on staging",
            "staging is down again, deploy later",
            "lunch at noon",
            "deploy deploy deploy",
            "we deploy to production on Fridays, never to staging",
        ];
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE VIRTUAL TABLE f USING fts5 (text, tokenize = 'porter unicode61')").unwrap();
        for (i, t) in texts.iter().enumerate() {
            conn.execute("INSERT INTO f (rowid, text) VALUES (?1, ?2)", rusqlite::params![100 + i as i64, t]).unwrap();
        }
        let mut stmt =
            conn.prepare("SELECT rowid FROM f WHERE f MATCH 'deploy OR staging' ORDER BY bm25(f), rowid").unwrap();
        let fts: Vec<i64> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
        assert_eq!(index(&texts).search(&query_terms("deploy staging"), 10, |_| true), fts);
    }
}
