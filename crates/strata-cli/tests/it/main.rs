//! End-to-end tests of the `strata` binary: real files in, stdout, stderr and exit status out.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata")).args(args).output().expect("strata runs")
}

fn data_dir() -> PathBuf {
    std::env::var_os("STRATA_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets"))
}

fn locomo() -> String {
    data_dir().join("locomo/locomo10.json").display().to_string()
}

/// Writes `bytes` to a file named `name` in a fresh temporary directory.
fn file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    (dir, path.display().to_string())
}

/// Bad input: exit status 2, nothing on stdout, one line on stderr that names the place.
fn assert_rejected(name: &str, bytes: &[u8], place: &str) {
    let (_dir, path) = file(name, bytes);
    let out = strata(&["compress", &path, "--budget", "100"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
    assert!(out.stdout.is_empty(), "{name}: half-written output");
    assert_eq!(stderr.lines().count(), 1, "{name}: one line: {stderr}");
    assert!(stderr.starts_with(&format!("error: {path}")), "{name}: names the file: {stderr}");
    assert!(stderr.contains(place), "{name}: names `{place}`: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn truncated_json_is_rejected() {
    assert_rejected("t.json", br#"{"id": "a", "turns": [{"id": "t1", "role": "us"#, ":1:");
}

#[test]
fn invalid_utf8_is_rejected() {
    assert_rejected(
        "u.json",
        b"{\"id\": \"a\", \"turns\": [{\"id\": \"t1\", \"role\": \"user\", \"content\": \"\xc3\x28\"}]}",
        "invalid UTF-8",
    );
}

#[test]
fn missing_role_is_rejected() {
    assert_rejected("r.json", br#"{"id": "a", "turns": [{"id": "t7", "content": "x"}]}"#, "turn t7: missing `role`");
}

#[test]
fn duplicate_turn_ids_are_rejected() {
    let text = br#"{"id": "a", "turns": [{"id": "t1", "role": "user", "content": "x"}, {"id": "t1", "role": "user", "content": "y"}]}"#;
    assert_rejected("d.json", text, "turn t1: duplicate turn id");
}

#[test]
fn decreasing_timestamps_are_rejected() {
    let text = br#"{"id": "a", "turns": [
        {"id": "t1", "role": "user", "content": "x", "timestamp": "2026-03-02T10:00:00Z"},
        {"id": "t2", "role": "user", "content": "y", "timestamp": "2026-03-02T09:00:00Z"}]}"#;
    assert_rejected("ts.json", text, "turn t2: timestamp");
}

#[test]
fn a_50_mb_turn_is_rejected() {
    let text =
        format!(r#"{{"id": "a", "turns": [{{"id": "huge", "role": "user", "content": "{}"}}]}}"#, "y".repeat(50 << 20));
    assert_rejected("big.json", text.as_bytes(), "turn huge: content is 52428800 bytes");
}

#[test]
fn unknown_format_marker_is_rejected() {
    assert_rejected("f.json", br#"{"format": "strata.transcript/9", "id": "a", "turns": []}"#, "unknown format marker");
}

#[test]
fn jsonl_errors_name_the_line() {
    assert_rejected(
        "x.jsonl",
        b"{\"id\": \"a\", \"turns\": []}\n{\"id\": \"b\", \"turns\": [{\"id\": \"t1\"}]}\n",
        ":2: transcript b: turn t1: missing `role`",
    );
}

#[test]
fn unknown_strategy_and_tokenizer_exit_2() {
    let (_dir, path) = file("ok.json", br#"{"id": "a", "turns": []}"#);
    for (args, msg) in [
        (vec!["--strategy", "magic"], "invalid value 'magic' for '--strategy <STRATEGY>'"),
        (vec!["--tokenizer", "gpt2"], "unknown tokenizer `gpt2`"),
        (vec!["--at", "nope"], "transcript a: no turn `nope`"),
    ] {
        let mut all = vec!["compress", path.as_str(), "--budget", "10"];
        all.extend(args);
        let out = strata(&all);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(msg));
    }
}

/// A budget that is not a positive number is refused by name with status 2 (a negative one
/// too, not taken for a flag); a question a strategy does not read is said to be ignored; a
/// dataset with nothing to score is refused rather than scored as an empty table.
#[test]
fn budgets_questions_and_datasets_that_would_do_nothing_are_said() {
    let chat = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/chat.json");
    for budget in ["0", "-5", "many"] {
        for command in [vec!["compress", chat, "--budget", budget], vec!["eval", "--dataset", chat, "--budget", budget]]
        {
            let out = strata(&command);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command:?}: {stderr}");
            assert!(stderr.contains("--budget") && stderr.contains("positive number of tokens"), "{stderr}");
            assert!(out.stdout.is_empty());
        }
    }
    let out = strata(&["compress", chat, "--strategy", "window", "--question", "Which broker?"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("strategy window does not read --question"));
    let out = strata(&["compress", chat, "--strategy", "tiered", "--embedder", "none", "--question", "Which broker?"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("does not read --question"));
    let (dir, path) = file("none.json", br#"{"id": "a", "turns": [{"id": "t1", "role": "user", "content": "hi"}]}"#);
    let out = strata(&[
        "eval",
        "--dataset",
        &path,
        "--strategy",
        "window",
        // No weights in the default tests: the segmenters that embed are left out.
        "--segmenter",
        "none",
        "--out",
        &dir.path().join("o").display().to_string(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nothing to score"), "{stderr}");
}

/// `strata eval` piped (no terminal for a bar) still says how far it is, on stderr.
#[test]
fn a_piped_eval_says_how_far_it_is() {
    let chat = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/chat.json");
    let dir = tempfile::tempdir().unwrap();
    let out = strata(&[
        "eval",
        "--dataset",
        chat,
        "--strategy",
        "window",
        "--budget",
        "100",
        "--segmenter",
        "none",
        "--out",
        &dir.path().display().to_string(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("1 conversations, "), "{stderr}");
}

/// Commands that take `--model` refuse a strategy that needs one without it, and a model file
/// that is not there, by name, with status 2 and nothing on stdout.
#[test]
fn model_flags_name_what_is_missing() {
    let (dir, path) = file("ok.json", br#"{"id": "a", "turns": [{"id": "t1", "role": "user", "content": "hi"}]}"#);
    let missing = dir.path().join("absent.gguf").display().to_string();
    for (args, msg) in [
        (vec!["compress", &path, "--budget", "100", "--strategy", "segments-abstractive"], "pass --model"),
        (
            vec!["compress", &path, "--budget", "100", "--strategy", "segments-abstractive", "--model", &missing],
            &missing,
        ),
        (vec!["summarize", &path, "--model", &missing], &missing),
    ] {
        let out = strata(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: half-written output");
        assert!(stderr.contains(msg), "{args:?}: {stderr}");
    }
}

#[test]
fn locomo_window_at_2000_fits_the_budget() {
    let out =
        strata(&["compress", &locomo(), "--strategy", "window", "--budget", "2000", "--format", "json", "--explain"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let contexts: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(contexts.len(), 10);
    for ctx in &contexts {
        let blocks = ctx["blocks"].as_array().unwrap();
        let sum: u64 =
            blocks.iter().map(|b| b["tokens"].as_u64().unwrap()).sum::<u64>() + ctx["overhead"].as_u64().unwrap();
        assert!(sum <= 2000 && sum > 1800, "{sum}");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("conv-26: strategy window, budget 2000, o200k_base:"), "{stderr}");
    assert!(stderr.contains("verbatim_turn"));
    assert!(stderr.contains("settings:\n[window] (no settings)"), "{stderr}");
}

#[test]
fn messages_output_is_an_openai_array() {
    let text = br#"{"id": "a", "turns": [
        {"id": "s", "role": "system", "content": "Be brief."},
        {"id": "u", "role": "user", "speaker": "Jane Doe", "content": "Hi"},
        {"id": "b", "role": "assistant", "content": "Hello"}]}"#;
    let (_dir, path) = file("m.json", text);
    let out = strata(&["compress", &path, "--budget", "1000"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        serde_json::json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "name": "Jane_Doe", "content": "Hi"},
            {"role": "assistant", "content": "Hello"}
        ])
    );
    // The same file through `tokens`: the totals match what compress counted.
    let out = strata(&["tokens", &path]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("a: 3 turns, 24 tokens (o200k_base"), "{stdout}");
}

#[test]
fn config_files_change_the_strategy() {
    let (_dir, cfg) = file("c.toml", b"[recent-8-summary-12]\nrecent = 1\nsummarized = 1\n");
    // Long replies, so that the history costs more than the budget (a history within it is
    // sent whole by every strategy).
    let long = "Details follow. ".repeat(30);
    let text = format!(
        r#"[{{"role": "user", "content": "one"}}, {{"role": "assistant", "content": "1. {long}"}},
            {{"role": "user", "content": "two"}}, {{"role": "assistant", "content": "2. {long}"}},
            {{"role": "user", "content": "three"}}, {{"role": "assistant", "content": "3"}}]"#
    );
    let (_dir2, path) = file("m.json", text.as_bytes());
    let out = strata(&[
        "compress",
        &path,
        "--budget",
        "100",
        "--strategy",
        "recent-8-summary-12",
        "--config",
        &cfg,
        "--format",
        "text",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "system: Conversation Summary (earlier context):\nTopics discussed: two\nKey points: 2. Details follow.\n\nsystem: Recent conversation details:\nQ: three\nA: 3\n"
    );
    let (_dir3, bad) = file("bad.toml", b"[window]\nsize = 1\n");
    let out = strata(&["compress", &path, "--budget", "10", "--config", &bad]);
    assert_eq!(out.status.code(), Some(2));
}

fn probes_suite() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/probes/probes.jsonl").display().to_string()
}

/// `strata eval` without the model-based topic detectors, so that these tests need no weights.
fn eval(args: &[&str]) -> Output {
    let mut all = vec!["eval", "--quiet", "--segmenter", "none,even-10"];
    all.extend_from_slice(args);
    strata(&all)
}

fn results(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap()
}

#[test]
fn eval_gate_fails_on_a_doctored_baseline_and_names_the_metric() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let probes = probes_suite();
    let args = [
        "--dataset",
        probes.as_str(),
        "--strategy",
        "full,window",
        "--budget",
        "2000",
        "--mode",
        "agnostic",
        "--out",
        out.to_str().unwrap(),
    ];
    let first = eval(&args);
    assert_eq!(first.status.code(), Some(0), "{}", String::from_utf8_lossy(&first.stderr));
    // One screen on stdout, the full table in the output folder.
    let summary = String::from_utf8_lossy(&first.stdout);
    assert!(summary.contains("probes/full         2000     1.000  1.000  1.000     0.000  |"), "{summary}");
    assert!(summary.contains(&format!("{}/results.md", out.display())), "{summary}");
    let table = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(table.contains("| probes | full | 2000 | agnostic | 206 | 1.000 | 1.000 |"), "{table}");
    // The same run against its own results passes the gate.
    let baseline = out.join("results.json");
    let mut with_gate = args.to_vec();
    with_gate.extend(["--baseline", baseline.to_str().unwrap(), "--tolerance", "0.01"]);
    let again = eval(&with_gate);
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    assert!(String::from_utf8_lossy(&again.stdout).contains("gate: no metric fell"));
    // A baseline that claims more than the strategy does: exit 1, naming run and metric.
    let mut doctored = results(&out);
    let window = doctored["runs"].as_array_mut().unwrap().iter_mut().find(|r| r["strategy"] == "window").unwrap();
    let was = window["answer_recall"].as_f64().unwrap();
    window["answer_recall"] = serde_json::json!(was + 0.05);
    let doctored_path = dir.path().join("doctored.json");
    std::fs::write(&doctored_path, serde_json::to_string(&doctored).unwrap()).unwrap();
    let mut gated = args.to_vec();
    gated.extend(["--baseline", doctored_path.to_str().unwrap(), "--tolerance", "0.01"]);
    let failed = eval(&gated);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("probes/window/2000/agnostic: answer_recall fell from"), "{stderr}");
    assert!(!stderr.contains("evidence_recall fell"), "only the doctored metric: {stderr}");
    // Within the tolerance, the same baseline passes.
    let mut tolerant = args.to_vec();
    tolerant.extend(["--baseline", doctored_path.to_str().unwrap(), "--tolerance", "0.06"]);
    assert_eq!(eval(&tolerant).status.code(), Some(0));
}

#[test]
fn eval_results_record_the_settings_the_run_used() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("chat.toml");
    std::fs::write(&config, "[recent-8-summary-12]\nrecent = 10\n[tiered]\nsalient = 0.5\n").unwrap();
    let probes = probes_suite();
    let run = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let mut args =
            vec!["--dataset", probes.as_str(), "--strategy", "window", "--budget", "500", "--mode", "agnostic"];
        args.extend(["--out", out.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let o = eval(&args);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        results(&out)["config"]["settings"].clone()
    };
    let set = run("set", &["--config", config.to_str().unwrap()]);
    assert_eq!(set["recent-8-summary-12"]["recent"], 10);
    assert_eq!(set["tiered"]["salient"], 0.5);
    // Defaults filled in: every knob is there, whether the file named it or not.
    assert_eq!(set["recent-8-summary-12"]["summarized"], 12);
    let default = run("default", &[]);
    assert_eq!(default["recent-8-summary-12"]["recent"], 8);
}

#[test]
fn compress_tiered_builds_the_context_eval_scores() {
    // The harness's contexts for one probe conversation (tiered, with a question, words only so
    // that no weights are needed), and `strata compress` asked for each of them: the same
    // context, block for block, because both build it through the one registry.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let probes = probes_suite();
    let args = [
        "--dataset",
        probes.as_str(),
        "--limit",
        "1",
        "--strategy",
        "tiered",
        "--budget",
        "600",
        "--mode",
        "aware",
        "--embedder",
        "none",
        "--save-contexts",
        "--out",
        out.to_str().unwrap(),
    ];
    let run = eval(&args);
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let saved = std::fs::read_to_string(out.join("contexts.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = saved.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let builds = std::fs::read_to_string(out.join("builds.jsonl")).unwrap();
    assert_eq!(records.len(), builds.lines().count(), "one context per build");
    let set: Vec<serde_json::Value> =
        std::fs::read_to_string(&probes).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let conversation = &set[0];
    let question = |probe: &str| {
        let all = conversation["probes"].as_array().unwrap();
        all.iter().find(|p| p["id"] == probe).unwrap()["question"].as_str().unwrap().to_string()
    };
    let (_d, path) = file("one.json", serde_json::to_string(conversation).unwrap().as_bytes());
    let mut compared = 0;
    for r in records.iter().filter(|r| r["probe"] != "").take(3) {
        let q = question(r["probe"].as_str().unwrap());
        let after = r["after"].as_str().unwrap();
        let built = strata(&[
            "compress",
            &path,
            "--strategy",
            "tiered",
            "--budget",
            "600",
            "--question",
            &q,
            "--at",
            after,
            "--embedder",
            "none",
            "--format",
            "json",
        ]);
        assert_eq!(built.status.code(), Some(0), "{}", String::from_utf8_lossy(&built.stderr));
        let got: serde_json::Value = serde_json::from_slice(&built.stdout).unwrap();
        assert_eq!(got, r["context"], "probe {}", r["probe"]);
        assert!(got["blocks"].as_array().unwrap().iter().any(|b| b["kind"] == "recalled"), "{got}");
        compared += 1;
    }
    assert_eq!(compared, 3);
}

#[test]
fn eval_shards_merge_into_the_numbers_of_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let probes = probes_suite();
    let run = |name: &str, shard: Option<&str>| {
        let out = dir.path().join(name);
        let mut args = vec![
            "--dataset",
            probes.as_str(),
            "--strategy",
            "window,recent-8-summary-12",
            "--budget",
            "1000,4000",
            "--out",
            out.to_str().unwrap(),
        ];
        if let Some(s) = shard {
            args.extend(["--shard", s]);
        }
        let o = eval(&args);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        out
    };
    let whole = run("whole", None);
    let parts = [run("s1", Some("1/3")), run("s2", Some("2/3")), run("s3", Some("3/3"))];
    let merged = dir.path().join("merged");
    let mut args = vec!["eval", "merge"];
    args.extend(parts.iter().map(|p| p.to_str().unwrap()));
    args.extend(["--out", merged.to_str().unwrap()]);
    let o = strata(&args);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // Build times differ between any two runs; every other number must be identical.
    let strip = |mut v: serde_json::Value| {
        for r in v["runs"].as_array_mut().unwrap() {
            r["build_ms_p50"] = serde_json::Value::Null;
            r["build_ms_p95"] = serde_json::Value::Null;
        }
        v["runs"].clone()
    };
    let (a, b) = (strip(results(&whole)), strip(results(&merged)));
    assert_eq!(a.as_array().unwrap().len(), 8);
    assert_eq!(a, b);
    // A missing shard is refused.
    let o = strata(&[
        "eval",
        "merge",
        parts[0].to_str().unwrap(),
        parts[1].to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("2 of 3 shards given"));
}

#[test]
fn eval_rejects_a_broken_dataset_line_without_writing_results() {
    let good = std::fs::read_to_string(probes_suite()).unwrap();
    let first = good.lines().next().unwrap();
    let (dir, path) = file("broken.jsonl", format!("{first}\n{{\"id\": \"x\", \"turns\": [\n").as_bytes());
    let out = dir.path().join("out");
    let o = eval(&["--dataset", &path, "--strategy", "window", "--budget", "1000", "--out", out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{path}:2: ")), "{stderr}");
    assert!(!out.join("results.json").exists(), "no half-written results");
}

#[test]
fn eval_counts_unknown_locomo_evidence_as_warnings() {
    let out = tempfile::tempdir().unwrap();
    let o = eval(&[
        "--dataset",
        "locomo",
        "--strategy",
        "full",
        "--budget",
        "1000",
        "--mode",
        "agnostic",
        "--out",
        out.path().to_str().unwrap(),
        "--data-dir",
        data_dir().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let r = results(out.path());
    assert_eq!(r["warnings"].as_array().unwrap().len(), 4);
    assert_eq!(r["runs"][0]["evidence_recall"], 1.0);
    assert_eq!(r["runs"][0]["probes"], 1540);
    assert_eq!(r["datasets"]["locomo"], "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4");
    for name in
        ["results.csv", "records.jsonl", "builds.jsonl", "pareto-locomo-agnostic.svg", "categories-locomo-agnostic.svg"]
    {
        assert!(out.path().join(name).exists(), "{name}");
    }
}

#[test]
fn summarize_quotes_sentences_with_their_turns_and_explains_the_registry() {
    let transcript = br#"{"format": "strata.transcript/1", "id": "s1", "turns": [
        {"id": "t1", "role": "user", "content": "Hi there! The checkout p99 is 840 ms, over the 300 ms limit."},
        {"id": "t2", "role": "assistant", "content": "The timeout lives in deploy/checkout/config.toml. INC-4821 tracks it."},
        {"id": "t3", "role": "user", "content": "We decided to go with Redis because we need persistence."},
        {"id": "t4", "role": "assistant", "content": "Sounds good. I will update the runbook tomorrow."}
    ]}"#;
    let (_dir, path) = file("s.json", transcript);
    let out = strata(&["summarize", &path, "--ratio", "2", "--explain"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("# s1 (4 turns, "), "{text}");
    assert!(text.contains("t3: We decided to go with Redis because we need persistence."), "{text}");
    assert!(!text.contains("Hi there!"), "{text}");
    assert!(
        text.contains("t2 path: deploy/checkout/config.toml") && text.contains("t2 identifier: INC-4821"),
        "{text}"
    );

    let out = strata(&["summarize", &path, "--profile", "poetry"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown profile `poetry`"));
}

#[test]
fn replay_then_recall_and_context_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mem.db").display().to_string();
    let conv = "--conversation";
    let replay = strata(&["replay", &locomo(), conv, "conv-26", "--db", &db, "--embedder", "none", "--every", "100"]);
    let stdout = String::from_utf8_lossy(&replay.stdout);
    assert!(replay.status.success(), "{}", String::from_utf8_lossy(&replay.stderr));
    assert!(stdout.contains("conv-26: 419 turns stored"), "{stdout}");
    assert!(stdout.lines().any(|l| l.contains("cold") && l.contains("act:")), "{stdout}");
    // Replaying again resumes: nothing is stored twice.
    let again = strata(&["replay", &locomo(), conv, "conv-26", "--db", &db, "--embedder", "none"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("(419 already stored)"));

    let recall = strata(&["recall", "--db", &db, "--embedder", "none", "LGBTQ activist group", "-k", "3"]);
    let out = String::from_utf8_lossy(&recall.stdout);
    assert!(recall.status.success(), "{}", String::from_utf8_lossy(&recall.stderr));
    assert!(out.starts_with(" 1. D10:"), "{out}");

    let ctx = strata(&[
        "context",
        "--db",
        &db,
        "--embedder",
        "none",
        "--budget",
        "500",
        "--question",
        "What did Caroline research?",
        "--format",
        "json",
        "--explain",
    ]);
    assert!(ctx.status.success(), "{}", String::from_utf8_lossy(&ctx.stderr));
    let v: serde_json::Value = serde_json::from_slice(&ctx.stdout).unwrap();
    let blocks = v["blocks"].as_array().unwrap();
    let total: u64 =
        blocks.iter().map(|b| b["tokens"].as_u64().unwrap()).sum::<u64>() + v["overhead"].as_u64().unwrap();
    assert!(total <= 500, "{total}");
    assert!(blocks.iter().any(|b| b["kind"] == "recalled"));
    assert!(String::from_utf8_lossy(&ctx.stderr).contains("recalled"));

    // Without a question the salient sentences carry date lines; the config file's [tiered.salience]
    // table turns them off, and `--explain` lists the settings in effect.
    let agnostic = |config: Option<&str>| {
        let mut args = vec!["context", "--db", &db, "--embedder", "none", "--budget", "1000", "--format", "text"];
        args.extend(config.map(|c| ["--config", c, "--explain"]).into_iter().flatten());
        strata(&args)
    };
    let dated = agnostic(None);
    assert!(dated.status.success(), "{}", String::from_utf8_lossy(&dated.stderr));
    let date_line = |out: &std::process::Output| String::from_utf8_lossy(&out.stdout).contains(" 2023]\n");
    assert!(date_line(&dated), "{}", String::from_utf8_lossy(&dated.stdout));
    let (_cdir, config) = file("c.toml", b"[tiered]\nsalient = 0.8\n[tiered.salience]\ndated = false\n");
    let undated = agnostic(Some(&config));
    let stderr = String::from_utf8_lossy(&undated.stderr);
    assert!(undated.status.success(), "{stderr}");
    assert!(!date_line(&undated), "{}", String::from_utf8_lossy(&undated.stdout));
    assert!(
        stderr.contains("settings:\n[tiered]\nsalient = 0.8\n") && stderr.contains("\ndated = false\n"),
        "{stderr}"
    );
    let (_bdir, bad) = file("bad.toml", b"[tiered]\nsalient = 2\n");
    let out = agnostic(Some(&bad));
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.toml: tiered: `salient` must be between 0 and 1"));

    // A store written by this version has no f32 vectors to rewrite; compacting keeps every turn.
    let compact = strata(&["compact", "--db", &db]);
    assert!(compact.status.success(), "{}", String::from_utf8_lossy(&compact.stderr));
    assert!(String::from_utf8_lossy(&compact.stdout).contains(": 0 vector rows rewritten as int8;"));
    let again = strata(&["replay", &locomo(), conv, "conv-26", "--db", &db, "--embedder", "none"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("(419 already stored)"));
}

#[test]
fn paraphrase_refuses_a_transcript_without_probes_before_loading_a_model() {
    let text = br#"{"id": "a", "turns": [{"id": "u", "role": "user", "content": "Hi"}]}"#;
    let (dir, path) = file("plain.json", text);
    let out_path = dir.path().join("out.jsonl").display().to_string();
    let out = strata(&["paraphrase", &path, "--model", "qwen", "--models-dir", "/nonexistent", "--out", &out_path]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("plain.json: no probes"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(!dir.path().join("out.jsonl").exists());
}

#[test]
fn a_foreign_or_missing_store_is_refused_untouched() {
    let (dir, path) = file("notes.db", b"my notes, not a database");
    for args in [
        vec!["recall", "--db", &path, "--embedder", "none", "x"],
        vec!["context", "--db", &path, "--embedder", "none", "--budget", "100"],
        vec!["compact", "--db", &path],
    ] {
        let out = strata(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("notes.db") && stderr.contains("not a SQLite database"), "{stderr}");
        assert!(out.stdout.is_empty());
    }
    assert_eq!(std::fs::read(&path).unwrap(), b"my notes, not a database");
    let missing = dir.path().join("none.db").display().to_string();
    let out = strata(&["recall", "--db", &missing, "--embedder", "none", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such store"));
    assert!(!dir.path().join("none.db").exists());
}

#[test]
fn serve_refuses_to_listen_beyond_loopback_without_a_key_and_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.db").display().to_string();
    let base = ["serve", "--upstream", "http://127.0.0.1:9/v1", "--embedder", "none", "--db", &db];
    for (extra, names) in [
        (&["--listen", "0.0.0.0:0"][..], "--api-key-file"),
        (&["--api-key-file", "/nonexistent/key"][..], "/nonexistent/key"),
        (&["--recall-share", "1.5"][..], "--recall-share"),
    ] {
        let out = strata(&[&base[..], extra].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(names), "{extra:?} should name {names}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    let out = strata(&["serve", "--upstream", "ftp://x", "--embedder", "none", "--db", &db]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A model that cannot be opened stops `replay` before it creates the store: nothing is left
/// behind to be mistaken for a memory.
#[test]
fn a_replay_whose_model_is_missing_creates_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mem.db");
    let nowhere = dir.path().join("no-models");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/chat.json");
    let out = strata(&["replay", example, "--db", db.to_str().unwrap(), "--models-dir", nowhere.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("no-models") && stderr.contains("fetch-models"), "{stderr}");
    assert!(!db.exists(), "{} was created", db.display());
    // The example replays with no embedder.
    let out = strata(&["replay", example, "--db", db.to_str().unwrap(), "--embedder", "none"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(db.exists());
}

/// The example that docs/format.md shows loads, and its question recalls the turn that
/// answers it.
#[test]
fn the_documented_example_compresses_and_recalls() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/chat.json");
    let q = "Which broker did we pick?";
    let out = strata(&[
        "compress",
        example,
        "--strategy",
        "tiered",
        "--budget",
        "120",
        "--question",
        q,
        "--embedder",
        "none",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Kafka"), "{stdout}");
}

/// A budget too small for the message being answered is said on stderr, with the smallest
/// budget that keeps it; that budget does keep it, silently.
#[test]
fn a_budget_too_small_for_the_newest_turn_says_so() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/chat.json");
    let out = strata(&["compress", example, "--strategy", "window", "--budget", "10"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("budget 10 leaves out the newest turn t7"), "{stderr}");
    let least = stderr.split("at least ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().to_string();
    let out = strata(&["compress", example, "--strategy", "window", "--budget", &least, "--format", "json"]);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"t7\""));
    let out = strata(&[
        "compress",
        example,
        "--strategy",
        "window",
        "--budget",
        &(least.parse::<usize>().unwrap() - 1).to_string(),
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("leaves out the newest turn t7"));
}

/// An OpenAI-compatible endpoint for `strata probes`, inside the test: it answers each request
/// with a probe about the turns its reply format names as evidence (the name each turn gives,
/// which no other turn has), and counts the requests it served.
fn quiz_endpoint() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1#quiz", listener.local_addr().unwrap());
    let served = std::sync::Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let prompt = request["messages"][1]["content"].as_str().unwrap().to_string();
            let hint = &prompt[prompt.rfind("\"evidence\": [").unwrap()..];
            let ids: Vec<&str> = hint[hint.find('[').unwrap() + 1..hint.find(']').unwrap()]
                .split(", ")
                .map(|s| s.trim_matches('"'))
                .collect();
            let names: Vec<String> = ids.iter().map(|id| format!("Zed{}", &id[1..])).collect();
            let reply = serde_json::json!({
                "question": format!("Which name goes with Q{}X?", &ids[0][1..]),
                "answer": names.join(" and "),
                "evidence": ids,
            });
            let completion = serde_json::json!({
                "choices": [{"message": {"role": "assistant", "content": reply.to_string()}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10},
            })
            .to_string();
            count.fetch_add(1, Ordering::SeqCst);
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{completion}",
                completion.len()
            );
        }
    });
    (url, served)
}

/// A conversation of 60 turns over six days, each naming things no other turn names.
fn named_turns(id: &str) -> String {
    let turns: Vec<serde_json::Value> = (0..60)
        .map(|i| {
            serde_json::json!({
                "id": format!("t{i}"),
                "role": if i % 2 == 0 { "user" } else { "assistant" },
                "speaker": if i % 2 == 0 { "Ana" } else { "Ben" },
                "timestamp": format!("2023-05-{:02}T10:{:02}:00Z", 8 + i / 10, i),
                "content": format!("On my trip I found a small lantern near gate{i}, and I named it Zed{i} after the harbour code Q{i}X."),
            })
        })
        .collect();
    serde_json::json!({ "id": id, "turns": turns }).to_string()
}

#[test]
fn probes_are_written_checked_scored_and_served_from_the_cache_on_a_rerun() {
    let (dir, path) = file("mine.json", named_turns("mine").as_bytes());
    let (url, served) = quiz_endpoint();
    let out = dir.path().join("mine.probes.json").display().to_string();
    let models = dir.path().join("models").display().to_string();
    let args = [
        "probes",
        &path,
        "--generator",
        &url,
        "--models-dir",
        &models,
        "--out",
        &out,
        "--count",
        "8",
        "--recent-tokens",
        "200",
    ];
    let first = strata(&args);
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert_eq!(first.status.code(), Some(0), "{}", String::from_utf8_lossy(&first.stderr));
    assert!(stdout.contains("kept of 8 asked"), "{stdout}");
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 8);
    let written = std::fs::read_to_string(&out).unwrap();
    let probes: serde_json::Value = serde_json::from_str(&written).unwrap();
    let kept = probes["probes"].as_array().unwrap().len();
    assert!(kept >= 4, "{stdout}\n{written}");
    let verdicts = std::fs::read_to_string(dir.path().join("mine.probes.verdicts.jsonl")).unwrap();
    assert_eq!(verdicts.lines().count(), 8);
    assert!(verdicts.lines().all(|l| l.contains("\"reply\"")), "{verdicts}");

    // The same command again: every reply from the cache, the same file.
    let again = strata(&args);
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 8, "a rerun asked the endpoint again");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), written);

    // The file is a dataset: eval scores it, every kept probe.
    let scored = dir.path().join("eval");
    let o = eval(&["--dataset", &out, "--strategy", "window", "--budget", "1000", "--out", scored.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(results(&scored)["runs"][0]["probes"], kept as u64, "{}", results(&scored));

    // An endpoint that is not there: every request counted as failed, nothing kept.
    let none = strata(&[
        "probes",
        &path,
        "--generator",
        "http://127.0.0.1:9/v1#gone",
        "--models-dir",
        &models,
        "--out",
        &out,
        "--count",
        "3",
        "--recent-tokens",
        "200",
        "--deadline-ms",
        "2000",
    ]);
    let stdout = String::from_utf8_lossy(&none.stdout);
    assert_eq!(none.status.code(), Some(0), "{}", String::from_utf8_lossy(&none.stderr));
    assert!(stdout.contains("0 probes kept of 3 asked") && stdout.contains("3 generator-failed"), "{stdout}");
}

#[test]
fn probes_for_several_conversations_need_a_jsonl_file() {
    let text = format!("{}\n{}\n", named_turns("a"), named_turns("b"));
    let (dir, path) = file("two.jsonl", text.as_bytes());
    let out = dir.path().join("two.probes.json");
    let run = strata(&["probes", &path, "--generator", "qwen", "--out", &out.display().to_string()]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("2 conversations") && stderr.contains(".jsonl"), "{stderr}");
    assert!(!out.exists());
}
