//! A llama-family decoder (the llama and qwen2 GGUF architectures) whose linear layers run as
//! 8-bit integer products ([`crate::int8`]).
//!
//! Why not candle-transformers' quantized models: their matmuls multiply the 4-bit blocks by
//! 8-bit activation blocks one dot product at a time, which is fine for one token but leaves a
//! prompt of a thousand tokens far from what the machine can do (a fifth of llama.cpp's speed
//! here). Here every weight matrix is dequantized once at load and requantized to 8 bits per
//! output channel, so a prompt runs through the same VNNI kernel as the embedder, and one
//! token's step reads 8-bit weights (the output projection too, applied to the last position
//! only). The arithmetic of the rest follows candle-transformers (RMSNorm, rotary embeddings:
//! interleaved for llama, NeoX for qwen2; grouped-query attention; SwiGLU).
//!
//! There are two paths through the same weights and cache. A prompt goes through candle
//! tensors ([`Decoder::forward`] with several ids), where each op works on a whole chunk of
//! tokens. One generated token ([`Decoder::step`]) goes through plain loops over slices:
//! with a single row, candle's per-op cost (a new tensor, a thread-pool hand-off) was most of
//! a step for the small models, so the step fuses what it can (query, key and value in one
//! product, gate and up in another) and spends its time reading weights and the cache.

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use rayon::prelude::*;

use crate::int8::Int8Matrix;

/// The shape of a decoder: what the GGUF metadata says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) hidden: usize,
    pub(crate) ff: usize,
    pub(crate) vocab: usize,
    pub(crate) blocks: usize,
    pub(crate) heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) eps: f32,
    pub(crate) freq_base: f32,
    /// Rotary embeddings on halves (qwen2) rather than on interleaved pairs (llama).
    pub(crate) neox: bool,
    /// Biases on the query, key and value projections (qwen2).
    pub(crate) qkv_bias: bool,
    pub(crate) context_length: usize,
}

struct Layer {
    attn_norm: Vec<f32>,
    /// Query, key and value projections stacked (outputs in that order): one pass over the
    /// input for all three. Weights are quantized per output channel, so stacking changes no
    /// number.
    qkv: Int8Matrix,
    qkv_bias: Option<Vec<f32>>,
    o: Int8Matrix,
    ffn_norm: Vec<f32>,
    /// Gate and up projections stacked.
    gate_up: Int8Matrix,
    down: Int8Matrix,
    cache: Kv,
}

/// A layer's keys and values, one block per key-value head (`[head][position][d]`) with room
/// to grow: a step appends its row in place, and attention reads each head's rows in order.
#[derive(Default)]
struct Kv {
    k: Vec<f32>,
    v: Vec<f32>,
    heads: usize,
    d: usize,
    cap: usize,
    len: usize,
}

impl Kv {
    fn new(heads: usize, d: usize) -> Kv {
        Kv { heads, d, ..Kv::default() }
    }

    fn clear(&mut self) {
        *self = Kv::new(self.heads, self.d);
    }

    /// Forgets every position from `len` on; the rows before it stay as they were.
    fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Makes room for `t` more positions; doubling keeps growth O(1) per token.
    fn reserve(&mut self, t: usize) {
        if self.len + t <= self.cap {
            return;
        }
        let cap = (2 * self.cap).max(self.len + t).max(256);
        let (heads, d, len) = (self.heads, self.d, self.len);
        let grow = |old: &[f32]| {
            let mut buf = vec![0f32; heads * cap * d];
            for h in 0..heads {
                buf[h * cap * d..][..len * d].copy_from_slice(&old[h * self.cap * d..][..len * d]);
            }
            buf
        };
        self.k = grow(&self.k);
        self.v = grow(&self.v);
        self.cap = cap;
    }

    /// Appends `t` positions given as `[head][t][d]` blocks.
    fn append(&mut self, k: &[f32], v: &[f32], t: usize) {
        self.reserve(t);
        let (d, cap, len) = (self.d, self.cap, self.len);
        for h in 0..self.heads {
            self.k[(h * cap + len) * d..][..t * d].copy_from_slice(&k[h * t * d..][..t * d]);
            self.v[(h * cap + len) * d..][..t * d].copy_from_slice(&v[h * t * d..][..t * d]);
        }
        self.len += t;
    }

