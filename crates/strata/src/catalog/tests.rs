//! Strategy tests through the catalog: snapshots of each seed's behaviour at its edge cases,
//! fallbacks with fake generators, the config file, and property tests of the rules every
//! strategy must keep.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use expect_test::{expect, Expect};
use proptest::prelude::*;
use strata_core::{
    BlockKind, Context, GenerateError, GenerateRequest, Generation, Generator, History, Role, Strategy, TokenCounter,
    ToolCall, Turn,
};
use strata_tokens::Tiktoken;

use super::{build, built_in, ModelUse, Models, StrategiesConfig, STRATEGIES};

fn counter() -> Arc<dyn TokenCounter> {
    Arc::new(Tiktoken::o200k())
}

fn history(turns: Vec<Turn>) -> History {
    History::from_turns("c", &turns, counter()).unwrap()
}

/// `n` interactions of a user question and an assistant answer, after a system prompt.
fn interactions(n: usize) -> History {
    let mut turns = vec![Turn::new("sys", Role::System, "You are helpful.")];
    for i in 1..=n {
        turns.push(Turn::new(format!("u{i}"), Role::User, format!("Question {i} about topic {i}?")));
        turns.push(Turn::new(
            format!("a{i}"),
            Role::Assistant,
            format!("Answer {i} first. Answer {i} second! Answer {i} third."),
        ));
    }
    history(turns)
}

