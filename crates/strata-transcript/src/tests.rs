//! Loader tests: every format, and one test per kind of malformed input, each asserting the
//! exact message so that the place it names cannot silently regress.

use expect_test::{expect, Expect};
use strata_core::Role;

use crate::{load_bytes, load_path, InputFormat, LoadErrorKind};

fn err(name: &str, bytes: &[u8]) -> crate::LoadError {
    load_bytes(name, bytes, name.ends_with(".jsonl"), None).unwrap_err()
}

fn check_err(name: &str, input: &str, kind: LoadErrorKind, expect: Expect) {
    let e = err(name, input.as_bytes());
    expect.assert_eq(&e.to_string());
    assert_eq!(e.kind, kind, "{e}");
    assert!(!e.to_string().contains('\n'), "errors are one line: {e}");
}

const GOOD: &str = r#"{
  "format": "strata.transcript/1",
  "id": "arch-session-7",
  "participants": [{ "name": "jane", "role": "architect" }],
  "turns": [
    { "id": "t1", "role": "user", "speaker": "jane", "content": "Let's design the billing service.", "timestamp": "2026-03-02T09:00:00Z" },
    { "id": "t2", "role": "assistant", "content": "Kafka it is.", "timestamp": "2026-03-02T10:00:00+01:00",
      "tool_calls": [{ "id": "c1", "type": "function", "function": { "name": "search", "arguments": "{\"q\":\"kafka\"}" } }] },
    { "id": "t3", "role": "tool", "content": "found", "tool_call_id": "c1", "extra": [1, 2] }
  ],
  "probes": [{ "id": "q1", "question": "Which broker?", "answer": "Kafka", "evidence": ["t2"], "after": "t3", "category": "decision" }],
  "boundaries": ["t1"]
}"#;

#[test]
fn strata_json_loads_with_every_field() {
    let loaded = load_bytes("good.json", GOOD.as_bytes(), false, None).unwrap();
    assert_eq!(loaded.format, InputFormat::Strata);
    let c = &loaded.conversations[0];
    assert_eq!(c.id, "arch-session-7");
    assert_eq!(c.participants[0].role.as_deref(), Some("architect"));
    assert_eq!(c.turns.len(), 3);
    // Offsets are normalised: 10:00+01:00 is the same instant as 09:00Z.
    assert_eq!(c.turns[0].timestamp, c.turns[1].timestamp);
    assert_eq!(c.turns[1].tool_calls[0].name, "search");
    assert_eq!(c.turns[2].role, Role::Tool);
    assert_eq!(c.probes[0].evidence, ["t2"]);
    assert_eq!(c.boundaries, ["t1"]);
    // Writing and reading back gives the same conversation.
    let again = load_bytes("x.json", crate::to_json(c).as_bytes(), false, None).unwrap();
    assert_eq!(&again.conversations[0], c);
}

#[test]
fn jsonl_holds_one_transcript_per_line() {
    let one = crate::to_json(&load_bytes("g.json", GOOD.as_bytes(), false, None).unwrap().conversations[0]);
    let two = one.replace("arch-session-7", "other");
    let text = format!("{one}\n\n{two}\n{{\"messages\": [{{\"role\": \"user\", \"content\": \"hi\"}}]}}\n");
    let loaded = load_bytes("d.jsonl", text.as_bytes(), true, None).unwrap();
    let ids: Vec<_> = loaded.conversations.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["arch-session-7", "other", "line-4"]);
}

