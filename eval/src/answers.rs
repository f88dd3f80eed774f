//! Answers, not only evidence: a reader model is asked each sampled question over each context
//! the run built, its answer scored against the gold one (LoCoMo's token F1, BLEU-1) and, with
//! a judge, judged CORRECT or WRONG with the Mem0 evaluation's prompt.
//!
//! The prompt keeps the question after the context, so questions that share a context (the
//! question-agnostic mode, `full`) share the prompt's beginning, and a reader that keeps its
//! cache (our engine; llama.cpp's server) runs only what differs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use strata_core::{ChatMessage, Context, GenerateRequest, Generator, Role};

use crate::metrics::{answer_f1, bleu1};
use crate::Mode;

/// The reader's system message.
pub const READER_SYSTEM: &str = "You answer questions about a conversation, from what the conversation says.";

/// The reader's instruction, sent after the context with the question: LoCoMo's QA prompt
/// (`task_eval/gpt_utils.py`), with its advice for temporal questions folded in.
pub const READER_INSTRUCTION: &str = "Based on the conversation above, write an answer in the form of a short phrase \
     for the following question. Answer with exact words from the conversation whenever possible. If the question \
     asks when something happened, answer with a date, worked out from the dates in the conversation.";

/// The most tokens a reader may answer with: a short phrase.
pub const ANSWER_TOKENS: usize = 32;

/// The most tokens a judge may write: a sentence of reasoning and the label.
pub const JUDGE_TOKENS: usize = 96;

/// The judge's prompt: `ACCURACY_PROMPT` of the Mem0 evaluation (github.com/mem0ai/mem0,
/// `evaluation/metrics/llm_judge.py`, Apache-2.0), as its papers' "J" uses it with
/// gpt-4o-mini; `{question}`, `{gold_answer}` and `{generated_answer}` are filled in.
pub const JUDGE_PROMPT: &str = "
Your task is to label an answer to a question as ’CORRECT’ or ’WRONG’. You will be given the following data:
    (1) a question (posed by one user to another user), 
    (2) a ’gold’ (ground truth) answer, 
    (3) a generated answer
which you will score as CORRECT/WRONG.

The point of the question is to ask about something one user should know about the other user based on their prior conversations.
The gold answer will usually be a concise and short answer that includes the referenced topic, for example:
Question: Do you remember what I got the last time I went to Hawaii?
Gold answer: A shell necklace
The generated answer might be much longer, but you should be generous with your grading - as long as it touches on the same topic as the gold answer, it should be counted as CORRECT. 

For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer might be much longer or use relative time references (like \"last Tuesday\" or \"next month\"), but you should be generous with your grading - as long as it refers to the same date or time period as the gold answer, it should be counted as CORRECT. Even if the format differs (e.g., \"May 7th\" vs \"7 May\"), consider it CORRECT if it's the same date.

Now it’s time for the real question:
Question: {question}
Gold answer: {gold_answer}
Generated answer: {generated_answer}

First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG. 
Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation script.

Just return the label CORRECT or WRONG in a json format with the key as \"label\".
";

/// What `results.json` records of the prompts a run used, so that numbers from two prompts are
/// never compared unknowingly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompts {
    pub reader_system: String,
    pub reader_instruction: String,
    pub answer_tokens: usize,
    /// Empty without a judge.
    #[serde(default)]
    pub judge: String,
}

impl Prompts {
    pub fn current(judge: bool) -> Prompts {
        Prompts {
            reader_system: READER_SYSTEM.to_string(),
            reader_instruction: READER_INSTRUCTION.to_string(),
            answer_tokens: ANSWER_TOKENS,
            judge: if judge { JUDGE_PROMPT.to_string() } else { String::new() },
        }
    }
}

/// One question to put to the reader over one context.
#[derive(Debug, Clone)]
pub struct Question {
    pub dataset: String,
    pub conversation_index: usize,
    pub conversation: String,
    pub probe_index: usize,
    pub probe: String,
    pub category: String,
    pub strategy: String,
    pub budget: usize,
    pub mode: Mode,
    pub question: String,
    pub gold: String,
    /// Shared by every question asked over it.
    pub context: Arc<Context>,
}

