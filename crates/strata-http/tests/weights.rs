//! `HttpGenerator` against a real llama.cpp server: llama-cpp-python's, serving SmolLM2 from
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

#[test]
#[ignore = "needs SmolLM2 (cargo xtask fetch-models) and llama-cpp-python[server]; run with --ignored"]
fn a_llama_cpp_server_answers_through_the_http_generator() {
    let model = models_dir().join("smollm2-135m-instruct/model-q4_1.gguf");
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
