//! Strata's evaluation harness: how much of a conversation each strategy keeps, at what
//! token cost, on public benchmarks and on seeded probe sets.
//!
//! The key design choice is that scores are aggregated from per-probe and per-build records
//! kept in a canonical order. A run split into shards (`--shard i/n`) writes its records, and
//! `merge` sorts the union and aggregates it with the same code, so the merged numbers equal a
//! single run's (the build times excepted, which no two runs share). Every metric is defined
//! once, in [`metrics`], and documented in the README.

pub mod answers;
pub mod gate;
pub mod metrics;
mod mode;
pub mod plot;
mod porter;
pub mod progress;
pub mod report;
pub mod retention;
pub mod segmentation;
pub mod suite;
pub mod summaries;

pub use mode::Mode;

/// The strategies a run compares when none are named: every strategy of the catalog that runs
/// without a model (the CLI and Python read the same list, so both compare the same).
pub fn default_strategies() -> Vec<&'static str> {
    strata::catalog::default_names()
}

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use strata::StrategiesConfig;
use strata_core::{BadInput, Strategy};

use crate::progress::Progress;
use crate::report::Run;
use crate::retention::{BuildRecord, ContextRecord, ProbeRecord, Sweep};
use crate::suite::Dataset;

/// One part of a run split across machines: conversations whose index modulo `count` is
/// `index - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1-based.
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Parses `i/n` with 1 ≤ i ≤ n.
    pub fn parse(s: &str) -> Result<Shard> {
        let parsed = s.split_once('/').and_then(|(i, n)| Some((i.parse().ok()?, n.parse().ok()?)));
        match parsed {
            Some((index, count)) if index >= 1 && index <= count => Ok(Shard { index, count }),
            _ => bail!(BadInput(format!("--shard `{s}`: expected i/n with 1 <= i <= n, such as 2/8"))),
        }
    }

    fn takes(&self, conversation_index: usize) -> bool {
        conversation_index % self.count == self.index - 1
    }
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct EvalConfig {
    /// Suite names or transcript paths.
    pub datasets: Vec<String>,
    pub strategies: Vec<String>,
    pub budgets: Vec<usize>,
    pub modes: Vec<Mode>,
    pub tokenizer: String,
    pub out: PathBuf,
    pub shard: Option<Shard>,
    pub data_dir: PathBuf,
    pub repo_root: PathBuf,
    pub strategy_config: StrategiesConfig,
    /// Segmentation methods for datasets with gold topic boundaries.
    pub segmenters: Vec<String>,
    /// Where model weights are (`models/` or `STRATA_MODELS`); embeddings are cached in its
    /// `.cache` folder.
    pub models_dir: PathBuf,
    /// Summarizers for datasets with reference summaries.
    pub summarizers: Vec<String>,
    /// Show progress on stderr: a bar on a terminal, a line every ten seconds elsewhere.
    pub progress: bool,
    /// The local model (`qwen`, `smollm2` or a GGUF path) for `segments-abstractive`,
    /// `summary-buffer` and the `model` and `checked` summarizers; answers are cached in the
    /// models folder's `.cache`.
    pub generator: Option<String>,
    /// Only the first N conversations of each dataset (abstractive runs are slow on CPU).
    pub limit: Option<usize>,
    /// The sentence embedder of the tiered memory and the topic detectors (an alias of
    /// [`strata_models::aliases`]), or `none` (the tiered memory recalls by words alone; the topic detectors need one).
    pub embedder: String,
    /// The cross-encoder that reranks the tiered memory's recall candidates: `msmarco` or
    /// `none`.
    pub reranker: String,
    /// Write every context built to `contexts.jsonl` beside the records.
    pub save_contexts: bool,
    /// Answers: a reader model (`qwen`, `qwen1.5b`, `smollm2`, a GGUF path or `URL#MODEL`)
    /// asked each question over each context; answers cached in the models folder's `.cache`.
    pub reader: Option<String>,
    /// A judge of the reader's answers (the same kinds of name), with the Mem0 prompt.
    pub judge: Option<String>,
    /// Put only this many questions of each category to the reader (the same ones for every
    /// strategy); the abstention category is never asked.
    pub sample: Option<usize>,
}

