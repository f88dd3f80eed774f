//! The one crate that knows candle: models built from files and bytes, nothing else (no
//! names, no pinned hashes, no environment, no caches: `strata-models` owns those and opens
//! every model through the loaders here).
//!
//! [`BertEmbedder`] implements [`strata_core::Embedder`] for BERT-family sentence models
//! (all-MiniLM-L6-v2 from safetensors, nomic-embed-text v1.5 from its GGUF file with its task
//! prefixes, bge-small-en-v1.5 from an int8 ONNX file): WordPiece tokens from a
//! `tokenizer.json`, the encoder run through candle on the CPU, mean (or `[CLS]`) pooling, L2
//! normalisation. Sentences are sorted by length and batched so that a batch pads only to its
//! own longest sentence.
//!
//! [`CrossEncoder`] implements [`strata_core::Reranker`] (ms-marco-MiniLM-L-12-v2 from an int8
//! ONNX file). An ONNX file supplies weights only: the model that runs is the same BERT
//! encoder as the embedders'.
//!
//! [`GgufGenerator`] implements [`strata_core::Generator`] for GGUF chat models (llama and
//! qwen2 architectures, ChatML) through candle's quantized models, decoding greedily.

mod bert;
mod cpu;
mod gguf;
mod int4;
mod int8;
mod kernels;
mod llm;
mod onnx;
mod rerank;
#[cfg(test)]
mod testing;

pub use bert::{BertEmbedder, EmbedderConfig, Precision};
pub use gguf::{ChatMlCounter, GgufGenerator, Implementation, Timing};
pub use rerank::{CrossEncoder, RerankConfig};

use std::path::PathBuf;

/// Why a model file could not be read or run. Messages name the file or the model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error("{}: no such file", path.display())]
    Missing { path: PathBuf },
    #[error("{}: {message}", path.display())]
    Load { path: PathBuf, message: String },
    #[error("model {model}: {message}")]
    Run { model: String, message: String },
}
