//! The context a snapshot builds for the next model call: the budget shared between summaries,
//! salient sentences, recalled turns and the newest turns verbatim, and how each part is
//! rendered. A plain read of the snapshot: it changes nothing and caches nothing.

use std::collections::BTreeSet;

use strata_core::{Block, BlockKind, Context, History, Role, Turn};
use strata_strategies::select::{finish, newest_fitting, pin_system, whole_if_it_fits};
use strata_summarize::FactKind;
use strata_text::{date_line, relative_note, Date};

use super::{MemoryError, Snapshot};

/// The first line of the recalled block.
const RECALLED_HEADING: &str = "[Recalled from earlier in this conversation, verbatim]";

impl Snapshot {
    /// The salient sentences of the turns `eligible` admits within `allowance`, sentences
    /// whose every fact a later turn replaced marked as superseded.
    fn salient_block(&self, allowance: usize, eligible: &dyn Fn(usize) -> bool) -> Option<Block> {
        // A sentence is marked when every fact it states (names aside) was replaced, with the
        // turn that replaced the first of them.
        let marked = |turn: usize, sentence: &str| -> Option<String> {
            let mut by: Option<&str> = None;
            for f in self.registry.facts_of_turn(turn) {
                if f.kind == FactKind::Name || f.sentence != sentence {
                    continue;
                }
                match f.superseded_by.as_deref() {
                    None => return None,
                    Some(b) => {
                        by.get_or_insert(b);
                    }
                }
            }
            by.map(|by| format!("superseded at {by}"))
        };
        let counter = self.history.counter();
        // The ranking made in the background (see `ranker`); only packed here.
        let s = self.ranking.as_ref()?.pack(
            self.history.turns(),
            eligible,
            allowance,
            counter,
            &self.config.layout.tiered.salience,
            &marked,
        )?;
        Some(Block::text(BlockKind::Salient, Role::System, s.text, s.turn_ids, counter))
    }

    /// The recalled turns as one block, in conversation order, each line a turn as it was said
    /// after its speaker. One block rather than a message per turn: the lines are quotes from
    /// earlier, not new turns of the dialogue, and a message's framing (role, name) costs
    /// about as much as a short chat turn's words. A date line opens each day, a blank line
    /// marks a gap between turns that were not adjacent, and every turn is preceded by what
    /// its relative time expressions meant when it was said ("[yesterday = 7 May 2023]"):
    /// read weeks later, "yesterday" no longer says when.
    fn render_recalled(&self, picks: &[Vec<usize>]) -> Option<Block> {
        let mut turns: Vec<usize> = picks.iter().flatten().copied().collect();
        turns.sort_unstable();
        turns.dedup();
        if turns.is_empty() {
            return None;
        }
        let mut text = String::from(RECALLED_HEADING);
        let mut last: Option<(usize, Option<Date>)> = None;
        for &j in &turns {
            let day = self.history.turns()[j].timestamp.map(Date::of);
            let last_day = last.and_then(|(_, d)| d);
            match day {
                Some(d) if Some(d) != last_day => {
                    text.push_str("\n\n");
                    text.push_str(&date_line(d));
                }
                _ if last.is_some_and(|(i, _)| i + 1 != j) => text.push('\n'),
                _ => {}
            }
            text.push('\n');
            text.push_str(&recalled_line(&self.history.turns()[j]));
            last = Some((j, day.or(last_day)));
        }
        let ids = turns.iter().map(|&j| self.history.turns()[j].id.clone()).collect();
        Some(Block::text(BlockKind::Recalled, Role::System, text, ids, self.history.counter()))
    }

