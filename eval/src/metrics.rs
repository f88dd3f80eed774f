//! The metrics, each defined here once: answer normalisation and recall (SQuAD style), a
//! reader's answer against the gold one (LoCoMo's token F1, BLEU-1), segmentation (Pk,
//! WindowDiff, boundary F1) and ROUGE-1/2/L.

use std::collections::{HashMap, HashSet};

/// SQuAD's answer normalisation: lowercase, ASCII punctuation removed, the articles "a", "an"
/// and "the" removed, whitespace folded to single spaces.
pub fn normalize(text: &str) -> String {
    let lower = text.to_lowercase();
    let no_punct: String = lower.chars().filter(|c| !c.is_ascii_punctuation()).collect();
    no_punct.split_whitespace().filter(|w| !matches!(*w, "a" | "an" | "the")).collect::<Vec<_>>().join(" ")
}

/// Words that carry no content: left out of answer-token recall unless the answer has nothing
/// else. Kept apart from `strata_text`'s list on purpose: the metric must not change when the
/// system's notion of a content word does.
const STOPWORDS: &[&str] = &[
    "and", "or", "of", "to", "in", "on", "at", "for", "with", "by", "from", "is", "are", "was", "were", "be", "been",
    "it", "its", "that", "this", "as", "but", "not", "no", "he", "she", "they", "his", "her", "their", "them", "i",
    "you", "we", "my", "your", "our", "do", "did", "has", "have", "had", "so", "if", "about", "into", "than", "then",
    "there", "which", "who", "what", "when", "where", "how", "also", "just", "very", "s",
];

/// A context prepared once for scoring many answers against it.
#[derive(Debug)]
pub struct ScoredText {
    /// The normalised text with a space at each end, so containment is on word boundaries.
    padded: String,
    words: HashSet<String>,
}

impl ScoredText {
    pub fn new(text: &str) -> ScoredText {
        let normalized = normalize(text);
        let words = normalized.split(' ').filter(|w| !w.is_empty()).map(str::to_string).collect();
        ScoredText { padded: format!(" {normalized} "), words }
    }

    /// Whether the normalised answer occurs in the normalised text as whole words.
    pub fn contains_answer(&self, answer: &str) -> bool {
        let a = normalize(answer);
        !a.is_empty() && self.padded.contains(&format!(" {a} "))
    }

    /// The share of the answer's content words (normalised, stopwords left out) present.
    pub fn answer_token_recall(&self, answer: &str) -> f64 {
        let a = normalize(answer);
        let all: Vec<&str> = a.split(' ').filter(|w| !w.is_empty()).collect();
        let content: Vec<&str> = all.iter().copied().filter(|w| !STOPWORDS.contains(w)).collect();
        let words = if content.is_empty() { all } else { content };
        if words.is_empty() {
            return 0.0;
        }
        let present = words.iter().filter(|w| self.words.contains(**w)).count();
        present as f64 / words.len() as f64
    }
}

/// LoCoMo's answer normalisation (`normalize_answer` in its `task_eval/evaluation.py`): commas
/// removed, lowercase, ASCII punctuation removed, the words "a", "an", "the" and "and" removed,
/// whitespace folded.
pub fn locomo_normalize(text: &str) -> String {
    let lower = text.replace(',', "").to_lowercase();
    let no_punct: String = lower.chars().filter(|c| !c.is_ascii_punctuation()).collect();
    no_punct.split_whitespace().filter(|w| !matches!(*w, "a" | "an" | "the" | "and")).collect::<Vec<_>>().join(" ")
}

/// LoCoMo's token F1 of a predicted answer against one gold answer: both normalised, every word
/// Porter-stemmed (NLTK's stemmer), overlap counted with multiplicity.
pub fn token_f1(prediction: &str, gold: &str) -> f64 {
    let stems = |t: &str| -> Vec<String> {
        locomo_normalize(t).split(' ').filter(|w| !w.is_empty()).map(crate::porter::stem).collect()
    };
    let (p, g) = (stems(prediction), stems(gold));
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for w in &g {
        *counts.entry(w.as_str()).or_default() += 1;
    }
    let mut same = 0usize;
    for w in &p {
        if let Some(c) = counts.get_mut(w.as_str()).filter(|c| **c > 0) {
            *c -= 1;
            same += 1;
        }
    }
    if same == 0 {
        return 0.0;
    }
    let (precision, recall) = (same as f64 / p.len() as f64, same as f64 / g.len() as f64);
    2.0 * precision * recall / (precision + recall)
}

