//! Retention scoring: for every probe, build each strategy's context as the conversation stood
//! when the probe was asked, and check what of the answer survived.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use strata_core::{Context, Conversation, History, Probe, Strategy, TokenCounter};

use crate::answers::Question;
use crate::metrics::ScoredText;
use crate::{Mode, Records};

/// One probe scored against one context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    pub dataset: String,
    pub conversation_index: usize,
    pub conversation: String,
    pub probe_index: usize,
    pub probe: String,
    pub category: String,
    /// A question the conversation cannot answer (LoCoMo's adversarial category).
    pub abstention: bool,
    pub strategy: String,
    pub budget: usize,
    pub mode: Mode,
    pub has_evidence: bool,
    /// Every evidence turn is in the context verbatim.
    pub evidence_hit: bool,
    /// The share of evidence turns in the context verbatim.
    pub evidence_partial: f64,
    pub answer_hit: bool,
    pub answer_token_recall: f64,
    /// For abstention probes: the tempting wrong answer is in the context.
    pub adversarial_hit: bool,
}

/// One context build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    pub dataset: String,
    pub conversation_index: usize,
    /// The number of turns the history held.
    pub position: usize,
    /// The probe it was built for, in question-aware mode; empty when shared by all probes at
    /// this position.
    pub probe: String,
    pub strategy: String,
    pub budget: usize,
    pub mode: Mode,
    pub context_tokens: usize,
    pub history_tokens: usize,
    pub build_ms: f64,
    pub summarizer_calls: usize,
    pub generated_tokens: usize,
}

/// What to run on each conversation.
pub struct Sweep<'a> {
    pub dataset: &'a str,
    pub strategies: &'a [Arc<dyn Strategy>],
    pub budgets: &'a [usize],
    pub modes: &'a [Mode],
    pub counter: Arc<dyn TokenCounter>,
    /// Keep every context built, beside its build record (`--save-contexts`).
    pub save_contexts: bool,
    /// The probes (conversation index, probe index) a reader will answer: their contexts are
    /// kept as [`Question`]s.
    pub ask: Option<&'a BTreeSet<(usize, usize)>>,
}

/// A context the harness built and scored, as `--save-contexts` writes it to `contexts.jsonl`:
/// what `strata compress --at AFTER --question PROBE'S QUESTION` rebuilds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextRecord {
    pub dataset: String,
    pub conversation_index: usize,
    pub conversation: String,
    /// The id of the newest turn of the history it was built from.
    pub after: String,
    /// The probe it was built for; empty when shared by all probes at this position.
    pub probe: String,
    pub strategy: String,
    pub budget: usize,
    pub mode: Mode,
    pub context: Context,
}

impl std::fmt::Debug for Sweep<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sweep").field("dataset", &self.dataset).field("budgets", &self.budgets).finish()
    }
}

/// A built context, prepared for scoring.
struct Scored {
    verbatim: BTreeSet<String>,
    text: ScoredText,
}

impl Scored {
    fn new(ctx: &Context) -> Scored {
        Scored { verbatim: ctx.verbatim_ids().map(str::to_string).collect(), text: ScoredText::new(&ctx.render_text()) }
    }
}

fn probe_category(p: &Probe) -> String {
    p.category.clone().unwrap_or_else(|| "uncategorized".to_string())
}

/// LoCoMo's adversarial questions: the right answer is that the conversation does not say.
pub(crate) fn is_abstention(p: &Probe) -> bool {
    p.adversarial_answer.is_some()
}

