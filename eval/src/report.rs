//! Aggregating probe and build records into runs, and writing them as a markdown table,
//! `results.json` and `results.csv`.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::metrics::quantile;
use crate::retention::{BuildRecord, ProbeRecord};
use crate::Mode;

/// Scores of one group of probes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CategoryScores {
    pub probes: usize,
    pub evidence_probes: usize,
    pub evidence_recall: f64,
    pub answer_recall: f64,
    pub answer_token_recall: f64,
    /// Abstention probes only: the share whose tempting wrong answer is in the context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adversarial_answer_rate: Option<f64>,
}

/// One dataset × strategy × budget × mode. The key names are read by other tools: keep them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub dataset: String,
    pub strategy: String,
    pub budget: usize,
    pub mode: Mode,
    /// Answerable probes (abstention probes are scored apart, under `abstention`).
    pub probes: usize,
    /// Answerable probes that name evidence turns; the denominator of evidence recall.
    pub evidence_probes: usize,
    pub evidence_recall: f64,
    pub evidence_recall_partial: f64,
    pub answer_recall: f64,
    pub answer_token_recall: f64,
    /// Mean over context builds of 1 − context tokens / history tokens.
    pub token_reduction: f64,
    pub token_reduction_p10: f64,
    pub token_reduction_p50: f64,
    pub token_reduction_p90: f64,
    pub context_tokens_mean: f64,
    pub history_tokens_mean: f64,
    pub builds: usize,
    pub build_ms_p50: f64,
    pub build_ms_p95: f64,
    pub summarizer_calls: usize,
    pub generated_tokens: usize,
    pub by_category: BTreeMap<String, CategoryScores>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abstention: Option<CategoryScores>,
}

/// The metrics the regression gate compares, higher is better for all of them.
pub const GATED_METRICS: &[&str] =
    &["evidence_recall", "evidence_recall_partial", "answer_recall", "answer_token_recall", "token_reduction"];

impl Run {
    pub fn key(&self) -> String {
        format!("{}/{}/{}/{}", self.dataset, self.strategy, self.budget, self.mode.as_str())
    }