    /// Head `h`'s keys and values so far, `len × d` each.
    fn head(&self, h: usize) -> (&[f32], &[f32]) {
        let at = h * self.cap * self.d;
        (&self.k[at..][..self.len * self.d], &self.v[at..][..self.len * self.d])
    }

    /// Everything so far as `(1, heads, len, d)` tensors, for the prompt path.
    fn tensors(&self, device: &Device) -> candle_core::Result<(Tensor, Tensor)> {
        let gather = |part: &[f32]| {
            let mut out = Vec::with_capacity(self.heads * self.len * self.d);
            for h in 0..self.heads {
                out.extend_from_slice(&part[h * self.cap * self.d..][..self.len * self.d]);
            }
            Tensor::from_vec(out, (1, self.heads, self.len, self.d), device)
        };
        Ok((gather(&self.k)?, gather(&self.v)?))
    }
}

/// The decoder's weights and its key-value cache.
pub(crate) struct Decoder {
    cfg: Config,
    /// `vocab × hidden`, row-major.
    embeddings: Vec<f32>,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    output: Int8Matrix,
    head_dim: usize,
    /// Rotation angles' cosines and sines, `context_length × head_dim / 2`.
    cos: Vec<f32>,
    sin: Vec<f32>,
    device: Device,
}

fn md_u32(ct: &gguf_file::Content, key: &str) -> candle_core::Result<usize> {
    match ct.metadata.get(key) {
        Some(v) => Ok(v.to_u32()? as usize),
        None => candle_core::bail!("missing GGUF metadata {key}"),
    }
}

impl Decoder {
    pub(crate) fn load<R: std::io::Read + std::io::Seek>(
        ct: &gguf_file::Content,
        reader: &mut R,
        arch: &str,
        context_length: usize,
    ) -> candle_core::Result<Decoder> {
        let eps = match ct.metadata.get(&format!("{arch}.attention.layer_norm_rms_epsilon")) {
            Some(v) => v.to_f32()?,
            None => candle_core::bail!("missing GGUF metadata {arch}.attention.layer_norm_rms_epsilon"),
        };
        let cfg = Config {
            hidden: md_u32(ct, &format!("{arch}.embedding_length"))?,
            ff: md_u32(ct, &format!("{arch}.feed_forward_length"))?,
            vocab: 0,
            blocks: md_u32(ct, &format!("{arch}.block_count"))?,
            heads: md_u32(ct, &format!("{arch}.attention.head_count"))?,
            kv_heads: md_u32(ct, &format!("{arch}.attention.head_count_kv"))?,
            eps,
            freq_base: ct
                .metadata
                .get(&format!("{arch}.rope.freq_base"))
                .and_then(|v| v.to_f32().ok())
                .unwrap_or(10_000.0),
            neox: arch == "qwen2",
            qkv_bias: arch == "qwen2",
            context_length,
        };
        let device = Device::Cpu;
        let vocab = match ct.tensor_infos.get("token_embd.weight") {
            Some(info) => info.shape.dims()[0],
            None => candle_core::bail!("missing GGUF tensor token_embd.weight"),
        };
        let cfg = Config { vocab, ..cfg };
        // Weights the file holds as 4-bit blocks get a 4-bit copy for decoding; 6- and 8-bit
        // ones (Q4_K_M keeps some layers in Q6_K) stay int8 only, so as not to lose bits.
        let four_bit = |name: &str| {
            use candle_core::quantized::GgmlDType;
            ct.tensor_infos
                .get(name)
                .is_some_and(|t| matches!(t.ggml_dtype, GgmlDType::Q4_0 | GgmlDType::Q4_1 | GgmlDType::Q4K))
        };
        Decoder::build(cfg, four_bit, |name, shape| {
            if !ct.tensor_infos.contains_key(name) {
                return Ok(None);
            }
            let t = ct.tensor(reader, name, &device)?.dequantize(&device)?;
            if t.dims() != shape {
                candle_core::bail!("GGUF tensor {name} has shape {:?}, expected {shape:?}", t.dims());
            }
            Ok(Some(t.flatten_all()?.to_vec1()?))
        })
    }

