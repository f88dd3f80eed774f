//! Scenario tests of the policy: when it acts, when guards hold it, where each turn goes.

use expect_test::expect;
use strata_core::{Role, Tier, Timestamp};

use crate::{plan, GuardKind, PolicyConfig, Preset, State, TierLimit, TurnState};

const MIN: i64 = 60;
const NOW: i64 = 1_700_000_000;

/// A small config so scenarios stay short: window 1000, hot 400 / 30 min, warm 200 / 2 h,
/// cool 100 / 8 h.
fn small() -> PolicyConfig {
    PolicyConfig {
        hot: TierLimit { tokens: 400, age_seconds: 30 * MIN },
        warm: TierLimit { tokens: 200, age_seconds: 120 * MIN },
        cool: TierLimit { tokens: 100, age_seconds: 480 * MIN },
        window: 1000,
        ..PolicyConfig::default()
    }
}

struct Convo {
    ids: Vec<String>,
    texts: Vec<String>,
    spec: Vec<(usize, i64, Tier)>,
}

/// Turns of `tokens` tokens, the i-th said `ages[i]` minutes before now.
fn convo(ages_min: &[i64], tokens: usize) -> Convo {
    Convo {
        ids: (0..ages_min.len()).map(|i| format!("t{i}")).collect(),
        texts: vec!["some ordinary words".to_string(); ages_min.len()],
        spec: ages_min.iter().map(|a| (tokens, NOW - a * MIN, Tier::Hot)).collect(),
    }
}

impl Convo {
    fn state(&self) -> State<'_> {
        State {
            turns: self
                .spec
                .iter()
                .enumerate()
                .map(|(i, &(tokens, ts, tier))| TurnState {
                    index: i,
                    id: &self.ids[i],
                    role: if i % 2 == 0 { Role::User } else { Role::Assistant },
                    content: &self.texts[i],
                    tokens,
                    timestamp: Some(Timestamp(ts)),
                    tier,
                })
                .collect(),
            topic_starts: Vec::new(),
            checkpoint: false,
            ..State::default()
        }
    }
}

fn guard_kinds(p: &crate::Plan) -> Vec<GuardKind> {
    p.guards.iter().map(|g| g.kind).collect()
}

#[test]
fn under_the_soft_limit_nothing_moves() {
    let c = convo(&[300, 200, 100, 5], 50);
    let mut state = c.state();
    state.checkpoint = true;
    let p = plan(&state, &small(), Timestamp(NOW));
    assert!(!p.act);
    assert_eq!(guard_kinds(&p), [GuardKind::UnderSoftLimit]);
    assert!(p.tiers.iter().all(|t| *t == Tier::Hot));
    assert!(p.moves.is_empty());
}

