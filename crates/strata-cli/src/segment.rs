//! `strata segment`: topic segments of a transcript, with the cause of each boundary.

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::input::{load, Input};
use crate::BadInput;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    input: Input,
    /// The detector: combined (depth, cue phrases, time gaps), depth, fixed (the seed's
    /// cosine-below-0.7 rule), or depth-W-C / fixed-T with explicit parameters.
    #[arg(long, default_value = "combined")]
    method: String,
    /// Also show each boundary's score and the opening words of the turn it starts at.
    #[arg(long)]
    explain: bool,
    /// Sentence embeddings for topic similarity.
    #[arg(long, default_value = "minilm", value_parser = crate::models::names(strata_models::Kind::Embedder, false))]
    embedder: String,
    /// Where model weights are [default: $STRATA_MODELS, else ./models, else the checkout's].
    #[arg(long, value_name = "DIR")]
    models_dir: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> Result<String> {
    let config = strata_topic::TopicConfig::from_name(&args.method).ok_or_else(|| {
        BadInput(format!("unknown method `{}`: expected combined, depth, fixed, depth-W-C or fixed-T", args.method))
    })?;
    let loaded = load(&args.input)?;
    let embedder = strata_models::cached_embedder(&args.embedder, &crate::models::dir(args.models_dir.as_deref()))?;
    let mut out = String::new();
    for c in &loaded.conversations {
        let boundaries = strata_topic::detect(&c.turns, &*embedder, &config)?;
        writeln!(
            out,
            "# {} ({} turns, {} segments, method {})",
            c.id,
            c.turns.len(),
            boundaries.len() + 1,
            args.method
        )?;
        let mut starts: Vec<usize> = vec![0];
        starts.extend(boundaries.iter().map(|b| b.index));
        for (k, &start) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(c.turns.len());
            if c.turns.is_empty() {
                break;
            }
            let (first, last) = (&c.turns[start].id, &c.turns[end - 1].id);
            let cause = match k {
                0 => "start of the conversation".to_string(),
                _ => boundaries[k - 1].cause.to_string(),
            };
            writeln!(out, "segment {}: {first}..{last} ({} turns): {cause}", k + 1, end - start)?;
            if args.explain && k > 0 {
                let opening: String = c.turns[start].content.chars().take(80).collect();
                writeln!(out, "    score {:.3}; opens with: {opening:?}", boundaries[k - 1].score)?;
            }
        }
    }
    Ok(out)
}
