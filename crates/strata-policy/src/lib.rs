//! The tier policy: a pure function from (conversation state, config, now) to a plan saying
//! which turns stay hot, which are compressed to warm or cool, and which are archived cold.
//!
//! Nothing here reads a clock, a file or a model: "now" and the topic boundaries (found by
//! `strata-topic` with an embedder) are inputs, so the same state always gives the same plan,
//! and a test can replay a week of conversation in a millisecond. Every plan explains itself:
//! each trigger's score and weight, each guard that held, each turn that moved and why.
//!
//! The state need not hold the whole conversation: a cold turn stays cold whatever the plan,
//! holds no tokens and moves nothing, so a caller may leave cold turns out (and say how many).
//! A plan then costs what the turns still in the context cost, however long the conversation.

mod signals;

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use strata_core::{Role, Tier, Timestamp};

pub use signals::{is_back_reference, is_debugging, is_task_completion, is_task_start};

/// How much of the context a tier may hold, and how old its turns may be.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TierLimit {
    /// Tokens the tier may occupy in the context (after compression).
    pub tokens: usize,
    /// Turns older than this (seconds) leave the tier.
    pub age_seconds: i64,
}

/// The seed's trigger weights.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    pub pressure: f32,
    pub age: f32,
    pub topic_shift: f32,
    pub task_completion: f32,
    pub checkpoint: f32,
}

impl Default for Weights {
    fn default() -> Weights {
        Weights { pressure: 0.4, age: 0.2, topic_shift: 0.25, task_completion: 0.1, checkpoint: 0.05 }
    }
}

/// How the triggers' combined score becomes a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Act when the weighted score exceeds the threshold or the context passes the hard limit.
    Weighted,
    /// The "2-hour rule": under 30 minutes almost never summarise (hard limit only); from 30
    /// minutes to 2 hours only at natural breakpoints (a topic shift or a finished task); past
    /// 2 hours aggressively; past 8 hours to cold.
    TwoHour,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    pub hot: TierLimit,
    pub warm: TierLimit,
    pub cool: TierLimit,
    pub weights: Weights,
    /// Act when the weighted score exceeds this.
    pub threshold: f32,
    /// The model's context window, in tokens; the limits below are fractions of it.
    pub window: usize,
    /// Below this share of the window nothing is compressed (a guard).
    pub soft_limit: f32,
    /// Past this share the policy acts whatever the guards say.
    pub hard_limit: f32,
    pub preset: Preset,
    /// Compression ratios of the warm and cool tiers (the seed's 3x and 10x).
    pub warm_ratio: usize,
    pub cool_ratio: usize,
    /// How many of the newest turns the guards and the task signals look at.
    pub recent_turns: usize,
}

impl Default for PolicyConfig {
    fn default() -> PolicyConfig {
        PolicyConfig {
            hot: TierLimit { tokens: 20_000, age_seconds: 30 * 60 },
            warm: TierLimit { tokens: 10_000, age_seconds: 2 * 3600 },
            cool: TierLimit { tokens: 5_000, age_seconds: 8 * 3600 },
            weights: Weights::default(),
            threshold: 0.5,
            // The tiers' own allowances (35k) plus room for the system prompt and the reply.
            window: 40_000,
            soft_limit: 0.5,
            hard_limit: 0.8,
            preset: Preset::Weighted,
            warm_ratio: 3,
            cool_ratio: 10,
            recent_turns: 6,
        }
    }
}

impl PolicyConfig {
    /// The defaults with the 2-hour rule deciding when to act.
    pub fn two_hour() -> PolicyConfig {
        PolicyConfig { preset: Preset::TwoHour, ..PolicyConfig::default() }
    }

    /// Scales the tier allowances to a context budget, keeping their 20:10:5 proportions and
    /// the window 8/7 of their sum.
    pub fn for_budget(budget: usize) -> PolicyConfig {
        let d = PolicyConfig::default();
        let total = d.hot.tokens + d.warm.tokens + d.cool.tokens;
        let scale = |n: usize| n * budget * 7 / 8 / total;
        PolicyConfig {
            hot: TierLimit { tokens: scale(d.hot.tokens), ..d.hot },
            warm: TierLimit { tokens: scale(d.warm.tokens), ..d.warm },
            cool: TierLimit { tokens: scale(d.cool.tokens), ..d.cool },
            window: budget,
            ..d
        }
    }
}

