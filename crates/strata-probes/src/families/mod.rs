//! Phrasing families: the same kinds of planted fact as the committed set, written as five
//! other people would write them, so that a score can be split into the families a mechanism
//! was tuned on (`probes-dev`) and one it never saw (`probes-heldout`).
//!
//! Each family has its own statement templates, question wording, filler, value formats and
//! distractors. Between them they put facts inside code blocks, shell sessions and stack
//! traces, have the assistant state facts, vary the verbs of decisions and preferences and
//! the way a reason is introduced, spread a fact over two turns (a question, then the answer)
//! and correct a value later (the probe asks for the current one). The committed set
//! (`crate::generate`) is the fourth family, `seed`, and stays byte-identical.

use std::collections::{BTreeMap, BTreeSet};

use strata_core::{Conversation, Participant, Probe, Role, Timestamp, Turn};

mod agent;
mod chat;
mod desk;
mod lab;
mod memo;

use crate::{Options, ProbeSetConfig, SplitMix64, Topic, Values, MONTHS, NAMES, TOPICS};

/// A phrasing family other than the committed set's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    /// A terse engineer in a team chat: lower case, abbreviations, code blocks, "scratch that".
    Chat,
    /// A project manager's long, formal prose with an assistant that answers at length.
    Memo,
    /// A coding agent's session: shell output, stack traces, config files, the assistant
    /// reporting what it found.
    Agent,
    /// An analyst working through notebooks with an assistant: markdown tables, YAML
    /// configs, bullet lists of options, results pasted from cells.
    Lab,
    /// A support engineer working a customer queue with an assistant: quoted customer
    /// emails, ticket fields, JSON from an admin API, server log lines, Windows paths.
    Desk,
}

impl Family {
    pub const ALL: [Family; 5] = [Family::Chat, Family::Memo, Family::Agent, Family::Lab, Family::Desk];

    pub fn name(self) -> &'static str {
        match self {
            Family::Chat => "chat",
            Family::Memo => "memo",
            Family::Agent => "agent",
            Family::Lab => "lab",
            Family::Desk => "desk",
        }
    }

    pub fn parse(s: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == s)
    }

    fn user(self) -> &'static str {
        match self {
            Family::Chat => "dev",
            Family::Memo => "morgan",
            Family::Agent => "sam",
            Family::Lab => "noor",
            Family::Desk => "ines",
        }
    }
}

/// The families mechanisms may be tuned on: the committed set's (`seed`) and these four.
/// `agent` was the held-out family until its score had been read for three decisions; it
/// joined these then, and `lab`, written afterwards, took its place. `lab` in turn joined
/// them after its score had been read for the decisions of four sessions, and `desk`,
/// written before anyone read `lab`'s misses, took its place.
pub const DEV_FAMILIES: &[Family] = &[Family::Chat, Family::Memo, Family::Agent, Family::Lab];
/// The family nobody tunes on: read its score, never its misses.
pub const HELDOUT_FAMILY: Family = Family::Desk;

/// The development suite's file (seed 7; `seed`'s conversations are the committed set's).
pub const PROBES_DEV_FILE: &str = "datasets/probes/probes-dev.jsonl";
/// The held-out suite's file (seed 7).
pub const PROBES_HELDOUT_FILE: &str = "datasets/probes/probes-heldout.jsonl";
/// The development suite with its evidence turns reworded by Qwen2.5-Coder 1.5B
/// (`cargo xtask gen-probes --paraphrase`), relative to the repository root: wording no
/// template of ours wrote, for the same facts. A development set: its misses may be read.
pub const PROBES_PARAPHRASED_FILE: &str = "datasets/probes/probes-paraphrased.jsonl";
/// The held-out suite reworded the same way: held out like it (its score read, never its
/// misses).
pub const PROBES_HELDOUT_PARAPHRASED_FILE: &str = "datasets/probes/probes-heldout-paraphrased.jsonl";

/// The kinds each family plants; each is also its probes' category.
const KINDS: &[&str] =
    &["incident", "budget", "path", "command", "decision", "preference", "date", "assistant-fact", "superseded"];

/// One planted fact: its turns (placed `gap` filler turns apart), its probes with the plant
/// turns that are their evidence, and distractor sentences of the same kind.
struct Plant {
    turns: Vec<(Role, String)>,
    gap: usize,
    probes: Vec<FamilyProbe>,
    distractors: Vec<String>,
}

struct FamilyProbe {
    category: &'static str,
    question: String,
    answer: String,
    /// Indexes into the plant's turns.
    evidence: Vec<usize>,
}

