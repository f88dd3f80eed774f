//! Project automation, run as `cargo xtask <task>`: tidy checks now; fetching data and models
//! and running the eval as they arrive.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod datasets;
mod fuzz;
mod models;
mod py_test;
mod serve_e2e;
mod serve_load;
mod soak;
mod tidy;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

const USAGE: &str = "usage: cargo xtask <task>

tasks:
  tidy                     check project rules (also run by cargo test)
  eval [ARGS]              run `strata eval` in release mode (ARGS as `strata eval --help`)
  gen-probes [--seed N] [--paraphrase]
                           write the seeded probe sets to datasets/probes/: probes.jsonl (the
                           committed set), probes-dev.jsonl and probes-heldout.jsonl; with
                           --paraphrase also probes-paraphrased.jsonl and
                           probes-heldout-paraphrased.jsonl, the dev and held-out sets'
                           evidence turns rewritten by Qwen2.5-Coder 1.5B (fetches it; ~40 min)
  fetch-datasets [--check] download the public datasets into ../shared/datasets (or
                           STRATA_DATA) and verify every sha256 in MANIFEST.tsv
  fetch-models [NAME...] [--all] [--list]
                           fetch pinned model weights into models/ (or STRATA_MODELS): with no
                           NAME what the defaults need (minilm, 88 MB); by name minilm, nomic,
                           smollm2, qwen, qwen1.5b; --all every one (about 2 GB); --list the
                           table and what is in place (docs/models.md)
  long-transcript --turns N --out FILE
                           write one conversation of N turns: LoCoMo's turns cycled, roles
                           alternating, three minutes apart (for `strata replay` at scale)
  serve-load [--conversations N] [--turns N] [--budget N] [--embedder NAME] [--reranker NAME]
             [--bin PATH]
                           50 x 40 conversations at once through `strata serve` (target/release/strata)
                           against an upstream that answers at once: latency against the same
                           run sent straight to the upstream; then killed (SIGKILL) halfway and
                           restarted: no acknowledged turn lost, none in another conversation
  soak [--minutes N] [--clients N] [--rate R] [--turns N] [--budget N] [--embedder NAME]
       [--sample SECONDS] [--bin PATH]
                           strata serve under steady load (30 minutes, 16 clients, 40 requests/s
                           in all, a new conversation every 40 turns) against an instant upstream,
                           sampling its RSS, threads, open files, store and model caches and the
                           latency every 30 s (target/soak/samples.tsv); nothing may be lost
  serve-e2e                the openai Python package (a venv under target/) against `strata serve`
                           in front of llama.cpp's server (llama-cpp-python) and with
                           --local-model smollm2 (fetches the models)
  fuzz [TARGET...] [--seconds N]
                           build the fuzz targets of fuzz/ (libFuzzer, stable toolchain) and run
                           each for N seconds (60) from its seeds in fuzz/seeds: transcript,
                           chat_request, sse, config; a crash fails, naming the input
  py-test [PYTEST ARGS]    build the Python package's wheel (maturin), install it into a fresh
                           venv under target/py, run its pytest suite, examples/compare.py and
                           the overhead measurement (needs the release build and the models)";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("tidy") => {
            let problems = tidy::check(&root())?;
            if problems.is_empty() {
                println!("tidy: ok");
                Ok(())
            } else {
                for p in &problems {
                    eprintln!("tidy: {p}");
                }
                bail!("{} tidy problems", problems.len())
            }
        }
        Some("eval") => {
            // The default run includes the tiered memory, which embeds with MiniLM: make sure
            // the pinned weights are there (a no-op once they are).
            models::fetch(&["minilm".to_string()])?;
            cargo_run_release(&[&["eval"], &rest.iter().map(String::as_str).collect::<Vec<_>>()[..]].concat())
        }
        Some("gen-probes") => gen_probes(rest),
        Some("fetch-datasets") => datasets::fetch(&root(), rest.iter().any(|a| a == "--check")),
        Some("fetch-models") => models::command(rest),
        Some("long-transcript") => long_transcript(rest),
        Some("serve-load") => serve_load::run(&root(), rest),
        Some("soak") => soak::run(&root(), rest),
        Some("serve-e2e") => serve_e2e::run(&root(), rest),
        Some("py-test") => py_test::run(&root(), rest),
        Some("fuzz") => fuzz::run(&root(), rest),
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    }
}

/// `command` without the variables `cargo run` set for xtask itself (`CARGO_PKG_NAME=xtask`,
/// `CARGO_MANIFEST_DIR`, ...). A cargo started from xtask would otherwise see them: build
/// scripts that watch them (ring's, through rustls, under the model loaders and the server)
/// would run again and everything above them would be compiled a second time, as if xtask's
/// build and the user's own were different builds.
pub(crate) fn outside_cargo_run(command: &mut std::process::Command) -> &mut std::process::Command {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let set_by_cargo_run = key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_MANIFEST_")
            || ["CARGO_CRATE_NAME", "CARGO_BIN_NAME", "CARGO_PRIMARY_PACKAGE"].contains(&key);
        if set_by_cargo_run {
            command.env_remove(key);
        }
    }
    command
}

