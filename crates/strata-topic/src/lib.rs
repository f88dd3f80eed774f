//! Topic-shift detection over any [`Embedder`]: where a conversation changes subject.
//!
//! Four signals, each reported as the cause of the boundaries it finds:
//! - the seed's fixed rule: cosine similarity below 0.7 between consecutive turns;
//! - depth scores in the manner of TextTiling (Hearst 1997), over embeddings instead of word
//!   counts: at each gap, the similarity of the mean embedding of the turns before it to that
//!   of the turns after it, averaged over windows of 1 to `window` turns a side; a gap is as
//!   deep as the similarity climbs on both sides of it; gaps deeper than `mean + cutoff·std` of
//!   the depths are boundaries, at least `min_segment` turns apart, deepest first;
//! - cue phrases that announce a change ("let's switch to", "new topic", "moving on", ...);
//! - time gaps (30 minutes by default).
//!
//! Every quantity is local, so that a conversation can be followed turn by turn at a cost
//! that does not grow with its length ([`Tracker`]): a gap's similarity reads `window` turns
//! a side, a depth walk climbs at most [`REACH`] gaps a side, and the cutoff's mean and
//! standard deviation are those of the depths within [`STATS_RADIUS`] gaps a side (the whole
//! conversation for any shorter than that). A candidate boundary is final once the
//! conversation has grown `window + REACH + STATS_RADIUS` turns past it.
//!
//! Nothing here reads a file or a clock: turns, their timestamps and the embedder come in,
//! boundaries with their scores and causes go out.

mod stream;

use std::fmt;

use serde::{Deserialize, Serialize};
use strata_core::{EmbedError, Embedder, Turn};

pub use stream::Tracker;

/// How many gaps a depth walk climbs at most on each side. TextTiling walks until the
/// similarity stops rising; a bound keeps a new turn's effect local. Valleys wider than this
/// are rare in chat (a turn-to-turn similarity that rises for 64 turns in a row).
pub const REACH: usize = 64;

/// The cutoff line at a gap is drawn from the depths within this many gaps on each side: the
/// whole conversation for any up to about two thousand turns (every evaluation set), and a
/// local standard for longer ones, whose style may drift.
pub const STATS_RADIUS: usize = 1024;

/// [`REACH`] and [`STATS_RADIUS`], smaller in tests so that short conversations exercise them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) reach: usize,
    pub(crate) radius: usize,
}

pub(crate) const LIMITS: Limits = Limits { reach: REACH, radius: STATS_RADIUS };

/// Why a boundary is there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Cause {
    /// Consecutive turns less similar than the fixed threshold.
    LowSimilarity { similarity: f32 },
    /// A TextTiling-style valley in windowed similarity.
    Depth { depth: f32, cutoff: f32 },
    /// The turn announces a change of subject.
    CuePhrase { phrase: String },
    /// A long pause before the turn.
    TimeGap { seconds: i64 },
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::LowSimilarity { similarity } => write!(f, "similarity {similarity:.3} below the threshold"),
            Cause::Depth { depth, cutoff } => write!(f, "depth {depth:.3} above the cutoff {cutoff:.3}"),
            Cause::CuePhrase { phrase } => write!(f, "cue phrase \"{phrase}\""),
            Cause::TimeGap { seconds } => write!(f, "{} minutes without a turn", seconds / 60),
        }
    }
}

/// A new segment starts at turn `index` (never 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Boundary {
    pub index: usize,
    /// The signal's strength: depth, 1 − similarity, 1 for cue phrases and time gaps.
    pub score: f32,
    pub cause: Cause,
}

/// Which embedding signal to use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Method {
    /// The seed's rule: a boundary wherever consecutive turns are less similar than this.
    Fixed { threshold: f32 },
    /// TextTiling-style depth scores over windowed embedding similarity.
    Depth { window: usize, cutoff: f32 },
    /// No embedding signal: cue phrases and time gaps only.
    None,
}

