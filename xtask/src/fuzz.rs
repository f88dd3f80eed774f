//! `cargo xtask fuzz`: builds the fuzz targets of `fuzz/` with libFuzzer's coverage
//! instrumentation on the stable toolchain, and runs each for a fixed time from the committed
//! seeds (`fuzz/seeds/TARGET`) and what earlier runs found (`target/fuzz/corpus/TARGET`).
//! A crash fails the task, naming the input that caused it, which then becomes a plain
//! regression test beside the parser it broke.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};

/// Every target in `fuzz/Cargo.toml`, in the order they run.
const TARGETS: &[&str] = &["transcript", "chat_request", "sse", "config"];

/// The flags `cargo fuzz build --sanitizer none` passes: coverage counters and comparison
/// tracing for libFuzzer, on the stable compiler (a sanitizer would need nightly; Rust code is
/// memory-safe without one, and a panic is what these targets look for). Debug assertions and
/// overflow checks come from the fuzz workspace's release profile.
const COVERAGE: &[&str] = &[
    "-Cpasses=sancov-module",
    "-Cllvm-args=-sanitizer-coverage-level=4",
    "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",
    "-Cllvm-args=-sanitizer-coverage-pc-table",
    "-Cllvm-args=-sanitizer-coverage-trace-compares",
    "--cfg=fuzzing",
];

struct Options {
    seconds: u64,
    targets: Vec<String>,
}

fn options(args: &[String]) -> Result<Options> {
    let mut o = Options { seconds: 60, targets: Vec::new() };
    let mut args = args.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => {
                let v = args.next().context("--seconds needs a number")?;
                o.seconds = v.parse().with_context(|| format!("--seconds {v}: not a number"))?;
            }
            t if TARGETS.contains(&t) => o.targets.push(t.to_string()),
            other => bail!("fuzz: unknown argument `{other}` (targets: {})", TARGETS.join(", ")),
        }
    }
    if o.targets.is_empty() {
        o.targets = TARGETS.iter().map(|t| t.to_string()).collect();
    }
    Ok(o)
}

/// What one target's run did, from libFuzzer's final statistics.
struct Ran {
    target: String,
    seconds: f64,
    executions: u64,
    corpus: usize,
}

pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let o = options(args)?;
    let target_dir = root.join("target/fuzz");
    let mut rustflags: Vec<String> = COVERAGE.iter().map(|s| s.to_string()).collect();
    if cfg!(target_arch = "x86_64") {
        rustflags.push("-Ctarget-cpu=x86-64-v3".to_string());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let host = host_triple()?;
    let started = Instant::now();
    let status = crate::outside_cargo_run(&mut Command::new(cargo))
        .args(["build", "--release", "--locked", "--manifest-path"])
        .arg(root.join("fuzz/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        // With a target named, RUSTFLAGS reach the targets' code only, not the build scripts
        // and procedural macros, which would fail to link without libFuzzer.
        .args(["--target", host.as_str()])
        .args(o.targets.iter().flat_map(|t| ["--bin", t.as_str()]))
        // The flags join the ones a run of CI sets (`-D warnings`), and replace the repo's
        // `.cargo/config.toml`, whose CPU target is repeated above.
        .env("RUSTFLAGS", rustflags.join(" "))
        .status()?;
    ensure!(status.success(), "fuzz: building the targets failed");
    println!("fuzz: targets built in {:.0} s", started.elapsed().as_secs_f64());

    let mut ran = Vec::new();
    let mut crashes = Vec::new();
    for target in &o.targets {
        let corpus = target_dir.join("corpus").join(target);
        let artifacts = target_dir.join("artifacts").join(target);
        std::fs::create_dir_all(&corpus)?;
        std::fs::create_dir_all(&artifacts)?;
        let seeds = root.join("fuzz/seeds").join(target);
        ensure!(seeds.is_dir(), "{}: no seed corpus", seeds.display());
        let started = Instant::now();
        let output = Command::new(target_dir.join(&host).join("release").join(target))
            .arg(format!("-max_total_time={}", o.seconds))
            .arg(format!("-artifact_prefix={}/", artifacts.display()))
            .args(["-print_final_stats=1", "-max_len=65536", "-rss_limit_mb=4096", "-timeout=10"])
            .arg(&corpus)
            .arg(&seeds)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .with_context(|| format!("running fuzz target {target}"))?;
        let log = String::from_utf8_lossy(&output.stderr);
        let executions = stat(&log, "stat::number_of_executed_units:").unwrap_or(0);
        let corpus_files = std::fs::read_dir(&corpus)?.count();
        let r =
            Ran { target: target.clone(), seconds: started.elapsed().as_secs_f64(), executions, corpus: corpus_files };
        println!(
            "fuzz {}: {:.0} s, {} executions ({:.0}/s), corpus {} inputs",
            r.target,
            r.seconds,
            r.executions,
            r.executions as f64 / r.seconds.max(1e-9),
            r.corpus
        );
        if !output.status.success() {
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            let found: Vec<String> =
                std::fs::read_dir(&artifacts)?.filter_map(|e| e.ok()).map(|e| e.path().display().to_string()).collect();
            crashes.push(format!("{target}: {}", found.join(", ")));
        }
        ran.push(r);
    }
    if !crashes.is_empty() {
        bail!(
            "fuzz: {} target(s) crashed; each input is a regression test to add:\n  {}",
            crashes.len(),
            crashes.join("\n  ")
        );
    }
    let total: u64 = ran.iter().map(|r| r.executions).sum();
    println!("fuzz: {} targets, {total} executions, no crash", ran.len());
    Ok(())
}

/// The triple rustc builds for by default.
fn host_triple() -> Result<String> {
    let out = Command::new("rustc").arg("-vV").output().context("running rustc -vV")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_string)
        .context("rustc -vV named no host")
}

/// A number from libFuzzer's `-print_final_stats` lines.
fn stat(log: &str, key: &str) -> Option<u64> {
    log.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_has_seeds_and_a_binary() {
        let root = crate::root();
        let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).unwrap();
        let doc: toml::Table = manifest.parse().unwrap();
        let bins: Vec<&str> = doc["bin"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap()).collect();
        assert_eq!(bins, TARGETS, "fuzz/Cargo.toml's binaries and xtask's TARGETS differ");
        for t in TARGETS {
            let seeds = root.join("fuzz/seeds").join(t);
            assert!(std::fs::read_dir(&seeds).unwrap().count() > 0, "{} is empty", seeds.display());
        }
    }

    #[test]
    fn final_stats_are_read() {
        let log = "#123 DONE cov: 10\nstat::number_of_executed_units: 4567\nstat::peak_rss_mb: 40\n";
        assert_eq!(stat(log, "stat::number_of_executed_units:"), Some(4567));
        assert_eq!(stat(log, "stat::missing:"), None);
    }
}
