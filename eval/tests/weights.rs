//! The reader and the judge against a real llama.cpp server (llama-cpp-python's, serving
//! SmolLM2 from `cargo xtask fetch-models`) on LoCoMo: answers come back, are scored and judged,
//! and a rerun reads them from the cache with the server gone. Run with the other tests that
//! need weights (`--ignored`); `.ci/run` puts llama-cpp-python's venv first on PATH.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strata_eval::EvalConfig;
use strata_eval::Mode;

/// Where the models are, by the rule every command follows.
fn models_dir() -> PathBuf {
    strata_models::dir(None)
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The server process, killed when dropped however the test ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve_smollm2() -> (Server, String) {
    let model = models_dir().join("smollm2-135m-instruct/model-q4_1.gguf");
    assert!(model.exists(), "{} is missing: run cargo xtask fetch-models", model.display());
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = std::env::temp_dir().join(format!("strata-reader-llama-{port}.log"));
    let mut server = Server(
        Command::new("python3")
            .args(["-m", "llama_cpp.server", "--host", "127.0.0.1", "--n_ctx", "4096"])
            .arg("--port")
            .arg(port.to_string())
            .arg("--model")
            .arg(&model)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("python3"),
    );
    let base = format!("http://127.0.0.1:{port}/v1");
    let start = Instant::now();
    loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            panic!(
                "the llama.cpp server exited ({status}); pip install 'llama-cpp-python[server]==0.3.36'?\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        if ureq::get(&format!("{base}/models")).call().is_ok() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "the server did not come up within 120 s");
        std::thread::sleep(Duration::from_millis(250));
    }
    (server, format!("{base}#smollm2"))
}

#[test]
#[ignore = "needs SmolLM2 (cargo xtask fetch-models), llama-cpp-python[server] and LoCoMo; run with --ignored"]
fn a_llama_cpp_server_reads_and_judges_and_a_rerun_asks_nothing() {
    let (server, endpoint) = serve_smollm2();
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let data_dir =
        std::env::var_os("STRATA_DATA").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/datasets"));
    let config = EvalConfig {
        datasets: vec!["locomo".into()],
        strategies: vec!["window".into()],
        budgets: vec![1000],
        modes: vec![Mode::Agnostic],
        tokenizer: "o200k".into(),
        out: out.path().to_path_buf(),
        shard: None,
        data_dir,
        repo_root: root(),
        strategy_config: Default::default(),
        segmenters: vec![],
        models_dir: cache.path().to_path_buf(),
        summarizers: vec![],
        progress: false,
        generator: None,
        limit: Some(1),
        embedder: "none".into(),
        reranker: "none".into(),
        save_contexts: false,
        reader: Some(endpoint.clone()),
        judge: Some(endpoint),
        sample: Some(2),
    };
    let first = strata_eval::run(&config).unwrap();
    let answers = &first.records.answers;
    assert_eq!(answers.len(), 8, "two questions of each of LoCoMo's four answerable categories");
    assert!(answers.iter().all(|a| a.failure.is_none()), "{answers:#?}");
    assert!(answers.iter().all(|a| a.prompt_tokens > a.context_tokens / 2 && !a.answer.is_empty()));
    // Every answer judged; whatever the small judge said is read as CORRECT, WRONG or an error.
    assert!(answers.iter().all(|a| a.judgement.is_some()));
    let run = &first.results.answers[0];
    assert_eq!((run.scores.questions, run.strategy.as_str()), (8, "window"));
    let correct = answers.iter().filter(|a| a.judgement.as_ref().unwrap().correct == Some(true)).count();
    assert_eq!(run.scores.judge, Some(correct as f64 / 8.0));
    let text = std::fs::read_to_string(out.path().join("answers.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 8);
    assert!(first.markdown.contains("## Reader answers"));

    // The server gone, a rerun answers from the cache: no failures, the same numbers.
    drop(server);
    let again = strata_eval::run(&config).unwrap();
    let strip =
        |a: &strata_eval::answers::AnswerRecord| strata_eval::answers::AnswerRecord { reader_ms: 0.0, ..a.clone() };
    assert_eq!(
        again.records.answers.iter().map(strip).collect::<Vec<_>>(),
        answers.iter().map(strip).collect::<Vec<_>>()
    );
}
