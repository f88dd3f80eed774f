//! The checks every written probe passes before it is kept, each a reason to drop it. They
//! compare words, not phrasing: an answer whose content words are not in its evidence turns is
//! not grounded there; one whose words are all in its question, or all in the newest turns,
//! tests nothing.

use std::collections::BTreeSet;

use strata_core::{Conversation, Turn};
use strata_text::{relative_note, Date};

use super::pick::{content_words, Kind};

/// Why a probe was not kept: the generator's part first, then the checks in the order they
/// run (a probe is dropped for the first that fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// The generator failed (an error or no answer in time): counted, never retried silently.
    GeneratorFailed,
    /// The reply held no JSON object with a question.
    NotUnderstood,
    /// The generator said there was nothing to ask (no change, nothing to combine).
    Declined,
    /// An evidence id that is not a turn of the conversation.
    UnknownEvidence,
    /// The answer has no content word, so nothing can check it ("yes").
    NoContentWords,
    /// The answer is longer than `MAX_ANSWER_WORDS`: a passage, not a fact to recall.
    AnswerTooLong,
    /// A content word of the answer is in none of the evidence turns.
    AnswerNotInEvidence,
    /// Every content word of the answer is in the question.
    QuestionHoldsAnswer,
    /// An update whose answer the older turn already held: nothing changed.
    Unchanged,
    /// A two-day question that one of its turns answers alone.
    OneTurnSuffices,
    /// An evidence turn is among the newest turns, or the answer is all there: a memory that
    /// keeps the last turns answers it without remembering anything.
    AnswerableFromRecent,
    /// Nearly the same question, or the same answer from the same turns, as a probe kept before.
    NearDuplicate,
}

impl Reason {
    pub const ALL: [Reason; 12] = [
        Reason::GeneratorFailed,
        Reason::NotUnderstood,
        Reason::Declined,
        Reason::UnknownEvidence,
        Reason::NoContentWords,
        Reason::AnswerTooLong,
        Reason::AnswerNotInEvidence,
        Reason::QuestionHoldsAnswer,
        Reason::Unchanged,
        Reason::OneTurnSuffices,
        Reason::AnswerableFromRecent,
        Reason::NearDuplicate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reason::GeneratorFailed => "generator-failed",
            Reason::NotUnderstood => "not-understood",
            Reason::Declined => "declined",
            Reason::UnknownEvidence => "unknown-evidence",
            Reason::NoContentWords => "no-content-words",
            Reason::AnswerTooLong => "answer-too-long",
            Reason::AnswerNotInEvidence => "answer-not-in-evidence",
            Reason::QuestionHoldsAnswer => "question-holds-answer",
            Reason::Unchanged => "unchanged",
            Reason::OneTurnSuffices => "one-turn-suffices",
            Reason::AnswerableFromRecent => "answerable-from-recent",
            Reason::NearDuplicate => "near-duplicate",
        }
    }
}

/// The longest answer kept, in words: the instruction asks for a few, and a longer one is a
/// sentence copied from the turn, which answer recall cannot score as one fact.
const MAX_ANSWER_WORDS: usize = 10;

/// Question-word overlap (Jaccard) at or above which two questions count as one.
const NEAR_DUPLICATE: f64 = 0.6;

/// A probe as written, before it is kept.
#[derive(Debug, Clone)]
pub(super) struct Candidate<'a> {
    pub(super) kind: Kind,
    /// The turns it was asked about, in the order `Pick` holds them (the older first).
    pub(super) picked: &'a [usize],
    pub(super) question: &'a str,
    pub(super) answer: &'a str,
    pub(super) evidence: &'a [String],
}

/// A kept probe, as the duplicate check compares it.
#[derive(Debug, Clone)]
pub(super) struct Kept {
    question: BTreeSet<String>,
    answer: BTreeSet<String>,
    evidence: BTreeSet<String>,
}