/// Everything the detector needs; the defaults are the tuned detector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TopicConfig {
    pub method: Method,
    /// Boundaries from any signal are at least this many turns apart (the stronger kept).
    pub min_segment: usize,
    /// Phrases (lowercase) that start a new topic when a turn contains them.
    pub cue_phrases: Vec<String>,
    /// A pause at least this long starts a new topic; `None` turns the signal off.
    pub time_gap_seconds: Option<i64>,
}

/// The cue phrases the seed lists, and a few of their common variants.
pub const CUE_PHRASES: &[&str] = &[
    "let's switch to",
    "let us switch to",
    "switching to",
    "new topic",
    "different topic",
    "change of topic",
    "changing the subject",
    "moving on",
    "back to",
    "different question",
    "unrelated question",
    "on another note",
];

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            // Chosen on TIAGE's dev split (see the README's segmentation table).
            method: Method::Depth { window: 4, cutoff: 0.75 },
            min_segment: 2,
            cue_phrases: CUE_PHRASES.iter().map(|s| s.to_string()).collect(),
            time_gap_seconds: Some(30 * 60),
        }
    }
}

impl TopicConfig {
    /// The seed's baseline: cosine below 0.7 between consecutive turns, nothing else.
    pub fn seed_fixed() -> TopicConfig {
        TopicConfig {
            method: Method::Fixed { threshold: 0.7 },
            min_segment: 1,
            cue_phrases: Vec::new(),
            time_gap_seconds: None,
        }
    }

    /// Depth scores alone, without cue phrases or time gaps.
    pub fn depth_only() -> TopicConfig {
        TopicConfig { cue_phrases: Vec::new(), time_gap_seconds: None, ..TopicConfig::default() }
    }

    /// The detector a name selects, if it is one: `fixed` (the seed's 0.7 rule) or `fixed-T`,
    /// `depth` or `depth-W-C` (window W, cutoff C), `combined` (the default detector: depth,
    /// cue phrases and time gaps).
    pub fn from_name(name: &str) -> Option<TopicConfig> {
        let parts: Vec<&str> = name.split('-').collect();
        match parts.as_slice() {
            ["fixed"] => Some(TopicConfig::seed_fixed()),
            ["fixed", t] => {
                Some(TopicConfig { method: Method::Fixed { threshold: t.parse().ok()? }, ..TopicConfig::seed_fixed() })
            }
            ["depth"] => Some(TopicConfig::depth_only()),
            ["depth", w, c] => Some(TopicConfig {
                method: Method::Depth { window: w.parse().ok()?, cutoff: c.parse().ok()? },
                ..TopicConfig::depth_only()
            }),
            ["combined"] => Some(TopicConfig::default()),
            _ => None,
        }
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let d = dot(a, b);
    let n = (dot(a, a) * dot(b, b)).sqrt();
    if n == 0.0 {
        0.0
    } else {
        d / n
    }
}

/// The mean of `vectors[range]`.
fn mean(vectors: &[Vec<f32>], range: std::ops::Range<usize>) -> Vec<f32> {
    let dim = vectors.first().map_or(0, Vec::len);
    let mut m = vec![0f32; dim];
    for v in &vectors[range] {
        m.iter_mut().zip(v).for_each(|(a, b)| *a += b);
    }
    m
}

/// Similarity across each gap `g` (between turns g−1 and g), for g in 1..n: the mean of the
/// `w` turns before against the mean of the `w` turns after, averaged over `w` in 1..=window.
/// One wide window blurs a short topic into its neighbours and one narrow window is thrown by
/// a single off-topic reply; the average keeps both views (on TIAGE's dev split Pk 0.421 with
/// window 3 alone, 0.404 averaged over 1 to 3).
pub fn gap_similarities(vectors: &[Vec<f32>], window: usize) -> Vec<f32> {
    (1..vectors.len()).map(|g| gap_similarity(vectors, g, window)).collect()
}

/// The similarity across gap `g` of `vectors` (see [`gap_similarities`]). It reads the
/// `window` vectors on each side only, so a caller may pass just those.
pub(crate) fn gap_similarity(vectors: &[Vec<f32>], g: usize, window: usize) -> f32 {
    let n = vectors.len();
    let window = window.max(1);
    let total: f32 = (1..=window)
        .map(|w| {
            let before = mean(vectors, g.saturating_sub(w)..g);
            let after = mean(vectors, g..(g + w).min(n));
            cosine(&before, &after)
        })
        .sum();
    total / window as f32
}

/// TextTiling's depth: how far similarity climbs from gap `i` to the highest point reached by
/// walking uphill to the left, plus the same to the right, each walk at most [`REACH`] gaps.
pub fn depth_scores(similarities: &[f32]) -> Vec<f32> {
    (0..similarities.len()).map(|i| depth_at(similarities, i, REACH)).collect()
}

pub(crate) fn depth_at(similarities: &[f32], i: usize, reach: usize) -> f32 {
    let s = similarities[i];
    let mut left = s;
    for j in (i.saturating_sub(reach)..i).rev() {
        if similarities[j] < left {
            break;
        }
        left = similarities[j];
    }
    let mut right = s;
    for &v in &similarities[i + 1..similarities.len().min(i + 1 + reach)] {
        if v < right {
            break;
        }
        right = v;
    }
    (left - s) + (right - s)
}

/// Running sums of the depths and their squares (in f64, in order, so that the same depths
/// always give the same sums), for the cutoff line of any stretch in constant time.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sums {
    /// `linear[i]` is the sum of the first `i` depths; `squares[i]` of their squares.
    linear: Vec<f64>,
    squares: Vec<f64>,
}

