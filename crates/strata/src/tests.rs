//! Tests of the memory: durability across reopening, contexts within budget with a stable
//! prefix, background summaries that never block or lose turns, recall, and the rules every
//! strategy keeps.

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex};

use proptest::prelude::*;
use strata_core::{
    BlockKind, EmbedError, Embedder, GenerateError, GenerateRequest, Generation, Generator, History, Role, Strategy,
    Tier, Timestamp, TokenCounter, ToolCall, Turn,
};
use strata_tokens::Tiktoken;

use crate::{Clock, Memory, MemoryConfig, Parts, Tiered};

fn counter() -> Arc<dyn TokenCounter> {
    Arc::new(Tiktoken::o200k())
}

/// Hashed bag of words: similar wording, similar vector. A stand-in for MiniLM in unit tests.
#[derive(Debug)]
struct Words;

impl Embedder for Words {
    fn model_id(&self) -> &str {
        "test-bag-of-words"
    }
    fn dim(&self) -> usize {
        64
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 64];
                for w in t.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2) {
                    let h = w.to_lowercase().bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
                    v[(h % 64) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

fn parts(generator: Option<Arc<dyn Generator>>) -> Parts {
    Parts { counter: counter(), embedder: Some(Arc::new(Words)), generator, embed_queue: None, reranker: None }
}

const HOUR: i64 = 3600;
const T0: i64 = 1_700_000_000;

/// A day of work: a morning session about a deployment (with facts worth keeping), an
/// afternoon about a parser, an evening about dinner plans; each turn about 40 tokens.
fn day() -> Vec<Turn> {
    let mut turns = vec![Turn::new("sys", Role::System, "You are a helpful engineering assistant.")];
    let sessions: [(&str, i64, &[&str]); 3] = [
        (
            "m",
            0,
            &[
                "We decided to deploy with blue-green on cluster prod-eu-7 because rollbacks are instant.",
                "Good choice. The deploy script is ops/deploy.sh and it reads DEPLOY_TOKEN from the vault.",
                "Ticket OPS-4411 tracks the migration; the budget is $12,400 for the quarter.",
                "Noted. The canary stage should hold at 5% of traffic for 30 minutes before promotion.",
                "Let's also keep the old cluster warm for 48 hours after the switch.",
                "Agreed, that gives us a safe window if the database migration misbehaves.",
            ],
        ),
        (
            "a",
            4 * HOUR,
            &[
                "New topic: the tokenizer in parser/lexer.rs splits identifiers with unicode wrongly.",
                "It uses is_alphanumeric on bytes; switching to chars fixes combining marks.",
                "Please also add a regression test with the string naïve_café as an identifier.",
                "Added tests/lexer_unicode.rs covering naïve_café and 変数 identifiers.",
            ],
        ),
        (
            "e",
            9 * HOUR,
            &[
                "Different question: where should the team dinner be on Friday?",
                "Options: the Thai place on 5th street or the pizzeria near the office.",
                "Let's go with the Thai place; Priya is vegetarian and they have a good menu.",
                "Booked for 7 pm, table for eight, under the name Strata team.",
            ],
        ),
    ];
    for (prefix, start, texts) in sessions {
        for (i, text) in texts.iter().enumerate() {
            let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
            let mut t = Turn::new(format!("{prefix}{i}"), role, *text);
            t.timestamp = Some(Timestamp(T0 + start + i as i64 * 120));
            turns.push(t);
        }
    }
    turns
}

/// A budget the whole day does not fit (three quarters of what it costs), so that contexts
/// are built by the tiers rather than sent whole.
fn short_of_the_day() -> usize {
    History::from_turns("conv", &day(), counter()).unwrap().full_context_tokens() * 3 / 4
}

/// The project's committed probe suite (`datasets/probes/probes.jsonl`).
fn probe_set() -> Vec<strata_core::Conversation> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/probes/probes.jsonl");
    strata_transcript::load_path(&path, None).unwrap().conversations
}

fn config(budget: usize) -> MemoryConfig {
    let mut c = MemoryConfig::for_budget("conv", budget);
    c.clock = Clock::LastTurn;
    c
}

fn open(budget: usize, generator: Option<Arc<dyn Generator>>) -> Memory {
    Memory::open(config(budget), parts(generator)).unwrap()
}

/// A context for a question, and a recall, on a published snapshot take no lock a writer
/// holds: with another connection holding SQLite's write lock, a push blocks in the store's
/// append (holding the store's writer), and the snapshot still answers at once.
#[test]
fn a_snapshot_answers_while_the_writer_is_mid_append() {
    use std::sync::mpsc;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let mut c = config(300);
    c.path = Some(dir.path().join("memory.db"));
    let mut m = Memory::open(c.clone(), parts(None)).unwrap();
    for t in day() {
        m.push(t).unwrap();
    }
    m.settle();
    let snapshot = m.snapshot();
    let other = rusqlite::Connection::open(c.path.as_ref().unwrap()).unwrap();
    other.execute_batch("BEGIN IMMEDIATE; INSERT INTO conversations (name) VALUES ('x');").unwrap();
    let pushing = std::thread::spawn(move || {
        m.push(Turn::new("late", Role::User, "One more thing about the deploy.")).map(|()| m)
    });
    // Let the push reach the store's lock; were it later, the reads below would pass without
    // testing anything, never fail wrongly.
    std::thread::sleep(Duration::from_millis(300));
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let question = "Which script deploys, and which token does it read?";
        let ctx = snapshot.context(300, Some(question)).map(|c| c.total_tokens());
        let hit = snapshot.recall(question, 1).map(|h| h[0].turn.content.clone());
        send.send((ctx, hit)).unwrap();
    });
    let (ctx, hit) = receive.recv_timeout(Duration::from_secs(5)).expect("the snapshot waits on the writer");
    assert!(ctx.unwrap() <= 300);
    assert!(hit.unwrap().contains("ops/deploy.sh"));
    assert!(!pushing.is_finished(), "the push waits on the write lock");
    other.execute_batch("ROLLBACK").unwrap();
    let m = pushing.join().unwrap().unwrap();
    assert_eq!(m.history().turns().last().unwrap().id, "late");
}

#[test]
fn turns_tiers_and_summaries_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(300);
    c.path = Some(dir.path().join("memory.db"));
    let turns = day();
    let (tiers, summaries, ctx) = {
        let mut m = Memory::open(c.clone(), parts(None)).unwrap();
        for t in &turns {
            m.push(t.clone()).unwrap();
        }
        m.settle();
        assert!(m.tiers().iter().any(|t| *t != Tier::Hot), "the day is long enough to compact");
        (m.tiers().to_vec(), m.store().summaries("conv").unwrap(), m.context(300, None).unwrap())
    };
    assert!(!summaries.is_empty());
    let m = Memory::open(c, parts(None)).unwrap();
    assert_eq!(m.history().turns(), turns.as_slice());
    assert_eq!(m.tiers(), tiers.as_slice());
    // Nothing is summarised again: the stored summaries are reused, and the context is the same.
    assert_eq!(m.pending(), 0);
    assert_eq!(m.store().summaries("conv").unwrap(), summaries);
    // The salient sentences too: ranked from the stored turns before `open` returns.
    assert!(ctx.blocks.iter().any(|b| b.kind == BlockKind::Salient));
    assert_eq!(m.context(300, None).unwrap(), ctx);
}

