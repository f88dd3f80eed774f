//! `strata eval`: retention and token reduction of strategies on benchmark suites, with the
//! regression gate, sharding and `merge`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use strata_eval::Mode;
use strata_eval::{EvalConfig, Outcome, Shard};

use crate::BadInput;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct Args {
    #[command(subcommand)]
    merge: Option<MergeCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Subcommand, Debug)]
enum MergeCommand {
    /// Combine the output directories of `--shard` runs into one result.
    Merge {
        /// The directories the shards wrote.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        #[command(flatten)]
        gate: Gate,
        #[arg(long, default_value = "eval/out")]
        out: PathBuf,
    },
}

#[derive(clap::Args, Debug)]
struct Gate {
    /// Fail (exit 1) when a metric falls below this results.json's by more than --tolerance.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// How far below the baseline a metric may fall before the gate fails.
    #[arg(long, default_value_t = 0.0)]
    tolerance: f64,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Suites or transcript paths, comma-separated [default: locomo,probes]. Suites: locomo,
    /// locomo-sentences, qmsum, tiage, dialseg711, dialogsum, probes, probes-dev,
    /// probes-heldout, probes-paraphrased, probes-heldout-paraphrased, tiage-dev, qmsum-dev
    #[arg(long, value_delimiter = ',')]
    dataset: Vec<String>,
    /// Strategies, comma-separated [default: every one that runs without a model].
    #[arg(long, value_delimiter = ',', value_parser = crate::input::strategies())]
    strategy: Vec<String>,
    /// Token budgets, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,2000,4000", value_parser = crate::input::budget, allow_negative_numbers = true)]
    budget: Vec<usize>,
    /// Question-agnostic, question-aware, or both.
    #[arg(long, default_value = "both", value_parser = ["agnostic", "aware", "both"])]
    mode: String,
    /// Counts every budget and context: o200k, cl100k, or a tokenizer.json.
    #[arg(long, default_value = "o200k")]
    tokenizer: String,
    /// Where results.json, results.csv, the records and the charts go.
    #[arg(long, default_value = "eval/out")]
    out: PathBuf,
    /// Run part i of n (1-based) of the conversations; combine the parts with `merge`.
    #[arg(long, value_name = "i/n")]
    shard: Option<String>,
    /// Where the public datasets are [default: $STRATA_DATA, else ../shared/datasets].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Strategy settings, a TOML or JSON file with one table per strategy name.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Segmenters for datasets with gold topic boundaries, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "none,even-10,fixed,depth,combined")]
    segmenter: Vec<String>,
    /// Where model weights are [default: $STRATA_MODELS, else ./models, else the checkout's].
    #[arg(long, value_name = "DIR")]
    models_dir: Option<PathBuf>,
    /// Summarizers for datasets with reference summaries, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "lead-3")]
    summarizer: Vec<String>,
    /// A local model for segments-abstractive, summary-buffer and the `model` and `checked`
    /// summarizers: qwen, qwen1.5b, smollm2, a GGUF file, or an OpenAI-compatible endpoint as
    /// URL#MODEL (http://127.0.0.1:8080/v1#qwen).
    #[arg(long, value_name = "NAME|PATH")]
    model: Option<String>,
    /// Only the first N conversations of each dataset.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Sentence embeddings of the tiered memory and the topic detectors, or none (the tiered
    /// memory recalls by words alone; the topic detectors need one).
    #[arg(long, default_value = "minilm", value_parser = crate::models::names(strata_models::Kind::Embedder, true))]
    embedder: String,
    /// The cross-encoder that reranks the tiered memory's recall candidates for a question, or
    /// none (recall keeps its fused order). Scores are cached in the models folder's .cache.
    #[arg(long, default_value = "none", value_parser = crate::models::names(strata_models::Kind::Reranker, true))]
    reranker: String,
    /// Write every context built to contexts.jsonl in the output folder, each with the turn it
    /// was built after and its probe: what `strata compress --at` rebuilds.
    #[arg(long)]
    save_contexts: bool,
    /// Ask a reader model each question over each context and score its answers (LoCoMo's
    /// token F1, BLEU-1): qwen, qwen1.5b, smollm2, a GGUF file, or URL#MODEL. Answers are cached
    /// in the models folder's .cache, so a rerun asks nothing again.
    #[arg(long, value_name = "NAME|PATH|URL#MODEL")]
    reader: Option<String>,
    /// Judge the reader's answers CORRECT or WRONG with the Mem0 evaluation's prompt (the same
    /// kinds of model as --reader).
    #[arg(long, value_name = "NAME|PATH|URL#MODEL")]
    judge: Option<String>,
    /// Put only N questions of each category to the reader, the same ones for every strategy.
    #[arg(long, value_name = "N")]
    sample: Option<usize>,
    /// Hide the progress bar.
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    gate: Gate,
}

