//! Seeded probe sets: long multi-topic conversations with planted facts buried under filler
//! that carries distractors of the same kinds, and probes whose answer is the exact planted
//! value.
//!
//! Everything comes from one seed through a SplitMix64 generator written here, so the same
//! seed gives byte-identical output on every platform and with every dependency version.
//! `cargo xtask gen-probes --seed N` writes [`PROBES_FILE`].
//!
//! `written` makes probes for any conversation instead, asking a generator for them and
//! keeping the ones that pass its checks ([`write_probes`], `strata probes`).

/// The committed probe set (seed 7), relative to the repository root: the eval's `probes` suite.
pub const PROBES_FILE: &str = "datasets/probes/probes.jsonl";

use std::collections::BTreeSet;

use strata_core::{Conversation, Participant, Probe, Role, Timestamp, Turn};

mod families;
mod paraphrase;
mod written;

pub use families::{
    generate_family, Family, DEV_FAMILIES, HELDOUT_FAMILY, PROBES_DEV_FILE, PROBES_HELDOUT_FILE,
    PROBES_HELDOUT_PARAPHRASED_FILE, PROBES_PARAPHRASED_FILE,
};
pub use paraphrase::{paraphrase, ParaphraseStats, Refusal, PARAPHRASE_PROMPT};
pub use written::{write_probes, Kind, Reason, Verdict, WriteConfig, Written};

/// Conversations per family in the development suite.
const DEV_CONVERSATIONS: usize = 8;
/// Conversations in the held-out suite.
const HELDOUT_CONVERSATIONS: usize = 12;

/// The development suite: the dev families' conversations, family by family.
pub fn dev_set(seed: u64) -> Vec<Conversation> {
    let config = ProbeSetConfig { conversations: DEV_CONVERSATIONS, ..ProbeSetConfig::default() };
    DEV_FAMILIES.iter().flat_map(|&f| generate_family(f, seed, &config)).collect()
}

/// The held-out suite: the held-out family's conversations.
pub fn heldout_set(seed: u64) -> Vec<Conversation> {
    let config = ProbeSetConfig { conversations: HELDOUT_CONVERSATIONS, ..ProbeSetConfig::default() };
    generate_family(HELDOUT_FAMILY, seed, &config)
}

/// A small, fast, well-mixed generator (Steele et al. 2014) with a fixed algorithm.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// How big a probe set is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSetConfig {
    pub conversations: usize,
    pub topics: usize,
    /// Turns of each topic section, before planted facts.
    pub min_turns_per_topic: usize,
    pub max_turns_per_topic: usize,
}

impl Default for ProbeSetConfig {
    fn default() -> Self {
        ProbeSetConfig { conversations: 16, topics: 9, min_turns_per_topic: 36, max_turns_per_topic: 56 }
    }
}

struct Topic {
    name: &'static str,
    service: &'static str,
    project: &'static str,
    terms: &'static [&'static str],
}

const TOPICS: &[Topic] = &[
    Topic {
        name: "billing service redesign",
        service: "billing",
        project: "billing revamp",
        terms: &["invoices", "idempotency keys", "tax rules", "proration", "ledger entries", "refund flow"],
    },
    Topic {
        name: "payments API incident",
        service: "payments-api",
        project: "payments hardening",
        terms: &["error budget", "retry storm", "circuit breaker", "p99 latency", "on-call rota", "postmortem"],
    },
    Topic {
        name: "Q3 marketing campaign",
        service: "campaign-tracker",
        project: "Q3 campaign",
        terms: &["landing page", "ad spend", "conversion rate", "A/B test", "newsletter", "attribution"],
    },
    Topic {
        name: "data pipeline migration",
        service: "ingest-worker",
        project: "pipeline migration",
        terms: &["backfill", "partitioning", "schema registry", "late events", "dead-letter queue", "batch window"],
    },
    Topic {
        name: "mobile app release",
        service: "mobile-gateway",
        project: "app 4.0 release",
        terms: &["crash rate", "feature flags", "app store review", "beta testers", "push notifications", "dark mode"],
    },
    Topic {
        name: "security audit",
        service: "auth-service",
        project: "SOC 2 audit",
        terms: &["access reviews", "key rotation", "MFA enforcement", "audit log", "pen test", "least privilege"],
    },
    Topic {
        name: "search relevance work",
        service: "search-api",
        project: "relevance sprint",
        terms: &["ranking features", "click logs", "synonyms", "query latency", "index rebuild", "typo tolerance"],
    },
    Topic {
        name: "team offsite planning",
        service: "events-portal",
        project: "spring offsite",
        terms: &["venue", "agenda", "travel bookings", "workshops", "dietary needs", "team dinner"],
    },
    Topic {
        name: "database performance tuning",
        service: "orders-db",
        project: "database tuning",
        terms: &["slow queries", "index bloat", "connection pool", "vacuum", "read replicas", "query plans"],
    },
    Topic {
        name: "customer onboarding flow",
        service: "onboarding-web",
        project: "onboarding refresh",
        terms: &["signup funnel", "welcome email", "activation", "tooltips", "drop-off", "trial length"],
    },
];

