//! Probe statements rewritten by a language model: the same facts in wording no template of
//! ours wrote, kept only where every planted value survives verbatim.
//!
//! The phrasing families are still our templates; a model's rewording is a check that the
//! compaction does not depend on them. Only evidence turns are rewritten (filler and
//! distractors stay), one request per turn with greedy decoding, so a model and a set give the
//! same file on every run. A rewrite is refused, and the turn kept as it was, when it lost a
//! planted value, did not change the wording, came back empty or far longer, or the model
//! failed: the set never loses a probe.

use std::collections::BTreeMap;
use std::time::Duration;

use strata_core::{ChatMessage, Conversation, GenerateRequest, Generator, Role};

/// What the model is asked. Values are named by kind, not by example, so the instruction
/// carries no phrasing of the sets.
pub const PARAPHRASE_PROMPT: &str = "You paraphrase chat messages: you say the same thing \
with different words and a different sentence structure, as another person would write it. \
You copy every name, number, date, amount, identifier, file path, command and code block \
exactly as written. You reply with the paraphrase only.\n\n\
Example message: heads up, the build box reboots at 6pm, save your work\n\
Example paraphrase: Please save everything before 6pm, because that is when the build box \
restarts.";

/// Why a turn kept its own wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// A planted value the turn held is not in the rewrite, verbatim.
    LostValue,
    /// The rewrite is nearly the message again: fewer than a fifth of its words are new.
    Unchanged,
    /// Empty, or more than three times the message's length.
    BadLength,
    /// The generator failed or ran past its deadline.
    Failed,
}

/// What a run did, per turn asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParaphraseStats {
    pub asked: usize,
    pub rewritten: usize,
    pub refused: BTreeMap<Refusal, usize>,
}

/// The conversations with their evidence turns rewritten where a rewrite keeps every value;
/// ids, roles, speakers, times and probes unchanged. `progress` is called after each turn
/// with the number done and the number to do.
pub fn paraphrase(
    conversations: &[Conversation],
    generator: &dyn Generator,
    deadline: Option<Duration>,
    progress: &mut dyn FnMut(usize, usize),
) -> (Vec<Conversation>, ParaphraseStats) {
    let mut stats = ParaphraseStats::default();
    let todo: usize = conversations.iter().map(|c| evidence_values(c).len()).sum();
    let mut out = Vec::with_capacity(conversations.len());
    for c in conversations {
        let values = evidence_values(c);
        let mut c = c.clone();
        for turn in c.turns.iter_mut() {
            let Some(values) = values.get(&turn.id) else { continue };
            stats.asked += 1;
            match rewrite(generator, &turn.content, values, deadline) {
                Ok(text) => {
                    stats.rewritten += 1;
                    turn.content = text;
                }
                Err(why) => *stats.refused.entry(why).or_insert(0) += 1,
            }
            progress(stats.asked, todo);
        }
        out.push(c);
    }
    (out, stats)
}

/// Each evidence turn's planted values: the answers of the probes citing it that it holds.
fn evidence_values(c: &Conversation) -> BTreeMap<String, Vec<String>> {
    let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in &c.probes {
        for id in &p.evidence {
            let Some(turn) = c.turns.iter().find(|t| &t.id == id) else { continue };
            let entry = values.entry(id.clone()).or_default();
            if turn.content.contains(&p.answer) && !entry.contains(&p.answer) {
                entry.push(p.answer.clone());
            }
        }
    }
    values
}

fn rewrite(
    generator: &dyn Generator,
    content: &str,
    values: &[String],
    deadline: Option<Duration>,
) -> Result<String, Refusal> {
    let words = content.split_whitespace().count();
    let request = GenerateRequest {
        messages: vec![
            ChatMessage { role: Role::System, content: PARAPHRASE_PROMPT.to_string() },
            ChatMessage { role: Role::User, content: format!("Message: {content}\nParaphrase:") },
        ],
        // Room for a rewrite somewhat longer than the message (tokens run above words).
        max_tokens: 2 * words + 32,
        deadline,
    };
    let text = generator.generate(&request).map_err(|_| Refusal::Failed)?.text;
    check(content, &clean(&text), values)
}

/// The rewrite without what small models wrap it in: surrounding whitespace and quotes, and a
/// first line that only announces it ("Sure, here's the paraphrased message:"), recognised by
/// the instruction's own word and the colon that ends it.
fn clean(text: &str) -> String {
    let t = text.trim();
    let t = t.strip_prefix("Paraphrase:").unwrap_or(t).trim();
    let t = match t.split_once('\n') {
        Some((first, rest))
            if first.trim_end().ends_with(':')
                && first.to_lowercase().contains("paraphrase")
                && !rest.trim().is_empty() =>
        {
            rest.trim()
        }
        _ => t,
    };
    let t = t.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(t);
    t.trim().to_string()
}

