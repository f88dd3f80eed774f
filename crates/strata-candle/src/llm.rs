//! A llama-family decoder (the llama and qwen2 GGUF architectures) whose linear layers run as
//! 8-bit integer products ([`crate::int8`]).
//!
//! Why not candle-transformers' quantized models: their matmuls multiply the 4-bit blocks by
//! 8-bit activation blocks one dot product at a time, which is fine for one token but leaves a
//! prompt of a thousand tokens far from what the machine can do (a fifth of llama.cpp's speed
//! here). Here every weight matrix is dequantized once at load and requantized to 8 bits per
//! output channel, so a prompt runs through the same VNNI kernel as the embedder, and one
//! token's step reads 8-bit weights (the output projection too, applied to the last position
//! only). The arithmetic of the rest follows
//! candle-transformers (RMSNorm, rotary embeddings: interleaved for llama, NeoX for qwen2;
//! grouped-query attention; SwiGLU).

use candle_core::quantized::gguf_file;
use candle_core::{DType, Device, IndexOp, Tensor};

use crate::int8::Int8Matrix;

struct Linear {
    weight: Int8Matrix,
    bias: Option<Tensor>,
}

impl Linear {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let y = x.apply_op1_no_bwd(&self.weight)?;
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

struct Layer {
    attn_norm: Tensor,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    ffn_norm: Tensor,
    gate: Linear,
    up: Linear,
    down: Linear,
    cache: Option<Kv>,
}

/// A layer's keys and values, in buffers with room to grow: a step writes its row in place
/// instead of copying the whole cache into a new tensor.
struct Kv {
    k: Tensor,
    v: Tensor,
    len: usize,
}

impl Kv {
    /// Appends `k` and `v` (`(1, kv_heads, t, d)`) and returns views of everything so far.
    fn append(cache: &mut Option<Kv>, k: &Tensor, v: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let (_, heads, t, d) = k.dims4()?;
        let len = cache.as_ref().map_or(0, |c| c.len);
        let cap = cache.as_ref().map_or(0, |c| c.k.dim(2).unwrap_or(0));
        if len + t > cap {
            // Double, so that growing costs O(1) per token over a generation.
            let new_cap = (2 * cap).max(len + t).max(256);
            let grow = |old: Option<&Tensor>| -> candle_core::Result<Tensor> {
                let buf = Tensor::zeros((1, heads, new_cap, d), DType::F32, k.device())?;
                if let Some(old) = old {
                    buf.slice_set(&old.narrow(2, 0, len)?.contiguous()?, 2, 0)?;
                }
                Ok(buf)
            };
            let (nk, nv) = (grow(cache.as_ref().map(|c| &c.k))?, grow(cache.as_ref().map(|c| &c.v))?);
            *cache = Some(Kv { k: nk, v: nv, len });
        }
        let c = cache.as_mut().expect("allocated above");
        c.k.slice_set(&k.contiguous()?, 2, len)?;
        c.v.slice_set(&v.contiguous()?, 2, len)?;
        c.len = len + t;
        Ok((c.k.narrow(2, 0, c.len)?, c.v.narrow(2, 0, c.len)?))
    }
}

/// The decoder's weights and its key-value cache.
pub(crate) struct Decoder {
    embeddings: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    output: Int8Matrix,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    eps: f64,
    neox: bool,
    cos: Tensor,
    sin: Tensor,
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
        let device = Device::Cpu;
        let heads = md_u32(ct, &format!("{arch}.attention.head_count"))?;
        let kv_heads = md_u32(ct, &format!("{arch}.attention.head_count_kv"))?;
        let hidden = md_u32(ct, &format!("{arch}.embedding_length"))?;
        let blocks = md_u32(ct, &format!("{arch}.block_count"))?;
        let eps = match ct.metadata.get(&format!("{arch}.attention.layer_norm_rms_epsilon")) {
            Some(v) => f64::from(v.to_f32()?),
            None => candle_core::bail!("missing GGUF metadata {arch}.attention.layer_norm_rms_epsilon"),
        };
        let freq_base =
            ct.metadata.get(&format!("{arch}.rope.freq_base")).and_then(|v| v.to_f32().ok()).unwrap_or(10_000.0);
        let head_dim = hidden / heads;
        let tensor = |reader: &mut R, name: &str| ct.tensor(reader, name, &device);
        let dense = |reader: &mut R, name: &str| tensor(reader, name)?.dequantize(&device);
        let linear = |reader: &mut R, name: &str, bias: bool| -> candle_core::Result<Linear> {
            let w = dense(reader, &format!("{name}.weight"))?;
            let (n, k) = w.dims2()?;
            let weight = Int8Matrix::quantize(&w.flatten_all()?.to_vec1()?, n, k);
            let bias = if bias { Some(dense(reader, &format!("{name}.bias"))?) } else { None };
            Ok(Linear { weight, bias })
        };
        let embeddings = dense(reader, "token_embd.weight")?;
        let norm = dense(reader, "output_norm.weight")?;
        let output = match dense(reader, "output.weight") {
            Ok(w) => w,
            // Tied embeddings (Qwen2.5 0.5B, SmolLM2): the input table is the output projection.
            Err(_) => embeddings.clone(),
        };
        let (vocab, _) = output.dims2()?;
        let output = Int8Matrix::quantize(&output.flatten_all()?.to_vec1()?, vocab, hidden);
        let qkv_bias = arch == "qwen2";
        let mut layers = Vec::with_capacity(blocks);
        for i in 0..blocks {
            let p = format!("blk.{i}");
            layers.push(Layer {
                attn_norm: dense(reader, &format!("{p}.attn_norm.weight"))?,
                q: linear(reader, &format!("{p}.attn_q"), qkv_bias)?,
                k: linear(reader, &format!("{p}.attn_k"), qkv_bias)?,
                v: linear(reader, &format!("{p}.attn_v"), qkv_bias)?,
                o: linear(reader, &format!("{p}.attn_output"), false)?,
                ffn_norm: dense(reader, &format!("{p}.ffn_norm.weight"))?,
                gate: linear(reader, &format!("{p}.ffn_gate"), false)?,
                up: linear(reader, &format!("{p}.ffn_up"), false)?,
                down: linear(reader, &format!("{p}.ffn_down"), false)?,
                cache: None,
            });
        }
        let theta: Vec<f32> =
            (0..head_dim).step_by(2).map(|i| 1.0 / freq_base.powf(i as f32 / head_dim as f32)).collect();
        let theta = Tensor::new(theta.as_slice(), &device)?;
        let angles = Tensor::arange(0, context_length as u32, &device)?
            .to_dtype(DType::F32)?
            .reshape((context_length, 1))?
            .matmul(&theta.reshape((1, head_dim / 2))?)?;
        Ok(Decoder {
            embeddings,
            layers,
            norm,
            output,
            heads,
            kv_heads,
            head_dim,
            eps,
            neox: arch == "qwen2",
            cos: angles.cos()?,
            sin: angles.sin()?,
            device,
        })
    }

