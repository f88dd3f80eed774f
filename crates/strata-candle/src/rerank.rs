//! A BERT cross-encoder on candle: the question and a passage read together, the `[CLS]`
//! vector through the pooler (dense + tanh) and a one-logit classifier. The model is
//! cross-encoder/ms-marco-MiniLM-L-12-v2, read from the int8 ONNX file that ONNX Runtime's
//! dynamic quantization wrote; its linear layers run on our int8 kernels with the file's own
//! 8-bit weights.

use std::path::Path;

use candle_core::Tensor;
use strata_core::{RerankError, Reranker};
use tokenizers::{EncodeInput, Tokenizer};

use crate::bert::{in_batches, load_err, tokenizer, Encoder, Linear, Precision};
use crate::onnx::Onnx;
use crate::EngineError;

/// How a cross-encoder tokenises, batches and computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RerankConfig {
    /// A pair longer than this is cut, the longer side first.
    pub max_tokens: usize,
    pub batch_size: usize,
    /// Int8 runs the file's own 8-bit weights (the default, and what ONNX Runtime runs);
    /// F32 runs them dequantized.
    pub precision: Precision,
}

impl Default for RerankConfig {
    fn default() -> Self {
        RerankConfig { max_tokens: 512, batch_size: 16, precision: Precision::Int8 }
    }
}

/// A cross-encoder: a relevance logit for each (query, passage) pair.
pub struct CrossEncoder {
    model_id: String,
    tokenizer: Tokenizer,
    encoder: Encoder,
    pooler: Linear,
    classifier: Linear,
    config: RerankConfig,
}

impl std::fmt::Debug for CrossEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossEncoder").field("model_id", &self.model_id).field("config", &self.config).finish()
    }
}

impl CrossEncoder {
    /// Loads `model.onnx` and `tokenizer.json` from `dir`. `model_id` names the model in
    /// caches and results.
    pub fn load(dir: &Path, model_id: &str, config: RerankConfig) -> Result<CrossEncoder, EngineError> {
        let path = dir.join("model.onnx");
        let bytes = std::fs::read(&path).map_err(|_| EngineError::Missing { path: path.clone() })?;
        let onnx = Onnx::parse(&bytes).map_err(load_err(&path))?;
        let p = config.precision;
        // MiniLM-L12-H384: 12 heads of 32.
        let encoder = Encoder::from_onnx(&onnx, "bert.", 12, p).map_err(load_err(&path))?;
        let pooler = Linear::from_onnx(&onnx, &["bert.pooler.dense"], &[1.0], p).map_err(load_err(&path))?;
        let classifier = Linear::from_onnx(&onnx, &["classifier"], &[1.0], p).map_err(load_err(&path))?;
        let max_tokens = config.max_tokens.min(encoder.max_tokens);
        let model_id = match p {
            Precision::Int8 => model_id.to_string(),
            Precision::F32 => format!("{model_id}+f32"),
        };
        Ok(CrossEncoder {
            model_id,
            tokenizer: tokenizer(&dir.join("tokenizer.json"), max_tokens)?,
            encoder,
            pooler,
            classifier,
            config: RerankConfig { max_tokens, ..config },
        })
    }

    /// Logits for one batch of pairs, padded to the longest.
    fn forward(&self, ids: &[&[u32]], types: &[&[u32]]) -> candle_core::Result<Vec<f32>> {
        let (x, _) = self.encoder.forward(ids, Some(types))?;
        let cls = x.narrow(1, 0, 1)?.squeeze(1)?.contiguous()?;
        let pooled = self.pooler.forward(&cls)?.tanh()?;
        let logits: Tensor = self.classifier.forward(&pooled)?;
        logits.flatten_all()?.to_vec1()
    }

    /// Logits for (query, passage) pairs of any queries, batched together: what a caller with
    /// many questions at once (an evaluation, a benchmark) uses.
    pub fn score_pairs(&self, pairs: &[(&str, &str)]) -> Result<Vec<f32>, EngineError> {
        self.run(pairs).map_err(|message| EngineError::Run { model: self.model_id.clone(), message })
    }

    fn run(&self, pairs: &[(&str, &str)]) -> Result<Vec<f32>, String> {
        let pairs: Vec<EncodeInput<'_>> = pairs.iter().map(|&(q, p)| (q, p).into()).collect();
        let encodings = self.tokenizer.encode_batch(pairs, true).map_err(|e| e.to_string())?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        let types: Vec<&[u32]> = encodings.iter().map(|e| e.get_type_ids()).collect();
        let lengths: Vec<usize> = ids.iter().map(|s| s.len()).collect();
        in_batches(&lengths, self.config.batch_size, |batch| {
            let batch_ids: Vec<&[u32]> = batch.iter().map(|&i| ids[i]).collect();
            let batch_types: Vec<&[u32]> = batch.iter().map(|&i| types[i]).collect();
            self.forward(&batch_ids, &batch_types)
        })
        .map_err(|e| e.to_string())
    }
}

impl Reranker for CrossEncoder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, RerankError> {
        let pairs: Vec<(&str, &str)> = passages.iter().map(|p| (query, *p)).collect();
        self.run(&pairs).map_err(|message| RerankError::Backend { model: self.model_id.clone(), message })
    }
}
