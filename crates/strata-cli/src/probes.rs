//! `strata probes`: probes for the user's own conversations, written by a generator (a local
//! model or an endpoint) and checked before they are kept, so that `strata eval --dataset`
//! scores retention on them. The probes go to `--out` (the transcript with a `probes` field),
//! every request's reply and verdict to a side file.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use strata_probes::{write_probes, WriteConfig};

use crate::input::{load, Input};
use crate::BadInput;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    input: Input,
    /// The model that writes them: qwen, qwen1.5b, smollm2, a GGUF file, or an
    /// OpenAI-compatible endpoint as URL#MODEL. Its replies are cached on disk, so a rerun
    /// costs nothing.
    #[arg(long, value_name = "NAME|PATH|URL#MODEL")]
    generator: String,
    /// Where model weights and the reply cache are [default: $STRATA_MODELS, else ./models].
    #[arg(long, value_name = "DIR")]
    models_dir: Option<PathBuf>,
    /// The probe file to write: Strata JSON (one conversation) or JSONL (any number).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Every request's reply and verdict, one JSON line each [default: beside --out,
    /// `NAME.verdicts.jsonl`].
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Probes asked for per conversation (fewer are kept: see the verdicts).
    #[arg(long, default_value_t = 24, value_name = "N")]
    count: usize,
    /// Another seed asks about other turns.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The newest turns that fit this many tokens are not asked about, and a probe they
    /// answer is dropped: a memory keeps them anyway.
    #[arg(long, default_value_t = 1000, value_name = "TOKENS")]
    recent_tokens: usize,
    /// Give up on one request after this long (counted as a generator failure).
    #[arg(long, default_value_t = 300_000, value_name = "MS")]
    deadline_ms: u64,
    /// Hide the progress bar.
    #[arg(long)]
    quiet: bool,
}

pub(crate) fn run(args: Args) -> Result<String> {
    let loaded = load(&args.input)?;
    let jsonl = args.out.extension().is_some_and(|e| e == "jsonl");
    if !jsonl && loaded.conversations.len() > 1 {
        return Err(BadInput(format!(
            "{}: {} holds {} conversations; write them to a .jsonl file (or pick one with --conversation)",
            args.out.display(),
            args.input.file.display(),
            loaded.conversations.len()
        ))
        .into());
    }
    let generator = strata_models::cached_generator(&args.generator, &crate::models::dir(args.models_dir.as_deref()))?;
    let config = WriteConfig {
        per_conversation: args.count,
        seed: args.seed,
        recent_tokens: args.recent_tokens,
        deadline: Some(Duration::from_millis(args.deadline_ms)),
        ..WriteConfig::default()
    };
    let start = Instant::now();
    let mut bar: Option<strata_eval::progress::Progress> = None;
    let written = write_probes(&loaded.conversations, &*generator, &*loaded.counter, &config, &mut |_, all| {
        bar.get_or_insert_with(|| strata_eval::progress::Progress::new(!args.quiet, "probes", Some(all), "requests"))
            .inc();
    });
    if let Some(bar) = &bar {
        bar.finish();
    }
    let seconds = start.elapsed().as_secs_f64();

    let log = args.log.clone().unwrap_or_else(|| args.out.with_extension("verdicts.jsonl"));
    strata_transcript::write_whole(&log, &written.verdict_lines())
        .with_context(|| format!("{}: cannot write", log.display()))?;
    strata_transcript::save_path(&args.out, &written.conversations)
        .with_context(|| format!("{}: cannot write", args.out.display()))?;

    let failed = written.verdicts.iter().filter(|v| v.error.is_some()).count();
    let mut out = format!(
        "{}: {} (generator {}, {seconds:.0} s)\nreplies and verdicts: {}\n",
        args.out.display(),
        written.report(),
        generator.model_id(),
        log.display()
    );
    if failed > 0 {
        writeln!(
            out,
            "{failed} requests failed (the generator's errors are in the verdicts); a rerun asks them again"
        )?;
    }
    Ok(out)
}