/// The repository root: the current directory when it holds the project's datasets, else the
/// checkout this binary was built from.
fn repo_root() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    if cwd.join(strata_eval::suite::PROBES_FILE).exists() {
        return cwd;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn data_dir(arg: Option<PathBuf>, root: &Path) -> PathBuf {
    if let Some(d) = arg {
        return d;
    }
    if let Some(d) = std::env::var_os("STRATA_DATA") {
        return PathBuf::from(d);
    }
    let beside = PathBuf::from("../shared/datasets");
    if beside.exists() {
        return beside;
    }
    root.join("../shared/datasets")
}

pub(crate) fn run(args: Args) -> Result<String> {
    let (outcome, gate, folder) = match args.merge {
        Some(MergeCommand::Merge { dirs, gate, out }) => (strata_eval::merge(&dirs, &out)?, gate, out),
        None => {
            let a = args.run;
            let root = repo_root();
            let strategy_config = crate::input::strategy_config(a.config.as_deref())?;
            let config = EvalConfig {
                datasets: if a.dataset.is_empty() {
                    strata_eval::suite::DEFAULT_SUITE.iter().map(|s| s.to_string()).collect()
                } else {
                    a.dataset
                },
                strategies: if a.strategy.is_empty() {
                    strata_eval::default_strategies().into_iter().map(String::from).collect()
                } else {
                    a.strategy
                },
                budgets: a.budget,
                modes: match a.mode.as_str() {
                    "agnostic" => vec![Mode::Agnostic],
                    "aware" => vec![Mode::Aware],
                    _ => vec![Mode::Agnostic, Mode::Aware],
                },
                tokenizer: a.tokenizer,
                out: a.out,
                shard: a.shard.as_deref().map(Shard::parse).transpose()?,
                data_dir: data_dir(a.data_dir, &root),
                strategy_config,
                segmenters: a.segmenter,
                models_dir: crate::models::dir(a.models_dir.as_deref()),
                summarizers: a.summarizer,
                repo_root: root,
                progress: !a.quiet,
                generator: a.model,
                limit: a.limit,
                embedder: a.embedder,
                reranker: a.reranker,
                save_contexts: a.save_contexts,
                reader: a.reader,
                judge: a.judge,
                sample: a.sample,
            };
            let folder = config.out.clone();
            let embeds =
                config.embedder != "none" && config.strategies.iter().any(|s| strata::catalog::needs(s).embedder);
            if embeds && !config.models_dir.join(".cache").is_dir() {
                #[allow(clippy::print_stderr)]
                {
                    eprintln!(
                        "strata eval: the first run embeds every turn and question ({}; about 5 minutes for the \
                         default suite on 2 cores); later runs read the vectors from {}",
                        config.embedder,
                        config.models_dir.join(".cache").display()
                    );
                }
            }
            (strata_eval::run(&config)?, a.gate, folder)
        }
    };
    report(outcome, &gate, &folder)
}

fn report(outcome: Outcome, gate: &Gate, folder: &Path) -> Result<String> {
    // On one screen: the headline metrics, with where everything else went. The other
    // tables (segmentation, summaries) are short and printed whole.
    let results = &outcome.results;
    if let Some(r) = outcome.reranked {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "reranking: {} question-aware contexts reranked, {:.1} passages each; {} cut short by a failed model call ({:.1}%)",
                r.contexts,
                r.passages_per_context(),
                r.cut_short,
                100.0 * r.cut_short_share()
            );
        }
    }
    let probes: usize = results.runs.iter().map(|r| r.probes).sum();
    if probes == 0 && results.segmentation.is_empty() && results.summaries.is_empty() {
        return Err(BadInput(
            "nothing to score: the datasets hold no probes (a transcript's `probes` field, docs/format.md) and no \
             segmentation or summary references"
                .to_string(),
        )
        .into());
    }
    let folder = folder.display();
    let mut out = if results.runs.is_empty() {
        outcome.markdown.clone()
    } else {
        let mut s = strata_eval::report::summary(&results.runs);
        s.push_str(&format!("\n{}\n", strata_eval::report::LEGEND));
        let mut rest = results.clone();
        rest.runs.clear();
        if !results.answers.is_empty() {
            s.push('\n');
            s.push_str(strata_eval::answers::LEGEND);
            s.push('\n');
        }
        let others = strata_eval::report::markdown(&rest);
        if !others.is_empty() {
            s.push('\n');
            s.push_str(&others);
        }
        s
    };
    out.push_str(&format!(
        "\nfull table (build times, answer recall, every mode): {folder}/results.md; scores {folder}/results.json, \
         per question {folder}/records.jsonl, plots {folder}/*.svg\n"
    ));
    let warnings = &outcome.results.warnings;
    if !warnings.is_empty() {
        out.push_str(&format!("\n{} dataset warnings (skipped and counted; listed in results.json)\n", warnings.len()));
    }
    let Some(baseline) = &gate.baseline else {
        return Ok(out);
    };
    let regressions = strata_eval::check_baseline(&outcome.results, baseline, gate.tolerance)?;
    if regressions.is_empty() {
        out.push_str(&format!("\ngate: no metric fell below {} by more than {}\n", baseline.display(), gate.tolerance));
        return Ok(out);
    }
    // The table still goes to stdout: a failed gate is a result, not a crash.
    #[allow(clippy::print_stdout)]
    {
        print!("{out}");
    }
    let list: Vec<String> = regressions.iter().map(|r| format!("  {r}")).collect();
    bail!(GateFailed(format!("{} regressions against {}:\n{}", regressions.len(), baseline.display(), list.join("\n"))))
}

/// The gate found a regression: exit status 1.
#[derive(Debug)]
struct GateFailed(String);

impl std::fmt::Display for GateFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GateFailed {}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// `strata eval --help` names every suite.
    #[test]
    fn eval_help_names_every_suite() {
        let cli = crate::Cli::command();
        let eval = cli.find_subcommand("eval").unwrap();
        let arg = eval.get_arguments().find(|a| a.get_long() == Some("dataset")).unwrap();
        let datasets = arg.get_help().map(ToString::to_string).unwrap_or_default();
        for suite in strata_eval::suite::SUITES {
            assert!(datasets.split([' ', ',', '.']).any(|w| w == *suite), "--dataset help lacks {suite}: {datasets}");
        }
    }
}
