//! Tests of answer scoring against hand-computed cases, of the judge's verdicts, and of the
//! answer cache across runs.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use strata_core::{
    Context, Conversation, GenerateError, GenerateRequest, Generation, Generator, History, Probe, Role, Strategy,
    StrategyError, Turn,
};

use super::{ask, verdict, Question, Reader};
use crate::metrics::{answer_f1, bleu1, locomo_normalize, token_f1};
use crate::retention::{score_conversation, Sweep};
use crate::Mode;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn f1_and_bleu1_match_hand_computed_examples() {
    // LoCoMo's normalisation: commas, punctuation, "a", "an", "the" and "and" go.
    assert_eq!(locomo_normalize("The cat, and a dog!"), "cat dog");
    assert_eq!(locomo_normalize("An apple... for Mel's mom"), "apple for mels mom");
    // "in may 2023" against "may 2023": 2 of 3 predicted words right, both gold words found.
    assert!(close(token_f1("in May 2023", "May 2023"), 0.8));
    // Stems: "painting" and "paints" are both "paint".
    assert!(close(token_f1("Painting.", "paints"), 1.0));
    assert!(close(token_f1("yes", "no"), 0.0));
    assert!(close(token_f1("", "no"), 0.0));
    // Words count with their multiplicity: "paris paris" against "paris": P 1/2, R 1.
    assert!(close(token_f1("Paris Paris", "Paris"), 2.0 / 3.0));
    // Multi-hop: each gold part by its best predicted part, then the mean: 1, 0, 1.
    assert!(close(answer_f1("hiking, pottery", "pottery, camping, hiking", "multi-hop"), 2.0 / 3.0));
    // Open-domain: the gold answer up to its first `;`.
    assert!(close(answer_f1("Likely yes", "Likely yes; she said so", "open-domain"), 1.0));
    assert!(close(
        answer_f1("Likely yes", "Likely yes; she said so", "single-hop"),
        2.0 * (2.0 / 2.0 * 2.0 / 5.0) / (1.0 + 2.0 / 5.0)
    ));
    // BLEU-1: clipped unigram precision times the brevity penalty.
    assert!(close(bleu1("the cat sat on the mat", "the cat is on the mat"), 5.0 / 6.0));
    assert!(close(bleu1("cat", "the cat sat"), (-2.0f64).exp()), "one word of three: exp(1 - 3/1)");
    // Punctuation is a token: [may, 7, ",", 2023] against [7, may, 2023].
    assert!(close(bleu1("May 7, 2023", "7 May 2023"), 0.75));
    assert!(close(bleu1("the the the", "the cat"), 1.0 / 3.0 * 1.0), "clipped to the reference's count");
    assert!(close(bleu1("dog", "the cat"), 0.0));
    assert!(close(bleu1("", "the cat"), 0.0));
}

