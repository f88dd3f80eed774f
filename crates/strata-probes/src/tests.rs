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

/// A family's probes: every kind, each answer stated in its evidence turns and nowhere else (a
/// corrected value's old one is another value), asked after its evidence.
fn family_well_formed(conversations: &[Conversation]) {
    for c in conversations {
        c.validate(true).unwrap();
        assert!(c.turns.len() > 250, "{}", c.turns.len());
        for p in &c.probes {
            let evidence: Vec<usize> = p.evidence.iter().map(|e| c.position(e).unwrap()).collect();
            let holding: Vec<usize> =
                (0..c.turns.len()).filter(|&i| contains_answer(&c.turns[i].content, &p.answer)).collect();
            assert!(!holding.is_empty(), "{}: {} is stated", p.id, p.answer);
            assert!(
                holding.iter().all(|h| evidence.contains(h)),
                "{}: {} only in evidence, not {holding:?}",
                p.id,
                p.answer
            );
            let after = c.position(p.after.as_deref().unwrap()).unwrap();
            assert!(evidence.iter().all(|&e| e <= after), "{}: asked after its evidence", p.id);
        }
    }
}

#[test]
fn every_family_is_deterministic_well_formed_and_has_every_kind() {
    let config = ProbeSetConfig { conversations: 3, ..ProbeSetConfig::default() };
    let mut all_text = Vec::new();
    for family in crate::Family::ALL {
        let a = crate::generate_family(family, 11, &config);
        assert_eq!(a, crate::generate_family(family, 11, &config));
        family_well_formed(&a);
        let cats: std::collections::BTreeSet<_> =
            a.iter().flat_map(|c| c.probes.iter().filter_map(|p| p.category.clone())).collect();
        expect![[
            r#"{"assistant-fact", "budget", "command", "date", "decision", "incident", "path", "preference", "reason", "superseded"}"#
        ]]
        .assert_eq(&format!("{cats:?}"));
        // Spread facts (two evidence turns) and facts inside code blocks occur in every family.
        assert!(a.iter().flat_map(|c| &c.probes).any(|p| p.evidence.len() == 2), "{family:?}: a spread fact");
        all_text.push(a.iter().flat_map(|c| c.turns.iter().map(|t| t.content.clone())).collect::<Vec<_>>());
    }
    // The families share no sentence: they are written differently, not re-labelled.
    for (i, a) in all_text.iter().enumerate() {
        let a: std::collections::BTreeSet<&String> = a.iter().collect();
        for b in &all_text[i + 1..] {
            assert!(b.iter().all(|t| !a.contains(t)), "two families share a turn");
        }
    }
}

#[test]
fn the_committed_dev_and_heldout_sets_are_what_seed_7_generates() {
    for (committed, generated, name) in [
        (include_str!("../../../datasets/probes/probes-dev.jsonl"), crate::dev_set(7), "probes-dev"),
        (include_str!("../../../datasets/probes/probes-heldout.jsonl"), crate::heldout_set(7), "probes-heldout"),
    ] {
        family_well_formed(&generated);
        let text: String = generated.iter().map(|c| strata_transcript::to_json(c) + "\n").collect();
        assert!(committed == text, "datasets/probes/{name}.jsonl is stale: run `cargo xtask gen-probes --seed 7`");
    }
}

#[test]
fn the_committed_paraphrased_sets_reword_only_evidence_turns_and_keep_every_value() {
    for (committed, source, name) in [
        (include_str!("../../../datasets/probes/probes-paraphrased.jsonl"), crate::dev_set(7), "probes-paraphrased"),
        (
            include_str!("../../../datasets/probes/probes-heldout-paraphrased.jsonl"),
            crate::heldout_set(7),
            "probes-heldout-paraphrased",
        ),
    ] {
        let loaded: Vec<Conversation> = strata_transcript::JsonlReader::from_str(name, committed)
            .map(|c| c.unwrap_or_else(|e| panic!("{name}: {e}")))
            .collect();
        assert_eq!(loaded.len(), source.len(), "{name}: stale, run `cargo xtask gen-probes --seed 7 --paraphrase`");
        let (mut asked, mut reworded) = (0, 0);
        for (p, s) in loaded.iter().zip(&source) {
            assert_eq!((&p.id, &p.probes), (&s.id, &s.probes), "{name}: stale");
            let evidence: std::collections::BTreeSet<&String> = s.probes.iter().flat_map(|q| &q.evidence).collect();
            assert_eq!(p.turns.len(), s.turns.len(), "{name} {}", s.id);
            for (a, b) in p.turns.iter().zip(&s.turns) {
                assert_eq!((&a.id, a.role, &a.speaker, a.timestamp), (&b.id, b.role, &b.speaker, b.timestamp));
                if !evidence.contains(&b.id) {
                    assert_eq!(a.content, b.content, "{name} {} {}: only evidence turns are reworded", s.id, b.id);
                    continue;
                }
                asked += 1;
                reworded += usize::from(a.content != b.content);
                for q in s.probes.iter().filter(|q| q.evidence.contains(&b.id) && b.content.contains(&q.answer)) {
                    assert!(a.content.contains(&q.answer), "{name} {} {}: lost {:?}", s.id, b.id, q.answer);
                }
            }
        }
        // A copy of the source would pass everything above.
        assert!(reworded * 4 >= asked, "{name}: only {reworded} of {asked} evidence turns reworded");
    }
}