/// Salient sentences are ranked by a background thread and, like summaries, come into view
/// only at a turn boundary: the context does not wait for a ranking, and does not change
/// between two pushes when one finishes.
#[test]
fn salient_sentences_are_ranked_in_the_background_and_swapped_in_at_turn_boundaries() {
    let turns = day();
    let budget = short_of_the_day();
    let mut m = open(budget, None);
    m.push_all(&turns[..turns.len() - 1]).unwrap();
    m.settle();
    let settled = m.context(budget, None).unwrap();
    let salient = |c: &strata_core::Context| c.blocks.iter().find(|b| b.kind == BlockKind::Salient).cloned();
    assert!(salient(&settled).is_some());
    // A push takes the newest ranking finished at that moment, which cannot have seen the
    // turn being pushed; the ranking with it lands later and waits for the next boundary.
    m.push(turns[turns.len() - 1].clone()).unwrap();
    let before = m.context(budget, None).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(m.context(budget, None).unwrap(), before);
    m.settle();
    let after = m.context(budget, None).unwrap();
    // Settled, the context is the one a memory that saw every turn at once builds.
    let mut whole = open(budget, None);
    whole.push_all(&turns).unwrap();
    whole.settle();
    assert_eq!(after, whole.context(budget, None).unwrap());
    assert!(salient(&after).is_some());
}