    /// The recalled block for a ranking: whole units (a tool call with its results), best
    /// first, within `left` tokens.
    fn recalled_block(&self, ranked: &[(usize, f32)], shown: &BTreeSet<usize>, left: usize) -> Option<Block> {
        let history = &self.history;
        let heading = history.counter().count_message(Role::System, None, RECALLED_HEADING, None, &[]);
        let mut picks: Vec<Vec<usize>> = Vec::new();
        let mut taken: BTreeSet<usize> = BTreeSet::new();
        let mut fill = heading;
        let mut block = None;
        // Lines are counted one by one, so the rendered block differs from the sum by a few
        // tokens (usually fewer: a newline merges with the end of the line before). Two
        // passes: fill by the estimate, render, drop the lowest-ranked picks until it fits;
        // then fill again from the exact count.
        for pass in 0..2 {
            let rendered = picks.len();
            let mut days: BTreeSet<Date> =
                picks.iter().flatten().filter_map(|&j| history.turns()[j].timestamp.map(Date::of)).collect();
            for &(i, _) in ranked {
                if fill >= left {
                    break;
                }
                if i < history.pinned() || shown.contains(&i) || taken.contains(&i) {
                    continue;
                }
                let turns: Vec<usize> =
                    self.recall_unit(i).into_iter().filter(|j| !shown.contains(j) && !taken.contains(j)).collect();
                let mut cost = 0usize;
                let mut new_days: BTreeSet<Date> = BTreeSet::new();
                for &j in &turns {
                    let [plain, dated] = self.recalled_tokens[j];
                    match history.turns()[j].timestamp.map(Date::of) {
                        // The first turn of a day pays for the date line (estimated by this
                        // turn's; it lands on the day's earliest recalled turn).
                        Some(d) if !days.contains(&d) && new_days.insert(d) => cost += dated,
                        _ => cost += plain,
                    }
                }
                if fill + cost > left {
                    continue;
                }
                fill += cost;
                taken.extend(&turns);
                days.extend(new_days);
                picks.push(turns);
            }
            // Nothing added by the exact count: the block rendered last is the answer, and
            // rendering it again would count its tokens again (most of a context's cost).
            if pass > 0 && picks.len() == rendered {
                break;
            }
            loop {
                block = self.render_recalled(&picks);
                let total = block.as_ref().map_or(0, |b| b.tokens);
                if total <= left || picks.pop().is_none() {
                    break;
                }
            }
            fill = block.as_ref().map_or(heading, |b| b.tokens);
        }
        block
    }