#[test]
fn openai_messages_load_with_tool_calls() {
    let text = r#"[
      {"role": "system", "content": "You are terse."},
      {"role": "user", "name": "bob", "content": [{"type": "text", "text": "weather?"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "call_9", "content": "sunny"},
      {"role": "assistant", "content": "Sunny."}
    ]"#;
    let loaded = load_bytes("chat.json", text.as_bytes(), false, None).unwrap();
    assert_eq!(loaded.format, InputFormat::OpenAiMessages);
    let c = &loaded.conversations[0];
    assert_eq!(c.id, "chat");
    assert_eq!(c.turns[1].content, "weather?");
    assert_eq!(c.turns[1].speaker.as_deref(), Some("bob"));
    assert_eq!(c.turns[2].content, "");
    assert_eq!(c.turns[3].tool_call_id.as_deref(), Some("call_9"));
    check_err(
        "chat.json",
        r#"[{"role": "tool", "tool_call_id": "call_1", "content": "x"}]"#,
        LoadErrorKind::Invalid,
        expect![
            "chat.json: transcript chat: turn m0: tool_call_id `call_1` matches no earlier assistant turn or tool call"
        ],
    );
}

#[test]
fn truncated_json_names_the_line() {
    check_err(
        "t.json",
        "{\n  \"id\": \"a\",\n  \"turns\": [\n    {\"id\": \"t1\", \"role\": \"user\", \"con",
        LoadErrorKind::Syntax,
        expect!["t.json:4:37: unexpected end of file: the JSON is truncated"],
    );
}

#[test]
fn invalid_utf8_names_line_and_byte() {
    let bytes =
        b"{\"id\": \"a\",\n\"turns\": [{\"id\": \"t1\", \"role\": \"user\", \"content\": \"ok \xff\"}]}".to_vec();
    let e = err("u.json", &bytes);
    expect!["u.json:2:55: invalid UTF-8 at byte 66"].assert_eq(&e.to_string());
    assert_eq!(e.kind, LoadErrorKind::InvalidUtf8);
}

#[test]
fn missing_role_names_the_turn() {
    check_err(
        "r.json",
        r#"{"id": "a", "turns": [{"id": "t1", "role": "user", "content": "x"}, {"id": "t2", "content": "y"}]}"#,
        LoadErrorKind::Schema,
        expect!["r.json: transcript a: turn t2: missing `role`"],
    );
}

#[test]
fn duplicate_turn_ids_are_rejected() {
    check_err(
        "d.json",
        r#"{"id": "a", "turns": [{"id": "t1", "role": "user", "content": "x"}, {"id": "t1", "role": "assistant", "content": "y"}]}"#,
        LoadErrorKind::Invalid,
        expect!["d.json: transcript a: turn t1: duplicate turn id (first used at index 0)"],
    );
}

#[test]
fn decreasing_timestamps_are_rejected() {
    check_err(
        "ts.json",
        r#"{"id": "a", "turns": [
            {"id": "t1", "role": "user", "content": "x", "timestamp": "2026-03-02T09:00:00Z"},
            {"id": "t2", "role": "user", "content": "y", "timestamp": "2026-03-02T08:59:59Z"}]}"#,
        LoadErrorKind::Invalid,
        expect![
            "ts.json: transcript a: turn t2: timestamp 1772441999 is earlier than the previous turn t1's 1772442000"
        ],
    );
}

