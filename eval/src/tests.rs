//! Tests of the metrics against hand-computed cases and a reference implementation, of the
//! probe generator, and of the aggregation that sharding relies on.

use crate::metrics::*;

#[test]
fn answers_are_normalised_as_squad_does() {
    assert_eq!(normalize("The  Cat, sat!"), "cat sat");
    assert_eq!(normalize("An apple a day"), "apple day");
    assert_eq!(normalize("7 May 2023"), "7 may 2023");
    assert_eq!(normalize("don't STOP"), "dont stop");
    assert_eq!(normalize("€12,500"), "€12500");
    assert_eq!(normalize("  "), "");
    let ctx = ScoredText::new("Finance approved a budget of €12,500 for the Q3 campaign. The cat sat.");
    assert!(ctx.contains_answer("€12,500"));
    assert!(ctx.contains_answer("the Q3 Campaign"));
    assert!(!ctx.contains_answer("€12,50"), "containment is on word boundaries");
    assert!(!ctx.contains_answer("ca"));
    assert!(!ctx.contains_answer("the"), "an answer that normalises to nothing is never found");
    assert_eq!(ctx.answer_token_recall("budget for dogs"), 0.5, "`for` is a stopword: budget found, dogs not");
    assert_eq!(ctx.answer_token_recall("of the"), 1.0, "an answer of stopwords only is scored on its words");
}

#[test]
fn pk_and_windowdiff_on_textbook_cases() {
    // Reference [3, 3]: one boundary before unit 3 of 6. k = round(3 / 2) = 2 (half to even).
    let reference = boundary_bits(6, &[3]);
    assert_eq!(reference, [false, false, true, false, false]);
    let k = window_size(6, &reference);
    assert_eq!(k, 2);
    // No boundaries: the pairs (1,3) and (2,4) straddle the reference boundary: 2 of 4 wrong.
    let none = boundary_bits(6, &[]);
    assert_eq!(pk(&reference, &none, k), 0.5);
    assert_eq!(window_diff(&reference, &none, k), 0.5);
    // Perfect.
    assert_eq!(pk(&reference, &reference, k), 0.0);
    assert_eq!(window_diff(&reference, &reference, k), 0.0);
    // A near miss, one unit late: both err on windows 1 and 3 of 4.
    let late = boundary_bits(6, &[4]);
    assert_eq!(pk(&reference, &late, k), 0.5);
    assert_eq!(window_diff(&reference, &late, k), 0.5);
    // Every gap a boundary: WindowDiff counts 2 against 0 or 1 in every window.
    let all = boundary_bits(6, &[1, 2, 3, 4, 5]);
    assert_eq!(window_diff(&reference, &all, k), 1.0);
    assert_eq!(pk(&reference, &all, k), 0.5);
    // Rounding follows Python: 2.5 rounds to 2, 3.5 to 4; below 2 it is 2, as in segeval.
    assert_eq!(window_size(4, &boundary_bits(4, &[2])), 2);
    assert_eq!(window_size(2, &boundary_bits(2, &[1])), 2);
    assert_eq!(window_size(10, &boundary_bits(10, &[5])), 2);
    assert_eq!(window_size(14, &boundary_bits(14, &[7])), 4);
}

#[test]
fn boundary_f1_allows_one_unit_of_slack() {
    let reference = boundary_bits(20, &[5, 12]);
    let (p, r, f) = boundary_f1(&reference, &boundary_bits(20, &[6, 15]), 1);
    assert_eq!((p, r, f), (0.5, 0.5, 0.5));
    // Two hypotheses near one reference boundary: only one may match it.
    let (p, r, _) = boundary_f1(&reference, &boundary_bits(20, &[4, 5]), 1);
    assert_eq!((p, r), (0.5, 0.5));
    assert_eq!(boundary_f1(&boundary_bits(5, &[]), &boundary_bits(5, &[]), 1), (1.0, 1.0, 1.0));
    assert_eq!(boundary_f1(&reference, &boundary_bits(20, &[]), 1), (0.0, 0.0, 0.0));
}