/// What the policy knows about one turn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnState<'a> {
    /// Its position in the conversation (topic starts are positions too).
    pub index: usize,
    pub id: &'a str,
    pub role: Role,
    pub content: &'a str,
    /// Tokens of the turn verbatim.
    pub tokens: usize,
    pub timestamp: Option<Timestamp>,
    /// The tier the previous plan put it in (`Hot` for turns no plan has seen).
    pub tier: Tier,
}

impl<'a> TurnState<'a> {
    /// Turn `index` of a conversation, `tokens` long verbatim, in `tier`.
    pub fn of(index: usize, turn: &'a strata_core::Turn, tokens: usize, tier: Tier) -> TurnState<'a> {
        TurnState {
            index,
            id: &turn.id,
            role: turn.role,
            content: &turn.content,
            tokens,
            timestamp: turn.timestamp,
            tier,
        }
    }
}

/// The conversation as the policy sees it.
#[derive(Debug, Clone, Default)]
pub struct State<'a> {
    /// The turns in conversation order: every turn that is not cold, the newest
    /// `recent_turns` whatever their tier, and any others the caller likes (the turn where the
    /// last topic starts, for the plan to name it). A turn left out must be cold.
    pub turns: Vec<TurnState<'a>>,
    /// How many cold turns were left out (for the plan's occupancy).
    pub left_out: usize,
    /// The first `pinned` turns (a system prompt) are kept verbatim by the caller: the plan
    /// counts them as hot and never moves them.
    pub pinned: usize,
    /// Positions of turns that start a new topic (from `strata-topic`), ascending. The plan
    /// reads the newest two, so a caller may pass just those.
    pub topic_starts: Vec<usize>,
    /// An explicit checkpoint was requested since the last plan.
    pub checkpoint: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    Pressure,
    Age,
    TopicShift,
    TaskCompletion,
    Checkpoint,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Pressure => "pressure",
            Trigger::Age => "age",
            Trigger::TopicShift => "topic-shift",
            Trigger::TaskCompletion => "task-completion",
            Trigger::Checkpoint => "checkpoint",
        }
    }
}

/// One trigger's contribution to the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriggerScore {
    pub trigger: Trigger,
    /// The trigger's own strength, 0 to 1.
    pub raw: f32,
    pub weight: f32,
    pub why: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuardKind {
    /// The context is under the soft limit: nothing needs to go.
    UnderSoftLimit,
    /// A task was started and not finished in the newest turns.
    OngoingTask,
    /// The newest turns keep pointing back ("as I mentioned earlier").
    BackReferences,
    /// A stack trace or error output in the newest turns: a debugging session.
    Debugging,
    /// The newest turns came in rapid back-and-forth.
    RapidExchange,
    /// The 2-hour rule: the oldest verbatim turn is under 30 minutes old.
    TooRecent,
    /// The 2-hour rule: between 30 minutes and 2 hours, and no natural breakpoint.
    NoBreakpoint,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Guard {
    pub kind: GuardKind,
    pub why: String,
}

/// A turn that changes tier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Move {
    /// Its position in the conversation.
    pub index: usize,
    pub id: String,
    pub from: Tier,
    pub to: Tier,
    pub why: String,
}

/// The policy's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// One tier per turn of the state, in order.
    pub tiers: Vec<Tier>,
    /// Cold turns the state left out.
    pub left_out: usize,
    pub act: bool,
    /// Sum of weight × raw over the triggers.
    pub score: f32,
    pub triggers: Vec<TriggerScore>,
    pub guards: Vec<Guard>,
    pub moves: Vec<Move>,
    /// Tokens the context holds under the previous tiers, and after this plan.
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// Why it acted or held, in one line.
    pub reason: String,
}

impl Plan {
    /// Turns per tier, hot to cold (the turns left out are cold).
    pub fn occupancy(&self) -> [usize; 4] {
        let mut o = Tier::occupancy(&self.tiers);
        o[3] += self.left_out;
        o
    }

