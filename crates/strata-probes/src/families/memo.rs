//! The `memo` phrasing family: its filler and how it writes each kind of planted fact.

use strata_core::Role;

use super::{one, probe, Family, Plant};
use crate::{SplitMix64, Topic, Values, NAMES};

pub(super) fn filler(rng: &mut SplitMix64, topic: &Topic, role: Role) -> String {
    let a = *rng.pick(topic.terms);
    let b = *rng.pick(topic.terms);
    let who = *rng.pick(NAMES);
    if role == Role::User {
        match rng.below(5) {
            0 => format!("Could you kindly prepare a brief overview of the current state of {a} within the {}, with particular attention to any dependencies on {b}?", topic.project),
            1 => format!("Following yesterday's steering meeting, {who} has requested clarification regarding {a}. How would you suggest we respond?"),
            2 => format!("I would appreciate your assessment of whether {b} poses any material risk to the overall timeline."),
            3 => format!("For the purposes of the monthly report, please summarise the outstanding actions relating to {a} and {b}."),
            _ => format!("Before we proceed, I should like to understand how {a} interacts with {b} in practice."),
        }
    } else {
        match rng.below(5) {
            0 => format!("Certainly. At present, {a} is progressing broadly as planned, although its interaction with {b} warrants continued monitoring over the coming weeks."),
            1 => format!("In my assessment, the principal consideration is {a}; {b} is of secondary importance and can reasonably be deferred to the next review cycle."),
            2 => format!("It would be prudent to invite {who} to the next session, as they hold the most detailed knowledge of {a} and its bearing on {b}."),
            3 => format!("The outstanding actions are modest: a review of {a}, a short note on {b}, and confirmation from the relevant owners."),
            _ => format!("That is a reasonable concern. Should {a} be delayed, {b} would likely follow, though the remainder of the {} would be unaffected.", topic.project),
        }
    }
}

/// The fact of `kind` as the `memo` family writes it; `None` for the kinds every family
/// writes alike.
pub(super) fn plant(kind: &str, v: &mut Values<'_>, topic: &Topic) -> Option<Plant> {
    let family = Family::Memo;
    use Role::{Assistant as A, User as U};
    let svc = topic.service;
    let project = topic.project;
    Some(match kind {
        "incident" => {
            let (x, d) = (v.incident_in(family), v.incident_in(family));
            one(
                A,
                format!("For the record, the service disruption affecting {svc} on Tuesday has been registered with the service desk under reference {x}, and all correspondence should cite it."),
                vec![probe("incident", format!("Under which reference was Tuesday's {svc} disruption registered?"), &x, vec![0])],
                vec![format!("Reference {d} concerns an unrelated access request and may be closed.")],
            )
        }
        "budget" => {
            let (x, d) = (v.money_in(family), v.money_in(family));
            one(
                U,
                format!("I am pleased to confirm that the investment committee has allocated {x} to the {project}, to be drawn down over two quarters."),
                vec![probe("budget", format!("What amount did the investment committee allocate to the {project}?"), &x, vec![0])],
                vec![format!("A figure of {d} was mentioned informally, but it has no standing.")],
            )
        }
        "path" => {
            let (x, d) = (v.path_in(family, svc), v.path_in(family, svc));
            one(
                U,
                format!("Please ensure the on-call team is aware that the authoritative escalation procedure for {svc} is the document at {x}; earlier copies should not be consulted."),
                vec![probe("path", format!("Where is the authoritative escalation procedure for {svc} kept?"), &x, vec![0])],
                vec![format!("The draft at {d} was never approved.")],
            )
        }
        "command" => {
            let (x, d) = (v.command_in(family, svc), v.command_in(family, svc));
            one(
                A,
                format!("Should a regional outage occur, the operations engineer on duty is to execute \"{x}\" and then notify the incident commander."),
                vec![probe("command", format!("What is the engineer on duty to execute during a regional outage of {svc}?"), &x, vec![0])],
                vec![format!("The procedure \"{d}\" is retained for audit purposes only.")],
            )
        }
        "date" => {
            let (x, d) = (v.date_in(family), v.date_in(family));
            Plant {
                turns: vec![
                    (U, format!("Has a date been fixed for the formal sign-off of the {project}?")),
                    (A, format!("Yes. Following consultation with the sponsors, the sign-off has been fixed for {x}.")),
                ],
                gap: 0,
                probes: vec![probe(
                    "date",
                    format!("For when has the sign-off of the {project} been fixed?"),
                    &x,
                    vec![0, 1],
                )],
                distractors: vec![format!("The preliminary review on {d} is optional.")],
            }
        }
        "assistant-fact" => {
            let (x, d) = (v.limit_in(family), v.limit_in(family));
            one(
                A,
                format!("You may wish to note that, under the current policy, records held by {svc} must be retained for {x} before they can be purged."),
                vec![probe("assistant-fact", format!("How long must records held by {svc} be retained?"), &x, vec![0])],
                vec![format!("Backups, by contrast, are kept for {d}.")],
            )
        }
        _ => return None,
    })
}
