//! `cargo xtask soak`: `strata serve` under steady, moderate load for a long time (30 minutes
//! by default) against an upstream that answers at once, with the server's resident memory,
//! open files, threads, store files and model caches sampled as it runs, and the latency of
//! each sampling window. Clients pace their requests (an open loop, so the load stays the
//! same whatever the latency) and start a new conversation after `--turns` requests, so the
//! server keeps meeting conversations it has not seen and closing idle ones. It fails when a
//! turn is lost or a conversation's turn reaches another; growth is for the reader to judge,
//! and the end says how much there was between the first third and the end.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

use crate::serve_load::{cold_models, get_text, messages, missing, stored_turns, tag, Options, Server, Upstream};

struct Soak {
    minutes: f64,
    clients: usize,
    turns: usize,
    /// Requests per second, all clients together.
    rate: f64,
    sample: Duration,
}

/// One sampling window: the server's resources at its end and the requests answered in it.
struct Sample {
    at: Duration,
    rss_mb: f64,
    threads: usize,
    files: usize,
    store_mb: f64,
    cache_mb: f64,
    /// What the server's bounded in-memory caches hold: the token memos' text and SQLite's heap.
    memo_mb: f64,
    sqlite_mb: f64,
    conversations: usize,
    pending: f64,
    requests: usize,
    p50: f64,
    p95: f64,
}

pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let mut soak = Soak { minutes: 30.0, clients: 16, turns: 40, rate: 40.0, sample: Duration::from_secs(30) };
    let mut o = Options { budget: 2000, ..Options::new(root) };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--minutes" => soak.minutes = value()?.parse()?,
            "--clients" => soak.clients = value()?.parse()?,
            "--turns" => soak.turns = value()?.parse()?,
            "--rate" => soak.rate = value()?.parse()?,
            "--sample" => soak.sample = Duration::from_secs_f64(value()?.parse()?),
            "--budget" => o.budget = value()?.parse()?,
            "--embedder" => o.embedder = value()?.clone(),
            "--bin" => o.bin = PathBuf::from(value()?),
            other => bail!("soak: unknown argument `{other}`"),
        }
    }
    ensure!(soak.clients > 0 && soak.turns > 0 && soak.rate > 0.0, "soak: clients, turns and rate must be positive");
    ensure!(o.bin.exists(), "{}: no strata binary (cargo build --release -p strata-cli)", o.bin.display());
    let texts = messages(root)?;
    let work = root.join("target/soak");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let cache = if o.embedder != "none" {
        let models = cold_models(&crate::models::models_dir(), &work.join("models"))?;
        o.models = Some(models.clone());
        Some(models.join(".cache"))
    } else {
        None
    };
    let upstream = Upstream::start()?;
    let db = work.join("soak.db");
    let mut server = Server::start(&o, &db, &upstream.addr, &work.join("soak.log"))?;
    let pid = server.child.id();
    println!(
        "soak: {} minutes, {} clients at {} requests/s in all, {} turns a conversation, budget {}, embedder {}, \
         server pid {pid}",
        soak.minutes, soak.clients, soak.rate, soak.turns, o.budget, o.embedder
    );

    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(Mutex::new(None::<String>));
    // (finished at, latency ms) of every answered request, and each finished conversation's
    // list as its client holds it.
    let answered = Arc::new(Mutex::new(Vec::<(Duration, f64)>::new()));
    let finished = Arc::new(Mutex::new(Vec::<(usize, Vec<Value>)>::new()));
    let started = Instant::now();
    let interval = Duration::from_secs_f64(soak.clients as f64 / soak.rate);
    let mut handles = Vec::new();
    for client in 0..soak.clients {
        let (base, texts, stop, failed, answered, finished) =
            (server.base.clone(), texts.clone(), stop.clone(), failed.clone(), answered.clone(), finished.clone());
        let (turns, clients) = (soak.turns, soak.clients);
        handles.push(std::thread::spawn(move || {
            let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(60)).build();
            // Clients start spread over one interval, so the requests come evenly.
            let mut next = started + interval.mul_f64(client as f64 / clients as f64);
            for round in 0.. {
                let c = client * 100_000 + round;
                let mut list = vec![json!({"role": "system", "content": format!("{} Be brief.", tag(c, "system"))})];
                for t in 0..turns {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    }
                    next += interval;
                    let text = &texts[(c * 7 + t) % texts.len()];
                    list.push(json!({"role": "user", "content": format!("{} {text}", tag(c, &format!("t{t}")))}));
                    let body = json!({"model": "instant", "messages": list}).to_string();
                    let sent = Instant::now();
                    let r = agent
                        .post(&format!("{base}/chat/completions"))
                        .set("Content-Type", "application/json")
                        .set("X-Strata-Conversation", &format!("soak-{c}"))
                        .send_string(&body);
                    let reply = match r.map_err(anyhow::Error::from).and_then(|r| {
                        let v: Value = serde_json::from_str(&r.into_string()?)?;
                        Ok(v["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_string())
                    }) {
                        Ok(reply) => reply,
                        Err(e) => {
                            *failed.lock().unwrap() = Some(format!("conversation soak-{c}, turn {t}: {e}"));
                            stop.store(true, Ordering::Relaxed);
                            return;
                        }
                    };
                    answered.lock().unwrap().push((started.elapsed(), sent.elapsed().as_secs_f64() * 1000.0));
                    list.push(json!({"role": "assistant", "content": reply}));
                }
                finished.lock().unwrap().push((c, list));
            }
        }));
    }

    let end = started + Duration::from_secs_f64(soak.minutes * 60.0);
    let mut samples = Vec::new();
    let mut seen = 0;
    let mut table = String::from(
        "minute\trss_mb\tthreads\tfiles\tstore_mb\tcache_mb\tmemo_mb\tsqlite_mb\tconversations_open\tembeddings_pending\trequests\tp50_ms\tp95_ms\n",
    );
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(soak.sample.min(end.saturating_duration_since(Instant::now())));
        let window: Vec<f64> = {
            let a = answered.lock().unwrap();
            let w = a[seen..].iter().map(|(_, l)| *l).collect();
            seen = a.len();
            w
        };
        let s = sample(pid, &server, &db, cache.as_deref(), started.elapsed(), &window)?;
        let row = format!(
            "{:.1}\t{:.1}\t{}\t{}\t{:.1}\t{:.1}\t{:.1}\t{:.1}\t{}\t{}\t{}\t{:.1}\t{:.1}\n",
            s.at.as_secs_f64() / 60.0,
            s.rss_mb,
            s.threads,
            s.files,
            s.store_mb,
            s.cache_mb,
            s.memo_mb,
            s.sqlite_mb,
            s.conversations,
            s.pending,
            s.requests,
            s.p50,
            s.p95
        );
        print!("{row}");
        table.push_str(&row);
        samples.push(s);
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))?;
    }
    std::fs::write(work.join("samples.tsv"), &table)?;
    if let Some(e) = failed.lock().unwrap().take() {
        server.stop();
        bail!("soak: a request failed: {e}");
    }

    // Every finished conversation, as its client holds it, against what the server stored.
    let finished = std::mem::take(&mut *finished.lock().unwrap());
    let mut lost = 0;
    for (c, list) in &finished {
        lost += missing(&stored_turns(&server.base, &format!("soak-{c}"))?, list);
    }
    server.stop();
    let cross = upstream.cross.load(Ordering::Relaxed);
    let total = answered.lock().unwrap().len();
    println!(
        "soak: {total} requests in {:.1} minutes ({:.1}/s), {} conversations finished and checked: lost turns \
         {lost}, cross-conversation requests {cross}",
        started.elapsed().as_secs_f64() / 60.0,
        total as f64 / started.elapsed().as_secs_f64(),
        finished.len()
    );
    if let (Some(third), Some(last)) = (samples.get(samples.len() / 3), samples.last()) {
        let early: Vec<&Sample> = samples[..samples.len() / 3].iter().collect();
        let late: Vec<&Sample> = samples[samples.len() * 2 / 3..].iter().collect();
        let mean_p95 = |s: &[&Sample]| s.iter().map(|x| x.p95).sum::<f64>() / s.len().max(1) as f64;
        println!(
            "soak: from minute {:.0} to the end: RSS {:.1} -> {:.1} MB, threads {} -> {}, open files {} -> {}, store \
             {:.1} -> {:.1} MB, caches {:.1} -> {:.1} MB, token memo {:.1} -> {:.1} MB, SQLite heap {:.1} -> {:.1} \
             MB; p95 {:.1} ms in the first third, {:.1} ms in the last",
            third.at.as_secs_f64() / 60.0,
            third.rss_mb,
            last.rss_mb,
            third.threads,
            last.threads,
            third.files,
            last.files,
            third.store_mb,
            last.store_mb,
            third.cache_mb,
            last.cache_mb,
            third.memo_mb,
            last.memo_mb,
            third.sqlite_mb,
            last.sqlite_mb,
            mean_p95(&early),
            mean_p95(&late)
        );
    }
    println!("soak: samples in {}", work.join("samples.tsv").display());
    ensure!(lost == 0 && cross == 0, "soak: {lost} turns lost, {cross} requests crossed conversations");
    Ok(())
}

fn sample(pid: u32, server: &Server, db: &Path, cache: Option<&Path>, at: Duration, window: &[f64]) -> Result<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).context("the server is gone")?;
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let files = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
    let store: u64 = ["", "-wal", "-shm"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", db.display())).ok())
        .map(|m| m.len())
        .sum();
    let metrics = get_text(&format!("{}/metrics", server.root()))?;
    let gauge = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name).filter(|r| r.starts_with(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let mut sorted = window.to_vec();
    sorted.sort_by(f64::total_cmp);
    let pick = |p: f64| sorted.get(((sorted.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN);
    Ok(Sample {
        at,
        rss_mb: field("VmRSS:") / 1024.0,
        threads: field("Threads:") as usize,
        files,
        store_mb: store as f64 / 1e6,
        cache_mb: cache.map_or(0.0, |c| folder_bytes(c) as f64 / 1e6),
        memo_mb: gauge("strata_token_memo_bytes") / 1e6,
        sqlite_mb: gauge("strata_sqlite_heap_bytes") / 1e6,
        conversations: gauge("strata_conversations_open") as usize,
        pending: gauge("strata_embeddings_pending"),
        requests: window.len(),
        p50: pick(0.50),
        p95: pick(0.95),
    })
}

/// Bytes of every file under `dir`.
fn folder_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => folder_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
