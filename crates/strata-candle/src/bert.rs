//! A BERT sentence encoder on candle: embeddings, self-attention layers, mean pooling.
//!
//! Written here rather than taken from candle-transformers so that the hot path is ours to
//! shape: query, key and value are one fused matmul; every linear layer runs as one 2-D
//! matmul over all tokens of a batch; and the linear layers can run as 8-bit integer products
//! ([`Precision::Int8`], our own kernels in [`crate::int8`]).

use std::path::Path;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder};
use rayon::prelude::*;
use serde::Deserialize;
use strata_core::{EmbedError, Embedder};
use tokenizers::{Tokenizer, TruncationParams};

use crate::int8::Int8Matrix;
use crate::kernels::{BiasGelu, BiasResidualNorm, QkvHeads};
use crate::ModelError;

/// How the linear layers compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// 32-bit floats throughout: the reference.
    #[default]
    F32,
    /// Linear layers as 8-bit integer products (weights per output channel, activations per
    /// token); attention, norms and pooling stay F32.
    Int8,
}

/// How an embedder tokenises and batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedderConfig {
    /// Longer inputs are truncated (all-MiniLM-L6-v2 was trained on 256).
    pub max_tokens: usize,
    pub batch_size: usize,
    pub precision: Precision,
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        EmbedderConfig { max_tokens: 256, batch_size: 32, precision: Precision::F32 }
    }
}

#[derive(Debug, Deserialize)]
struct BertConfig {
    hidden_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    intermediate_size: usize,
    layer_norm_eps: f64,
    vocab_size: usize,
    max_position_embeddings: usize,
    type_vocab_size: usize,
    #[serde(default)]
    hidden_act: Option<String>,
}

/// A linear layer `x · Wᵀ + b` over the last dimension.
enum Linear {
    F32 { weight_t: Tensor, bias_vec: Vec<f32> },
    Int8 { weight: Int8Matrix, bias_vec: Vec<f32> },
}

impl Linear {
    /// Several layers side by side (query, key, value) become one wider layer; `scales`
    /// multiplies each part's weights and bias (1/√d folded into the query).
    fn load(
        vb: &VarBuilder<'_>,
        names: &[&str],
        scales: &[f64],
        inp: usize,
        out: usize,
        precision: Precision,
    ) -> candle_core::Result<Linear> {
        let ws = names
            .iter()
            .zip(scales)
            .map(|(n, s)| vb.get((out, inp), &format!("{n}.weight"))? * *s)
            .collect::<candle_core::Result<Vec<_>>>()?;
        let bs = names
            .iter()
            .zip(scales)
            .map(|(n, s)| vb.get(out, &format!("{n}.bias"))? * *s)
            .collect::<candle_core::Result<Vec<_>>>()?;
        let weight = Tensor::cat(&ws, 0)?;
        let bias = Tensor::cat(&bs, 0)?;
        let bias_vec = bias.to_vec1()?;
        Ok(match precision {
            Precision::F32 => Linear::F32 { weight_t: weight.t()?.contiguous()?, bias_vec },
            Precision::Int8 => {
                let rows = weight.dim(0)?;
                let weight = Int8Matrix::quantize(&weight.flatten_all()?.to_vec1()?, rows, inp);
                Linear::Int8 { weight, bias_vec }
            }
        })
    }

    /// `x · Wᵀ` without the bias, and the bias, for the fused ops that add it.
    fn product(&self, x: &Tensor) -> candle_core::Result<(Tensor, &[f32])> {
        match self {
            Linear::F32 { weight_t, bias_vec, .. } => Ok((x.matmul(weight_t)?, bias_vec)),
            Linear::Int8 { weight, bias_vec } => Ok((x.apply_op1_no_bwd(weight)?, bias_vec)),
        }
    }

    /// `gelu(x · Wᵀ + b)`, the bias and GELU in one pass.
    fn forward_gelu(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let (product, bias) = self.product(x)?;
        product.apply_op1_no_bwd(&BiasGelu { bias: bias.to_vec() })
    }

    /// `LayerNorm(x · Wᵀ + b + residual)` in one pass after the matmul.
    fn forward_residual_norm(&self, x: &Tensor, residual: &Tensor, norm: &Norm) -> candle_core::Result<Tensor> {
        let (product, bias) = self.product(x)?;
        let op =
            BiasResidualNorm { bias: bias.to_vec(), gamma: norm.gamma.clone(), beta: norm.beta.clone(), eps: norm.eps };
        product.apply_op2_no_bwd(residual, &op)
    }
}

