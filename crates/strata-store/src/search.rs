//! The pieces of hybrid recall that need no database: indexed and sentence texts, a turn's
//! vectors and their score, the best-k cut, vectors as bytes, and reciprocal-rank fusion.

use std::collections::HashMap;

use strata_core::Turn;

/// A fused search result: where the turn sits and how well it ranked.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// The turn's position in its conversation (0-based).
    pub seq: u64,
    pub turn_id: String,
    /// Reciprocal-rank fusion score: the sum over result lists of 1 / (RRF_K + rank).
    pub score: f32,
}

/// The constant of reciprocal-rank fusion. Cormack et al. (2009) used 60 for web result lists
/// of a thousand; over one conversation's turns the first few ranks carry the signal, and a
/// smaller constant lets them count: on the first five LoCoMo conversations, evidence recall at
/// budget 2000 went 0.824 (60), 0.838 (20), 0.841 (10), 0.843 (5).
pub const RRF_K: f32 = 10.0;

/// What the lexical index holds for a turn: the speaker's name and the date it was said,
/// then its content. Questions name people and times ("what did Melanie do in May 2023?")
/// that the turn's own words rarely repeat; the context still shows the turn as it was said.
pub fn indexed_text(turn: &Turn) -> String {
    let mut text = String::new();
    if let Some(speaker) = &turn.speaker {
        text.push_str(speaker);
        text.push(' ');
    }
    if let Some(ts) = turn.timestamp {
        text.push_str(&civil_date(ts.seconds()));
        text.push(' ');
    }
    text.push_str(&turn.content);
    text
}

/// What is embedded for each sentence of a turn, when it has two or more: the sentence after
/// its speaker's name. A turn of one sentence has only its whole-text vector.
pub fn sentence_texts(turn: &Turn) -> Vec<String> {
    let sentences = strata_text::split_sentences(0, turn);
    if sentences.len() < 2 {
        return Vec::new();
    }
    sentences
        .into_iter()
        .map(|s| match &turn.speaker {
            Some(who) => format!("{who}: {}", s.text),
            None => s.text,
        })
        .collect()
}

/// Everything embedded for a turn, in the order [`TurnVectors`] takes it: the text the
/// lexical index holds ([`indexed_text`]), then its sentences ([`sentence_texts`]).
pub fn embedded_texts(turn: &Turn) -> Vec<String> {
    let mut texts = vec![indexed_text(turn)];
    texts.extend(sentence_texts(turn));
    texts
}

/// "8 May 2023" for a Unix time, in UTC.
pub fn civil_date(seconds: i64) -> String {
    strata_text::Date::of(strata_core::Timestamp(seconds)).to_string()
}

/// What a turn is found by meaning with: the vector of its whole text (speaker and date
/// included, as [`indexed_text`] gives it) and, for a turn of several sentences, one vector per
/// sentence. A sentence's vector is not diluted by the rest of its turn: "Hey! Long time no
/// talk. Look how cute they are! I just had a letdown in a video game tourney" is about the
/// tourney for a question about tournaments only in its last sentence.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TurnVectors<'a> {
    pub whole: &'a [f32],
    pub sentences: &'a [Vec<f32>],
}

impl<'a> TurnVectors<'a> {
    /// Only the whole text's vector.
    pub fn whole(whole: &'a [f32]) -> TurnVectors<'a> {
        TurnVectors { whole, sentences: &[] }
    }

    /// What is wrong with these vectors for storing, if anything: an empty vector, or
    /// sentences of another width than the whole text's.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.whole.is_empty() {
            return Some("an empty vector".to_string());
        }
        self.sentences
            .iter()
            .find(|s| s.len() != self.whole.len())
            .map(|s| format!("a sentence vector has {} dimensions, the turn's {}", s.len(), self.whole.len()))
    }
}

/// A turn's similarity to a query: the cosine of its whole text, averaged with its best
/// sentence's when it has sentence vectors. Measured on LoCoMo at budget 2000 (evidence recall,
/// first / second half of the conversations): whole text alone 0.844 / 0.807; the larger of
/// the two 0.847 / 0.835; this mean 0.850 / 0.836; weights 0.3 and 0.7 on the sentence did no
/// better (the README has the whole table).
pub(crate) fn dense_score(whole: f32, best_sentence: Option<f32>) -> f32 {
    match best_sentence {
        Some(s) => 0.5 * (whole + s),
        None => whole,
    }
}

