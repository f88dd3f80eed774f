//! `HttpGenerator` against a real llama.cpp server: llama-cpp-python's, serving SmolLM2 (and
//! Qwen2.5-Coder 0.5B as the generator of `strata probes`) from
//! `cargo xtask fetch-models`. Run with the other tests that need weights (`--ignored`);
//! `.ci/run` installs `llama-cpp-python[server]` in a venv of its own and puts it first on PATH.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strata_core::{ChatMessage, GenerateRequest, Generator, Role};
use strata_http::{HttpConfig, HttpGenerator};

fn models_dir() -> PathBuf {
    std::env::var_os("STRATA_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"))
}

/// The server process, killed when the test ends however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ask(question: &str) -> GenerateRequest {
    GenerateRequest {
        messages: vec![
            ChatMessage { role: Role::System, content: "You answer in one short sentence.".to_string() },
            ChatMessage { role: Role::User, content: question.to_string() },
        ],
        max_tokens: 12,
        deadline: Some(Duration::from_secs(60)),
    }
}

/// A llama.cpp server for `model` (a folder and file under the models folder), up and
/// answering, with its base URL and the file it logs to.
fn llama_server(model: &str) -> (Server, String, PathBuf) {
    let model = models_dir().join(model);
    assert!(model.exists(), "{} is missing: run cargo xtask fetch-models", model.display());
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = std::env::temp_dir().join(format!("strata-llama-server-{port}.log"));
    let mut server = Server(
        Command::new("python3")
            .args(["-m", "llama_cpp.server", "--host", "127.0.0.1", "--n_ctx", "2048"])
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
    (server, base, log)
}

#[test]
#[ignore = "needs SmolLM2 (cargo xtask fetch-models) and llama-cpp-python[server]; run with --ignored"]
fn a_llama_cpp_server_answers_through_the_http_generator() {
    let (mut server, base, log) = llama_server("smollm2-135m-instruct/model-q4_1.gguf");
    let port = base.trim_start_matches("http://127.0.0.1:").trim_end_matches("/v1").to_string();
    let g = HttpGenerator::new(HttpConfig::parse(&format!("{base}#smollm2")).unwrap());
    let request = ask("What colour is the sky on a clear day?");
    // A server that dies on the request (as a llama.cpp build for the wrong CPU does) shows
    // up as refused connections: say how it ended and what it printed.
    let out = g.generate(&request).unwrap_or_else(|e| {
        panic!("{e}\nthe server: {:?}\n{}", server.0.try_wait(), std::fs::read_to_string(&log).unwrap_or_default())
    });
    assert!(!out.text.trim().is_empty(), "{out:?}");
    assert!(out.prompt_tokens > 10 && (1..=12).contains(&out.generated_tokens), "{out:?}");
    // Asked for greedy decoding: the same request, the same answer.
    assert_eq!(g.generate(&request).unwrap().text, out.text);

    // A path the server does not have is a client error, reported and not retried.
    let wrong =
        HttpGenerator::new(HttpConfig { base_url: format!("http://127.0.0.1:{port}/nope"), ..g.config().clone() });
    let err = wrong.generate(&request).unwrap_err().to_string();
    assert!(err.contains("HTTP 404"), "{err}");
}

/// `strata probes` with a llama.cpp server as its generator: Qwen2.5-Coder 0.5B writes probes
/// for a conversation of the seeded set, every request gets a reply, and what is kept passed
/// the checks (its evidence is a turn older than the newest, and holds the answer's words).
#[test]
#[ignore = "needs Qwen2.5-Coder 0.5B (cargo xtask fetch-models) and llama-cpp-python[server]; run with --ignored"]
fn a_llama_cpp_server_writes_probes() {
    let (_server, base, log) = llama_server("qwen2.5-coder-0.5b-instruct/model-q4_k_m.gguf");
    let g = HttpGenerator::new(HttpConfig::parse(&format!("{base}#qwen")).unwrap());
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../datasets/probes/probes.jsonl");
    let conversation = strata_transcript::load_path(&file, None).unwrap().conversations.remove(0);
    let config = strata_probes::WriteConfig { per_conversation: 6, ..strata_probes::WriteConfig::default() };
    let counter = strata_tokens::Tiktoken::new(strata_tokens::Encoding::O200kBase);
    let written =
        strata_probes::write_probes(std::slice::from_ref(&conversation), &g, &counter, &config, &mut |_, _| {});
    let (asked, kept, dropped) = written.counts();
    let log = || std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(asked, 6, "{dropped:?}");
    assert!(written.verdicts.iter().all(|v| v.error.is_none()), "{:?}\n{}", written.verdicts, log());
    assert!(
        dropped.iter().any(|&(r, n)| r != strata_probes::Reason::NotUnderstood && n > 0) || kept > 0,
        "{:?}",
        written.verdicts
    );
    let ids: Vec<&str> = conversation.turns.iter().map(|t| t.id.as_str()).collect();
    for p in &written.conversations[0].probes {
        assert!(p.evidence.iter().all(|e| ids.contains(&e.as_str())), "{p:?}");
        assert!(!p.question.is_empty() && !p.answer.is_empty(), "{p:?}");
    }
}