#[test]
fn rouge_matches_google_rouge_score() {
    #[derive(serde::Deserialize)]
    struct Case {
        hypothesis: String,
        reference: String,
        rouge1: [f64; 3],
        rouge2: [f64; 3],
        #[serde(rename = "rougeL")]
        rouge_l: [f64; 3],
    }
    let cases: Vec<Case> = serde_json::from_str(include_str!("../tests/fixtures/rouge.json")).unwrap();
    assert!(cases.len() >= 6);
    for c in cases {
        let s = rouge(&c.hypothesis, &c.reference);
        for (got, want, name) in
            [(s.rouge1, c.rouge1, "rouge1"), (s.rouge2, c.rouge2, "rouge2"), (s.rouge_l, c.rouge_l, "rougeL")]
        {
            for (g, w) in [got.precision, got.recall, got.f1].into_iter().zip(want) {
                assert!((g - w).abs() < 1e-6, "{name} of {:?}: {g} != {w}", c.hypothesis);
            }
        }
    }
    // Several references: the best per metric.
    let refs = vec!["a b c".to_string(), "x y z".to_string()];
    assert_eq!(rouge_multi("x y z", &refs).rouge1.f1, 1.0);
}

#[test]
fn quantiles_interpolate_like_numpy() {
    assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
    assert_eq!(quantile(&[5.0, 1.0, 3.0], 0.95), 4.8);
    assert_eq!(quantile(&[], 0.5), 0.0);
}

#[test]
fn the_sentence_split_variant_keeps_speakers_times_and_whole_evidence() {
    use strata_core::{Conversation, Probe, Role, Timestamp, Turn};
    let conversation = Conversation {
        id: "c".into(),
        turns: vec![
            Turn::new("D1:1", Role::User, "Hi Mel! I adopted a puppy. His name is Rex.")
                .with_speaker("Caroline")
                .with_timestamp(Timestamp(100)),
            Turn::new("D1:2", Role::Assistant, "Lovely!").with_speaker("Melanie").with_timestamp(Timestamp(100)),
        ],
        probes: vec![Probe {
            id: "q".into(),
            question: "What is the puppy called?".into(),
            answer: "Rex".into(),
            evidence: vec!["D1:1".into(), "D1:2".into()],
            after: Some("D1:1".into()),
            category: None,
            adversarial_answer: None,
        }],
        ..Conversation::default()
    };
    let split = crate::suite::split_sentences(&conversation);
    let ids: Vec<&str> = split.turns.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["D1:1.1", "D1:1.2", "D1:1.3", "D1:2"]);
    assert_eq!(split.turns[1].content, "I adopted a puppy.");
    assert!(split.turns[..3].iter().all(|t| t.speaker.as_deref() == Some("Caroline")
        && t.timestamp == Some(Timestamp(100))
        && t.role == Role::User));
    assert_eq!(split.probes[0].evidence, ["D1:1.1", "D1:1.2", "D1:1.3", "D1:2"]);
    assert_eq!(split.probes[0].after.as_deref(), Some("D1:1.3"), "asked after the last piece");
}

#[test]
fn the_harness_holds_every_bounded_strategy_to_its_budget() {
    use std::sync::Arc;

    use strata_core::{Context, Conversation, History, Probe, Role, Strategy, StrategyError, Turn};

    use crate::retention::{score_conversation, Sweep};
    use crate::Mode;

    /// Sends every turn, as `full` does, but claims to be bounded.
    struct Everything {
        bounded: bool,
    }
    impl Strategy for Everything {
        fn name(&self) -> &str {
            "everything"
        }
        fn bounded(&self) -> bool {
            self.bounded
        }
        fn build(&self, history: &History, budget: usize, _: Option<&str>) -> Result<Context, StrategyError> {
            let mut ctx = Context::new("everything", budget, history.counter());
            strata_strategies::select::push_verbatim(history, &mut ctx, &(0..history.len()).collect::<Vec<_>>());
            Ok(ctx)
        }
    }
    let conversation = Conversation {
        id: "c".into(),
        turns: (1..=4).map(|i| Turn::new(format!("t{i}"), Role::User, format!("message number {i}"))).collect(),
        probes: vec![Probe {
            id: "q".into(),
            question: "Which number?".into(),
            answer: "4".into(),
            evidence: vec!["t4".into()],
            after: Some("t4".into()),
            category: None,
            adversarial_answer: None,
        }],
        ..Conversation::default()
    };
    let score = |bounded: bool, budget: usize| {
        let strategies: Vec<Arc<dyn Strategy>> = vec![Arc::new(Everything { bounded })];
        let plan = Sweep {
            dataset: "d",
            strategies: &strategies,
            budgets: &[budget],
            modes: &[Mode::Agnostic],
            counter: Arc::new(strata_tokens::Tiktoken::o200k()),
            save_contexts: false,
            ask: None,
        };
        score_conversation(&plan, 0, &conversation)
    };
    let history = History::from_conversation(&conversation, Arc::new(strata_tokens::Tiktoken::o200k())).unwrap();
    let total = Everything { bounded: true }.build(&history, 0, None).unwrap().total_tokens();
    assert!(score(true, total).is_ok(), "exactly the budget is within it");
    let err = format!("{:#}", score(true, total - 1).unwrap_err());
    assert_eq!(
        err,
        format!(
            "transcript c: after turn t4: strategy everything: a context of {total} tokens, over the budget of {}",
            total - 1
        )
    );
    assert!(score(false, total - 1).is_ok(), "an unbounded strategy says so and is scored as it is");
}

