//! One conversation's vectors in memory, scored by cosine to a query: int8 copies for exact
//! scores, sign bits for a first pass over long conversations.
//!
//! Why int8: a search reads a quarter of the memory it would in f32 (at 100k turns of about
//! three vectors each, 123 MB instead of 492), and a full scan is bound by memory bandwidth,
//! not arithmetic. Rankings shift only among near-ties (the cosine error is below 0.01).
//!
//! Why sign bits: even in int8 a full scan of 100k turns takes about 11 ms on this machine.
//! Above [`EXACT_UP_TO`] vectors, a first pass ranks turns by the Hamming distance between
//! the signs of the query and of each vector (48 bytes per vector instead of 384; the angle
//! between two vectors is about π × distance / dimensions, Charikar 2002), and only the best
//! [`OVERSAMPLE`] × depth turns are scored exactly. Below it every turn is scored exactly, so
//! conversations of ordinary length rank exactly as before.

use crate::search;

/// Conversations with at most this many vectors (turns and sentences) are scanned exactly.
pub(crate) const EXACT_UP_TO: usize = 20_000;

/// How many candidates per wanted result the sign-bit pass keeps for exact scoring.
pub(crate) const OVERSAMPLE: usize = 10;

#[derive(Debug, Default)]
pub(crate) struct VectorIndex {
    /// Highest `vectors.id` already loaded (kept here for the caller).
    pub(crate) watermark: i64,
    dim: usize,
    rows: Vec<Row>,
    /// The turns (row ids) whose vectors `rows` holds.
    turns: std::collections::HashSet<i64>,
    /// Whole-text vectors, end to end, and their sign bits (`words` u64s each).
    data: Vec<i8>,
    bits: Vec<u64>,
    /// Sentence vectors of all rows, end to end, each row's a contiguous range.
    sentences: Vec<i8>,
    sentence_bits: Vec<u64>,
    sentence_factors: Vec<f32>,
}

#[derive(Debug, Clone, Copy)]
struct Row {
    id: i64,
    time: Option<i64>,
    /// Quantisation step over the vector's norm: cosine = factor × step(query) × Σ q·v / |q|.
    factor: f32,
    first_sentence: u32,
    sentence_count: u32,
}

impl VectorIndex {
    pub(crate) fn dim(&self) -> usize {
        self.dim
    }

