//! The `desk` phrasing family: its filler and how it writes each kind of planted fact.

use strata_core::Role;

use super::{one, probe, Family, Plant};
use crate::{SplitMix64, Topic, Values, NAMES};

pub(super) fn filler(rng: &mut SplitMix64, topic: &Topic, role: Role) -> String {
    let a = *rng.pick(topic.terms);
    let b = *rng.pick(topic.terms);
    let who = *rng.pick(NAMES);
    let n = rng.range(2, 48);
    if role == Role::User {
        match rng.below(6) {
            0 => format!("customer is chasing again re {a}, can you draft a holding reply?"),
            1 => format!("queue is at {n} this morning, mostly {b} stuff"),
            2 => format!("escalating the {a} one to tier 2, they can't get past the login page"),
            3 => format!("they say {b} broke after the update. can't repro on our side"),
            4 => format!("{who} is covering the queue until noon, ping them for anything on {a}"),
            _ => format!("> Hello, any news on {b}? It has been {n} hours.\nsame customer as yesterday"),
        }
    } else {
        match rng.below(6) {
            0 => format!("Draft: \"Hi, thanks for your patience. We are still looking into {a} and will update you within {n} hours.\""),
            1 => format!("The status page shows nothing about {b} today, so it is likely local to their tenant."),
            2 => format!("Sounds like the known {a} issue; the KB article on {b} covers the workaround."),
            3 => format!("I would ask them for a screenshot of the {b} settings before escalating."),
            4 => format!("Tier 2 already has {n} tickets about {a}; I linked this one to the cluster."),
            _ => format!("Ticket fields:\nPriority: P{}\nProduct: {}\nCategory: {a}\nAssignee: {who}", n % 4 + 1, topic.service),
        }
    }
}

/// The fact of `kind` as the `desk` family writes it; `None` for the kinds every family
/// writes alike.
pub(super) fn plant(kind: &str, v: &mut Values<'_>, topic: &Topic) -> Option<Plant> {
    let family = Family::Desk;
    use Role::{Assistant as A, User as U};
    let svc = topic.service;
    let project = topic.project;
    Some(match kind {
        "incident" => {
            let (x, d) = (v.incident_in(family), v.incident_in(family));
            one(
                U,
                format!("customer replied:\n> Hi, we still see the sync failures on {svc}. Our internal reference is {x}, please quote it in every reply.\n> Thanks, Priya"),
                vec![probe("incident", format!("What internal reference did the customer give for the {svc} sync failures?"), &x, vec![0])],
                vec![format!("{d} was their reference for last month's outage, already closed")],
            )
        }
        "budget" => {
            let (x, d) = (v.money_in(family), v.money_in(family));
            one(
                A,
                format!("Billing approved it: the customer gets a goodwill credit of {x} on the next invoice for the {project} downtime."),
                vec![probe("budget", format!("What goodwill credit was approved for the {project} downtime?"), &x, vec![0])],
                vec![format!("They had asked for {d} at first.")],
            )
        }
        "path" => {
            let (x, d) = (v.path_in(family, svc), v.path_in(family, svc));
            Plant {
                turns: vec![
                    (A, format!("Can you get the {svc} agent log from them? It is somewhere under ProgramData.")),
                    (U, format!("got it, they sent {x}, attached to the ticket")),
                ],
                gap: 0,
                probes: vec![probe("path", format!("Which log file did the customer send for {svc}?"), &x, vec![0, 1])],
                distractors: vec![format!("{d} is the installer log, not useful here")],
            }
        }
        "command" => {
            let (x, d) = (v.command_in(family, svc), v.command_in(family, svc));
            one(
                A,
                format!("Escalation note:\n```\nProduct: {svc}\nImpact: users cannot save\nWorkaround: {x}\nOwner: tier 2\n```"),
                vec![probe("command", format!("What workaround is in the escalation note for {svc}?"), &x, vec![0])],
                vec![format!("`{d}` only works on the old cluster.")],
            )
        }
        "date" => {
            let (x, d) = (v.date_in(family), v.date_in(family));
            one(
                A,
                format!("The admin API says:\n```json\n{{\"tenant\": \"{svc}\", \"plan\": \"enterprise\", \"renewal_date\": \"{x}\"}}\n```"),
                vec![probe("date", format!("When is the {svc} tenant up for renewal?"), &x, vec![0])],
                vec![format!("their trial ended {d}")],
            )
        }
        "assistant-fact" => {
            let (x, d) = (v.limit_in(family), v.limit_in(family));
            one(
                A,
                format!("Found it in the server log:\n```\nWARN quota: tenant {svc} capped at {x} by plan\n```\nSo new users are refused once they reach the cap."),
                vec![probe("assistant-fact", format!("At how many seats is the {svc} tenant capped?"), &x, vec![0])],
                vec![format!("The old plan allowed {d}.")],
            )
        }
        _ => return None,
    })
}
