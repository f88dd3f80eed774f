//! Tests that need the real all-MiniLM-L6-v2 weights (`cargo xtask fetch-models`); built only
//! with `--features weights`, which `.ci/run` passes after fetching.

use std::path::PathBuf;

use strata_candle::{locate, BertEmbedder, EmbedderConfig, Precision, MINILM};
use strata_core::Embedder;

fn models_dir() -> PathBuf {
    std::env::var_os("STRATA_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"))
}

fn embedder(precision: Precision) -> BertEmbedder {
    let dir = locate(Some(&models_dir().join(MINILM.folder)), &MINILM).unwrap();
    BertEmbedder::load(&dir, MINILM.folder, EmbedderConfig { precision, ..EmbedderConfig::default() }).unwrap()
}

fn reference() -> (Vec<String>, Vec<Vec<f32>>) {
    #[derive(serde::Deserialize)]
    struct Reference {
        vectors: Vec<Vec<f32>>,
    }
    let sentences: Vec<String> = serde_json::from_str(include_str!("fixtures/sentences.json")).unwrap();
    let r: Reference = serde_json::from_str(include_str!("fixtures/minilm_reference.json")).unwrap();
    (sentences, r.vectors)
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn f32_embeddings_match_the_numpy_reference() {
    let (sentences, want) = reference();
    let e = embedder(Precision::F32);
    let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let got = e.embed(&texts).unwrap();
    for ((s, g), w) in sentences.iter().zip(&got).zip(&want) {
        assert_eq!(g.len(), 384);
        let distance = 1.0 - cosine(g, w);
        assert!(distance < 1e-4, "cosine distance {distance:e} on {s:?}");
        let norm: f64 = g.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }
}

#[test]
fn batching_and_padding_do_not_change_vectors() {
    let (sentences, _) = reference();
    let e = embedder(Precision::F32);
    let all: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let together = e.embed(&all).unwrap();
    for (s, v) in all.iter().zip(&together) {
        let alone = e.embed(&[s]).unwrap();
        assert!(1.0 - cosine(&alone[0], v) < 1e-6, "{s:?}");
    }
}

#[test]
fn int8_embeddings_stay_close_to_f32() {
    let (sentences, want) = reference();
    let e = embedder(Precision::Int8);
    assert_eq!(e.model_id(), "all-MiniLM-L6-v2+int8");
    let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();
    for ((s, g), w) in sentences.iter().zip(e.embed(&texts).unwrap()).zip(&want) {
        let c = cosine(&g, w);
        assert!(c >= 0.99, "cosine {c} on {s:?}");
    }
}