/// A fact said in one turn, with its probes and distractors.
fn one(role: Role, text: String, probes: Vec<FamilyProbe>, distractors: Vec<String>) -> Plant {
    Plant { turns: vec![(role, text)], gap: 0, probes, distractors }
}

fn probe(category: &'static str, question: String, answer: impl Into<String>, evidence: Vec<usize>) -> FamilyProbe {
    FamilyProbe { category, question, answer: answer.into(), evidence }
}

impl Values<'_> {
    fn incident_in(&mut self, family: Family) -> String {
        match family {
            Family::Chat => self.fresh(|r| format!("OPS-{}", r.range(1000, 9999))),
            Family::Memo => self.fresh(|r| format!("SR-{}", r.range(100_000, 999_999))),
            Family::Agent => self.fresh(|r| format!("#{}", r.range(1000, 99_999))),
            Family::Lab => self.fresh(|r| {
                let adjective = *r.pick(&["brisk", "quiet", "amber", "lucid", "mossy", "crisp", "dusky", "nimble"]);
                let noun = *r.pick(&["heron", "comet", "fjord", "lantern", "otter", "quartz", "tundra", "willow"]);
                format!("{adjective}-{noun}-{}", r.range(10, 999))
            }),
            Family::Desk => self.fresh(|r| format!("INC{:07}", r.range(10_000, 999_999))),
        }
    }

    fn money_in(&mut self, family: Family) -> String {
        match family {
            Family::Chat => self.fresh(|r| format!("${}k", r.range(4, 180))),
            Family::Memo => self.fresh(|r| {
                let (cur, amount) = (*r.pick(&["EUR", "USD", "GBP"]), r.range(12, 480) * 250);
                format!("{cur} {},{:03}", amount / 1000, amount % 1000)
            }),
            Family::Agent => self.fresh(|r| format!("${},{:03}/month", r.range(1, 9), r.range(1, 99) * 10)),
            Family::Lab => self.fresh(|r| format!("{} GPU-hours", r.range(12, 960) * 25)),
            Family::Desk => self.fresh(|r| format!("£{}.{:02}", r.range(40, 2400), r.range(0, 99))),
        }
    }

    fn date_in(&mut self, family: Family) -> String {
        match family {
            Family::Chat => self.fresh(|r| {
                let d = r.range(1, 28);
                let suffix = match d {
                    1 | 21 => "st",
                    2 | 22 => "nd",
                    3 | 23 => "rd",
                    _ => "th",
                };
                format!("{} {d}{suffix}", r.pick(MONTHS))
            }),
            Family::Memo => self.fresh(|r| {
                format!(
                    "{} {} {} 2027",
                    r.pick(&["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]),
                    r.range(1, 28),
                    r.pick(MONTHS)
                )
            }),
            Family::Agent => self.fresh(|r| format!("2027-{:02}-{:02}", r.range(1, 12), r.range(1, 28))),
            Family::Lab => self.fresh(|r| {
                let month = *r.pick(&["Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]);
                format!("{month} {}", r.range(1, 28))
            }),
            Family::Desk => self.fresh(|r| format!("{:02}/{:02}/2027", r.range(1, 28), r.range(1, 12))),
        }
    }

    fn path_in(&mut self, family: Family, service: &str) -> String {
        let svc = service.replace('-', "_");
        match family {
            Family::Chat => self.fresh(move |r| {
                let (env, module) =
                    (*r.pick(&["prod", "shared", "eu-west"]), *r.pick(&["alb", "rds", "queues", "iam", "dns"]));
                format!("infra/{env}/{module}_{svc}.tf")
            }),
            Family::Memo => self.fresh(move |r| {
                format!(
                    "docs/runbooks/{svc}/{}-v{}.md",
                    r.pick(&["escalation", "failover", "handover", "checklist"]),
                    r.range(2, 9)
                )
            }),
            Family::Agent => self.fresh(move |r| {
                format!(
                    "{svc}/{}/{}.py",
                    r.pick(&["handlers", "jobs", "adapters", "models"]),
                    r.pick(&["refund", "retry", "export", "sync", "quota"])
                )
            }),
            Family::Lab => self.fresh(move |r| {
                format!(
                    "s3://analytics-{}/{svc}/{}_v{}.parquet",
                    r.pick(&["raw", "curated", "scratch"]),
                    r.pick(&["events", "sessions", "cohorts", "labels"]),
                    r.range(2, 40)
                )
            }),
            Family::Desk => self.fresh(move |r| {
                format!(
                    "C:\\ProgramData\\Vantage\\{svc}\\logs\\{}-{}.log",
                    r.pick(&["agent", "sync", "updater", "connector"]),
                    r.range(2, 60)
                )
            }),
        }
    }

    fn command_in(&mut self, family: Family, service: &str) -> String {
        let svc = service.to_string();
        match family {
            Family::Chat => self.fresh(move |r| match r.below(2) {
                0 => format!("kubectl scale deploy/{svc} --replicas={}", r.range(3, 24)),
                _ => format!("argocd app rollback {svc} {}", r.range(10, 99)),
            }),
            Family::Memo => self.fresh(move |r| {
                let play = *r.pick(&["failover", "drain", "reseed"]);
                format!("ansible-playbook {play}.yml -l {svc}-{}", r.pick(&["primary", "standby", "dr"]))
            }),
            Family::Agent => self.fresh(move |r| match r.below(2) {
                0 => format!("cargo test -p {svc} --test {} -- --nocapture", r.pick(&["smoke", "contract", "replay"])),
                _ => format!("make migrate-{} DB={svc}", r.range(100, 999)),
            }),
            Family::Lab => self.fresh(move |r| {
                let svc = svc.replace('-', "_");
                format!(
                    "papermill notebooks/{svc}_{}.ipynb out.ipynb -p window {} -p seed {}",
                    r.pick(&["churn", "funnel", "uplift", "backfill"]),
                    r.range(7, 90),
                    r.range(1, 99)
                )
            }),
            Family::Desk => self.fresh(move |r| {
                format!(
                    "vantagectl tenant {} --tenant {svc}-{} --region {}",
                    r.pick(&["reset-cache", "resync", "reindex", "unlock"]),
                    r.range(100, 999),
                    r.pick(&["eu1", "us2", "ap3"])
                )
            }),
        }
    }

    fn limit_in(&mut self, family: Family) -> String {
        match family {
            Family::Chat => self.fresh(|r| format!("{} req/s", r.range(20, 300) * 10)),
            Family::Memo => self.fresh(|r| format!("{} days", r.range(31, 730))),
            Family::Agent => self.fresh(|r| format!("{} connections", r.range(8, 250))),
            Family::Lab => self.fresh(|r| format!("{}.{} GB", r.range(2, 79), r.range(1, 9))),
            Family::Desk => self.fresh(|r| format!("{} seats", r.range(5, 500))),
        }
    }
}

/// Decisions: what was decided, the options, and a reason per option.
const CHOICES: &[(&str, Options)] = &[
    (
        "queue",
        (
            &["SQS", "Redis Streams", "Kinesis", "ZeroMQ"],
            &[
                "it needs zero extra ops work",
                "consumer groups come for free",
                "shards rebalance on their own",
                "there is no broker to babysit",
            ],
        ),
    ),
    (
        "cache layer",
        (
            &["Memcached", "Varnish", "Dragonfly", "Hazelcast"],
            &[
                "eviction is predictable",
                "it speaks plain HTTP",
                "one node handles the whole load",
                "it replicates across zones",
            ],
        ),
    ),
    (
        "dashboard tool",
        (
            &["Grafana", "Metabase", "Superset", "Looker"],
            &[
                "finance already has licences",
                "it reads straight from Prometheus",
                "analysts can write their own SQL",
                "it embeds in the admin page",
            ],
        ),
    ),
    (
        "container registry",
        (
            &["Harbor", "Quay", "ECR", "Artifactory"],
            &[
                "it scans images on push",
                "replication to the DR site is built in",
                "IAM roles work without tokens",
                "it also stores our Maven artifacts",
            ],
        ),
    ),
    (
        "load testing tool",
        (
            &["k6", "Locust", "Gatling", "Vegeta"],
            &[
                "scripts live in the same repo as the code",
                "the reports are readable by managers",
                "it ramps to a million users",
                "it fits in one static binary",
            ],
        ),
    ),
];

/// Preferences: what about, and the options someone could prefer.
const LIKES: &[(&str, &[&str])] = &[
    ("pull request size", &["under four hundred lines", "one feature per branch", "stacked small diffs"]),
    ("standups", &["async notes in the channel", "ten minutes on video", "twice a week only"]),
    ("incident updates", &["a thread every thirty minutes", "one summary at the end", "a status page entry first"]),
    ("test style", &["table driven cases", "property based checks", "golden files on disk"]),
    ("handover notes", &["a checklist in the wiki", "a recorded screen share", "bullet points in the ticket"]),
];

fn filler(family: Family, rng: &mut SplitMix64, topic: &Topic, role: Role) -> String {
    match family {
        Family::Chat => chat::filler(rng, topic, role),
        Family::Memo => memo::filler(rng, topic, role),
        Family::Agent => agent::filler(rng, topic, role),
        Family::Lab => lab::filler(rng, topic, role),
        Family::Desk => desk::filler(rng, topic, role),
    }
}

fn plant(family: Family, kind: &str, v: &mut Values<'_>, topic: &Topic) -> Plant {
    let own = match family {
        Family::Chat => chat::plant(kind, v, topic),
        Family::Memo => memo::plant(kind, v, topic),
        Family::Agent => agent::plant(kind, v, topic),
        Family::Lab => lab::plant(kind, v, topic),
        Family::Desk => desk::plant(kind, v, topic),
    };
    own.unwrap_or_else(|| shared(family, kind, v, topic))
}

/// The kinds every family writes alike (a decision, a preference, a corrected value), their
/// wording chosen by family inside.
fn shared(family: Family, kind: &str, v: &mut Values<'_>, topic: &Topic) -> Plant {
    use Family::{Agent, Chat, Desk, Lab, Memo};
    use Role::{Assistant as A, User as U};
    let svc = topic.service;
    match (kind, family) {
        ("decision", _) => {
            let (what, (options, reasons)) = v.unused(CHOICES);
            let mut idx: Vec<usize> = (0..options.len()).collect();
            v.rng.shuffle(&mut idx);
            let (choice, other, reason, other_reason) =
                (options[idx[0]], options[idx[1]], reasons[idx[0]], reasons[idx[1]]);
            let (turns, q_decision, q_reason, evidence) = match family {
                Chat => (
                    vec![(U, format!("ok we're going ahead with {choice} for the {what}, main thing is {reason}"))],
                    format!("what did we pick for the {what}?"),
                    format!("why {choice} for the {what}?"),
                    vec![0],
                ),
                Memo => (
                    vec![(
                        U,
                        format!("After weighing the alternatives, the board has selected {choice} as our {what}. The deciding factor was that {reason}."),
                    )],
                    format!("Which {what} did the board select?"),
                    format!("What was the deciding factor in choosing {choice}?"),
                    vec![0],
                ),
                Agent => (
                    vec![
                        (A, format!("For the {what} I can wire up either {choice} or {other}. Which one?")),
                        (U, format!("{choice}. {reason}, that settles it.")),
                    ],
                    format!("Which {what} should the code use?"),
                    format!("What settled the choice of {choice}?"),
                    vec![0, 1],
                ),
                Lab => (
                    vec![
                        (A, format!("Two ways to go for the {what}:\n- {choice}: {reason}\n- {other}: {other_reason}\nWhich one?")),
                        (U, format!("the first, {choice}.")),
                    ],
                    format!("Which {what} did I go with?"),
                    format!("What speaks for {choice} as the {what}?"),
                    vec![0, 1],
                ),
                Desk => (
                    vec![(U, format!("call with the account manager done. the clincher was that {reason}, so {choice} it is for the {what}"))],
                    format!("Which {what} was agreed with the account manager?"),
                    format!("What was the clincher for {choice}?"),
                    vec![0],
                ),
            };
            let distractor = match family {
                Chat => format!("{other} was tempting for the {what} tbh, {other_reason}"),
                Memo => format!("{other} was also considered for the {what}, on the grounds that {other_reason}."),
                Agent => format!("Note that {other} would also work as the {what}; {other_reason}."),
                Lab => format!("someone on the team still argues for {other} as the {what}"),
                Desk => format!("{other} came up on the call too, since {other_reason}"),
            };
            Plant {
                turns,
                gap: 0,
                probes: vec![
                    probe("decision", q_decision, choice, evidence.clone()),
                    probe("reason", q_reason, reason, evidence),
                ],
                distractors: vec![distractor],
            }
        }
        ("preference", _) => {
            let (aspect, prefs) = v.unused(LIKES);
            let mut idx: Vec<usize> = (0..prefs.len()).collect();
            v.rng.shuffle(&mut idx);
            let (mine, theirs) = (prefs[idx[0]], prefs[idx[1]]);
            let who = *v.rng.pick(NAMES);
            let (text, q, d) = match family {
                Chat => (
                    format!("tbh for {aspect} {mine} works way better for me"),
                    format!("what works best for me for {aspect}?"),
                    format!("{who} is all about {theirs} for {aspect} lol"),
                ),
                Memo => (
                    format!("With regard to {aspect}, I would ask that we adopt {mine} as the norm going forward."),
                    format!("What did I ask to adopt as the norm for {aspect}?"),
                    format!("{who} has a preference for {theirs} in {aspect}."),
                ),
                Agent => (
                    format!("when you touch {aspect}, stick to {mine}. always."),
                    format!("What should {aspect} stick to?"),
                    format!("The upstream project uses {theirs} for {aspect}."),
                ),
                Lab => (
                    format!("note for both of us: for {aspect} I want {mine}, every time"),
                    format!("What do I want for {aspect}?"),
                    format!("{who}'s team does {theirs} for {aspect}, not our problem."),
                ),
                Desk => (
                    format!("house rule on my queue: {aspect} means {mine}, no exceptions"),
                    format!("What is my house rule for {aspect}?"),
                    format!("{who} runs {aspect} as {theirs} on the night shift."),
                ),
            };
            one(U, text, vec![probe("preference", q, mine, vec![0])], vec![d])
        }
        (_, _) => {
            // A value stated, then corrected some turns later: the probe asks for the current one.
            let (setting, unit, lo, hi) = *v.rng.pick(&[
                ("rate limit", "req/s", 20, 900),
                ("retention window", "days", 7, 400),
                ("pool size", "connections", 8, 300),
                ("batch size", "rows", 50, 5000),
            ]);
            let old = v.fresh(|r| format!("{} {unit}", r.range(lo, hi)));
            let new = v.fresh(|r| format!("{} {unit}", r.range(lo, hi)));
            let (first, correction, q) = match family {
                Chat => (
                    format!("setting the {setting} for {svc} to {old}"),
                    format!("scratch that, {svc} {setting} is {new} now, {old} was too aggressive"),
                    format!("what's the {setting} for {svc} now?"),
                ),
                Memo => (
                    format!("It is proposed that the {setting} of {svc} be set at {old}."),
                    format!("Further to my earlier message, please amend the {setting} of {svc}: the approved value is {new}, not {old}."),
                    format!("What is the approved {setting} of {svc}?"),
                ),
                Agent => (
                    format!("Set the {setting} of {svc} to {old} in the config."),
                    format!("Changed my mind after the benchmark: the {setting} of {svc} is now {new}. Updated the config and the test."),
                    format!("What is the {setting} of {svc} after the benchmark?"),
                ),
                Lab => (
                    format!("using {old} as the {setting} for the {svc} job"),
                    format!("Re-tuned after the dry run: the {setting} for {svc} is {new} now; {old} ran out of headroom."),
                    format!("What is the current {setting} for the {svc} job?"),
                ),
                Desk => (
                    format!("customer says their {setting} on {svc} is {old}"),
                    format!("Correction from the customer's admin: the {setting} on {svc} is {new}. The {old} figure was from their staging tenant."),
                    format!("What is the {setting} on {svc} according to the customer's admin?"),
                ),
            };
            Plant {
                turns: vec![(U, first), (if matches!(family, Agent | Lab | Desk) { A } else { U }, correction)],
                gap: 6,
                probes: vec![probe("superseded", q, new, vec![1])],
                distractors: Vec::new(),
            }
        }
    }
}

/// A probe set in one family. The same seed, family and config give the same conversations.
pub fn generate_family(family: Family, seed: u64, config: &ProbeSetConfig) -> Vec<Conversation> {
    (0..config.conversations)
        .map(|i| {
            let s = seed.wrapping_mul(1_000_003).wrapping_add(i as u64)
                ^ (family as u64 + 1).wrapping_mul(0x5851_F42D_4C95_7F2D);
            conversation(family, s, i, config)
        })
        .collect()
}

fn conversation(family: Family, seed: u64, index: usize, config: &ProbeSetConfig) -> Conversation {
    let mut rng = SplitMix64::new(seed);
    let mut topic_ids: Vec<usize> = (0..TOPICS.len()).collect();
    rng.shuffle(&mut topic_ids);
    topic_ids.truncate(config.topics.min(TOPICS.len()));
    let mut values = Values { rng: &mut rng, used: BTreeSet::new() };
    let mut kinds: Vec<&'static str> = KINDS.to_vec();
    for _ in 0..KINDS.len() / 2 {
        kinds.push(*values.rng.pick(KINDS));
    }
    values.rng.shuffle(&mut kinds);
    let user = family.user();
    let mut turns: Vec<Turn> = Vec::new();
    let mut boundaries = Vec::new();
    // (turn position, category, question, answer, evidence positions)
    let mut pending: Vec<(usize, &'static str, String, String, Vec<usize>)> = Vec::new();
    let mut clock: i64 = 1_799_053_200 + 86_400 * 30 * (family as i64 + 1);
    // Kinds dealt to topics so that no topic gets one kind twice (its questions would be
    // ambiguous).
    let per_topic = kinds.len().div_ceil(topic_ids.len());
    let mut dealt: Vec<Vec<&'static str>> = vec![Vec::new(); topic_ids.len()];
    for (n, k) in kinds.into_iter().enumerate() {
        let slot = (0..dealt.len())
            .map(|j| (n + j) % dealt.len())
            .find(|&j| dealt[j].len() < per_topic && !dealt[j].contains(&k))
            .unwrap_or(n % dealt.len());
        dealt[slot].push(k);
    }
    let mut distractors: Vec<String> = Vec::new();
    for (&t, section_kinds) in topic_ids.iter().zip(dealt) {
        let topic = &TOPICS[t];
        let plants: Vec<Plant> = section_kinds.into_iter().map(|k| plant(family, k, &mut values, topic)).collect();
        let len = values.rng.range(config.min_turns_per_topic, config.max_turns_per_topic);
        // Each plant's turns at its slot, `gap` filler turns apart; later plants move past
        // positions already taken.
        let mut slots: Vec<usize> = (2..len).collect();
        values.rng.shuffle(&mut slots);
        let mut starts: Vec<usize> = slots.into_iter().take(plants.len()).collect();
        starts.sort_unstable();
        let mut placed: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
        for (p, plant) in plants.iter().enumerate() {
            let mut pos = starts[p];
            for k in 0..plant.turns.len() {
                while placed.contains_key(&pos) {
                    pos += 1;
                }
                placed.insert(pos, (p, k));
                pos += plant.gap + 1;
            }
        }
        let end = len.max(placed.keys().next_back().map_or(0, |&k| k + 1));
        clock += 3600 * values.rng.range(2, 20) as i64;
        let mut positions: Vec<Vec<usize>> = plants.iter().map(|p| vec![0; p.turns.len()]).collect();
        let section_start = turns.len();
        for k in 0..end {
            clock += 30 + values.rng.range(0, 150) as i64;
            let (role, text) = if let Some(&(p, j)) = placed.get(&k) {
                positions[p][j] = turns.len();
                plants[p].turns[j].clone()
            } else {
                // Filler answers whoever spoke last.
                let role = match turns.last() {
                    Some(t) if t.role == Role::User && turns.len() > section_start => Role::Assistant,
                    _ => Role::User,
                };
                let mut text = filler(family, values.rng, topic, role);
                if !distractors.is_empty() && values.rng.chance(0.3) {
                    text.push(' ');
                    text.push_str(&distractors[values.rng.below(distractors.len())]);
                }
                (role, text)
            };
            let id = format!("t{}", turns.len() + 1);
            let speaker = if role == Role::User { user } else { "assistant" };
            if k == 0 {
                boundaries.push(id.clone());
            }
            turns.push(Turn::new(id, role, text).with_speaker(speaker).with_timestamp(Timestamp(clock)));
        }
        for (p, plant) in plants.into_iter().enumerate() {
            distractors.extend(plant.distractors);
            for fp in plant.probes {
                let evidence: Vec<usize> = fp.evidence.iter().map(|&j| positions[p][j]).collect();
                let last = *positions[p].iter().max().expect("a plant has turns");
                pending.push((last, fp.category, fp.question, fp.answer, evidence));
            }
        }
    }
    let n = turns.len();
    let probes = pending
        .into_iter()
        .enumerate()
        .map(|(i, (at, category, question, answer, evidence))| {
            let after = if values.rng.chance(0.5) || at + 40 >= n { n - 1 } else { values.rng.range(at + 40, n - 1) };
            Probe {
                id: format!("p{}-{index}-{}", family.name(), i + 1),
                question,
                answer,
                evidence: evidence.iter().map(|&e| turns[e].id.clone()).collect(),
                after: Some(turns[after].id.clone()),
                category: Some(category.to_string()),
                adversarial_answer: None,
            }
        })
        .collect();
    Conversation {
        id: format!("probes-{}-{index:02}", family.name()),
        participants: vec![Participant { name: user.into(), role: None }],
        turns,
        probes,
        boundaries,
        references: Vec::new(),
    }
}
