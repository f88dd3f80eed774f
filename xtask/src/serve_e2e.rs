//! `cargo xtask serve-e2e`: `strata serve` end to end with real parts. The official `openai`
//! Python package (in a venv made here, from PyPI) talks to `strata serve` in front of a real
//! llama.cpp server (llama-cpp-python's, serving Qwen2.5-Coder 0.5B), through a logging proxy
//! that shows what the upstream received; then the same client against `strata serve
//! --local-model smollm2`. The checks themselves are in `crates/strata-server/tests/e2e.py`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;

/// The client library the test uses, pinned.
const OPENAI: &str = "openai==1.99.9";
const BUDGET: usize = 600;

/// Child processes, killed when the run ends however it ends.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn wait_for(url: &str, what: &str, child: &mut Child, log: &Path, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            bail!("{what} exited with {status}; see {}", log.display());
        }
        // Any HTTP answer means it is up (a 401 too).
        match ureq::get(url).timeout(Duration::from_secs(2)).call() {
            Ok(_) | Err(ureq::Error::Status(..)) => return Ok(()),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
    bail!("{what} did not answer {url} within {limit:?}; see {}", log.display())
}

fn spawn_logged(cmd: &mut Command, log: &Path) -> Result<Child> {
    let out = std::fs::File::create(log)?;
    cmd.stdout(out.try_clone()?).stderr(out).spawn().with_context(|| format!("{cmd:?}"))
}

pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    ensure!(args.is_empty(), "serve-e2e takes no arguments");
    let bin = root.join("target/release/strata");
    ensure!(bin.exists(), "{}: no strata binary (cargo build --release -p strata-cli)", bin.display());
    crate::models::fetch(&["qwen".to_string(), "smollm2".to_string(), "minilm".to_string()])?;
    let models = crate::models::models_dir();
    let work = root.join("target/serve-e2e");
    std::fs::create_dir_all(&work)?;
    let python = venv(&work)?;
    let script = root.join("crates/strata-server/tests/e2e.py");
    let key = "e2e-key-not-secret";
    std::fs::write(work.join("key"), key)?;
    let mut children = Children(Vec::new());

    // The real upstream: llama.cpp's server (llama-cpp-python), as the generate bench runs it.
    let llama_port = free_port()?;
    let llama_log = work.join("llama.log");
    let mut llama = spawn_logged(
        Command::new("python3").args(["-m", "llama_cpp.server", "--host", "127.0.0.1", "--n_ctx", "4096"]).args([
            "--port",
            &llama_port.to_string(),
            "--model",
            &models.join("qwen2.5-coder-0.5b-instruct/model-q4_k_m.gguf").display().to_string(),
        ]),
        &llama_log,
    )
    .context("llama-cpp-python's server (pip install 'llama-cpp-python[server]==0.3.36')")?;
    wait_for(
        &format!("http://127.0.0.1:{llama_port}/v1/models"),
        "llama.cpp's server",
        &mut llama,
        &llama_log,
        Duration::from_secs(120),
    )?;
    children.0.push(llama);

    // The logging proxy between Strata and llama.cpp.
    let proxy_port = free_port()?;
    let upstream_log = work.join("upstream-requests.jsonl");
    let _ = std::fs::remove_file(&upstream_log);
    let proxy_log = work.join("proxy.log");
    let mut proxy = spawn_logged(
        Command::new(&python).arg(&script).args(["proxy", "--port", &proxy_port.to_string()]).args([
            "--upstream",
            &format!("http://127.0.0.1:{llama_port}"),
            "--log",
            &upstream_log.display().to_string(),
        ]),
        &proxy_log,
    )?;
    wait_for(
        &format!("http://127.0.0.1:{proxy_port}/v1/models"),
        "the proxy",
        &mut proxy,
        &proxy_log,
        Duration::from_secs(30),
    )?;
    children.0.push(proxy);

    for mode in ["upstream", "local"] {
        let port = free_port()?;
        let db = work.join(format!("{mode}.db"));
        for stale in [db.clone(), db.with_extension("db-wal"), db.with_extension("db-shm")] {
            let _ = std::fs::remove_file(stale);
        }
        let log = work.join(format!("serve-{mode}.log"));
        let mut cmd = Command::new(&bin);
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--budget", &BUDGET.to_string()])
            .args(["--db", &db.display().to_string(), "--api-key-file", &work.join("key").display().to_string()])
            .args(["--embedder", "minilm", "--models-dir", &models.display().to_string()]);
        match mode {
            "upstream" => cmd.args(["--upstream", &format!("http://127.0.0.1:{proxy_port}/v1")]),
            _ => cmd.args(["--local-model", "smollm2"]),
        };
        let mut server = spawn_logged(&mut cmd, &log)?;
        wait_for(
            &format!("http://127.0.0.1:{port}/healthz"),
            "strata serve",
            &mut server,
            &log,
            Duration::from_secs(120),
        )?;
        children.0.push(server);
        println!("serve-e2e: the openai client against strata serve ({mode})");
        let history = work.join(format!("history-{mode}.json"));
        let status = Command::new(&python)
            .arg(&script)
            .args(["client", "--base", &format!("http://127.0.0.1:{port}/v1"), "--key", key, "--mode", mode])
            .args(["--history-out", &history.display().to_string()])
            .stdin(Stdio::null())
            .status()?;
        ensure!(status.success(), "serve-e2e: the {mode} checks failed (logs in {})", work.display());
        let full = count(&bin, &history, &work)?;
        ensure!(full > 3 * BUDGET, "the long conversation is only {full} tokens");
        println!("ok: the long conversation is {full} tokens against a budget of {BUDGET}");
    }

    // What the upstream received, counted as Strata counts (o200k, OpenAI's message framing).
    let logged = std::fs::read_to_string(&upstream_log)?;
    let mut most = 0;
    for (i, line) in logged.lines().enumerate() {
        let v: Value = serde_json::from_str(line)?;
        let file = work.join("request.json");
        std::fs::write(&file, serde_json::json!({"messages": v["messages"]}).to_string())?;
        let n = count(&bin, &file, &work)?;
        ensure!(n <= BUDGET, "upstream request {} held {n} tokens, over the budget of {BUDGET}", i + 1);
        most = most.max(n);
    }
    ensure!(logged.lines().count() >= 3, "the upstream saw {} requests", logged.lines().count());
    println!(
        "ok: the upstream received {} requests, the largest {most} tokens (budget {BUDGET})",
        logged.lines().count()
    );
    Ok(())
}

/// A venv holding the pinned `openai` package, made once and kept under target/.
fn venv(work: &Path) -> Result<PathBuf> {
    let dir = work.join("venv");
    let python = dir.join("bin/python");
    let ready = dir.join(".openai-installed");
    if std::fs::read_to_string(&ready).ok().as_deref() == Some(OPENAI) {
        return Ok(python);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let ok = Command::new("python3").args(["-m", "venv"]).arg(&dir).status()?.success();
    ensure!(ok, "python3 -m venv {} failed", dir.display());
    let ok = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", OPENAI])
        .status()?
        .success();
    ensure!(ok, "pip install {OPENAI} into {} failed", dir.display());
    std::fs::write(&ready, OPENAI)?;
    Ok(python)
}

/// A message list's tokens as `strata tokens` counts them.
fn count(bin: &Path, file: &Path, work: &Path) -> Result<usize> {
    let out = Command::new(bin).arg("tokens").arg(file).current_dir(work).output()?;
    ensure!(out.status.success(), "strata tokens {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    // "...: N turns, T tokens (...)"
    text.lines()
        .rev()
        .find_map(|l| l.split(" turns, ").nth(1)?.split(' ').next()?.parse().ok())
        .with_context(|| format!("strata tokens {}: no total in {text:?}", file.display()))
}