/// Topic shifts found by similarity (no pauses, no cue phrases) are the same for a memory
/// that was closed and reopened halfway as for one that saw every turn live: the reopened one
/// reads the vectors stored with the turns, and the live one holds them as the store does.
#[test]
fn a_reopened_memory_detects_the_same_topics() {
    let topics = [
        ["postgres index", "vacuum the postgres table", "query planner and index scans", "postgres index bloat"],
        ["tomato garden soil", "water the tomato plants", "garden soil compost", "tomato seedlings in the garden"],
        ["guitar chords practice", "practice guitar scales", "chords for the song", "guitar song strumming practice"],
    ];
    let mut turns = Vec::new();
    for (k, topic) in topics.iter().enumerate() {
        for (i, text) in topic.iter().cycle().take(8).enumerate() {
            let ts = T0 + 60 * (k * 8 + i) as i64;
            let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
            turns.push(
                Turn::new(format!("t{k}-{i}"), role, format!("About the {text}, as discussed."))
                    .with_timestamp(Timestamp(ts)),
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(2000);
    c.path = Some(dir.path().join("live.db"));
    let mut live = Memory::open(c, parts(None)).unwrap();
    for t in &turns {
        live.push(t.clone()).unwrap();
    }
    let starts = live.topic_starts();
    assert!(starts.contains(&8) && starts.contains(&16), "the topics are found by similarity: {starts:?}");
    let mut half = Memory::open(config(2000), parts(None)).unwrap();
    for t in &turns[..12] {
        half.push(t.clone()).unwrap();
    }
    let mut c = config(2000);
    c.path = Some(dir.path().join("reopened.db"));
    {
        let mut m = Memory::open(c.clone(), parts(None)).unwrap();
        for t in &turns[..12] {
            m.push(t.clone()).unwrap();
        }
    }
    let mut m = Memory::open(c, parts(None)).unwrap();
    assert!(half.topic_starts().contains(&8));
    assert_eq!(m.topic_starts(), half.topic_starts());
    for t in &turns[12..] {
        m.push(t.clone()).unwrap();
    }
    assert_eq!(m.topic_starts(), live.topic_starts());
    assert_eq!(m.tiers(), live.tiers());
}

#[test]
fn a_bad_turn_is_refused_and_not_stored() {
    let mut m = open(2000, None);
    m.push(Turn::new("u1", Role::User, "hello")).unwrap();
    let err = m.push(Turn::new("u1", Role::User, "again")).unwrap_err();
    assert!(err.to_string().contains("u1"), "{err}");
    let orphan = Turn::new("r1", Role::Tool, "result").with_tool_call_id("nope");
    assert!(m.push(orphan).is_err());
    assert_eq!(m.len(), 1);
    assert_eq!(m.store().len("conv").unwrap(), 1);
}

#[test]
fn contexts_fit_the_budget_and_keep_their_prefix_between_swaps() {
    let turns = day();
    for budget in [150, 300, 600, 2000] {
        let mut m = open(budget, None);
        for t in &turns {
            m.push(t.clone()).unwrap();
            m.settle();
            for q in [None, Some("where is the deploy script?")] {
                let ctx = m.context(budget, q).unwrap();
                assert!(ctx.total_tokens() <= budget, "{budget}: {}", ctx.total_tokens());
            }
        }
    }
    // Between swaps (no plan acting), a new turn only appends: the earlier context is a prefix.
    let mut m = open(2000, None);
    for t in &turns[..4] {
        m.push(t.clone()).unwrap();
    }
    let before = m.context(2000, None).unwrap();
    m.push(turns[4].clone()).unwrap();
    assert!(!m.last_plan().unwrap().act);
    let after = m.context(2000, None).unwrap();
    assert_eq!(after.blocks[..before.blocks.len()], before.blocks[..]);
    assert_eq!(after.blocks.len(), before.blocks.len() + 1);
}

#[test]
fn the_policy_compacts_old_sessions_and_the_registry_keeps_their_facts() {
    let mut m = open(500, None);
    for t in day() {
        m.push(t).unwrap();
    }
    m.settle();
    let tiers = m.tiers();
    // The morning is nine hours old by the evening: cold. The evening is hot.
    assert_eq!(tiers[1], Tier::Cold, "{tiers:?}\n{}", m.last_plan().unwrap().explain());
    assert_eq!(*tiers.last().unwrap(), Tier::Hot);
    // Short of the whole day, the tiers decide and the morning's script survives them. (Its
    // cluster name, `prod-eu-7`, survived only while this test's budget held the whole day,
    // when the day should have been sent as it was: below it, other sentences outrank it.)
    let ctx = m.context(short_of_the_day(), None).unwrap();
    let text = ctx.render_text();
    assert!(ctx.blocks.iter().any(|b| b.kind == BlockKind::Salient));
    assert!(text.contains("ops/deploy.sh"), "the script lost:\n{text}");
    let plan = m.last_plan().unwrap().explain();
    assert!(plan.contains("trigger"), "{plan}");
}

#[test]
fn a_question_recalls_the_turns_that_answer_it() {
    let mut m = open(300, None);
    for t in day() {
        m.push(t).unwrap();
    }
    m.settle();
    let ctx = m.context(300, Some("Which lexer file had the unicode identifier bug?")).unwrap();
    let recalled: Vec<&str> = ctx
        .blocks
        .iter()
        .filter(|b| b.kind == BlockKind::Recalled)
        .flat_map(|b| b.source_ids.iter().map(String::as_str))
        .collect();
    assert!(recalled.contains(&"a0"), "{recalled:?}");
    let hits = m.recall("deploy script vault token", 2).unwrap();
    assert_eq!(hits[0].turn.id, "m1");
}

/// A turn recalled whole is not also quoted by its salient sentences, at any budget; and a
/// history that fits is sent as it is, however much recall and salience would want.
#[test]
fn a_context_says_nothing_twice_and_a_history_that_fits_is_the_context() {
    let set = probe_set();
    let c = &set[0];
    let mut m = open(2000, None);
    m.push_all(&c.turns).unwrap();
    m.settle();
    let mut both = 0;
    for budget in (200..=2000).step_by(100) {
        for p in &c.probes {
            let ctx = m.context(budget, Some(&p.question)).unwrap();
            assert_eq!(ctx.repeated_turn(), None, "budget {budget}, {}: {:#?}", p.question, ctx.blocks);
            assert!(ctx.total_tokens() <= budget);
            let has = |k: BlockKind| ctx.blocks.iter().any(|b| b.kind == k);
            both += usize::from(has(BlockKind::Salient) && has(BlockKind::Recalled));
        }
    }
    // Contexts with both parts: where a turn could have been said twice.
    assert!(both > 20, "{both}");
    let whole = m.history().full_context_tokens();
    let question = Some(c.probes[0].question.as_str());
    for budget in [whole, whole + 1, 4 * whole] {
        for q in [None, question] {
            let ctx = m.context(budget, q).unwrap();
            assert_eq!(ctx.total_tokens(), whole, "budget {budget}");
            let ids: Vec<&str> = ctx.verbatim_ids().collect();
            let all: Vec<&str> = m.history().turns().iter().map(|t| t.id.as_str()).collect();
            assert_eq!(ids, all);
        }
    }
    assert!(m.context(whole - 1, question).unwrap().total_tokens() < whole);
}

#[test]
fn keep_newest_sends_the_message_being_answered_however_much_recall_wants() {
    // The newest turn asks the question; recall's 90% share would leave it out.
    let mut turns = day();
    let last = turns.last().unwrap().timestamp;
    let mut q =
        Turn::new("q", Role::User, "Which lexer file had the unicode identifier bug, and what was the test called?");
    q.timestamp = last;
    turns.push(q);
    for keep in [false, true] {
        let mut c = config(120);
        c.layout.keep_newest = keep;
        let mut m = Memory::open(c, parts(None)).unwrap();
        for t in turns.clone() {
            m.push(t).unwrap();
        }
        let ctx = m.context(120, Some(turns.last().unwrap().content.as_str())).unwrap();
        assert!(ctx.total_tokens() <= 120);
        let last = ctx.blocks.last().unwrap();
        let newest_last = last.kind == BlockKind::VerbatimTurn && last.source_ids == ["q"];
        assert_eq!(
            newest_last,
            keep,
            "keep_newest {keep}: {:?}",
            ctx.blocks.iter().map(|b| (&b.kind, &b.source_ids)).collect::<Vec<_>>()
        );
    }
}

#[test]
fn recall_never_crosses_conversations_sharing_a_store() {
    let store = Arc::new(strata_store::SqliteStore::in_memory().unwrap());
    let mut a = Memory::with_store(store.clone(), config(2000), parts(None)).unwrap();
    let mut other = config(2000);
    other.conversation = "other".into();
    let mut b = Memory::with_store(store, other, parts(None)).unwrap();
    a.push(Turn::new("x1", Role::User, "the launch code is 1234")).unwrap();
    b.push(Turn::new("y1", Role::User, "my launch code is 9999")).unwrap();
    assert_eq!(a.recall("launch code", 5).unwrap().iter().map(|h| h.turn.id.as_str()).collect::<Vec<_>>(), ["x1"]);
    assert_eq!(b.recall("launch code", 5).unwrap().iter().map(|h| h.turn.id.as_str()).collect::<Vec<_>>(), ["y1"]);
}

/// A generator that blocks until the test opens its gate.
#[derive(Debug, Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
    calls: Mutex<usize>,
}

impl Generator for Gate {
    fn model_id(&self) -> &str {
        "gate"
    }
    fn generate(&self, request: &GenerateRequest) -> Result<Generation, GenerateError> {
        *self.calls.lock().unwrap() += 1;
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
        // Answers with the prompt's first words: rejected by the keep-set check or not, the
        // point here is when it answers.
        let text: String = request.messages[1].content.split_whitespace().take(20).collect::<Vec<_>>().join(" ");
        Ok(Generation { text, prompt_tokens: 0, generated_tokens: 0, reused_tokens: 0 })
    }
}

#[test]
fn context_never_waits_on_the_summarizer() {
    let gate = Arc::new(Gate::default());
    let mut m = open(300, Some(gate.clone()));
    for t in day() {
        m.push(t).unwrap();
    }
    // The generator is blocked: pushes returned, and so does context, without the summaries.
    assert!(m.pending() > 0);
    let ctx = m.context(300, None).unwrap();
    assert!(!ctx.blocks.iter().any(|b| b.kind == BlockKind::Summary));
    assert!(ctx.notes.iter().any(|n| n.contains("no finished summary")), "{:?}", ctx.notes);
    assert!(ctx.total_tokens() <= 300);
    *gate.open.lock().unwrap() = true;
    gate.cv.notify_all();
    m.settle();
    assert!(*gate.calls.lock().unwrap() > 0);
    assert_eq!(m.pending(), 0);
    assert_eq!(m.len(), day().len());
}

/// A generator that always fails.
#[derive(Debug)]
struct Broken;

impl Generator for Broken {
    fn model_id(&self) -> &str {
        "broken"
    }
    fn generate(&self, _: &GenerateRequest) -> Result<Generation, GenerateError> {
        Err(GenerateError::Backend { model: "broken".into(), message: "out of memory".into() })
    }
}

#[test]
fn a_failing_summarizer_falls_back_and_loses_nothing() {
    let mut m = open(300, Some(Arc::new(Broken)));
    for t in day() {
        m.push(t).unwrap();
    }
    m.settle();
    let summaries = m.store().summaries("conv").unwrap();
    assert!(!summaries.is_empty());
    assert!(summaries.iter().all(|s| s.model == "extractive"), "{summaries:?}");
    assert_eq!(m.store().turns("conv").unwrap(), day());
}

fn arb_turns() -> impl proptest::strategy::Strategy<Value = Vec<Turn>> {
    use proptest::strategy::Strategy as _;
    let text = prop_oneof![
        Just(String::new()),
        "[a-z ]{1,40}",
        "[а-я ]{1,20}",
        Just("We decided to use port 8443 for ticket ABC-12.".to_string()),
        Just("big ".repeat(800)),
    ];
    let step = (0u8..5, text, 0i64..4000);
    (any::<bool>(), prop::collection::vec(step, 0..30)).prop_map(|(system, steps)| {
        let steps = steps.into_iter().map(|(kind, text, gap)| {
            let said = match kind {
                0 | 1 => Said::User,
                2 | 3 => Said::Assistant,
                _ => Said::ToolCall,
            };
            (said, text, gap * 10)
        });
        stream_of(system, steps)
    })
}

/// Who says a step of a generated stream: a user, the assistant, or the assistant calling a
/// tool (the call and its result).
enum Said {
    User,
    Assistant,
    ToolCall,
}

/// Turns from generated steps (who, text, seconds since the step before), after an optional
/// system prompt.
fn stream_of(system: bool, steps: impl IntoIterator<Item = (Said, String, i64)>) -> Vec<Turn> {
    let mut turns = Vec::new();
    if system {
        turns.push(Turn::new("sys", Role::System, "Be helpful."));
    }
    let mut ts = T0;
    for (i, (said, text, gap)) in steps.into_iter().enumerate() {
        ts += gap;
        let mut push = |mut t: Turn| {
            t.timestamp = Some(Timestamp(ts));
            turns.push(t);
        };
        match said {
            Said::User => push(Turn::new(format!("u{i}"), Role::User, text)),
            Said::Assistant => push(Turn::new(format!("a{i}"), Role::Assistant, text)),
            Said::ToolCall => {
                let mut call = Turn::new(format!("a{i}"), Role::Assistant, "");
                call.tool_calls = vec![ToolCall { id: format!("c{i}"), name: "f".into(), arguments: "{}".into() }];
                push(call);
                push(Turn::new(format!("r{i}"), Role::Tool, text).with_tool_call_id(format!("c{i}")));
            }
        }
    }
    turns
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn tiered_keeps_the_rules(turns in arb_turns(), budget in 0usize..2500, ask in any::<bool>()) {
        let h = History::from_turns("c", &turns, counter()).unwrap();
        let s = Tiered::new(Some(Arc::new(Words)), None);
        let question = ask.then_some("which port did we decide on?");
        let ctx = s.build(&h, budget, question).unwrap();
        prop_assert!(ctx.total_tokens() <= budget, "{} > {budget}", ctx.total_tokens());
        for b in &ctx.blocks {
            let counted = h.counter().count_message(b.role, b.name.as_deref(), &b.content, b.tool_call_id.as_deref(), &b.tool_calls);
            prop_assert_eq!(b.tokens, counted);
        }
        let present: BTreeSet<&str> = ctx.blocks.iter().filter(|b| !matches!(b.kind, BlockKind::Summary | BlockKind::Registry | BlockKind::Salient)).flat_map(|b| b.source_ids.iter().map(String::as_str)).collect();
        for i in 0..h.len() {
            let unit = h.unit_of(i);
            let inside = unit.turns.iter().filter(|&&j| present.contains(h.turns()[j].id.as_str())).count();
            prop_assert!(inside == 0 || inside == unit.turns.len(), "unit {:?} split", unit.turns);
        }
        let order: Vec<usize> = ctx.verbatim_ids().map(|id| h.index_of(id).unwrap()).collect();
        prop_assert!(order.windows(2).all(|w| w[0] < w[1]), "out of order: {order:?}");
        prop_assert_eq!(ctx.repeated_turn(), None);
        if !h.is_empty() && h.full_context_tokens() <= budget {
            prop_assert_eq!(ctx.total_tokens(), h.full_context_tokens(), "the history fits: it is the context");
        }
        // Same input, same output, also from a fresh strategy (nothing depends on timing).
        prop_assert_eq!(&ctx, &s.build(&h, budget, question).unwrap());
        let fresh = Tiered::new(Some(Arc::new(Words)), None);
        prop_assert_eq!(&ctx, &fresh.build(&h, budget, question).unwrap());
    }
}

#[test]
fn recalled_turns_say_when_they_were_said() {
    let mut m = open(300, None);
    let mut old = Turn::new("s1", Role::User, "I went to the LGBTQ support group yesterday.");
    old.timestamp = Some(Timestamp(1_683_504_000 + 13 * HOUR)); // 8 May 2023, 13:00
    m.push(old).unwrap();
    // A month later, enough talk to push it out of the verbatim tier.
    for i in 0..12 {
        let mut later =
            Turn::new(format!("s{}", i + 2), Role::User, "Anyway, tell me more about the garden plans. ".repeat(4));
        later.timestamp = Some(Timestamp(1_683_504_000 + 30 * 24 * HOUR + i * 60));
        m.push(later).unwrap();
    }
    assert_eq!(m.tiers()[0], Tier::Cold);
    let ctx = m.context(300, Some("When did I go to the support group?")).unwrap();
    let block = ctx.blocks.iter().find(|b| b.kind == BlockKind::Recalled).expect("recalled");
    // One block: a heading, then a date line for each day and one line per turn; the month-old
    // turn says what its "yesterday" was, the later ones (adjacent, so no blank line between
    // them) need no note.
    let expected = "[Recalled from earlier in this conversation, verbatim]\n\n[8 May 2023]\n\
                    user: [yesterday = 7 May 2023] I went to the LGBTQ support group yesterday.\n\n\
                    [7 June 2023]\nuser: Anyway, tell me more";
    assert!(block.content.starts_with(expected), "{}", block.content);
    assert!(!block.content.contains("\n\nuser"), "{}", block.content);
    assert_eq!(block.source_ids.len(), block.content.lines().filter(|l| l.starts_with("user: ")).count());
    assert_eq!(block.role, Role::System);
    assert_eq!(block.tokens, counter().count_message(block.role, None, &block.content, None, &[]));
}

#[test]
fn a_recalled_tool_call_comes_with_its_result_and_gaps_show() {
    let mut m = open(300, None);
    let at = |i: i64| Some(Timestamp(1_683_504_000 + i * 60));
    let mut ask = Turn::new("u1", Role::User, "Which kernel does the staging host run?");
    ask.timestamp = at(0);
    let mut call = Turn::new("a1", Role::Assistant, "Checking.");
    call.timestamp = at(1);
    call.tool_calls =
        vec![ToolCall { id: "call_7".into(), name: "shell".into(), arguments: "{\"cmd\":\"uname -r\"}".into() }];
    let mut result = Turn::new("r1", Role::Tool, "6.8.0-41-generic").with_tool_call_id("call_7");
    result.timestamp = at(2);
    for t in [ask, call, result] {
        m.push(t).unwrap();
    }
    for i in 0..12 {
        let mut t = Turn::new(format!("x{i}"), Role::User, "Unrelated chatter about lunch and the weather. ".repeat(4));
        t.timestamp = at(3 + i);
        m.push(t).unwrap();
    }
    let mut late = Turn::new("u2", Role::User, "The staging host reboots tonight.");
    late.timestamp = at(20);
    m.push(late).unwrap();
    for i in 0..12 {
        let mut t = Turn::new(format!("y{i}"), Role::User, "More unrelated chatter about lunch plans. ".repeat(4));
        t.timestamp = at(21 + i);
        m.push(t).unwrap();
    }
    let ctx = m.context(300, Some("what kernel is on the staging host")).unwrap();
    let block = ctx.blocks.iter().find(|b| b.kind == BlockKind::Recalled).expect("recalled");
    let lines: Vec<&str> = block.content.lines().collect();
    // The call and its result are one unit: both lines, in order, the call naming its id.
    let call = lines.iter().position(|l| l.starts_with("assistant: Checking.")).expect(&block.content);
    assert_eq!(lines[call], "assistant: Checking. [calls shell (call_7) with {\"cmd\":\"uname -r\"}]");
    assert_eq!(lines[call + 1], "tool (call_7): 6.8.0-41-generic");
    // Turns that were not adjacent are separated by a blank line (one more opens the day).
    let order: Vec<usize> = block.source_ids.iter().map(|id| m.history().index_of(id).unwrap()).collect();
    let gaps = order.windows(2).filter(|w| w[1] != w[0] + 1).count();
    assert!(gaps > 0, "{}", block.content);
    assert_eq!(lines.iter().filter(|l| l.is_empty()).count(), 1 + gaps, "{}", block.content);
    assert!(block.source_ids.iter().any(|id| id == "r1") && block.source_ids.iter().any(|id| id == "a1"));
}

#[test]
fn a_question_content_words_leave_out_question_words_stopwords_and_speakers() {
    let spoken = |who: &str| {
        let mut t = Turn::new(who, Role::User, "hi");
        t.speaker = Some(who.to_string());
        t
    };
    let turns = [spoken("Melanie Ortiz"), spoken("Caroline")];
    let mut grouping = crate::recall::Grouping::default();
    grouping.extend(&turns, &[[1, 1]; 2], &crate::config::RecallConfig::default(), 200);
    let words = |q: &str| crate::recall::content_words(q, &grouping.speakers);
    assert_eq!(words("What activities does Melanie partake in?").as_deref(), Some("activities partake"));
    assert_eq!(words("Where did Caroline's ORTIZ family move from?").as_deref(), Some("family move"));
    assert_eq!(words("When did Melanie paint a sunrise?").as_deref(), Some("paint sunrise"));
    // Nothing left, or nothing taken away: no second search.
    assert_eq!(words("What did Caroline do?"), None);
    assert_eq!(words("paint sunrise"), None);
}

#[test]
fn a_long_message_is_embedded_without_its_content_words() {
    let none = std::collections::BTreeSet::new();
    let question = "When did Melanie paint a sunrise?";
    assert_eq!(crate::question_texts(question, &none), [question, "Melanie paint sunrise"]);
    // The limit is in words: a message of as many words as it allows still gets the second
    // text, one word more does not.
    let words = |n: usize| (0..n).map(|i| format!("paint{i}")).collect::<Vec<_>>().join(" the ");
    let at_limit = words(crate::recall::CONTENT_WORDS_MAX.div_ceil(2));
    assert_eq!(crate::question_texts(&at_limit, &none).len(), 2, "{at_limit}");
    let long = format!("{at_limit} the sunrise again");
    assert_eq!(crate::question_texts(&long, &none), [long.as_str()]);
}

#[test]
fn rankings_combine_scaled_to_their_best_score() {
    let first = vec![(3, 0.04), (1, 0.02), (7, 0.01)];
    let second = vec![(1, 2.0), (5, 1.0)];
    let all = crate::recall::combine(&[(1.0, first.clone()), (1.0, second)]);
    // 1: 0.5 + 1.0; 3: 1.0; 5: 0.5; 7: 0.25.
    assert_eq!(all.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 3, 5, 7]);
    assert!((all[0].1 - 1.5).abs() < 1e-6);
    // One ranking keeps its order; ties go to the earlier turn.
    assert_eq!(crate::recall::combine(&[(1.0, first.clone())]).iter().map(|r| r.0).collect::<Vec<_>>(), [3, 1, 7]);
    assert_eq!(crate::recall::combine(&[(1.0, vec![(9, 1.0), (2, 1.0)])])[0].0, 2);
    assert!(crate::recall::combine(&[(1.0, Vec::new())]).is_empty());
}

/// Another model: the bag of words with its vector reversed, so the spaces disagree.
#[derive(Debug)]
struct Reversed;

impl Embedder for Reversed {
    fn model_id(&self) -> &str {
        "test-reversed"
    }
    fn dim(&self) -> usize {
        64
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(Words.embed(texts)?.into_iter().map(|v| v.into_iter().rev().collect()).collect())
    }
}

#[test]
fn a_store_is_searched_only_with_the_model_that_wrote_it_until_reembedded() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = MemoryConfig::new("c");
    config.path = Some(dir.path().join("m.db"));
    let with = |e: Arc<dyn Embedder>| Parts {
        counter: counter(),
        embedder: Some(e),
        generator: None,
        embed_queue: None,
        reranker: None,
    };
    {
        let mut m = Memory::open(config.clone(), with(Arc::new(Words))).unwrap();
        for t in day() {
            m.push(t).unwrap();
        }
    }
    let err = Memory::open(config.clone(), with(Arc::new(Reversed))).unwrap_err();
    assert!(err.to_string().contains("written by test-bag-of-words, not test-reversed"), "{err}");
    // Without an embedder the store is still readable, by words.
    Memory::open(
        config.clone(),
        Parts { counter: counter(), embedder: None, generator: None, embed_queue: None, reranker: None },
    )
    .unwrap();

    let store = strata_store::SqliteStore::open(config.path.as_ref().unwrap()).unwrap();
    let mut calls = Vec::new();
    let n = crate::reembed(&store, &Reversed, |c, done, total| calls.push((c.to_string(), done, total))).unwrap();
    assert_eq!(n, day().len());
    assert_eq!(calls.last(), Some(&("c".to_string(), n, n)));
    drop(store);
    let m = Memory::open(config.clone(), with(Arc::new(Reversed))).unwrap();
    let reversed = Reversed.embed(&[&strata_store::indexed_text(&m.history().turns()[1])]).unwrap();
    let stored = strata_store::Store::whole_vectors(
        &strata_store::SqliteStore::open(config.path.as_ref().unwrap()).unwrap(),
        "c",
    )
    .unwrap();
    let cos: f32 = stored[1].iter().zip(&reversed[0]).map(|(a, b)| a * b).sum();
    assert!(cos > 0.99, "the stored vector is the new model's (cosine {cos})");
    let hits = m.recall("why are rollbacks instant with blue-green?", 1).unwrap();
    assert_eq!(hits[0].turn.id, m.history().turns()[1].id);
    assert!(Memory::open(config, with(Arc::new(Words))).is_err(), "and now the old model is refused");
}