/// What `config` in `results.json` records about a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub datasets: Vec<String>,
    pub strategies: Vec<String>,
    pub budgets: Vec<usize>,
    pub modes: Vec<Mode>,
    pub tokenizer: String,
    #[serde(default)]
    pub segmenters: Vec<String>,
    #[serde(default)]
    pub summarizers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// The sentence embedder (runs before it was recorded used MiniLM).
    #[serde(default = "default_embedder")]
    pub embedder: String,
    /// The reranker (runs before it was recorded had none).
    #[serde(default = "default_reranker")]
    pub reranker: String,
    /// Every strategy's settings as the run used them, defaults filled in (`--config`'s
    /// tables; runs before it was recorded used the defaults of their commit).
    #[serde(default)]
    pub settings: StrategiesConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<usize>,
    /// The reader's and the judge's prompts, with a reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<answers::Prompts>,
}

fn default_embedder() -> String {
    "minilm".to_string()
}

fn default_reranker() -> String {
    "none".to_string()
}

/// `results.json`. Its key names are read by other tools: keep them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub runs: Vec<Run>,
    /// Topic segmentation against gold boundaries, per dataset and method.
    #[serde(default)]
    pub segmentation: Vec<segmentation::SegmentationRun>,
    /// Summaries against reference summaries, per dataset and method.
    #[serde(default)]
    pub summaries: Vec<summaries::SummaryRun>,
    /// A reader's answers, per dataset, strategy, budget and mode (with `--reader`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<answers::AnswerRun>,
    pub config: RunConfig,
    /// Dataset name to the sha256 of its files.
    pub datasets: BTreeMap<String, String>,
    pub commit: String,
    /// Dataset quirks skipped and counted, one line each.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// Every record a run produces; what shards write and `merge` reads back.
#[derive(Debug, Default)]
pub struct Records {
    pub probes: Vec<ProbeRecord>,
    pub builds: Vec<BuildRecord>,
    pub segments: Vec<segmentation::SegmentRecord>,
    pub summaries: Vec<summaries::SummaryRecord>,
    /// Every context built, with `save_contexts`; not read back by `merge`.
    pub contexts: Vec<ContextRecord>,
    /// The questions a reader will answer, with their contexts; never written.
    pub questions: Vec<answers::Question>,
    /// The reader's answers, scored.
    pub answers: Vec<answers::AnswerRecord>,
}

impl Records {
    fn extend(&mut self, other: Records) {
        self.probes.extend(other.probes);
        self.builds.extend(other.builds);
        self.contexts.extend(other.contexts);
        self.questions.extend(other.questions);
        self.answers.extend(other.answers);
        self.segments.extend(other.segments);
        self.summaries.extend(other.summaries);
    }
}

/// The result of a run or a merge.
#[derive(Debug)]
pub struct Outcome {
    pub results: Results,
    /// The markdown table for stdout.
    pub markdown: String,
    /// Every record the results were aggregated from, in their canonical order.
    pub records: Records,
    /// With a reranker: the question-aware contexts it reranked, how many of them were cut
    /// short (a failed model call; an evaluation sets no time budget), the passages it read.
    pub reranked: Option<strata::RerankCounts>,
}