#[test]
fn a_50_mb_turn_is_rejected() {
    let big = "x".repeat(50 * 1024 * 1024);
    let text = format!(r#"{{"id": "a", "turns": [{{"id": "huge", "role": "user", "content": "{big}"}}]}}"#);
    check_err(
        "big.json",
        &text,
        LoadErrorKind::Invalid,
        expect![
            "big.json: transcript a: turn huge: content is 52428800 bytes, over the limit of 16777216 bytes per turn"
        ],
    );
}

#[test]
fn unknown_format_marker_is_rejected() {
    check_err(
        "f.json",
        r#"{"format": "strata.transcript/2", "id": "a", "turns": []}"#,
        LoadErrorKind::UnknownFormat,
        expect!["f.json: unknown format marker `strata.transcript/2`: this version reads `strata.transcript/1`"],
    );
}

#[test]
fn jsonl_errors_name_the_line() {
    let text = "{\"id\": \"a\", \"turns\": []}\n{\"id\": \"b\", \"turns\": [{\"id\": 1, \"role\": \"robot\", \"content\": \"\"}]}\n";
    check_err(
        "x.jsonl",
        text,
        LoadErrorKind::Schema,
        expect!["x.jsonl:2: transcript b: turn 1: unknown role `robot` (expected system, user, assistant or tool)"],
    );
    check_err(
        "y.jsonl",
        "{\"id\": \"a\", \"turns\": []}\n{\"id\": \n",
        LoadErrorKind::Syntax,
        expect!["y.jsonl:2: unexpected end of file: the JSON is truncated"],
    );
    check_err(
        "z.jsonl",
        "{\"id\": \"a\", \"turns\": []}\n{\"id\": \"a\", \"turns\": []}\n",
        LoadErrorKind::Invalid,
        expect!["z.jsonl: transcript a: duplicate transcript id"],
    );
}

#[test]
fn wrong_types_and_shapes_are_schema_errors() {
    check_err(
        "w.json",
        "{\"id\": \"a\",\n \"turns\": [{\"id\": \"t1\", \"role\": \"user\", \"content\": 5}]}",
        LoadErrorKind::Schema,
        expect!["w.json:2:52: invalid type: integer `5`, expected a string"],
    );
    check_err(
        "p.json",
        r#"{"id": "a", "turns": [{"id": "t1", "role": "user", "content": ""}], "probes": [{"id": "q", "question": "?", "answer": "x", "evidence": ["t9"]}]}"#,
        LoadErrorKind::Invalid,
        expect!["p.json: transcript a: probe q: `evidence` names turn t9, which is not in the transcript"],
    );
    check_err("n.json", "42", LoadErrorKind::UnknownFormat, expect!["n.json: cannot tell the format: expected a Strata transcript (an object with `turns`), an array of chat messages, or LoCoMo's list of conversations"]);
}

#[test]
fn missing_file_is_an_io_error_naming_it() {
    let e = load_path(std::path::Path::new("/nonexistent/x.json"), None).unwrap_err();
    assert_eq!(e.kind, LoadErrorKind::Io);
    assert!(e.to_string().starts_with("/nonexistent/x.json: "), "{e}");
}

#[test]
fn locomo_shape_becomes_transcripts() {
    let text = r#"[{"sample_id": "conv-1",
      "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
        "session_2_date_time": "9:00 am on 3 May, 2023",
        "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Back again"}],
        "session_10_date_time": "12:05 pm on 1 June, 2023",
        "session_10": [{"speaker": "Bo", "dia_id": "D10:1", "text": "Look", "blip_caption": "a dog"}],
        "session_1_date_time": "1:56 pm on 8 May, 2022",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "Hi"}, {"speaker": "Bo", "dia_id": "D1:2", "text": "Hello"}]},
      "qa": [
        {"question": "When?", "answer": 2022, "evidence": ["D1:1; D2:1"], "category": 2},
        {"question": "What?", "evidence": ["D"], "category": 5, "adversarial_answer": "a cat"}]}]"#;
    let loaded = load_bytes("locomo.json", text.as_bytes(), false, None).unwrap();
    assert_eq!(loaded.format, InputFormat::Locomo);
    let c = &loaded.conversations[0];
    let ids: Vec<_> = c.turns.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["D1:1", "D1:2", "D2:1", "D10:1"], "sessions in numeric order");
    assert_eq!(c.turns[1].role, Role::Assistant);
    assert_eq!(c.turns[3].content, "Look [shares a photo: a dog]");
    assert_eq!(crate::format_rfc3339(c.turns[0].timestamp.unwrap()), "2022-05-08T13:56:00Z");
    assert_eq!(crate::format_rfc3339(c.turns[3].timestamp.unwrap()), "2023-06-01T12:05:00Z");
    assert_eq!(c.boundaries, ["D1:1", "D2:1", "D10:1"]);
    assert_eq!(c.probes[0].answer, "2022");
    assert_eq!(c.probes[0].evidence, ["D1:1", "D2:1"]);
    assert_eq!(c.probes[0].category.as_deref(), Some("temporal"));
    assert_eq!(c.probes[1].answer, crate::locomo::NOT_MENTIONED);
    assert_eq!(c.probes[1].adversarial_answer.as_deref(), Some("a cat"));
    expect![[r#"
        [
            "locomo.json: transcript conv-1: probe conv-1/q2: evidence `D` names no turn; skipped",
        ]
    "#]]
    .assert_debug_eq(&loaded.warnings);
}

/// The real LoCoMo file, from `../shared/datasets` (or `STRATA_DATA`).
#[test]
fn real_locomo_loads_with_its_known_pitfalls_counted() {
    let data = std::env::var("STRATA_DATA")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/datasets").to_string());
    let path = std::path::Path::new(&data).join("locomo/locomo10.json");
    let loaded = load_path(&path, None).unwrap();
    assert_eq!(loaded.conversations.len(), 10);
    let turns: usize = loaded.conversations.iter().map(|c| c.turns.len()).sum();
    let probes: usize = loaded.conversations.iter().map(|c| c.probes.len()).sum();
    let sessions: usize = loaded.conversations.iter().map(|c| c.boundaries.len()).sum();
    assert_eq!((turns, probes, sessions), (5882, 1986, 272));
    // The dataset's README lists 9 malformed references. Splitting `D8:6; D9:17` and
    // `D9:1 D4:4 D4:6` and reading `D30:05` as `D30:5` recovers most; four name no turn at all
    // (`D`, `D:11:26`, and `D10:19` and `D4:36`, past their sessions' ends).
    assert_eq!(loaded.warnings.len(), 4, "{:#?}", loaded.warnings);
}