impl Sums {
    pub(crate) fn of(depths: &[f32]) -> Sums {
        let mut s = Sums::default();
        s.recompute_from(depths, 0);
        s
    }

    /// Recomputes the sums after the depths from `from` on changed (or were appended).
    pub(crate) fn recompute_from(&mut self, depths: &[f32], from: usize) {
        let from = from.min(self.linear.len().saturating_sub(1));
        self.linear.truncate(from + 1);
        self.squares.truncate(from + 1);
        if self.linear.is_empty() {
            self.linear.push(0.0);
            self.squares.push(0.0);
        }
        for &d in &depths[from..] {
            let d = f64::from(d);
            self.linear.push(self.linear[self.linear.len() - 1] + d);
            self.squares.push(self.squares[self.squares.len() - 1] + d * d);
        }
    }

    /// `mean + cutoff·sd` of the depths within `radius` of gap `i`.
    fn line(&self, i: usize, cutoff: f32, radius: usize) -> f64 {
        let n = self.linear.len() - 1;
        let (lo, hi) = (i.saturating_sub(radius), (i + radius + 1).min(n));
        let count = (hi - lo) as f64;
        let m = (self.linear[hi] - self.linear[lo]) / count;
        let var = ((self.squares[hi] - self.squares[lo]) / count - m * m).max(0.0);
        m + f64::from(cutoff) * var.sqrt()
    }
}

/// The boundary a depth valley at gap `i` makes, if any: a valley bottom (deeper than both
/// neighbours) below its stretch's cutoff line.
pub(crate) fn depth_boundary(depths: &[f32], sums: &Sums, i: usize, cutoff: f32, radius: usize) -> Option<Boundary> {
    let depth = depths[i];
    let local_max = (i == 0 || depth >= depths[i - 1]) && (i + 1 == depths.len() || depth >= depths[i + 1]);
    if !local_max || depth <= 0.0 {
        return None;
    }
    let line = sums.line(i, cutoff, radius);
    (f64::from(depth) > line).then(|| Boundary {
        index: i + 1,
        score: depth,
        cause: Cause::Depth { depth, cutoff: line as f32 },
    })
}

