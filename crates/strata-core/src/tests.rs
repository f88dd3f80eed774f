//! Unit tests for the vocabulary: validation rules, the incremental history and contexts.

use std::sync::Arc;

use expect_test::expect;

use crate::*;

/// Counts whitespace-separated words: enough to check bookkeeping, never shipped.
struct Words;

impl TokenCounter for Words {
    fn name(&self) -> &str {
        "words"
    }
    fn count(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
}

fn history(turns: &[Turn]) -> Result<History, HistoryError> {
    History::from_turns("c1", turns, Arc::new(Words))
}

#[test]
fn counts_are_cached_per_turn_with_framing() {
    let h = history(&[
        Turn::new("s", Role::System, "be brief"),
        Turn::new("u1", Role::User, "hello there").with_speaker("Jane Doe"),
    ])
    .unwrap();
    // 3 framing + 1 role + 2 content = 6; the name adds 1 + 1.
    assert_eq!(h.tokens(0), 6);
    assert_eq!(h.tokens(1), 8);
    assert_eq!(h.total_tokens(), 14);
    assert_eq!(h.full_context_tokens(), 17);
    assert_eq!(h.pinned(), 1);
}

#[test]
fn tool_results_join_the_unit_of_their_call() {
    let mut call = Turn::new("a1", Role::Assistant, "");
    call.tool_calls = vec![
        ToolCall { id: "call_1".into(), name: "ls".into(), arguments: "{}".into() },
        ToolCall { id: "call_2".into(), name: "cat".into(), arguments: "{}".into() },
    ];
    let h = history(&[
        Turn::new("u1", Role::User, "list files"),
        call,
        Turn::new("t1", Role::Tool, "a b").with_tool_call_id("call_1"),
        Turn::new("t2", Role::Tool, "c").with_tool_call_id("call_2"),
        Turn::new("a2", Role::Assistant, "done").with_tool_call_id("x9"),
        Turn::new("t3", Role::Tool, "by turn id").with_tool_call_id("a2"),
    ])
    .unwrap();
    assert_eq!(h.unit_of(3).turns, vec![1, 2, 3]);
    assert_eq!(h.unit_of(5).turns, vec![4, 5]);
    assert_eq!(h.unit_of(0).turns, vec![0]);
    assert_eq!(h.unit_count(), 3);
    assert_eq!(h.unit_of(1).tokens, h.tokens(1) + h.tokens(2) + h.tokens(3));
}

#[test]
fn bad_histories_name_the_turn() {
    let check = |turns: Vec<Turn>, expect: expect_test::Expect| {
        let err = history(&turns).unwrap_err();
        expect.assert_eq(&err.to_string());
        // Whole-conversation validation agrees with the incremental checks.
        let conv = Conversation { id: "c1".into(), turns, ..Default::default() };
        assert_eq!(conv.validate(true).unwrap_err(), err.source);
    };
    check(
        vec![Turn::new("a", Role::User, "x"), Turn::new("a", Role::User, "y")],
        expect!["conversation c1: turn a: duplicate turn id (first used at index 0)"],
    );
    check(
        vec![
            Turn::new("a", Role::User, "x").with_timestamp(Timestamp(100)),
            Turn::new("b", Role::User, "y"),
            Turn::new("c", Role::User, "z").with_timestamp(Timestamp(99)),
        ],
        expect!["conversation c1: turn c: timestamp 99 is earlier than the previous turn a's 100"],
    );
    check(
        vec![Turn::new("t", Role::Tool, "x").with_tool_call_id("nope")],
        expect!["conversation c1: turn t: tool_call_id `nope` matches no earlier assistant turn or tool call"],
    );
    check(vec![Turn::new("", Role::User, "x")], expect!["conversation c1: turn at index 0: empty turn id"]);
}

#[test]
fn probes_must_name_real_turns_when_strict() {
    let conv = Conversation {
        id: "c".into(),
        turns: vec![Turn::new("a", Role::User, "x")],
        probes: vec![Probe {
            id: "q1".into(),
            question: "?".into(),
            answer: "x".into(),
            evidence: vec!["zz".into()],
            after: None,
            category: None,
            adversarial_answer: None,
        }],
        ..Default::default()
    };
    assert!(conv.validate(false).is_ok());
    expect!["probe q1: `evidence` names turn zz, which is not in the transcript"]
        .assert_eq(&conv.validate(true).unwrap_err().to_string());
}

#[test]
fn message_names_are_sanitised() {
    assert_eq!(message_name("Jane Doe"), Some("Jane_Doe".to_string()));
    assert_eq!(message_name(""), None);
    assert_eq!(message_name(&"x".repeat(100)).unwrap().len(), 64);
}

#[test]
fn context_renders_text_and_messages() {
    let h =
        history(&[Turn::new("s", Role::System, "be brief"), Turn::new("u1", Role::User, "hello").with_speaker("jane")])
            .unwrap();
    let mut ctx = Context::new("test", 100, h.counter());
    ctx.blocks.push(Block::from_turn(BlockKind::PinnedSystem, &h.turns()[0], h.tokens(0)));
    ctx.blocks.push(Block::from_turn(BlockKind::VerbatimTurn, &h.turns()[1], h.tokens(1)));
    assert_eq!(ctx.total_tokens(), 3 + h.total_tokens());
    expect![[r#"
        system: be brief

        user (jane): hello"#]]
    .assert_eq(&ctx.render_text());
    assert_eq!(ctx.verbatim_ids().collect::<Vec<_>>(), ["s", "u1"]);
    assert_eq!(ctx.messages()[1].name.as_deref(), Some("jane"));
}

#[test]
fn truncate_restores_the_earlier_state() {
    let mut call = Turn::new("a1", Role::Assistant, "");
    call.tool_calls = vec![ToolCall { id: "c1".into(), name: "ls".into(), arguments: "{}".into() }];
    let turns = vec![
        Turn::new("s", Role::System, "sys"),
        Turn::new("u1", Role::User, "list files"),
        call,
        Turn::new("t1", Role::Tool, "a b").with_tool_call_id("c1"),
        Turn::new("u2", Role::User, "thanks"),
    ];
    let mut h = history(&turns).unwrap();
    let earlier = history(&turns[..2]).unwrap();
    h.truncate(2);
    assert_eq!(h.len(), 2);
    assert_eq!(h.total_tokens(), earlier.total_tokens());
    assert_eq!(h.unit_count(), earlier.unit_count());
    assert_eq!(h.index_of("t1"), None);
    // The ids and call ids of removed turns are free again.
    h.push(turns[2].clone()).unwrap();
    h.push(turns[3].clone()).unwrap();
    assert_eq!(h.unit_of(3).turns, vec![2, 3]);
    h.truncate(3);
    assert_eq!(h.unit_of(2).turns, vec![2]);
    assert_eq!(h.unit_of(2).tokens, h.tokens(2));
    h.truncate(0);
    assert_eq!((h.len(), h.pinned(), h.total_tokens(), h.unit_count()), (0, 0, 0, 0));
}
