//! The `chat` phrasing family: its filler and how it writes each kind of planted fact.

use strata_core::Role;

use super::{one, probe, Family, Plant};
use crate::{SplitMix64, Topic, Values, NAMES};

pub(super) fn filler(rng: &mut SplitMix64, topic: &Topic, role: Role) -> String {
    let a = *rng.pick(topic.terms);
    let b = *rng.pick(topic.terms);
    let who = *rng.pick(NAMES);
    let n = rng.range(2, 12);
    if role == Role::User {
        match rng.below(6) {
            0 => format!("ok so {a} again. anything blocking on {b}?"),
            1 => format!("{who} pinged me re {a}, ngl no idea what to say"),
            2 => format!("brb, then let's look at {b} for {}", topic.service),
            3 => format!("wait, does {a} even matter if {b} lands first?"),
            4 => format!("lol {a} is cursed. thoughts on {b}?"),
            _ => format!("can u sanity check the {a} bit? {n} people asked today"),
        }
    } else {
        match rng.below(6) {
            0 => format!("{a} is mostly fine. {b} is the part I'd poke at, maybe {n} small fixes."),
            1 => format!("Nothing blocking on {b} right now; {who} is on {a}."),
            2 => format!("Short version: {a} first, {b} after, both are small."),
            3 => format!("I'd leave {a} alone this week, {b} has more risk."),
            4 => format!("Checked {b}: nothing new since yesterday, {n} tickets still open."),
            _ => format!("Yeah {a} and {b} overlap a bit, worth a 10 min chat with {who}."),
        }
    }
}

/// The fact of `kind` as the `chat` family writes it; `None` for the kinds every family
/// writes alike.
pub(super) fn plant(kind: &str, v: &mut Values<'_>, topic: &Topic) -> Option<Plant> {
    let family = Family::Chat;
    use Role::{Assistant as A, User as U};
    let svc = topic.service;
    let project = topic.project;
    Some(match kind {
        "incident" => {
            let (x, d) = (v.incident_in(family), v.incident_in(family));
            one(
                U,
                format!("fyi the {svc} pager storm last night is tracked as {x}, pls link it in the retro doc"),
                vec![probe("incident", format!("what ticket tracks last night's {svc} pager storm?"), &x, vec![0])],
                vec![format!("{d} is just the flaky canary, ignore it")],
            )
        }
        "budget" => {
            let (x, d) = (v.money_in(family), v.money_in(family));
            one(
                U,
                format!("good news, we got {x} signed off for {project} 🎉"),
                vec![probe("budget", format!("how much money got signed off for {project}?"), &x, vec![0])],
                vec![format!("the {d} number floating around is last year's")],
            )
        }
        "path" => {
            let (x, d) = (v.path_in(family, svc), v.path_in(family, svc));
            one(
                A,
                format!("the load balancer for {svc} is defined here:\n```hcl\n# {x}\nresource \"aws_lb\" \"main\" {{\n  idle_timeout = 60\n}}\n```"),
                vec![probe("path", format!("which terraform file defines the load balancer for {svc}?"), &x, vec![0])],
                vec![format!("{d} is the old module, deleted next sprint.")],
            )
        }
        "command" => {
            let (x, d) = (v.command_in(family, svc), v.command_in(family, svc));
            Plant {
                turns: vec![
                    (U, format!("how do i get {svc} back to a sane state if the deploy goes sideways?")),
                    (A, format!("this:\n```\n{x}\n```\nthen watch the dashboards for a bit")),
                ],
                gap: 0,
                probes: vec![probe(
                    "command",
                    format!("what should be run if the {svc} deploy goes sideways?"),
                    &x,
                    vec![0, 1],
                )],
                distractors: vec![format!("don't use `{d}`, it's for the sandbox")],
            }
        }
        "date" => {
            let (x, d) = (v.date_in(family), v.date_in(family));
            one(
                U,
                format!("{project} goes live {x}, mark ur calendars"),
                vec![probe("date", format!("when does {project} go live?"), &x, vec![0])],
                vec![format!("the demo got bumped to {d}")],
            )
        }
        "assistant-fact" => {
            let (x, d) = (v.limit_in(family), v.limit_in(family));
            one(
                A,
                format!("heads up, {svc} gets throttled above {x}, so the load test needs to stay under that"),
                vec![probe("assistant-fact", format!("above what rate does {svc} get throttled?"), &x, vec![0])],
                vec![format!("peak last week was {d}")],
            )
        }
        _ => return None,
    })
}