    /// Builds the decoder from its tensors by GGUF name: `tensor(name, shape)` gives the
    /// row-major values of that shape, or `None` when the file has no such tensor;
    /// `four_bit(name)` says whether the file held it as 4-bit blocks (see
    /// [`Int8Matrix::quantize_with_4bit_decoding`]).
    pub(crate) fn build(
        cfg: Config,
        four_bit: impl Fn(&str) -> bool,
        mut tensor: impl FnMut(&str, &[usize]) -> candle_core::Result<Option<Vec<f32>>>,
    ) -> candle_core::Result<Decoder> {
        let Config { hidden, ff, vocab, heads, kv_heads, .. } = cfg;
        if heads == 0 || kv_heads == 0 || hidden % heads != 0 || heads % kv_heads != 0 {
            candle_core::bail!("{heads} attention heads and {kv_heads} key-value heads do not divide {hidden}");
        }
        let d = hidden / heads;
        let mut need = |name: &str, shape: &[usize]| match tensor(name, shape)? {
            Some(t) => Ok(t),
            None => candle_core::bail!("missing GGUF tensor {name}"),
        };
        let embeddings = need("token_embd.weight", &[vocab, hidden])?;
        let norm = need("output_norm.weight", &[hidden])?;
        let mut layers = Vec::with_capacity(cfg.blocks);
        for i in 0..cfg.blocks {
            let p = format!("blk.{i}");
            let linear = |w: &[f32], n: usize, k: usize, names: &[&str]| {
                if names.iter().all(|n| four_bit(&format!("{p}.{n}.weight"))) {
                    Int8Matrix::quantize_with_4bit_decoding(w, n, k)
                } else {
                    Int8Matrix::quantize(w, n, k)
                }
            };
            let (nq, nkv) = (heads * d, kv_heads * d);
            let mut qkv = need(&format!("{p}.attn_q.weight"), &[nq, hidden])?;
            qkv.extend(need(&format!("{p}.attn_k.weight"), &[nkv, hidden])?);
            qkv.extend(need(&format!("{p}.attn_v.weight"), &[nkv, hidden])?);
            let qkv_bias = if cfg.qkv_bias {
                let mut b = need(&format!("{p}.attn_q.bias"), &[nq])?;
                b.extend(need(&format!("{p}.attn_k.bias"), &[nkv])?);
                b.extend(need(&format!("{p}.attn_v.bias"), &[nkv])?);
                Some(b)
            } else {
                None
            };
            let mut gate_up = need(&format!("{p}.ffn_gate.weight"), &[ff, hidden])?;
            gate_up.extend(need(&format!("{p}.ffn_up.weight"), &[ff, hidden])?);
            layers.push(Layer {
                attn_norm: need(&format!("{p}.attn_norm.weight"), &[hidden])?,
                qkv: linear(&qkv, nq + 2 * nkv, hidden, &["attn_q", "attn_k", "attn_v"]),
                qkv_bias,
                o: linear(&need(&format!("{p}.attn_output.weight"), &[hidden, nq])?, hidden, nq, &["attn_output"]),
                ffn_norm: need(&format!("{p}.ffn_norm.weight"), &[hidden])?,
                gate_up: linear(&gate_up, 2 * ff, hidden, &["ffn_gate", "ffn_up"]),
                down: linear(&need(&format!("{p}.ffn_down.weight"), &[hidden, ff])?, hidden, ff, &["ffn_down"]),
                cache: Kv::new(kv_heads, d),
            });
        }
        // Tied embeddings (Qwen2.5 0.5B, SmolLM2): the input table is the output projection.
        let output = match tensor("output.weight", &[vocab, hidden])? {
            Some(w) => Int8Matrix::quantize(&w, vocab, hidden),
            None => Int8Matrix::quantize(&embeddings, vocab, hidden),
        };
        let half = d / 2;
        let (mut cos, mut sin) = (vec![0f32; cfg.context_length * half], vec![0f32; cfg.context_length * half]);
        for pos in 0..cfg.context_length {
            for i in 0..half {
                let theta = 1.0 / cfg.freq_base.powf((2 * i) as f32 / d as f32);
                let angle = pos as f32 * theta;
                cos[pos * half + i] = angle.cos();
                sin[pos * half + i] = angle.sin();
            }
        }
        Ok(Decoder { cfg, embeddings, layers, norm, output, head_dim: d, cos, sin, device: Device::Cpu })
    }

    pub(crate) fn clear(&mut self) {
        for l in &mut self.layers {
            l.cache.clear();
        }
    }

