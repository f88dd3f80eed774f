//! The regression gate: a run whose metrics fall below a baseline by more than a tolerance
//! fails, naming each metric that fell.

use std::collections::BTreeMap;

use crate::Results;

/// One gated number: its run's key, its name, its value, and which way is better.
struct Gated {
    key: String,
    metric: String,
    value: f64,
    higher_is_better: bool,
}

fn gated(results: &Results) -> Vec<Gated> {
    let mut out = Vec::new();
    for r in &results.runs {
        for (metric, value) in r.gated() {
            out.push(Gated { key: r.key(), metric, value, higher_is_better: true });
        }
    }
    for r in &results.segmentation {
        let key = format!("{}/segmenter {}", r.dataset, r.method);
        for (metric, value, higher_is_better) in
            [("pk", r.pk, false), ("windowdiff", r.windowdiff, false), ("f1", r.f1, true)]
        {
            out.push(Gated { key: key.clone(), metric: metric.to_string(), value, higher_is_better });
        }
    }
    for r in &results.summaries {
        let key = format!("{}/summarizer {}", r.dataset, r.method);
        for (metric, value) in [("rouge1", r.rouge1), ("rouge2", r.rouge2), ("rougeL", r.rouge_l)] {
            out.push(Gated { key: key.clone(), metric: metric.to_string(), value, higher_is_better: true });
        }
    }
    out
}

/// Every regression, one line each; empty when the results hold up. Numbers the baseline has
/// and the current results lack are regressions too, so a gate cannot pass by running less.
/// Build times are not gated: they measure the machine as much as the code.
pub fn compare(baseline: &Results, current: &Results, tolerance: f64) -> Vec<String> {
    let now: BTreeMap<(String, String), f64> =
        gated(current).into_iter().map(|g| ((g.key, g.metric), g.value)).collect();
    let mut problems = Vec::new();
    for base in gated(baseline) {
        let Some(&is) = now.get(&(base.key.clone(), base.metric.clone())) else {
            problems.push(format!("{}: {} missing from the current results", base.key, base.metric));
            continue;
        };
        let was = base.value;
        let worse = if base.higher_is_better { is < was - tolerance } else { is > was + tolerance };
        if worse {
            let verb = if base.higher_is_better { "fell" } else { "rose" };
            problems
                .push(format!("{}: {} {verb} from {was:.4} to {is:.4} (tolerance {tolerance})", base.key, base.metric));
        }
    }
    problems
}
