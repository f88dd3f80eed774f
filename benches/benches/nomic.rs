//! nomic-embed-text v1.5 throughput: strata-candle's nomic-bert encoder (F32, and with 8-bit
//! linear layers) against llama.cpp (through llama-cpp-python) on the same F16 GGUF file, in
//! the same run, on the same 1,000 sentences (about 18 words each, as documents), the
//! machine's cores. Needs the weights (`cargo xtask fetch-models`) and python3 with pip: the
//! bench installs llama-cpp-python itself (a source build of about 10 minutes the first time,
//! kept under `target/`; see `strata_benches::llama_cpp_python`).
//!
//! Prints sentences/s for each, the ratio to llama.cpp, and the cosine of each side's vectors
//! to llama.cpp's. `STRATA_BENCH_INT8=1` adds the 8-bit path; `STRATA_BENCH_QUICK=1` leaves
//! out llama.cpp.

#![allow(clippy::print_stdout)]

use std::path::Path;
use std::process::Command;

use strata_candle::{BertEmbedder, EmbedderConfig, Precision};
use strata_models::Kind;

const RUNS: usize = 3;

fn main() {
    let models = strata_models::dir(None);
    let pinned = |name| strata_models::pinned(Kind::Embedder, name, &models).unwrap_or_else(|e| panic!("{e}"));
    let ((_, nomic), (vocab, _)) = (pinned("nomic"), pinned("minilm"));
    let gguf = models.join(nomic.files[0].out);
    let sentences = strata_benches::sentences(1000);
    let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("nomic-embed-text v1.5: {} sentences, {threads} threads", texts.len());

    let load = |precision| {
        let config = EmbedderConfig { precision, max_tokens: 512, ..EmbedderConfig::default() };
        BertEmbedder::load_nomic(&gguf, &vocab.join("tokenizer.json"), "nomic", config).expect("nomic-embed")
    };
    // The 8-bit path pays only where the CPU multiplies bytes natively (AVX-512 VNNI); without
    // it the portable kernel is several times slower than F32, so it is measured on request.
    let mut engines = vec![("strata-candle F32", Precision::F32)];
    if std::env::var_os("STRATA_BENCH_INT8").is_some() {
        engines.push(("strata-candle int8", Precision::Int8));
    }
    let ours: Vec<(&str, f64, Vec<Vec<f32>>)> = engines
        .into_iter()
        .map(|(name, p)| {
            let (secs, vecs) = strata_benches::time_embedder(&load(p), &texts, RUNS);
            (name, secs, vecs)
        })
        .collect();
    if std::env::var_os("STRATA_BENCH_QUICK").is_some() {
        for (name, secs, _) in &ours {
            println!("{name}: {:.1} sentences/s", texts.len() as f64 / secs);
        }
        return;
    }

    let llama = strata_benches::llama_cpp_python();
    let tmp = std::env::temp_dir().join(format!("strata-nomic-bench-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let sentences_path = tmp.join("sentences.json");
    std::fs::write(&sentences_path, serde_json::to_string(&sentences).unwrap()).unwrap();
    let vectors_path = tmp.join("llama_vectors.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("embed/llama_embed_reference.py");
    let out = Command::new("python3")
        .env("PYTHONPATH", &llama)
        .arg(&script)
        .arg(&gguf)
        .arg(&sentences_path)
        .arg(threads.to_string())
        .arg(RUNS.to_string())
        .arg(&vectors_path)
        .output()
        .expect("running the llama.cpp reference");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii()).expect("the reference's JSON");
    let llama_secs = report["median"].as_f64().unwrap();
    let llama_vecs: Vec<Vec<f32>> = serde_json::from_str(&std::fs::read_to_string(&vectors_path).unwrap()).unwrap();
    std::fs::remove_dir_all(&tmp).ok();

    let n = texts.len() as f64;
    let llama_rate = n / llama_secs;
    println!("| engine | sentences/s | ratio to llama.cpp | cosine to llama.cpp (min / mean) |");
    println!("| --- | ---: | ---: | --- |");
    for (name, secs, vecs) in &ours {
        let c: Vec<f64> = vecs.iter().zip(&llama_vecs).map(|(a, b)| strata_benches::cosine(a, b)).collect();
        let (min, mean) = (c.iter().copied().fold(f64::MAX, f64::min), c.iter().sum::<f64>() / c.len() as f64);
        println!("| {name} | {:.1} | {:.2} | {min:.5} / {mean:.5} |", n / secs, (n / secs) / llama_rate);
    }
    println!(
        "| llama.cpp (llama-cpp-python {}) F16 | {llama_rate:.1} | 1.00 | 1 |",
        report["llama_cpp_python"].as_str().unwrap_or("?")
    );
}