/// LoCoMo's F1 for a question of `category`, as its evaluation scores each: a multi-hop answer
/// is a comma-separated list (each gold part scored by its best predicted part, then averaged);
/// an open-domain gold answer counts up to its first `;`; the others are one answer.
pub fn answer_f1(prediction: &str, gold: &str, category: &str) -> f64 {
    match category {
        "multi-hop" => {
            let predicted: Vec<&str> = prediction.split(',').map(str::trim).collect();
            let golds: Vec<&str> = gold.split(',').map(str::trim).collect();
            let best = |g: &str| predicted.iter().map(|p| token_f1(p, g)).fold(0.0, f64::max);
            golds.iter().map(|g| best(g)).sum::<f64>() / golds.len() as f64
        }
        "open-domain" => token_f1(prediction, gold.split(';').next().unwrap_or("").trim()),
        _ => token_f1(prediction, gold),
    }
}

/// Words and punctuation marks, lowercased: close to NLTK's `word_tokenize`, which the Mem0
/// evaluation's BLEU-1 reads (it also splits contractions, which this does not).
pub fn bleu_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.to_lowercase().chars() {
        if c.is_alphanumeric() {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Sentence BLEU-1 of a prediction against one reference, as NLTK's `sentence_bleu` with
/// weights (1, 0, 0, 0) gives it: clipped unigram precision times the brevity penalty; 0 when
/// no word matches.
pub fn bleu1(prediction: &str, reference: &str) -> f64 {
    let (p, r) = (bleu_tokens(prediction), bleu_tokens(reference));
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for w in &r {
        *counts.entry(w.as_str()).or_default() += 1;
    }
    let mut clipped = 0usize;
    for w in &p {
        if let Some(c) = counts.get_mut(w.as_str()).filter(|c| **c > 0) {
            *c -= 1;
            clipped += 1;
        }
    }
    if clipped == 0 {
        return 0.0;
    }
    let (c, rl) = (p.len() as f64, r.len() as f64);
    let brevity = if c > rl { 1.0 } else { (1.0 - rl / c).exp() };
    brevity * clipped as f64 / c
}

/// Segment boundaries as a bit per gap: `bits[i]` says a new segment starts at unit `i + 1`.
/// `starts` are the indices of units that start a segment; 0 and out-of-range starts are
/// ignored.
pub fn boundary_bits(n: usize, starts: &[usize]) -> Vec<bool> {
    let mut bits = vec![false; n.saturating_sub(1)];
    for &s in starts {
        if s > 0 && s < n {
            bits[s - 1] = true;
        }
    }
    bits
}

/// Python's `round` (half to even), as segeval rounds the window size.
fn round_half_even(x: f64) -> usize {
    let r = x.round();
    let r = if (x - x.trunc()).abs() == 0.5 && (r as i64) % 2 != 0 { r - x.signum() } else { r };
    r.max(0.0) as usize
}

/// The window Pk and WindowDiff use: half the mean reference segment length, rounded half to
/// even, and at least 2 (segeval's `compute_window_size`).
pub fn window_size(n: usize, reference: &[bool]) -> usize {
    let segments = reference.iter().filter(|&&b| b).count() + 1;
    let k = round_half_even(n as f64 / segments as f64 / 2.0);
    if k > 1 {
        k
    } else {
        2
    }
}

/// Pk (Beeferman et al. 1999): the share of unit pairs `k` apart on whose being in the same
/// segment the hypothesis and the reference disagree. 0 is perfect.
pub fn pk(reference: &[bool], hypothesis: &[bool], k: usize) -> f64 {
    assert_eq!(reference.len(), hypothesis.len(), "segmentations of different lengths");
    let n = reference.len() + 1;
    if n <= k {
        return 0.0;
    }
    let mut errors = 0usize;
    for i in 0..n - k {
        let same_ref = !reference[i..i + k].iter().any(|&b| b);
        let same_hyp = !hypothesis[i..i + k].iter().any(|&b| b);
        errors += usize::from(same_ref != same_hyp);
    }
    errors as f64 / (n - k) as f64
}

/// WindowDiff (Pevzner and Hearst 2002): the share of windows of `k` gaps in which the
/// hypothesis and the reference count different numbers of boundaries. 0 is perfect.
pub fn window_diff(reference: &[bool], hypothesis: &[bool], k: usize) -> f64 {
    assert_eq!(reference.len(), hypothesis.len(), "segmentations of different lengths");
    let n = reference.len() + 1;
    if n <= k {
        return 0.0;
    }
    let count = |bits: &[bool]| bits.iter().filter(|&&b| b).count();
    let mut errors = 0usize;
    for i in 0..n - k {
        errors += usize::from(count(&reference[i..i + k]) != count(&hypothesis[i..i + k]));
    }
    errors as f64 / (n - k) as f64
}

/// Boundary precision, recall and F1 where a hypothesised boundary within `tolerance` units of
/// a reference boundary counts as found; each reference boundary is matched at most once.
/// Two empty segmentations agree perfectly.
pub fn boundary_f1(reference: &[bool], hypothesis: &[bool], tolerance: usize) -> (f64, f64, f64) {
    let refs: Vec<usize> = reference.iter().enumerate().filter(|(_, &b)| b).map(|(i, _)| i).collect();
    let hyps: Vec<usize> = hypothesis.iter().enumerate().filter(|(_, &b)| b).map(|(i, _)| i).collect();
    if refs.is_empty() && hyps.is_empty() {
        return (1.0, 1.0, 1.0);
    }
    let mut used = vec![false; refs.len()];
    let mut matched = 0usize;
    for &h in &hyps {
        // The nearest unused reference boundary within tolerance, the earlier on a tie.
        let best = refs
            .iter()
            .enumerate()
            .filter(|(j, &r)| !used[*j] && r.abs_diff(h) <= tolerance)
            .min_by_key(|(_, &r)| (r.abs_diff(h), r));
        if let Some((j, _)) = best {
            used[j] = true;
            matched += 1;
        }
    }
    let p = if hyps.is_empty() { 0.0 } else { matched as f64 / hyps.len() as f64 };
    let r = if refs.is_empty() { 0.0 } else { matched as f64 / refs.len() as f64 };
    let f = if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) };
    (p, r, f)
}