/// Runs the evaluation and writes its outputs under `config.out`.
pub fn run(config: &EvalConfig) -> Result<Outcome> {
    if config.budgets.is_empty() || config.strategies.is_empty() || config.modes.is_empty() {
        bail!(BadInput("nothing to run: give at least one strategy, budget and mode".into()));
    }
    let counter = strata_tokens::from_spec(&config.tokenizer)?;
    // The generator loads once, and only if something asks for it.
    let mut generator: Option<Arc<dyn strata_core::Generator>> = None;
    let mut load_generator = || -> Result<Arc<dyn strata_core::Generator>> {
        if let Some(g) = &generator {
            return Ok(g.clone());
        }
        let Some(name) = &config.generator else {
            bail!(BadInput(
                "this strategy or summarizer needs a local model: pass --model qwen, qwen1.5b, smollm2, a GGUF path or URL#MODEL".into()
            ));
        };
        let g = strata_models::generator(name, &config.models_dir)?;
        generator = Some(g.clone());
        Ok(g)
    };
    // The embedder loads only if something needs it: the tiered memory, or a topic detector
    // on a dataset scored by segmentation.
    let mut embedder: Option<Arc<dyn strata_core::Embedder>> = None;
    let mut load_embedder = || -> Result<Arc<dyn strata_core::Embedder>> {
        if let Some(e) = &embedder {
            return Ok(e.clone());
        }
        if config.embedder == "none" {
            let known = strata_models::aliases(strata_models::Kind::Embedder).join(", ");
            bail!(BadInput(format!(
                "the topic detectors (fixed, depth, combined) need an embedder: pass --embedder {known}, or --segmenter none,even-10"
            )));
        }
        let e = strata_models::cached_embedder(&config.embedder, &config.models_dir).with_context(|| {
            format!(
                "the tiered memory and the topic detectors (fixed, depth, combined) embed with {}: run \
                 `cargo xtask fetch-models`, or leave out `tiered` and pass --segmenter none,even-10",
                config.embedder
            )
        })?;
        embedder = Some(e.clone());
        Ok(e)
    };
    // The reranker loads only for the tiered memory. No deadline: an evaluation's contexts
    // must not depend on how busy the machine is.
    let mut reranking: Option<Arc<strata::Reranking>> = None;
    let mut load_reranker = || -> Result<Option<Arc<strata::Reranking>>> {
        if config.reranker == "none" {
            return Ok(None);
        }
        if reranking.is_none() {
            let model = strata_models::cached_reranker(&config.reranker, &config.models_dir).with_context(|| {
                format!(
                    "the tiered memory reranks with {0}: run `cargo xtask fetch-models {0}`, or pass --reranker none",
                    config.reranker
                )
            })?;
            reranking = Some(Arc::new(strata::Reranking::new(model, None)));
        }
        Ok(reranking.clone())
    };
    // The reader and the judge open first: a wrong name fails before hours of work.
    let open_reader = |name: &str, role: &str| {
        strata_models::cached_generator(name, &config.models_dir).with_context(|| {
            format!("--{role} {name}: run `cargo xtask fetch-models`, or give a GGUF path or URL#MODEL")
        })
    };
    let reader = match &config.reader {
        Some(name) => Some(answers::Reader {
            reader: open_reader(name, "reader")?,
            judge: config.judge.as_deref().map(|j| open_reader(j, "judge")).transpose()?,
            deadline: None,
        }),
        None if config.judge.is_some() => {
            bail!(BadInput("--judge judges a reader's answers: give --reader too".into()))
        }
        None => None,
    };
    let strategies: Vec<Arc<dyn Strategy>> = config
        .strategies
        .iter()
        .map(|name| {
            // The embedder and reranker are opened only for a strategy that reads them.
            let needs = strata::catalog::needs(name);
            let g = if config.generator.is_some() { Some(load_generator()?) } else { None };
            let e = if needs.embedder && config.embedder != "none" { Some(load_embedder()?) } else { None };
            let reranker = if needs.reranker { load_reranker()? } else { None };
            let models = strata::catalog::Models { generator: g, embedder: e, reranker };
            Ok(strata::catalog::build(name, &config.strategy_config, &models)?)
        })
        .collect::<Result<_>>()?;
    let mut budgets = config.budgets.clone();
    budgets.sort_unstable();
    budgets.dedup();
    let datasets: Vec<Dataset> = config
        .datasets
        .iter()
        .map(|d| Dataset::resolve(d, &config.data_dir, &config.repo_root))
        .collect::<Result<_>>()?;
    let any_segmentation = datasets.iter().any(|d| d.suites().segmentation);
    let segmenters: Vec<Box<dyn segmentation::Segmenter>> = if any_segmentation {
        config.segmenters.iter().map(|n| segmentation::by_name(n, &mut load_embedder)).collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    let summarizers: Vec<Box<dyn summaries::Summarizer>> =
        config.summarizers.iter().map(|n| summaries::by_name(n, &mut load_generator)).collect::<Result<_>>()?;
    let mut records = Records::default();
    let mut hashes = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut names = Vec::new();
    for dataset in &datasets {
        hashes.insert(dataset.name.clone(), dataset.sha256()?);
        names.push(dataset.name.clone());
        let (conversations, w) = dataset.conversations()?;
        warnings.extend(w);
        let suites = dataset.suites();
        let total = dataset.len_hint().map(|n| match config.shard {
            Some(s) => (0..n).filter(|&i| s.takes(i)).count(),
            None => n,
        });
        let shard = config.shard;
        let taken = |i: usize| i < config.limit.unwrap_or(usize::MAX) && shard.is_none_or(|s| s.takes(i));
        let ask = match &reader {
            Some(_) if suites.retention => Some(sample(dataset, config.sample, taken)?),
            _ => None,
        };
        let plan = Sweep {
            dataset: &dataset.name,
            strategies: &strategies,
            budgets: &budgets,
            modes: &config.modes,
            counter: counter.clone(),
            save_contexts: config.save_contexts,
            ask: ask.as_ref(),
        };
        let bar = Progress::new(config.progress, &dataset.name, total, "conversations");
        // Conversations are pulled lazily by the worker threads, so a streamed dataset is never
        // in memory whole; results are put back in order afterwards.
        let mut scored: Vec<(usize, Result<Records>)> = conversations
            .enumerate()
            .take(config.limit.unwrap_or(usize::MAX))
            .filter(|(i, _)| taken(*i))
            .par_bridge()
            .map(|(i, c)| {
                let r = c.and_then(|c| {
                    let mut out = Records::default();
                    if suites.retention {
                        out = retention::score_conversation(&plan, i, &c)?;
                    }
                    if suites.segmentation {
                        out.segments =
                            segmentation::score(&dataset.name, i, &c, &segmenters, !suites.gold_is_complete)?;
                    }
                    if suites.summaries {
                        out.summaries = summaries::score(&dataset.name, i, &c, &summarizers)?;
                    }
                    Ok(out)
                });
                bar.inc();
                (i, r)
            })
            .collect();
        bar.finish();
        scored.sort_by_key(|(i, _)| *i);
        for (_, r) in scored {
            records.extend(r?);
        }
    }
    if let Some(reader) = &reader {
        let mut questions = std::mem::take(&mut records.questions);
        let bar = Progress::new(config.progress, "reader", Some(questions.len()), "answers");
        records.answers = answers::ask(&mut questions, reader, &|| bar.inc());
        bar.finish();
    }
    let run_config = RunConfig {
        datasets: names,
        strategies: config.strategies.clone(),
        budgets,
        modes: config.modes.clone(),
        tokenizer: counter.name().to_string(),
        segmenters: config.segmenters.clone(),
        summarizers: config.summarizers.clone(),
        shard: config.shard,
        generator: config.generator.clone(),
        limit: config.limit,
        embedder: config.embedder.clone(),
        reranker: config.reranker.clone(),
        settings: config.strategy_config.clone(),
        reader: config.reader.clone(),
        judge: config.judge.clone(),
        sample: config.sample,
        prompts: config.reader.as_ref().map(|_| answers::Prompts::current(config.judge.is_some())),
    };
    let mut outcome = finish(&config.out, run_config, hashes, commit(&config.repo_root), warnings, records)?;
    outcome.reranked = reranking.map(|r| r.counts());
    Ok(outcome)
}

/// Combines the outputs of shards (each a directory a run wrote) into one result, written
/// under `out`. The shards must come from the same configuration and cover every part once.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Outcome> {
    if dirs.is_empty() {
        bail!(BadInput("merge: name the directories the shards wrote".into()));
    }
    let mut records = Records::default();
    let mut first: Option<Results> = None;
    let mut seen = Vec::new();
    for dir in dirs {
        let results: Results = read_json(&dir.join("results.json"))?;
        records.extend(Records {
            probes: read_jsonl(&dir.join("records.jsonl"))?,
            builds: read_jsonl(&dir.join("builds.jsonl"))?,
            segments: read_jsonl(&dir.join("segments.jsonl"))?,
            summaries: read_jsonl(&dir.join("summaries.jsonl"))?,
            answers: if dir.join("answers.jsonl").exists() {
                read_jsonl(&dir.join("answers.jsonl"))?
            } else {
                Vec::new()
            },
            ..Records::default()
        });
        let shard = results.config.shard;
        if let Some(f) = &first {
            let same =
                RunConfig { shard: None, ..results.config.clone() } == RunConfig { shard: None, ..f.config.clone() };
            if !same || results.datasets != f.datasets {
                bail!(BadInput(format!(
                    "{}: a different configuration or dataset than {}",
                    dir.display(),
                    dirs[0].display()
                )));
            }
            if shard.map(|s| s.count) != f.config.shard.map(|s| s.count) {
                bail!(BadInput(format!("{}: shards of different splits", dir.display())));
            }
        }
        if let Some(s) = shard {
            if seen.contains(&s.index) {
                bail!(BadInput(format!("{}: shard {}/{} given twice", dir.display(), s.index, s.count)));
            }
            seen.push(s.index);
        }
        if first.is_none() {
            first = Some(results);
        }
    }
    let first = first.expect("at least one directory");
    if let Some(s) = first.config.shard {
        if seen.len() != s.count {
            bail!(BadInput(format!("merge: {} of {} shards given", seen.len(), s.count)));
        }
    }
    let config = RunConfig { shard: None, ..first.config };
    finish(out, config, first.datasets, first.commit, first.warnings, records)
}