/// One line per block: kind, source ids, tokens, and the content on following lines.
fn explain(ctx: &Context) -> String {
    let mut out = format!("total {} / budget {}\n", ctx.total_tokens(), ctx.budget);
    for b in &ctx.blocks {
        let ids = match b.source_ids.as_slice() {
            [] => String::new(),
            [one] => one.clone(),
            many => format!("{}..{} ({})", many[0], many[many.len() - 1], many.len()),
        };
        out.push_str(&format!("{} [{ids}] {}: {}\n", b.kind.as_str(), b.tokens, b.content.replace('\n', "\n    ")));
    }
    for n in &ctx.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

/// The strategy's own design, without the rule that a history within the budget is sent whole
/// (which `every_strategy_keeps_the_rules` checks for every strategy).
fn check(name: &str, h: &History, budget: usize, expect: Expect) {
    let s = built_in(name, &StrategiesConfig::default(), &Models::default()).unwrap();
    let ctx = s.build(h, budget, None).unwrap();
    expect.assert_eq(&explain(&ctx));
}

#[test]
fn recent_summary_with_no_interactions_is_just_the_system_prompt() {
    check(
        "recent-8-summary-12",
        &interactions(0),
        1000,
        expect![[r#"
        total 11 / budget 1000
        pinned_system [sys] 8: You are helpful.
    "#]],
    );
    check(
        "recent-8-summary-12",
        &history(vec![]),
        1000,
        expect![[r#"
        total 0 / budget 1000
    "#]],
    );
}

#[test]
fn recent_summary_with_8_interactions_has_no_summary() {
    let h = interactions(8);
    let s = built_in("recent-8-summary-12", &StrategiesConfig::default(), &Models::default()).unwrap();
    let ctx = s.build(&h, 10_000, None).unwrap();
    assert!(ctx.blocks.iter().all(|b| b.kind != BlockKind::Summary));
    assert_eq!(ctx.blocks.len(), 1 + 8);
    expect![[r#"
        Recent conversation details:
        Q: Question 1 about topic 1?
        A: Answer 1 first. Answer 1 second! Answer 1 third."#]]
    .assert_eq(&ctx.blocks[1].content);
}

#[test]
fn recent_summary_with_9_interactions_summarises_the_first() {
    check(
        "recent-8-summary-12",
        &interactions(9),
        10_000,
        expect![[r#"
        total 298 / budget 10000
        pinned_system [sys] 8: You are helpful.
        summary [u1..a1 (2)] 35: Conversation Summary (earlier context):
            Topics discussed: Question 1 about topic 1?
            Key points: Answer 1 first. Answer 1 second!
        verbatim_turn [u2..a2 (2)] 35: Recent conversation details:
            Q: Question 2 about topic 2?
            A: Answer 2 first. Answer 2 second! Answer 2 third.
        verbatim_turn [u3..a3 (2)] 31: Q: Question 3 about topic 3?
            A: Answer 3 first. Answer 3 second! Answer 3 third.
        verbatim_turn [u4..a4 (2)] 31: Q: Question 4 about topic 4?
            A: Answer 4 first. Answer 4 second! Answer 4 third.
        verbatim_turn [u5..a5 (2)] 31: Q: Question 5 about topic 5?
            A: Answer 5 first. Answer 5 second! Answer 5 third.
        verbatim_turn [u6..a6 (2)] 31: Q: Question 6 about topic 6?
            A: Answer 6 first. Answer 6 second! Answer 6 third.
        verbatim_turn [u7..a7 (2)] 31: Q: Question 7 about topic 7?
            A: Answer 7 first. Answer 7 second! Answer 7 third.
        verbatim_turn [u8..a8 (2)] 31: Q: Question 8 about topic 8?
            A: Answer 8 first. Answer 8 second! Answer 8 third.
        verbatim_turn [u9..a9 (2)] 31: Q: Question 9 about topic 9?
            A: Answer 9 first. Answer 9 second! Answer 9 third.
    "#]],
    );
}

#[test]
fn recent_summary_with_20_interactions_keeps_top_5_topics_and_3_points() {
    let h = interactions(20);
    let s = built_in("recent-8-summary-12", &StrategiesConfig::default(), &Models::default()).unwrap();
    let ctx = s.build(&h, 10_000, None).unwrap();
    let summary = &ctx.blocks[1];
    assert_eq!(summary.kind, BlockKind::Summary);
    assert_eq!(summary.source_ids.len(), 24, "12 interactions of 2 turns");
    expect![[r#"
        Conversation Summary (earlier context):
        Topics discussed: Question 1 about topic 1?; Question 2 about topic 2?; Question 3 about topic 3?; Question 4 about topic 4?; Question 5 about topic 5?
        Key points: Answer 1 first. Answer 1 second! Answer 2 first. Answer 2 second! Answer 3 first. Answer 3 second!"#]]
    .assert_eq(&summary.content);
    assert_eq!(ctx.blocks[2].source_ids[0], "u13");
}

#[test]
fn recent_summary_beyond_the_buffer_forgets_the_oldest() {
    // 45 interactions: the buffer holds 40 (u6..), of which the 12 before the last 8 are
    // summarised: u26..u37.
    let h = interactions(45);
    let s = built_in("recent-8-summary-12", &StrategiesConfig::default(), &Models::default()).unwrap();
    let ctx = s.build(&h, 10_000, None).unwrap();
    assert_eq!(ctx.blocks[1].source_ids.first().map(String::as_str), Some("u26"));
    assert_eq!(ctx.blocks[2].source_ids.first().map(String::as_str), Some("u38"));
    // Same output as at 20 interactions, shifted: the buffer bounds memory, not the context.
    assert_eq!(ctx.blocks.len(), 1 + 1 + 8);
}

#[test]
fn recent_summary_falls_back_when_nothing_is_left_to_say() {
    let h = history(vec![
        Turn::new("u1", Role::User, ""),
        Turn::new("a1", Role::Assistant, ""),
        Turn::new("u2", Role::User, "x"),
    ]);
    let config = StrategiesConfig {
        recent_summary: strata_strategies::RecentSummaryConfig { recent: 1, ..Default::default() },
        ..Default::default()
    };
    let ctx = built_in("recent-8-summary-12", &config, &Models::default()).unwrap().build(&h, 1000, None).unwrap();
    assert!(ctx.blocks[0].content.ends_with("Earlier conversation about various topics."));
}

#[test]
fn window_pins_the_system_prompt_and_keeps_the_newest() {
    check(
        "window",
        &interactions(5),
        80,
        expect![[r#"
        total 73 / budget 80
        pinned_system [sys] 8: You are helpful.
        verbatim_turn [u4] 12: Question 4 about topic 4?
        verbatim_turn [a4] 19: Answer 4 first. Answer 4 second! Answer 4 third.
        verbatim_turn [u5] 12: Question 5 about topic 5?
        verbatim_turn [a5] 19: Answer 5 first. Answer 5 second! Answer 5 third.
    "#]],
    );
    check(
        "window",
        &interactions(2),
        5,
        expect![[r#"
        total 0 / budget 5
        note: system prompt (8 tokens) does not fit the budget of 5; omitted
    "#]],
    );
}

#[test]
fn window_keeps_tool_pairs_together() {
    let mut call = Turn::new("a1", Role::Assistant, "Let me look.");
    call.tool_calls = vec![ToolCall { id: "c1".into(), name: "search".into(), arguments: "{\"q\":\"x\"}".into() }];
    let h = history(vec![
        Turn::new("u1", Role::User, "find x"),
        call,
        Turn::new("r1", Role::Tool, "x is 42").with_tool_call_id("c1"),
        Turn::new("a2", Role::Assistant, "x is 42."),
    ]);
    let with_pair = h.tokens(1) + h.tokens(2) + h.tokens(3) + 3;
    // Room for the result but not its call: both go.
    check(
        "window",
        &h,
        with_pair - 1,
        expect![[r#"
        total 12 / budget 37
        verbatim_turn [a2] 9: x is 42.
    "#]],
    );
    let s = build("window", &StrategiesConfig::default(), &Models::default()).unwrap();
    let ctx = s.build(&h, with_pair, None).unwrap();
    assert_eq!(ctx.verbatim_ids().collect::<Vec<_>>(), ["a1", "r1", "a2"]);
}

#[test]
fn specific_keeps_the_rarest_sentences_in_conversation_order() {
    // The prototype of issue 14: the sentences whose words the rest of the conversation does
    // not use, wherever they were said, and none of the repeated complaint around them.
    let h = history(vec![
        Turn::new("sys", Role::System, "You are helpful."),
        Turn::new("u1", Role::User, "The deploy failed again. The deploy failed again today, sorry."),
        Turn::new("a1", Role::Assistant, "Sorry the deploy failed. Check the logs of the deploy."),
        Turn::new("u2", Role::User, "The deploy failed. Our ticket is OPS-3254 and the cap is 417 seats."),
        Turn::new("a2", Role::Assistant, "The deploy failed because the logs filled the disk. Rotate them hourly."),
        Turn::new("u3", Role::User, "The deploy failed again."),
    ]);
    check(
        "specific",
        &h,
        45,
        expect![[r#"
            total 38 / budget 45
            pinned_system [sys] 8: You are helpful.
            salient [u2..a2 (2)] 27: user: Our ticket is OPS-3254 and the cap is 417 seats.
                assistant: Rotate them hourly.
        "#]],
    );
    // More budget keeps more, never less, and never more than the budget.
    let s = built_in("specific", &StrategiesConfig::default(), &Models::default()).unwrap();
    let mut before = 0;
    for budget in [20, 45, 80, 400] {
        let ctx = s.build(&h, budget, None).unwrap();
        assert!(ctx.total_tokens() <= budget, "{} > {budget}", ctx.total_tokens());
        let kept = ctx.blocks.iter().filter(|b| b.kind == BlockKind::Salient).map(|b| b.content.len()).sum::<usize>();
        assert!(kept >= before, "budget {budget}: {kept} < {before}");
        before = kept;
    }
}

#[test]
fn full_sends_everything_and_says_when_over_budget() {
    check(
        "full",
        &interactions(1),
        10,
        expect![[r#"
        total 42 / budget 10
        pinned_system [sys] 8: You are helpful.
        verbatim_turn [u1] 12: Question 1 about topic 1?
        verbatim_turn [a1] 19: Answer 1 first. Answer 1 second! Answer 1 third.
        note: full sends everything: 42 tokens, over the budget of 10
    "#]],
    );
}

/// A generator that answers from a script, recording the prompts it saw.
struct Scripted {
    answer: Result<&'static str, &'static str>,
    prompts: Mutex<Vec<GenerateRequest>>,
}

impl Generator for Scripted {
    fn model_id(&self) -> &str {
        "scripted"
    }
    fn generate(&self, request: &GenerateRequest) -> Result<Generation, GenerateError> {
        self.prompts.lock().unwrap().push(request.clone());
        match self.answer {
            Ok(text) => {
                Ok(Generation { text: text.to_string(), prompt_tokens: 0, generated_tokens: 0, reused_tokens: 0 })
            }
            Err(message) => Err(GenerateError::Backend { model: "scripted".into(), message: message.into() }),
        }
    }
}

fn summary_buffer(answer: Result<&'static str, &'static str>) -> (Arc<dyn Strategy>, Arc<Scripted>) {
    let generator = Arc::new(Scripted { answer, prompts: Mutex::new(Vec::new()) });
    let s = build(
        "summary-buffer",
        &StrategiesConfig::default(),
        &Models { generator: Some(generator.clone()), ..Models::default() },
    )
    .unwrap();
    (s, generator)
}

#[test]
fn summary_buffer_below_the_trigger_is_window() {
    let h = interactions(3);
    let (s, generator) = summary_buffer(Ok("unused"));
    let ctx = s.build(&h, 1000, None).unwrap();
    assert_eq!(ctx.blocks.len(), h.len());
    assert!(generator.prompts.lock().unwrap().is_empty(), "no model call below 80%");
}

#[test]
fn summary_buffer_summarises_the_older_turns() {
    let h = interactions(10);
    let (s, generator) = summary_buffer(Ok("The user asked ten questions about topics."));
    let ctx = s.build(&h, 200, None).unwrap();
    expect![[r#"
        total 122 / budget 200
        pinned_system [sys] 8: You are helpful.
        summary [u1..a7 (14)] 18: [Summary of earlier conversation]
            The user asked ten questions about topics.
        verbatim_turn [u8] 12: Question 8 about topic 8?
        verbatim_turn [a8] 19: Answer 8 first. Answer 8 second! Answer 8 third.
        verbatim_turn [u9] 12: Question 9 about topic 9?
        verbatim_turn [a9] 19: Answer 9 first. Answer 9 second! Answer 9 third.
        verbatim_turn [u10] 12: Question 10 about topic 10?
        verbatim_turn [a10] 19: Answer 10 first. Answer 10 second! Answer 10 third.
        note: summarised 14 older turns with scripted
    "#]]
    .assert_eq(&explain(&ctx));
    let prompts = generator.prompts.lock().unwrap();
    let prompt = &prompts[0].messages[1].content;
    assert!(prompt.starts_with("<transcript>\nuser: Question 1 about topic 1?\n"), "{prompt}");
    assert!(prompt.contains("</transcript>\n\nSummarize the conversation"), "{prompt}");
    assert!(prompt.contains("under 200 words"));
}

#[test]
fn summary_buffer_falls_back_to_window() {
    let h = interactions(10);
    let window =
        build("window", &StrategiesConfig::default(), &Models::default()).unwrap().build(&h, 200, None).unwrap();
    for (answer, note) in [
        (Err("model crashed"), "summary failed: generator scripted: model crashed; fell back to window"),
        (Ok("   "), "the generator returned an empty summary; fell back to window"),
    ] {
        let (s, _) = summary_buffer(answer);
        let ctx = s.build(&h, 200, None).unwrap();
        assert_eq!(ctx.blocks, window.blocks);
        assert_eq!(ctx.notes, [note]);
    }
    let none = build("summary-buffer", &StrategiesConfig::default(), &Models::default()).unwrap();
    let ctx = none.build(&h, 200, None).unwrap();
    assert_eq!(ctx.blocks, window.blocks);
    assert_eq!(ctx.notes, ["no generator configured; fell back to window"]);
}

#[test]
fn summary_buffer_cuts_a_long_summary_to_fit() {
    let h = interactions(10);
    let long: &'static str = Box::leak("word ".repeat(500).into_boxed_str());
    let (s, _) = summary_buffer(Ok(long));
    let ctx = s.build(&h, 200, None).unwrap();
    assert!(ctx.total_tokens() <= 200);
    assert!(ctx.notes.iter().any(|n| n == "summary cut to fit the budget"), "{:?}", ctx.notes);
    assert!(ctx.blocks[1].content.ends_with("word ..."));
}

#[test]
fn configs_parse_from_toml_and_json_and_reject_typos() {
    let toml = "[recent-8-summary-12]\nrecent = 10\n\n[summary-buffer]\ntrigger = 0.9\n";
    let c = StrategiesConfig::parse("c.toml", toml).unwrap();
    assert_eq!(c.recent_summary.recent, 10);
    assert_eq!(c.recent_summary.summarized, 12);
    assert_eq!(c.summary_buffer.trigger, 0.9);
    let json = r#"{"summary-buffer": {"verbatim": 0.5}}"#;
    assert_eq!(StrategiesConfig::parse("c.json", json).unwrap().summary_buffer.verbatim, 0.5);
    let err = StrategiesConfig::parse("c.toml", "[window]\nsize = 3\n").unwrap_err().to_string();
    assert!(err.starts_with("c.toml: unknown field `size`"), "{err}");
    let err = StrategiesConfig::parse("c.json", r#"{"summary-buffer": {"trigger": 2}}"#).unwrap_err().to_string();
    assert_eq!(err, "c.json: summary-buffer: `trigger` must be between 0 and 1, not 2");
    // The tiered memory's table and its salience table: read, checked, typos refused.
    let c = StrategiesConfig::parse(
        "c.toml",
        "[tiered]\nsalient = 0.5\n[tiered.salience]\nredundancy = 0\ndated = false\n",
    )
    .unwrap();
    assert_eq!((c.tiered.salient, c.tiered.salient_with_question), (0.5, 0.25));
    let s = &c.tiered.salience;
    assert_eq!((s.redundancy, s.dated, s.length_exponent), (0.0, false, 0.5));
    let err = StrategiesConfig::parse("c.toml", "[tiered]\nsalient = 1.5\n").unwrap_err().to_string();
    assert_eq!(err, "c.toml: tiered: `salient` must be between 0 and 1, not 1.5");
    let c = StrategiesConfig::parse("c.toml", "[tiered.salience]\nnames = 0\n").unwrap();
    assert_eq!(c.tiered.salience.names, 0.0);
    let err = StrategiesConfig::parse("c.toml", "[tiered.salience]\nnames = -1\n").unwrap_err().to_string();
    assert_eq!(err, "c.toml: tiered.salience: `names` must be between 0 and 100, not -1");
    let c = StrategiesConfig::parse("c.json", r#"{"tiered": {"salience": {"rarity_exponent": 1}}}"#).unwrap();
    assert_eq!(c.tiered.salience.rarity_exponent, 1.0);
    let err = StrategiesConfig::parse("c.toml", "[tiered.salience]\nrarity_exponent = 0\n").unwrap_err().to_string();
    assert_eq!(err, "c.toml: tiered.salience: `rarity_exponent` must be between 0.25 and 8, not 0");
    let err = StrategiesConfig::parse("c.toml", "[tiered]\nsalince = 0.5\n").unwrap_err().to_string();
    assert!(err.starts_with("c.toml: unknown field `salince`"), "{err}");
    // Keys from before the salience table: refused with their new place, in TOML and JSON.
    let err = StrategiesConfig::parse("c.toml", "[tiered]\nredundancy = 0.2\n").unwrap_err().to_string();
    assert_eq!(err, "c.toml: `[tiered] redundancy` is now `[tiered.salience] redundancy`");
    let err = StrategiesConfig::parse("c.json", r#"{"tiered": {"names": 1}}"#).unwrap_err().to_string();
    assert_eq!(err, "c.json: `[tiered] names` is now `[tiered.salience] names`");
    // Keys of experiments that were removed: refused, saying so.
    let err = StrategiesConfig::parse("c.toml", "[tiered]\nshapes = 0.5\n").unwrap_err().to_string();
    assert_eq!(
        err,
        "c.toml: `[tiered] shapes` was removed: an experiment that did not hold out (see docs/experiments.md)"
    );
    let err = build("nope", &StrategiesConfig::default(), &Models::default()).err().unwrap().to_string();
    // Strategies other tests register follow the built-in ones.
    assert!(
        err.starts_with(
            "unknown strategy `nope`: expected one of full, window, recent-8-summary-12, summary-buffer, segments, specific, tiered, segments-abstractive"
        ),
        "{err}"
    );
    let err =
        build("segments-abstractive", &StrategiesConfig::default(), &Models::default()).err().unwrap().to_string();
    assert_eq!(err, "strategy `segments-abstractive` needs a generator (a local model: pass --model)");
}

#[test]
fn settings_list_every_knob_and_read_back_as_the_same_config() {
    let c = StrategiesConfig::parse("c.toml", "[tiered]\nsalient = 0.5\n\n[segments]\nrecent = 0.3\n").unwrap();
    let tiered = c.settings("tiered").unwrap();
    expect![[r#"
        [tiered]
        salient = 0.5
        salient_with_question = 0.25
        burst_tokens = 200

        [tiered.salience]
        length_exponent = 0.5
        redundancy = 0.5
        dated = true
        min_words = 2
        asides = true
        names = 3.0
        rarity_exponent = 3.0"#]]
    .assert_eq(&tiered);
    // What `--explain` prints is a config file that gives the same settings back.
    let mut listed = String::new();
    for name in ["tiered", "segments", "summary-buffer", "recent-8-summary-12"] {
        let table = c.settings(name).unwrap();
        listed.push_str(&table);
        listed.push_str("\n\n");
    }
    let back = StrategiesConfig::parse("c.toml", &listed).unwrap();
    assert_eq!(back, c);
    assert_eq!(back.segments.recent, 0.3);
    assert_eq!(c.settings("segments-abstractive"), c.settings("segments"));
    assert_eq!(c.settings("window").unwrap(), "[window] (no settings)");
    assert_eq!(c.settings("full"), None);
}

/// Random conversations: a system prompt or not, user and assistant turns of mixed scripts,
/// emoji and code, tool calls with their results, and now and then a turn far over any budget.
fn arb_turns() -> impl proptest::strategy::Strategy<Value = Vec<Turn>> {
    use proptest::strategy::Strategy as _;
    let text = prop_oneof![
        Just(String::new()),
        "[a-z ]{1,40}",
        "[а-я ]{1,20}",
        "[一-龥]{1,15}",
        Just("👨‍👩‍👧‍👦 🎉 ok".to_string()),
        Just("fn main() {\n    println!(\"hi\");\n}".to_string()),
        Just("big ".repeat(3000)),
    ];
    let step = (0u8..5, text);
    (any::<bool>(), prop::collection::vec(step, 0..40)).prop_map(|(system, steps)| {
        let mut turns = Vec::new();
        if system {
            turns.push(Turn::new("sys", Role::System, "Be helpful."));
        }
        for (i, (kind, text)) in steps.into_iter().enumerate() {
            match kind {
                0 | 1 => turns.push(Turn::new(format!("u{i}"), Role::User, text)),
                2 | 3 => turns.push(Turn::new(format!("a{i}"), Role::Assistant, text)),
                _ => {
                    let mut call = Turn::new(format!("a{i}"), Role::Assistant, "");
                    call.tool_calls = vec![
                        ToolCall { id: format!("c{i}a"), name: "f".into(), arguments: "{}".into() },
                        ToolCall { id: format!("c{i}b"), name: "g".into(), arguments: "{}".into() },
                    ];
                    turns.push(call);
                    turns.push(Turn::new(format!("r{i}a"), Role::Tool, text).with_tool_call_id(format!("c{i}a")));
                    turns.push(Turn::new(format!("r{i}b"), Role::Tool, "ok").with_tool_call_id(format!("c{i}b")));
                }
            }
        }
        turns
    })
}

/// A generator that echoes a deterministic digest of its prompt.
struct Echo;

impl Generator for Echo {
    fn model_id(&self) -> &str {
        "echo"
    }
    fn generate(&self, request: &GenerateRequest) -> Result<Generation, GenerateError> {
        let prompt = &request.messages[1].content;
        let text: String = prompt.split_whitespace().take(request.max_tokens).collect::<Vec<_>>().join(" ");
        Ok(Generation { text, prompt_tokens: 0, generated_tokens: 0, reused_tokens: 0 })
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_strategy_keeps_the_rules(turns in arb_turns(), budget in 0usize..3000, asked in any::<bool>()) {
        let h = history(turns);
        let generator: Arc<dyn Generator> = Arc::new(Echo);
        // A question made of words the turns use, so that recall finds something.
        let question = asked.then(|| h.turns().iter().rev().flat_map(|t| t.content.split_whitespace()).take(3).collect::<Vec<_>>().join(" "));
        for name in STRATEGIES.iter().map(|e| e.name) {
            let s = build(name, &StrategiesConfig::default(), &Models { generator: Some(generator.clone()), ..Models::default() }).unwrap();
            let ctx = s.build(&h, budget, question.as_deref()).unwrap();
            if s.bounded() {
                prop_assert!(ctx.total_tokens() <= budget, "{name}: {} > {budget}", ctx.total_tokens());
            } else {
                prop_assert_eq!(ctx.total_tokens(), if h.is_empty() { 0 } else { h.full_context_tokens() });
            }
            // Block counts are what they claim to be.
            for b in &ctx.blocks {
                let counted = h.counter().count_message(b.role, b.name.as_deref(), &b.content, b.tool_call_id.as_deref(), &b.tool_calls);
                prop_assert_eq!(b.tokens, counted, "{}: block {:?}", name, b.source_ids);
            }
            // No tool pair is orphaned: a unit's turns are all in the context or none are.
            // Summaries, the registry and salient sentences cite turns; they do not hold them.
            let present: BTreeSet<&str> = ctx.blocks.iter().filter(|b| !matches!(b.kind, BlockKind::Summary | BlockKind::Registry | BlockKind::Salient)).flat_map(|b| b.source_ids.iter().map(String::as_str)).collect();
            for i in 0..h.len() {
                let unit = h.unit_of(i);
                let inside = unit.turns.iter().filter(|&&j| present.contains(h.turns()[j].id.as_str())).count();
                prop_assert!(inside == 0 || inside == unit.turns.len(), "{name}: unit {:?} split", unit.turns);
            }
            // Verbatim turns keep their order.
            let order: Vec<usize> = ctx.verbatim_ids().map(|id| h.index_of(id).unwrap()).collect();
            prop_assert!(order.windows(2).all(|w| w[0] < w[1]), "{name}: out of order");
            // No block is framing around nothing.
            prop_assert!(ctx.blocks.iter().all(|b| b.content != "[Earlier conversation summary: ]"), "{}: {}", name, explain(&ctx));
            // Nothing is said twice: a turn is quoted (verbatim, recalled or as salient
            // sentences) in one block at most.
            prop_assert_eq!(ctx.repeated_turn(), None, "{}: {}", name, explain(&ctx));
            // When the whole history fits, the history is the context.
            if !h.is_empty() && h.full_context_tokens() <= budget {
                let all: Vec<&str> = h.turns().iter().map(|t| t.id.as_str()).collect();
                prop_assert_eq!(ctx.verbatim_ids().collect::<Vec<_>>(), all, "{}: {}", name, explain(&ctx));
                prop_assert_eq!(ctx.total_tokens(), h.full_context_tokens(), "{}", name);
            }
            // Same input, same output.
            let again = s.build(&h, budget, question.as_deref()).unwrap();
            prop_assert_eq!(&ctx, &again);
        }
    }
}

#[test]
fn assembled_picks_cost_what_window_costs_and_break_no_rule_unnoticed() {
    use strata_strategies::select::{assemble, Pick};
    let h = interactions(5);
    let window =
        build("window", &StrategiesConfig::default(), &Models::default()).unwrap().build(&h, 80, None).unwrap();
    // The same turns picked by id make the same context, blocks and tokens alike.
    let picks: Vec<Pick> = window.verbatim_ids().map(|id| Pick::Turn(id.to_string())).collect();
    let same = assemble("mine", &h, 80, &picks).unwrap();
    assert_eq!(same.blocks, window.blocks);
    assert_eq!(same.total_tokens(), window.total_tokens());
    expect![[r#"
        total 25 / budget 80
        verbatim_turn [u1] 12: Question 1 about topic 1?
        summary [] 10: The user asks about topics.
    "#]]
    .assert_eq(&explain(
        &assemble("mine", &h, 80, &[Pick::Turn("u1".into()), Pick::Text("The user asks about topics.".into())])
            .unwrap(),
    ));
    let err = |picks: &[Pick], budget| assemble("mine", &h, budget, picks).unwrap_err().to_string();
    assert_eq!(err(&[Pick::Turn("u9".into())], 80), "strategy mine: turn `u9` is not in the history of c");
    assert_eq!(err(&[Pick::Turn("u1".into()), Pick::Turn("u1".into())], 80), "strategy mine: turn `u1` picked twice");
    assert_eq!(
        err(&picks, 72),
        "strategy mine: a context of 73 tokens, over the budget of 72",
        "one token over is over"
    );
    assert_eq!(assemble("mine", &h, 0, &[]).unwrap().total_tokens(), 0, "nothing picked costs nothing");
}

/// A strategy of a program's own (Python's `register_strategy`): a fixed note.
#[derive(Debug)]
struct Note(&'static str);

impl Strategy for Note {
    fn name(&self) -> &str {
        self.0
    }

    fn build(&self, history: &History, budget: usize, _: Option<&str>) -> Result<Context, strata_core::StrategyError> {
        let picks = [strata_strategies::select::Pick::Text("a note".into())];
        strata_strategies::select::assemble(self.0, history, budget, &picks)
    }
}

#[test]
fn a_registered_strategy_joins_the_catalog_and_a_built_in_name_is_refused() {
    let config = StrategiesConfig::default();
    assert!(build("catalog-test-note", &config, &Models::default()).is_err());
    super::register(Arc::new(Note("catalog-test-note"))).unwrap();
    let s = build("catalog-test-note", &config, &Models::default()).unwrap();
    assert_eq!(s.name(), "catalog-test-note");
    assert!(super::registered().contains(&"catalog-test-note".to_string()));
    // It reads the history alone, and runs only when named.
    assert_eq!(super::needs("catalog-test-note"), super::Needs::NOTHING);
    assert!(!super::default_names().contains(&"catalog-test-note"));
    for bad in ["tiered", "a b", "a,b", ""] {
        let err = super::register(Arc::new(Note(bad))).unwrap_err().to_string();
        assert!(err.starts_with(&format!("strategy `{bad}` cannot be registered: ")), "{err}");
    }
    // The built-in `tiered` is still the tiered memory.
    assert_eq!(build("tiered", &config, &Models::default()).unwrap().name(), "tiered");
}

#[test]
fn the_catalog_says_what_each_strategy_reads() {
    // A strategy that cannot run without a model is never in a default run, and is refused
    // without one (so a caller never builds a strategy that fails on its first context).
    for e in STRATEGIES {
        assert_eq!(super::default_names().contains(&e.name), e.needs.generator != ModelUse::Required, "{}", e.name);
        let built = build(e.name, &StrategiesConfig::default(), &Models::default());
        assert_eq!(built.is_err(), e.needs.generator == ModelUse::Required, "{}", e.name);
    }
    // Only the tiered memory reads an embedder or a reranker.
    let reads: Vec<&str> = STRATEGIES.iter().filter(|e| e.needs.embedder || e.needs.reranker).map(|e| e.name).collect();
    assert_eq!(reads, ["tiered"]);
    assert!(super::help().lines().count() == STRATEGIES.len());
}