const NAMES: &[&str] = &["Priya", "Marco", "Lena", "Tomasz", "Aisha", "Kenji", "Sofia", "Dmitri", "Grace", "Oluwaseun"];
/// Month names of the planted dates. `strata_text::dates` has its own: this crate depends on
/// strata-core alone (so xtask builds no text or model code for it), and a probe set must stay
/// byte-identical whatever the system's date rendering becomes.
const MONTHS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The kinds of planted fact; each is also the probe's category.
const KINDS: &[&str] =
    &["incident", "budget", "path", "command", "decision", "reason", "preference", "date", "assistant-fact"];

/// Unique values: every planted value and distractor differs from every other in a conversation.
struct Values<'a> {
    rng: &'a mut SplitMix64,
    used: BTreeSet<String>,
}

impl Values<'_> {
    fn fresh(&mut self, make: impl Fn(&mut SplitMix64) -> String) -> String {
        loop {
            let v = make(self.rng);
            if self.used.insert(v.clone()) {
                return v;
            }
        }
    }

    fn incident(&mut self) -> String {
        self.fresh(|r| format!("INC-{}", r.range(10_000, 99_999)))
    }

    fn money(&mut self) -> String {
        self.fresh(|r| {
            let amount = r.range(3, 95) * 500;
            let (sym, thousands) = (*r.pick(&["€", "$", "£"]), amount / 1000);
            if amount % 1000 == 0 {
                format!("{sym}{thousands},000")
            } else {
                format!("{sym}{thousands},{:03}", amount % 1000)
            }
        })
    }

    fn path(&mut self, service: &str) -> String {
        let service = service.to_string();
        self.fresh(move |r| {
            let file = *r.pick(&["config", "limits", "routes", "settings", "flags", "workers"]);
            match r.below(3) {
                0 => format!("/etc/{service}/{file}.yaml"),
                1 => format!("deploy/{service}/{file}-{}.toml", r.range(2, 9)),
                _ => format!("src/{}/{file}.rs", service.replace('-', "_")),
            }
        })
    }

    fn command(&mut self, service: &str) -> String {
        let service = service.to_string();
        self.fresh(move |r| match r.below(3) {
            0 => format!("kubectl rollout undo deployment/{service} -n {}", r.pick(&["prod", "prod-eu", "prod-us"])),
            1 => format!("git revert --no-edit {:07x}", r.next_u64() & 0xfff_ffff),
            _ => format!("helm rollback {service} {}", r.range(3, 40)),
        })
    }

    /// An entry of `table` whose key this conversation has not used yet (tables are larger
    /// than the number of facts of one kind a conversation plants).
    fn unused<T: Copy>(&mut self, table: &[(&'static str, T)]) -> (&'static str, T) {
        loop {
            let entry = *self.rng.pick(table);
            if self.used.insert(format!("key:{}", entry.0)) {
                return entry;
            }
        }
    }

    fn date(&mut self) -> String {
        self.fresh(|r| format!("{} {} 2027", r.range(1, 28), r.pick(MONTHS)))
    }

    fn millis(&mut self) -> String {
        self.fresh(|r| format!("{} ms", r.range(12, 95) * 10))
    }
}

type Options = (&'static [&'static str], &'static [&'static str]);

