//! Token counts checked against OpenAI's tiktoken on committed fixtures.

use serde::Deserialize;
use strata_core::{ChatFormat, Role, TokenCounter};

use crate::{from_spec, Estimate, Tiktoken};

#[derive(Deserialize)]
struct Tricky {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    o200k_base: usize,
    cl100k_base: usize,
}

fn tricky() -> Tricky {
    serde_json::from_str(include_str!("../tests/fixtures/tricky.json")).unwrap()
}

#[test]
fn counts_match_tiktoken_on_tricky_strings() {
    let (o200k, cl100k) = (Tiktoken::o200k(), Tiktoken::cl100k());
    let cases = tricky().cases;
    assert!(cases.len() >= 30);
    // Twice, through a second counter of each encoding: the second pass reads the process's
    // memo, and must give the same counts.
    for (o200k, cl100k) in [(&o200k, &cl100k), (&Tiktoken::o200k(), &Tiktoken::cl100k())] {
        for case in &cases {
            assert_eq!(o200k.count(&case.text), case.o200k_base, "o200k on {:?}", case.text);
            assert_eq!(cl100k.count(&case.text), case.cl100k_base, "cl100k on {:?}", case.text);
        }
    }
}

#[test]
fn chat_framing_matches_openai_recipe() {
    #[derive(Deserialize)]
    struct Chat {
        messages: Vec<Msg>,
        expected: std::collections::BTreeMap<String, usize>,
    }
    #[derive(Deserialize)]
    struct Msg {
        role: String,
        name: Option<String>,
        content: String,
    }
    let chat: Chat = serde_json::from_str(include_str!("../tests/fixtures/chat.json")).unwrap();
    for counter in [Tiktoken::o200k(), Tiktoken::cl100k()] {
        let total: usize = chat
            .messages
            .iter()
            .map(|m| {
                let role = Role::parse(&m.role).unwrap();
                counter.count_message(role, m.name.as_deref(), &m.content, None, &[])
            })
            .sum::<usize>()
            + ChatFormat::OPENAI.reply_priming as usize;
        assert_eq!(total, chat.expected[counter.name()], "{}", counter.name());
    }
}

#[test]
fn estimate_is_close_on_prose_and_code() {
    // The English, code and number cases: where the estimator is meant to be used.
    let cases: Vec<Case> =
        tricky().cases.into_iter().filter(|c| c.text.is_ascii() && !c.text.trim().is_empty()).collect();
    let exact: usize = cases.iter().map(|c| c.o200k_base).sum();
    let est: usize = cases.iter().map(|c| Estimate.count(&c.text)).sum();
    let ratio = est as f64 / exact as f64;
    assert!((0.75..=1.25).contains(&ratio), "estimate/exact = {ratio:.3} ({est}/{exact})");
}

#[test]
fn specs_name_counters_or_fail_clearly() {
    assert_eq!(from_spec("o200k").unwrap().name(), "o200k_base");
    assert_eq!(from_spec("cl100k_base").unwrap().name(), "cl100k_base");
    assert_eq!(from_spec("estimate").unwrap().name(), "estimate");
    let err = from_spec("gpt2").err().unwrap().to_string();
    assert!(err.starts_with("unknown tokenizer `gpt2`"), "{err}");
    let err = from_spec("/nonexistent/tokenizer.json").err().unwrap().to_string();
    assert!(err.starts_with("/nonexistent/tokenizer.json: cannot load tokenizer"), "{err}");
}

#[test]
fn hf_tokenizer_json_counts_without_special_tokens() {
    // A minimal word-level tokenizer.json, written by hand so the test needs no download.
    let json = r#"{
      "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
      "normalizer": null,
      "pre_tokenizer": {"type": "Whitespace"},
      "post_processor": null, "decoder": null,
      "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1, "world": 2}, "unk_token": "[UNK]"}
    }"#;
    let dir = std::env::temp_dir().join(format!("strata-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, json).unwrap();
    let counter = from_spec(path.to_str().unwrap()).unwrap();
    assert_eq!(counter.count("hello world, again"), 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Counting line by line gives what the encoding gives the whole text, over random texts made
/// of the characters that decide where pre-tokens end: line breaks, spaces, punctuation and
/// `/` before and after them, letters of several scripts, marks, digits.
#[test]
fn a_text_counted_by_lines_counts_as_a_whole() {
    let parts = [
        "\n",
        "\n\n",
        "\r\n",
        " ",
        "  ",
        "\t",
        ".",
        "!",
        "/",
        "//",
        "'s",
        "'",
        "-",
        ":",
        "abc",
        "Word",
        "x",
        "42",
        "1234",
        "é",
        "名前",
        "नमस्ते",
        "\u{0301}",
        "😀",
        "a.b",
        "Jane:",
        "<|endoftext|>",
    ];
    let (o200k, cl100k) = (Tiktoken::o200k(), Tiktoken::cl100k());
    let mut seed = 0x5eed_u64;
    for _ in 0..3000 {
        let mut text = String::new();
        for _ in 0..1 + (seed % 12) as usize {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            text.push_str(parts[(seed >> 33) as usize % parts.len()]);
        }
        assert_eq!(o200k.count(&text), o200k.bpe.encode_ordinary(&text).len(), "o200k on {text:?}");
        assert_eq!(cl100k.count(&text), cl100k.bpe.encode_ordinary(&text).len(), "cl100k on {text:?}");
        assert_eq!(super::lines(&text).collect::<String>(), text);
    }
}