    /// The gated metrics by name, the per-category ones as `by_category.CAT.METRIC`.
    pub fn gated(&self) -> Vec<(String, f64)> {
        let mut out = vec![
            ("evidence_recall".to_string(), self.evidence_recall),
            ("evidence_recall_partial".to_string(), self.evidence_recall_partial),
            ("answer_recall".to_string(), self.answer_recall),
            ("answer_token_recall".to_string(), self.answer_token_recall),
            ("token_reduction".to_string(), self.token_reduction),
        ];
        for (cat, s) in &self.by_category {
            out.push((format!("by_category.{cat}.evidence_recall"), s.evidence_recall));
            out.push((format!("by_category.{cat}.answer_recall"), s.answer_recall));
        }
        out
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

fn category_scores(records: &[&ProbeRecord]) -> CategoryScores {
    let with_evidence: Vec<&&ProbeRecord> = records.iter().filter(|r| r.has_evidence).collect();
    let abstention = records.iter().all(|r| r.abstention) && !records.is_empty();
    CategoryScores {
        probes: records.len(),
        evidence_probes: with_evidence.len(),
        evidence_recall: mean(with_evidence.iter().map(|r| f64::from(u8::from(r.evidence_hit)))),
        answer_recall: if abstention { 0.0 } else { mean(records.iter().map(|r| f64::from(u8::from(r.answer_hit)))) },
        answer_token_recall: if abstention { 0.0 } else { mean(records.iter().map(|r| r.answer_token_recall)) },
        adversarial_answer_rate: abstention
            .then(|| mean(records.iter().map(|r| f64::from(u8::from(r.adversarial_hit))))),
    }
}

/// Puts records in their canonical order, so that aggregates (and float sums) are the same
/// however the work was split.
pub fn sort_records(probes: &mut [ProbeRecord], builds: &mut [BuildRecord]) {
    probes.sort_by(|a, b| {
        (&a.dataset, a.conversation_index, a.probe_index, &a.strategy, a.budget, a.mode).cmp(&(
            &b.dataset,
            b.conversation_index,
            b.probe_index,
            &b.strategy,
            b.budget,
            b.mode,
        ))
    });
    builds.sort_by(|a, b| {
        (&a.dataset, a.conversation_index, a.position, &a.strategy, a.budget, a.mode, &a.probe).cmp(&(
            &b.dataset,
            b.conversation_index,
            b.position,
            &b.strategy,
            b.budget,
            b.mode,
            &b.probe,
        ))
    });
}

/// Aggregates sorted records into runs, ordered by dataset, strategy and budget as `order`
/// lists them, then mode.
pub fn aggregate(
    probes: &[ProbeRecord],
    builds: &[BuildRecord],
    datasets: &[String],
    strategies: &[String],
) -> Vec<Run> {
    type Key = (usize, usize, usize, Mode);
    let pos = |list: &[String], x: &str| list.iter().position(|s| s == x).unwrap_or(usize::MAX);
    let mut probe_groups: BTreeMap<Key, Vec<&ProbeRecord>> = BTreeMap::new();
    for r in probes {
        probe_groups
            .entry((pos(datasets, &r.dataset), pos(strategies, &r.strategy), r.budget, r.mode))
            .or_default()
            .push(r);
    }
    let mut build_groups: BTreeMap<Key, Vec<&BuildRecord>> = BTreeMap::new();
    for b in builds {
        build_groups
            .entry((pos(datasets, &b.dataset), pos(strategies, &b.strategy), b.budget, b.mode))
            .or_default()
            .push(b);
    }
    let mut runs = Vec::new();
    for (key, recs) in &probe_groups {
        let first = recs[0];
        let answerable: Vec<&ProbeRecord> = recs.iter().copied().filter(|r| !r.abstention).collect();
        let abstaining: Vec<&ProbeRecord> = recs.iter().copied().filter(|r| r.abstention).collect();
        let all = category_scores(&answerable);
        let mut by_category: BTreeMap<String, Vec<&ProbeRecord>> = BTreeMap::new();
        for r in recs {
            by_category.entry(r.category.clone()).or_default().push(r);
        }
        let built = build_groups.get(key).map(Vec::as_slice).unwrap_or_default();
        let reductions: Vec<f64> = built
            .iter()
            .map(|b| if b.history_tokens == 0 { 0.0 } else { 1.0 - b.context_tokens as f64 / b.history_tokens as f64 })
            .collect();
        let ms: Vec<f64> = built.iter().map(|b| b.build_ms).collect();
        let with_evidence: Vec<&&ProbeRecord> = answerable.iter().filter(|r| r.has_evidence).collect();
        runs.push(Run {
            dataset: first.dataset.clone(),
            strategy: first.strategy.clone(),
            budget: first.budget,
            mode: first.mode,
            probes: answerable.len(),
            evidence_probes: all.evidence_probes,
            evidence_recall: all.evidence_recall,
            evidence_recall_partial: mean(with_evidence.iter().map(|r| r.evidence_partial)),
            answer_recall: all.answer_recall,
            answer_token_recall: all.answer_token_recall,
            token_reduction: mean(reductions.iter().copied()),
            token_reduction_p10: quantile(&reductions, 0.1),
            token_reduction_p50: quantile(&reductions, 0.5),
            token_reduction_p90: quantile(&reductions, 0.9),
            context_tokens_mean: mean(built.iter().map(|b| b.context_tokens as f64)),
            history_tokens_mean: mean(built.iter().map(|b| b.history_tokens as f64)),
            builds: built.len(),
            build_ms_p50: quantile(&ms, 0.5),
            build_ms_p95: quantile(&ms, 0.95),
            summarizer_calls: built.iter().map(|b| b.summarizer_calls).sum(),
            generated_tokens: built.iter().map(|b| b.generated_tokens).sum(),
            by_category: by_category.into_iter().map(|(k, v)| (k, category_scores(&v))).collect(),
            abstention: (!abstaining.is_empty()).then(|| category_scores(&abstaining)),
        });
    }
    runs
}

/// The results as markdown tables: retention runs, then segmentation and summaries if any.
pub fn markdown(results: &crate::Results) -> String {
    let mut out = if results.runs.is_empty() { String::new() } else { retention_table(&results.runs) };
    if !results.segmentation.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "| dataset | segmenter | dialogues | Pk | WindowDiff | boundary F1 (±1) | precision | recall |"
        );
        let _ = writeln!(out, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
        for r in &results.segmentation {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                r.dataset, r.method, r.dialogues, r.pk, r.windowdiff, r.f1, r.precision, r.recall
            );
        }
    }
    if !results.summaries.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ =
            writeln!(out, "| dataset | summarizer | summaries | ROUGE-1 | ROUGE-2 | ROUGE-L | words | s per summary |");
        let _ = writeln!(out, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
        for r in &results.summaries {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {:.4} |",
                r.dataset,
                r.method,
                r.summaries,
                100.0 * r.rouge1,
                100.0 * r.rouge2,
                100.0 * r.rouge_l,
                r.words_mean,
                r.seconds_per_summary
            );
        }
    }
    if !results.answers.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&crate::answers::markdown(&results.answers));
    }
    out
}