    /// Every decision in words: the verdict, each trigger, each guard, each move.
    pub fn explain(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{}: {}", if self.act { "act" } else { "hold" }, self.reason);
        let _ = writeln!(s, "score {:.2} (tokens {} -> {})", self.score, self.tokens_before, self.tokens_after);
        for t in &self.triggers {
            let _ = writeln!(
                s,
                "  trigger {:<15} {:.2} x {:.2} = {:.2}  {}",
                t.trigger.as_str(),
                t.raw,
                t.weight,
                t.raw * t.weight,
                t.why
            );
        }
        for g in &self.guards {
            let _ = writeln!(s, "  guard {:?}: {}", g.kind, g.why);
        }
        for m in &self.moves {
            let _ = writeln!(s, "  move {} {:?} -> {:?}: {}", m.id, m.from, m.to, m.why);
        }
        let [h, w, c, d] = self.occupancy();
        let _ = writeln!(s, "tiers: hot {h}, warm {w}, cool {c}, cold {d}");
        s
    }
}

/// Tokens a turn occupies in the context in a tier.
pub fn tokens_in(tier: Tier, tokens: usize, config: &PolicyConfig) -> usize {
    match tier {
        Tier::Hot => tokens,
        Tier::Warm => tokens.div_ceil(config.warm_ratio.max(1)),
        Tier::Cool => tokens.div_ceil(config.cool_ratio.max(1)),
        Tier::Cold => 0,
    }
}

