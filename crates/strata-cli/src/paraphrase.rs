//! `strata paraphrase`: a probe set's evidence turns rewritten by a local model, keeping every
//! planted value verbatim, written as a new Strata JSONL file: the same facts in wording no
//! template wrote, to check that a strategy's retention does not depend on the phrasing.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result};

use crate::input::{load, Input};
use crate::BadInput;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    input: Input,
    /// The rewriting model: qwen, qwen1.5b, smollm2, a GGUF file, or an OpenAI-compatible
    /// endpoint as URL#MODEL.
    #[arg(long, value_name = "NAME|PATH")]
    model: String,
    /// Where model weights are [default: $STRATA_MODELS, else ./models, else the checkout's].
    #[arg(long, value_name = "DIR")]
    models_dir: Option<PathBuf>,
    /// The file to write (Strata JSONL); written whole once every turn is done.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Give up on one turn's rewrite after this long (the turn keeps its words).
    #[arg(long, default_value_t = 60_000, value_name = "MS")]
    deadline_ms: u64,
    /// Hide the progress line.
    #[arg(long)]
    quiet: bool,
}

pub(crate) fn run(args: Args) -> Result<String> {
    let loaded = load(&args.input)?;
    let probes: usize = loaded.conversations.iter().map(|c| c.probes.len()).sum();
    if probes == 0 {
        return Err(BadInput(format!(
            "{}: no probes, so no planted values to keep: paraphrase rewrites a probe set's evidence turns",
            args.input.file.display()
        ))
        .into());
    }
    let generator = crate::models::generator(Some(&args.model), args.models_dir.as_deref())?
        .expect("a model name gives a generator");
    let quiet = args.quiet;
    let (conversations, stats) = strata_probes::paraphrase(
        &loaded.conversations,
        &*generator,
        Some(Duration::from_millis(args.deadline_ms)),
        &mut |done, all| {
            if !quiet {
                #[allow(clippy::print_stderr)]
                {
                    eprint!("\rparaphrase: {done}/{all} turns");
                }
            }
        },
    );
    if !quiet {
        #[allow(clippy::print_stderr)]
        {
            eprintln!();
        }
    }
    let mut text = String::new();
    for c in &conversations {
        text.push_str(&strata_transcript::to_json(c));
        text.push('\n');
    }
    // Never half a file.
    strata_transcript::write_whole(&args.out, &text)
        .with_context(|| format!("{}: cannot write", args.out.display()))?;
    let mut out = format!(
        "{}: {} conversations, {probes} probes; {} evidence turns asked of {}, {} rewritten",
        args.out.display(),
        conversations.len(),
        stats.asked,
        generator.model_id(),
        stats.rewritten
    );
    for (why, n) in &stats.refused {
        write!(out, ", {n} kept ({why:?})")?;
    }
    out.push('\n');
    Ok(out)
}