/// The boundaries turn `i` (never the first) carries whatever the embeddings say: a cue
/// phrase, a pause after `previous`.
pub(crate) fn text_boundaries(
    i: usize,
    turn: &Turn,
    previous: Option<strata_core::Timestamp>,
    config: &TopicConfig,
) -> Vec<Boundary> {
    let mut out = Vec::new();
    let lower = turn.content.to_lowercase();
    if let Some(p) = config.cue_phrases.iter().find(|p| lower.contains(p.as_str())) {
        out.push(Boundary { index: i, score: 1.0, cause: Cause::CuePhrase { phrase: p.clone() } });
    }
    if let (Some(gap), Some(a), Some(b)) = (config.time_gap_seconds, previous, turn.timestamp) {
        let seconds = b.seconds() - a.seconds();
        if seconds >= gap {
            // A pause is the surest sign of all: it outranks any similarity score.
            out.push(Boundary { index: i, score: 2.0, cause: Cause::TimeGap { seconds } });
        }
    }
    out
}

/// The boundary the seed's fixed rule puts at gap `g`, if any.
pub(crate) fn fixed_boundary(a: &[f32], b: &[f32], g: usize, threshold: f32) -> Option<Boundary> {
    let similarity = cosine(a, b);
    (similarity < threshold).then_some(Boundary {
        index: g,
        score: 1.0 - similarity,
        cause: Cause::LowSimilarity { similarity },
    })
}

/// Finds where the topic changes in `turns`.
pub fn detect(turns: &[Turn], embedder: &dyn Embedder, config: &TopicConfig) -> Result<Vec<Boundary>, EmbedError> {
    if turns.len() < 2 || config.method == Method::None {
        return Ok(detect_with(turns, None, config));
    }
    let vectors = embedder.embed_clustering(&turns.iter().map(|t| t.content.as_str()).collect::<Vec<_>>())?;
    Ok(detect_with(turns, Some(&vectors), config))
}

/// [`detect`] over vectors already computed (one per turn, in order), for callers that keep
/// them, such as a memory that embedded each turn when it was pushed. Without vectors only cue
/// phrases and time gaps count.
pub fn detect_with(turns: &[Turn], vectors: Option<&[Vec<f32>]>, config: &TopicConfig) -> Vec<Boundary> {
    detect_limited(turns, vectors, config, LIMITS)
}

pub(crate) fn detect_limited(
    turns: &[Turn],
    vectors: Option<&[Vec<f32>]>,
    config: &TopicConfig,
    limits: Limits,
) -> Vec<Boundary> {
    let mut candidates: Vec<Boundary> = Vec::new();
    let n = turns.len();
    if n < 2 {
        return Vec::new();
    }
    let vectors = vectors.filter(|v| v.len() == n);
    match (config.method, vectors) {
        (Method::None, _) | (_, None) => {}
        (Method::Fixed { threshold }, Some(vectors)) => {
            candidates.extend((1..n).filter_map(|g| fixed_boundary(&vectors[g - 1], &vectors[g], g, threshold)));
        }
        (Method::Depth { window, cutoff }, Some(vectors)) => {
            let similarities = gap_similarities(vectors, window.max(1));
            let depths: Vec<f32> = (0..similarities.len()).map(|i| depth_at(&similarities, i, limits.reach)).collect();
            let sums = Sums::of(&depths);
            candidates
                .extend((0..depths.len()).filter_map(|i| depth_boundary(&depths, &sums, i, cutoff, limits.radius)));
        }
    }
    for (i, turn) in turns.iter().enumerate().skip(1) {
        candidates.extend(text_boundaries(i, turn, turns[i - 1].timestamp, config));
    }
    spaced(candidates, config.min_segment.max(1))
}

/// Keeps the strongest candidates that are at least `min_segment` turns from each other and
/// from the start, in order of position. Ties go to the earlier turn.
pub(crate) fn spaced(mut candidates: Vec<Boundary>, min_segment: usize) -> Vec<Boundary> {
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
    let mut kept: Vec<Boundary> = Vec::new();
    for c in candidates {
        if c.index < min_segment {
            continue;
        }
        if kept.iter().all(|k| k.index.abs_diff(c.index) >= min_segment) {
            kept.push(c);
        }
    }
    kept.sort_by_key(|b| b.index);
    kept
}

#[cfg(test)]
mod tests;