const DECISIONS: &[(&str, Options)] = &[
    (
        "message broker",
        (
            &["Kafka", "RabbitMQ", "NATS", "Pulsar"],
            &[
                "it keeps ordering per partition",
                "the ops team already runs it",
                "it supports replay of old events",
                "its latency stayed under load",
            ],
        ),
    ),
    (
        "database",
        (
            &["PostgreSQL", "CockroachDB", "MySQL", "DynamoDB"],
            &[
                "we need strict transactions",
                "the team knows it best",
                "it scales writes across regions",
                "the managed offering is cheapest",
            ],
        ),
    ),
    (
        "feature flag tool",
        (
            &["LaunchDarkly", "Unleash", "Flagsmith", "GrowthBook"],
            &[
                "it can run self-hosted",
                "it has audit trails built in",
                "the SDK is smallest",
                "it integrates with our experiments",
            ],
        ),
    ),
    (
        "CI system",
        (
            &["GitHub Actions", "Buildkite", "GitLab CI", "CircleCI"],
            &[
                "builds run on our own runners",
                "caching cut build times in half",
                "it was already approved by security",
                "pricing is per minute",
            ],
        ),
    ),
    (
        "tracing backend",
        (
            &["Jaeger", "Tempo", "Honeycomb", "Zipkin"],
            &[
                "it samples at the tail",
                "storage costs stay flat",
                "queries over high cardinality are fast",
                "it was the simplest to operate",
            ],
        ),
    ),
];

const PREFERENCES: &[(&str, &[&str])] = &[
    (
        "design reviews",
        &["written proposals sent a day ahead", "live whiteboard sessions", "short recorded walkthroughs"],
    ),
    ("status updates", &["short bullet lists", "one paragraph summaries", "tables with owners and dates"]),
    ("meeting times", &["mornings before 10am", "Tuesday afternoons", "no meetings on Fridays"]),
    ("code review comments", &["inline suggestions", "a single summary comment", "comments grouped by severity"]),
    ("notifications", &["email digests once a day", "Slack direct messages", "no notifications after 6pm"]),
];

fn filler_user(rng: &mut SplitMix64, topic: &Topic) -> String {
    let a = *rng.pick(topic.terms);
    let b = *rng.pick(topic.terms);
    let name = *rng.pick(NAMES);
    match rng.below(6) {
        0 => format!("Can you recap where we are on the {}? I lost track of the {a} discussion.", topic.name),
        1 => format!("{name} asked me about {a} again. What should I tell them about how it affects {b}?"),
        2 => format!("What are the open questions for the {} before we can move on?", topic.project),
        3 => format!("I skimmed the notes on {a}. Is there anything about {b} we still need to decide?"),
        4 => format!("Quick one: does the {} plan change if {a} slips by a week?", topic.project),
        _ => format!("Let's keep going on the {}. What would you look at next, {a} or {b}?", topic.name),
    }
}

fn filler_assistant(rng: &mut SplitMix64, topic: &Topic) -> String {
    let a = *rng.pick(topic.terms);
    let b = *rng.pick(topic.terms);
    let c = *rng.pick(topic.terms);
    let name = *rng.pick(NAMES);
    let n = rng.range(2, 9);
    match rng.below(6) {
        0 => format!("For the {}, the main risks are {a} and {b}. I would check {c} first, since it blocks {n} of the remaining tasks.", topic.name),
        1 => format!("{name} owns {a}, so they should confirm. From what I can see, {b} is fine as long as {c} holds."),
        2 => format!("There are {n} open items: {a}, {b} and a follow-up on {c}. None of them needs a decision today."),
        3 => format!("If {a} slips, {b} moves with it, but {c} can go ahead. I'd tell the team now rather than at the review."),
        4 => format!("I'd start with {a}. The numbers on {b} looked stable over the last {n} days, and {c} can wait."),
        _ => format!("Good question. {a} and {b} are linked through {c}; changing one means re-testing the other, roughly {n} hours of work."),
    }
}