    /// Keeps the cache of the first `len` positions only, so that a prompt sharing them runs
    /// from `len` on.
    pub(crate) fn truncate(&mut self, len: usize) {
        for l in &mut self.layers {
            l.cache.truncate(len);
        }
    }

    /// Rotates `x` (`(1, heads, t, d)`) by the angles of its positions, `(cos, sin)` as
    /// `(t, d/2)` tables.
    fn rope(&self, x: &Tensor, (cos, sin): &(Tensor, Tensor)) -> candle_core::Result<Tensor> {
        if self.cfg.neox {
            candle_nn::rotary_emb::rope(&x.contiguous()?, cos, sin)
        } else {
            candle_nn::rotary_emb::rope_i(&x.contiguous()?, cos, sin)
        }
    }

    /// Runs `ids` (positions `pos..`) through the model and returns the logits of the last one.
    pub(crate) fn forward(&mut self, ids: &[u32], pos: usize) -> candle_core::Result<Vec<f32>> {
        if pos == 0 {
            self.clear();
        }
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= self.cfg.vocab) {
            candle_core::bail!("token id {bad} is outside the vocabulary of {}", self.cfg.vocab);
        }
        if pos + ids.len() > self.cfg.context_length {
            candle_core::bail!("position {} is past the context of {}", pos + ids.len(), self.cfg.context_length);
        }
        if self.layers.first().is_some_and(|l| l.cache.len != pos) {
            candle_core::bail!("position {pos} does not follow the cached {}", self.layers[0].cache.len);
        }
        match ids {
            [] => candle_core::bail!("no tokens to run"),
            [id] => Ok(self.step(*id, pos)),
            _ => self.prompt(ids, pos),
        }
    }

    /// The prompt path: a chunk of tokens at a time, through candle tensors.
    fn prompt(&mut self, ids: &[u32], pos: usize) -> candle_core::Result<Vec<f32>> {
        let t = ids.len();
        let Config { hidden, heads, kv_heads, eps, .. } = self.cfg;
        let d = self.head_dim;
        let dev = self.device.clone();
        let rows: Vec<f32> = ids.iter().flat_map(|&id| self.row(id).iter().copied()).collect();
        let mut x = Tensor::from_vec(rows, (t, hidden), &dev)?;
        // A causal mask for the chunk over everything cached before it.
        let m: Vec<f32> =
            (0..t).flat_map(|i| (0..pos + t).map(move |j| if j > pos + i { f32::NEG_INFINITY } else { 0.0 })).collect();
        let scale = 1.0 / (d as f64).sqrt();
        let group = heads / kv_heads;
        // One mask row per query head of a group, built once for all layers.
        let mask = Tensor::from_vec(m, (t, pos + t), &dev)?.repeat((group, 1))?.reshape((1, 1, group * t, pos + t))?;
        // The chunk's rotation angles, also built once for all layers.
        let half = d / 2;
        let angles = (
            Tensor::from_slice(&self.cos[pos * half..(pos + t) * half], (t, half), &dev)?,
            Tensor::from_slice(&self.sin[pos * half..(pos + t) * half], (t, half), &dev)?,
        );
        for li in 0..self.layers.len() {
            let layer = &self.layers[li];
            let h = candle_nn::ops::rms_norm(&x, &Tensor::from_slice(&layer.attn_norm, hidden, &dev)?, eps)?;
            let mut qkv = h.apply_op1_no_bwd(&layer.qkv)?;
            if let Some(b) = &layer.qkv_bias {
                qkv = qkv.broadcast_add(&Tensor::from_slice(b, b.len(), &dev)?)?;
            }
            let split = |at: usize, n: usize| -> candle_core::Result<Tensor> {
                qkv.narrow(1, at * d, n * d)?.contiguous()?.reshape((t, n, d))?.transpose(0, 1)?.contiguous()
            };
            let q = self.rope(&split(0, heads)?.unsqueeze(0)?, &angles)?;
            let k = self.rope(&split(heads, kv_heads)?.unsqueeze(0)?, &angles)?;
            let v = split(heads + kv_heads, kv_heads)?;
            let (kv, vv): (Vec<f32>, Vec<f32>) = (k.flatten_all()?.to_vec1()?, v.flatten_all()?.to_vec1()?);
            self.layers[li].cache.append(&kv, &vv, t);
            let layer = &self.layers[li];
            let (k, v) = layer.cache.tensors(&dev)?;
            // Grouped-query attention: each key-value head serves heads / kv_heads query heads,
            // done by folding the group into the query's time axis instead of copying keys.
            let q = q.reshape((1, kv_heads, group * t, d))?;
            let att = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&mask)?;
            let att = candle_nn::ops::softmax_last_dim(&att)?;
            let y = att.matmul(&v)?.reshape((heads, t, d))?.transpose(0, 1)?.reshape((t, heads * d))?;
            let x1 = (y.contiguous()?.apply_op1_no_bwd(&layer.o)? + &x)?;
            let h = candle_nn::ops::rms_norm(&x1, &Tensor::from_slice(&layer.ffn_norm, hidden, &dev)?, eps)?;
            let gu = layer.gate_up.matmul(&h.flatten_all()?.to_vec1()?, t);
            let down = layer.down.matmul(&swiglu(&gu, self.cfg.ff), t);
            x = (Tensor::from_vec(down, (t, hidden), &dev)? + x1)?;
        }
        let last: Vec<f32> = x.narrow(0, t - 1, 1)?.flatten_all()?.to_vec1()?;
        Ok(self.logits(last))
    }

    /// One token at position `pos`: the decoding step, in plain loops (see the module comment).
    pub(crate) fn step(&mut self, id: u32, pos: usize) -> Vec<f32> {
        let Config { heads, kv_heads, eps, ff, .. } = self.cfg;
        let d = self.head_dim;
        let (nq, nkv) = (heads * d, kv_heads * d);
        let group = heads / kv_heads;
        let half = d / 2;
        let (cos, sin) = (&self.cos[pos * half..][..half], &self.sin[pos * half..][..half]);
        let neox = self.cfg.neox;
        let mut x = self.row(id).to_vec();
        let mut att = vec![0f32; nq];
        for layer in &mut self.layers {
            let h = rms_norm(&x, &layer.attn_norm, eps);
            let mut qkv = layer.qkv.matmul(&h, 1);
            if let Some(b) = &layer.qkv_bias {
                qkv.iter_mut().zip(b).for_each(|(v, b)| *v += b);
            }
            for head in qkv[..nq + nkv].chunks_exact_mut(d) {
                rotate(head, cos, sin, neox);
            }
            // Keys and values of one position are already `[head][1][d]` blocks.
            layer.cache.append(&qkv[nq..nq + nkv], &qkv[nq + nkv..], 1);
            attend(&qkv[..nq], &layer.cache, group, &mut att);
            let o = layer.o.matmul(&att, 1);
            x.iter_mut().zip(&o).for_each(|(x, o)| *x += o);
            let h = rms_norm(&x, &layer.ffn_norm, eps);
            let gu = layer.gate_up.matmul(&h, 1);
            let down = layer.down.matmul(&swiglu(&gu, ff), 1);
            x.iter_mut().zip(&down).for_each(|(x, o)| *x += o);
        }
        self.logits(x)
    }

    fn row(&self, id: u32) -> &[f32] {
        let hidden = self.cfg.hidden;
        &self.embeddings[id as usize * hidden..][..hidden]
    }

    /// The final norm and the output projection, for one position.
    fn logits(&self, x: Vec<f32>) -> Vec<f32> {
        self.output.matmul(&rms_norm(&x, &self.norm, self.cfg.eps), 1)
    }
}

