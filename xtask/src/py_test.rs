//! `cargo xtask py-test`: builds the Python package's wheel with maturin, installs it into a
//! fresh venv, and runs its pytest suite, the example script and the overhead measurement
//! against real data, the CLI of the same checkout and the pinned weights.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{ensure, Context, Result};

/// Pinned, so that a CI run tomorrow installs what ran today.
const BUILD: &[&str] = &["maturin==1.16.0"];
// The peers (`strata.peers`) at the versions `strata[peers]` pins (crates/strata-py/pyproject.toml;
// test_peers.py checks the two lists agree with `strata.peers.VERSIONS`).
const TEST: &[&str] = &[
    "pytest==9.2.0",
    "pandas==3.1.1",
    "matplotlib==3.11.2",
    "langchain-core==1.8.1",
    "langchain-classic==1.0.8",
    "langchain==1.5.2",
    "llama-index-core==0.14.25",
    "llama-index-vector-stores-qdrant==0.10.4",
    "qdrant-client==1.20.0",
    "mem0ai==2.2.1",
];

pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let work = root.join("target/py");
    std::fs::create_dir_all(&work)?;
    // The tools that build the wheel live in a venv kept between runs.
    let builder = venv(&work.join("build-venv"), BUILD, false)?;
    let wheels = work.join("wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    println!("py-test: building the wheel (maturin build --release --strip)");
    let mut build = Command::new(&builder);
    crate::outside_cargo_run(&mut build)
        .args(["-m", "maturin", "build", "--release", "--strip", "--quiet", "--manifest-path"])
        .arg(root.join("crates/strata-py/Cargo.toml"))
        .arg("--out")
        .arg(&wheels)
        // The workspace's own target folder: the crates the tests already built are reused.
        .env("CARGO_TARGET_DIR", root.join("target"));
    ensure!(build.status()?.success(), "maturin build failed");
    let wheel = std::fs::read_dir(&wheels)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .context("maturin wrote no wheel")?;
    println!("py-test: {}", wheel.display());
    // A fresh venv each time: the wheel must install on its own, as a user would install it.
    let python = venv(&work.join("test-venv"), TEST, true)?;
    pip(&python, &[wheel.to_str().context("wheel path")?])?;
    let models = crate::models::models_dir();
    let data = std::env::var_os("STRATA_DATA").map_or_else(|| root.join("../shared/datasets"), PathBuf::from);
    let env = |cmd: &mut Command| {
        cmd.current_dir(root)
            .env("STRATA_ROOT", root)
            .env("STRATA_DATA", &data)
            .env("STRATA_MODELS", &models)
            .env("STRATA_BIN", root.join("target/release/strata"))
            // pytest and the scripts run against the installed wheel, never the source tree.
            .env_remove("PYTHONPATH");
    };
    let mut pytest = Command::new(&python);
    pytest.args(["-m", "pytest", "-q", "-p", "no:cacheprovider"]).arg(root.join("crates/strata-py/tests"));
    pytest.args(args);
    env(&mut pytest);
    ensure!(pytest.status()?.success(), "pytest failed");

    println!("py-test: examples/compare.py on one LoCoMo conversation");
    let plot = work.join("compare.png");
    let _ = std::fs::remove_file(&plot);
    let mut example = Command::new(&python);
    example.arg(root.join("examples/compare.py")).args(["--limit", "1", "--out"]).arg(&plot);
    env(&mut example);
    ensure!(example.status()?.success(), "examples/compare.py failed");
    ensure!(plot.metadata().is_ok_and(|m| m.len() > 10_000), "examples/compare.py wrote no plot at {}", plot.display());

    println!("py-test: examples/peers.py (LlamaIndex's vector memory beside tiered, one LoCoMo conversation)");
    let mut peers = Command::new(&python);
    peers.arg(root.join("examples/peers.py")).args(["--budgets", "1000"]);
    env(&mut peers);
    ensure!(peers.status()?.success(), "examples/peers.py failed");

    println!("py-test: the cost of a strategy written in Python");
    let mut overhead = Command::new(&python);
    overhead.arg(root.join("crates/strata-py/tests/overhead.py"));
    env(&mut overhead);
    ensure!(overhead.status()?.success(), "overhead.py failed");
    Ok(())
}

/// A venv at `dir` holding `packages`; made again when `fresh`, else reused if it is there.
fn venv(dir: &Path, packages: &[&str], fresh: bool) -> Result<PathBuf> {
    let python = dir.join("bin/python");
    if fresh {
        let _ = std::fs::remove_dir_all(dir);
    } else if python.exists() {
        return Ok(python);
    }
    let ok = Command::new("python3").args(["-m", "venv"]).arg(dir).status()?.success();
    ensure!(ok, "python3 -m venv {} failed", dir.display());
    pip(&python, packages)?;
    Ok(python)
}

fn pip(python: &Path, packages: &[&str]) -> Result<()> {
    let ok = Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .args(packages)
        .status()?
        .success();
    ensure!(ok, "pip install {} failed", packages.join(" "));
    Ok(())
}
