//! Topic detection turn by turn: after every turn, [`Tracker`] holds exactly the boundaries
//! [`detect_with`](crate::detect_with) finds in the conversation so far, at a cost per turn
//! that does not grow with the conversation.
//!
//! A new turn changes the similarity of the last `window` gaps only; their depths change
//! those within [`REACH`](crate::REACH) of them; those change the cutoff line of the gaps
//! within [`STATS_RADIUS`](crate::STATS_RADIUS) of them. Everything before stays. Keeping the candidates far enough apart
//! is a greedy choice (strongest first) whose choices interact only between candidates less
//! than `min_segment` apart, so it is redone from the last place where the candidates leave
//! such a gap before the first one that changed.

use std::collections::VecDeque;

use strata_core::{Timestamp, Turn};

use crate::{
    depth_at, depth_boundary, fixed_boundary, gap_similarity, spaced, text_boundaries, Boundary, Limits, Method, Sums,
    TopicConfig, LIMITS,
};

/// Follows a conversation turn by turn. See the module documentation.
#[derive(Debug, Clone)]
pub struct Tracker {
    config: TopicConfig,
    limits: Limits,
    /// Turns seen.
    turns: usize,
    /// The newest turn's timestamp (a pause is measured from it).
    last_timestamp: Option<Timestamp>,
    /// Whether every turn so far came with a vector: one without turns the embedding signal
    /// off for the whole conversation, as [`detect_with`](crate::detect_with) does.
    embedded: bool,
    /// The newest vectors, as many as a gap's similarity reads (`2 × window`).
    tail: VecDeque<Vec<f32>>,
    /// Gap similarities (`similarities[k]` is the gap before turn `k + 1`) and their depths.
    similarities: Vec<f32>,
    depths: Vec<f32>,
    sums: Sums,
    /// Candidates from the embeddings (depth valleys or the fixed rule), by position.
    from_vectors: Vec<Boundary>,
    /// Candidates from the words and timestamps (cue phrases, pauses), by position.
    from_text: Vec<Boundary>,
    kept: Vec<Boundary>,
    /// The first position where the last push added or removed a boundary.
    moved: Option<usize>,
}

impl Tracker {
    pub fn new(config: TopicConfig) -> Tracker {
        Tracker::with_limits(config, LIMITS)
    }

    pub(crate) fn with_limits(config: TopicConfig, limits: Limits) -> Tracker {
        Tracker {
            config,
            limits,
            turns: 0,
            last_timestamp: None,
            embedded: true,
            tail: VecDeque::new(),
            similarities: Vec::new(),
            depths: Vec::new(),
            sums: Sums::default(),
            from_vectors: Vec::new(),
            from_text: Vec::new(),
            kept: Vec::new(),
            moved: None,
        }
    }

    /// The boundaries of the conversation so far, in order.
    pub fn boundaries(&self) -> &[Boundary] {
        &self.kept
    }