/// Precision, recall and F1.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Prf {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

impl Prf {
    fn from_counts(overlap: usize, hyp: usize, reference: usize) -> Prf {
        let precision = if hyp == 0 { 0.0 } else { overlap as f64 / hyp as f64 };
        let recall = if reference == 0 { 0.0 } else { overlap as f64 / reference as f64 };
        let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
        Prf { precision, recall, f1 }
    }
}

/// ROUGE-1, ROUGE-2 and ROUGE-L of one hypothesis against one reference.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Rouge {
    pub rouge1: Prf,
    pub rouge2: Prf,
    pub rouge_l: Prf,
}

/// rouge-score's tokenizer without stemming: lowercase, every run of characters other than
/// ASCII letters and digits is a separator.
pub fn rouge_tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

fn ngram_overlap(hyp: &[String], reference: &[String], n: usize) -> (usize, usize, usize) {
    fn grams(t: &[String], n: usize) -> HashMap<&[String], usize> {
        let mut m: HashMap<&[String], usize> = HashMap::new();
        if t.len() >= n {
            for w in t.windows(n) {
                *m.entry(w).or_default() += 1;
            }
        }
        m
    }
    let (h, r) = (grams(hyp, n), grams(reference, n));
    let overlap = h.iter().map(|(g, c)| (*c).min(r.get(g).copied().unwrap_or(0))).sum();
    (overlap, hyp.len().saturating_sub(n - 1), reference.len().saturating_sub(n - 1))
}

fn lcs(a: &[String], b: &[String]) -> usize {
    let mut prev = vec![0usize; b.len() + 1];
    let mut cur = vec![0usize; b.len() + 1];
    for x in a {
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = if x == y { prev[j] + 1 } else { cur[j].max(prev[j + 1]) };
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

pub fn rouge(hypothesis: &str, reference: &str) -> Rouge {
    let (h, r) = (rouge_tokens(hypothesis), rouge_tokens(reference));
    let (o1, h1, r1) = ngram_overlap(&h, &r, 1);
    let (o2, h2, r2) = ngram_overlap(&h, &r, 2);
    Rouge {
        rouge1: Prf::from_counts(o1, h1, r1),
        rouge2: Prf::from_counts(o2, h2, r2),
        rouge_l: Prf::from_counts(lcs(&h, &r), h.len(), r.len()),
    }
}

/// The best score over several references, metric by metric (by F1), as rouge-score's
/// `score_multi` does.
pub fn rouge_multi(hypothesis: &str, references: &[String]) -> Rouge {
    let mut best = Rouge::default();
    for r in references {
        let s = rouge(hypothesis, r);
        if s.rouge1.f1 > best.rouge1.f1 {
            best.rouge1 = s.rouge1;
        }
        if s.rouge2.f1 > best.rouge2.f1 {
            best.rouge2 = s.rouge2;
        }
        if s.rouge_l.f1 > best.rouge_l.f1 {
            best.rouge_l = s.rouge_l;
        }
    }
    best
}

/// The value at quantile `q` (0..=1) of `values`, by linear interpolation between order
/// statistics (numpy's default). `values` need not be sorted.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}
