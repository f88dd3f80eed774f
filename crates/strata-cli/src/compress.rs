//! `strata compress`: the context a strategy builds for a transcript, as messages, text or
//! JSON, with `--explain` listing every block on stderr.

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use strata_core::{Context, History};

use crate::input::{load, Input};
use crate::BadInput;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    input: Input,
    /// The strategy.
    #[arg(long, default_value = "window", value_parser = crate::input::strategies())]
    strategy: String,
    /// The token budget for the whole context (Python's `strata.compress` has the same default).
    #[arg(long, default_value_t = 2000, value_parser = crate::input::budget, allow_negative_numbers = true)]
    budget: usize,
    /// The question the context is built for: strategies that read it (tiered) recall turns
    /// for it; the others ignore it.
    #[arg(long)]
    question: Option<String>,
    /// The tiered memory's sentence embeddings (vectors cached under the models folder, as
    /// `strata eval` caches them), or none (recall by words alone).
    #[arg(long, default_value = "minilm", value_parser = crate::models::names(strata_models::Kind::Embedder, true))]
    embedder: String,
    /// Reorder the tiered memory's deeper recall candidates for --question with a
    /// cross-encoder, or none (the fused order).
    #[arg(long, default_value = "none", value_parser = crate::models::names(strata_models::Kind::Reranker, true))]
    reranker: String,
    /// How to print the context: messages (an OpenAI-style JSON array), text, or json (the
    /// blocks with their kinds, source turn ids and tokens).
    #[arg(long, default_value = "messages", value_parser = ["messages", "text", "json"])]
    format: String,
    /// List each block with its kind, source turn ids and tokens, on stderr.
    #[arg(long)]
    explain: bool,
    /// Strategy settings, a TOML or JSON file with one table per strategy name.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Build the context as it stood right after this turn.
    #[arg(long, value_name = "TURN_ID")]
    at: Option<String>,
    /// A local model for the strategies that summarise with one (segments-abstractive,
    /// summary-buffer): qwen, qwen1.5b, smollm2, a GGUF file, or an OpenAI-compatible
    /// endpoint as URL#MODEL (http://127.0.0.1:8080/v1#qwen).
    #[arg(long, value_name = "NAME|PATH")]
    model: Option<String>,
    /// Where model weights are [default: $STRATA_MODELS, else ./models, else the checkout's].
    #[arg(long, value_name = "DIR")]
    models_dir: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> Result<String> {
    let config = crate::input::strategy_config(args.config.as_deref())?;
    // Input first: a transcript that does not load is reported before a model is opened.
    let loaded = load(&args.input)?;
    let generator = crate::models::generator(args.model.as_deref(), args.models_dir.as_deref())?;
    let embedder = match args.embedder.as_str() {
        name if name != "none" && strata::catalog::needs(&args.strategy).embedder => {
            Some(strata_models::cached_embedder(name, &crate::models::dir(args.models_dir.as_deref()))?)
        }
        _ => None,
    };
    // Opened only where it is read: a question for a strategy that reranks.
    let reranker = match args.question {
        Some(_) if strata::catalog::needs(&args.strategy).reranker => {
            crate::models::reranking(&args.reranker, args.models_dir.as_deref(), None)?
        }
        _ => None,
    };
    let models = strata::catalog::Models { generator, embedder, reranker };
    let strategy = strata::catalog::build(&args.strategy, &config, &models)?;
    if args.question.is_some() && !strategy.question_aware() {
        // Said whether or not --explain was asked: the user expects the question to matter.
        #[allow(clippy::print_stderr)]
        {
            eprintln!("warning: strategy {} does not read --question; it is ignored", args.strategy);
        }
    }
    let mut contexts = Vec::new();
    let mut explain = String::new();
    for w in &loaded.warnings {
        writeln!(explain, "warning: {w}")?;
    }
    for c in &loaded.conversations {
        let turns = match &args.at {
            None => &c.turns[..],
            Some(at) => match c.position(at) {
                Some(i) => &c.turns[..=i],
                None if loaded.conversations.len() > 1 => continue,
                None => return Err(BadInput(format!("transcript {}: no turn `{at}`", c.id)).into()),
            },
        };
        let history = History::from_turns(&c.id, turns, loaded.counter.clone())?;
        let ctx = strategy
            .build(&history, args.budget, args.question.as_deref())
            .with_context(|| format!("transcript {}", c.id))?;
        if let Some(note) = newest_left_out(&c.id, &history, &ctx) {
            // Said whether or not --explain was asked: an answer to nothing is rarely wanted.
            #[allow(clippy::print_stderr)]
            {
                eprintln!("warning: {note}");
            }
        }
        if args.explain {
            explain_context(&mut explain, &c.id, &history, &ctx)?;
        }
        contexts.push((c.id.clone(), ctx));
    }
    if args.explain {
        if let Some(table) = config.settings(&args.strategy) {
            writeln!(explain, "settings:\n{table}")?;
        }
        #[allow(clippy::print_stderr)]
        {
            eprint!("{explain}");
        }
    }
    render(&args.format, &contexts)
}

