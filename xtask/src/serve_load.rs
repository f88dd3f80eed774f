//! `cargo xtask serve-load`: many conversations at once through `strata serve` against an
//! upstream that answers at once, so that what is measured is the server's own cost; then the
//! same with the server killed (SIGKILL) mid-run and restarted, to check that every
//! acknowledged turn is in the store and no turn reached another conversation.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

#[derive(Clone)]
pub(crate) struct Options {
    /// The models, seen through a folder of links with an empty embedding cache, so that
    /// every text is embedded as a new deployment would.
    pub(crate) models: Option<PathBuf>,
    pub(crate) conversations: usize,
    pub(crate) turns: usize,
    pub(crate) budget: usize,
    pub(crate) embedder: String,
    /// The cross-encoder the server reranks recall with (`--reranker`, with its default
    /// time limit per context), or `none`.
    pub(crate) reranker: String,
    pub(crate) bin: PathBuf,
}

/// The upstream's reply: about 60 tokens of text after the tag of the message it answers.
pub(crate) const REPLY: &str = "Understood. I have noted the details above and will keep them in mind for the rest of \
    our conversation; tell me when you want a summary of what was decided, or ask about any earlier point \
    and I will look it up before answering.";

impl Options {
    /// The load run's defaults: 50 conversations of 40 turns at budget 8000, no models, the
    /// release build's binary.
    pub(crate) fn new(root: &Path) -> Options {
        Options {
            models: None,
            conversations: 50,
            turns: 40,
            budget: 8000,
            embedder: "none".to_string(),
            reranker: "none".to_string(),
            bin: root.join("target/release/strata"),
        }
    }
}

pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let mut o = Options::new(root);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--conversations" => o.conversations = value()?.parse()?,
            "--turns" => o.turns = value()?.parse()?,
            "--budget" => o.budget = value()?.parse()?,
            "--embedder" => o.embedder = value()?.clone(),
            "--reranker" => o.reranker = value()?.clone(),
            "--bin" => o.bin = PathBuf::from(value()?),
            other => bail!("serve-load: unknown argument `{other}`"),
        }
    }
    ensure!(o.bin.exists(), "{}: no strata binary (cargo build --release -p strata-cli)", o.bin.display());
    let texts = messages(root)?;
    let work = root.join("target/serve-load");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    if o.embedder != "none" || o.reranker != "none" {
        o.models = Some(cold_models(&crate::models::models_dir(), &work.join("models"))?);
    }

    let upstream = Upstream::start()?;
    println!(
        "serve-load: {} conversations x {} turns at once, budget {}, embedder {}, reranker {}, upstream answering at once",
        o.conversations, o.turns, o.budget, o.embedder, o.reranker
    );
    let direct = drive(&format!("http://{}/v1", upstream.addr), &o, &texts, None)?;
    report("direct to the upstream", &direct);

    // Through the server, undisturbed: the overhead.
    let mut server = Server::start(&o, &work.join("plain.db"), &upstream.addr, &work.join("plain.log"))?;
    let plain = drive(&server.base, &o, &texts, None)?;
    report("through strata serve", &plain);
    let half = o.turns / 2;
    for (what, range) in [("first", 0..1), ("2nd to half", 1..half), ("second half", half..o.turns)] {
        let (p50, p95) = plain.stage(o.turns, range.clone());
        let (d50, d95) = direct.stage(o.turns, range);
        println!(
            "  {what} requests of each conversation: p50 {p50:.1} ms, p95 {p95:.1} ms (direct {d50:.1} / {d95:.1})"
        );
    }
    println!(
        "  added latency: p50 {:.1} ms, p95 {:.1} ms; throughput {:.2}x the direct run's",
        plain.percentile(0.50) - direct.percentile(0.50),
        plain.percentile(0.95) - direct.percentile(0.95),
        plain.rate() / direct.rate()
    );
    let metrics = get_text(&format!("{}/metrics", server.root()))?;
    for line in metrics.lines().filter(|l| {
        l.starts_with("strata_token")
            || l.starts_with("strata_requests_total")
            || l.starts_with("strata_rerank")
            || l.starts_with("strata_embeddings_pending")
    }) {
        println!("  {line}");
    }
    let lost = verify(&server.base, &o, &plain.lists)?;
    server.stop();
    if let Some(models) = o.models.as_deref().filter(|_| o.embedder != "none") {
        let (questions, all) = model_alone(&o, &texts, models)?;
        println!(
            "  the embedder alone on the same texts: {all:.1} requests/s (the questions over the budget and every \
             request's two stored turns), {questions:.1} requests/s (the questions alone); the server did {:.2} and \
             {:.2} of those",
            plain.rate() / all,
            plain.rate() / questions
        );
    }

    // One conversation alone: the added latency without queueing behind the others.
    let alone = Options { conversations: 1, ..o.clone() };
    let direct_alone = drive(&format!("http://{}/v1", upstream.addr), &alone, &texts, None)?;
    let mut server = Server::start(&alone, &work.join("alone.db"), &upstream.addr, &work.join("alone.log"))?;
    let through_alone = drive(&server.base, &alone, &texts, None)?;
    server.stop();
    println!(
        "one conversation alone: latency p50 {:.1} ms, p95 {:.1} ms through strata serve against {:.2} / {:.2} ms direct",
        through_alone.percentile(0.50),
        through_alone.percentile(0.95),
        direct_alone.percentile(0.50),
        direct_alone.percentile(0.95)
    );

    // Killed when half the requests are acknowledged, restarted on the same store.
    let db = work.join("killed.db");
    let server = Arc::new(Mutex::new(Server::start(&o, &db, &upstream.addr, &work.join("killed.log"))?));
    let base = server.lock().unwrap().base.clone();
    let half = o.conversations * o.turns / 2;
    let killed =
        drive(&base, &o, &texts, Some((half, server.clone(), db.clone(), upstream.addr.clone(), work.clone())))?;
    report("killed and restarted", &killed);
    let lost_killed = verify(&base, &o, &killed.lists)?;
    server.lock().unwrap().stop();
    let cross = upstream.cross.load(Ordering::Relaxed);
    println!(
        "  SIGKILL after {half} acknowledged requests; back in {:.0} ms; {} requests retried; lost turns {}, \
         cross-conversation requests {cross}",
        killed.downtime.as_secs_f64() * 1000.0,
        killed.retries,
        lost + lost_killed
    );
    ensure!(
        lost + lost_killed == 0 && cross == 0,
        "serve-load: {} turns lost, {cross} requests crossed conversations",
        lost + lost_killed
    );
    Ok(())
}

