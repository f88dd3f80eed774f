//! The cross-encoder (ms-marco-MiniLM-L-12-v2) and bge-small on our engine against ONNX
//! Runtime on the same int8 ONNX files, in the same run, on the same inputs and threads:
//! 1,122 question-passage pairs from LoCoMo's first five conversations (the pairs
//! `crates/strata-candle/tests/fixtures/rerank_reference.json` names), batched alike (sorted
//! by length, 16 pairs or 32 texts a batch), tokenization included on both sides. Needs
//! `cargo xtask fetch-models msmarco bge`, LoCoMo (`STRATA_DATA`) and python3 with pip: the
//! bench installs its pinned Python packages itself.
//!
//! Prints pairs/s and texts/s, the ratio to ONNX Runtime, Spearman's correlation of the
//! logits and the largest difference, and the cosine of bge's vectors.

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::Command;

use strata_candle::{BertEmbedder, CrossEncoder, EmbedderConfig, Precision, RerankConfig};
use strata_core::Embedder;
use strata_models::Kind;

const RUNS: usize = 5;

/// The allocator the `strata` binary uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let models = strata_models::dir(None);
    let data = std::env::var_os("STRATA_DATA").map(PathBuf::from).unwrap_or_else(|| root.join("../shared/datasets"));
    let pairs = strata_benches::locomo_pairs(
        &data.join("locomo/locomo10.json"),
        include_str!("../../crates/strata-candle/tests/fixtures/rerank_reference.json"),
    );
    let refs: Vec<(&str, &str)> = pairs.iter().map(|(q, p)| (q.as_str(), p.as_str())).collect();
    // bge: each question once (with its instruction) and every passage.
    let mut queries: Vec<&str> = refs.iter().map(|p| p.0).collect();
    queries.dedup();
    let documents: Vec<&str> = refs.iter().map(|p| p.1).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{} pairs ({} questions), {} texts for bge, {threads} threads, median of {RUNS} runs",
        refs.len(),
        queries.len(),
        queries.len() + documents.len()
    );

    let (dir, msmarco) = strata_models::pinned(Kind::Reranker, "msmarco", &models).unwrap_or_else(|e| panic!("{e}"));
    let mut ours = Vec::new();
    for precision in [Precision::Int8, Precision::F32] {
        let config = RerankConfig { precision, ..RerankConfig::default() };
        let model = CrossEncoder::load(&dir, msmarco.name, config).expect("cross-encoder");
        let (secs, logits) = strata_benches::median_of(RUNS, || model.score_pairs(&refs).expect("scores"));
        ours.push((precision, secs, logits));
    }
    let (bge_dir, bge_model) = strata_models::pinned(Kind::Embedder, "bge", &models).unwrap_or_else(|e| panic!("{e}"));
    let mut bge_runs = Vec::new();
    for precision in [Precision::F32, Precision::Int8] {
        let config = EmbedderConfig { max_tokens: 512, precision, ..EmbedderConfig::default() };
        let bge = BertEmbedder::load_bge(&bge_dir, bge_model.name, config).expect("bge");
        let (secs, vecs) = strata_benches::median_of(RUNS, || {
            let mut v = bge.embed_query(&queries).expect("queries");
            v.extend(bge.embed(&documents).expect("documents"));
            v
        });
        bge_runs.push((precision, secs, vecs));
    }

    strata_benches::pip_install(&["onnxruntime==1.32.0", "numpy==2.4.6", "tokenizers==0.23.3"], &[]);
    let tmp = std::env::temp_dir().join(format!("strata-rerank-bench-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let input = tmp.join("input.json");
    let body = serde_json::json!({ "pairs": refs, "queries": queries, "documents": documents });
    std::fs::write(&input, body.to_string()).unwrap();
    let output = tmp.join("output.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("rerank/ort_reference.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&models)
        .arg(&input)
        .arg(threads.to_string())
        .arg(RUNS.to_string())
        .arg(&output)
        .output()
        .expect("running the ONNX Runtime reference");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    std::fs::remove_dir_all(&tmp).ok();
    let median = |key: &str| {
        let mut v: Vec<f64> = report[key].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let floats = |v: &serde_json::Value| -> Vec<f32> {
        v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
    };
    let ort_logits = floats(&report["logits"]);
    let ort_rate = refs.len() as f64 / median("rerank_seconds");
    let version = report["onnxruntime"].as_str().unwrap_or("?");

    println!("\n| cross-encoder | pairs/s | ratio to ONNX Runtime | Spearman to ONNX Runtime | largest difference |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (precision, secs, logits) in &ours {
        let rate = refs.len() as f64 / secs;
        let worst = logits.iter().zip(&ort_logits).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        println!(
            "| candle, {precision:?} | {rate:.1} | {:.2} | {:.5} | {worst:.3} |",
            rate / ort_rate,
            strata_benches::spearman(logits, &ort_logits)
        );
    }
    println!("| ONNX Runtime {version}, int8 | {ort_rate:.1} | 1.00 | 1 | 0 |");

    let ort_vecs: Vec<Vec<f32>> = report["query_vectors"]
        .as_array()
        .unwrap()
        .iter()
        .chain(report["document_vectors"].as_array().unwrap())
        .map(floats)
        .collect();
    let n = (queries.len() + documents.len()) as f64;
    let ort_bge = n / median("embed_seconds");
    println!("\n| bge-small-en-v1.5 | texts/s | ratio to ONNX Runtime | cosine to ONNX Runtime (min / mean) |");
    println!("| --- | ---: | ---: | --- |");
    for (precision, secs, vecs) in &bge_runs {
        let cos: Vec<f64> = vecs.iter().zip(&ort_vecs).map(|(a, b)| strata_benches::cosine(a, b)).collect();
        println!(
            "| candle, {precision:?} | {:.1} | {:.2} | {:.4} / {:.4} |",
            n / secs,
            (n / secs) / ort_bge,
            cos.iter().copied().fold(f64::MAX, f64::min),
            cos.iter().sum::<f64>() / n
        );
    }
    println!("| ONNX Runtime {version}, int8 | {ort_bge:.1} | 1.00 | 1 |");
}
