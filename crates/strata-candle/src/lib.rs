//! The one crate that knows candle and model weights.
//!
//! [`BertEmbedder`] implements [`strata_core::Embedder`] for BERT-family sentence models
//! (all-MiniLM-L6-v2 by default, nomic-embed-text v1.5 from its GGUF file with its task
//! prefixes, bge-small-en-v1.5 from an int8 ONNX file; [`load_embedder`] by name): WordPiece
//! tokens from a `tokenizer.json`, the encoder run through candle on the CPU, mean (or `[CLS]`)
//! pooling, L2 normalisation.
//! Sentences are sorted by length and batched so that a batch pads only to its own longest
//! sentence. [`CachedEmbedder`] keeps vectors on disk by content hash and model id, so that a
//! second eval run computes nothing. Weights are found by [`locate`]: an explicit folder,
//! `STRATA_MODELS`, the project's `models/`, then the Hugging Face Hub for users online; pinned
//! files are checked against their sha256 before use.
//!
//! [`CrossEncoder`] implements [`strata_core::Reranker`] (ms-marco-MiniLM-L-12-v2 from an int8
//! ONNX file; [`load_reranker`], [`CachedReranker`]). An ONNX file supplies weights only: the
//! model that runs is the same BERT encoder as the embedders'.
//!
//! [`GgufGenerator`] implements [`strata_core::Generator`] for GGUF chat models (llama and
//! qwen2 architectures, ChatML) through candle's quantized models, decoding greedily;
//! [`CachedGenerator`] keeps its answers on disk by prompt hash.

mod bert;
mod cache;
mod cpu;
mod gencache;
mod gguf;
mod int4;
mod int8;
mod kernels;
mod llm;
mod onnx;
mod rerank;
#[cfg(test)]
mod testing;
mod weights;

pub use bert::{load_embedder, BertEmbedder, EmbedderConfig, Precision, BGE_SMALL, EMBEDDERS, NOMIC_EMBED_V15};
pub use cache::{CachedEmbedder, CachedReranker};
pub use gencache::{CachedGenerator, LazyGenerator};
pub use gguf::{
    load_generator, open_generator, ChatMlCounter, GgufGenerator, Implementation, Timing, QWEN_CODER_05B,
    QWEN_CODER_15B, SMOLLM2_135M,
};
pub use rerank::{load_reranker, CrossEncoder, RerankConfig, MS_MARCO_MINILM, RERANKERS};
pub use weights::{locate, verify, ModelSpec, MINILM};

use std::path::PathBuf;

/// The name `cargo xtask fetch-models` fetches a model file's model by: the folder it lives in
/// (fetch-models takes folder names as well as aliases), so that the hint fetches that model,
/// not only the defaults.
fn fetch_name(path: &std::path::Path) -> String {
    path.parent().and_then(|p| p.file_name()).map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Why a model could not be used. Messages name the file and the command that fixes it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    #[error("{}: missing; run `cargo xtask fetch-models {}` to fetch it", path.display(), fetch_name(path))]
    Missing { path: PathBuf },
    #[error("{}: {size} bytes where {expected} were expected, so the file is truncated or not the pinned one; run `cargo xtask fetch-models {}` to fetch it again", path.display(), fetch_name(path))]
    WrongSize { path: PathBuf, size: u64, expected: u64 },
    #[error("{}: sha256 {got} does not match the pinned {expected}; run `cargo xtask fetch-models {}` to fetch it again", path.display(), fetch_name(path))]
    WrongHash { path: PathBuf, got: String, expected: String },
    #[error("{}: {message}", path.display())]
    Load { path: PathBuf, message: String },
    #[error("model {model}: {message}")]
    Run { model: String, message: String },
}