fn finish(
    out: &Path,
    config: RunConfig,
    datasets: BTreeMap<String, String>,
    commit: String,
    warnings: Vec<String>,
    mut records: Records,
) -> Result<Outcome> {
    report::sort_records(&mut records.probes, &mut records.builds);
    records.segments.sort_by(|a, b| {
        (&a.dataset, a.conversation_index, &a.method).cmp(&(&b.dataset, b.conversation_index, &b.method))
    });
    records.summaries.sort_by(|a, b| {
        (&a.dataset, a.conversation_index, &a.method).cmp(&(&b.dataset, b.conversation_index, &b.method))
    });
    let runs = report::aggregate(&records.probes, &records.builds, &config.datasets, &config.strategies);
    let segmentation = segmentation::aggregate(&records.segments, &config.datasets, &config.segmenters);
    let summaries = summaries::aggregate(&records.summaries, &config.datasets, &config.summarizers);
    records.answers.sort_by(|a, b| {
        (&a.dataset, &a.strategy, a.budget, a.mode, a.conversation_index, a.probe_index).cmp(&(
            &b.dataset,
            &b.strategy,
            b.budget,
            b.mode,
            b.conversation_index,
            b.probe_index,
        ))
    });
    let answers = answers::aggregate(&records.answers, &config.datasets, &config.strategies);
    let results = Results { runs, segmentation, summaries, answers, config, datasets, commit, warnings };
    write_outputs(out, &results, &records)?;
    let markdown = report::markdown(&results);
    Ok(Outcome { results, markdown, records, reranked: None })
}

