//! `write_probes` end to end with fake generators: what is asked, what is kept, what is
//! counted, and that a run repeats.

use std::sync::Mutex;

use strata_core::{
    ChatMessage, Conversation, GenerateError, GenerateRequest, Generation, Generator, Role, Timestamp, TokenCounter,
    Turn,
};

use super::*;

const WORDS: [&str; 10] =
    ["kayak", "violin", "orchid", "lantern", "compass", "saddle", "teapot", "glacier", "falcon", "marble"];

/// 80 turns over ten days, each naming things no other turn names.
fn conversation() -> Conversation {
    let turns = (0..80)
        .map(|i| Turn {
            speaker: Some(if i % 2 == 0 { "Ana" } else { "Ben" }.to_string()),
            timestamp: Some(Timestamp(1_683_504_000 + (i as i64 / 8) * 86_400 + i as i64 * 60)),
            ..Turn::new(
                format!("t{i}"),
                if i % 2 == 0 { Role::User } else { Role::Assistant },
                format!(
                    "On my trip I found a {} {} near gate{i}, and I named it Zed{i} after the harbour code Q{i}X.",
                    WORDS[i % 10],
                    WORDS[(i / 10) % 10]
                ),
            )
        })
        .collect();
    Conversation { id: "c1".into(), turns, ..Conversation::default() }
}

/// Counts words (whitespace), enough for the tail.
struct Words;
impl TokenCounter for Words {
    fn name(&self) -> &str {
        "words"
    }
    fn count(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
}

/// Answers every request as asked: a probe about the turns its reply format names as
/// evidence, with the names only those turns give; its requests are kept for the assertions.
#[derive(Default)]
struct Quizzer(Mutex<Vec<Vec<ChatMessage>>>);
impl Generator for Quizzer {
    fn model_id(&self) -> &str {
        "quizzer"
    }
    fn generate(&self, request: &GenerateRequest) -> Result<Generation, GenerateError> {
        self.0.lock().unwrap().push(request.messages.clone());
        let prompt = &request.messages[1].content;
        let hint = &prompt[prompt.rfind("\"evidence\": [").unwrap()..];
        let ids: Vec<&str> = hint[hint.find('[').unwrap() + 1..hint.find(']').unwrap()]
            .split(", ")
            .map(|s| s.trim_matches('"'))
            .collect();
        let n = |id: &str| id[1..].parse::<usize>().unwrap();
        let answer: Vec<String> = ids.iter().map(|id| format!("Zed{}", n(id))).collect();
        let text = format!(
            "Here you go:\n{{\"question\": \"Which name goes with Q{}X?\", \"answer\": \"{}\", \"evidence\": {:?}}}",
            n(ids[0]),
            answer.join(" and "),
            ids
        );
        Ok(Generation { text, prompt_tokens: 1, generated_tokens: 1, reused_tokens: 0 })
    }
}

struct Garbage;
impl Generator for Garbage {
    fn model_id(&self) -> &str {
        "garbage"
    }
    fn generate(&self, _: &GenerateRequest) -> Result<Generation, GenerateError> {
        Ok(Generation { text: "¿?{{not json".into(), prompt_tokens: 1, generated_tokens: 1, reused_tokens: 0 })
    }
}

struct Broken;
impl Generator for Broken {
    fn model_id(&self) -> &str {
        "broken"
    }
    fn generate(&self, _: &GenerateRequest) -> Result<Generation, GenerateError> {
        Err(GenerateError::Backend { model: "broken".into(), message: "connection refused".into() })
    }
}

fn config() -> WriteConfig {
    WriteConfig { per_conversation: 12, recent_tokens: 200, ..WriteConfig::default() }
}

#[test]
fn probes_are_asked_about_older_turns_checked_and_kept() {
    let c = conversation();
    let q = Quizzer::default();
    let mut calls = Vec::new();
    let w = write_probes(std::slice::from_ref(&c), &q, &Words, &config(), &mut |d, a| calls.push((d, a)));
    let (asked, kept, dropped) = w.counts();
    assert_eq!(asked, 12);
    assert_eq!(calls.last(), Some(&(12, 12)));
    assert_eq!(kept + dropped.iter().map(|(_, n)| n).sum::<usize>(), asked, "{dropped:?}");
    // The date probes get Strata's date, not the generator's answer; every kept probe is
    // grounded in its evidence and outside the newest turns.
    let tail = pick::tail_start(&c, &Words, 200);
    assert!(tail > 60 && tail < 80, "{tail}");
    let probes = &w.conversations[0].probes;
    assert_eq!(probes.len(), kept);
    assert!(kept >= 6, "{:?}", w.verdicts);
    let kinds: std::collections::BTreeSet<&str> = probes.iter().filter_map(|p| p.category.as_deref()).collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["date", "fact", "multi-day", "update"]);
    for p in probes {
        let at: usize = p.evidence[0][1..].parse().unwrap();
        assert!(at < tail, "{p:?}");
        if p.category.as_deref() == Some("date") {
            assert!(p.answer.ends_with("May 2023"), "{p:?}");
        }
        assert!(p.id.starts_with("c1-w"), "{p:?}");
    }
    // More of the picks come from the older half of what lies before the tail.
    let picked: Vec<usize> = w.verdicts.iter().map(|v| v.turns[0][1..].parse().unwrap()).collect();
    let older = picked.iter().filter(|&&i| i < tail / 2).count();
    assert!(older * 2 > picked.len(), "{picked:?}");
    // The update and two-day kinds showed two turns.
    assert!(q.0.lock().unwrap().iter().any(|m| m[1].content.matches("] ").count() >= 2));
    // The same inputs, the same probes.
    let again = write_probes(std::slice::from_ref(&c), &Quizzer::default(), &Words, &config(), &mut |_, _| {});
    assert_eq!(again.conversations, w.conversations);
}

#[test]
fn a_generator_that_returns_garbage_or_fails_is_counted() {
    let c = conversation();
    let w = write_probes(std::slice::from_ref(&c), &Garbage, &Words, &config(), &mut |_, _| {});
    let (asked, kept, dropped) = w.counts();
    assert_eq!((asked, kept), (12, 0));
    assert!(dropped.contains(&(Reason::NotUnderstood, 12)), "{dropped:?}");
    assert!(w.verdicts.iter().all(|v| v.reply.as_deref() == Some("¿?{{not json")));
    assert!(w.conversations[0].probes.is_empty());

    let w = write_probes(std::slice::from_ref(&c), &Broken, &Words, &config(), &mut |_, _| {});
    let (_, kept, dropped) = w.counts();
    assert_eq!(kept, 0);
    assert!(dropped.contains(&(Reason::GeneratorFailed, 12)), "{dropped:?}");
    assert!(w.verdicts[0].error.as_deref().unwrap().contains("connection refused"));
}

#[test]
fn another_seed_picks_other_turns_and_a_short_conversation_gets_none() {
    let c = conversation();
    let seeded = |seed| {
        let w = write_probes(
            std::slice::from_ref(&c),
            &Quizzer::default(),
            &Words,
            &WriteConfig { seed, ..config() },
            &mut |_, _| {},
        );
        w.verdicts.iter().map(|v| v.turns.clone()).collect::<Vec<_>>()
    };
    assert_eq!(seeded(1), seeded(1));
    assert_ne!(seeded(1), seeded(2));
    // Everything fits the recent tokens: nothing to ask about.
    let short = Conversation { turns: c.turns[..5].to_vec(), ..c.clone() };
    let w = write_probes(&[short], &Quizzer::default(), &Words, &config(), &mut |_, _| {});
    assert_eq!(w.counts().0, 0);
}
