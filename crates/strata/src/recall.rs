//! Question-aware recall, as a list of stages: the store's fused BM25 + embedding ranking
//! (searched twice by meaning: with the question's vector and with its content words'), each
//! re-scored by its surroundings (bursts, neighbours in the same session, the speaker the
//! question names), then the rankings added into one, then (with a [`Reranking`]) the deeper
//! candidates reordered by a cross-encoder.
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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_core::{RecallQuery, Reranker, Role, Turn};
use strata_store::Store;
use strata_text::is_stopword;

use crate::config::RecallConfig;
use crate::error::MemoryError;

/// How turns group for recall: sessions (split by pauses) and bursts (a speaker's messages in
/// a row within a session, up to a token cap), one number of each per turn, both ascending.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grouping {
    pub(crate) sessions: Vec<u32>,
    pub(crate) bursts: Vec<u32>,
    /// Every speaker's name, lowercased: what a question may name, kept as turns arrive so
    /// that a question never walks the conversation to find them.
    pub(crate) speakers: BTreeSet<String>,
    /// What the last burst costs so far.
    last_cost: usize,
}

impl Grouping {
    /// The turns of turn `i`'s burst.
    pub(crate) fn burst(&self, i: usize) -> std::ops::Range<usize> {
        let b = &self.bursts;
        let lo = (0..i).rev().take_while(|&j| b[j] == b[i]).last().unwrap_or(i);
        let hi = (i + 1..b.len()).take_while(|&j| b[j] == b[i]).last().map_or(i + 1, |j| j + 1);
        lo..hi
    }

    /// Extends the grouping to cover `turns` (what it covers already is kept). `costs[i][0]`
    /// is turn `i`'s tokens as recalled; a burst closes before the message that would take it
    /// past `cap`, so a long monologue becomes several bursts and what is ranked as one is
    /// what is recalled as one. A cap of 0 makes every message its own burst.
    pub(crate) fn extend(&mut self, turns: &[Turn], costs: &[[usize; 2]], config: &RecallConfig, cap: usize) {
        extend_sessions(&mut self.sessions, turns, config.session_gap_seconds);
        for s in turns[self.bursts.len()..].iter().filter_map(|t| t.speaker.as_deref()) {
            self.speakers.insert(s.to_lowercase());
        }
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

/// What a question is embedded as, in one model call: the question itself, then its content
/// words when they differ from it ([`content_words`]) and the question is a question's length
/// ([`CONTENT_WORDS_MAX`]). Public so that a bench can time the model on exactly what recall
/// asks of it (`cargo xtask serve-load`).
pub fn question_texts(question: &str, speakers: &BTreeSet<String>) -> Vec<String> {
    let short = strata_text::alnum_words(question).nth(CONTENT_WORDS_MAX).is_none();
    std::iter::once(question.to_string()).chain(content_words(question, speakers).filter(|_| short)).collect()
}

/// The longest question, in words, searched by its content words as well. The second search
/// corrects a short question's vector, which leans towards every turn of the speaker it names;
/// a long message's vector is carried by its content already, and its content words would
/// double the model's work for it (a server's question is the user's whole message: about 200
/// tokens under `cargo xtask serve-load`, where that work is what a request waits for). Every
/// question of LoCoMo and the probe sets is under 30 words.
pub(crate) const CONTENT_WORDS_MAX: usize = 64;

/// The question without its stopwords, question words and the conversation's speaker names:
/// "When did Melanie paint a sunrise?" → "paint sunrise". `None` when nothing is left or
/// nothing was removed (the second search would repeat the first).
pub(crate) fn content_words(question: &str, speakers: &BTreeSet<String>) -> Option<String> {
    // Question words and the possessive's "s" that the shared stopword list does not hold.
    const QUESTION: &[&str] = &["where", "why", "whom", "whose", "s"];
    let speakers: BTreeSet<&str> = speakers.iter().flat_map(|s| s.split_whitespace()).collect();
    let words: Vec<&str> = strata_text::alnum_words(question).collect();
    let kept: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| {
            let w = w.to_lowercase();
            !is_stopword(&w) && !QUESTION.contains(&w.as_str()) && !speakers.contains(w.as_str())
        })
        .collect();
    (!kept.is_empty() && kept.len() < words.len()).then(|| kept.join(" "))
}

/// What recall reads of a snapshot.
pub(crate) struct Input<'a> {
    pub(crate) store: &'a dyn Store,
    pub(crate) conversation: &'a str,
    pub(crate) turns: &'a [Turn],
    pub(crate) grouping: &'a Grouping,
    pub(crate) config: &'a RecallConfig,
    pub(crate) reranker: Option<&'a Reranking>,
    /// Each turn's tokens as recalled (plain, dated).
    pub(crate) costs: &'a [[usize; 2]],
    /// The tokens the recalled turns may fill, where a context is being built.
    pub(crate) room: Option<usize>,
}

