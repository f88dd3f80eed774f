//! `strata summarize`: an extractive summary of a transcript with the id of the turn behind
//! every sentence, or with `--model` a local model's summary that passed the keep-set check
//! (the extractive one when it did not); `--explain` adds the fact registry and why a model's
//! summary was refused.

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::Result;
use strata_summarize::{ExtractiveConfig, Profile, Registry};

use crate::input::{load, Input};
use crate::BadInput;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    input: Input,
    /// Source tokens per summary token: 3 is the warm tier, 10 the cool tier.
    #[arg(long, default_value_t = 3.0)]
    ratio: f64,
    /// What to keep: general, exploration (alternatives, pros and cons, open questions) or
    /// implementation (decisions, code, configuration; no small talk).
    #[arg(long, default_value = "general")]
    profile: String,
    /// Also list the facts the registry holds (superseded ones marked) and the summary's size.
    #[arg(long)]
    explain: bool,
    /// Summarise with a model: qwen, qwen1.5b, smollm2, a GGUF file, or an OpenAI-compatible
    /// endpoint as URL#MODEL. Its summary is used only if
    /// it keeps every fact of the transcript and invents none.
    #[arg(long, value_name = "NAME|PATH")]
    model: Option<String>,
    /// Where model weights are [default: $STRATA_MODELS, else ./models, else the checkout's].
    #[arg(long, value_name = "DIR")]
    models_dir: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> Result<String> {
    let profile = match args.profile.as_str() {
        "general" => Profile::General,
        "exploration" => Profile::Exploration,
        "implementation" => Profile::Implementation,
        p => {
            return Err(
                BadInput(format!("unknown profile `{p}`: expected general, exploration or implementation")).into()
            )
        }
    };
    if !(args.ratio >= 1.0 && args.ratio.is_finite()) {
        return Err(BadInput(format!("--ratio must be at least 1, not {}", args.ratio)).into());
    }
    let loaded = load(&args.input)?;
    let config = ExtractiveConfig { ratio: args.ratio, profile, ..ExtractiveConfig::default() };
    let generator = crate::models::generator(args.model.as_deref(), args.models_dir.as_deref())?;
    let mut out = String::new();
    for c in &loaded.conversations {
        match &generator {
            Some(g) => write_abstractive(&mut out, c, &**g, &*loaded.counter, &config, args.explain)?,
            None => {
                let summary =
                    strata_summarize::extractive::summarize(&c.turns, &c.participants, &*loaded.counter, None, &config);
                writeln!(
                    out,
                    "# {} ({} turns, {} tokens summarised in {}, {} sentences)",
                    c.id,
                    c.turns.len(),
                    summary.source_tokens,
                    summary.tokens,
                    summary.sentences.len()
                )?;
                writeln!(out, "{}", summary.render())?;
            }
        }
        if args.explain {
            let registry = Registry::from_turns(&c.turns);
            writeln!(out, "\n## registry ({} facts)", registry.facts().len())?;
            for f in registry.facts() {
                let superseded =
                    f.superseded_by.as_deref().map(|s| format!(" (superseded by {s})")).unwrap_or_default();
                writeln!(out, "{} {}: {}{superseded}", f.turn_id, f.kind.as_str(), f.value)?;
            }
        }
    }
    Ok(out)
}

/// The model's summary of one conversation, folded over runs of turns when it is long; each
/// run's summary is the model's only if it passed the keep-set check, else the extractive one
/// (`config`, which `--ratio` and `--profile` set). `--explain` says which, and why.
fn write_abstractive(
    out: &mut String,
    c: &strata_core::Conversation,
    generator: &dyn strata_core::Generator,
    counter: &dyn strata_core::TokenCounter,
    config: &ExtractiveConfig,
    explain: bool,
) -> Result<()> {
    // The fallback follows `--ratio` and `--profile`, within the folding bound that keeps
    // summaries of summaries from growing.
    let defaults = strata_summarize::SummaryConfig::default();
    let summary_config = strata_summarize::SummaryConfig {
        extractive: ExtractiveConfig { ratio: config.ratio, profile: config.profile, ..defaults.extractive.clone() },
        ..defaults
    };
    let outcomes = strata_summarize::summarize_folded(
        &c.turns,
        &c.participants,
        Some(generator),
        None,
        counter,
        strata_core::Tier::Cool,
        &summary_config,
        strata_summarize::RUN_TOKENS,
    );
    let Some(last) = outcomes.last() else {
        writeln!(out, "# {} (no turns)", c.id)?;
        return Ok(());
    };
    let summary = &last.summary;
    writeln!(
        out,
        "# {} ({} turns in {} run{}, summarised in {} tokens by {})",
        c.id,
        c.turns.len(),
        outcomes.len(),
        if outcomes.len() == 1 { "" } else { "s" },
        counter.count(&summary.text),
        summary.method
    )?;
    writeln!(out, "{}", summary.text)?;
    writeln!(out, "sources: {}", span(&summary.source_ids))?;
    if explain {
        writeln!(out, "\n## runs")?;
        for (i, o) in outcomes.iter().enumerate() {
            let covered = &o.summary.source_ids;
            let how = match &o.fallback {
                None => format!("{} summary kept", o.summary.method),
                Some(why) => format!("extractive, because {why}"),
            };
            writeln!(out, "run {} (up to {}): {how}", i + 1, covered.last().map_or("-", String::as_str))?;
        }
    }
    Ok(())
}

/// Turn ids as a list, or as `first..last (n turns)` when long.
fn span(ids: &[String]) -> String {
    match ids {
        [] => "-".to_string(),
        few if few.len() <= 6 => few.join(", "),
        many => format!("{}..{} ({} turns)", many[0], many[many.len() - 1], many.len()),
    }
}
