//! Generation throughput: candle (strata-candle's `GgufGenerator`) against llama.cpp (through
//! llama-cpp-python) on the same GGUF file, the same prompt token ids (about 1,000), the same
//! thread count, greedy decoding, in the same run. Needs the GGUF models (`cargo xtask
//! fetch-models`) and python3 with pip: the bench installs llama-cpp-python itself (a source
//! build of about 10 minutes the first time, kept under `target/`; see
//! `strata_benches::llama_cpp_python`).
//!
//! Prints prompt and generated tokens per second for both, and the ratios. `STRATA_BENCH_PROMPT`
//! sets the prompt's length in tokens (default 1,000): attention's share of a generated token
//! grows with it. `STRATA_BENCH_QUICK` times our engine alone; `STRATA_BENCH_MODELS=1.5b` picks models; `STRATA_BENCH_STOCK=0` leaves out
//! candle-transformers (the slowest, about 10 minutes of a 3,000-token run).

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Command;

use strata_candle::{GgufGenerator, Implementation};
use strata_models::table::Model;
use strata_models::Kind;

const RUNS: usize = 3;
const GENERATE: usize = 64;

/// A summary prompt over a conversation from the committed probe set, cut to about `tokens`
/// tokens of this model's tokenizer.
fn prompt(g: &GgufGenerator, root: &Path, tokens: usize) -> Vec<u32> {
    let text = std::fs::read_to_string(root.join("datasets/probes/probes.jsonl")).expect("the probe set");
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let mut transcript = String::new();
    for t in first["turns"].as_array().unwrap() {
        transcript.push_str(&format!(
            "{}: {}\n",
            t["speaker"].as_str().unwrap_or("user"),
            t["content"].as_str().unwrap()
        ));
        let rendered = GgufGenerator::render(&[
            strata_core::ChatMessage { role: strata_core::Role::System, content: "You write summaries.".into() },
            strata_core::ChatMessage {
                role: strata_core::Role::User,
                content: format!("<transcript>\n{transcript}</transcript>\nSummarize the transcript."),
            },
        ]);
        let ids = g.encode(&rendered).unwrap();
        if ids.len() >= tokens {
            return ids;
        }
    }
    panic!("the conversation is shorter than {tokens} tokens");
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let models = strata_models::dir(None);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let quick = std::env::var_os("STRATA_BENCH_QUICK").is_some();
    let tokens = match std::env::var("STRATA_BENCH_PROMPT") {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("STRATA_BENCH_PROMPT={v} is not a number of tokens")),
        Err(_) => 1000,
    };
    let llama = (!quick).then(strata_benches::llama_cpp_python);
    println!("| model | engine | prompt tokens/s | generated tokens/s | ratio prompt | ratio generated |");
    println!("| --- | --- | ---: | ---: | ---: | ---: |");
    // STRATA_BENCH_MODELS picks models by folder name (comma-separated substrings).
    let pick = std::env::var("STRATA_BENCH_MODELS").unwrap_or_default();
    for alias in strata_models::aliases(Kind::Generator) {
        let model = strata_models::table::find(Kind::Generator, alias).expect("a generator of the table");
        if pick.is_empty() || pick.split(',').any(|p| model.name.contains(p)) {
            bench(model, &models, &root, threads, llama.as_deref(), tokens);
        }
    }
}

/// Medians of prompt and generation tokens per second over `RUNS` timed runs, and the ids
/// generated.
fn time_candle(g: &GgufGenerator, ids: &[u32]) -> (f64, f64, Vec<u32>) {
    let (mut p, mut t) = (Vec::new(), Vec::new());
    let mut last = Vec::new();
    for run in 0..=RUNS {
        let (out, timing) = g.time_generation(ids, GENERATE).unwrap();
        // The first run warms caches and is not counted.
        if run > 0 {
            p.push(timing.prompt_tokens as f64 / timing.prompt_seconds);
            t.push(timing.generated_tokens as f64 / timing.generate_seconds);
        }
        last = out;
    }
    (strata_benches::median(p), strata_benches::median(t), last)
}

fn same_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// `llama`: where llama-cpp-python is installed, or `None` to time our engine alone.
fn bench(spec: &'static Model, models: &Path, root: &Path, threads: usize, llama: Option<&Path>, tokens: usize) {
    strata_models::pinned(Kind::Generator, spec.alias, models).unwrap_or_else(|e| panic!("{e}"));
    let path = models.join(spec.files[0].out);
    let ours = GgufGenerator::load_with(&path, spec.name, Implementation::Int8).unwrap();
    let ids = prompt(&ours, root, tokens);
    let (ip, it, int8_ids) = time_candle(&ours, &ids);
    drop(ours);
    let name = format!("{} ({} prompt tokens)", spec.name, ids.len());
    let Some(llama) = llama else {
        // Quick runs profile our path alone.
        println!("| {name} | strata-candle (int8 prompt, 4-bit steps) | {ip:.1} | {it:.1} | | |");
        return;
    };
    let stock = (std::env::var("STRATA_BENCH_STOCK").as_deref() != Ok("0")).then(|| {
        let g = GgufGenerator::load_with(&path, spec.name, Implementation::Candle).unwrap();
        time_candle(&g, &ids)
    });
    let tmp = std::env::temp_dir().join(format!("strata-gen-bench-{}.json", std::process::id()));
    std::fs::write(&tmp, serde_json::to_string(&ids).unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("generate/llama_reference.py");
    let out = Command::new("python3")
        .env("PYTHONPATH", llama)
        .arg(&script)
        .arg(&path)
        .arg(&tmp)
        .arg(GENERATE.to_string())
        .arg(threads.to_string())
        .arg(RUNS.to_string())
        .output()
        .expect("running the llama.cpp reference");
    std::fs::remove_file(&tmp).ok();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii()).expect("the reference's JSON");
    let (lp, lt) =
        (report["prompt_tokens_per_s"].as_f64().unwrap(), report["generated_tokens_per_s"].as_f64().unwrap());
    let llama_ids: Vec<u32> = report["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
    println!(
        "| {name} | strata-candle (int8 prompt, 4-bit steps) | {ip:.1} | {it:.1} | {:.2} | {:.2} |",
        ip / lp,
        it / lt
    );
    if let Some((cp, ct, _)) = &stock {
        println!("| | candle-transformers quantized | {cp:.1} | {ct:.1} | {:.2} | {:.2} |", cp / lp, ct / lt);
    }
    println!("| | llama.cpp (llama-cpp-python 0.3.36) | {lp:.1} | {lt:.1} | 1.00 | 1.00 |");
    let stock_shared = match &stock {
        Some((_, _, candle_ids)) => format!(", candle-transformers {}", same_prefix(candle_ids, &llama_ids)),
        None => String::new(),
    };
    println!(
        "| | greedy tokens shared with llama.cpp before the first difference | ours {}{stock_shared} of {GENERATE} | | | |",
        same_prefix(&int8_ids, &llama_ids),
    );
}