/// Why a context leaves out the conversation's newest turn (the message to be answered), when
/// it does: the budget is below what that turn (with its tool unit) and the pinned system
/// turns cost together.
fn newest_left_out(id: &str, history: &History, ctx: &Context) -> Option<String> {
    let last = history.turns().last()?;
    if ctx.blocks.iter().any(|b| b.source_ids.contains(&last.id)) {
        return None;
    }
    let unit = history.unit_of(history.len() - 1).tokens;
    // Strategies pin the leading system turns first.
    let pinned: usize = (0..history.pinned().min(history.len() - 1)).map(|i| history.tokens(i)).sum();
    let least = pinned + unit + history.counter().chat_format().reply_priming as usize;
    if ctx.budget >= least {
        // The strategy left it out by choice (`specific` keeps sentences, not turns).
        return None;
    }
    Some(format!(
        "transcript {id}: budget {} leaves out the newest turn {} ({unit} tokens alone); a budget of at least \
         {least} keeps it",
        ctx.budget, last.id
    ))
}

pub(crate) fn render(format: &str, contexts: &[(String, Context)]) -> Result<String> {
    let single = contexts.len() == 1;
    let mut out = match format {
        "messages" if single => serde_json::to_string_pretty(&contexts[0].1.messages())?,
        "messages" => {
            // One JSON document for several conversations: an object keyed by their ids.
            let map: serde_json::Map<String, serde_json::Value> = contexts
                .iter()
                .map(|(id, ctx)| Ok((id.clone(), serde_json::to_value(ctx.messages())?)))
                .collect::<Result<_>>()?;
            serde_json::to_string_pretty(&map)?
        }
        "json" if single => serde_json::to_string_pretty(&contexts[0].1)?,
        "json" => serde_json::to_string_pretty(&contexts.iter().map(|(_, c)| c).collect::<Vec<_>>())?,
        _ if single => contexts[0].1.render_text(),
        _ => {
            let parts: Vec<String> =
                contexts.iter().map(|(id, ctx)| format!("### {id}\n\n{}", ctx.render_text())).collect();
            parts.join("\n\n")
        }
    };
    out.push('\n');
    Ok(out)
}

pub(crate) fn explain_context(out: &mut String, id: &str, history: &History, ctx: &Context) -> Result<()> {
    let total = ctx.total_tokens();
    let full = history.full_context_tokens();
    let reduction = if full == 0 { 0.0 } else { 100.0 * (1.0 - total as f64 / full as f64) };
    writeln!(
        out,
        "{id}: strategy {}, budget {}, {}: {total} tokens in {} blocks; history {full} tokens in {} turns ({reduction:.1}% reduction)",
        ctx.strategy,
        ctx.budget,
        history.counter().name(),
        ctx.blocks.len(),
        history.len(),
    )?;
    writeln!(out, "{:>5}  {:<14} {:>7}  source", "#", "kind", "tokens")?;
    for (i, b) in ctx.blocks.iter().enumerate() {
        let ids = match b.source_ids.as_slice() {
            [] => "-".to_string(),
            [one] => one.clone(),
            many if many.len() <= 4 => many.join(","),
            many => format!("{}..{} ({} turns)", many[0], many[many.len() - 1], many.len()),
        };
        writeln!(out, "{:>5}  {:<14} {:>7}  {ids}", i + 1, b.kind.as_str(), b.tokens)?;
    }
    writeln!(out, "{:>5}  {:<14} {:>7}  reply priming", "", "overhead", ctx.overhead)?;
    for n in &ctx.notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(())
}