    /// Where topics start: the boundaries' positions.
    pub fn starts(&self) -> impl Iterator<Item = usize> + '_ {
        self.kept.iter().map(|b| b.index)
    }

    /// The first position where the last [`push`](Tracker::push) added or removed a
    /// boundary (one only rescored does not count); `None` when the starts stayed as they were.
    pub fn moved_from(&self) -> Option<usize> {
        self.moved
    }

    pub fn len(&self) -> usize {
        self.turns
    }

    pub fn is_empty(&self) -> bool {
        self.turns == 0
    }

    /// Follows the next turn, with its vector when it has one (an empty vector counts as none).
    pub fn push(&mut self, turn: &Turn, vector: Option<&[f32]>) {
        let i = self.turns;
        self.turns += 1;
        // The first position whose candidates may differ from before this turn.
        let mut from = i;
        // The first candidate at or after `from` before this turn (for where to redo the
        // spacing: a candidate that went away may have held a neighbour off).
        let mut old_first: Option<usize> = None;
        if i > 0 {
            self.from_text.extend(text_boundaries(i, turn, self.last_timestamp, &self.config));
        }
        self.last_timestamp = turn.timestamp;
        let vector = vector.filter(|v| !v.is_empty());
        match (self.config.method, vector) {
            (Method::None, _) => {}
            (_, _) if !self.embedded => {}
            (_, None) => {
                // No vector: the embedding signal is off from now on, as in the batch.
                self.embedded = false;
                old_first = self.from_vectors.first().map(|b| b.index);
                from = from.min(old_first.unwrap_or(i));
                self.from_vectors.clear();
                self.tail.clear();
                self.similarities.clear();
                self.depths.clear();
                self.sums = Sums::default();
            }
            (Method::Fixed { threshold }, Some(v)) => {
                self.tail.push_back(v.to_vec());
                if self.tail.len() > 2 {
                    self.tail.pop_front();
                }
                if i > 0 {
                    self.from_vectors.extend(fixed_boundary(&self.tail[0], &self.tail[1], i, threshold));
                }
            }
            (Method::Depth { window, cutoff }, Some(v)) => {
                let window = window.max(1);
                self.tail.push_back(v.to_vec());
                if self.tail.len() > 2 * window {
                    self.tail.pop_front();
                }
                if i > 0 {
                    let changed = self.update_depths(i, window);
                    // A decision reads the depths within the radius (and its neighbours).
                    let decide_from = changed.saturating_sub(self.limits.radius);
                    from = decide_from + 1;
                    let keep = self.from_vectors.partition_point(|b| b.index < from);
                    old_first = self.from_vectors.get(keep).map(|b| b.index);
                    self.from_vectors.truncate(keep);
                    for k in decide_from..self.depths.len() {
                        self.from_vectors.extend(depth_boundary(
                            &self.depths,
                            &self.sums,
                            k,
                            cutoff,
                            self.limits.radius,
                        ));
                    }
                }
            }
        }
        self.respace(from, old_first);
    }

    /// Recomputes the similarities of the gaps turn `i` changed (the last `window`, and its
    /// own), the depths they change, and the sums; returns the first depth that changed.
    fn update_depths(&mut self, i: usize, window: usize) -> usize {
        let first_gap = (i + 1).saturating_sub(window).max(1);
        let tail = self.tail.make_contiguous();
        // `tail` holds positions base..=i.
        let base = i + 1 - tail.len();
        self.similarities.truncate(first_gap - 1);
        for g in first_gap..=i {
            self.similarities.push(gap_similarity(tail, g - base, window));
        }
        let changed = (first_gap - 1).saturating_sub(self.limits.reach);
        self.depths.truncate(changed);
        for k in changed..self.similarities.len() {
            self.depths.push(depth_at(&self.similarities, k, self.limits.reach));
        }
        self.sums.recompute_from(&self.depths, changed);
        changed
    }

    /// Redoes the spacing of the candidates from the last clear gap before `from`.
    fn respace(&mut self, from: usize, old_first: Option<usize>) {
        let m = self.config.min_segment.max(1);
        let first_new = |c: usize| -> Option<usize> {
            let a = self.from_vectors.get(self.from_vectors.partition_point(|b| b.index < c)).map(|b| b.index);
            let t = self.from_text.get(self.from_text.partition_point(|b| b.index < c)).map(|b| b.index);
            a.into_iter().chain(t).min()
        };
        let last_before = |c: usize| -> Option<usize> {
            let a =
                self.from_vectors.partition_point(|b| b.index < c).checked_sub(1).map(|k| self.from_vectors[k].index);
            let t = self.from_text.partition_point(|b| b.index < c).checked_sub(1).map(|k| self.from_text[k].index);
            a.into_iter().chain(t).max()
        };
        let mut cut = from;
        while let Some(prev) = last_before(cut) {
            let first = first_new(cut).into_iter().chain(old_first).min();
            if first.is_none_or(|f| f - prev >= m) {
                break;
            }
            cut = prev;
        }
        // In the batch's order: the embeddings' candidates, then the text's.
        let vectors = &self.from_vectors[self.from_vectors.partition_point(|b| b.index < cut)..];
        let text = &self.from_text[self.from_text.partition_point(|b| b.index < cut)..];
        let candidates: Vec<Boundary> = vectors.iter().chain(text).cloned().collect();
        let old = self.kept.split_off(self.kept.partition_point(|b| b.index < cut));
        let new = spaced(candidates, m);
        let (mut a, mut b) = (old.iter().map(|b| b.index), new.iter().map(|b| b.index));
        self.moved = loop {
            match (a.next(), b.next()) {
                (None, None) => break None,
                (Some(x), Some(y)) if x == y => {}
                (x, y) => break x.into_iter().chain(y).min(),
            }
        };
        self.kept.extend(new);
    }
}