/// Cached positions per attention task: a fixed size, so the sums (and the generated tokens) do
/// not depend on the machine's thread count.
const ATTEND_BLOCK: usize = 256;

/// One task's share of a group's attention: per query head the largest score, the sum of
/// `exp(score − max)` and the values weighted by it, over one block of positions.
struct Partial {
    max: Vec<f32>,
    sum: Vec<f32>,
    out: Vec<f32>,
}

/// Grouped-query attention of one new position (`q`, `[head][d]`, rotated) over `cache`, into
/// `att`. A task is one key-value head's group of query heads over one block of positions:
/// each cached key and value row is read once for its whole group (Qwen 0.5B: seven query
/// heads share a row) instead of once per query head, and long caches still split into enough
/// tasks for every thread. The blocks are merged as in split softmax ("flash decoding").
fn attend(q: &[f32], cache: &Kv, group: usize, att: &mut [f32]) {
    let (d, len) = (cache.d, cache.len);
    let scale = 1.0 / (d as f32).sqrt();
    let blocks = len.div_ceil(ATTEND_BLOCK).max(1);
    let partials: Vec<Partial> = (0..cache.heads * blocks)
        .into_par_iter()
        .map(|task| {
            let (kv, b) = (task / blocks, task % blocks);
            let (keys, values) = cache.head(kv);
            let span = b * ATTEND_BLOCK..((b + 1) * ATTEND_BLOCK).min(len);
            let n = span.len();
            let queries = &q[kv * group * d..][..group * d];
            // `scores[g * n + p]`: query head g of the group against the block's position p.
            let mut scores = vec![0f32; group * n];
            for (p, k) in keys[span.start * d..span.end * d].chunks_exact(d).enumerate() {
                for (g, q) in queries.chunks_exact(d).enumerate() {
                    scores[g * n + p] = dot(q, k) * scale;
                }
            }
            let (mut max, mut sum) = (vec![f32::NEG_INFINITY; group], vec![0f32; group]);
            for (g, row) in scores.chunks_exact_mut(n.max(1)).enumerate() {
                max[g] = row.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
                for s in row.iter_mut() {
                    *s = (*s - max[g]).exp();
                    sum[g] += *s;
                }
            }
            let mut out = vec![0f32; group * d];
            for (p, v) in values[span.start * d..span.end * d].chunks_exact(d).enumerate() {
                for (g, o) in out.chunks_exact_mut(d).enumerate() {
                    let w = scores[g * n + p];
                    o.iter_mut().zip(v).for_each(|(o, v)| *o += w * v);
                }
            }
            Partial { max, sum, out }
        })
        .collect();
    for (kv, parts) in partials.chunks_exact(blocks).enumerate() {
        for g in 0..group {
            let top = parts.iter().fold(f32::NEG_INFINITY, |m, p| m.max(p.max[g]));
            let o = &mut att[(kv * group + g) * d..][..d];
            o.fill(0.0);
            let mut total = 0f32;
            for p in parts {
                let w = (p.max[g] - top).exp();
                total += w * p.sum[g];
                o.iter_mut().zip(&p.out[g * d..][..d]).for_each(|(o, v)| *o += w * v);
            }
            o.iter_mut().for_each(|o| *o /= total);
        }
    }
}