/// Keeps the best `n` of `scored`, sorted best first, ties by `id`.
pub(crate) fn top<T>(scored: &mut Vec<(f32, T)>, n: usize, id: impl Fn(&(f32, T)) -> i64) {
    let order = |a: &(f32, T), b: &(f32, T)| b.0.total_cmp(&a.0).then(id(a).cmp(&id(b)));
    if n < scored.len() {
        scored.select_nth_unstable_by(n, order);
        scored.truncate(n);
    }
    scored.sort_by(order);
}

/// Reciprocal-rank fusion of ranked lists of row ids: best first, ties by row id.
pub fn fuse(lists: &[&[i64]]) -> Vec<(i64, f32)> {
    let mut scores: HashMap<i64, f32> = HashMap::new();
    for list in lists {
        for (rank, row) in list.iter().enumerate() {
            *scores.entry(*row).or_default() += 1.0 / (RRF_K + rank as f32 + 1.0);
        }
    }
    let mut fused: Vec<(i64, f32)> = scores.into_iter().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused
}

/// A vector as 8-bit integers with one step for all its components, and that step divided by
/// the vector's norm: the product of two such factors and the integer dot product is the
/// cosine.
pub(crate) fn quantize(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if max == 0.0 || norm == 0.0 {
        return (vec![0; v.len()], 0.0);
    }
    let step = max / 127.0;
    (v.iter().map(|x| (x / step).round() as i8).collect(), step / norm)
}

/// Integer dot product.
pub(crate) fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Products of two i8 fit an i16; sixteen independent lanes of that shape let the compiler
    // widen and multiply-add in SIMD registers.
    let mut acc = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = ca.remainder().iter().zip(cb.remainder()).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += i32::from(i16::from(x[i]) * i16::from(y[i]));
        }
    }
    acc.iter().sum::<i32>() + tail
}

/// A vector as the store keeps it: int8 components and the factor that turns their integer
/// dot product with another's into a cosine (see [`quantize`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Quantized {
    pub(crate) values: Vec<i8>,
    pub(crate) factor: f32,
}

impl Quantized {
    /// Back to f32, at unit length: what cosine comparisons of stored vectors see.
    pub(crate) fn unit(&self) -> Vec<f32> {
        self.values.iter().map(|&x| f32::from(x) * self.factor).collect()
    }
}

/// A vector as the store gives it back (int8, at unit length): what a reader of the store
/// sees, so that a memory that keeps vectors in RAM can hold exactly what a reopened one
/// reads, and both decide alike.
pub fn as_stored(v: &[f32]) -> Vec<f32> {
    let (values, factor) = quantize(v);
    Quantized { values, factor }.unit()
}

/// `vectors.encoding` 1, written since schema 6: per vector its factor (a little-endian f32),
/// then its int8 components; several vectors end to end. A search quantizes every vector to
/// int8 anyway, so this loses nothing it uses, at a quarter of the bytes of f32.
pub(crate) const ENCODING_INT8: i64 = 1;

/// `vectors.encoding` 0: little-endian f32s, as rows written before schema 6 hold them.
pub(crate) const ENCODING_F32: i64 = 0;

/// Vectors in [`ENCODING_INT8`], end to end.
pub(crate) fn encode_vectors<'a>(vs: impl IntoIterator<Item = &'a [f32]>) -> Vec<u8> {
    let quantized: Vec<Quantized> = vs
        .into_iter()
        .map(|v| {
            let (values, factor) = quantize(v);
            Quantized { values, factor }
        })
        .collect();
    encode_quantized(&quantized)
}

/// Quantized vectors in [`ENCODING_INT8`], end to end: what [`encode_vectors`] writes for the
/// vectors they were quantized from.
pub(crate) fn encode_quantized(vs: &[Quantized]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in vs {
        out.extend_from_slice(&v.factor.to_le_bytes());
        out.extend(v.values.iter().map(|&x| x as u8));
    }
    out
}