#[test]
fn pushing_a_batch_is_pushing_each_turn() {
    let turns = day();
    let mut one = Memory::open(config(400), parts(None)).unwrap();
    for t in &turns {
        one.push(t.clone()).unwrap();
    }
    let mut all = Memory::open(config(400), parts(None)).unwrap();
    all.push_all(&turns[..3]).unwrap();
    all.push_all(&turns[3..]).unwrap();
    one.settle();
    all.settle();
    assert!(one.context(short_of_the_day(), None).unwrap().blocks.iter().any(|b| b.kind == BlockKind::Salient));
    assert_eq!(all.tiers(), one.tiers());
    assert_eq!(all.topic_starts(), one.topic_starts());
    assert_eq!(all.context(short_of_the_day(), None).unwrap(), one.context(short_of_the_day(), None).unwrap());
    assert_eq!(all.recall("blue-green rollbacks", 3).unwrap(), one.recall("blue-green rollbacks", 3).unwrap());
    // A bad turn stops the batch there; the turns before it are kept.
    let mut bad = Memory::open(config(400), parts(None)).unwrap();
    let mut twice = turns[..2].to_vec();
    twice.push(turns[0].clone());
    assert!(bad.push_all(&twice).is_err());
    assert_eq!(bad.len(), 2);
}