/// RMSNorm of one row, as candle computes it (mean of squares in f32).
fn rms_norm(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let mean = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let inv = 1.0 / (mean + eps).sqrt();
    x.iter().zip(weight).map(|(v, w)| v * inv * w).collect()
}

/// `silu(gate) · up` for rows of `[gate (ff) | up (ff)]`, as the stacked product gives them.
fn swiglu(gu: &[f32], ff: usize) -> Vec<f32> {
    let mut out = vec![0f32; gu.len() / 2];
    out.par_chunks_mut(ff).zip(gu.par_chunks(2 * ff)).for_each(|(o, row)| {
        let (g, u) = row.split_at(ff);
        for ((o, &g), &u) in o.iter_mut().zip(g).zip(u) {
            *o = g / (1.0 + (-g).exp()) * u;
        }
    });
    out
}

/// Rotates one head's vector in place: pairs `(i, i + d/2)` (NeoX) or `(2i, 2i + 1)`.
fn rotate(x: &mut [f32], cos: &[f32], sin: &[f32], neox: bool) {
    let half = x.len() / 2;
    for i in 0..half {
        let (a, b) = if neox { (i, i + half) } else { (2 * i, 2 * i + 1) };
        let (x0, x1) = (x[a], x[b]);
        x[a] = x0 * cos[i] - x1 * sin[i];
        x[b] = x0 * sin[i] + x1 * cos[i];
    }
}