/// What the summary's columns mean, in one line each.
pub const LEGEND: &str = "evidence: evidence recall, the share of questions whose every evidence turn is in the \
context verbatim\n(0 for strategies that keep sentences, not turns; `tiered` without the question keeps only its \
newest turns whole);\nanswer: answer recall, the share whose whole gold answer is in the context; answer tokens: \
answer-token recall, the\nmean share of the gold answer's words in the context (`full` sends everything and still \
misses the words\nof answers the conversation never states: inferred answers, dates written otherwise); \
reduction: 1 - context\ntokens / history tokens; \"with the question\": the strategy was given the question \
(\"-\": it does not read it).";

/// The retention runs on one screen: per dataset, strategy and budget, the three headline
/// metrics without the question, and with it where a strategy reads it (its question-aware
/// runs differ from its agnostic ones). The full table is `results.md` in the output folder.
pub fn summary(runs: &[Run]) -> String {
    let mut out = String::new();
    let agnostic: Vec<&Run> = runs.iter().filter(|r| r.mode == Mode::Agnostic).collect();
    let aware = |a: &Run| {
        runs.iter().find(|r| {
            r.mode == Mode::Aware && (&r.dataset, &r.strategy, r.budget) == (&a.dataset, &a.strategy, a.budget)
        })
    };
    let rows: Vec<&Run> = if agnostic.is_empty() { runs.iter().collect() } else { agnostic };
    let width = rows.iter().map(|r| r.dataset.len() + r.strategy.len() + 1).max().unwrap_or(0).max(17);
    let _ = writeln!(
        out,
        "{:<width$} {:>6}  {:>8} {:>6} {:>6} {:>9}  | with the question: {:>8} {:>6} {:>6}",
        "dataset/strategy", "budget", "evidence", "answer", "answer", "reduction", "evidence", "answer", "answer"
    );
    let _ = writeln!(
        out,
        "{:<width$} {:>6}  {:>8} {:>6} {:>6} {:>9}  | {:>27} {:>6} {:>6}",
        "", "", "", "", "tokens", "", "", "", "tokens"
    );
    for r in rows {
        let name = format!("{}/{}", r.dataset, r.strategy);
        let with_question = match aware(r) {
            Some(q) if r.mode == Mode::Agnostic && !same_scores(r, q) => {
                format!("{:>27.3} {:>6.3} {:>6.3}", q.evidence_recall, q.answer_recall, q.answer_token_recall)
            }
            Some(_) if r.mode == Mode::Agnostic => format!("{:>27} {:>6} {:>6}", "-", "-", "-"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{name:<width$} {:>6}  {:>8.3} {:>6.3} {:>6.3} {:>9.3}  | {with_question}",
            r.budget, r.evidence_recall, r.answer_recall, r.answer_token_recall, r.token_reduction
        );
    }
    out
}

/// Whether two runs scored alike (a strategy that does not read the question).
fn same_scores(a: &Run, b: &Run) -> bool {
    a.evidence_recall == b.evidence_recall
        && a.answer_recall == b.answer_recall
        && a.answer_token_recall == b.answer_token_recall
        && a.token_reduction == b.token_reduction
}

fn retention_table(runs: &[Run]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| dataset | strategy | budget | mode | probes | evidence recall | answer recall | answer-token recall | token reduction | build ms p50 | p95 |"
    );
    let _ = writeln!(out, "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in runs {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            r.dataset,
            r.strategy,
            r.budget,
            r.mode.as_str(),
            r.probes,
            r.evidence_recall,
            r.answer_recall,
            r.answer_token_recall,
            r.token_reduction,
            r.build_ms_p50,
            r.build_ms_p95
        );
    }
    out
}

