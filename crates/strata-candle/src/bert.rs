//! A BERT sentence encoder on candle: embeddings, self-attention layers, mean pooling. Two
//! members of the family: classic BERT (all-MiniLM-L6-v2: learned positions, GELU, biases;
//! safetensors) and nomic-bert (nomic-embed-text v1.5: rotary positions, SwiGLU, no biases
//! in the linear layers; read straight from its GGUF file).
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
use crate::kernels::{Attention, BiasGelu, BiasResidualNorm, Rotation, SwiGlu};
use crate::onnx::Onnx;
use crate::EngineError;

/// The task prefixes a model was trained with: nomic-embed reads `search_document: ` before
/// a text to be found, `search_query: ` before a question and `clustering: ` before a text to
/// be grouped by topic; MiniLM reads none.
#[derive(Debug, Clone, Default)]
struct Prefixes {
    document: &'static str,
    query: &'static str,
    clustering: &'static str,
}

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
pub(crate) enum Linear {
    F32 { weight_t: Tensor, bias_vec: Vec<f32> },
    Int8 { weight: Int8Matrix, bias_vec: Vec<f32> },
}

impl Linear {
    /// A layer from its weights, row-major `(rows, inp)`, and its bias.
    fn new(
        weight: &[f32],
        rows: usize,
        inp: usize,
        bias_vec: Vec<f32>,
        precision: Precision,
    ) -> candle_core::Result<Linear> {
        Ok(match precision {
            Precision::F32 => Linear::F32 {
                weight_t: Tensor::from_slice(weight, (rows, inp), &Device::Cpu)?.t()?.contiguous()?,
                bias_vec,
            },
            Precision::Int8 => Linear::Int8 { weight: Int8Matrix::quantize(weight, rows, inp), bias_vec },
        })
    }

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
        Linear::new(&weight.flatten_all()?.to_vec1()?, weight.dim(0)?, inp, bias.to_vec1()?, precision)
    }

    /// Layers of an ONNX file side by side, as [`Linear::load`] stacks them: int8 weights
    /// with a scale per output channel, used as they are on the int8 path and dequantized for
    /// F32. A module's matrix is `<module>.weight_quantized` or the one its product names.
    pub(crate) fn from_onnx(
        onnx: &Onnx<'_>,
        modules: &[&str],
        scales: &[f32],
        precision: Precision,
    ) -> Result<Linear, String> {
        let (mut rows, mut scale, mut bias, mut width) = (Vec::new(), Vec::new(), Vec::new(), None);
        for (m, &f) in modules.iter().zip(scales) {
            let (out, inp, q, s) = onnx.linear_int8(m)?;
            if *width.get_or_insert(inp) != inp {
                return Err(format!("{m}: {inp} inputs where the layers beside it have {width:?}"));
            }
            rows.extend(q);
            scale.extend(s.iter().map(|s| s * f));
            bias.extend(onnx.floats(&format!("{m}.bias"), &[out])?.iter().map(|b| b * f));
        }
        let (n, k) = (bias.len(), width.unwrap_or(0));
        Ok(match precision {
            Precision::Int8 => Linear::Int8 { weight: Int8Matrix::from_quantized(&rows, n, k, scale), bias_vec: bias },
            Precision::F32 => {
                let w: Vec<f32> = rows.iter().enumerate().map(|(i, &q)| f32::from(q) * scale[i / k]).collect();
                Linear::new(&w, n, k, bias, Precision::F32).map_err(|e| e.to_string())?
            }
        })
    }

    /// `x · Wᵀ + b`.
    pub(crate) fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let (product, bias) = self.product(x)?;
        let n = bias.len();
        product.broadcast_add(&Tensor::from_slice(bias, n, x.device())?)
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
        product.inplace_op1(&BiasGelu { bias: bias.to_vec() })?;
        Ok(product)
    }

    /// `silu(gate) · up` of a stacked `[gate | up]` layer (no bias), in one pass after the
    /// matmul.
    fn forward_swiglu(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let (product, _) = self.product(x)?;
        product.apply_op1_no_bwd(&SwiGlu)
    }

    /// `LayerNorm(x · Wᵀ + b + residual)` in one pass after the matmul.
    fn forward_residual_norm(&self, x: &Tensor, residual: &Tensor, norm: &Norm) -> candle_core::Result<Tensor> {
        let (product, bias) = self.product(x)?;
        let op =
            BiasResidualNorm { bias: bias.to_vec(), gamma: norm.gamma.clone(), beta: norm.beta.clone(), eps: norm.eps };
        product.inplace_op2(residual, &op)?;
        Ok(product)
    }
}