/// A question-aware strategy scored in aware mode alone builds one context per question and
/// nothing else: a question-less build there would be dropped unrecorded, and a strategy that
/// reads the conversation on its first call (an LLM peer) would have that cost hidden in it.
#[test]
fn aware_mode_alone_records_every_build_of_a_question_aware_strategy() {
    use std::sync::{Arc, Mutex};

    use strata_core::{Context, Conversation, History, Probe, Role, Strategy, StrategyError, Turn};

    use crate::retention::{score_conversation, Sweep};
    use crate::Mode;

    /// Records the question of each call.
    #[derive(Default)]
    struct Asked(Mutex<Vec<Option<String>>>);
    impl Strategy for Asked {
        fn name(&self) -> &str {
            "asked"
        }
        fn question_aware(&self) -> bool {
            true
        }
        fn build(&self, history: &History, budget: usize, question: Option<&str>) -> Result<Context, StrategyError> {
            self.0.lock().unwrap().push(question.map(str::to_string));
            Ok(Context::new("asked", budget, history.counter()))
        }
    }
    let probe = |id: &str, question: &str| Probe {
        id: id.into(),
        question: question.into(),
        answer: "1".into(),
        evidence: vec!["t1".into()],
        after: Some("t2".into()),
        category: None,
        adversarial_answer: None,
    };
    let conversation = Conversation {
        id: "c".into(),
        turns: (1..=2).map(|i| Turn::new(format!("t{i}"), Role::User, format!("message number {i}"))).collect(),
        probes: vec![probe("q1", "Which?"), probe("q2", "What?")],
        ..Conversation::default()
    };
    let run = |modes: &[Mode]| {
        let asked = Arc::new(Asked::default());
        let strategies: Vec<Arc<dyn Strategy>> = vec![asked.clone()];
        let plan = Sweep {
            dataset: "d",
            strategies: &strategies,
            budgets: &[100],
            modes,
            counter: Arc::new(strata_tokens::Tiktoken::o200k()),
            save_contexts: false,
            ask: None,
        };
        let records = score_conversation(&plan, 0, &conversation).unwrap();
        let calls = std::mem::take(&mut *asked.0.lock().unwrap());
        (calls, records.builds.len())
    };
    let some = |q: &str| Some(q.to_string());
    assert_eq!(run(&[Mode::Aware]), (vec![some("Which?"), some("What?")], 2));
    assert_eq!(run(&[Mode::Agnostic, Mode::Aware]), (vec![None, some("Which?"), some("What?")], 3));
}

/// The gate compares numbers just computed with numbers read back from `results.json`; with
/// `--tolerance 0` an equal result must pass, so a mean must read back bit for bit (serde_json
/// only guarantees that with its `float_roundtrip` feature).
#[test]
fn means_read_back_from_json_bit_for_bit() {
    let mut off = Vec::new();
    for n in 1..=1600u32 {
        for k in 0..=n {
            let v = f64::from(k) / f64::from(n);
            let back: f64 = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
            if back.to_bits() != v.to_bits() {
                off.push((k, n));
            }
        }
    }
    assert!(off.is_empty(), "{} of them differ, the first {:?}", off.len(), &off[..off.len().min(5)]);
}