#[test]
fn pressure_and_age_and_a_topic_shift_act_and_explain_themselves() {
    // 12 turns of 60 tokens = 720 of 1000 tokens (72%), spread over six hours.
    let ages: Vec<i64> = (0..12).map(|i| 360 - i * 30).collect();
    let c = convo(&ages, 60);
    let mut state = c.state();
    state.topic_starts = vec![8];
    let p = plan(&state, &small(), Timestamp(NOW));
    expect![[r#"
        act: score 0.74 exceeds 0.50
        score 0.74 (tokens 720 -> 168)
          trigger pressure        0.73 x 0.40 = 0.29  720 of 1000 tokens (72%)
          trigger age             1.00 x 0.20 = 0.20  oldest verbatim turn 6.0 h
          trigger topic-shift     1.00 x 0.25 = 0.25  a topic starts at t8, leaving a finished one verbatim
          trigger task-completion 0.00 x 0.10 = 0.00  no finished task in the newest turns
          trigger checkpoint      0.00 x 0.05 = 0.00  no checkpoint
          move t0 Hot -> Cool: 6.0 h old, past 2.0 h
          move t1 Hot -> Cool: 5.5 h old, past 2.0 h
          move t2 Hot -> Cool: 5.0 h old, past 2.0 h
          move t3 Hot -> Cool: 4.5 h old, past 2.0 h
          move t4 Hot -> Cool: 4.0 h old, past 2.0 h
          move t5 Hot -> Cool: 3.5 h old, past 2.0 h
          move t6 Hot -> Cool: 3.0 h old, past 2.0 h
          move t7 Hot -> Cool: 2.5 h old, past 2.0 h
          move t8 Hot -> Warm: 2.0 h old, past 30 min
          move t9 Hot -> Warm: 90 min old, past 30 min
          move t10 Hot -> Warm: 60 min old, past 30 min
        tiers: hot 1, warm 3, cool 8, cold 0
    "#]]
    .assert_eq(&p.explain());
}

#[test]
fn tiers_fill_by_allowance_and_only_get_colder() {
    // All recent, so only the token allowances decide: 400 hot (4 turns), 200 warm (5 turns
    // of 34 tokens at 3x, rounded up), 100 cool (10 turns at 10x), the rest cold.
    let c = convo(&[10; 24], 100);
    let mut state = c.state();
    state.checkpoint = true;
    let mut config = small();
    config.window = 1600;
    config.threshold = 0.0;
    config.soft_limit = 0.0;
    let p = plan(&state, &config, Timestamp(NOW));
    assert!(p.act, "{}", p.explain());
    assert_eq!(p.occupancy(), [4, 5, 10, 5], "{}", p.explain());
    assert!(p.tiers.windows(2).all(|w| w[0] >= w[1]), "older turns are never warmer");
    // A turn already cool stays cool even where the allowance would let it be warm.
    let mut c2 = convo(&[10; 4], 10);
    c2.spec[1].2 = Tier::Cool;
    let mut state = c2.state();
    state.checkpoint = true;
    let p = plan(&state, &config, Timestamp(NOW));
    assert_eq!(p.tiers, [Tier::Cool, Tier::Cool, Tier::Hot, Tier::Hot]);
}

#[test]
fn guards_hold_until_the_hard_limit() {
    let ages: Vec<i64> = (0..12).map(|i| 360 - i * 30).collect();
    let mut c = convo(&ages, 60);
    c.texts[10] = "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>".to_string();
    let state = c.state();
    let p = plan(&state, &small(), Timestamp(NOW));
    assert!(!p.act);
    assert_eq!(guard_kinds(&p), [GuardKind::Debugging]);
    assert!(p.reason.contains("Debugging"), "{}", p.reason);
    // Past 80% of the window the policy acts whatever the guards say.
    let mut c = convo(&ages, 70);
    c.texts[10] = "thread 'main' panicked at src/main.rs:3:5".to_string();
    let p = plan(&c.state(), &small(), Timestamp(NOW));
    assert!(p.act);
    assert!(p.reason.contains("hard limit"), "{}", p.reason);
}

#[test]
fn each_guard_recognises_its_situation() {
    let ages: Vec<i64> = (0..12).map(|i| 360 - i * 30).collect();
    let config = small();
    let case = |edits: &[(usize, &str)], ages: &[i64]| {
        let mut c = convo(ages, 60);
        for (i, text) in edits {
            c.texts[*i] = text.to_string();
        }
        guard_kinds(&plan(&c.state(), &config, Timestamp(NOW)))
    };
    assert_eq!(case(&[(10, "Can you refactor the parser?")], &ages), [GuardKind::OngoingTask]);
    assert!(case(&[(8, "Can you refactor the parser?"), (11, "That worked, thanks!")], &ages).is_empty());
    assert_eq!(
        case(&[(9, "As I mentioned, the API key is rotated"), (11, "going back to the schema")], &ages),
        [GuardKind::BackReferences]
    );
    let rapid: Vec<i64> = (0..12).map(|i| 12 - i).collect();
    assert_eq!(case(&[], &rapid), [GuardKind::RapidExchange]);
}

#[test]
fn a_task_guard_names_the_turn_that_started_the_task() {
    // A topic starts among the newest six turns; the task is asked after it.
    let ages: Vec<i64> = (0..12).map(|i| 360 - i * 30).collect();
    let mut c = convo(&ages, 60);
    c.texts[10] = "Can you refactor the parser?".to_string();
    let mut state = c.state();
    state.topic_starts = vec![8];
    let p = plan(&state, &small(), Timestamp(NOW));
    let guard = p.guards.iter().find(|g| g.kind == GuardKind::OngoingTask).expect("the task holds the plan");
    assert_eq!(guard.why, "t10 starts a task not yet finished");
}

#[test]
fn the_two_hour_rule() {
    let config = PolicyConfig { preset: Preset::TwoHour, ..small() };
    // Heavy but recent: under 30 minutes only the hard limit acts.
    let c = convo(&[25, 20, 15, 10, 5, 1], 120);
    let p = plan(&c.state(), &config, Timestamp(NOW));
    assert!(!p.act);
    assert_eq!(guard_kinds(&p), [GuardKind::TooRecent]);
    // An hour old without a breakpoint: wait.
    let c = convo(&[60, 50, 40, 30, 20, 10], 20);
    let p = plan(&c.state(), &PolicyConfig { soft_limit: 0.0, ..config.clone() }, Timestamp(NOW));
    assert_eq!(guard_kinds(&p), [GuardKind::NoBreakpoint]);
    // ... but at a topic shift, act, and compress the finished topic.
    let mut state = c.state();
    state.topic_starts = vec![4];
    let p = plan(&state, &PolicyConfig { soft_limit: 0.0, ..config.clone() }, Timestamp(NOW));
    assert!(p.act, "{}", p.explain());
    assert_eq!(p.tiers, [Tier::Warm, Tier::Warm, Tier::Warm, Tier::Warm, Tier::Hot, Tier::Hot]);
    // Past two hours, act without a breakpoint; past eight, to cold.
    let c = convo(&[600, 300, 150, 10], 20);
    let p = plan(&c.state(), &PolicyConfig { soft_limit: 0.0, ..config }, Timestamp(NOW));
    assert!(p.act && p.reason.contains("2-hour rule"), "{}", p.explain());
    assert_eq!(p.tiers, [Tier::Cold, Tier::Cool, Tier::Cool, Tier::Hot]);
}

#[test]
fn budget_scaling_keeps_the_proportions() {
    let c = PolicyConfig::for_budget(2000);
    assert_eq!((c.hot.tokens, c.warm.tokens, c.cool.tokens, c.window), (1000, 500, 250, 2000));
    let d = PolicyConfig::default();
    assert_eq!(PolicyConfig::for_budget(40_000).hot, d.hot);
}

/// What the turns of the equivalence test say: plain chat, and each text signal.
const SAYS: [&str; 6] = [
    "some ordinary words about the build",
    "can you fix the parser",
    "that worked, thanks",
    "as i mentioned before, the cache",
    "Traceback (most recent call last):\n  File \"x.py\", line 3",
    "more ordinary words",
];

/// Plans a conversation turn by turn twice: with every turn in the state, and with the cold
/// turns left out (as a memory does); every plan must be the same.
fn plan_both_ways(seeds: &[(u8, u8)], pinned: usize, config: &PolicyConfig) {
    let ids: Vec<String> = (0..seeds.len()).map(|i| format!("t{i}")).collect();
    let mut ts = NOW;
    let mut spec: Vec<(usize, i64, &str, Role)> = Vec::new();
    let mut starts: Vec<usize> = Vec::new();
    let mut tiers: Vec<Tier> = Vec::new();
    for (i, &(a, b)) in seeds.iter().enumerate() {
        ts += if a % 17 == 0 { 3 * 3600 } else { i64::from(a % 5) * MIN };
        let role = if i < pinned {
            Role::System
        } else if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        spec.push((usize::from(b % 90) + 5, ts, SAYS[usize::from(a / 43) % SAYS.len()], role));
        if b % 9 == 0 && i > 0 {
            starts.push(i);
        }
        tiers.push(Tier::Hot);
        let now = Timestamp(ts + i64::from(b % 3) * 20 * MIN);
        let turn = |k: usize| TurnState {
            index: k,
            id: &ids[k],
            role: spec[k].3,
            content: spec[k].2,
            tokens: spec[k].0,
            timestamp: Some(Timestamp(spec[k].1)),
            tier: tiers[k],
        };
        let checkpoint = a % 23 == 0;
        let whole =
            State { turns: (0..=i).map(turn).collect(), left_out: 0, pinned, topic_starts: starts.clone(), checkpoint };
        let recent_from = (i + 1).saturating_sub(config.recent_turns.max(1));
        let kept: Vec<usize> = (0..=i)
            .filter(|&k| k < pinned || k >= recent_from || tiers[k] != Tier::Cold || starts.last() == Some(&k))
            .collect();
        let part = State {
            turns: kept.iter().map(|&k| turn(k)).collect(),
            left_out: i + 1 - kept.len(),
            pinned,
            topic_starts: starts.clone(),
            checkpoint,
        };
        let full = plan(&whole, config, now);
        let mut short = plan(&part, config, now);
        // The plan of the part, spread back over the whole conversation.
        let mut spread = tiers.clone();
        for (&k, &t) in kept.iter().zip(&short.tiers) {
            spread[k] = t;
        }
        assert_eq!(spread, full.tiers, "after {} turns", i + 1);
        short.tiers = full.tiers.clone();
        short.left_out = 0;
        assert_eq!(short, full, "after {} turns", i + 1);
        tiers = full.tiers;
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
    #[test]
    fn leaving_the_cold_turns_out_changes_no_plan(
        seeds in proptest::collection::vec((proptest::prelude::any::<u8>(), proptest::prelude::any::<u8>()), 0..150),
        pinned in 0usize..2,
        two_hour in proptest::prelude::any::<bool>(),
    ) {
        let config = if two_hour { PolicyConfig { preset: Preset::TwoHour, ..small() } } else { small() };
        plan_both_ways(&seeds, pinned, &config);
    }
}

/// A score just over the threshold is shown with the decimals that tell them apart.
#[test]
fn a_score_and_its_threshold_never_read_the_same() {
    assert_eq!(crate::apart(0.5004, 0.5), "0.5004");
    assert_eq!(crate::apart(0.5, 0.5004), "0.5000");
    assert_eq!(crate::apart(0.74, 0.5), "0.74");
    assert_eq!(crate::apart(0.5, 0.5), "0.50");
}