/// The runs as CSV, with per-category recalls as extra rows (`category` column set).
pub fn csv(runs: &[Run]) -> String {
    let mut out = String::from(
        "dataset,strategy,budget,mode,category,probes,evidence_probes,evidence_recall,evidence_recall_partial,answer_recall,answer_token_recall,token_reduction,build_ms_p50,build_ms_p95\n",
    );
    for r in runs {
        let _ = writeln!(
            out,
            "{},{},{},{},all,{},{},{:.6},{:.6},{:.6},{:.6},{:.6},{:.4},{:.4}",
            r.dataset,
            r.strategy,
            r.budget,
            r.mode.as_str(),
            r.probes,
            r.evidence_probes,
            r.evidence_recall,
            r.evidence_recall_partial,
            r.answer_recall,
            r.answer_token_recall,
            r.token_reduction,
            r.build_ms_p50,
            r.build_ms_p95
        );
        for (cat, s) in &r.by_category {
            let _ = writeln!(
                out,
                "{},{},{},{},{cat},{},{},{:.6},,{:.6},{:.6},,,",
                r.dataset,
                r.strategy,
                r.budget,
                r.mode.as_str(),
                s.probes,
                s.evidence_probes,
                s.evidence_recall,
                s.answer_recall,
                s.answer_token_recall
            );
        }
    }
    out
}

/// Records of one dataset and method, for the suites that report a mean per method.
pub(crate) struct Group<'a, R> {
    pub(crate) dataset: &'a str,
    pub(crate) method: &'a str,
    pub(crate) records: Vec<&'a R>,
}

impl<R> Group<'_, R> {
    /// The mean of `f` over the group's records, summed in record order.
    pub(crate) fn mean(&self, f: impl Fn(&R) -> f64) -> f64 {
        self.records.iter().map(|r| f(r)).sum::<f64>() / self.records.len() as f64
    }
}

/// Records grouped by dataset, then method, in the order the two lists give; empty groups are
/// left out. `key` gives a record's dataset and method.
pub(crate) fn by_dataset_and_method<'a, R>(
    records: &'a [R],
    datasets: &'a [String],
    methods: &'a [String],
    key: impl Fn(&R) -> (&str, &str),
) -> Vec<Group<'a, R>> {
    let mut groups = Vec::new();
    for d in datasets {
        for m in methods {
            let rs: Vec<&R> = records.iter().filter(|r| key(r) == (d.as_str(), m.as_str())).collect();
            if !rs.is_empty() {
                groups.push(Group { dataset: d, method: m, records: rs });
            }
        }
    }
    groups
}