/// One planted fact: the turn that states it, its probes, and a distractor sentence.
struct Plant {
    role: Role,
    text: String,
    probes: Vec<(&'static str, String, String)>,
    distractor: String,
}

fn plant(kind: &str, rng_values: &mut Values<'_>, topic: &Topic) -> Plant {
    let svc = topic.service;
    match kind {
        "incident" => {
            let (v, d) = (rng_values.incident(), rng_values.incident());
            Plant {
                role: Role::User,
                text: format!("Log this under {v}: the {svc} outage started right after the afternoon deploy."),
                probes: vec![("incident", format!("Which incident id was the {svc} outage logged under?"), v)],
                distractor: format!("{d} was the false alarm on the staging cluster; nothing to do there."),
            }
        }
        "budget" => {
            let (v, d) = (rng_values.money(), rng_values.money());
            Plant {
                role: Role::User,
                text: format!("Finance approved a budget of {v} for the {}.", topic.project),
                probes: vec![("budget", format!("What budget did finance approve for the {}?", topic.project), v)],
                distractor: format!("Another team asked for {d}, but that request is still pending."),
            }
        }
        "path" => {
            let key = format!("{}_timeout", svc.replace('-', "_"));
            let (v, d) = (rng_values.path(svc), rng_values.path(svc));
            Plant {
                role: Role::Assistant,
                text: format!("The {key} setting lives in {v}; change it there and redeploy."),
                probes: vec![("path", format!("Which file holds the {key} setting?"), v)],
                distractor: format!("{d} is only a template; it is not loaded at runtime."),
            }
        }
        "command" => {
            let (v, d) = (rng_values.command(svc), rng_values.command(svc));
            Plant {
                role: Role::Assistant,
                text: format!("To roll back {svc} safely, run `{v}` and watch the error rate for ten minutes."),
                probes: vec![("command", format!("What command rolls back {svc}?"), v)],
                distractor: format!("Do not run `{d}`; that one targets the staging cluster."),
            }
        }
        "decision" => {
            let (what, (options, reasons)) = rng_values.unused(DECISIONS);
            let mut idx: Vec<usize> = (0..options.len()).collect();
            rng_values.rng.shuffle(&mut idx);
            let (choice, other) = (options[idx[0]], options[idx[1]]);
            let (reason, other_reason) = (reasons[idx[0]], reasons[idx[1]]);
            Plant {
                role: Role::User,
                text: format!("Final choice for the {what}: we decided to go with {choice} because {reason}."),
                probes: vec![
                    (
                        "decision",
                        format!("Which {what} did the team decide on for the {}?", topic.project),
                        choice.to_string(),
                    ),
                    ("reason", format!("Why did the team choose {choice} as the {what}?"), reason.to_string()),
                ],
                distractor: format!("We also looked at {other} for the {what}; people liked that {other_reason}."),
            }
        }
        "preference" => {
            let (aspect, prefs) = rng_values.unused(PREFERENCES);
            let mut idx: Vec<usize> = (0..prefs.len()).collect();
            rng_values.rng.shuffle(&mut idx);
            let name = *rng_values.rng.pick(NAMES);
            Plant {
                role: Role::User,
                text: format!("By the way, for {aspect} I prefer {} from now on.", prefs[idx[0]]),
                probes: vec![(
                    "preference",
                    format!("What does the user prefer for {aspect}?"),
                    prefs[idx[0]].to_string(),
                )],
                distractor: format!("{name} told me they prefer {} for {aspect}.", prefs[idx[1]]),
            }
        }
        "date" => {
            let (v, d) = (rng_values.date(), rng_values.date());
            Plant {
                role: Role::User,
                text: format!("The {} launch is scheduled for {v}.", topic.project),
                probes: vec![("date", format!("When is the {} launch scheduled?", topic.project), v)],
                distractor: format!("The dry run was moved to {d}."),
            }
        }
        _ => {
            let (v, d) = (rng_values.millis(), rng_values.millis());
            Plant {
                role: Role::Assistant,
                text: format!("For reference, the p99 latency limit for {svc} is {v}; alerts fire above that."),
                probes: vec![("assistant-fact", format!("What is the p99 latency limit for {svc}?"), v)],
                distractor: format!("Last quarter the p99 for {svc} peaked at {d} during the sale."),
            }
        }
    }
}

/// Generates a probe set. The same seed and config give the same conversations.
pub fn generate(seed: u64, config: &ProbeSetConfig) -> Vec<Conversation> {
    (0..config.conversations)
        .map(|i| conversation(seed.wrapping_mul(1_000_003).wrapping_add(i as u64), i, config))
        .collect()
}

fn conversation(seed: u64, index: usize, config: &ProbeSetConfig) -> Conversation {
    let mut rng = SplitMix64::new(seed);
    let mut topic_ids: Vec<usize> = (0..TOPICS.len()).collect();
    rng.shuffle(&mut topic_ids);
    topic_ids.truncate(config.topics.min(TOPICS.len()));
    let mut values = Values { rng: &mut rng, used: BTreeSet::new() };
    // Every kind once, then the rest at random, spread over the topics.
    let mut kinds: Vec<&'static str> = KINDS.iter().copied().filter(|k| *k != "reason").collect();
    let extra = kinds.len();
    for _ in 0..extra / 2 {
        let k = *values.rng.pick(KINDS);
        if k != "reason" {
            kinds.push(k);
        }
    }
    values.rng.shuffle(&mut kinds);
    let mut turns: Vec<Turn> = Vec::new();
    let mut pending: Vec<(usize, &'static str, String, String)> = Vec::new();
    let mut boundaries = Vec::new();
    // 2027-01-04T09:00:00Z; topics are hours apart, turns a minute or two.
    let mut clock: i64 = 1_799_053_200;
    let mut turn_id = 0usize;
    let mut push = |turns: &mut Vec<Turn>, role: Role, text: String, clock: i64| -> String {
        turn_id += 1;
        let id = format!("t{turn_id}");
        let speaker = if role == Role::User { "jane" } else { "assistant" };
        turns.push(Turn::new(id.clone(), role, text).with_speaker(speaker).with_timestamp(Timestamp(clock)));
        id
    };
    let per_topic = kinds.len().div_ceil(topic_ids.len());
    let mut kind_iter = kinds.into_iter();
    let mut distractors: Vec<String> = Vec::new();
    for &t in &topic_ids {
        let topic = &TOPICS[t];
        let mut plants: Vec<Plant> = kind_iter.by_ref().take(per_topic).map(|k| plant(k, &mut values, topic)).collect();
        distractors.extend(plants.iter().map(|p| p.distractor.clone()));
        let len = values.rng.range(config.min_turns_per_topic, config.max_turns_per_topic);
        // Where in the section each fact is planted.
        let mut slots: Vec<usize> = (2..len).collect();
        values.rng.shuffle(&mut slots);
        let mut slots: Vec<usize> = slots.into_iter().take(plants.len()).collect();
        slots.sort_unstable();
        clock += 3600 * values.rng.range(2, 20) as i64;
        let mut first = true;
        for k in 0..len {
            clock += 30 + values.rng.range(0, 150) as i64;
            let role = if k % 2 == 0 { Role::User } else { Role::Assistant };
            let id = if let Some(pos) = slots.iter().position(|&s| s == k) {
                let p = plants.remove(pos);
                slots.remove(pos);
                // Keep the alternation: a fact stated by the other side gets its own turn.
                let id = push(&mut turns, p.role, p.text, clock);
                for (cat, q, a) in p.probes {
                    pending.push((turns.len() - 1, cat, q, a));
                }
                id
            } else {
                let mut text = if role == Role::User {
                    filler_user(values.rng, topic)
                } else {
                    filler_assistant(values.rng, topic)
                };
                // Distractors from this topic and earlier ones, so that the same kinds of value
                // appear in turns that do not answer the probes.
                if !distractors.is_empty() && values.rng.chance(0.3) {
                    text.push(' ');
                    text.push_str(&distractors[values.rng.below(distractors.len())]);
                }
                push(&mut turns, role, text, clock)
            };
            if first {
                boundaries.push(id);
                first = false;
            }
        }
    }
    let n = turns.len();
    let probes = pending
        .into_iter()
        .enumerate()
        .map(|(i, (at, cat, question, answer))| {
            // Half the probes are asked at the end, half some way after the fact was stated.
            let after = if values.rng.chance(0.5) || at + 40 >= n { n - 1 } else { values.rng.range(at + 40, n - 1) };
            Probe {
                id: format!("p{index}-{}", i + 1),
                question,
                answer,
                evidence: vec![turns[at].id.clone()],
                after: Some(turns[after].id.clone()),
                category: Some(cat.to_string()),
                adversarial_answer: None,
            }
        })
        .collect();
    Conversation {
        id: format!("probes-{index:02}"),
        participants: vec![Participant { name: "jane".into(), role: Some("team lead".into()) }],
        turns,
        probes,
        boundaries,
        references: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