    pub(crate) fn clear(&mut self) {
        for l in &mut self.layers {
            l.cache = None;
        }
    }

    fn rope(&self, x: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        let t = x.dim(2)?;
        let (cos, sin) = (self.cos.narrow(0, pos, t)?, self.sin.narrow(0, pos, t)?);
        if self.neox {
            candle_nn::rotary_emb::rope(&x.contiguous()?, &cos, &sin)
        } else {
            candle_nn::rotary_emb::rope_i(&x.contiguous()?, &cos, &sin)
        }
    }

    /// Runs `ids` (positions `pos..`) through the model and returns the logits of the last one.
    pub(crate) fn forward(&mut self, ids: &[u32], pos: usize) -> candle_core::Result<Vec<f32>> {
        let t = ids.len();
        let ids_t = Tensor::new(ids, &self.device)?;
        let mut x = self.embeddings.index_select(&ids_t, 0)?;
        let (heads, kv_heads, d) = (self.heads, self.kv_heads, self.head_dim);
        // A causal mask for the prompt; one new token sees everything before it.
        let mask = if t > 1 {
            let m: Vec<f32> = (0..t)
                .flat_map(|i| (0..pos + t).map(move |j| if j > pos + i { f32::NEG_INFINITY } else { 0.0 }))
                .collect();
            Some(Tensor::from_vec(m, (t, pos + t), &self.device)?)
        } else {
            None
        };
        let scale = 1.0 / (d as f64).sqrt();
        let group = heads / kv_heads;
        // One mask row per query head of a group, built once for all layers.
        let mask = match mask {
            Some(m) => Some(m.repeat((group, 1))?.reshape((1, 1, group * t, pos + t))?),
            None => None,
        };
        for li in 0..self.layers.len() {
            let h = candle_nn::ops::rms_norm(&x, &self.layers[li].attn_norm, self.eps as f32)?;
            let layer = &self.layers[li];
            let q = layer.q.forward(&h)?.reshape((t, heads, d))?.transpose(0, 1)?.unsqueeze(0)?;
            let k = layer.k.forward(&h)?.reshape((t, kv_heads, d))?.transpose(0, 1)?.unsqueeze(0)?;
            let v = layer.v.forward(&h)?.reshape((t, kv_heads, d))?.transpose(0, 1)?.unsqueeze(0)?.contiguous()?;
            let q = self.rope(&q, pos)?;
            let k = self.rope(&k, pos)?;
            if pos == 0 {
                self.layers[li].cache = None;
            }
            let (k, v) = Kv::append(&mut self.layers[li].cache, &k, &v)?;
            let layer = &self.layers[li];
            // Grouped-query attention: each key-value head serves heads / kv_heads query heads,
            // done by folding the group into the query's time axis instead of copying keys.
            let q = q.reshape((1, kv_heads, group * t, d))?;
            let mut att = (q.matmul(&k.t()?)? * scale)?;
            if let Some(m) = &mask {
                att = att.broadcast_add(m)?;
            }
            let att = candle_nn::ops::softmax_last_dim(&att)?;
            let y = att.matmul(&v)?.reshape((heads, t, d))?.transpose(0, 1)?.reshape((t, heads * d))?;
            let x1 = (layer.o.forward(&y.contiguous()?)? + &x)?;
            let h = candle_nn::ops::rms_norm(&x1, &layer.ffn_norm, self.eps as f32)?;
            let g = candle_nn::ops::silu(&layer.gate.forward(&h)?)?;
            let u = layer.up.forward(&h)?;
            x = (layer.down.forward(&(g * u)?)? + x1)?;
        }
        let last = x.i(t - 1)?.unsqueeze(0)?;
        let last = candle_nn::ops::rms_norm(&last, &self.norm, self.eps as f32)?;
        Ok(self.output.matmul(&last.flatten_all()?.to_vec1()?, 1))
    }
}
