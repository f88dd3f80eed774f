//! Detector tests over a hashed bag-of-words embedder (a fake that lives only here).

use expect_test::expect;
use strata_core::{EmbedError, Embedder, Role, Timestamp, Turn};

use crate::*;

/// Each word hashed into one of 64 buckets; similar wording gives similar vectors.
struct BagOfWords;

impl Embedder for BagOfWords {
    fn model_id(&self) -> &str {
        "bag-of-words"
    }
    fn dim(&self) -> usize {
        64
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 64];
                for w in t.split_whitespace() {
                    let h = w.bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
                    v[(h % 64) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

fn turns(texts: &[&str]) -> Vec<Turn> {
    texts.iter().enumerate().map(|(i, t)| Turn::new(format!("t{i}"), Role::User, *t)).collect()
}

const TWO_TOPICS: &[&str] = &[
    "kafka broker partitions ordering",
    "kafka partitions replay broker",
    "broker ordering kafka consumers",
    "kafka consumers partitions lag",
    "venue dinner travel agenda",
    "agenda workshops venue travel",
    "travel dinner venue bookings",
    "venue agenda dinner workshops",
];

fn explain(boundaries: &[Boundary]) -> String {
    boundaries.iter().map(|b| format!("{} {:.2} {}\n", b.index, b.score, b.cause)).collect()
}

#[test]
fn depth_finds_the_valley_between_two_topics() {
    let found = detect(&turns(TWO_TOPICS), &BagOfWords, &TopicConfig::depth_only()).unwrap();
    assert_eq!(found.iter().map(|b| b.index).collect::<Vec<_>>(), [4]);
    assert!(matches!(found[0].cause, Cause::Depth { .. }));
}

#[test]
fn the_seed_rule_fires_on_every_dissimilar_pair() {
    let found = detect(&turns(TWO_TOPICS), &BagOfWords, &TopicConfig::seed_fixed()).unwrap();
    // Bags of four words rarely reach 0.7 even on one topic: the fixed rule over-segments.
    assert!(found.len() > 1 && found.iter().any(|b| b.index == 4), "{}", explain(&found));
}

#[test]
fn cue_phrases_and_time_gaps_are_boundaries_with_their_cause() {
    let mut t = turns(&["a b c", "a b c", "a b c", "Moving on, what about lunch", "a b c", "a b c", "a b c", "a b c"]);
    for (i, turn) in t.iter_mut().enumerate() {
        turn.timestamp = Some(Timestamp(if i < 6 { i as i64 * 60 } else { 10_000 + i as i64 }));
    }
    let config = TopicConfig { method: Method::None, ..TopicConfig::default() };
    expect![[r#"
        3 1.00 cue phrase "moving on"
        6 2.00 161 minutes without a turn
    "#]]
    .assert_eq(&explain(&detect(&t, &BagOfWords, &config).unwrap()));
}

#[test]
fn boundaries_keep_their_distance() {
    let candidates = vec![
        Boundary { index: 5, score: 0.5, cause: Cause::CuePhrase { phrase: "x".into() } },
        Boundary { index: 6, score: 0.9, cause: Cause::CuePhrase { phrase: "y".into() } },
        Boundary { index: 1, score: 1.0, cause: Cause::CuePhrase { phrase: "z".into() } },
        Boundary { index: 12, score: 0.1, cause: Cause::CuePhrase { phrase: "w".into() } },
    ];
    let kept: Vec<usize> = spaced(candidates, 3).iter().map(|b| b.index).collect();
    assert_eq!(kept, [6, 12], "the stronger of 5 and 6; 1 is too close to the start");
}

#[test]
fn depth_scores_climb_both_sides() {
    let d = depth_scores(&[0.9, 0.5, 0.8, 0.7, 0.95]);
    let want = [0.0, 0.7, 0.0, 0.35, 0.0];
    for (a, b) in d.iter().zip(want) {
        assert!((a - b).abs() < 1e-6, "{d:?}");
    }
}

#[test]
fn tiny_conversations_have_no_boundaries() {
    assert!(detect(&turns(&["only one"]), &BagOfWords, &TopicConfig::default()).unwrap().is_empty());
    assert!(detect(&[], &BagOfWords, &TopicConfig::default()).unwrap().is_empty());
}

#[test]
fn gap_similarity_averages_the_window_sizes() {
    let v = |x: f32, y: f32| vec![x, y];
    let vectors = [v(1.0, 0.0), v(0.0, 1.0), v(1.0, 0.0), v(1.0, 0.0)];
    // The gap before turn 2: one turn a side is [0, 1] against [1, 0] (cosine 0); two a side
    // is [1, 1] against [2, 0] (cosine 1/√2). Window 2 reports their mean.
    let one = gap_similarities(&vectors, 1);
    let two = gap_similarities(&vectors, 2);
    assert!((one[1] - 0.0).abs() < 1e-6, "{one:?}");
    assert!((two[1] - 0.5 * std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6, "{two:?}");
    assert_eq!(two.len(), 3);
}

/// Vectors that wander: each turn near the last one, with occasional jumps (new topics), so
/// that depth valleys, plateaus and ties all occur.
fn wandering(seeds: &[u8]) -> Vec<Vec<f32>> {
    let mut v = vec![1f32; 8];
    seeds
        .iter()
        .map(|&s| {
            if s % 7 == 0 {
                v = (0..8).map(|k| f32::from((s.wrapping_mul(k + 3)) % 5)).collect();
            }
            v[usize::from(s) % 8] += f32::from(s % 3);
            v.clone()
        })
        .collect()
}

const CUES: [&str; 4] = ["plain words", "moving on to the build", "more plain words", "new topic: dinner"];

fn stream(seeds: &[u8]) -> Vec<Turn> {
    let mut ts = 1_700_000_000i64;
    seeds
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            // Mostly a minute apart, sometimes an hour, sometimes no timestamp.
            ts += if s % 11 == 0 { 3600 } else { 60 };
            let mut t = Turn::new(format!("t{i}"), Role::User, CUES[usize::from(s / 64) % 4]);
            t.timestamp = (s % 13 != 0).then_some(Timestamp(ts));
            t
        })
        .collect()
}

/// The tracker, fed turn by turn, against the batch over every prefix.
fn check_tracker(turns: &[Turn], vectors: &[Vec<f32>], missing: Option<usize>, config: &TopicConfig, limits: Limits) {
    let mut tracker = Tracker::with_limits(config.clone(), limits);
    for (i, t) in turns.iter().enumerate() {
        let v = (missing != Some(i)).then(|| vectors[i].as_slice());
        let before: Vec<usize> = tracker.starts().collect();
        tracker.push(t, v);
        let after: Vec<usize> = tracker.starts().collect();
        let moved = before.iter().zip(&after).find(|(a, b)| a != b).map(|(a, b)| *a.min(b)).or_else(|| {
            let k = before.len().min(after.len());
            before.get(k).or(after.get(k)).copied()
        });
        assert_eq!(tracker.moved_from(), moved, "after {} turns: {before:?} -> {after:?}", i + 1);
        let n = i + 1;
        let all = missing.is_none_or(|m| m >= n);
        let batch = detect_limited(&turns[..n], all.then_some(&vectors[..n]), config, limits);
        assert_eq!(tracker.boundaries(), batch.as_slice(), "after {n} turns");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
    #[test]
    fn the_tracker_finds_what_the_batch_finds_after_every_turn(
        seeds in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120),
        window in 1usize..5,
        min_segment in 1usize..4,
        method in 0u8..3,
        reach in 1usize..6,
        radius in 1usize..12,
        missing in proptest::option::of(0usize..120),
    ) {
        let method = match method {
            0 => Method::Depth { window, cutoff: 0.5 },
            1 => Method::Fixed { threshold: 0.95 },
            _ => Method::None,
        };
        let config = TopicConfig { method, min_segment, ..TopicConfig::default() };
        check_tracker(&stream(&seeds), &wandering(&seeds), missing, &config, Limits { reach, radius });
    }
}

#[test]
fn the_tracker_matches_the_batch_with_the_shipped_limits() {
    // Long enough that the stats radius and the walk's reach both bind.
    let seeds: Vec<u8> = (0..2600u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let (turns, vectors) = (stream(&seeds), wandering(&seeds));
    let config = TopicConfig::default();
    let mut tracker = Tracker::new(config.clone());
    for (i, t) in turns.iter().enumerate() {
        tracker.push(t, Some(&vectors[i]));
        if (i + 1) % 431 == 0 || i + 1 == turns.len() {
            assert_eq!(tracker.boundaries(), detect_with(&turns[..=i], Some(&vectors[..=i]), &config).as_slice());
        }
    }
    assert!(tracker.boundaries().len() > 100, "{}", tracker.boundaries().len());
}

#[test]
fn detector_names_select_their_configs_and_nothing_else() {
    assert_eq!(TopicConfig::from_name("combined"), Some(TopicConfig::default()));
    assert_eq!(TopicConfig::from_name("fixed"), Some(TopicConfig::seed_fixed()));
    assert_eq!(TopicConfig::from_name("depth"), Some(TopicConfig::depth_only()));
    let fixed = TopicConfig::from_name("fixed-0.5").unwrap();
    assert!(matches!(fixed.method, Method::Fixed { threshold } if threshold == 0.5));
    assert!(fixed.cue_phrases.is_empty());
    let depth = TopicConfig::from_name("depth-3-0.4").unwrap();
    assert!(matches!(depth.method, Method::Depth { window: 3, cutoff } if cutoff == 0.4));
    for bad in ["", "none", "even-10", "fixed-x", "depth-3", "depth-a-0.4", "combined-1"] {
        assert_eq!(TopicConfig::from_name(bad), None, "{bad}");
    }
}