/// Decides the tiers. Pure: the same inputs always give the same plan.
pub fn plan(state: &State<'_>, config: &PolicyConfig, now: Timestamp) -> Plan {
    let turns = &state.turns;
    let pinned = state.pinned.min(turns.len());
    let current: Vec<Tier> =
        turns.iter().enumerate().map(|(i, t)| if i < pinned { Tier::Hot } else { t.tier }).collect();
    // Where position `p` is (or would be) among the turns.
    let local = |p: usize| turns.partition_point(|t| t.index < p);
    let used: usize = turns.iter().zip(&current).map(|(t, tier)| tokens_in(*tier, t.tokens, config)).sum();
    let window = config.window.max(1) as f32;
    let share = used as f32 / window;
    let age = |t: &TurnState<'_>| t.timestamp.map_or(0, |ts| (now.seconds() - ts.seconds()).max(0));
    let oldest_hot = current.iter().position(|t| *t == Tier::Hot).map(|i| turns[i].index);
    // The oldest verbatim turn that says when it was said (a system prompt usually does not).
    let oldest_hot_age = turns
        .iter()
        .zip(&current)
        .filter(|(t, tier)| **tier == Tier::Hot && t.timestamp.is_some())
        .map(|(t, _)| age(t))
        .next()
        .unwrap_or(0);
    let recent_from = turns.len().saturating_sub(config.recent_turns.max(1));
    let recent = &turns[recent_from..];

    // Triggers.
    let w = config.weights;
    let mut triggers = Vec::new();
    let pressure = ((share - config.soft_limit) / (config.hard_limit - config.soft_limit).max(1e-6)).clamp(0.0, 1.0);
    triggers.push(TriggerScore {
        trigger: Trigger::Pressure,
        raw: pressure,
        weight: w.pressure,
        why: format!("{used} of {} tokens ({:.0}%)", config.window, share * 100.0),
    });
    let span = (config.warm.age_seconds - config.hot.age_seconds).max(1) as f32;
    let age_raw = ((oldest_hot_age - config.hot.age_seconds) as f32 / span).clamp(0.0, 1.0);
    triggers.push(TriggerScore {
        trigger: Trigger::Age,
        raw: age_raw,
        weight: w.age,
        why: format!("oldest verbatim turn {}", duration(oldest_hot_age)),
    });
    let shift = oldest_hot.and_then(|first| state.topic_starts.iter().copied().rev().find(|&b| b > first));
    triggers.push(TriggerScore {
        trigger: Trigger::TopicShift,
        raw: if shift.is_some() { 1.0 } else { 0.0 },
        weight: w.topic_shift,
        why: match shift {
            Some(b) => match turns.get(local(b)).filter(|t| t.index == b) {
                Some(t) => format!("a topic starts at {}, leaving a finished one verbatim", t.id),
                None => format!("a topic starts at position {b}, leaving a finished one verbatim"),
            },
            None => "no topic shift among the verbatim turns".to_string(),
        },
    });
    let completed = recent.iter().rev().find(|t| is_task_completion(t.content));
    triggers.push(TriggerScore {
        trigger: Trigger::TaskCompletion,
        raw: if completed.is_some() { 1.0 } else { 0.0 },
        weight: w.task_completion,
        why: match completed {
            Some(t) => format!("{} closes a task", t.id),
            None => "no finished task in the newest turns".to_string(),
        },
    });
    triggers.push(TriggerScore {
        trigger: Trigger::Checkpoint,
        raw: if state.checkpoint { 1.0 } else { 0.0 },
        weight: w.checkpoint,
        why: if state.checkpoint { "checkpoint requested" } else { "no checkpoint" }.to_string(),
    });
    let score: f32 = triggers.iter().map(|t| t.raw * t.weight).sum();
    let over_hard = share > config.hard_limit;

    // Guards.
    let mut guards = Vec::new();
    if share < config.soft_limit {
        guards.push(Guard {
            kind: GuardKind::UnderSoftLimit,
            why: format!(
                "{:.0}% of the window is under the soft limit of {:.0}%",
                share * 100.0,
                config.soft_limit * 100.0
            ),
        });
    }
    // A task or a debugging session belongs to the current topic: once the topic has moved
    // on, the user has left it, finished or not.
    let topic_from = local(state.topic_starts.last().copied().unwrap_or(0)).max(recent_from);
    let in_topic = &turns[topic_from..];
    let last_start = in_topic.iter().rposition(|t| t.role == Role::User && is_task_start(t.content));
    let last_done = in_topic.iter().rposition(|t| is_task_completion(t.content));
    if let Some(s) = last_start.filter(|&s| last_done.is_none_or(|d| d < s)) {
        guards.push(Guard {
            kind: GuardKind::OngoingTask,
            why: format!("{} starts a task not yet finished", in_topic[s].id),
        });
    }
    let back: Vec<&str> = recent.iter().filter(|t| is_back_reference(t.content)).map(|t| t.id).collect();
    if back.len() >= 2 {
        guards.push(Guard { kind: GuardKind::BackReferences, why: format!("{} refer back", back.join(", ")) });
    }
    if let Some(t) = in_topic.iter().rev().find(|t| is_debugging(t.content)) {
        guards
            .push(Guard { kind: GuardKind::Debugging, why: format!("{} carries a stack trace or error output", t.id) });
    }
    let stamps: Vec<i64> = recent.iter().filter_map(|t| t.timestamp.map(Timestamp::seconds)).collect();
    if stamps.len() >= 4 && stamps.len() == recent.len() {
        let spread = stamps[stamps.len() - 1] - stamps[0];
        let newest_age = now.seconds() - stamps[stamps.len() - 1];
        if spread < config.hot.age_seconds && newest_age < 5 * 60 && spread / (stamps.len() as i64 - 1) < 120 {
            guards.push(Guard {
                kind: GuardKind::RapidExchange,
                why: format!("{} turns within {}", stamps.len(), duration(spread)),
            });
        }
    }
    let breakpoint = shift.is_some() || completed.is_some() || state.checkpoint;
    if config.preset == Preset::TwoHour {
        if oldest_hot_age < config.hot.age_seconds {
            guards.push(Guard {
                kind: GuardKind::TooRecent,
                why: format!(
                    "oldest verbatim turn is {} old, under {}",
                    duration(oldest_hot_age),
                    duration(config.hot.age_seconds)
                ),
            });
        } else if oldest_hot_age < config.warm.age_seconds && !breakpoint {
            guards.push(Guard {
                kind: GuardKind::NoBreakpoint,
                why: "between 30 minutes and 2 hours, waiting for a topic shift or a finished task".to_string(),
            });
        }
    }

    // The decision.
    let (act, reason) = if over_hard {
        (
            true,
            format!("{:.0}% of the window is past the hard limit of {:.0}%", share * 100.0, config.hard_limit * 100.0),
        )
    } else if let Some(g) = guards.first() {
        (false, format!("held by guard {:?}", g.kind))
    } else if config.preset == Preset::TwoHour {
        if oldest_hot_age >= config.warm.age_seconds {
            (true, format!("2-hour rule: oldest verbatim turn is {} old", duration(oldest_hot_age)))
        } else {
            (true, "2-hour rule: a natural breakpoint between 30 minutes and 2 hours".to_string())
        }
    } else if score > config.threshold {
        (true, format!("score {} exceeds {}", apart(score, config.threshold), apart(config.threshold, score)))
    } else {
        (false, format!("score {} does not exceed {}", apart(score, config.threshold), apart(config.threshold, score)))
    };

    let tiers = if act { assign(state, config, now, &current) } else { current.clone() };
    let moves = tiers
        .iter()
        .enumerate()
        .filter(|(i, t)| **t != current[*i])
        .map(|(i, t)| Move {
            index: turns[i].index,
            id: turns[i].id.to_string(),
            from: current[i],
            to: *t,
            why: move_reason(&turns[i], *t, age(&turns[i]), config),
        })
        .collect();
    let tokens_after = turns.iter().zip(&tiers).map(|(t, tier)| tokens_in(*tier, t.tokens, config)).sum();
    Plan {
        tiers,
        left_out: state.left_out,
        act,
        score,
        triggers,
        guards,
        moves,
        tokens_before: used,
        tokens_after,
        reason,
    }
}