/// Requests per second the embedder alone does on what the server embeds for the run's
/// requests: the question of each request whose history is over the budget (a history that
/// fits is sent whole, with no recall), as a query, and each request's two stored turns (the
/// message and the upstream's reply, whole and by sentences, as the store embeds them).
/// Questions go in batches of one per conversation (as the server gathers those that arrive
/// together) and turns four at a time (its queue's batch): the model's best case, which the
/// server's rate is measured against. Timed on every tenth conversation of the run (every one,
/// for a run of under 200 requests), to keep the bench short; returns the rate with the
/// questions alone, and with the questions and the stored turns.
fn model_alone(o: &Options, texts: &[String], models: &Path) -> Result<(f64, f64)> {
    use strata_core::{Role, Timestamp, TokenCounter as _, Turn};
    let embedder = strata_models::embedder(&o.embedder, models)?;
    let counter = strata_tokens::Tiktoken::o200k();
    let now = Timestamp(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs() as i64);
    let step = if o.conversations * o.turns < 200 { 1 } else { 10 };
    let (mut questions, mut stored, mut requests) = (Vec::new(), Vec::new(), 0usize);
    for c in 0..o.conversations {
        let system = format!("{} You are a helpful assistant.", tag(c, "system"));
        let mut history = counter.count_message(Role::System, None, &system, None, &[]);
        for t in 0..o.turns {
            let user = format!("{} {}", tag(c, &format!("t{t}")), texts[(c * 7 + t) % texts.len()]);
            let reply = format!("[c{c}:t{t} reply] {REPLY}");
            history += counter.count_message(Role::User, None, &user, None, &[]);
            let asks = history > o.budget;
            history += counter.count_message(Role::Assistant, None, &reply, None, &[]);
            // Whole conversations, so that the sample has the run's share of requests over
            // the budget (every tenth request would pick the same turns of each).
            if !c.is_multiple_of(step) {
                continue;
            }
            requests += 1;
            for (id, role, text) in [("u", Role::User, &user), ("a", Role::Assistant, &reply)] {
                stored.push(Turn { timestamp: Some(now), ..Turn::new(format!("{id}{t}"), role, text.as_str()) });
            }
            if asks {
                // As recall embeds it: the message and its content words, in one call.
                questions.push(strata::question_texts(&user, &Default::default()));
            }
        }
    }
    // One warm-up call, as the server's first request pays for the model's first run.
    embedder.embed(&["warm up"])?;
    let started = Instant::now();
    for batch in questions.chunks(o.conversations.max(1)) {
        let refs: Vec<&str> = batch.iter().flatten().map(String::as_str).collect();
        embedder.embed_query(&refs)?;
    }
    let questions_only = started.elapsed().as_secs_f64();
    for batch in stored.chunks(4) {
        let texts: Vec<String> = batch.iter().flat_map(strata_store::embedded_texts).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        embedder.embed(&refs)?;
    }
    let n = requests as f64;
    Ok((n / questions_only, n / started.elapsed().as_secs_f64()))
}