/// The text a turn offers as evidence: who said it, its date, what its relative dates meant,
/// and what it says.
fn evidence_text(t: &Turn) -> String {
    match t.timestamp {
        Some(ts) => {
            format!("{} {} {}{}", t.speaker_or_role(), Date::of(ts), relative_note([t.content.as_str()], ts), t.content)
        }
        None => format!("{} {}", t.speaker_or_role(), t.content),
    }
}

/// The newest turns of a conversation, as the `answerable-from-recent` check reads them: where
/// they start (`pick::tail_start`) and the content words they say, read once a conversation.
#[derive(Debug, Clone)]
pub(super) struct Recent {
    start: usize,
    words: BTreeSet<String>,
}

impl Recent {
    pub(super) fn new(conversation: &Conversation, start: usize) -> Recent {
        // What the newest turns say, not their dates: every date of the conversation shares
        // its month and year words with some recent day, and a "when" answer is not in the
        // tail unless a recent turn says it.
        let words = conversation.turns[start..]
            .iter()
            .flat_map(|t| content_words(&format!("{} {}", t.speaker_or_role(), t.content)))
            .collect();
        Recent { start, words }
    }
}

/// Runs the checks; `kept` holds the probes already kept for this conversation. On success,
/// what the duplicate check keeps.
pub(super) fn check(
    conversation: &Conversation,
    recent: &Recent,
    c: &Candidate<'_>,
    kept: &[Kept],
) -> Result<Kept, Reason> {
    let mut at = Vec::new();
    for id in c.evidence {
        at.push(conversation.turns.iter().position(|t| &t.id == id).ok_or(Reason::UnknownEvidence)?);
    }
    if at.is_empty() {
        return Err(Reason::UnknownEvidence);
    }
    let answer = content_words(c.answer);
    if answer.is_empty() {
        return Err(Reason::NoContentWords);
    }
    if c.answer.split_whitespace().count() > MAX_ANSWER_WORDS {
        return Err(Reason::AnswerTooLong);
    }
    let bags: Vec<BTreeSet<String>> =
        at.iter().map(|&i| content_words(&evidence_text(&conversation.turns[i]))).collect();
    let all: BTreeSet<String> = bags.iter().flatten().cloned().collect();
    if !answer.is_subset(&all) {
        return Err(Reason::AnswerNotInEvidence);
    }
    let question = content_words(c.question);
    if answer.is_subset(&question) {
        return Err(Reason::QuestionHoldsAnswer);
    }
    match c.kind {
        Kind::Update => {
            let older = content_words(&evidence_text(&conversation.turns[c.picked[0]]));
            if answer.is_subset(&older) {
                return Err(Reason::Unchanged);
            }
        }
        Kind::MultiDay => {
            if bags.iter().any(|b| answer.is_subset(b)) {
                return Err(Reason::OneTurnSuffices);
            }
        }
        Kind::Fact | Kind::Date => {}
    }
    if at.iter().any(|&i| i >= recent.start) || answer.is_subset(&recent.words) {
        return Err(Reason::AnswerableFromRecent);
    }
    let evidence: BTreeSet<String> = c.evidence.iter().cloned().collect();
    for k in kept {
        let union = question.union(&k.question).count().max(1);
        let jaccard = question.intersection(&k.question).count() as f64 / union as f64;
        if jaccard >= NEAR_DUPLICATE || (k.answer == answer && k.evidence == evidence) {
            return Err(Reason::NearDuplicate);
        }
    }
    Ok(Kept { question, answer, evidence })
}

#[cfg(test)]
mod tests {
    use strata_core::{Role, Timestamp, Turn};

    use super::*;