/// Walks from the newest turn back, filling hot, then warm, then cool, each within its token
/// allowance and age; the rest go cold. Tiers only ever get colder (a summary is never
/// replaced by the verbatim turn again), which keeps the context's prefix stable. The cut
/// between hot and the rest snaps back to a topic start when one lies in the warm span, so a
/// topic is compressed whole. Pinned turns stay hot.
fn assign(state: &State<'_>, config: &PolicyConfig, now: Timestamp, current: &[Tier]) -> Vec<Tier> {
    let turns = &state.turns;
    let n = turns.len();
    let mut tiers = vec![Tier::Cold; n];
    let limits = [(Tier::Hot, config.hot), (Tier::Warm, config.warm), (Tier::Cool, config.cool)];
    let mut level = 0;
    let mut filled = 0usize;
    for i in (0..n).rev() {
        let t = &turns[i];
        let age = t.timestamp.map_or(0, |ts| (now.seconds() - ts.seconds()).max(0));
        while level < limits.len() {
            let (tier, limit) = limits[level];
            let cost = tokens_in(tier, t.tokens, config);
            if age <= limit.age_seconds && filled + cost <= limit.tokens {
                filled += cost;
                break;
            }
            level += 1;
            filled = 0;
        }
        tiers[i] = limits.get(level).map_or(Tier::Cold, |l| l.0);
    }
    // Snap the hot boundary to a topic start inside the warm part, when there is one.
    let pinned = state.pinned.min(n);
    let end = turns.last().map_or(0, |t| t.index + 1);
    if let Some(first_hot) = tiers.iter().position(|t| *t == Tier::Hot) {
        let at = turns[first_hot].index;
        if let Some(&start) = state.topic_starts.iter().rev().find(|&&b| b > at && b + 1 < end) {
            let start = turns.partition_point(|t| t.index < start);
            for tier in &mut tiers[first_hot.max(pinned)..start.max(pinned)] {
                *tier = Tier::Warm;
            }
        }
    }
    for (t, c) in tiers.iter_mut().zip(current) {
        *t = (*t).max(*c);
    }
    // And no turn is warmer than a newer one, so the context reads oldest-coldest.
    for i in (0..n.saturating_sub(1)).rev() {
        tiers[i] = tiers[i].max(tiers[i + 1]);
    }
    for t in &mut tiers[..pinned] {
        *t = Tier::Hot;
    }
    tiers
}

fn move_reason(t: &TurnState<'_>, to: Tier, age: i64, config: &PolicyConfig) -> String {
    let limit = match to {
        Tier::Hot => return "kept verbatim".to_string(),
        Tier::Warm => config.hot,
        Tier::Cool => config.warm,
        Tier::Cold => config.cool,
    };
    if age > limit.age_seconds {
        format!("{} old, past {}", duration(age), duration(limit.age_seconds))
    } else {
        format!("newer turns fill the {}-token allowance of the tier above ({} tokens)", limit.tokens, t.tokens)
    }
}

fn duration(seconds: i64) -> String {
    match seconds {
        s if s < 120 => format!("{s} s"),
        s if s < 2 * 3600 => format!("{} min", s / 60),
        s => format!("{:.1} h", s as f32 / 3600.0),
    }
}

#[cfg(test)]
mod tests;

/// `x` with two decimals, or as many more (up to six) as it takes to read differently from
/// `other`: "score 0.50 exceeds 0.50" says nothing, "score 0.504 exceeds 0.500" does.
fn apart(x: f32, other: f32) -> String {
    (2..=6)
        .map(|d| (format!("{x:.d$}"), format!("{other:.d$}")))
        .find(|(a, b)| a != b)
        .map_or_else(|| format!("{x:.2}"), |(a, _)| a)
}