/// A question as recall searches it: its words, and each search's weight and vector (the
/// question's own; its [`content_words`]' when there are any). No vector (no embedder, or a
/// failed call) searches by words alone.
#[derive(Debug)]
pub(crate) struct Query<'a> {
    pub(crate) text: &'a str,
    pub(crate) searches: Vec<(f32, Option<Vec<f32>>)>,
}

impl<'a> Query<'a> {
    /// `content` is the content words' vector, given only when they are weighed
    /// (`content_query` above 0: the caller then embeds them at all).
    pub(crate) fn new(
        text: &'a str,
        embedding: Option<Vec<f32>>,
        content: Option<Vec<f32>>,
        config: &RecallConfig,
    ) -> Query<'a> {
        let mut searches = vec![(1.0, embedding)];
        if let Some(v) = content {
            searches.push((config.content_query, Some(v)));
        }
        Query { text, searches }
    }
}

/// Turn positions with their scores, best first.
pub(crate) type TurnScores = Vec<(usize, f32)>;

/// One stage of recall: it takes the weighted rankings the stages before it made and returns
/// new ones. An experiment adds a stage rather than fields.
pub(crate) trait Stage: Sync {
    fn run(
        &self,
        at: &Input<'_>,
        query: &Query<'_>,
        rankings: Vec<(f32, TurnScores)>,
    ) -> Result<Vec<(f32, TurnScores)>, MemoryError>;
}

/// The store's fused BM25 + dense ranking, once per search of the query.
struct StoreFusion;

impl Stage for StoreFusion {
    fn run(
        &self,
        at: &Input<'_>,
        query: &Query<'_>,
        _: Vec<(f32, TurnScores)>,
    ) -> Result<Vec<(f32, TurnScores)>, MemoryError> {
        query
            .searches
            .iter()
            .map(|(weight, embedding)| {
                let q = RecallQuery {
                    text: query.text.to_string(),
                    k: at.config.depth,
                    embedding: embedding.clone(),
                    time_range: None,
                };
                let found = at.store.search_ranked(at.conversation, &q)?;
                Ok((*weight, found.into_iter().map(|r| (r.seq as usize, r.score)).collect()))
            })
            .collect()
    }
}

/// Each ranking re-scored by the turn's surroundings: a burst ranked as one turn (the best of
/// its messages), a share of its neighbours' scores in the same session, and a boost for the
/// speaker the question names.
struct Surroundings;

impl Stage for Surroundings {
    fn run(
        &self,
        at: &Input<'_>,
        query: &Query<'_>,
        rankings: Vec<(f32, TurnScores)>,
    ) -> Result<Vec<(f32, TurnScores)>, MemoryError> {
        let named = named_speakers(&at.grouping.speakers, query.text);
        Ok(rankings.into_iter().map(|(w, ranked)| (w, rescore(at, &named, &ranked))).collect())
    }
}

/// The rankings added into one, each scaled to its best score; one ranking passes as it is.
struct Combine;

impl Stage for Combine {
    fn run(
        &self,
        _: &Input<'_>,
        _: &Query<'_>,
        rankings: Vec<(f32, TurnScores)>,
    ) -> Result<Vec<(f32, TurnScores)>, MemoryError> {
        Ok(if rankings.len() == 1 { rankings } else { vec![(1.0, combine(&rankings))] })
    }
}

/// A cross-encoder's place in recall: the model, how long one context may wait for it, and
/// how often that ran out.
pub struct Reranking {
    pub model: Arc<dyn Reranker>,
    /// Past this, the candidates not yet scored keep their fused order, after the scored ones.
    pub deadline: Option<Duration>,
    contexts: AtomicUsize,
    cut_short: AtomicUsize,
    /// Passages scored, over all contexts: what the reranker cost.
    passages: AtomicUsize,
    /// Seconds a byte of a slice's pairs cost in the latest model call (an f64's bits; 0 until
    /// the first): what sizes each slice to the time a context has left. Measured, not fixed,
    /// because it moves by an order of magnitude with the passages' length and the load.
    pace: AtomicU64,
}