    /// Whether the index holds vectors of this turn (by row id).
    pub(crate) fn holds(&self, turn: i64) -> bool {
        self.turns.contains(&turn)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn words(&self) -> usize {
        self.dim.div_ceil(64)
    }

    /// Adds a row: its whole-text vector and its sentences' (possibly none), quantized. The
    /// first row sets the dimensions; a row of other dimensions is refused with a message.
    pub(crate) fn add(
        &mut self,
        id: i64,
        time: Option<i64>,
        whole: &search::Quantized,
        sentences: &[search::Quantized],
    ) -> Result<(), String> {
        if self.rows.is_empty() && self.dim == 0 {
            self.dim = whole.values.len();
        }
        if whole.values.is_empty() || whole.values.len() != self.dim {
            return Err(format!("a vector of {} dimensions, others {}", whole.values.len(), self.dim));
        }
        if let Some(s) = sentences.iter().find(|s| s.values.len() != self.dim) {
            return Err(format!("a sentence vector of {} dimensions, others {}", s.values.len(), self.dim));
        }
        let first_sentence = self.sentence_factors.len() as u32;
        for s in sentences {
            self.sentences.extend_from_slice(&s.values);
            self.sentence_bits.extend(signs(&s.values));
            self.sentence_factors.push(s.factor);
        }
        self.data.extend_from_slice(&whole.values);
        self.bits.extend(signs(&whole.values));
        let factor = whole.factor;
        let sentence_count = self.sentence_factors.len() as u32 - first_sentence;
        self.rows.push(Row { id, time, factor, first_sentence, sentence_count });
        self.turns.insert(id);
        Ok(())
    }

    /// Row `i`'s [`search::dense_score`] from a cosine of its whole-text vector (by row) and
    /// one of a sentence vector (by sentence index): exact or from sign bits.
    fn score_row(&self, i: usize, whole: impl Fn(usize) -> f32, sentence: impl Fn(usize) -> f32) -> f32 {
        let row = &self.rows[i];
        let first = row.first_sentence as usize;
        let best = (first..first + row.sentence_count as usize).map(sentence).reduce(f32::max);
        search::dense_score(whole(i), best)
    }

    /// Up to `depth` row ids by [`search::dense_score`], best first, ties by id; only rows whose
    /// time `keep` accepts. Every row is scored exactly when the index holds at most
    /// `exact_up_to` vectors; otherwise only the sign-bit pass's best candidates are. `q` must
    /// have the index's dimensions.
    pub(crate) fn search(
        &self,
        q: &[f32],
        depth: usize,
        keep: impl Fn(Option<i64>) -> bool,
        exact_up_to: usize,
    ) -> Vec<i64> {
        if self.rows.is_empty() || depth == 0 || q.len() != self.dim {
            return Vec::new();
        }
        let (q8, q_factor) = search::quantize(q);
        let dim = self.dim;
        let exact = |i: usize| {
            self.score_row(
                i,
                |i| search::dot_i8(&q8, &self.data[i * dim..(i + 1) * dim]) as f32 * q_factor * self.rows[i].factor,
                |s| {
                    search::dot_i8(&q8, &self.sentences[s * dim..(s + 1) * dim]) as f32
                        * q_factor
                        * self.sentence_factors[s]
                },
            )
        };
        let candidates: Vec<usize> = if self.rows.len() + self.sentence_factors.len() <= exact_up_to {
            (0..self.rows.len()).filter(|&i| keep(self.rows[i].time)).collect()
        } else {
            let qbits: Vec<u64> = signs(q).collect();
            let words = self.words();
            // The cosine for each possible distance, looked up rather than computed per vector.
            let table: Vec<f32> = (0..=dim).map(|d| (std::f32::consts::PI * d as f32 / dim as f32).cos()).collect();
            let cosine = |bits: &[u64]| {
                let distance: u32 = bits.iter().zip(&qbits).map(|(a, b)| (a ^ b).count_ones()).sum();
                table[distance as usize]
            };
            let mut rough: Vec<(f32, usize)> = (0..self.rows.len())
                .filter(|&i| keep(self.rows[i].time))
                .map(|i| {
                    let score = self.score_row(
                        i,
                        |i| cosine(&self.bits[i * words..(i + 1) * words]),
                        |s| cosine(&self.sentence_bits[s * words..(s + 1) * words]),
                    );
                    (score, i)
                })
                .collect();
            search::top(&mut rough, depth.saturating_mul(OVERSAMPLE), |&(_, i)| self.rows[i].id);
            rough.into_iter().map(|(_, i)| i).collect()
        };
        let mut scored: Vec<(f32, usize)> = candidates.into_iter().map(|i| (exact(i), i)).collect();
        search::top(&mut scored, depth, |&(_, i)| self.rows[i].id);
        scored.into_iter().map(|(_, i)| self.rows[i].id).collect()
    }
}

/// One bit per component, set where it is positive, 64 to a word: of a query's f32s or a
/// stored vector's int8s (where a component that rounds to zero counts as not positive).
fn signs<T: Copy + PartialOrd + Default>(v: &[T]) -> impl Iterator<Item = u64> + '_ {
    v.chunks(64).map(|chunk| chunk.iter().enumerate().fold(0u64, |w, (i, x)| w | (u64::from(*x > T::default()) << i)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(v: &[f32]) -> search::Quantized {
        let (values, factor) = search::quantize(v);
        search::Quantized { values, factor }
    }

    /// Deterministic pseudo-random numbers in [-0.5, 0.5).
    fn noise(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
    }

    #[test]
    fn the_sign_pass_finds_what_the_exact_scan_finds() {
        let mut seed = 7u64;
        let dim = 384;
        let mut index = VectorIndex::default();
        let mut stored = Vec::new();
        for i in 0..3000 {
            let whole: Vec<f32> = (0..dim).map(|_| noise(&mut seed)).collect();
            // Every third row has two sentence vectors.
            let sentences: Vec<f32> =
                if i % 3 == 0 { (0..2 * dim).map(|_| noise(&mut seed)).collect() } else { vec![] };
            let parts: Vec<search::Quantized> = sentences.chunks(dim).map(q).collect();
            index.add(i, Some(i), &q(&whole), &parts).unwrap();
            stored.push((whole, sentences));
        }
        let mut agree = 0;
        for k in 0..40 {
            // A query near a stored whole vector, or near one of its sentences.
            let (whole, sentences) = &stored[k * 71];
            let target: &[f32] = if k % 2 == 0 || sentences.is_empty() { whole } else { &sentences[dim..] };
            let q: Vec<f32> = target.iter().map(|x| x + 0.3 * noise(&mut seed)).collect();
            let exact = index.search(&q, 10, |_| true, usize::MAX);
            let rough = index.search(&q, 10, |_| true, 0);
            assert_eq!(exact[0], (k * 71) as i64);
            assert_eq!(rough[0], exact[0], "query {k}");
            agree += rough.iter().filter(|id| exact.contains(id)).count();
        }
        // Beyond the planted match the scores are near ties among noise, the hardest case for
        // signs; most of the exact top ten are still found.
        assert!(agree >= 40 * 6, "{agree} of 400");
        // Time filters hold on both paths.
        let q = &stored[5].0;
        for limit in [0, usize::MAX] {
            let found = index.search(q, 50, |t| t.is_some_and(|t| t >= 1000), limit);
            assert_eq!(found.len(), 50);
            assert!(found.iter().all(|&id| id >= 1000));
        }
    }

    #[test]
    fn refuses_vectors_of_other_dimensions() {
        let mut index = VectorIndex::default();
        index.add(1, None, &q(&[1.0, 0.0]), &[]).unwrap();
        assert!(index.add(2, None, &q(&[1.0, 0.0, 0.0]), &[]).is_err());
        assert!(index.add(3, None, &q(&[1.0, 0.0]), &[q(&[1.0, 0.0, 1.0])]).is_err());
        assert!(index.search(&[1.0, 0.0, 0.0], 5, |_| true, EXACT_UP_TO).is_empty());
        assert_eq!(index.search(&[1.0, 0.0], 5, |_| true, EXACT_UP_TO), [1]);
    }
}