/// Runs the `strata` binary, built in release mode, from the repository root.
fn cargo_run_release(args: &[&str]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = outside_cargo_run(&mut std::process::Command::new(cargo))
        // Not quiet: when the binary must be built first, cargo says what it compiles.
        .args(["run", "--release", "-p", "strata-cli", "--"])
        .args(args)
        .current_dir(root())
        .status()?;
    if !status.success() {
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}

/// One long conversation from LoCoMo's turns, for measuring the memory at a length no
/// benchmark has: the texts are real chat, only their order and times are made up.
fn long_transcript(args: &[String]) -> Result<()> {
    let (mut turns, mut out) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--turns" => turns = Some(it.next().context("--turns needs a number")?.parse::<usize>()?),
            "--out" => out = Some(PathBuf::from(it.next().context("--out needs a file")?)),
            other => bail!("long-transcript: unknown argument `{other}`"),
        }
    }
    let (Some(n), Some(out)) = (turns, out) else { bail!("long-transcript needs --turns N and --out FILE") };
    let path = datasets::data_dir(&root()).join("locomo/locomo10.json");
    let loaded = strata_transcript::load_path(&path, Some(strata_transcript::InputFormat::Locomo))?;
    let source: Vec<&str> = loaded.conversations.iter().flat_map(|c| &c.turns).map(|t| t.content.as_str()).collect();
    anyhow::ensure!(!source.is_empty(), "{}: no turns", path.display());
    // 2023-01-01T00:00:00Z, then a turn every three minutes.
    const START: i64 = 1_672_531_200;
    let turns = (0..n)
        .map(|i| {
            let role = if i % 2 == 0 { strata_core::Role::User } else { strata_core::Role::Assistant };
            let mut t = strata_core::Turn::new(format!("t{i}"), role, source[i % source.len()]);
            t.timestamp = Some(strata_core::Timestamp(START + 180 * i as i64));
            t
        })
        .collect();
    let conversation = strata_core::Conversation {
        id: format!("locomo-cycled-{n}"),
        participants: Vec::new(),
        turns,
        probes: Vec::new(),
        boundaries: Vec::new(),
        references: Vec::new(),
    };
    std::fs::write(&out, strata_transcript::to_json(&conversation)).with_context(|| out.display().to_string())?;
    println!("{}: {n} turns", out.display());
    Ok(())
}

fn gen_probes(args: &[String]) -> Result<()> {
    let mut seed = 7u64;
    let mut paraphrase = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--paraphrase" => paraphrase = true,
            "--seed" => seed = it.next().context("--seed needs a number")?.parse().context("--seed needs a number")?,
            other => bail!("gen-probes: unknown argument `{other}`"),
        }
    }
    // The committed set (the `seed` family), the development families, the held-out family.
    let sets = [
        (strata_probes::PROBES_FILE, strata_probes::generate(seed, &strata_probes::ProbeSetConfig::default())),
        (strata_probes::PROBES_DEV_FILE, strata_probes::dev_set(seed)),
        (strata_probes::PROBES_HELDOUT_FILE, strata_probes::heldout_set(seed)),
    ];
    for (file, conversations) in sets {
        let out = root().join(file);
        let mut text = String::new();
        for c in &conversations {
            text.push_str(&strata_transcript::to_json(c));
            text.push('\n');
        }
        if let Some(dir) = out.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&out, text)?;
        let probes: usize = conversations.iter().map(|c| c.probes.len()).sum();
        let turns: usize = conversations.iter().map(|c| c.turns.len()).sum();
        println!("{file}: {} conversations, {turns} turns, {probes} probes (seed {seed})", conversations.len());
    }
    if paraphrase {
        // Both suites reworded by a model no template of ours wrote (Qwen2.5-Coder 1.5B:
        // 0.5B mostly copies): a development set, which a phrasing rule tuned on the
        // templates fails, and a held-out one. Greedy decoding, so the files are the same
        // on every run of one machine; they are committed, since another CPU's arithmetic
        // may pick another token.
        models::fetch(&["qwen1.5b".to_string()])?;
        for (from, to) in [
            (strata_probes::PROBES_DEV_FILE, strata_probes::PROBES_PARAPHRASED_FILE),
            (strata_probes::PROBES_HELDOUT_FILE, strata_probes::PROBES_HELDOUT_PARAPHRASED_FILE),
        ] {
            cargo_run_release(&["paraphrase", from, "--model", "qwen1.5b", "--out", to])?;
        }
    }
    Ok(())
}

/// The workspace root: xtask lives one level below it.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask is inside the workspace").to_path_buf()
}
