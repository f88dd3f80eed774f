//! `strata tokens`: per-turn and total token counts.

use std::fmt::Write;

use anyhow::Result;
use strata_core::History;

use crate::input::{load, Input};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    input: Input,
    /// Print only the totals, one line per conversation.
    #[arg(long)]
    summary: bool,
}

pub(crate) fn run(args: Args) -> Result<String> {
    let loaded = load(&args.input)?;
    let mut out = String::new();
    let mut grand = 0usize;
    let mut turns = 0usize;
    for c in &loaded.conversations {
        let history = History::from_conversation(c, loaded.counter.clone())?;
        if !args.summary {
            writeln!(out, "# {}", c.id)?;
            writeln!(out, "{:<16} {:<9} {:>8}", "turn", "role", "tokens")?;
            for (i, t) in history.turns().iter().enumerate() {
                writeln!(out, "{:<16} {:<9} {:>8}", t.id, t.role.as_str(), history.tokens(i))?;
            }
        }
        let total = history.full_context_tokens();
        writeln!(
            out,
            "{}: {} turns, {} tokens ({}, messages {} + reply priming {})",
            c.id,
            history.len(),
            total,
            loaded.counter.name(),
            history.total_tokens(),
            total - history.total_tokens()
        )?;
        grand += total;
        turns += history.len();
    }
    if loaded.conversations.len() > 1 {
        writeln!(out, "total: {} conversations, {turns} turns, {grand} tokens", loaded.conversations.len())?;
    }
    Ok(out)
}