/// Two friends chatting, one of whom sends a thought as three short messages.
fn bursty() -> Vec<Turn> {
    let at = |i: i64| Some(Timestamp(T0 + i * 20));
    let lines: [(&str, &str); 9] = [
        ("Mel", "How was your weekend?"),
        ("Caro", "I finally adopted a dog from the shelter!"),
        ("Caro", "She's a beagle."),
        ("Caro", "Her name is Biscuit."),
        ("Mel", "That is wonderful news, congratulations."),
        ("Caro", "Thanks! How is the pottery class going?"),
        ("Mel", "Slowly, my bowls keep cracking in the kiln."),
        ("Caro", "Maybe the clay dries too fast?"),
        ("Mel", "Probably, I will cover them with plastic next time."),
    ];
    lines
        .iter()
        .enumerate()
        .map(|(i, (who, text))| {
            let role = if *who == "Caro" { Role::User } else { Role::Assistant };
            let mut t = Turn::new(format!("t{i}"), role, *text).with_speaker(*who);
            t.timestamp = at(i as i64);
            t
        })
        .collect()
}

#[test]
fn a_burst_of_messages_is_ranked_and_recalled_as_one_turn() {
    let question = "Which dog was adopted from the shelter?";
    let recall_with = |burst_tokens: usize| {
        let mut c = config(2000);
        c.layout.tiered.burst_tokens = burst_tokens;
        let mut m = Memory::open(c, parts(None)).unwrap();
        m.push_all(&bursty()).unwrap();
        let hits = m.recall(question, 2).unwrap();
        let ids: Vec<String> = hits.iter().map(|h| h.turn.id.clone()).collect();
        let scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
        (ids, scores)
    };
    let (ids, scores) = recall_with(200);
    // The message that matches comes first, its burst right behind it with the same score.
    assert_eq!(ids, ["t1", "t2"]);
    assert_eq!(scores[0], scores[1]);
    let (_, alone) = recall_with(0);
    assert!(alone[1] < alone[0], "each message alone scores by itself: {alone:?}");

    // In a context, the burst arrives whole even where only one of its messages matches.
    let mut c = config(2000);
    c.layout.tiered.burst_tokens = 200;
    let mut m = Memory::open(c, parts(None)).unwrap();
    m.push_all(&bursty()).unwrap();
    for i in 0..30 {
        // Other dogs, other shelters: each matches the question in part.
        let text =
            ["The neighbour's dog barked at the mail carrier again.", "We walked past the bus shelter in the rain."];
        let mut t = Turn::new(format!("x{i}"), Role::User, text[i as usize % 2]);
        t.speaker = Some(if i % 2 == 0 { "Mel" } else { "Caro" }.to_string());
        t.timestamp = Some(Timestamp(T0 + 3 * HOUR + i * 20));
        m.push(t).unwrap();
    }
    m.settle();
    let ctx = m.context(400, Some(question)).unwrap();
    let block = ctx.blocks.iter().find(|b| b.kind == BlockKind::Recalled).expect("recalled");
    for id in ["t1", "t2", "t3"] {
        assert!(block.source_ids.iter().any(|s| s == id), "{id} missing from {}", block.content);
    }
    assert!(block.content.contains("Caro: She's a beagle.\nCaro: Her name is Biscuit."), "{}", block.content);
}

