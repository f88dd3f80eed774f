//! The `agent` phrasing family: its filler and how it writes each kind of planted fact.

use strata_core::Role;

use super::{one, probe, Family, Plant};
use crate::{SplitMix64, Topic, Values};

pub(super) fn filler(rng: &mut SplitMix64, topic: &Topic, role: Role) -> String {
    let a = *rng.pick(topic.terms);
    let b = *rng.pick(topic.terms);
    let svc = topic.service.replace('-', "_");
    let n = rng.range(3, 60);
    let m = rng.range(1, 9);
    if role == Role::User {
        match rng.below(5) {
            0 => "run the tests again and tell me what fails".to_string(),
            1 => format!("look at how {a} is wired in {svc} and tell me if {b} touches it"),
            2 => format!("that didn't work, try a different approach for the {a} part"),
            3 => format!("ok, now clean up the {b} code you just wrote"),
            _ => format!("what's left before we can open the PR for {a}?"),
        }
    } else {
        match rng.below(5) {
            0 => format!("Ran the suite: {n} passed, {m} failed. The failures are all in the {a} module and look like the same fixture problem."),
            1 => format!("```\n$ rg -n \"{}\" {svc}/\n{svc}/core.py:{n}:    # {a} handled here\n```\nOnly one hit, so {b} does not touch it directly.", a.split(' ').next().unwrap_or(a)),
            2 => format!("I reverted my last edit and rewrote the {a} helper as a plain function; {b} now calls it once instead of {m} times."),
            3 => format!("Removed the dead branches in the {b} code and renamed two variables. Diff is {n} lines."),
            _ => format!("Left before the PR: a test for {a}, the changelog line, and a look at {b}. About {m} small steps."),
        }
    }
}

/// The fact of `kind` as the `agent` family writes it; `None` for the kinds every family
/// writes alike.
pub(super) fn plant(kind: &str, v: &mut Values<'_>, topic: &Topic) -> Option<Plant> {
    let family = Family::Agent;
    use Role::{Assistant as A, User as U};
    let svc = topic.service;
    Some(match kind {
        "incident" => {
            let (x, d) = (v.incident_in(family), v.incident_in(family));
            Plant {
                turns: vec![
                    (U, format!("which issue is the {svc} memory leak again?")),
                    (A, format!("It's {x} on the tracker, opened by the on-call after the OOM kills.")),
                ],
                gap: 0,
                probes: vec![probe(
                    "incident",
                    format!("What is the tracker issue for the {svc} memory leak?"),
                    &x,
                    vec![0, 1],
                )],
                distractors: vec![format!("Issue {d} is a duplicate and was closed.")],
            }
        }
        "budget" => {
            let (x, d) = (v.money_in(family), v.money_in(family));
            one(
                A,
                format!(
                    "Pulled the cost report: {svc} currently runs at {x} on compute, most of it the idle replicas."
                ),
                vec![probe(
                    "budget",
                    format!("What does {svc} cost on compute according to the cost report?"),
                    &x,
                    vec![0],
                )],
                vec![format!("The staging copy is {d}, which nobody looks at.")],
            )
        }
        "path" => {
            let (x, d) = (v.path_in(family, svc), v.path_in(family, svc));
            let line = v.rng.range(20, 400);
            one(
                U,
                format!("it crashes on startup:\n```\nTraceback (most recent call last):\n  File \"main.py\", line 12, in <module>\n    run()\n  File \"{x}\", line {line}, in load\n    cfg = settings[\"{}\"]\nKeyError: '{}'\n```", topic.terms[0], topic.terms[0]),
                vec![probe("path", format!("Which file raised the KeyError when {svc} crashed on startup?"), &x, vec![0])],
                vec![format!("{d} has a similar lookup but is only used in tests.")],
            )
        }
        "command" => {
            let (x, d) = (v.command_in(family, svc), v.command_in(family, svc));
            one(
                A,
                format!("Reproduced it locally:\n```\n$ {x}\nerror: 1 test failed\n```\nThat is the command to rerun after each change."),
                vec![probe("command", format!("Which command reproduces the {svc} failure locally?"), &x, vec![0])],
                vec![format!("`{d}` passes, so it is not useful here.")],
            )
        }
        "date" => {
            let (x, d) = (v.date_in(family), v.date_in(family));
            one(
                A,
                format!("The TLS certificate for {svc} expires on {x} according to `openssl x509 -enddate`."),
                vec![probe("date", format!("When does the TLS certificate for {svc} expire?"), &x, vec![0])],
                vec![format!("The intermediate certificate is valid until {d}.")],
            )
        }
        "assistant-fact" => {
            let (x, d) = (v.limit_in(family), v.limit_in(family));
            one(
                A,
                format!("I checked the pool settings: {svc} caps the database pool at {x}, which explains the timeouts under load."),
                vec![probe("assistant-fact", format!("What does {svc} cap its database pool at?"), &x, vec![0])],
                vec![format!("The read replica allows {d}.")],
            )
        }
        _ => return None,
    })
}