/// Scores every probe of one conversation under every strategy, budget and mode.
///
/// Probes are grouped by the turn they are asked after; the history grows turn by turn to each
/// position in order, so a conversation is tokenised once whatever its number of probes. In
/// question-agnostic mode one context serves every probe at a position.
pub fn score_conversation(plan: &Sweep<'_>, index: usize, conversation: &Conversation) -> Result<Records> {
    let mut probes_at: Vec<(usize, usize)> = Vec::new();
    for (pi, p) in conversation.probes.iter().enumerate() {
        let pos = match &p.after {
            Some(after) => conversation
                .position(after)
                .with_context(|| format!("transcript {}: probe {}: no turn `{after}`", conversation.id, p.id))?,
            None => conversation.turns.len().saturating_sub(1),
        };
        probes_at.push((pos, pi));
    }
    probes_at.sort();
    let mut records = Vec::new();
    let mut builds = Vec::new();
    let mut contexts = Vec::new();
    let mut questions = Vec::new();
    let asked = |pi: usize| plan.ask.is_some_and(|a| a.contains(&(index, pi)));
    let mut history = History::new(&conversation.id, plan.counter.clone());
    let mut k = 0;
    while k < probes_at.len() {
        let pos = probes_at[k].0;
        let group: Vec<usize> = probes_at[k..].iter().take_while(|(p, _)| *p == pos).map(|(_, pi)| *pi).collect();
        k += group.len();
        while history.len() <= pos && history.len() < conversation.turns.len() {
            history.push(conversation.turns[history.len()].clone())?;
        }
        for strategy in plan.strategies {
            for &budget in plan.budgets {
                let timed = |question: Option<&str>| -> Result<(Context, f64)> {
                    let start = Instant::now();
                    let ctx = strategy
                        .build(&history, budget, question)
                        .with_context(|| format!("transcript {}: strategy {}", conversation.id, strategy.name()))?;
                    let ms = start.elapsed().as_secs_f64() * 1e3;
                    // Every bounded strategy is held to its budget here, built-in or not: a
                    // context over it would score retention it could never be sent with.
                    let after = || {
                        format!(
                            "transcript {}: after turn {}",
                            conversation.id,
                            history.turns().last().map_or("(none)", |t| t.id.as_str())
                        )
                    };
                    if strategy.bounded() {
                        ctx.check_budget().with_context(after)?;
                    }
                    // Nor may a context quote a turn twice: it would pay twice for one turn.
                    if let Some(id) = ctx.repeated_turn() {
                        anyhow::bail!("{}: strategy {} quotes turn {id} twice", after(), strategy.name());
                    }
                    Ok((ctx, ms))
                };
                let build_record = |mode: Mode, probe: &str, ctx: &Context, ms: f64| BuildRecord {
                    dataset: plan.dataset.to_string(),
                    conversation_index: index,
                    position: history.len(),
                    probe: probe.to_string(),
                    strategy: strategy.name().to_string(),
                    budget,
                    mode,
                    context_tokens: ctx.total_tokens(),
                    history_tokens: history.full_context_tokens(),
                    build_ms: ms,
                    summarizer_calls: 0,
                    generated_tokens: 0,
                };
                let context_record = |mode: Mode, probe: &str, ctx: &Context| ContextRecord {
                    dataset: plan.dataset.to_string(),
                    conversation_index: index,
                    conversation: conversation.id.clone(),
                    after: history.turns().last().map(|t| t.id.clone()).unwrap_or_default(),
                    probe: probe.to_string(),
                    strategy: strategy.name().to_string(),
                    budget,
                    mode,
                    context: ctx.clone(),
                };
                let question = |mode: Mode, pi: usize, context: &Arc<Context>| {
                    let probe = &conversation.probes[pi];
                    Question {
                        dataset: plan.dataset.to_string(),
                        conversation_index: index,
                        conversation: conversation.id.clone(),
                        probe_index: pi,
                        probe: probe.id.clone(),
                        category: probe_category(probe),
                        strategy: strategy.name().to_string(),
                        budget,
                        mode,
                        question: probe.question.clone(),
                        gold: probe.answer.clone(),
                        context: context.clone(),
                    }
                };
                let per_probe = |mode: Mode| mode == Mode::Aware && strategy.question_aware();
                // The question-less context only where a mode reads it: built and dropped, its
                // time would go unrecorded, and a strategy that reads the conversation on its
                // first call (an LLM peer) would have its whole cost hidden there.
                let shared = if plan.modes.iter().any(|&m| !per_probe(m)) {
                    let (ctx, ms) = timed(None)?;
                    Some((Scored::new(&ctx), Arc::new(ctx), ms))
                } else {
                    None
                };
                for &mode in plan.modes {
                    let per_probe = per_probe(mode);
                    if let (false, Some((_, shared, ms))) = (per_probe, &shared) {
                        builds.push(build_record(mode, "", shared, *ms));
                        if plan.save_contexts {
                            contexts.push(context_record(mode, "", shared));
                        }
                    }
                    for &pi in &group {
                        let probe = &conversation.probes[pi];
                        let own;
                        // `shared` is there for every mode that is not per probe.
                        let scored = match (per_probe, &shared) {
                            (false, Some((scored, shared, _))) => {
                                if asked(pi) {
                                    questions.push(question(mode, pi, shared));
                                }
                                scored
                            }
                            _ => {
                                let (ctx, ms) = timed(Some(&probe.question))?;
                                builds.push(build_record(mode, &probe.id, &ctx, ms));
                                if plan.save_contexts {
                                    contexts.push(context_record(mode, &probe.id, &ctx));
                                }
                                own = Scored::new(&ctx);
                                if asked(pi) {
                                    questions.push(question(mode, pi, &Arc::new(ctx)));
                                }
                                &own
                            }
                        };
                        records.push(score(
                            plan,
                            index,
                            conversation,
                            pi,
                            probe,
                            strategy.name(),
                            budget,
                            mode,
                            scored,
                        ));
                    }
                }
            }
        }
    }
    Ok(Records { probes: records, builds, contexts, questions, ..Records::default() })
}

#[allow(clippy::too_many_arguments)]
fn score(
    plan: &Sweep<'_>,
    index: usize,
    conversation: &Conversation,
    probe_index: usize,
    probe: &Probe,
    strategy: &str,
    budget: usize,
    mode: Mode,
    scored: &Scored,
) -> ProbeRecord {
    let present = probe.evidence.iter().filter(|e| scored.verbatim.contains(*e)).count();
    let has_evidence = !probe.evidence.is_empty();
    ProbeRecord {
        dataset: plan.dataset.to_string(),
        conversation_index: index,
        conversation: conversation.id.clone(),
        probe_index,
        probe: probe.id.clone(),
        category: probe_category(probe),
        abstention: is_abstention(probe),
        strategy: strategy.to_string(),
        budget,
        mode,
        has_evidence,
        evidence_hit: has_evidence && present == probe.evidence.len(),
        evidence_partial: if has_evidence { present as f64 / probe.evidence.len() as f64 } else { 0.0 },
        answer_hit: scored.text.contains_answer(&probe.answer),
        answer_token_recall: scored.text.answer_token_recall(&probe.answer),
        adversarial_hit: probe.adversarial_answer.as_deref().is_some_and(|a| scored.text.contains_answer(a)),
    }
}