impl Question {
    /// The canonical order: questions over one context follow each other, so a reader that
    /// keeps its cache reuses it.
    fn key(&self) -> (&str, &str, usize, Mode, usize, usize) {
        (&self.dataset, &self.strategy, self.budget, self.mode, self.conversation_index, self.probe_index)
    }
}

/// A judge's reading of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// CORRECT or WRONG; `None` when the judge said neither (or both), or failed: an error,
    /// never a pass.
    pub correct: Option<bool>,
    /// What the judge wrote, or why it failed.
    pub reply: String,
}

/// One answer, scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerRecord {
    pub dataset: String,
    pub conversation_index: usize,
    pub conversation: String,
    pub probe_index: usize,
    pub probe: String,
    pub category: String,
    pub strategy: String,
    pub budget: usize,
    pub mode: Mode,
    pub question: String,
    pub gold: String,
    pub answer: String,
    /// Why there is no answer (the reader timed out, failed, or answered nothing); such an
    /// answer scores 0 and is counted in `failures`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    pub f1: f64,
    pub bleu1: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judgement: Option<Judgement>,
    /// The context's tokens as the run counts them (its tokenizer).
    pub context_tokens: usize,
    /// The whole prompt in the reader's own tokens, as it reported them.
    pub prompt_tokens: usize,
    /// Of those, the ones it did not run again (its cache held them).
    pub reused_tokens: usize,
    /// Time spent on the reader's answer (near 0 when it came from the answer cache).
    pub reader_ms: f64,
}

/// The reader and, optionally, the judge.
#[derive(Clone)]
pub struct Reader {
    pub reader: Arc<dyn Generator>,
    pub judge: Option<Arc<dyn Generator>>,
    /// Give up on one answer or judgement after this long (an endpoint that hangs); `None`
    /// waits.
    pub deadline: Option<Duration>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("reader", &self.reader.model_id())
            .field("judge", &self.judge.as_ref().map(|j| j.model_id().to_string()))
            .finish()
    }
}

/// The messages the reader gets: the system message, the context's messages as they are (a
/// speaker's name before their words), then the instruction and the question.
pub fn reader_messages(context: &Context, question: &str) -> Vec<ChatMessage> {
    let mut messages = vec![ChatMessage { role: Role::System, content: READER_SYSTEM.to_string() }];
    for m in context.messages() {
        let mut content = match &m.name {
            Some(name) => format!("{name}: {}", m.content),
            None => m.content,
        };
        for call in &m.tool_calls {
            content.push_str(&format!("\n[tool call {} {}({})]", call.id, call.name, call.arguments));
        }
        messages.push(ChatMessage { role: m.role, content });
    }
    messages.push(ChatMessage {
        role: Role::User,
        content: format!("{READER_INSTRUCTION}\n\nQuestion: {question}\nShort answer:"),
    });
    messages
}

/// The judge's one message.
pub fn judge_message(question: &str, gold: &str, answer: &str) -> ChatMessage {
    let content = JUDGE_PROMPT
        .replace("{question}", question)
        .replace("{gold_answer}", gold)
        .replace("{generated_answer}", answer);
    ChatMessage { role: Role::User, content }
}

/// Reads a judge's reply: the `label` of a JSON object in it, else the one of the words CORRECT
/// and WRONG (in capitals, as the prompt asks) that it contains. Neither, both, or another
/// label: `None`.
pub fn verdict(reply: &str) -> Option<bool> {
    let label = |l: &str| match l.trim().to_uppercase().as_str() {
        "CORRECT" => Some(true),
        "WRONG" => Some(false),
        _ => None,
    };
    if let (Some(a), Some(b)) = (reply.find('{'), reply.rfind('}')) {
        if a < b {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&reply[a..=b]) {
                if let Some(l) = v.get("label").and_then(serde_json::Value::as_str) {
                    return label(l);
                }
            }
        }
    }
    let words: Vec<&str> = reply.split(|c: char| !c.is_alphanumeric()).collect();
    match (words.contains(&"CORRECT"), words.contains(&"WRONG")) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

/// Asks every question, in the canonical order, and scores the answers. `on_answer` is called
/// after each (a progress bar).
pub fn ask(questions: &mut [Question], reader: &Reader, on_answer: &dyn Fn()) -> Vec<AnswerRecord> {
    questions.sort_by(|a, b| a.key().cmp(&b.key()));
    questions
        .iter()
        .map(|q| {
            let record = answer_one(q, reader);
            on_answer();
            record
        })
        .collect()
}