struct Layer {
    qkv: Linear,
    attn_out: Linear,
    attn_norm: Norm,
    ffn: Ffn,
    out_norm: Norm,
}

/// The feed-forward half of a layer.
enum Ffn {
    /// BERT: `W₂ · gelu(W₁ · x + b₁) + b₂`.
    Gelu { intermediate: Linear, output: Linear },
    /// nomic-bert: `W_down · (silu(W_gate · x) ⊙ W_up · x)`, gate and up stacked in one layer.
    SwiGlu { gate_up: Linear, down: Linear },
}

/// How a token learns where it is.
enum Positions {
    /// BERT: a learned vector per position, added to the token's.
    Learned(Embedding),
    /// nomic-bert: query and key rotated by position (NeoX halves), `(positions, d/2)` tables.
    Rotary { cos: Vec<f32>, sin: Vec<f32> },
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

/// Reads nomic-bert tensors from a GGUF file by name, as f32 values of the expected shape.
struct GgufTensors<'a> {
    content: &'a candle_core::quantized::gguf_file::Content,
    file: std::fs::File,
}

impl GgufTensors<'_> {
    fn get(&mut self, name: &str, shape: &[usize]) -> candle_core::Result<Tensor> {
        let device = Device::Cpu;
        let t = self.content.tensor(&mut self.file, name, &device)?.dequantize(&device)?;
        if t.dims() != shape {
            candle_core::bail!("tensor {name} has shape {:?}, expected {shape:?}", t.dims());
        }
        Ok(t)
    }

    fn vec(&mut self, name: &str, shape: &[usize]) -> candle_core::Result<Vec<f32>> {
        self.get(name, shape)?.flatten_all()?.to_vec1()
    }

    fn norm(&mut self, name: &str, size: usize, eps: f32) -> candle_core::Result<Norm> {
        Ok(Norm {
            gamma: self.vec(&format!("{name}.weight"), &[size])?,
            beta: self.vec(&format!("{name}.bias"), &[size])?,
            eps,
        })
    }

    fn meta(&self, key: &str) -> candle_core::Result<&candle_core::quantized::gguf_file::Value> {
        match self.content.metadata.get(key) {
            Some(v) => Ok(v),
            None => candle_core::bail!("missing metadata {key}"),
        }
    }
}

/// The BERT stack shared by the embedders and the cross-encoder: token, position and token
/// type embeddings, then the self-attention layers; the heads on top differ.
pub(crate) struct Encoder {
    word: Embedding,
    positions: Positions,
    /// One row per token type (segment A and B of a pair).
    token_types: Tensor,
    embed_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    pub(crate) hidden: usize,
    /// The longest input its position table (or rotary table) covers.
    pub(crate) max_tokens: usize,
    device: Device,
}

/// How a sentence vector is made from the last layer's token vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pooling {
    /// The mean over real tokens (MiniLM, nomic-embed).
    Mean,
    /// The first token's, `[CLS]` (bge).
    Cls,
}

/// A BERT-family sentence embedder: pooled token vectors, then L2 normalisation.
pub struct BertEmbedder {
    model_id: String,
    tokenizer: Tokenizer,
    prefixes: Prefixes,
    encoder: Encoder,
    pooling: Pooling,
    config: EmbedderConfig,
}

impl std::fmt::Debug for BertEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertEmbedder").field("model_id", &self.model_id).field("config", &self.config).finish()
    }
}

pub(crate) fn load_err(path: &Path) -> impl Fn(String) -> EngineError + '_ {
    move |message| EngineError::Load { path: path.to_path_buf(), message }
}

/// The tokenizer at `path`, truncating at `max_tokens` and padding nothing: we pad per batch
/// ourselves, and the file's fixed padding and 128-token truncation would waste work and cut
/// sentences the model can read.
pub(crate) fn tokenizer(path: &Path, max_tokens: usize) -> Result<Tokenizer, EngineError> {
    if !path.exists() {
        return Err(EngineError::Missing { path: path.to_path_buf() });
    }
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| load_err(path)(e.to_string()))?;
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams { max_length: max_tokens, ..Default::default() }))
        .map_err(|e| load_err(path)(e.to_string()))?;
    Ok(tokenizer)
}

