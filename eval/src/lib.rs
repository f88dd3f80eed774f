//! Strata's evaluation harness: how much of a conversation each strategy keeps, at what
//! token cost, on public benchmarks and on seeded probe sets.
//!
//! The key design choice is that scores are aggregated from per-probe and per-build records
//! kept in a canonical order. A run split into shards (`--shard i/n`) writes its records, and
//! `merge` sorts the union and aggregates it with the same code, so the merged numbers equal a
//! single run's (the build times excepted, which no two runs share). Every metric is defined
//! once, in [`metrics`], and documented in the README.

pub mod gate;
pub mod metrics;
pub mod plot;
pub mod probes;
pub mod report;
pub mod retention;
pub mod suite;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use strata_core::Strategy;
use strata_strategies::StrategiesConfig;

use crate::report::Run;
use crate::retention::{BuildRecord, Mode, Plan, ProbeRecord};
use crate::suite::Dataset;

/// An error caused by the user's input: the CLI exits with status 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

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
    /// Show a progress bar on stderr (hidden anyway when stderr is not a terminal).
    pub progress: bool,
}

/// What `config` in `results.json` records about a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub datasets: Vec<String>,
    pub strategies: Vec<String>,
    pub budgets: Vec<usize>,
    pub modes: Vec<Mode>,
    pub tokenizer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
}

/// `results.json`. Its key names are read by other tools: keep them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub runs: Vec<Run>,
    pub config: RunConfig,
    /// Dataset name to the sha256 of its files.
    pub datasets: BTreeMap<String, String>,
    pub commit: String,
    /// Dataset quirks skipped and counted, one line each.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// The result of a run or a merge.
#[derive(Debug)]
pub struct Outcome {
    pub results: Results,
    /// The markdown table for stdout.
    pub markdown: String,
}

/// Runs the evaluation and writes its outputs under `config.out`.
pub fn run(config: &EvalConfig) -> Result<Outcome> {
    if config.budgets.is_empty() || config.strategies.is_empty() || config.modes.is_empty() {
        bail!(BadInput("nothing to run: give at least one strategy, budget and mode".into()));
    }
    let counter = strata_tokens::from_spec(&config.tokenizer)?;
    let strategies: Vec<Arc<dyn Strategy>> = config
        .strategies
        .iter()
        .map(|name| strata_strategies::build(name, &config.strategy_config, None).map(Arc::from))
        .collect::<Result<_, _>>()?;
    let mut budgets = config.budgets.clone();
    budgets.sort_unstable();
    budgets.dedup();
    let mut probes: Vec<ProbeRecord> = Vec::new();
    let mut builds: Vec<BuildRecord> = Vec::new();
    let mut hashes = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut names = Vec::new();
    for name in &config.datasets {
        let dataset = Dataset::resolve(name, &config.data_dir, &config.repo_root)?;
        hashes.insert(dataset.name.clone(), dataset.sha256()?);
        names.push(dataset.name.clone());
        let (conversations, w) = dataset.conversations()?;
        warnings.extend(w);
        let plan = Plan {
            dataset: &dataset.name,
            strategies: &strategies,
            budgets: &budgets,
            modes: &config.modes,
            counter: counter.clone(),
        };
        let bar = progress_bar(config.progress, &dataset.name);
        // Conversations are pulled lazily by the worker threads, so a streamed dataset is never
        // in memory whole; results are put back in order afterwards.
        let shard = config.shard;
        let mut scored: Vec<(usize, Result<(Vec<ProbeRecord>, Vec<BuildRecord>)>)> = conversations
            .enumerate()
            .filter(|(i, _)| shard.is_none_or(|s| s.takes(*i)))
            .par_bridge()
            .map(|(i, c)| {
                let r = c.and_then(|c| retention::score_conversation(&plan, i, &c));
                bar.inc(1);
                (i, r)
            })
            .collect();
        bar.finish_and_clear();
        scored.sort_by_key(|(i, _)| *i);
        for (_, r) in scored {
            let (p, b) = r?;
            probes.extend(p);
            builds.extend(b);
        }
    }
    let run_config = RunConfig {
        datasets: names,
        strategies: config.strategies.clone(),
        budgets,
        modes: config.modes.clone(),
        tokenizer: counter.name().to_string(),
        shard: config.shard,
    };
    finish(&config.out, run_config, hashes, commit(&config.repo_root), warnings, probes, builds)
}

/// Combines the outputs of shards (each a directory a run wrote) into one result, written
/// under `out`. The shards must come from the same configuration and cover every part once.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Outcome> {
    if dirs.is_empty() {
        bail!(BadInput("merge: name the directories the shards wrote".into()));
    }
    let mut probes = Vec::new();
    let mut builds = Vec::new();
    let mut first: Option<Results> = None;
    let mut seen = Vec::new();
    for dir in dirs {
        let results: Results = read_json(&dir.join("results.json"))?;
        probes.extend(read_jsonl::<ProbeRecord>(&dir.join("records.jsonl"))?);
        builds.extend(read_jsonl::<BuildRecord>(&dir.join("builds.jsonl"))?);
        let shard = results.config.shard;
        if let Some(f) = &first {
            let same = RunConfig { shard: None, ..results.config.clone() } == RunConfig { shard: None, ..f.config.clone() };
            if !same || results.datasets != f.datasets {
                bail!(BadInput(format!("{}: a different configuration or dataset than {}", dir.display(), dirs[0].display())));
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
    finish(out, config, first.datasets, first.commit, first.warnings, probes, builds)
}

fn finish(
    out: &Path,
    config: RunConfig,
    datasets: BTreeMap<String, String>,
    commit: String,
    warnings: Vec<String>,
    mut probes: Vec<ProbeRecord>,
    mut builds: Vec<BuildRecord>,
) -> Result<Outcome> {
    report::sort_records(&mut probes, &mut builds);
    let runs = report::aggregate(&probes, &builds, &config.datasets, &config.strategies);
    let results = Results { runs, config, datasets, commit, warnings };
    write_outputs(out, &results, &probes, &builds)?;
    let markdown = report::markdown(&results.runs);
    Ok(Outcome { results, markdown })
}

/// Checks `results` against a baseline `results.json`; returns the regressions.
pub fn check_baseline(results: &Results, baseline: &Path, tolerance: f64) -> Result<Vec<String>> {
    let base: Results = read_json(baseline)?;
    Ok(gate::compare(&base.runs, &results.runs, tolerance))
}

fn progress_bar(enabled: bool, dataset: &str) -> indicatif::ProgressBar {
    if !enabled {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg}: {pos} conversations, {elapsed} elapsed")
            .expect("a valid template"),
    );
    bar.set_message(dataset.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
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
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| BadInput(format!("{}:{}: {e}", path.display(), i + 1)).into()))
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

fn write_outputs(out: &Path, results: &Results, probes: &[ProbeRecord], builds: &[BuildRecord]) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| out.display().to_string())?;
    let jsonl = |items: &mut dyn Iterator<Item = Result<String, serde_json::Error>>| -> Result<String> {
        let mut s = String::new();
        for line in items {
            s.push_str(&line?);
            s.push('\n');
        }
        Ok(s)
    };
    write_atomic(&out.join("records.jsonl"), jsonl(&mut probes.iter().map(serde_json::to_string))?.as_bytes())?;
    write_atomic(&out.join("builds.jsonl"), jsonl(&mut builds.iter().map(serde_json::to_string))?.as_bytes())?;
    write_atomic(&out.join("results.csv"), report::csv(&results.runs).as_bytes())?;
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
