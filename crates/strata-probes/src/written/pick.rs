//! Which turns a conversation's probes are asked about: turns that say something specific,
//! spread over the part of the conversation a compacting memory would no longer hold whole,
//! more of them from its older part, each with the kind of question it will be asked and,
//! for the kinds that need two turns, its partner.

use std::collections::{BTreeMap, BTreeSet};

use strata_core::{Conversation, Role, TokenCounter};
use strata_text::{is_stopword, words, Date, Specificity};

use crate::SplitMix64;

/// The kinds of probe, asked in turn (`KINDS[i % 4]` for the i-th pick in conversation order,
/// so that every part of the conversation gets every kind).
pub(super) const KINDS: [Kind; 4] = [Kind::Fact, Kind::Date, Kind::Update, Kind::MultiDay];

/// What a probe asks for. Its name is the probe's `category`, so scores come per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A fact stated once.
    Fact,
    /// When something happened: the answer is the turn's own date, or the date a relative
    /// expression in it ("last week") meant, worked out by Strata, not by the generator.
    Date,
    /// A fact that a later turn changed: the answer is the newest value.
    Update,
    /// A question whose answer needs two turns said on different days.
    MultiDay,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Fact => "fact",
            Kind::Date => "date",
            Kind::Update => "update",
            Kind::MultiDay => "multi-day",
        }
    }
}

/// One probe to ask for: its kind and the turns it is about (indices into the conversation's
/// turns; one, or for `Update` and `MultiDay` the older turn then the other).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pick {
    pub(super) kind: Kind,
    pub(super) turns: Vec<usize>,
}

/// The content words of a text as the checks compare them: lowercase, no stopwords, a plural
/// `s` dropped, and cut to their first five characters, a crude stem that does not know the
/// language's endings ("educational" matches "education", "painting" "painted").
pub(super) fn content_words(text: &str) -> BTreeSet<String> {
    words(text)
        .filter(|w| !is_stopword(w))
        .map(|w| {
            let w = match w.strip_suffix('s') {
                Some(stem) if stem.chars().count() >= 3 && !stem.ends_with('s') => stem.to_string(),
                _ => w,
            };
            // A number or a code is a value, kept whole: "123456" is not "123457".
            if w.chars().any(|c| c.is_ascii_digit()) {
                w
            } else {
                w.chars().take(STEM_CHARS).collect()
            }
        })
        .collect()
}

/// How much of a word `content_words` keeps.
const STEM_CHARS: usize = 5;

/// The index of the first turn of the conversation's newest turns that fit `recent_tokens`
/// together: what a window of that size keeps whole. A probe answered there tests nothing.
pub(super) fn tail_start(conversation: &Conversation, counter: &dyn TokenCounter, recent_tokens: usize) -> usize {
    let mut used = 0;
    let mut start = conversation.turns.len();
    for (i, t) in conversation.turns.iter().enumerate().rev() {
        used += counter.count(&t.content);
        if used > recent_tokens && start < conversation.turns.len() {
            break;
        }
        start = i;
    }
    start
}