    /// Five turns on three days; the newest (t5) is the tail.
    fn conversation() -> Conversation {
        let day = 86_400;
        let said = |id: &str, ts: i64, text: &str| Turn {
            speaker: Some(if id == "t2" { "Ben" } else { "Ana" }.to_string()),
            timestamp: Some(Timestamp(1_683_504_000 + ts)),
            ..Turn::new(id, Role::User, text)
        };
        Conversation {
            id: "c".into(),
            turns: vec![
                said("t1", 0, "I adopted a grey cat called Pixel from the shelter in Porto."),
                said("t2", 0, "The ferry to the island leaves at seven fifteen every morning."),
                said("t3", 3 * day, "Pixel now sleeps on the balcony; we moved flats to Lisbon."),
                said("t4", 9 * day, "My sister Marta visits in June for the jazz festival."),
                said("t5", 20 * day, "Marta cancelled, the festival moved to July."),
            ],
            ..Conversation::default()
        }
    }

    fn run(
        kind: Kind,
        picked: &[usize],
        question: &str,
        answer: &str,
        evidence: &[&str],
        kept: &[Kept],
    ) -> Result<Kept, Reason> {
        let evidence: Vec<String> = evidence.iter().map(|s| s.to_string()).collect();
        let c = conversation();
        check(&c, &Recent::new(&c, 4), &Candidate { kind, picked, question, answer, evidence: &evidence }, kept)
    }

    #[test]
    fn a_grounded_probe_is_kept() {
        assert!(run(Kind::Fact, &[0], "What is the name of Ana's cat?", "Pixel", &["t1"], &[]).is_ok());
        // A date answer is grounded in the turn's date.
        assert!(run(Kind::Date, &[1], "When did Ben say when the ferry leaves?", "8 May 2023", &["t2"], &[]).is_ok());
    }

    #[test]
    fn each_check_rejects_its_bad_probe() {
        let fact = |q: &str, a: &str, e: &[&str]| run(Kind::Fact, &[0], q, a, e, &[]).unwrap_err();
        assert_eq!(fact("What is Ana's cat called?", "Pixel", &["t9"]), Reason::UnknownEvidence);
        assert_eq!(fact("What is Ana's cat called?", "Pixel", &[]), Reason::UnknownEvidence);
        assert_eq!(fact("Did Ana adopt a cat?", "no", &["t1"]), Reason::NoContentWords);
        assert_eq!(
            fact(
                "What did Ana find?",
                "On my trip I adopted a grey cat called Pixel from the shelter in Porto",
                &["t1"]
            ),
            Reason::AnswerTooLong
        );
        assert_eq!(fact("What is Ana's cat called?", "Mochi", &["t1"]), Reason::AnswerNotInEvidence);
        assert_eq!(fact("Is Ana's cat called Pixel?", "Pixel", &["t1"]), Reason::QuestionHoldsAnswer);
        assert_eq!(
            run(Kind::Update, &[0, 2], "Where does Ana's cat sleep?", "Pixel", &["t3"], &[]).unwrap_err(),
            Reason::Unchanged
        );
        assert_eq!(
            run(Kind::MultiDay, &[0, 2], "Which city did Ana move to?", "Lisbon", &["t1", "t3"], &[]).unwrap_err(),
            Reason::OneTurnSuffices
        );
        assert_eq!(fact("When is the festival now?", "July", &["t5"]), Reason::AnswerableFromRecent);
        // Grounded in an old turn, but the newest turn says it all.
        assert_eq!(fact("Who is Ana's sister?", "Marta", &["t4"]), Reason::AnswerableFromRecent);
        let first = run(Kind::Fact, &[0], "What is the name of Ana's cat?", "Pixel", &["t1"], &[]).unwrap();
        assert_eq!(
            run(
                Kind::Fact,
                &[0],
                "What is the name of the cat Ana has?",
                "a grey cat",
                &["t1"],
                std::slice::from_ref(&first)
            )
            .unwrap_err(),
            Reason::NearDuplicate
        );
        assert_eq!(
            run(Kind::Fact, &[0], "Which pet came from the shelter in Porto?", "Pixel", &["t1"], &[first]).unwrap_err(),
            Reason::NearDuplicate
        );
    }
}