/// User messages of about 200 tokens: LoCoMo's turns (real chat), eight at a time.
pub(crate) fn messages(root: &Path) -> Result<Vec<String>> {
    let path = crate::datasets::data_dir(root).join("locomo/locomo10.json");
    let loaded = strata_transcript::load_path(&path, Some(strata_transcript::InputFormat::Locomo))?;
    let lines: Vec<String> = loaded
        .conversations
        .iter()
        .flat_map(|c| &c.turns)
        .map(|t| format!("{}: {}", t.speaker.as_deref().unwrap_or("someone"), t.content))
        .collect();
    ensure!(lines.len() >= 8, "{}: too few turns", path.display());
    Ok(lines.chunks(8).map(|c| c.join("\n")).collect())
}

/// The tag every message of conversation `c` carries, so that the upstream and the check can
/// tell whose turn a text is.
pub(crate) fn tag(c: usize, t: &str) -> String {
    format!("[c{c}:{t}]")
}

/// The conversation numbers of every tag in `text`.
fn tags(text: &str) -> BTreeSet<usize> {
    text.match_indices("[c")
        .filter_map(|(i, _)| {
            let rest = &text[i + 2..];
            let end = rest.find(':')?;
            rest[..end].parse().ok()
        })
        .collect()
}

pub(crate) struct Upstream {
    pub(crate) addr: String,
    pub(crate) cross: Arc<AtomicUsize>,
}

impl Upstream {
    /// A minimal HTTP/1.1 server on loopback: every chat request is answered at once with
    /// [`REPLY`] after the newest message's tag; a request holding two conversations' tags
    /// is counted.
    pub(crate) fn start() -> Result<Upstream> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let cross = Arc::new(AtomicUsize::new(0));
        let counted = cross.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let cross = counted.clone();
                std::thread::spawn(move || {
                    let _ = serve_connection(stream, &cross);
                });
            }
        });
        Ok(Upstream { addr, cross })
    }
}

fn serve_connection(stream: TcpStream, cross: &AtomicUsize) -> Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header)?;
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse()?;
                }
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        let text = String::from_utf8_lossy(&body);
        if tags(&text).len() > 1 {
            cross.fetch_add(1, Ordering::Relaxed);
        }
        // The newest message's tag: the last one in the body.
        let newest = text.rfind("[c").and_then(|i| text[i..].find(']').map(|j| text[i + 1..i + j].to_string()));
        let reply = format!("[{} reply] {REPLY}", newest.unwrap_or_default());
        let answer = json!({"id": "load", "object": "chat.completion", "created": 0, "model": "instant",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}]})
        .to_string();
        write!(
            writer,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        )?;
        writer.flush()?;
    }
}

pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) base: String,
    args: Vec<String>,
    bin: PathBuf,
    log: PathBuf,
}