fn answer_one(q: &Question, reader: &Reader) -> AnswerRecord {
    let request = GenerateRequest {
        messages: reader_messages(&q.context, &q.question),
        max_tokens: ANSWER_TOKENS,
        deadline: reader.deadline,
    };
    let start = Instant::now();
    let result = reader.reader.generate(&request);
    let reader_ms = start.elapsed().as_secs_f64() * 1e3;
    let (answer, failure, prompt_tokens, reused_tokens) = match result {
        Ok(g) => {
            let answer = g.text.trim().to_string();
            let failure = answer.is_empty().then(|| "empty answer".to_string());
            (answer, failure, g.prompt_tokens, g.reused_tokens)
        }
        Err(e) => (String::new(), Some(e.to_string()), 0, 0),
    };
    let judgement = reader.judge.as_ref().filter(|_| failure.is_none()).map(|judge| {
        let request = GenerateRequest {
            messages: vec![judge_message(&q.question, &q.gold, &answer)],
            max_tokens: JUDGE_TOKENS,
            deadline: reader.deadline,
        };
        match judge.generate(&request) {
            Ok(g) => Judgement { correct: verdict(&g.text), reply: g.text },
            Err(e) => Judgement { correct: None, reply: e.to_string() },
        }
    });
    let scored = failure.is_none();
    AnswerRecord {
        dataset: q.dataset.clone(),
        conversation_index: q.conversation_index,
        conversation: q.conversation.clone(),
        probe_index: q.probe_index,
        probe: q.probe.clone(),
        category: q.category.clone(),
        strategy: q.strategy.clone(),
        budget: q.budget,
        mode: q.mode,
        question: q.question.clone(),
        gold: q.gold.clone(),
        f1: if scored { answer_f1(&answer, &q.gold, &q.category) } else { 0.0 },
        bleu1: if scored { bleu1(&answer, &q.gold) } else { 0.0 },
        answer,
        failure,
        judgement,
        context_tokens: q.context.total_tokens(),
        prompt_tokens,
        reused_tokens,
        reader_ms,
    }
}

/// Scores of one group of answers (a strategy, budget and mode; or one category of them).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AnswerScores {
    pub questions: usize,
    /// LoCoMo's token F1, mean over the questions.
    pub f1: f64,
    pub bleu1: f64,
    /// The share the judge called CORRECT (errors and failures count as not correct); `None`
    /// without a judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<f64>,
    /// Judgements that were neither CORRECT nor WRONG.
    pub judge_errors: usize,
    /// Questions without an answer (the reader failed, timed out, or answered nothing).
    pub failures: usize,
}

impl AnswerScores {
    fn of(records: &[&AnswerRecord]) -> AnswerScores {
        let n = records.len();
        let mean = |f: &dyn Fn(&AnswerRecord) -> f64| {
            if n == 0 {
                0.0
            } else {
                records.iter().map(|r| f(r)).sum::<f64>() / n as f64
            }
        };
        let judged: Vec<&Judgement> = records.iter().filter_map(|r| r.judgement.as_ref()).collect();
        let judging = records.iter().any(|r| r.judgement.is_some());
        AnswerScores {
            questions: n,
            f1: mean(&|r| r.f1),
            bleu1: mean(&|r| r.bleu1),
            judge: judging
                .then(|| mean(&|r| f64::from(u8::from(r.judgement.as_ref().is_some_and(|j| j.correct == Some(true)))))),
            judge_errors: judged.iter().filter(|j| j.correct.is_none()).count(),
            failures: records.iter().filter(|r| r.failure.is_some()).count(),
        }
    }
}

/// A reader's answers over one strategy, budget and mode of one dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerRun {
    pub dataset: String,
    pub strategy: String,
    pub budget: usize,
    pub mode: Mode,
    #[serde(flatten)]
    pub scores: AnswerScores,
    /// Mean context tokens per question (the run's tokenizer), as the published tables give.
    pub context_tokens: f64,
    /// Mean prompt tokens per question in the reader's tokens, and how many of them it reused.
    pub prompt_tokens: f64,
    pub reused_tokens: f64,
    /// Mean seconds the reader took per question in this run (near 0 from the answer cache).
    pub reader_seconds: f64,
    pub categories: BTreeMap<String, AnswerScores>,
}