/// Reads stored vectors of either encoding. `dim` is the vectors' length; `None` means the
/// blob holds exactly one vector, whose length it gives.
pub(crate) fn decode_vectors(bytes: &[u8], encoding: i64, dim: Option<usize>) -> Result<Vec<Quantized>, String> {
    let (width, dim) = match (encoding, dim) {
        (ENCODING_INT8, Some(d)) => (d + 4, d),
        (ENCODING_INT8, None) if bytes.len() > 4 => (bytes.len(), bytes.len() - 4),
        (ENCODING_F32, Some(d)) => (4 * d, d),
        (ENCODING_F32, None) if bytes.len().is_multiple_of(4) && !bytes.is_empty() => (bytes.len(), bytes.len() / 4),
        (ENCODING_INT8 | ENCODING_F32, None) => return Err(format!("a vector of {} bytes", bytes.len())),
        (other, _) => return Err(format!("unknown vector encoding {other}")),
    };
    if width == 0 || !bytes.len().is_multiple_of(width) {
        return Err(format!("{} bytes of vectors do not make vectors of {dim} numbers", bytes.len()));
    }
    Ok(bytes
        .chunks_exact(width)
        .map(|c| match encoding {
            ENCODING_INT8 => Quantized {
                factor: f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                values: c[4..].iter().map(|&b| b as i8).collect(),
            },
            _ => {
                let v: Vec<f32> = c.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
                let (values, factor) = quantize(&v);
                Quantized { values, factor }
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantised_cosine_stays_within_a_hundredth() {
        let mut seed = 1u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        for _ in 0..200 {
            let a: Vec<f32> = (0..384).map(|_| next()).collect();
            let b: Vec<f32> = a.iter().map(|x| x + 0.5 * next()).collect();
            let exact = a.iter().zip(&b).map(|(x, y)| x * y).sum::<f32>()
                / (a.iter().map(|x| x * x).sum::<f32>().sqrt() * b.iter().map(|x| x * x).sum::<f32>().sqrt());
            let ((qa, fa), (qb, fb)) = (quantize(&a), quantize(&b));
            let approx = dot_i8(&qa, &qb) as f32 * fa * fb;
            assert!((exact - approx).abs() < 0.01, "{exact} vs {approx}");
        }
        assert_eq!(quantize(&[0.0, 0.0]).1, 0.0);
    }

    /// Both encodings read back to the quantized vectors a search uses; the int8 one in a
    /// quarter of the bytes (plus four per vector); malformed blobs are errors.
    #[test]
    fn stored_vectors_read_back_in_either_encoding() {
        let a: Vec<f32> = (0..384).map(|i| ((i * 37 % 101) as f32 - 50.0) / 200.0).collect();
        let b: Vec<f32> = a.iter().rev().map(|x| x * 0.5).collect();
        let int8 = encode_vectors([a.as_slice(), b.as_slice()]);
        assert_eq!(int8.len(), 2 * (384 + 4));
        let f32s: Vec<u8> = a.iter().chain(&b).flat_map(|x| x.to_le_bytes()).collect();
        let want = vec![
            Quantized { values: quantize(&a).0, factor: quantize(&a).1 },
            Quantized { values: quantize(&b).0, factor: quantize(&b).1 },
        ];
        assert_eq!(decode_vectors(&int8, ENCODING_INT8, Some(384)).unwrap(), want);
        assert_eq!(decode_vectors(&f32s, ENCODING_F32, Some(384)).unwrap(), want);
        assert_eq!(decode_vectors(&int8[..388], ENCODING_INT8, None).unwrap(), want[..1]);
        assert_eq!(decode_vectors(&f32s[..1536], ENCODING_F32, None).unwrap(), want[..1]);
        assert!(decode_vectors(&int8[..390], ENCODING_INT8, Some(384)).is_err());
        assert!(decode_vectors(&f32s[..7], ENCODING_F32, None).is_err());
        assert!(decode_vectors(&int8, 7, Some(384)).is_err());
        assert!(decode_vectors(&[], ENCODING_INT8, None).is_err());
    }
}