impl Server {
    pub(crate) fn start(o: &Options, db: &Path, upstream: &str, log: &Path) -> Result<Server> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let args: Vec<String> = [
            "serve",
            "--upstream",
            &format!("http://{upstream}/v1"),
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--db",
            &db.display().to_string(),
            "--budget",
            &o.budget.to_string(),
            "--embedder",
            &o.embedder,
            "--reranker",
            &o.reranker,
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(o.models.iter().flat_map(|m| ["--models-dir".to_string(), m.display().to_string()]))
        .collect();
        let mut s = Server {
            child: spawn(&o.bin, &args, log)?,
            base: format!("http://127.0.0.1:{port}/v1"),
            args,
            bin: o.bin.clone(),
            log: log.to_path_buf(),
        };
        s.wait_ready()?;
        Ok(s)
    }

    pub(crate) fn root(&self) -> &str {
        self.base.trim_end_matches("/v1")
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                bail!("strata serve exited with {status}; see {}", self.log.display());
            }
            if get_text(&format!("{}/healthz", self.root())).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("strata serve did not answer /healthz within 60 s; see {}", self.log.display())
    }

    /// SIGKILL, then the same command again on the same store.
    fn kill_and_restart(&mut self) -> Result<Duration> {
        self.child.kill()?;
        self.child.wait()?;
        let started = Instant::now();
        self.child = spawn(&self.bin, &self.args, &self.log)?;
        self.wait_ready()?;
        Ok(started.elapsed())
    }

    pub(crate) fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A folder linking to every model of `models` but not its cache.
pub(crate) fn cold_models(models: &Path, at: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(at)?;
    // Links to absolute paths: a relative `STRATA_MODELS` would otherwise be read from `at`.
    let models = &std::path::absolute(models)?;
    for entry in std::fs::read_dir(models).with_context(|| models.display().to_string())? {
        let entry = entry?;
        if entry.file_name() != ".cache" {
            std::os::unix::fs::symlink(entry.path(), at.join(entry.file_name()))?;
        }
    }
    Ok(at.to_path_buf())
}

fn spawn(bin: &Path, args: &[String], log: &Path) -> Result<Child> {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
    Ok(Command::new(bin).args(args).stdout(Stdio::null()).stderr(log).spawn()?)
}

pub(crate) fn get_text(url: &str) -> Result<String> {
    Ok(ureq::get(url).timeout(Duration::from_secs(5)).call()?.into_string()?)
}

/// What a run gave: the latency of every answered request, each conversation's message list
/// as the client holds it at the end, retries and time.
struct Run {
    latencies_ms: Vec<f64>,
    lists: Vec<Vec<Value>>,
    wall: Duration,
    retries: usize,
    downtime: Duration,
}

impl Run {
    fn percentile(&self, p: f64) -> f64 {
        let mut v = self.latencies_ms.clone();
        v.sort_by(f64::total_cmp);
        v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN)
    }

    fn rate(&self) -> f64 {
        self.latencies_ms.len() as f64 / self.wall.as_secs_f64()
    }

    /// p50 and p95 of the requests whose turn index `t` (each conversation's requests are in
    /// order, `turns` each) is in `range`: where in a conversation's life the time goes.
    fn stage(&self, turns: usize, range: std::ops::Range<usize>) -> (f64, f64) {
        let latencies_ms = self
            .latencies_ms
            .iter()
            .enumerate()
            .filter(|(i, _)| range.contains(&(i % turns.max(1))))
            .map(|(_, l)| *l)
            .collect();
        let part = Run { latencies_ms, lists: Vec::new(), wall: self.wall, retries: 0, downtime: Duration::ZERO };
        (part.percentile(0.50), part.percentile(0.95))
    }
}

fn report(what: &str, run: &Run) {
    println!(
        "{what}: {} requests in {:.1} s ({:.0} requests/s); latency p50 {:.1} ms, p95 {:.1} ms",
        run.latencies_ms.len(),
        run.wall.as_secs_f64(),
        run.rate(),
        run.percentile(0.50),
        run.percentile(0.95)
    );
}

type Kill = (usize, Arc<Mutex<Server>>, PathBuf, String, PathBuf);

