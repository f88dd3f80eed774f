//! The `lab` phrasing family: its filler and how it writes each kind of planted fact.

use strata_core::Role;

use super::{one, probe, Family, Plant};
use crate::{SplitMix64, Topic, Values, NAMES};

pub(super) fn filler(rng: &mut SplitMix64, topic: &Topic, role: Role) -> String {
    let a = *rng.pick(topic.terms);
    let b = *rng.pick(topic.terms);
    let who = *rng.pick(NAMES);
    let (x, y) = (rng.range(40, 99), rng.range(1, 9));
    let n = rng.range(2, 60);
    if role == Role::User {
        match rng.below(5) {
            0 => format!("can you redo the {a} plot with a log y axis? the tail is invisible"),
            1 => format!("hm, {b} looks different from last week's numbers. did the query change?"),
            2 => format!("{who} wants the {a} breakdown by region before thursday"),
            3 => format!("let's drop {b} from the model for now and see what moves"),
            _ => format!("is {a} still correlated with {b} once we control for week?"),
        }
    } else {
        match rng.below(5) {
            0 => format!("Re-ran the cell. {a}: {x}.{y}% of the baseline, roughly flat over the last {n} days."),
            1 => format!("| metric | this week | last week |\n|---|---|---|\n| {a} | {x}.{y} | {}.{y} |\n| {b} | {n} | {} |\n\nNothing outside the usual noise.", x - 1, n + 2),
            2 => format!("The query did not change; the difference in {b} comes from {n} late-arriving rows that the nightly job picked up."),
            3 => format!("Dropping {b}: the fit barely moves (R² {x}.{y} → {}.{y}), so {a} carries most of the signal.", x - 2),
            _ => format!("Controlling for week, the {a}/{b} correlation falls to 0.{y}{n}, so it was mostly seasonality."),
        }
    }
}

/// The fact of `kind` as the `lab` family writes it; `None` for the kinds every family
/// writes alike.
pub(super) fn plant(kind: &str, v: &mut Values<'_>, topic: &Topic) -> Option<Plant> {
    let family = Family::Lab;
    use Role::{Assistant as A, User as U};
    let svc = topic.service;
    let project = topic.project;
    Some(match kind {
        "incident" => {
            let (x, d) = (v.incident_in(family), v.incident_in(family));
            one(
                A,
                format!("Found the run where the {svc} event counts doubled: `{x}` in the tracker, started from the stale snapshot."),
                vec![probe("incident", format!("Which tracker run doubled the {svc} event counts?"), &x, vec![0])],
                vec![format!("Run {d} is the healthy rerun.")],
            )
        }
        "budget" => {
            let (x, d) = (v.money_in(family), v.money_in(family));
            one(
                A,
                format!("Allocation for {project}:\n\n| line | amount |\n|---|---|\n| compute | {x} |\n| labelling | 40 annotator-days |"),
                vec![probe("budget", format!("How much compute is allocated to {project}?"), &x, vec![0])],
                vec![format!("the pilot only burned {d}")],
            )
        }
        "path" => {
            let (x, d) = (v.path_in(family, svc), v.path_in(family, svc));
            let svc_ = svc.replace('-', "_");
            one(
                U,
                format!("this is the config I'm running with:\n```yaml\nsource:\n  table: {x}\n  partition: daily\nmodel: {svc_}_weekly\n```"),
                vec![probe("path", format!("Where does the {svc} notebook config read its source data from?"), &x, vec![0])],
                vec![format!("{d} is the pre-dedup copy, don't use it")],
            )
        }
        "command" => {
            let (x, d) = (v.command_in(family, svc), v.command_in(family, svc));
            Plant {
                turns: vec![
                    (U, format!("how do I rerun the {svc} notebook with the right params?")),
                    (A, format!("From the repo root:\n\n    {x}\n\nIt writes out.ipynb next to the input.")),
                ],
                gap: 0,
                probes: vec![probe(
                    "command",
                    format!("What command reruns the {svc} notebook with the right parameters?"),
                    &x,
                    vec![0, 1],
                )],
                distractors: vec![format!("`{d}` was the old invocation, before the params changed.")],
            }
        }
        "date" => {
            let (x, d) = (v.date_in(family), v.date_in(family));
            one(
                U,
                format!("the {project} write-up is due {x}, hard deadline, no extensions"),
                vec![probe("date", format!("When is the {project} write-up due?"), &x, vec![0])],
                vec![format!("the internal dry run is {d}")],
            )
        }
        "assistant-fact" => {
            let (x, d) = (v.limit_in(family), v.limit_in(family));
            one(
                A,
                format!("Memory profile of the {svc} pipeline:\n\n| stage | peak RSS |\n|---|---|\n| load | {d} |\n| join | {x} |"),
                vec![probe("assistant-fact", format!("What peak memory does the join stage of the {svc} pipeline reach?"), &x, vec![0])],
                Vec::new(),
            )
        }
        _ => return None,
    })
}