/// What a [`Reranking`] has done: questions reranked, how many of them were cut short (past
/// the deadline, or by a failed model call: the fused order stood for the rest either way),
/// and the passages the model scored, its cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RerankCounts {
    pub contexts: usize,
    pub cut_short: usize,
    pub passages: usize,
}

impl RerankCounts {
    /// The share of reranked questions that were cut short (0 with none).
    pub fn cut_short_share(&self) -> f64 {
        self.per_context(self.cut_short)
    }

    /// Passages scored a reranked question, on average (0 with none).
    pub fn passages_per_context(&self) -> f64 {
        self.per_context(self.passages)
    }

    fn per_context(&self, n: usize) -> f64 {
        if self.contexts == 0 {
            0.0
        } else {
            n as f64 / self.contexts as f64
        }
    }
}

impl std::fmt::Debug for Reranking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranking").field("model", &self.model.model_id()).field("deadline", &self.deadline).finish()
    }
}

impl Reranking {
    pub fn new(model: Arc<dyn Reranker>, deadline: Option<Duration>) -> Reranking {
        Reranking {
            model,
            deadline,
            contexts: AtomicUsize::new(0),
            cut_short: AtomicUsize::new(0),
            passages: AtomicUsize::new(0),
            pace: AtomicU64::new(0),
        }
    }

    /// What the reranker has done so far.
    pub fn counts(&self) -> RerankCounts {
        RerankCounts {
            contexts: self.contexts.load(Ordering::Relaxed),
            cut_short: self.cut_short.load(Ordering::Relaxed),
            passages: self.passages.load(Ordering::Relaxed),
        }
    }

    /// How many of `rest` go to the model next: a slice of at most [`RERANK_SLICE`], and with
    /// a deadline only as many as the latest pace says fit in `left`, none once the time is up.
    /// One at least while no call has been timed yet, and at a context's `first` slice however
    /// slow the pace: it measures the pace again, so that one slow call (a burst of load) does
    /// not stop reranking for good. A slice's work is the bytes of its pairs, the question's and
    /// each passage's: the model reads a slice's pairs one after another, without padding.
    pub(crate) fn next_slice(&self, query: &str, rest: &[String], left: Option<Duration>, first: bool) -> usize {
        let most = rest.len().min(RERANK_SLICE);
        let Some(left) = left else { return most };
        if left.is_zero() {
            return 0;
        }
        let pace = f64::from_bits(self.pace.load(Ordering::Relaxed));
        let (mut n, mut work) = (0, 0);
        if pace > 0.0 {
            for p in &rest[..most] {
                work += query.len() + p.len();
                if pace * work as f64 > left.as_secs_f64() {
                    break;
                }
                n += 1;
            }
        }
        if pace == 0.0 || first {
            n.max(most.min(1))
        } else {
            n
        }
    }

    /// Keeps the pace of a slice just scored against `query`.
    pub(crate) fn timed(&self, query: &str, slice: &[&str], took: Duration) {
        let work: usize = slice.iter().map(|p| query.len() + p.len()).sum();
        if work > 0 {
            self.pace.store((took.as_secs_f64() / work as f64).to_bits(), Ordering::Relaxed);
        }
    }
}

/// Candidates go to the model in slices at most this long, so that the deadline is checked
/// between.
pub(crate) const RERANK_SLICE: usize = 8;

/// The fused ranking's best units (bursts): the first `rerank_keep` keep their places, the
/// rest of the candidates are read with the question by the reranker and follow in its order;
/// every other turn follows in the fused order. The candidates are the first
/// `rerank_candidates` units, and for a context only those that could enter it (see
/// `RecallConfig::rerank_reach`): a small budget needs few, and a long message that cannot
/// fit beside the kept units is not read. Why keep the first: the fused
/// top already holds almost every evidence turn it finds (on LoCoMo's first five
/// conversations every question whose evidence ranked in its first 40 units was answered at
/// 2000 tokens), and the cross-encoder alone ranks single-hop evidence worse than fusion does;
/// what it can add is evidence the fusion ranked deep. A failed model call keeps the fused
/// order for what it did not score.
struct Rerank;

