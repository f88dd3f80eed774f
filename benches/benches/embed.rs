//! Embedding throughput: candle (F32 and int8 linear layers) against ONNX Runtime on the int8
//! ONNX export of the same model, in the same run, on the same 1,000 sentences (about 18
//! words each), batch 32, the machine's cores. Needs the MiniLM weights (`cargo xtask
//! fetch-models`) and python3 with pip: the bench installs the pinned Python packages itself.
//!
//! Prints sentences/s for each, the ratio of candle to ONNX Runtime, and the cosine of each
//! side's vectors to candle F32's (which the weights tests tie to a numpy reference).

#![allow(clippy::print_stdout)]

use std::path::Path;
use std::process::Command;

use strata_candle::{BertEmbedder, EmbedderConfig, Precision};
use strata_models::Kind;

const RUNS: usize = 5;

fn main() {
    let models = strata_models::dir(None);
    let (dir, minilm) = strata_models::pinned(Kind::Embedder, "minilm", &models).unwrap_or_else(|e| panic!("{e}"));
    let sentences = strata_benches::sentences(1000);
    let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let words: usize = sentences.iter().map(|s| s.split_whitespace().count()).sum();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "embedding {} sentences ({:.1} words on average), batch 32, {threads} threads",
        texts.len(),
        words as f64 / texts.len() as f64
    );

    // STRATA_BENCH_QUICK=1 skips the reference, for profiling runs; STRATA_BENCH_QUICK=f32
    // measures candle F32 alone.
    let quick = std::env::var("STRATA_BENCH_QUICK").ok();
    let f32_model = BertEmbedder::load(&dir, minilm.name, EmbedderConfig::default()).expect("F32 model");
    let (f32_secs, f32_vecs) = strata_benches::time_embedder(&f32_model, &texts, RUNS);
    if quick.as_deref() == Some("f32") {
        println!("candle F32: {:.1} sentences/s", texts.len() as f64 / f32_secs);
        return;
    }
    let q8_model = BertEmbedder::load(
        &dir,
        minilm.name,
        EmbedderConfig { precision: Precision::Int8, ..EmbedderConfig::default() },
    )
    .expect("Int8 model");
    let (q8_secs, q8_vecs) = strata_benches::time_embedder(&q8_model, &texts, RUNS);
    if quick.is_some() {
        let n = texts.len() as f64;
        let worst = q8_vecs.iter().zip(&f32_vecs).map(|(a, b)| strata_benches::cosine(a, b)).fold(f64::MAX, f64::min);
        println!(
            "candle F32: {:.1} sentences/s; int8: {:.1} sentences/s, min cosine {worst:.4}",
            n / f32_secs,
            n / q8_secs
        );
        return;
    }

    // The reference, in Python: pinned packages installed by this bench, then the script.
    strata_benches::pip_install(&["onnxruntime==1.32.0", "numpy==2.4.6", "tokenizers==0.23.3"], &[]);
    let tmp = std::env::temp_dir().join(format!("strata-embed-bench-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let sentences_path = tmp.join("sentences.json");
    std::fs::write(&sentences_path, serde_json::to_string(&sentences).unwrap()).unwrap();
    let vectors_path = tmp.join("ort_vectors.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("embed/ort_reference.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&sentences_path)
        .arg(dir.join("tokenizer.json"))
        .arg(threads.to_string())
        .arg(RUNS.to_string())
        .arg(&vectors_path)
        .output()
        .expect("running the ONNX Runtime reference");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii()).expect("the reference's JSON");
    let ort_secs = report["median"].as_f64().unwrap();
    let ort_vecs: Vec<Vec<f32>> = serde_json::from_str(&std::fs::read_to_string(&vectors_path).unwrap()).unwrap();
    std::fs::remove_dir_all(&tmp).ok();

    let stats = |vecs: &[Vec<f32>]| {
        let c: Vec<f64> = vecs.iter().zip(&f32_vecs).map(|(a, b)| strata_benches::cosine(a, b)).collect();
        (c.iter().copied().fold(f64::MAX, f64::min), c.iter().sum::<f64>() / c.len() as f64)
    };
    let n = texts.len() as f64;
    let ort_rate = n / ort_secs;
    println!("| engine | sentences/s | ratio to ONNX Runtime int8 | cosine to candle F32 (min / mean) |");
    println!("| --- | ---: | ---: | --- |");
    for (name, secs, vecs) in [("candle F32", f32_secs, &f32_vecs), ("candle int8 linear layers", q8_secs, &q8_vecs)] {
        let (min, mean) = stats(vecs);
        println!("| {name} | {:.1} | {:.2} | {min:.4} / {mean:.4} |", n / secs, (n / secs) / ort_rate);
    }
    let (min, mean) = stats(&ort_vecs);
    println!(
        "| ONNX Runtime {} int8 | {ort_rate:.1} | 1.00 | {min:.4} / {mean:.4} |",
        report["onnxruntime"].as_str().unwrap_or("?")
    );
}