/// A dot product in 16 independent lanes, which the compiler turns into vector FMAs (a
/// single running sum would be one long chain of dependent additions).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] = x[i].mul_add(y[i], acc[i]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::cosine;

    /// A small decoder with seeded random weights: no model file needed. `four_bit`: treat
    /// every layer as 4-bit in its file (a 4-bit copy for decoding).
    fn random_with(neox: bool, qkv_bias: bool, four_bit: bool) -> Decoder {
        let cfg = Config {
            hidden: 64,
            ff: 96,
            vocab: 50,
            blocks: 2,
            heads: 4,
            kv_heads: 2,
            eps: 1e-5,
            freq_base: 10_000.0,
            neox,
            qkv_bias,
            context_length: 600,
        };
        let mut seed = 11u64;
        let four = move |_: &str| four_bit;
        Decoder::build(cfg, four, |name, shape| {
            let n: usize = shape.iter().product();
            let norm = name.ends_with("norm.weight");
            let mut w: Vec<f32> = (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let u = (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                    if norm {
                        1.0 + 0.2 * u
                    } else {
                        0.4 * u
                    }
                })
                .collect();
            if four_bit && !norm && name.ends_with(".weight") {
                // On a 4-bit grid per block of 32, as a file's 4-bit weights are.
                for b in w.chunks_mut(32) {
                    let (lo, hi) = b.iter().fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
                    let s = (hi - lo) / 15.0;
                    b.iter_mut().for_each(|v| *v = lo + s * ((*v - lo) / s).round());
                }
            }
            Ok(Some(w))
        })
        .unwrap()
    }

    fn random(neox: bool, qkv_bias: bool) -> Decoder {
        random_with(neox, qkv_bias, false)
    }

    fn argmax(v: &[f32]) -> usize {
        (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
    }

    /// Tokens decoded one at a time by the step path give the logits that the prompt path
    /// gives for the same tokens in one chunk, for both rotary layouts, also past the cache's
    /// first growth (256 positions).
    #[test]
    fn steps_match_the_prompt_path() {
        for (neox, bias) in [(false, false), (true, true)] {
            let mut m = random(neox, bias);
            let ids: Vec<u32> = (0..300u32).map(|i| (i * 7 + 3) % 50).collect();
            for split in [2, 255, 298] {
                let whole = m.forward(&ids, 0).unwrap();
                m.forward(&ids[..split], 0).unwrap();
                let mut stepped = Vec::new();
                for (i, &id) in ids.iter().enumerate().skip(split) {
                    stepped = m.forward(&[id], i).unwrap();
                }
                let c = cosine(&whole, &stepped);
                assert!(c > 0.99999, "neox {neox}, split {split}: cosine {c}");
                assert_eq!(argmax(&whole), argmax(&stepped), "neox {neox}, split {split}");
            }
        }
    }

    /// With 4-bit copies, steps read them and prompts the int8 weights: for weights on a
    /// 4-bit grid, as a file's 4-bit layers are, the two paths agree closely and on the next
    /// token.
    #[test]
    fn four_bit_steps_stay_close_to_the_int8_prompt_path() {
        let mut m = random_with(true, true, true);
        assert!(m.layers.iter().all(|l| l.qkv.has_decoding_copy() && l.down.has_decoding_copy()));
        let ids: Vec<u32> = (0..40u32).map(|i| (i * 7 + 3) % 50).collect();
        let whole = m.forward(&ids, 0).unwrap();
        m.forward(&ids[..20], 0).unwrap();
        let mut stepped = Vec::new();
        for (i, &id) in ids.iter().enumerate().skip(20) {
            stepped = m.forward(&[id], i).unwrap();
        }
        let c = cosine(&whole, &stepped);
        assert!((0.999..0.99999).contains(&c), "cosine {c}: close, and not the int8 path itself");
        assert_eq!(argmax(&whole), argmax(&stepped));
    }

    /// A prompt after steps (the chunked prefill's second chunk) also sees the cache right.
    #[test]
    fn chunks_after_steps_match_one_chunk() {
        let mut m = random(true, true);
        let ids: Vec<u32> = (0..40u32).map(|i| (i * 13 + 1) % 50).collect();
        let whole = m.forward(&ids, 0).unwrap();
        m.forward(&ids[..10], 0).unwrap();
        m.forward(&ids[10..11], 10).unwrap();
        let chunked = m.forward(&ids[11..], 11).unwrap();
        assert!(cosine(&whole, &chunked) > 0.99999);
    }

    #[test]
    fn bad_ids_and_positions_are_errors_not_panics() {
        let mut m = random(false, false);
        assert!(m.forward(&[50], 0).unwrap_err().to_string().contains("token id 50"));
        m.forward(&[1, 2], 0).unwrap();
        assert!(m.forward(&[3], 5).unwrap_err().to_string().contains("position 5"));
        assert!(m.forward(&[], 2).is_err());
        assert!(m.forward(&[1; 10], 595).unwrap_err().to_string().contains("context"));
    }
}
