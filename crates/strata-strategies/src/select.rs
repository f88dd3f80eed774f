//! The mechanisms the strategies share: the pinned system prompt, the newest units of the
//! history that fit a token allowance, and a context assembled from picks made elsewhere.

use std::collections::BTreeSet;

use strata_core::{Block, BlockKind, Context, History, Role, StrategyError};

/// Adds the pinned system prompt to `ctx` if it fits the budget, and returns the tokens left
/// for everything else (after the per-request overhead).
pub fn pin_system(history: &History, ctx: &mut Context) -> usize {
    let budget = ctx.budget;
    let pinned_tokens: usize = (0..history.pinned()).map(|i| history.tokens(i)).sum();
    let mut left = budget.saturating_sub(ctx.overhead);
    if history.pinned() == 0 {
        return left;
    }
    if pinned_tokens <= left {
        for i in 0..history.pinned() {
            ctx.blocks.push(Block::from_turn(BlockKind::PinnedSystem, &history.turns()[i], history.tokens(i)));
        }
        left -= pinned_tokens;
    } else {
        ctx.notes.push(format!("system prompt ({pinned_tokens} tokens) does not fit the budget of {budget}; omitted"));
    }
    left
}

/// The newest turns that fit in `allowance` tokens, oldest first.
///
/// Walks back from the newest turn and stops at the first unit that does not fit, so the
/// result is the recent end of the conversation with no holes. A unit (an assistant turn with
/// the tool results that answer it) is taken whole or not at all. Pinned turns are never
/// selected here. The cost is O(selected turns), independent of the length of the history.
pub fn newest_fitting(history: &History, allowance: usize) -> (Vec<usize>, usize) {
    let mut taken_units = BTreeSet::new();
    let mut picked = Vec::new();
    let mut used = 0usize;
    for i in (history.pinned()..history.len()).rev() {
        let unit_index = history.unit_index(i);
        if taken_units.contains(&unit_index) {
            continue;
        }
        let unit = history.unit_of(i);
        if used + unit.tokens > allowance {
            break;
        }
        used += unit.tokens;
        taken_units.insert(unit_index);
        picked.extend_from_slice(&unit.turns);
    }
    picked.sort_unstable();
    (picked, used)
}

/// Appends the turns at `indices` (ascending) to the context verbatim.
pub fn push_verbatim(history: &History, ctx: &mut Context, indices: &[usize]) {
    for &i in indices {
        ctx.blocks.push(Block::from_turn(BlockKind::VerbatimTurn, &history.turns()[i], history.tokens(i)));
    }
}

/// The whole history as the context, when it fits `budget`: nothing a strategy could send in
/// its place is worth more than the turns themselves, and anything sent beside them would say
/// again what they say. `None` when it does not fit.
pub fn whole_if_it_fits(name: &str, history: &History, budget: usize) -> Option<Context> {
    if history.full_context_tokens() > budget {
        return None;
    }
    let mut ctx = Context::new(name, budget, history.counter());
    pin_system(history, &mut ctx);
    let rest: Vec<usize> = (history.pinned()..history.len()).collect();
    push_verbatim(history, &mut ctx, &rest);
    Some(finish(ctx))
}

/// A context with nothing in it costs nothing: the per-request overhead only applies once
/// there is a message to send.
pub fn finish(mut ctx: Context) -> Context {
    if ctx.blocks.is_empty() {
        ctx.overhead = 0;
    }
    ctx
}

/// One element of a context chosen outside the built-in strategies (a strategy written in
/// Python, say): a turn of the history sent verbatim, or text of the strategy's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// The turn with this id.
    Turn(String),
    /// A note, sent as a system message standing for no turn in particular.
    Text(String),
}

/// The context `picks` describe, in their order: turns cost what the history counted for them
/// (pinned ones are marked pinned), texts are counted as system messages. A turn id the
/// history does not hold, a turn picked twice, or a context over `budget` is an error naming
/// the strategy.
pub fn assemble(name: &str, history: &History, budget: usize, picks: &[Pick]) -> Result<Context, StrategyError> {
    let failed = |message: String| StrategyError::Failed { strategy: name.to_string(), message };
    let mut ctx = Context::new(name, budget, history.counter());
    let mut seen = BTreeSet::new();
    for pick in picks {
        match pick {
            Pick::Turn(id) => {
                let Some(i) = history.index_of(id) else {
                    return Err(failed(format!("turn `{id}` is not in the history of {}", history.conversation_id())));
                };
                if !seen.insert(i) {
                    return Err(failed(format!("turn `{id}` picked twice")));
                }
                let kind = if i < history.pinned() { BlockKind::PinnedSystem } else { BlockKind::VerbatimTurn };
                ctx.blocks.push(Block::from_turn(kind, &history.turns()[i], history.tokens(i)));
            }
            Pick::Text(text) => ctx.blocks.push(Block::text(
                BlockKind::Summary,
                Role::System,
                text.clone(),
                Vec::new(),
                history.counter(),
            )),
        }
    }
    let ctx = finish(ctx);
    ctx.check_budget()?;
    Ok(ctx)
}