#[test]
fn a_judge_that_says_neither_is_an_error() {
    assert_eq!(verdict(r#"{"label": "CORRECT"}"#), Some(true));
    assert_eq!(verdict("It names the same city.\n```json\n{\"label\": \"WRONG\"}\n```"), Some(false));
    assert_eq!(verdict("Same topic as the gold answer. CORRECT"), Some(true));
    assert_eq!(verdict("WRONG."), Some(false));
    for garbage in [
        "",
        "I cannot decide.",
        "CORRECT or WRONG",
        "The answer is INCORRECT",
        "correct",
        r#"{"label": "maybe"}"#,
        r#"{"verdict": "CORRECT", "label": "right"}"#,
    ] {
        assert_eq!(verdict(garbage), None, "{garbage:?}");
    }
}

/// Answers with the question's last word, and counts its calls.
struct Echo {
    calls: AtomicUsize,
    id: &'static str,
    reply: Option<&'static str>,
}

impl Echo {
    fn new(id: &'static str, reply: Option<&'static str>) -> Echo {
        Echo { calls: AtomicUsize::new(0), id, reply }
    }
}

impl Generator for Echo {
    fn model_id(&self) -> &str {
        self.id
    }
    fn generate(&self, r: &GenerateRequest) -> Result<Generation, GenerateError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let last = &r.messages.last().unwrap().content;
        let text = match self.reply {
            Some(reply) => reply.to_string(),
            None => {
                let q = last.rsplit("Question: ").next().unwrap();
                let q = q.trim_end_matches("\nShort answer:").trim_end_matches('?');
                if q.contains("silent") {
                    String::new()
                } else {
                    format!("number {}", q.rsplit(' ').next().unwrap())
                }
            }
        };
        Ok(Generation { text, prompt_tokens: 10, generated_tokens: 2, reused_tokens: 0 })
    }
}

/// Sends every turn.
struct Everything;

impl Strategy for Everything {
    fn name(&self) -> &str {
        "everything"
    }
    fn build(&self, history: &History, budget: usize, _: Option<&str>) -> Result<Context, StrategyError> {
        let mut ctx = Context::new("everything", budget, history.counter());
        strata_strategies::select::push_verbatim(history, &mut ctx, &(0..history.len()).collect::<Vec<_>>());
        Ok(ctx)
    }
}

fn questions() -> Vec<Question> {
    let probe = |id: &str, question: &str, answer: &str| Probe {
        id: id.into(),
        question: question.into(),
        answer: answer.into(),
        evidence: vec!["t4".into()],
        after: Some("t4".into()),
        category: Some("single-hop".into()),
        adversarial_answer: None,
    };
    let conversation = Conversation {
        id: "c".into(),
        turns: (1..=4).map(|i| Turn::new(format!("t{i}"), Role::User, format!("message number {i}"))).collect(),
        probes: vec![
            probe("q1", "Which number 4?", "number 4"),
            probe("q2", "Which number 3?", "number 4"),
            probe("q3", "Which silent?", "number 4"),
            probe("q4", "Not asked 1?", "1"),
        ],
        ..Conversation::default()
    };
    let strategies: Vec<Arc<dyn Strategy>> = vec![Arc::new(Everything)];
    let asked: BTreeSet<(usize, usize)> = [(0, 0), (0, 1), (0, 2)].into();
    let plan = Sweep {
        dataset: "d",
        strategies: &strategies,
        budgets: &[1000],
        modes: &[Mode::Agnostic],
        counter: Arc::new(strata_tokens::Tiktoken::o200k()),
        save_contexts: false,
        ask: Some(&asked),
    };
    let records = score_conversation(&plan, 0, &conversation).unwrap();
    assert_eq!(records.probes.len(), 4, "every probe is scored for retention");
    records.questions
}

#[test]
fn answers_are_scored_failures_counted_and_the_judge_read() {
    let mut qs = questions();
    assert_eq!(qs.len(), 3, "only the sampled probes are put to the reader");
    assert!(Arc::ptr_eq(&qs[0].context, &qs[1].context), "agnostic questions share one context");
    let reader = Reader {
        reader: Arc::new(Echo::new("echo", None)),
        judge: Some(Arc::new(Echo::new("judge", Some("Hmm, hard to say.")))),
        deadline: None,
    };
    let answers = ask(&mut qs, &reader, &|| {});
    let by = |p: &str| answers.iter().find(|a| a.probe == p).unwrap();
    assert_eq!(by("q1").answer, "number 4");
    assert!(close(by("q1").f1, 1.0) && close(by("q1").bleu1, 1.0));
    assert!(close(by("q2").f1, 0.5), "`number` right, `3` wrong");
    assert_eq!(by("q3").failure.as_deref(), Some("empty answer"));
    assert_eq!((by("q3").f1, by("q3").judgement.is_none()), (0.0, true), "a failure scores 0 and is not judged");
    assert_eq!(by("q1").judgement.as_ref().unwrap().correct, None);
    let runs = super::aggregate(&answers, &["d".into()], &["everything".into()]);
    assert_eq!(runs.len(), 1);
    let s = &runs[0].scores;
    assert_eq!((s.questions, s.failures, s.judge_errors), (3, 1, 2));
    assert_eq!(s.judge, Some(0.0), "a garbage verdict is never a pass");
    assert!(close(s.f1, 0.5));
    assert!(runs[0].context_tokens > 10.0);
}

#[test]
fn a_rerun_answers_from_the_cache_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        let echo = Arc::new(strata_models::CachedGenerator::open(Echo::new("echo", None), dir.path()).unwrap());
        let reader = Reader { reader: echo.clone(), judge: None, deadline: None };
        let answers = ask(&mut questions(), &reader, &|| {});
        (answers, echo.inner().calls.load(Ordering::SeqCst))
    };
    let (first, calls) = run();
    assert_eq!(calls, 3);
    let (second, calls) = run();
    // An empty answer is what the model said: kept like the others (an error would not be).
    assert_eq!(calls, 0, "no question is asked again");
    let strip = |a: &[super::AnswerRecord]| {
        a.iter().map(|r| super::AnswerRecord { reader_ms: 0.0, ..r.clone() }).collect::<Vec<_>>()
    };
    assert_eq!(strip(&first), strip(&second), "the same numbers");
}
