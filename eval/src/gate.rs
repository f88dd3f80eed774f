//! The regression gate: a run whose metrics fall below a baseline by more than a tolerance
//! fails, naming each metric that fell.

use std::collections::BTreeMap;

use crate::report::Run;

/// Every regression, one line each; empty when the runs hold up. Runs in the baseline that
/// the current results lack are regressions too, so a gate cannot pass by running less.
pub fn compare(baseline: &[Run], current: &[Run], tolerance: f64) -> Vec<String> {
    let now: BTreeMap<String, &Run> = current.iter().map(|r| (r.key(), r)).collect();
    let mut problems = Vec::new();
    for base in baseline {
        let key = base.key();
        let Some(run) = now.get(&key) else {
            problems.push(format!("{key}: missing from the current results"));
            continue;
        };
        let current: BTreeMap<String, f64> = run.gated().into_iter().collect();
        for (metric, was) in base.gated() {
            let Some(&is) = current.get(&metric) else {
                problems.push(format!("{key}: {metric} missing from the current results"));
                continue;
            };
            if is < was - tolerance {
                problems.push(format!("{key}: {metric} fell from {was:.4} to {is:.4} (tolerance {tolerance})"));
            }
        }
    }
    problems
}