/// Every conversation on its own thread, each sending its whole list every turn as a chat
/// client does, and retrying a request that found no server (as a client would after a
/// crash) until it is answered.
fn drive(base: &str, o: &Options, texts: &[String], kill: Option<Kill>) -> Result<Run> {
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut handles = Vec::new();
    for c in 0..o.conversations {
        let (base, texts, acknowledged, failed) =
            (base.to_string(), texts.to_vec(), acknowledged.clone(), failed.clone());
        let turns = o.turns;
        handles.push(std::thread::spawn(move || -> Result<(Vec<f64>, Vec<Value>, usize)> {
            let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(60)).build();
            let mut list = vec![
                json!({"role": "system", "content": format!("{} You are a helpful assistant.", tag(c, "system"))}),
            ];
            let (mut latencies, mut retries) = (Vec::new(), 0);
            for t in 0..turns {
                let text = &texts[(c * 7 + t) % texts.len()];
                list.push(json!({"role": "user", "content": format!("{} {text}", tag(c, &format!("t{t}")))}));
                let body = json!({"model": "instant", "messages": list}).to_string();
                let deadline = Instant::now() + Duration::from_secs(120);
                let reply = loop {
                    let sent = Instant::now();
                    let r = agent
                        .post(&format!("{base}/chat/completions"))
                        .set("Content-Type", "application/json")
                        .set("X-Strata-Conversation", &format!("load-{c}"))
                        .send_string(&body);
                    match r {
                        Ok(r) => {
                            latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
                            let v: Value = serde_json::from_str(&r.into_string()?)?;
                            break v["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_string();
                        }
                        Err(ureq::Error::Transport(_))
                            if Instant::now() < deadline && !failed.load(Ordering::Relaxed) =>
                        {
                            retries += 1;
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            bail!("conversation load-{c}, turn {t}: {e}");
                        }
                    }
                };
                list.push(json!({"role": "assistant", "content": reply}));
                acknowledged.fetch_add(1, Ordering::Relaxed);
            }
            Ok((latencies, list, retries))
        }));
    }
    let mut downtime = Duration::ZERO;
    if let Some((at, server, _, _, _)) = &kill {
        while acknowledged.load(Ordering::Relaxed) < *at && !failed.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
        }
        downtime = server.lock().unwrap().kill_and_restart()?;
    }
    let mut run = Run { latencies_ms: Vec::new(), lists: Vec::new(), wall: Duration::ZERO, retries: 0, downtime };
    for h in handles {
        let (latencies, list, retries) = h.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
        run.latencies_ms.extend(latencies);
        run.lists.push(list);
        run.retries += retries;
    }
    run.wall = started.elapsed() - downtime;
    Ok(run)
}

/// Each conversation's stored turns against the client's list: every message and reply the
/// client holds must be stored, in order, and carry only its own conversation's tag. Returns
/// the turns missing.
fn verify(base: &str, o: &Options, lists: &[Vec<Value>]) -> Result<usize> {
    let mut lost = 0;
    for (c, list) in lists.iter().enumerate() {
        let stored = stored_turns(base, &format!("load-{c}"))?;
        ensure!(
            stored.len() <= list.len() && list.len() == 1 + 2 * o.turns,
            "conversation load-{c}: {} turns stored, the client holds {}",
            stored.len(),
            list.len()
        );
        lost += missing(&stored, list);
        for s in &stored {
            let t = tags(s["content"].as_str().unwrap_or_default());
            ensure!(t.len() == 1 && t.contains(&c), "conversation load-{c}: a stored turn carries tags {t:?}");
        }
    }
    Ok(lost)
}

/// A conversation's stored turns, as the server lists them.
pub(crate) fn stored_turns(base: &str, conversation: &str) -> Result<Vec<Value>> {
    let mut v: Value = serde_json::from_str(&get_text(&format!("{base}/conversations/{conversation}/turns"))?)?;
    match v["turns"].take() {
        Value::Array(turns) => Ok(turns),
        _ => bail!("conversation {conversation}: no turns"),
    }
}

/// The messages of the client's `list` not stored at their place (same role and content).
pub(crate) fn missing(stored: &[Value], list: &[Value]) -> usize {
    list.iter()
        .enumerate()
        .filter(|(i, m)| !stored.get(*i).is_some_and(|s| s["role"] == m["role"] && s["content"] == m["content"]))
        .count()
}