/// Checks `results` against a baseline `results.json`; returns the regressions.
pub fn check_baseline(results: &Results, baseline: &Path, tolerance: f64) -> Result<Vec<String>> {
    let base: Results = read_json(baseline)?;
    Ok(gate::compare(&base, results, tolerance))
}

/// The probes a reader answers, as (conversation index, probe index): with `per_category`,
/// that many of each category across the conversations `taken` accepts, chosen by the hash of
/// their conversation and probe ids (the same sample for every strategy and every run); else
/// all. Abstention questions are never asked: their answer is that the conversation does not
/// say, which LoCoMo and the published tables score apart.
fn sample(
    dataset: &Dataset,
    per_category: Option<usize>,
    taken: impl Fn(usize) -> bool,
) -> Result<BTreeSet<(usize, usize)>> {
    let (conversations, _) = dataset.conversations()?;
    let mut by_category: BTreeMap<String, Vec<(String, usize, usize)>> = BTreeMap::new();
    for (i, c) in conversations.enumerate() {
        if !taken(i) {
            continue;
        }
        let c = c?;
        for (pi, p) in c.probes.iter().enumerate().filter(|(_, p)| !retention::is_abstention(p)) {
            let key = strata_text::sha256_hex(format!("{}\0{}", c.id, p.id).as_bytes())?;
            by_category.entry(p.category.clone().unwrap_or_default()).or_default().push((key, i, pi));
        }
    }
    let mut chosen = BTreeSet::new();
    for mut probes in by_category.into_values() {
        probes.sort();
        chosen.extend(probes.into_iter().take(per_category.unwrap_or(usize::MAX)).map(|(_, i, pi)| (i, pi)));
    }
    Ok(chosen)
}