impl Stage for Rerank {
    fn run(
        &self,
        at: &Input<'_>,
        query: &Query<'_>,
        rankings: Vec<(f32, TurnScores)>,
    ) -> Result<Vec<(f32, TurnScores)>, MemoryError> {
        let (Some(rr), [(_, ranked)]) = (at.reranker, rankings.as_slice()) else { return Ok(rankings) };
        let Some(&(_, top)) = ranked.first() else { return Ok(rankings) };
        // Units (bursts), in fused order.
        let mut units: Vec<std::ops::Range<usize>> = Vec::new();
        let mut seen = BTreeSet::new();
        for &(i, _) in ranked {
            if units.len() >= at.config.rerank_candidates {
                break;
            }
            if seen.insert(at.grouping.bursts[i]) {
                units.push(at.grouping.burst(i));
            }
        }
        let keep = at.config.rerank_keep.min(units.len());
        // Only what could enter the context. The kept units are packed first, as the recalled
        // block packs them (one that does not fit is passed over); a candidate can only
        // enter the gap they leave, so one larger than the gap is not read, and the rest are
        // read in fused order until they add up to `rerank_reach` times the gap.
        if let Some(room) = at.room.filter(|_| at.config.rerank_reach > 0.0) {
            let cost =
                |u: &std::ops::Range<usize>| -> usize { u.clone().map(|i| at.costs.get(i).map_or(0, |c| c[0])).sum() };
            let mut fill = 0;
            for c in units[..keep].iter().map(cost) {
                if fill + c <= room {
                    fill += c;
                }
            }
            let gap = room - fill;
            let reach = (at.config.rerank_reach * gap as f32) as usize;
            let mut total = 0;
            let mut read = units[keep..].to_vec();
            read.retain(|u| {
                let c = cost(u);
                let take = c <= gap && total < reach;
                if take {
                    total += c;
                }
                take
            });
            units.truncate(keep);
            units.extend(read);
        }
        let words = question_words(query.text, &at.grouping.speakers);
        let passages: Vec<String> =
            units[keep..].iter().map(|u| passage(&at.turns[u.clone()], &words, at.config.rerank_window)).collect();
        let start = Instant::now();
        let mut scores: Vec<f32> = Vec::new();
        let mut cut_short = false;
        while scores.len() < passages.len() {
            let rest = &passages[scores.len()..];
            let left = rr.deadline.map(|d| d.saturating_sub(start.elapsed()));
            let n = rr.next_slice(query.text, rest, left, scores.is_empty());
            if n == 0 {
                cut_short = true;
                break;
            }
            let slice: Vec<&str> = rest[..n].iter().map(String::as_str).collect();
            let called = Instant::now();
            match rr.model.score(query.text, &slice) {
                Ok(s) if s.len() == slice.len() => {
                    rr.timed(query.text, &slice, called.elapsed());
                    scores.extend(s);
                }
                _ => {
                    cut_short = true;
                    break;
                }
            }
        }
        if !passages.is_empty() {
            rr.contexts.fetch_add(1, Ordering::Relaxed);
            rr.passages.fetch_add(scores.len(), Ordering::Relaxed);
        }
        if cut_short {
            rr.cut_short.fetch_add(1, Ordering::Relaxed);
        }
        // The kept units, then the scored ones by score, then the unscored in fused order.
        let mut scored: Vec<usize> = (0..scores.len()).collect();
        scored.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        let order: Vec<usize> = (0..keep).chain(scored.into_iter().map(|u| keep + u)).collect();
        // Units so placed rank first, scored 1 to 2 by their place; every other turn keeps its
        // fused score scaled to at most 1, so that scores stay positive and in this order.
        let mut out: TurnScores = Vec::with_capacity(ranked.len());
        let mut placed = BTreeSet::new();
        let n = order.len() as f32;
        for (rank, u) in order.into_iter().enumerate() {
            let score = 1.0 + (n - rank as f32) / n;
            for i in units[u].clone() {
                placed.insert(i);
                out.push((i, score));
            }
        }
        out.extend(ranked.iter().filter(|(i, _)| !placed.contains(i)).map(|&(i, s)| (i, s / top)));
        Ok(vec![(1.0, out)])
    }
}