/// The model id in caches and results: vectors of the quantized model differ slightly, so
/// caches must not mix the two.
fn precise_id(model_id: &str, precision: Precision) -> String {
    match precision {
        Precision::F32 => model_id.to_string(),
        Precision::Int8 => format!("{model_id}+int8"),
    }
}

impl BertEmbedder {
    /// Loads a nomic-bert model (nomic-embed-text v1.5) from its GGUF file, with the WordPiece
    /// vocabulary of `tokenizer` (a `tokenizer.json`). Documents are embedded after
    /// `search_document: ` and questions after `search_query: `, as the model was trained.
    pub fn load_nomic(
        gguf: &Path,
        tokenizer_path: &Path,
        model_id: &str,
        config: EmbedderConfig,
    ) -> Result<BertEmbedder, EngineError> {
        let err = load_err(gguf);
        let mut file = std::fs::File::open(gguf).map_err(|_| EngineError::Missing { path: gguf.to_path_buf() })?;
        let content = candle_core::quantized::gguf_file::Content::read(&mut file)
            .map_err(|e| err(format!("not a GGUF file: {e}")))?;
        let mut g = GgufTensors { content: &content, file };
        let build = |g: &mut GgufTensors<'_>| -> candle_core::Result<BertEmbedder> {
            let arch = g.meta("general.architecture")?.to_string()?.clone();
            if arch != "nomic-bert" {
                candle_core::bail!("architecture {arch} is not nomic-bert");
            }
            let get = |g: &GgufTensors<'_>, key: &str| -> candle_core::Result<usize> {
                Ok(g.meta(&format!("nomic-bert.{key}"))?.to_u32()? as usize)
            };
            let (h, heads, blocks, ff) = (
                get(g, "embedding_length")?,
                get(g, "attention.head_count")?,
                get(g, "block_count")?,
                get(g, "feed_forward_length")?,
            );
            let context = get(g, "context_length")?;
            let eps = g.meta("nomic-bert.attention.layer_norm_epsilon")?.to_f32()?;
            let base = g.meta("nomic-bert.rope.freq_base")?.to_f32()?;
            if heads == 0 || h % heads != 0 {
                candle_core::bail!("{heads} attention heads do not divide {h}");
            }
            let d = h / heads;
            let vocab = match g.content.tensor_infos.get("token_embd.weight") {
                Some(info) => info.shape.dims()[0],
                None => candle_core::bail!("missing tensor token_embd.weight"),
            };
            let word = Embedding::new(g.get("token_embd.weight", &[vocab, h])?, h);
            let token_types = g.get("token_types.weight", &[2, h])?;
            let embed_norm = {
                let n = g.norm("token_embd_norm", h, eps)?;
                let t = |v: Vec<f32>| Tensor::from_vec(v, h, &Device::Cpu);
                LayerNorm::new(t(n.gamma)?, t(n.beta)?, f64::from(eps))
            };
            let p = config.precision;
            let scale = 1.0 / (d as f32).sqrt();
            let mut layers = Vec::with_capacity(blocks);
            for i in 0..blocks {
                let b = format!("blk.{i}");
                // 1/√d folded into the query rows; rotation is linear, so it commutes.
                let mut qkv = g.vec(&format!("{b}.attn_qkv.weight"), &[3 * h, h])?;
                qkv[..h * h].iter_mut().for_each(|w| *w *= scale);
                let mut gate_up = g.vec(&format!("{b}.ffn_gate.weight"), &[ff, h])?;
                gate_up.extend(g.vec(&format!("{b}.ffn_up.weight"), &[ff, h])?);
                let down = g.vec(&format!("{b}.ffn_down.weight"), &[h, ff])?;
                layers.push(Layer {
                    qkv: Linear::new(&qkv, 3 * h, h, vec![0.0; 3 * h], p)?,
                    attn_out: Linear::new(&g.vec(&format!("{b}.attn_output.weight"), &[h, h])?, h, h, vec![0.0; h], p)?,
                    attn_norm: g.norm(&format!("{b}.attn_output_norm"), h, eps)?,
                    ffn: Ffn::SwiGlu {
                        gate_up: Linear::new(&gate_up, 2 * ff, h, Vec::new(), p)?,
                        down: Linear::new(&down, h, ff, vec![0.0; h], p)?,
                    },
                    out_norm: g.norm(&format!("{b}.layer_output_norm"), h, eps)?,
                });
            }
            let max_tokens = config.max_tokens.min(context);
            let half = d / 2;
            let (mut cos, mut sin) = (vec![0f32; max_tokens * half], vec![0f32; max_tokens * half]);
            for pos in 0..max_tokens {
                for j in 0..half {
                    let angle = pos as f32 / base.powf((2 * j) as f32 / d as f32);
                    cos[pos * half + j] = angle.cos();
                    sin[pos * half + j] = angle.sin();
                }
            }
            let device = Device::Cpu;
            Ok(BertEmbedder {
                model_id: precise_id(model_id, p),
                tokenizer: Tokenizer::new(tokenizers::models::wordpiece::WordPiece::default()),
                prefixes: Prefixes {
                    document: "search_document: ",
                    query: "search_query: ",
                    clustering: "clustering: ",
                },
                encoder: Encoder {
                    word,
                    positions: Positions::Rotary { cos, sin },
                    token_types,
                    embed_norm,
                    layers,
                    heads,
                    hidden: h,
                    max_tokens,
                    device,
                },
                pooling: Pooling::Mean,
                config: EmbedderConfig { max_tokens, ..config },
            })
        };
        let mut model = build(&mut g).map_err(|e| err(e.to_string()))?;
        model.tokenizer = tokenizer(tokenizer_path, model.config.max_tokens)?;
        Ok(model)
    }

    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`. `model_id`
    /// names the model in caches and results.
    pub fn load(dir: &Path, model_id: &str, config: EmbedderConfig) -> Result<BertEmbedder, EngineError> {
        let device = Device::Cpu;
        let config_path = dir.join("config.json");
        let text =
            std::fs::read_to_string(&config_path).map_err(|_| EngineError::Missing { path: config_path.clone() })?;
        let bert: BertConfig = serde_json::from_str(&text).map_err(|e| load_err(&config_path)(e.to_string()))?;
        if bert.hidden_act.as_deref().is_some_and(|a| a != "gelu") {
            return Err(load_err(&config_path)(format!(
                "hidden_act {:?} is not supported (only gelu)",
                bert.hidden_act
            )));
        }
        let tokenizer = tokenizer(&dir.join("tokenizer.json"), config.max_tokens.min(bert.max_position_embeddings))?;
        let weights_path = dir.join("model.safetensors");
        let bytes = std::fs::read(&weights_path).map_err(|_| EngineError::Missing { path: weights_path.clone() })?;
        let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &device)
            .map_err(|e| load_err(&weights_path)(e.to_string()))?;
        let build = || -> candle_core::Result<(Embedding, Embedding, Tensor, LayerNorm, Vec<Layer>)> {
            let h = bert.hidden_size;
            let e = vb.pp("embeddings");
            let word = candle_nn::embedding(bert.vocab_size, h, e.pp("word_embeddings"))?;
            let position = candle_nn::embedding(bert.max_position_embeddings, h, e.pp("position_embeddings"))?;
            let token_type = e.get((bert.type_vocab_size, h), "token_type_embeddings.weight")?;
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
                    ffn: Ffn::Gelu {
                        intermediate: Linear::load(
                            &l.pp("intermediate"),
                            &["dense"],
                            &[1.0],
                            h,
                            bert.intermediate_size,
                            p,
                        )?,
                        output: Linear::load(&l.pp("output"), &["dense"], &[1.0], bert.intermediate_size, h, p)?,
                    },
                    out_norm: Norm::load(l.pp("output.LayerNorm"), h, bert.layer_norm_eps)?,
                });
            }
            Ok((word, position, token_type, embed_norm, layers))
        };
        let (word, position, token_type, embed_norm, layers) =
            build().map_err(|e| load_err(&weights_path)(e.to_string()))?;
        Ok(BertEmbedder {
            model_id: precise_id(model_id, config.precision),
            tokenizer,
            prefixes: Prefixes::default(),
            encoder: Encoder {
                word,
                positions: Positions::Learned(position),
                token_types: token_type,
                embed_norm,
                layers,
                heads: bert.num_attention_heads,
                hidden: bert.hidden_size,
                max_tokens: bert.max_position_embeddings,
                device,
            },
            pooling: Pooling::Mean,
            config,
        })
    }

    /// Loads BAAI/bge-small-en-v1.5 from the int8 ONNX file and `tokenizer.json` in `dir`:
    /// `[CLS]` pooling; questions are embedded after the instruction the model was trained
    /// with, passages as they are.
    pub fn load_bge(dir: &Path, model_id: &str, config: EmbedderConfig) -> Result<BertEmbedder, EngineError> {
        let path = dir.join("model.onnx");
        let bytes = std::fs::read(&path).map_err(|_| EngineError::Missing { path: path.clone() })?;
        let onnx = Onnx::parse(&bytes).map_err(load_err(&path))?;
        let encoder = Encoder::from_onnx(&onnx, "", 12, config.precision).map_err(load_err(&path))?;
        let max_tokens = config.max_tokens.min(encoder.max_tokens);
        Ok(BertEmbedder {
            model_id: precise_id(model_id, config.precision),
            tokenizer: tokenizer(&dir.join("tokenizer.json"), max_tokens)?,
            prefixes: Prefixes {
                document: "",
                query: "Represent this sentence for searching relevant passages: ",
                clustering: "",
            },
            encoder,
            pooling: Pooling::Cls,
            config: EmbedderConfig { max_tokens, ..config },
        })
    }

    /// Embeds one batch of token id sequences, padded to the longest.
    fn forward(&self, batch: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let (x, mask) = self.encoder.forward(batch, None)?;
        let pooled = match self.pooling {
            Pooling::Mean => {
                let m = mask.unsqueeze(2)?;
                let summed = x.broadcast_mul(&m)?.sum(1)?;
                let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
                summed.broadcast_div(&counts)?
            }
            Pooling::Cls => x.narrow(1, 0, 1)?.squeeze(1)?,
        };
        let norm = pooled.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        pooled.broadcast_div(&norm)?.to_vec2::<f32>()
    }

    /// Embeds `texts`, each after `prefix`.
    fn run(&self, texts: &[&str], prefix: &str) -> Result<Vec<Vec<f32>>, EngineError> {
        let err = |message: String| EngineError::Run { model: self.model_id.clone(), message };
        let inputs: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let encodings = self.tokenizer.encode_batch(inputs, true).map_err(|e| err(e.to_string()))?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        let lengths: Vec<usize> = ids.iter().map(|s| s.len()).collect();
        in_batches(&lengths, self.config.batch_size, |batch| {
            self.forward(&batch.iter().map(|&i| ids[i]).collect::<Vec<_>>())
        })
        .map_err(|e| err(e.to_string()))
    }
}

/// `forward` over the inputs of `lengths` tokens in [`length_batches`], the batches side by
/// side, one output per input back in input order. `forward` gets a batch's input positions.
pub(crate) fn in_batches<T: Clone + Default + Send>(
    lengths: &[usize],
    batch_size: usize,
    forward: impl Fn(&[usize]) -> candle_core::Result<Vec<T>> + Sync,
) -> candle_core::Result<Vec<T>> {
    let chunks = length_batches(lengths, batch_size);
    let results: Vec<candle_core::Result<Vec<T>>> = chunks.par_iter().map(|chunk| forward(chunk)).collect();
    let mut out = vec![T::default(); lengths.len()];
    for (chunk, outputs) in chunks.iter().zip(results) {
        for (&i, o) in chunk.iter().zip(outputs?) {
            out[i] = o;
        }
    }
    Ok(out)
}

/// Input positions grouped into batches, for sequences of `lengths` tokens.
///
/// Length bucketing: sorted by length so each batch pads only to its own longest. Batches run
/// side by side, one per core: the element-wise work between matmuls (norms, softmax, GELU)
/// is single-threaded within a batch, so one batch at a time would leave cores idle. Matmuls
/// still split across cores through rayon's pool. A batch is also cut where the next input is
/// over twice as long as its first, so that padding never doubles a batch's work: one long
/// turn embedded with its short sentences once padded them all to its length (21 texts of a
/// chat turn at 256 tokens each, about six times the real work).
pub(crate) fn length_batches(lengths: &[usize], batch_size: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| (lengths[i], i));
    let mut chunks = Vec::new();
    let mut start = 0;
    for end in 1..=order.len() {
        let full = end - start >= batch_size.max(1);
        if end == order.len() || full || lengths[order[end]] > 2 * lengths[order[start]].max(8) {
            chunks.push(order[start..end].to_vec());
            start = end;
        }
    }
    chunks
}

impl Encoder {
    /// A classic BERT (learned positions, GELU) from an ONNX file that ONNX Runtime's dynamic
    /// int8 quantization wrote: embedding tables dequantized, linear layers int8 (see
    /// [`Linear::from_onnx`]). `prefix` is what the module names start with (`bert.` in a
    /// model with a head on top); the head count is not stored in the weights.
    pub(crate) fn from_onnx(
        onnx: &Onnx<'_>,
        prefix: &str,
        heads: usize,
        precision: Precision,
    ) -> Result<Encoder, String> {
        let device = Device::Cpu;
        let table = |name: &str| -> Result<Tensor, String> {
            let (dims, v) = onnx.dequantized(&format!("{prefix}embeddings.{name}.weight"))?;
            Tensor::from_vec(v, dims, &device).map_err(|e| e.to_string())
        };
        let word = table("word_embeddings")?;
        let h = word.dim(1).map_err(|e| e.to_string())?;
        if heads == 0 || h % heads != 0 {
            return Err(format!("{heads} attention heads do not divide {h}"));
        }
        let position = table("position_embeddings")?;
        let max_tokens = position.dim(0).map_err(|e| e.to_string())?;
        // BERT's LayerNorm epsilon; ONNX keeps it in a graph constant we do not read.
        const EPS: f32 = 1e-12;
        let norm = |name: &str| -> Result<Norm, String> {
            Ok(Norm {
                gamma: onnx.floats(&format!("{name}.weight"), &[h])?,
                beta: onnx.floats(&format!("{name}.bias"), &[h])?,
                eps: EPS,
            })
        };
        let embed_norm = {
            let n = norm(&format!("{prefix}embeddings.LayerNorm"))?;
            let t = |v: Vec<f32>| Tensor::from_vec(v, h, &device).map_err(|e| e.to_string());
            LayerNorm::new(t(n.gamma)?, t(n.beta)?, f64::from(EPS))
        };
        let scale = 1.0 / ((h / heads) as f32).sqrt();
        let mut layers = Vec::new();
        while onnx
            .initializers
            .contains_key(&format!("{prefix}encoder.layer.{}.attention.self.query.bias", layers.len()))
        {
            let l = format!("{prefix}encoder.layer.{}", layers.len());
            let m = |s: &str| format!("{l}.{s}");
            let (q, k, v) = (m("attention.self.query"), m("attention.self.key"), m("attention.self.value"));
            let p = precision;
            layers.push(Layer {
                qkv: Linear::from_onnx(onnx, &[&q, &k, &v], &[scale, 1.0, 1.0], p)?,
                attn_out: Linear::from_onnx(onnx, &[&m("attention.output.dense")], &[1.0], p)?,
                attn_norm: norm(&m("attention.output.LayerNorm"))?,
                ffn: Ffn::Gelu {
                    intermediate: Linear::from_onnx(onnx, &[&m("intermediate.dense")], &[1.0], p)?,
                    output: Linear::from_onnx(onnx, &[&m("output.dense")], &[1.0], p)?,
                },
                out_norm: norm(&m("output.LayerNorm"))?,
            });
        }
        if layers.is_empty() {
            return Err(format!("no layers named {prefix}encoder.layer.N"));
        }
        Ok(Encoder {
            word: Embedding::new(word, h),
            positions: Positions::Learned(Embedding::new(position, h)),
            token_types: table("token_type_embeddings")?,
            embed_norm,
            layers,
            heads,
            hidden: h,
            max_tokens,
            device,
        })
    }

    /// The last layer's token vectors `(b, t, h)` for a batch of token id sequences padded to
    /// the longest, and the mask of real tokens `(b, t)`. `types` gives each token's type
    /// (segment) where the input is a pair; without it every token is type 0. Rows of padding
    /// are zero.
    ///
    /// The sequences run packed, one after another with no padding: every step but attention
    /// is per token, and attention reads each sequence's rows (and rotates them, for rotary
    /// positions), so padding would only add work (a quarter more in recall's slices of eight
    /// candidates of mixed length). Only the result is padded, for pooling.
    pub(crate) fn forward(&self, batch: &[&[u32]], types: Option<&[&[u32]]>) -> candle_core::Result<(Tensor, Tensor)> {
        let (b, t) = (batch.len(), batch.iter().map(|s| s.len()).max().unwrap_or(0));
        let h = self.hidden;
        let lengths: Vec<usize> = batch.iter().map(|s| s.len()).collect();
        let mut mask = vec![0f32; b * t];
        for (i, &len) in lengths.iter().enumerate() {
            mask[i * t..i * t + len].iter_mut().for_each(|m| *m = 1.0);
        }
        let mask = Tensor::from_vec(mask, (b, t), &self.device)?;
        let packed: Vec<f32> = self.forward_packed(batch, types, &lengths)?.flatten_all()?.to_vec1()?;
        let mut padded = vec![0f32; b * t * h];
        let mut at = 0;
        for (i, &len) in lengths.iter().enumerate() {
            padded[i * t * h..][..len * h].copy_from_slice(&packed[at..at + len * h]);
            at += len * h;
        }
        Ok((Tensor::from_vec(padded, (b, t, h), &self.device)?, mask))
    }

    /// The token type vector of every token of `batch`, packed, as rows to add (missing types
    /// are type 0); `None` without types, where the caller adds type 0's vector to every row.
    fn type_rows(&self, batch: &[&[u32]], types: Option<&[&[u32]]>) -> candle_core::Result<Option<Tensor>> {
        let Some(types) = types else { return Ok(None) };
        let mut ids = Vec::new();
        for (i, s) in batch.iter().enumerate() {
            let ty = types.get(i).copied().unwrap_or(&[]);
            ids.extend((0..s.len()).map(|j| ty.get(j).copied().unwrap_or(0)));
        }
        let n = ids.len();
        Ok(Some(self.token_types.index_select(&Tensor::from_vec(ids, n, &self.device)?, 0)?))
    }

    /// The last layer's vectors `(Σ lengths, h)` of the sequences packed; `lengths` are the
    /// sequences' token counts.
    fn forward_packed(
        &self,
        batch: &[&[u32]],
        types: Option<&[&[u32]]>,
        lengths: &[usize],
    ) -> candle_core::Result<Tensor> {
        let n: usize = lengths.iter().sum();
        let ids: Vec<u32> = batch.iter().flat_map(|s| s.iter().copied()).collect();
        let mut x = self.word.forward(&Tensor::from_vec(ids, n, &self.device)?)?;
        x = match self.type_rows(batch, types)? {
            None => x.broadcast_add(&self.token_types.get(0)?)?,
            Some(rows) => (x + rows)?,
        };
        let rotation = match &self.positions {
            Positions::Learned(table) => {
                let positions: Vec<u32> = lengths.iter().flat_map(|&len| 0..len as u32).collect();
                x = (x + table.forward(&Tensor::from_vec(positions, n, &self.device)?)?)?;
                None
            }
            Positions::Rotary { cos, sin } => Some(Rotation { cos, sin }),
        };
        let mut x = self.embed_norm.forward(&x)?;
        for layer in &self.layers {
            let (product, bias) = layer.qkv.product(&x)?;
            // The 1/√d scale is folded into the query weights at load time.
            let attention = Attention { lengths: lengths.to_vec(), heads: self.heads, bias: bias.to_vec(), rotation };
            let ctx = product.apply_op1_no_bwd(&attention)?;
            x = layer.rest(&ctx, &x)?;
        }
        Ok(x)
    }
}

impl Layer {
    /// A layer after attention: the output projection with residual and norm, then the
    /// feed-forward block with its own.
    fn rest(&self, ctx: &Tensor, x: &Tensor) -> candle_core::Result<Tensor> {
        let a = self.attn_out.forward_residual_norm(ctx, x, &self.attn_norm)?;
        match &self.ffn {
            Ffn::Gelu { intermediate, output } => {
                output.forward_residual_norm(&intermediate.forward_gelu(&a)?, &a, &self.out_norm)
            }
            Ffn::SwiGlu { gate_up, down } => {
                down.forward_residual_norm(&gate_up.forward_swiglu(&a)?, &a, &self.out_norm)
            }
        }
    }
}

impl Embedder for BertEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.encoder.hidden
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.run(texts, self.prefixes.document)
            .map_err(|e| EmbedError::Backend { model: self.model_id.clone(), message: e.to_string() })
    }

    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.run(texts, self.prefixes.query)
            .map_err(|e| EmbedError::Backend { model: self.model_id.clone(), message: e.to_string() })
    }

    fn embed_clustering(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.run(texts, self.prefixes.clustering)
            .map_err(|e| EmbedError::Backend { model: self.model_id.clone(), message: e.to_string() })
    }
}