struct Layer {
    qkv: Linear,
    attn_out: Linear,
    attn_norm: Norm,
    intermediate: Linear,
    output: Linear,
    out_norm: Norm,
}

/// A LayerNorm's parameters, applied together with the bias and residual before it.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

impl Norm {
    fn load(vb: VarBuilder<'_>, size: usize, eps: f64) -> candle_core::Result<Norm> {
        Ok(Norm { gamma: vb.get(size, "weight")?.to_vec1()?, beta: vb.get(size, "bias")?.to_vec1()?, eps: eps as f32 })
    }
}

/// A BERT-family sentence embedder: mean pooling over real tokens, then L2 normalisation.
pub struct BertEmbedder {
    model_id: String,
    tokenizer: Tokenizer,
    word: Embedding,
    position: Embedding,
    token_type: Tensor,
    embed_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    hidden: usize,
    config: EmbedderConfig,
    device: Device,
}

impl std::fmt::Debug for BertEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertEmbedder").field("model_id", &self.model_id).field("config", &self.config).finish()
    }
}

fn load_err(path: &Path) -> impl Fn(String) -> ModelError + '_ {
    move |message| ModelError::Load { path: path.to_path_buf(), message }
}

impl BertEmbedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`. `model_id`
    /// names the model in caches and results.
    pub fn load(dir: &Path, model_id: &str, config: EmbedderConfig) -> Result<BertEmbedder, ModelError> {
        let device = Device::Cpu;
        let config_path = dir.join("config.json");
        let text =
            std::fs::read_to_string(&config_path).map_err(|_| ModelError::Missing { path: config_path.clone() })?;
        let bert: BertConfig = serde_json::from_str(&text).map_err(|e| load_err(&config_path)(e.to_string()))?;
        if bert.hidden_act.as_deref().is_some_and(|a| a != "gelu") {
            return Err(load_err(&config_path)(format!(
                "hidden_act {:?} is not supported (only gelu)",
                bert.hidden_act
            )));
        }
        let tok_path = dir.join("tokenizer.json");
        if !tok_path.exists() {
            return Err(ModelError::Missing { path: tok_path });
        }
        let mut tokenizer = Tokenizer::from_file(&tok_path).map_err(|e| load_err(&tok_path)(e.to_string()))?;
        // We pad per batch ourselves; the file's fixed padding and 128-token truncation would
        // waste work and cut sentences the model can read.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: config.max_tokens.min(bert.max_position_embeddings),
                ..Default::default()
            }))
            .map_err(|e| load_err(&tok_path)(e.to_string()))?;
        let weights_path = dir.join("model.safetensors");
        let bytes = std::fs::read(&weights_path).map_err(|_| ModelError::Missing { path: weights_path.clone() })?;
        let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &device)
            .map_err(|e| load_err(&weights_path)(e.to_string()))?;
        let build = || -> candle_core::Result<(Embedding, Embedding, Tensor, LayerNorm, Vec<Layer>)> {
            let h = bert.hidden_size;
            let e = vb.pp("embeddings");
            let word = candle_nn::embedding(bert.vocab_size, h, e.pp("word_embeddings"))?;
            let position = candle_nn::embedding(bert.max_position_embeddings, h, e.pp("position_embeddings"))?;
            // Sentence embeddings use token type 0 throughout: its row is all that is needed.
            let token_type = e.get((bert.type_vocab_size, h), "token_type_embeddings.weight")?.get(0)?;
            let embed_norm = candle_nn::layer_norm(h, bert.layer_norm_eps, e.pp("LayerNorm"))?;
            let mut layers = Vec::with_capacity(bert.num_hidden_layers);
            let scale = 1.0 / ((h / bert.num_attention_heads) as f64).sqrt();
            for i in 0..bert.num_hidden_layers {
                let l = vb.pp(format!("encoder.layer.{i}"));
                let p = config.precision;
                layers.push(Layer {
                    qkv: Linear::load(
                        &l.pp("attention.self"),
                        &["query", "key", "value"],
                        &[scale, 1.0, 1.0],
                        h,
                        h,
                        p,
                    )?,
                    attn_out: Linear::load(&l.pp("attention.output"), &["dense"], &[1.0], h, h, p)?,
                    attn_norm: Norm::load(l.pp("attention.output.LayerNorm"), h, bert.layer_norm_eps)?,
                    intermediate: Linear::load(
                        &l.pp("intermediate"),
                        &["dense"],
                        &[1.0],
                        h,
                        bert.intermediate_size,
                        p,
                    )?,
                    output: Linear::load(&l.pp("output"), &["dense"], &[1.0], bert.intermediate_size, h, p)?,
                    out_norm: Norm::load(l.pp("output.LayerNorm"), h, bert.layer_norm_eps)?,
                });
            }
            Ok((word, position, token_type, embed_norm, layers))
        };
        let (word, position, token_type, embed_norm, layers) =
            build().map_err(|e| load_err(&weights_path)(e.to_string()))?;
        // Vectors of the quantized model differ slightly; caches must not mix the two.
        let model_id = match config.precision {
            Precision::F32 => model_id.to_string(),
            Precision::Int8 => format!("{model_id}+int8"),
        };
        Ok(BertEmbedder {
            model_id,
            tokenizer,
            word,
            position,
            token_type,
            embed_norm,
            layers,
            heads: bert.num_attention_heads,
            hidden: bert.hidden_size,
            config,
            device,
        })
    }

    /// Embeds one batch of token id sequences, padded to the longest.
    fn forward(&self, batch: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let (b, t) = (batch.len(), batch.iter().map(|s| s.len()).max().unwrap_or(0));
        let (h, heads) = (self.hidden, self.heads);
        let mut ids = vec![0u32; b * t];
        let mut mask = vec![0f32; b * t];
        for (i, s) in batch.iter().enumerate() {
            ids[i * t..i * t + s.len()].copy_from_slice(s);
            mask[i * t..i * t + s.len()].iter_mut().for_each(|m| *m = 1.0);
        }
        let ids = Tensor::from_vec(ids, (b, t), &self.device)?;
        let mask = Tensor::from_vec(mask, (b, t), &self.device)?;
        let positions = Tensor::arange(0u32, t as u32, &self.device)?;
        let x = self
            .word
            .forward(&ids)?
            .broadcast_add(&self.position.forward(&positions)?)?
            .broadcast_add(&self.token_type)?;
        let mut x = self.embed_norm.forward(&x)?.reshape((b * t, h))?;
        // Padding gets a large negative score so softmax gives it no weight.
        let bias_mask = ((mask.ones_like()? - &mask)? * -1e9f64)?.reshape((b, 1, 1, t))?;
        for layer in &self.layers {
            let (product, bias) = layer.qkv.product(&x)?;
            let qkv = product.apply_op1_no_bwd(&QkvHeads { bias: bias.to_vec(), batch: b, tokens: t, heads })?;
            let (q, k, v) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
            // The 1/√d scale is folded into the query weights at load time.
            let scores = q.matmul(&k.t()?)?.broadcast_add(&bias_mask)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let ctx = probs.matmul(&v)?.transpose(1, 2)?.reshape((b * t, h))?;
            let a = layer.attn_out.forward_residual_norm(&ctx, &x, &layer.attn_norm)?;
            let inner = layer.intermediate.forward_gelu(&a)?;
            x = layer.output.forward_residual_norm(&inner, &a, &layer.out_norm)?;
        }
        // Mean over real tokens, then unit length.
        let x = x.reshape((b, t, h))?;
        let m = mask.unsqueeze(2)?;
        let summed = x.broadcast_mul(&m)?.sum(1)?;
        let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        mean.broadcast_div(&norm)?.to_vec2::<f32>()
    }

    fn run(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let err = |message: String| ModelError::Run { model: self.model_id.clone(), message };
        let encodings = self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| err(e.to_string()))?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        // Length bucketing: sort by length so each batch pads only to its own longest.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| (ids[i].len(), i));
        // Batches run side by side, one per core: the element-wise work between matmuls
        // (norms, softmax, GELU) is single-threaded within a batch, so one batch at a time
        // would leave cores idle. Matmuls still split across cores through rayon's pool.
        let chunks: Vec<&[usize]> = order.chunks(self.config.batch_size.max(1)).collect();
        let results: Vec<candle_core::Result<Vec<Vec<f32>>>> =
            chunks.par_iter().map(|chunk| self.forward(&chunk.iter().map(|&i| ids[i]).collect::<Vec<_>>())).collect();
        let mut out = vec![Vec::new(); ids.len()];
        for (chunk, vectors) in chunks.iter().zip(results) {
            for (&i, v) in chunk.iter().zip(vectors.map_err(|e| err(e.to_string()))?) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

impl Embedder for BertEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.hidden
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.run(texts).map_err(|e| EmbedError::Backend { model: self.model_id.clone(), message: e.to_string() })
    }
}