/// Up to `count` picks for `conversation`, from turns before `tail`.
///
/// The older part weighs more, since that is what compaction loses: the turns before the tail
/// are cut into four spans by position, asked about in the ratio 4 : 3 : 2 : 1 from the oldest.
/// Within a span, each pick is one of the three most specific turns of its stretch (rarest
/// words, `Specificity`), chosen by the seed.
pub(super) fn picks(conversation: &Conversation, tail: usize, count: usize, seed: u64) -> Vec<Pick> {
    let turns = &conversation.turns;
    let texts: Vec<&str> = turns.iter().map(|t| t.content.as_str()).collect();
    let specificity = Specificity::new(texts.iter().copied());
    let specific: Vec<f32> = texts.iter().map(|t| specificity.of(t)).collect();
    let bags: Vec<BTreeSet<String>> = texts.iter().map(|t| content_words(t)).collect();
    let candidates: Vec<usize> =
        (0..tail).filter(|&i| matches!(turns[i].role, Role::User | Role::Assistant) && bags[i].len() >= 5).collect();
    if candidates.is_empty() || count == 0 {
        return Vec::new();
    }
    let mut rng = SplitMix64::new(seed ^ 0x9e37_79b9_7f4a_7c15);
    let spans = 4.min(candidates.len());
    let weights: Vec<usize> = (0..spans).map(|s| spans - s).collect();
    let quotas = shares(count.min(candidates.len()), &weights);
    let mut chosen = Vec::new();
    for (s, &quota) in quotas.iter().enumerate() {
        let span = &candidates[candidates.len() * s / spans..candidates.len() * (s + 1) / spans];
        let quota = quota.min(span.len());
        for q in 0..quota {
            let stretch = &span[span.len() * q / quota..span.len() * (q + 1) / quota];
            let mut ranked: Vec<usize> = stretch.to_vec();
            ranked.sort_by(|&a, &b| specific[b].total_cmp(&specific[a]).then(a.cmp(&b)));
            chosen.push(ranked[rng.below(ranked.len().min(3))]);
        }
    }
    chosen.sort_unstable();
    let idf = Idf::new(&bags);
    let days: Vec<Option<Date>> = turns.iter().map(|t| t.timestamp.map(Date::of)).collect();
    chosen
        .iter()
        .enumerate()
        .map(|(n, &i)| {
            let kind = KINDS[n % KINDS.len()];
            let partner = match kind {
                Kind::Fact => None,
                Kind::Date => {
                    return Pick { kind: if days[i].is_some() { Kind::Date } else { Kind::Fact }, turns: vec![i] }
                }
                // A later turn before the tail, on a later day (or, without dates, a few turns
                // on: not the reply), that shares the most (rare) words: where a value stated
                // in `i` would be changed.
                Kind::Update => idf.best(
                    &bags,
                    i,
                    (i + 1..tail).filter(|&j| {
                        candidates.binary_search(&j).is_ok()
                            && match (days[i], days[j]) {
                                (Some(a), Some(b)) => b > a,
                                _ => j - i >= 4,
                            }
                    }),
                    2,
                ),
                // A turn of another day (or, without dates, a quarter of the conversation away)
                // that shares a rare word with `i`.
                Kind::MultiDay => idf.best(
                    &bags,
                    i,
                    candidates.iter().copied().filter(|&j| match (days[i], days[j]) {
                        (Some(a), Some(b)) => a != b,
                        _ => j.abs_diff(i) >= tail / 4,
                    }),
                    1,
                ),
            };
            match partner {
                Some(j) => Pick { kind, turns: if kind == Kind::MultiDay && j < i { vec![j, i] } else { vec![i, j] } },
                None => Pick { kind: Kind::Fact, turns: vec![i] },
            }
        })
        .collect()
}

/// `total` split in proportion to `weights`, by largest remainder (earlier spans win ties).
fn shares(total: usize, weights: &[usize]) -> Vec<usize> {
    let sum: usize = weights.iter().sum();
    let mut out: Vec<usize> = weights.iter().map(|w| total * w / sum).collect();
    let mut rest: Vec<(usize, usize)> = weights.iter().enumerate().map(|(i, w)| (total * w % sum, i)).collect();
    rest.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rest.iter().take(total - out.iter().sum::<usize>()) {
        out[i] += 1;
    }
    out
}

/// Inverse document frequencies of content words over a conversation's turns.
struct Idf(BTreeMap<String, f32>);

impl Idf {
    fn new(bags: &[BTreeSet<String>]) -> Idf {
        let mut df: BTreeMap<String, usize> = BTreeMap::new();
        for bag in bags {
            for w in bag {
                *df.entry(w.clone()).or_default() += 1;
            }
        }
        let n = bags.len().max(1) as f32;
        Idf(df.into_iter().map(|(w, d)| (w, (n / d as f32).ln())).collect())
    }

    /// Of `others`, the turn sharing the most information with `i` (the sum of the shared
    /// words' idf), if it shares at least `min_shared` words; the earliest on a tie.
    fn best(
        &self,
        bags: &[BTreeSet<String>],
        i: usize,
        others: impl Iterator<Item = usize>,
        min_shared: usize,
    ) -> Option<usize> {
        let mut best: Option<(f32, usize)> = None;
        for j in others {
            let shared: Vec<&String> = bags[i].intersection(&bags[j]).collect();
            if j == i || shared.len() < min_shared {
                continue;
            }
            let weight: f32 = shared.iter().map(|w| self.0.get(*w).copied().unwrap_or(0.0)).sum();
            if best.is_none_or(|(b, _)| weight > b) {
                best = Some((weight, j));
            }
        }
        best.map(|(_, j)| j)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_the_weights_and_add_up() {
        assert_eq!(shares(10, &[4, 3, 2, 1]), vec![4, 3, 2, 1]);
        assert_eq!(shares(5, &[4, 3, 2, 1]), vec![2, 2, 1, 0]);
        assert_eq!(shares(3, &[2, 1]), vec![2, 1]);
        assert_eq!(shares(0, &[4, 3]), vec![0, 0]);
    }

    #[test]
    fn content_words_drop_stopwords_and_plurals() {
        let got: Vec<String> = content_words("The tickets for Paris, and the boss's plans").into_iter().collect();
        // The same on both sides of a comparison, so "Paris" as "pari" does no harm.
        assert_eq!(got, vec!["boss", "pari", "plan", "ticke"]);
        assert_eq!(content_words("educational painting"), content_words("education painted"));
        assert_ne!(content_words("order 123456"), content_words("order 123457"));
    }
}