/// Aggregates answers into runs, in the order of `datasets` and `strategies`, then by budget
/// and mode.
pub fn aggregate(records: &[AnswerRecord], datasets: &[String], strategies: &[String]) -> Vec<AnswerRun> {
    let mut groups: BTreeMap<(usize, usize, usize, Mode), Vec<&AnswerRecord>> = BTreeMap::new();
    for r in records {
        let d = datasets.iter().position(|d| d == &r.dataset).unwrap_or(usize::MAX);
        let s = strategies.iter().position(|s| s == &r.strategy).unwrap_or(usize::MAX);
        groups.entry((d, s, r.budget, r.mode)).or_default().push(r);
    }
    groups
        .into_values()
        .map(|rs| {
            let n = rs.len() as f64;
            let mut by_category: BTreeMap<String, Vec<&AnswerRecord>> = BTreeMap::new();
            for r in &rs {
                by_category.entry(r.category.clone()).or_default().push(r);
            }
            AnswerRun {
                dataset: rs[0].dataset.clone(),
                strategy: rs[0].strategy.clone(),
                budget: rs[0].budget,
                mode: rs[0].mode,
                scores: AnswerScores::of(&rs),
                context_tokens: rs.iter().map(|r| r.context_tokens as f64).sum::<f64>() / n,
                prompt_tokens: rs.iter().map(|r| r.prompt_tokens as f64).sum::<f64>() / n,
                reused_tokens: rs.iter().map(|r| r.reused_tokens as f64).sum::<f64>() / n,
                reader_seconds: rs.iter().map(|r| r.reader_ms).sum::<f64>() / n / 1e3,
                categories: by_category.into_iter().map(|(c, v)| (c, AnswerScores::of(&v))).collect(),
            }
        })
        .collect()
}

/// The markdown table of a run's answers: one row per strategy, budget and mode, F1 and BLEU-1
/// per category beside the overall ones.
pub fn markdown(runs: &[AnswerRun]) -> String {
    if runs.is_empty() {
        return String::new();
    }
    let mut categories: Vec<&String> = runs.iter().flat_map(|r| r.categories.keys()).collect();
    categories.sort();
    categories.dedup();
    let judged = runs.iter().any(|r| r.scores.judge.is_some());
    let mut out = String::from("## Reader answers\n\n| dataset | strategy | budget | mode | questions | F1 | BLEU-1 |");
    if judged {
        out.push_str(" judge | judge errors |");
    }
    for c in &categories {
        out.push_str(&format!(" F1 {c} |"));
    }
    out.push_str(" failures | context tokens | prompt tokens (reused) | s / question |\n|");
    let columns = 10 + usize::from(judged) * 2 + categories.len();
    out.push_str(&" --- |".repeat(columns));
    out.push('\n');
    for r in runs {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.3} | {:.3} |",
            r.dataset,
            r.strategy,
            r.budget,
            r.mode.as_str(),
            r.scores.questions,
            r.scores.f1,
            r.scores.bleu1
        ));
        if judged {
            let j = r.scores.judge.map_or("-".to_string(), |j| format!("{j:.3}"));
            out.push_str(&format!(" {j} | {} |", r.scores.judge_errors));
        }
        for c in &categories {
            let f = r.categories.get(*c).map_or("-".to_string(), |s| format!("{:.3}", s.f1));
            out.push_str(&format!(" {f} |"));
        }
        out.push_str(&format!(
            " {} | {:.0} | {:.0} ({:.0}) | {:.1} |\n",
            r.scores.failures, r.context_tokens, r.prompt_tokens, r.reused_tokens, r.reader_seconds
        ));
    }
    out
}

/// What the answer table's columns mean.
pub const LEGEND: &str = "answers: F1 is LoCoMo's token F1 (normalised, Porter-stemmed; multi-hop answers per \
     comma-separated part), BLEU-1 as the Mem0 evaluation computes it, judge the share a judge model called \
     CORRECT with the Mem0 prompt (errors count as not correct); failures are questions the reader did not \
     answer (scored 0); tokens are means per question.";

#[cfg(test)]
mod tests;