/// The acceptance rule: every value verbatim, the wording changed, the length sane.
fn check(content: &str, rewrite: &str, values: &[String]) -> Result<String, Refusal> {
    if rewrite.is_empty() || rewrite.len() > 3 * content.len().max(40) {
        return Err(Refusal::BadLength);
    }
    // Words without case or the punctuation around them: "FYI," is "fyi".
    let words = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
            .filter(|w| !w.is_empty())
            .collect()
    };
    let old: std::collections::BTreeSet<String> = words(content).into_iter().collect();
    let new = words(rewrite);
    let fresh = new.iter().filter(|w| !old.contains(*w)).count();
    if fresh * 5 < new.len() || new.is_empty() {
        return Err(Refusal::Unchanged);
    }
    if values.iter().any(|v| !rewrite.contains(v.as_str())) {
        return Err(Refusal::LostValue);
    }
    Ok(rewrite.to_string())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use strata_core::{GenerateError, Generation, Probe, Turn};

    use super::*;

    /// Answers from a script, one per request, recording what it was asked.
    struct Scripted {
        answers: Mutex<Vec<Result<&'static str, &'static str>>>,
        asked: Mutex<Vec<String>>,
    }

    impl Generator for Scripted {
        fn model_id(&self) -> &str {
            "scripted"
        }
        fn generate(&self, request: &GenerateRequest) -> Result<Generation, GenerateError> {
            let asked = &request.messages[1].content;
            let message = asked.strip_prefix("Message: ").and_then(|m| m.strip_suffix("\nParaphrase:"));
            self.asked.lock().unwrap().push(message.expect("the message, framed").to_string());
            match self.answers.lock().unwrap().remove(0) {
                Ok(text) => {
                    Ok(Generation { text: text.to_string(), prompt_tokens: 1, generated_tokens: 1, reused_tokens: 0 })
                }
                Err(m) => Err(GenerateError::Backend { model: "scripted".into(), message: m.into() }),
            }
        }
    }

    fn conversation() -> Conversation {
        let turn = |id: &str, text: &str| Turn::new(id, Role::User, text);
        let probe = |id: &str, answer: &str, evidence: &[&str]| Probe {
            id: id.into(),
            question: "?".into(),
            answer: answer.into(),
            evidence: evidence.iter().map(|s| s.to_string()).collect(),
            after: None,
            category: None,
            adversarial_answer: None,
        };
        Conversation {
            id: "c".into(),
            turns: vec![
                turn("t1", "The deploy ticket is OPS-3254, filed by Ana."),
                turn("t2", "filler about the weather"),
                turn("t3", "We picked Postgres because the team knows it."),
                turn("t4", "The budget is $6,500 for the quarter."),
                turn("t5", "Which region?"),
                turn("t6", "eu-west-1, same as before."),
            ],
            probes: vec![
                probe("p1", "OPS-3254", &["t1"]),
                probe("p2", "Postgres", &["t3"]),
                probe("p3", "$6,500", &["t4"]),
                // A fact spread over two turns: only the turn holding the value must keep it.
                probe("p4", "eu-west-1", &["t5", "t6"]),
            ],
            ..Conversation::default()
        }
    }

    #[test]
    fn rewrites_evidence_turns_only_and_refuses_rewrites_that_lose_a_value() {
        let g = Scripted {
            answers: Mutex::new(vec![
                Ok("  \"Ana opened OPS-3254 for the deploy.\" "),
                Ok("We chose Postgres since everyone on the team knows it."),
                Ok("the budget is $6,500 for the quarter."),
                Err("out of memory"),
                Ok("Region: eu-west-1, unchanged."),
            ]),
            asked: Mutex::new(Vec::new()),
        };
        let mut seen = Vec::new();
        let (out, stats) = paraphrase(&[conversation()], &g, None, &mut |done, all| seen.push((done, all)));
        let text: Vec<&str> = out[0].turns.iter().map(|t| t.content.as_str()).collect();
        assert_eq!(
            text,
            vec![
                "Ana opened OPS-3254 for the deploy.",
                "filler about the weather",
                // Values are found as substrings, as answer recall finds them.
                "We chose Postgres since everyone on the team knows it.",
                "The budget is $6,500 for the quarter.",
                "Which region?",
                "Region: eu-west-1, unchanged.",
            ],
            "{stats:?}"
        );
        assert_eq!(g.asked.lock().unwrap().len(), 5, "the filler turn is not asked: {stats:?}");
        assert_eq!(stats.asked, 5);
        assert_eq!(stats.rewritten, 3);
        assert_eq!(stats.refused, BTreeMap::from([(Refusal::Unchanged, 1), (Refusal::Failed, 1)]));
        assert_eq!(seen.last(), Some(&(5, 5)));
        assert_eq!(out[0].probes, conversation().probes);
        assert!(out[0].turns.iter().zip(&conversation().turns).all(|(a, b)| a.id == b.id && a.role == b.role));
    }

    #[test]
    fn the_acceptance_rule() {
        let v = vec!["OPS-3254".to_string()];
        assert_eq!(check("Ticket OPS-3254.", "It is ticket OPS-3254.", &v), Ok("It is ticket OPS-3254.".into()));
        assert_eq!(check("Ticket OPS-3254.", "It is ticket OPS 3254.", &v), Err(Refusal::LostValue));
        assert_eq!(check("Ticket OPS-3254.", "ticket   ops-3254.", &v), Err(Refusal::Unchanged));
        // Case and punctuation alone do not make a paraphrase; one new word in five does.
        let old = "fyi the pager storm is tracked as OPS-3254, pls link it";
        assert_eq!(
            check(old, "FYI, the pager storm is tracked as OPS-3254; pls link it.", &v),
            Err(Refusal::Unchanged)
        );
        let new = "The pager storm has ticket OPS-3254; please add a link to it.";
        assert_eq!(check(old, new, &v), Ok(new.to_string()));
        assert_eq!(check("Ticket OPS-3254.", "", &v), Err(Refusal::BadLength));
        assert_eq!(check("Ticket OPS-3254.", &"OPS-3254 ".repeat(40), &v), Err(Refusal::BadLength));
        assert_eq!(clean("\"quoted\"\n"), "quoted");
        assert_eq!(clean("Sure, here's the paraphrased message:\n\"It is OPS-3254.\""), "It is OPS-3254.");
        // A first line of the message's own that ends in a colon stays.
        assert_eq!(clean("Run this:\n```\nmake\n```"), "Run this:\n```\nmake\n```");
    }
}