/// What the reranker reads for a unit's turns: one `speaker: text` line per turn, or where
/// that is over `window` words (and `window` is not 0), the window of `window` words that
/// holds the most of the question's `words`, after the first turn's speaker. Why: a pair's
/// cost grows faster than its length (attention), a long message is mostly about other
/// things than the question, and the cross-encoder reads at most 512 tokens anyway, cutting
/// from the end whatever the question matched.
pub(crate) fn passage(turns: &[Turn], words: &BTreeSet<String>, window: usize) -> String {
    let lines: Vec<String> = turns.iter().map(|t| format!("{}: {}", t.speaker_or_role(), t.content)).collect();
    let text = lines.join("\n");
    let spans: Vec<&str> = text.split_whitespace().collect();
    if window == 0 || spans.len() <= window {
        return text;
    }
    let at = best_window(&spans, words, window);
    let body = spans[at..at + window].join(" ");
    match turns.first() {
        Some(t) if at > 0 => format!("{}: {body}", t.speaker_or_role()),
        _ => body,
    }
}

/// The question's words that a passage's window is chosen by: its [`content_words`] (all of
/// its words that are not stopwords when none were removed), lowercased.
fn question_words(question: &str, speakers: &BTreeSet<String>) -> BTreeSet<String> {
    let content = content_words(question, speakers);
    strata_text::alnum_words(content.as_deref().unwrap_or(question))
        .map(str::to_lowercase)
        .filter(|w| !is_stopword(w))
        .collect()
}

/// The first word of the `window` words of `spans` that hold the most distinct `words`, then
/// the most of them in all, then the earliest such matches, centred. A span matches a word when their lowercased
/// letters and digits agree on the first five, or one (three at least) begins the other,
/// which is at most three longer: "painted" and "painting" match "paint", "cats" matches
/// "cat", "cathedral" does not; a stemmer's work without a language's rules.
pub(crate) fn best_window(spans: &[&str], words: &BTreeSet<String>, window: usize) -> usize {
    const STEM: usize = 5;
    let form =
        |w: &str| -> Vec<char> { w.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect() };
    let matches = |a: &[char], b: &[char]| {
        let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
        (short.len() >= STEM && short[..STEM] == long[..STEM])
            || (short.len() >= 3 && long.starts_with(short) && long.len() - short.len() <= 3)
    };
    let forms: Vec<Vec<char>> = words.iter().map(|w| form(w)).filter(|f| !f.is_empty()).collect();
    let hit: Vec<Option<usize>> = spans
        .iter()
        .map(|s| {
            let f = form(s);
            if f.is_empty() {
                return None;
            }
            forms.iter().position(|q| matches(q, &f))
        })
        .collect();
    let value = |start: usize| {
        let found: Vec<usize> = hit[start..start + window].iter().flatten().copied().collect();
        (found.iter().collect::<BTreeSet<_>>().len(), found.len())
    };
    let values: Vec<(usize, usize)> = (0..=spans.len() - window).map(value).collect();
    let best = values.iter().copied().max().unwrap_or_default();
    if best.0 == 0 {
        // Nothing matches: the message's opening, which most often says what it is about.
        return 0;
    }
    // The middle of the first run of best windows: the matches with as much around them on
    // each side as the window allows.
    let first = values.iter().position(|&v| v == best).unwrap_or(0);
    let run = values[first..].iter().take_while(|&&v| v == best).count();
    first + (run - 1) / 2
}

/// The stages, in order.
const STAGES: &[&dyn Stage] = &[&StoreFusion, &Surroundings, &Combine, &Rerank];

/// Turn positions for the query, best first: every turn with a positive score.
pub(crate) fn rank(at: &Input<'_>, query: &Query<'_>) -> Result<TurnScores, MemoryError> {
    let mut rankings = Vec::new();
    for stage in STAGES {
        rankings = stage.run(at, query, rankings)?;
    }
    Ok(rankings.pop().map(|(_, r)| r).unwrap_or_default())
}

/// A ranking from the store re-scored by bursts, neighbours and the named speaker.
fn rescore(at: &Input<'_>, named: &BTreeSet<String>, ranked: &TurnScores) -> TurnScores {
    let (turns, grouping, config) = (at.turns, at.grouping, at.config);
    let mut base = vec![0f32; turns.len()];
    for &(i, score) in ranked {
        if let Some(s) = base.get_mut(i) {
            *s = score;
        }
    }
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

/// Lowercased speaker names (of `speakers`) that the question mentions as words.
fn named_speakers(speakers: &BTreeSet<String>, question: &str) -> BTreeSet<String> {
    let words: BTreeSet<String> = strata_text::alnum_words(question).map(str::to_lowercase).collect();
    speakers.iter().filter(|s| s.split_whitespace().any(|part| words.contains(part))).cloned().collect()
}
