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
    /// Summarise with a local model: qwen, smollm2, or a GGUF file. Its summary is used only if
    /// it keeps every fact of the transcript and invents none.
    #[arg(long, value_name = "NAME|PATH")]
    model: Option<String>,
    /// Where model weights are [default: $STRATA_MODELS, else ./models].
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
    let mut out = String::new();
    for c in &loaded.conversations {
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