#[test]
fn bursts_end_at_another_speaker_a_pause_a_tool_call_or_the_cap() {
    use crate::config::RecallConfig;
    use crate::recall::Grouping;
    let recall = RecallConfig::default();
    let mut turns = bursty();
    // A pause of an hour splits Caro's burst between t2 and t3.
    turns[3].timestamp = Some(Timestamp(T0 + 3 * 20 + HOUR));
    let costs = vec![[10, 10]; turns.len()];
    let mut g = Grouping::default();
    g.extend(&turns, &costs, &recall, 200);
    assert_eq!(g.bursts, [0, 1, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(g.sessions, [0, 0, 0, 1, 1, 1, 1, 1, 1]);
    // Extending is the same as grouping the whole conversation at once.
    let mut step = Grouping::default();
    for n in 1..=turns.len() {
        step.extend(&turns[..n], &costs[..n], &recall, 200);
    }
    assert_eq!((step.bursts, step.sessions), (g.bursts, g.sessions));
    let mut off = Grouping::default();
    off.extend(&turns, &costs, &recall, 0);
    assert_eq!(off.bursts, (0..9).collect::<Vec<u32>>());
    let mut call = Turn::new("c", Role::User, "Running it.").with_speaker("Caro");
    call.tool_calls = vec![ToolCall { id: "k".into(), name: "shell".into(), arguments: "{}".into() }];
    call.timestamp = turns[2].timestamp;
    let mut g = Grouping::default();
    g.extend(&[turns[2].clone(), call], &costs[..2], &recall, 200);
    assert_eq!(g.bursts, [0, 1]);
    // A monologue of 60-token messages is cut into bursts of at most 200 tokens.
    let monologue: Vec<Turn> = (0..7).map(|i| Turn::new(format!("m{i}"), Role::User, "...")).collect();
    let mut g = Grouping::default();
    g.extend(&monologue, &[[60, 70]; 7], &recall, 200);
    assert_eq!(g.bursts, [0, 0, 0, 1, 1, 1, 2]);
}

/// The whole-conversation computation that the memory's turn-by-turn updates replaced: after
/// each turn, topics by the batch detector over every turn so far, a plan over every turn, and
/// spans cut from the start of the conversation.
struct Whole {
    config: MemoryConfig,
    history: History,
    vectors: Vec<Vec<f32>>,
    tiers: Vec<Tier>,
}

impl Whole {
    fn new(config: MemoryConfig) -> Whole {
        Whole { history: History::new("whole", counter()), config, vectors: Vec::new(), tiers: Vec::new() }
    }

    fn push(&mut self, turn: &Turn) {
        let texts = strata_store::embedded_texts(turn);
        let v = Words.embed(&texts.iter().map(String::as_str).collect::<Vec<_>>()).unwrap().swap_remove(0);
        self.vectors.push(strata_store::as_stored(&v));
        self.history.push(turn.clone()).unwrap();
        self.tiers.push(Tier::Hot);
        let starts = self.starts();
        let turns = self.history.turns();
        let state = strata_policy::State {
            turns: turns
                .iter()
                .enumerate()
                .map(|(i, t)| strata_policy::TurnState::of(i, t, self.history.tokens(i), self.tiers[i]))
                .collect(),
            left_out: 0,
            pinned: self.history.pinned(),
            topic_starts: starts,
            checkpoint: false,
        };
        let now = self.history.last_timestamp().map_or(Timestamp(0), |(_, ts)| ts);
        self.tiers = strata_policy::plan(&state, &self.config.policy, now).tiers;
    }

    fn starts(&self) -> Vec<usize> {
        strata_topic::detect_with(self.history.turns(), Some(&self.vectors), &self.config.topic)
            .into_iter()
            .map(|b| b.index)
            .collect()
    }

    /// Runs of one tier before the first hot turn, cut at topic starts and at
    /// `segment_tokens`, a tool result with its call: (start, end, tier).
    fn spans(&self) -> Vec<(usize, usize, Tier)> {
        let h = &self.history;
        let end = (h.pinned()..h.len()).find(|&i| self.tiers[i] == Tier::Hot).unwrap_or(h.len());
        let starts: BTreeSet<usize> = self.starts().into_iter().collect();
        let mut out = Vec::new();
        let (mut start, mut tokens) = (h.pinned(), 0);
        for i in h.pinned()..end {
            let cut = i > start
                && (self.tiers[i] != self.tiers[start]
                    || starts.contains(&i)
                    || tokens + h.tokens(i) > self.config.segment_tokens)
                && h.unit_of(i).turns.first() == Some(&i);
            if cut {
                out.push((start, i, self.tiers[start]));
                (start, tokens) = (i, 0);
            }
            tokens += h.tokens(i);
        }
        if start < end {
            out.push((start, end, self.tiers[start]));
        }
        out
    }
}

/// Feeds `turns` to a memory one by one and to the whole-conversation computation, and checks
/// after every turn that tiers, topic starts and summary spans agree; then that the contexts
/// equal those of a memory opened afresh over the same store (which computes everything from
/// the whole conversation at once).
fn same_as_whole(turns: &[Turn], budget: usize, question: &str) {
    let mut config = MemoryConfig::for_budget("c", budget);
    config.clock = Clock::LastTurn;
    let mut m = Memory::open(config.clone(), parts(None)).unwrap();
    let mut whole = Whole::new(config.clone());
    for t in turns {
        m.push(t.clone()).unwrap();
        whole.push(t);
        let at = &t.id;
        assert_eq!(m.topic_starts(), whole.starts(), "topic starts after {at}");
        assert_eq!(m.tiers(), whole.tiers.as_slice(), "tiers after {at}");
        let spans: Vec<_> = m.spans().iter().map(|k| (k.start, k.end, k.tier)).collect();
        assert_eq!(spans, whole.spans(), "spans after {at}");
    }
    m.settle();
    let again = Memory::with_store(m.store().clone(), config, parts(None)).unwrap();
    assert_eq!(again.tiers(), m.tiers());
    assert_eq!(again.topic_starts(), m.topic_starts());
    assert_eq!(again.spans(), m.spans());
    for q in [None, Some(question)] {
        assert_eq!(again.context(budget, q).unwrap(), m.context(budget, q).unwrap());
    }
}

/// The project's probe suite (every fourth conversation: the whole computation costs the
/// square of the length) and the shortest LoCoMo conversation.
#[test]
fn turn_by_turn_equals_the_whole_conversation_computation_on_real_transcripts() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let probes = probe_set();
    assert!(probes.len() >= 4);
    for c in probes.iter().step_by(4) {
        same_as_whole(&c.turns, 2000, &c.probes[0].question);
    }
    let data = std::env::var("STRATA_DATA").unwrap_or_else(|_| format!("{root}/../shared/datasets"));
    let locomo = strata_transcript::load_path(&std::path::Path::new(&data).join("locomo/locomo10.json"), None)
        .unwrap()
        .conversations;
    let shortest = locomo.iter().min_by_key(|c| c.turns.len()).unwrap();
    same_as_whole(&shortest.turns, 1000, &shortest.probes[0].question);
}

/// Random streams: pauses, cue phrases, tool calls with their results, a system prompt.
fn arb_stream() -> impl proptest::strategy::Strategy<Value = Vec<Turn>> {
    use proptest::strategy::Strategy as _;
    let text = prop_oneof![
        "[a-e ]{1,60}",
        Just("moving on to the deploy script and the canary stage".to_string()),
        Just("back to the parser: the lexer splits identifiers".to_string()),
        Just("that worked, thanks".to_string()),
        Just("can you fix the failing migration test".to_string()),
        Just("word ".repeat(300)),
    ];
    // Seconds before the turn: mostly a minute or two, sometimes hours.
    let gap = prop_oneof![4 => 0i64..200, 1 => 1800i64..20_000];
    let step = (0u8..6, text, gap);
    (any::<bool>(), prop::collection::vec(step, 1..90)).prop_map(|(system, steps)| {
        let steps = steps.into_iter().map(|(kind, text, gap)| {
            let said = match kind {
                0..=2 => Said::User,
                3 | 4 => Said::Assistant,
                _ => Said::ToolCall,
            };
            (said, text, gap)
        });
        stream_of(system, steps)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn turn_by_turn_equals_the_whole_conversation_computation(turns in arb_stream(), budget in 200usize..1500) {
        same_as_whole(&turns, budget, "what did we decide about the deploy script?");
    }
}

/// The bag of words behind a gate: `embed` waits until the gate opens, or fails while
/// `broken` is set. Stands in for a slow model, or one that fails.
#[derive(Debug, Default)]
struct Gated {
    open: Mutex<bool>,
    opened: Condvar,
    broken: std::sync::atomic::AtomicBool,
}

impl Gated {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl Embedder for Gated {
    fn model_id(&self) -> &str {
        Words.model_id()
    }
    fn dim(&self) -> usize {
        Words.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if self.broken.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(EmbedError::Backend { model: "gated".into(), message: "the model is down".into() });
        }
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
        Words.embed(texts)
    }
}

/// Questions are embedded at once by the same model (so a shut gate holds only the queue).
fn queued(embedder: Arc<Gated>) -> Parts {
    let queue = Arc::new(crate::EmbedQueue::start(embedder));
    Parts {
        counter: counter(),
        embedder: Some(Arc::new(Words)),
        generator: None,
        embed_queue: Some(queue),
        reranker: None,
    }
}

/// With a queue, `push` waits for no model: the turn is stored and found by its words at
/// once, and its vectors arrive when the queue gets to it; a memory reopened after the
/// model failed queues the turns it finds without vectors, and detects the topics the live
/// memory did (by cues and pauses, never by vectors that only one of them saw).
#[test]
fn queued_turns_are_stored_at_once_and_embedded_later() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(400);
    c.path = Some(dir.path().join("q.db"));
    let gated = Arc::new(Gated::default());
    let parts = queued(gated.clone());
    let queue = parts.embed_queue.clone().unwrap();
    let turns = day();
    let mut m = Memory::open(c.clone(), parts).unwrap();
    for t in &turns {
        m.push(t.clone()).unwrap();
    }
    // The gate is shut: every turn is stored, none embedded, and recall works by words.
    assert_eq!(m.store().len("conv").unwrap(), turns.len() as u64);
    assert!(queue.pending() > 0);
    let stored = |path: &std::path::Path| {
        strata_store::Store::whole_vectors(&strata_store::SqliteStore::open(path).unwrap(), "conv").unwrap()
    };
    assert!(stored(c.path.as_ref().unwrap()).iter().all(Vec::is_empty));
    assert_eq!(m.recall("deploy script vault token", 1).unwrap()[0].turn.id, "m1");
    gated.open();
    queue.settle();
    assert_eq!(queue.pending(), 0);
    assert!(queue.take_warnings().is_empty());
    let vectors = stored(c.path.as_ref().unwrap());
    for (t, v) in turns.iter().zip(&vectors) {
        let want = Words.embed(&[&strata_store::indexed_text(t)]).unwrap().remove(0);
        let cos: f32 = v.iter().zip(&want).map(|(a, b)| a * b).sum();
        assert!(cos > 0.99, "turn {}: cosine {cos}", t.id);
    }
    let live_starts = m.topic_starts();
    m.settle();
    let live_context = m.context(400, None).unwrap();
    drop(m);

    // A model that fails leaves the turns without vectors, and says which.
    let mut c2 = c.clone();
    c2.path = Some(dir.path().join("failed.db"));
    let broken = Arc::new(Gated::default());
    broken.broken.store(true, std::sync::atomic::Ordering::SeqCst);
    let parts = queued(broken.clone());
    let queue = parts.embed_queue.clone().unwrap();
    {
        let mut m = Memory::open(c2.clone(), parts).unwrap();
        m.push_all(&turns).unwrap();
        queue.settle();
        let warnings = queue.take_warnings();
        assert_eq!(warnings.len(), turns.len(), "{warnings:?}");
        assert!(warnings[0].contains("turn sys not embedded") && warnings[0].contains("model is down"), "{warnings:?}");
    }
    assert!(stored(c2.path.as_ref().unwrap()).iter().all(Vec::is_empty));
    // Reopened with the model back, the memory queues them, and is the live one's twin.
    let mended = Arc::new(Gated::default());
    mended.open();
    let parts = queued(mended);
    let queue = parts.embed_queue.clone().unwrap();
    let mut m = Memory::open(c2.clone(), parts).unwrap();
    queue.settle();
    assert!(stored(c2.path.as_ref().unwrap()).iter().all(|v| !v.is_empty()));
    assert_eq!(m.topic_starts(), live_starts);
    m.settle();
    assert_eq!(m.context(400, None).unwrap(), live_context);
}

#[test]
fn a_queue_must_embed_with_the_model_that_embeds_questions() {
    let mut parts = queued(Arc::new(Gated::default()));
    parts.embedder = Some(Arc::new(Reversed));
    let err = Memory::open(config(400), parts).unwrap_err();
    assert!(err.to_string().contains("not the one that embeds questions (test-reversed)"), "{err}");
}

/// A reranker that scores a passage by how often it says "blue"; `calls` counts the passages.
struct Blue(std::sync::atomic::AtomicUsize);

impl strata_core::Reranker for Blue {
    fn model_id(&self) -> &str {
        "blue"
    }
    fn score(&self, _: &str, passages: &[&str]) -> Result<Vec<f32>, strata_core::RerankError> {
        self.0.fetch_add(passages.len(), std::sync::atomic::Ordering::SeqCst);
        Ok(passages.iter().map(|p| p.matches("blue").count() as f32).collect())
    }
}

/// Five turns by one speaker each (so each is its own unit), all about the deploy; the more a
/// turn says "blue", the more the reranker likes it.
fn reranked_memory(keep: usize, deadline: Option<std::time::Duration>) -> (Memory, Arc<crate::Reranking>) {
    let rr = Arc::new(crate::Reranking::new(Arc::new(Blue(Default::default())), deadline));
    let mut c = config(2000);
    c.recall.rerank_candidates = 4;
    c.recall.rerank_keep = keep;
    let mut m = Memory::open(c, Parts { reranker: Some(rr.clone()), ..parts(None) }).unwrap();
    let texts = [
        "deploy deploy deploy the deploy service today",
        "deploy deploy went fine",
        "deploy blue",
        "deploy blue blue",
        "the deploy was blue blue blue",
    ];
    for (i, t) in texts.iter().enumerate() {
        let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
        m.push(Turn::new(format!("t{i}"), role, *t)).unwrap();
    }
    (m, rr)
}

#[test]
fn the_reranker_orders_the_candidates_after_the_kept_ones() {
    let ids = |m: &Memory| m.recall("deploy", 5).unwrap().into_iter().map(|h| h.turn.id).collect::<Vec<_>>();
    let (plain, _) = {
        let mut c = config(2000);
        c.recall.rerank_candidates = 4;
        let mut m = Memory::open(c, parts(None)).unwrap();
        let (r, rr) = reranked_memory(0, None);
        for t in r.history().turns() {
            m.push(t.clone()).unwrap();
        }
        (ids(&m), rr)
    };
    // Keeping the fused first, the reranker orders the next three of the four candidates by
    // "blue"; the fifth turn was not a candidate and keeps its fused place after them.
    let (m, rr) = reranked_memory(1, None);
    let got = ids(&m);
    assert_eq!(got[0], plain[0], "the kept candidate stays first");
    let candidates: BTreeSet<&String> = plain[1..4].iter().collect();
    assert_eq!(got[1..4].iter().collect::<BTreeSet<_>>(), candidates, "the same candidates, reordered");
    let blues: Vec<usize> = got[1..4]
        .iter()
        .map(|id| m.history().turns().iter().find(|t| &t.id == id).unwrap().content.matches("blue").count())
        .collect();
    assert!(blues.windows(2).all(|w| w[0] >= w[1]), "{got:?} {blues:?}");
    assert_eq!(got[4], plain[4]);
    assert_eq!((rr.counts().contexts, rr.counts().cut_short, rr.counts().passages), (1, 0, 3));
    // A deadline already past: nothing is scored, the fused order stands, and it is counted.
    let (m, rr) = reranked_memory(1, Some(std::time::Duration::ZERO));
    assert_eq!(ids(&m), plain);
    assert_eq!((rr.counts().contexts, rr.counts().cut_short, rr.counts().passages), (1, 1, 0));
}

#[test]
fn a_deadline_sizes_each_reranking_slice_by_the_pace_last_measured() {
    use std::time::Duration;
    let (_, rr) = reranked_memory(0, None);
    let ms = Duration::from_millis;
    let texts = |lengths: &[usize]| lengths.iter().map(|&n| "x".repeat(n)).collect::<Vec<_>>();
    let q = "q".repeat(50);
    let even = texts(&[100; 20]);
    // Without a deadline, whole slices; with one but no call timed yet, one passage to learn
    // the pace; with the time up, none.
    assert_eq!(rr.next_slice(&q, &even, None, false), crate::recall::RERANK_SLICE);
    assert_eq!(rr.next_slice(&q, &even, Some(ms(100)), false), 1);
    assert_eq!(rr.next_slice(&q, &even, Some(Duration::ZERO), false), 0);
    // Two pairs of 150 bytes (the question's 50 and a passage's 100) in 10 ms: 5 ms a pair.
    rr.timed(&q, &["x".repeat(100).as_str(), "x".repeat(100).as_str()], ms(10));
    assert_eq!(rr.next_slice(&q, &even, Some(ms(16)), false), 3);
    assert_eq!(rr.next_slice(&q, &even, Some(ms(4)), false), 0);
    assert_eq!(rr.next_slice(&q, &even, Some(ms(1000)), false), crate::recall::RERANK_SLICE);
    // A slice costs the sum of its pairs: a 400-byte third passage costs 15 ms alone, so three
    // take 25 ms and four 30; a longer question costs every pair more.
    let mixed = texts(&[100, 100, 400, 100]);
    assert_eq!(rr.next_slice(&q, &mixed, Some(ms(20)), false), 2);
    assert_eq!(rr.next_slice(&q, &mixed, Some(ms(28)), false), 3);
    assert_eq!(rr.next_slice(&q, &mixed, Some(ms(31)), false), 4);
    assert_eq!(rr.next_slice(&"q".repeat(200), &even, Some(ms(16)), false), 1);
    // The pace follows the latest call: under load, the same pairs take four times as long.
    rr.timed(&q, &["x".repeat(100).as_str(), "x".repeat(100).as_str()], ms(40));
    assert_eq!(rr.next_slice(&q, &even, Some(ms(16)), false), 0);
    assert_eq!(rr.next_slice(&q, &even, Some(ms(45)), false), 2);
    // A context's first slice reads one passage however slow the pace, to measure it again.
    assert_eq!(rr.next_slice(&q, &even, Some(ms(16)), true), 1);
}

#[test]
fn a_long_candidate_is_read_as_the_window_that_holds_the_question_s_words() {
    use crate::recall::{best_window, passage};
    let words = |ws: &[&str]| ws.iter().map(|w| w.to_string()).collect::<BTreeSet<String>>();
    // A window with both words beats one with one word twice, which beats one with it once;
    // of equals, the first. "Painting," matches "paint", "cats." matches "cat".
    let spans: Vec<&str> = "a b paint paint c d e cat f g Painting, cats. h i".split(' ').collect();
    assert_eq!(best_window(&spans, &words(&["paint", "cat"]), 3), 9);
    assert_eq!(best_window(&spans, &words(&["paint", "cat"]), 6), 2);
    assert_eq!(best_window(&spans, &words(&["paint"]), 2), 2);
    assert_eq!(best_window(&spans, &words(&["cats"]), 1), 7);
    assert_eq!(best_window(&spans, &words(&["cathedral"]), 3), 0);
    assert_eq!(best_window(&spans, &words(&[]), 3), 0);
    let filler = "we talked about the weather and the traffic for a while ".repeat(10);
    let long =
        Turn::new("t1", Role::User, format!("{filler}then I adopted a puppy named Max {filler}")).with_speaker("Ann");
    let read = passage(std::slice::from_ref(&long), &words(&["adopt", "puppy"]), 12);
    assert!(read.starts_with("Ann: ") && read.contains("adopted a puppy named Max"), "{read}");
    assert_eq!(read.split_whitespace().count(), 13, "{read}");
    // Whole when short enough, or with no window.
    let short = Turn::new("t2", Role::User, "I adopted a puppy").with_speaker("Ann");
    assert_eq!(passage(std::slice::from_ref(&short), &words(&["puppy"]), 12), "Ann: I adopted a puppy");
    assert_eq!(passage(std::slice::from_ref(&long), &words(&["puppy"]), 0), format!("Ann: {}", long.content));
}

#[test]
fn for_a_context_the_reranker_reads_no_deeper_than_could_reach_it() {
    // Passages read for a context and for a search, with a reach.
    let reads = |reach: f32| {
        let blue = Arc::new(Blue(Default::default()));
        let rr = Arc::new(crate::Reranking::new(blue.clone(), None));
        let mut c = config(2000);
        c.recall.rerank_candidates = 4;
        c.recall.rerank_keep = 1;
        c.recall.rerank_reach = reach;
        let mut m = Memory::open(c, Parts { reranker: Some(rr), ..parts(None) }).unwrap();
        for t in reranked_memory(0, None).0.history().turns() {
            m.push(t.clone()).unwrap();
        }
        let n = || blue.0.load(std::sync::atomic::Ordering::SeqCst);
        m.context(24, Some("deploy")).unwrap();
        let for_context = n();
        m.recall("deploy", 5).unwrap();
        (for_context, n() - for_context)
    };
    // No reach: every candidate after the kept one, for both. A reach far below one unit's
    // tokens: none for the context, all of them for a search (which has no budget).
    assert_eq!(reads(0.0), (3, 3));
    assert_eq!(reads(0.001), (0, 3));
}