    /// What is recalled with turn `i`: its burst (see [`recall::Grouping`]: capped at the
    /// layout's `burst_tokens`), with each member's tool unit (a call and its results go
    /// together). Ascending.
    fn recall_unit(&self, i: usize) -> Vec<usize> {
        let history = &self.history;
        let mut out: Vec<usize> =
            self.grouping.burst(i).flat_map(|j| history.unit_of(j).turns.iter().copied()).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The context for the next model call, within `budget` tokens. With a `question`, part
    /// of the budget goes to turns recalled for it. Never waits on a model: spans whose
    /// summary is not finished are left to the registry and the cold store, and say so in the
    /// context's notes.
    pub fn context(&self, budget: usize, question: Option<&str>) -> Result<Context, MemoryError> {
        let history = &self.history;
        let counter = history.counter();
        if let Some(whole) = whole_if_it_fits(crate::config::TIERED, history, budget) {
            return Ok(whole);
        }
        let mut ctx = Context::new(crate::config::TIERED, budget, counter);
        let mut left = pin_system(history, &mut ctx);
        let newest_unit = if history.len() > history.pinned() { history.unit_of(history.len() - 1).tokens } else { 0 };
        let mut recall_allowance = match question {
            Some(_) => (budget as f64 * self.config.layout.recall) as usize,
            None => 0,
        }
        .min(left);
        if self.config.layout.keep_newest && newest_unit <= left {
            recall_allowance = recall_allowance.min(left - newest_unit);
        }
        let rest = left - recall_allowance;
        let first_hot = self.first_hot();

        // The most specific sentences of turns not shown verbatim get their share of the rest
        // (chosen last, once the hot turns shown are known).
        let tiered = &self.config.layout.tiered;
        let share = if question.is_some() { tiered.salient_with_question } else { tiered.salient };
        let salient_allowance = (rest as f64 * share) as usize;

        // Summaries of spans that left the hot tier, newest first, within the warm and cool
        // tiers' share: cold spans are summarised too (at the cool ratio), and their summaries
        // are the first to give way, so a question-agnostic context still tells what happened
        // long ago when there is room.
        let policy = &self.config.policy;
        let tier_total = (policy.hot.tokens + policy.warm.tokens + policy.cool.tokens).max(1);
        let summary_allowance =
            (rest - salient_allowance.min(rest)) * (policy.warm.tokens + policy.cool.tokens) / tier_total;
        let mut summaries: Vec<Block> = Vec::new();
        let mut used = 0usize;
        let mut missing = 0usize;
        for key in self.spans.iter().rev() {
            let Some(s) = self.shown.get(key) else {
                missing += 1;
                continue;
            };
            if s.text.trim().is_empty() {
                // Nothing in the span fitted the summary's bound; the registry stands for it.
                continue;
            }
            let block = Block::text(
                BlockKind::Summary,
                Role::System,
                format!("[Earlier conversation summary: {}]", s.text),
                s.source_ids.clone(),
                counter,
            );
            if used + block.tokens > summary_allowance {
                break;
            }
            used += block.tokens;
            summaries.push(block);
        }
        summaries.reverse();
        if missing > 0 {
            ctx.notes.push(format!(
                "{missing} older spans have no finished summary yet; the registry and the cold store stand for them"
            ));
        }

        // The newest hot turns in what is left of the rest; the newest unit (the message
        // being answered) whenever it fits the rest at all.
        let hot_allowance =
            rest.saturating_sub(salient_allowance + used).max(newest_unit.min(rest.saturating_sub(used)));
        let (mut hot, _) = newest_fitting(history, hot_allowance);
        // Whole units only: a tool result that is hot while its call has left the tier goes
        // with its call.
        hot.retain(|&i| history.unit_of(i).turns[0] >= first_hot);
        let hot_used: usize = hot.iter().map(|&i| history.tokens(i)).sum();

        // Salient sentences of every turn before the first one shown verbatim: hot turns that
        // did not fit are candidates too. Without a question nothing else wants what the hot
        // turns left, so it all goes to them.
        let free = rest.saturating_sub(used + hot_used);
        let salient_allowance = if question.is_none() { free } else { salient_allowance.min(free) };
        let shown_from = hot.first().copied().unwrap_or(history.len());
        let mut salient = self.salient_block(salient_allowance, &|t| t < shown_from);
        let salient_tokens = salient.as_ref().map_or(0, |b| b.tokens);
        left = left.saturating_sub(salient_tokens + used + hot_used);

        // Recalled turns: whole units, best first, in what is left (the recall share plus
        // anything the rest did not use); shown in conversation order, in one block.
        let mut recalled: Option<Block> = None;
        if let Some(q) = question {
            let shown: BTreeSet<usize> = hot.iter().copied().collect();
            let ranked = self.rank(q, Some(left))?;
            recalled = self.recalled_block(&ranked, &shown, left);
        }
        // A turn recalled whole needs none of its sentences among the salient ones: those are
        // packed again without its turns, in the tokens they had, so that the context never
        // says the same thing twice and the budget still holds.
        if let (Some(r), Some(s)) = (&recalled, &salient) {
            if s.source_ids.iter().any(|id| r.source_ids.contains(id)) {
                let whole: BTreeSet<usize> = r.source_ids.iter().filter_map(|id| history.index_of(id)).collect();
                salient = self.salient_block(salient_tokens, &|t| t < shown_from && !whole.contains(&t));
            }
        }

        ctx.blocks.extend(summaries);
        ctx.blocks.extend(salient);
        ctx.blocks.extend(recalled);
        for &i in &hot {
            ctx.blocks.push(Block::from_turn(BlockKind::VerbatimTurn, &history.turns()[i], history.tokens(i)));
        }
        if first_hot < history.len() && hot.first() != Some(&first_hot) && !hot.is_empty() {
            // Say what held them out: the tokens left to verbatim turns, which with a question
            // are what recall's share leaves.
            let recall = match question {
                Some(_) => format!(" (recall's share of the budget is {recall_allowance})"),
                None => String::new(),
            };
            ctx.notes.push(format!(
                "hot turns before {} do not fit the {hot_allowance} tokens left to verbatim turns{recall}",
                history.turns()[hot[0]].id
            ));
        }
        Ok(finish(ctx))
    }
}

/// What turn `i` adds to the recalled block, without and with a date line before it.
pub(super) fn count_recalled(history: &History, i: usize) -> [usize; 2] {
    let counter = history.counter();
    let line = recalled_line(&history.turns()[i]);
    // The newline before a line mostly merges with the end of the line before it (".\n"
    // is one token), so a line is counted without it.
    let plain = counter.count(&line);
    let dated = match history.turns()[i].timestamp {
        Some(ts) => counter.count(&format!("\n{}\n{line}", date_line(Date::of(ts)))),
        None => plain,
    };
    [plain, dated]
}

/// A turn as a line of the recalled block: the speaker (or role), the resolved relative
/// dates, the content, and any tool calls it made.
fn recalled_line(turn: &Turn) -> String {
    let mut line = turn.speaker_or_role().to_string();
    if let (Role::Tool, Some(id)) = (turn.role, &turn.tool_call_id) {
        line.push_str(&format!(" ({id})"));
    }
    line.push_str(": ");
    if let Some(ts) = turn.timestamp {
        line.push_str(&relative_note([turn.content.as_str()], ts));
    }
    line.push_str(&turn.content);
    for call in &turn.tool_calls {
        line.push_str(&format!(" [calls {} ({}) with {}]", call.name, call.id, call.arguments));
    }
    line
}
