//! The probe generator's promises: deterministic, well-formed, each answer in exactly one turn,
//! and the committed set is what seed 7 generates.

use expect_test::expect;
use strata_core::Conversation;

use crate::{generate, ProbeSetConfig};

/// Whether the normalised `answer` occurs in `text` as whole words (as the eval scores it):
/// lowercase, ASCII punctuation removed, whitespace folded.
fn contains_answer(text: &str, answer: &str) -> bool {
    let norm = |s: &str| {
        let s: String = s.to_lowercase().chars().filter(|c| !c.is_ascii_punctuation()).collect();
        format!(" {} ", s.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    norm(text).contains(&norm(answer))
}

#[test]
fn probe_sets_are_deterministic_and_well_formed() {
    let config = ProbeSetConfig { conversations: 3, ..ProbeSetConfig::default() };
    let a = generate(11, &config);
    assert_eq!(a, generate(11, &config));
    assert_ne!(a, generate(12, &config));
    well_formed(&a);
    let cats: std::collections::BTreeSet<_> =
        a.iter().flat_map(|c| c.probes.iter().filter_map(|p| p.category.clone())).collect();
    expect![[
        r#"{"assistant-fact", "budget", "command", "date", "decision", "incident", "path", "preference", "reason"}"#
    ]]
    .assert_eq(&format!("{cats:?}"));
}

fn well_formed(conversations: &[Conversation]) {
    for c in conversations {
        c.validate(true).unwrap();
        assert!(c.turns.len() > 250, "{}", c.turns.len());
        for p in &c.probes {
            let at = c.position(&p.evidence[0]).unwrap();
            let text = &c.turns[at].content;
            assert!(text.contains(&p.answer), "the evidence turn states the answer: {text} / {}", p.answer);
            // The answer appears nowhere else: distractors carry other values.
            let elsewhere =
                c.turns.iter().enumerate().filter(|(i, t)| *i != at && contains_answer(&t.content, &p.answer)).count();
            assert_eq!(elsewhere, 0, "{} appears outside its evidence turn", p.answer);
            assert!(c.position(p.after.as_deref().unwrap()).unwrap() >= at);
        }
    }
}

#[test]
fn the_committed_probe_set_is_what_seed_7_generates() {
    let committed = include_str!("../../../datasets/probes/probes.jsonl");
    let conversations = generate(7, &ProbeSetConfig::default());
    well_formed(&conversations);
    let generated: String = conversations.iter().map(|c| strata_transcript::to_json(c) + "\n").collect();
    assert!(committed == generated, "datasets/probes/probes.jsonl is stale: run `cargo xtask gen-probes --seed 7`");
}