fn commit(repo_root: &Path) -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo_root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".to_string())
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| BadInput(format!("{}: {e}", path.display())).into())
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| BadInput(format!("{}:{}: {e}", path.display(), i + 1)).into())
        })
        .collect()
}

/// Writes a file whole or not at all: to a temporary name, then renamed into place.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).with_context(|| tmp.display().to_string())?;
    f.write_all(bytes).and_then(|()| f.sync_all()).with_context(|| tmp.display().to_string())?;
    std::fs::rename(&tmp, path).with_context(|| path.display().to_string())?;
    Ok(())
}

fn write_outputs(out: &Path, results: &Results, records: &Records) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| out.display().to_string())?;
    let jsonl = |items: &mut dyn Iterator<Item = Result<String, serde_json::Error>>| -> Result<String> {
        let mut s = String::new();
        for line in items {
            s.push_str(&line?);
            s.push('\n');
        }
        Ok(s)
    };
    write_atomic(&out.join("records.jsonl"), jsonl(&mut records.probes.iter().map(serde_json::to_string))?.as_bytes())?;
    write_atomic(&out.join("builds.jsonl"), jsonl(&mut records.builds.iter().map(serde_json::to_string))?.as_bytes())?;
    write_atomic(
        &out.join("segments.jsonl"),
        jsonl(&mut records.segments.iter().map(serde_json::to_string))?.as_bytes(),
    )?;
    write_atomic(
        &out.join("summaries.jsonl"),
        jsonl(&mut records.summaries.iter().map(serde_json::to_string))?.as_bytes(),
    )?;
    if !records.contexts.is_empty() {
        write_atomic(
            &out.join("contexts.jsonl"),
            jsonl(&mut records.contexts.iter().map(serde_json::to_string))?.as_bytes(),
        )?;
    }
    if !records.answers.is_empty() {
        write_atomic(
            &out.join("answers.jsonl"),
            jsonl(&mut records.answers.iter().map(serde_json::to_string))?.as_bytes(),
        )?;
        for dataset in &results.config.datasets {
            let runs: Vec<&answers::AnswerRun> = results.answers.iter().filter(|r| &r.dataset == dataset).collect();
            if runs.is_empty() {
                continue;
            }
            let tmp = out.join(format!("answers-{dataset}.svg.tmp"));
            plot::answers(&tmp, dataset, &runs)?;
            std::fs::rename(&tmp, out.join(format!("answers-{dataset}.svg")))?;
        }
    }
    write_atomic(&out.join("results.csv"), report::csv(&results.runs).as_bytes())?;
    write_atomic(&out.join("results.md"), report::markdown(results).as_bytes())?;
    for dataset in &results.config.datasets {
        for mode in &results.config.modes {
            let runs: Vec<&Run> = results.runs.iter().filter(|r| &r.dataset == dataset && r.mode == *mode).collect();
            if runs.is_empty() {
                continue;
            }
            let tmp = out.join(format!("pareto-{dataset}-{}.svg.tmp", mode.as_str()));
            plot::pareto(&tmp, dataset, *mode, &runs, &results.config.strategies)?;
            std::fs::rename(&tmp, out.join(format!("pareto-{dataset}-{}.svg", mode.as_str())))?;
            let budget = results.config.budgets[results.config.budgets.len() / 2];
            let tmp = out.join(format!("categories-{dataset}-{}.svg.tmp", mode.as_str()));
            plot::categories(&tmp, dataset, budget, *mode, &runs, &results.config.strategies)?;
            std::fs::rename(&tmp, out.join(format!("categories-{dataset}-{}.svg", mode.as_str())))?;
        }
    }
    // results.json last: its presence says the rest is complete.
    write_atomic(&out.join("results.json"), (serde_json::to_string_pretty(results)? + "\n").as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests;
