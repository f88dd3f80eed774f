//! Fused CPU kernels for the BERT forward pass: each replaces several candle element-wise ops
//! (and their passes over memory and thread-pool hand-offs) with one pass over rows.
//!
//! Profiling a MiniLM forward pass showed a sixth of the time in libm's scalar `erff` (candle's
//! GELU) and as much again in element-wise ops between the matmuls. [`BiasGelu`] adds the bias
//! and applies `x · (1 + erf(x/√2)) / 2` with the rational approximation of erf that Eigen and
//! XLA use for f32 (a ratio of two polynomials in x², no exp, a few ulp from exact), which LLVM
//! compiles to SIMD; [`BiasResidualNorm`] ends each sub-layer; [`Attention`] is the whole of
//! self-attention after the projections, rotary positions included.

use candle_core::{CpuStorage, CustomOp1, InplaceOp1, InplaceOp2, Layout, Shape};
use rayon::prelude::*;

/// erf(x) for f32, as Eigen's `generic_fast_erf_float`.
#[inline(always)]
pub(crate) fn fast_erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2.mul_add(-2.726_142_3e-10, 2.770_681_4e-8);
    p = x2.mul_add(p, -2.101_024e-6);
    p = x2.mul_add(p, -5.692_506_4e-5);
    p = x2.mul_add(p, -7.349_906_3e-4);
    p = x2.mul_add(p, -2.9546e-3);
    p = x2.mul_add(p, -1.609_603_3e-2);
    p *= x;
    let mut q = x2.mul_add(-1.456_607_2e-5, -2.133_740_6e-4);
    q = x2.mul_add(q, -1.682_827e-3);
    q = x2.mul_add(q, -7.373_329_4e-3);
    q = x2.mul_add(q, -1.426_474e-2);
    p / q
}

/// exp(x) for f32 in a form LLVM vectorises (libm's `expf` is a scalar call): `2ⁿ · e^r`
/// with `n = round(x · log₂e)`, `r` the rest by Cody and Waite's two-part ln 2, and Cephes'
/// `expf` polynomial for `e^r` on [-ln2/2, ln2/2]; within a few ulp of exact.
#[inline(always)]
pub(crate) fn fast_exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E).round_ties_even();
    let r = n.mul_add(2.121_944_4e-4, n.mul_add(-0.693_359_4, x));
    let mut p = r.mul_add(1.987_569_1e-4, 1.398_199_9e-3);
    p = r.mul_add(p, 8.333_452e-3);
    p = r.mul_add(p, 4.166_579_6e-2);
    p = r.mul_add(p, 1.666_666_5e-1);
    p = r.mul_add(p, 0.5);
    let e = (r * r).mul_add(p, r + 1.0);
    // n is in [-126, 127] after the clamp, so the exponent field stays in range.
    e * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// Self-attention after the projections, in one pass per sequence: `softmax(q·kᵀ) · v` for
/// each head over the sequence's tokens, written as rows `(Σ lengths, heads·d)` ready for the
/// output projection. In place of a layout pass, two batched matmuls, a mask add, a softmax and
/// a transposing copy: at BERT's sizes (t ≈ 60, d = 32) these were a quarter of a forward pass
/// in thread hand-offs and fresh buffers for a few per cent of its arithmetic.
///
/// It reads the fused query-key-value product `(Σ lengths, 3·h)` as it comes from the matmul,
/// the sequences packed one after another with no padding, adds its bias itself, and for
/// rotary models ([`Rotation`]) rotates each query and key by its position in its sequence:
/// no batch is ever padded, so no work is spent on padding. The 1/√d scale is in the query
/// already.
pub(crate) struct Attention<'a> {
    /// Each sequence's number of tokens.
    pub(crate) lengths: Vec<usize>,
    pub(crate) heads: usize,
    /// The fused product's bias, `3·h` (query, key, value).
    pub(crate) bias: Vec<f32>,
    pub(crate) rotation: Option<Rotation<'a>>,
}

/// Rotary positions (NeoX halves, as nomic-bert has them): the `cos` and `sin` of each
/// position's angles, `(positions, d/2)`. Dimension `c` of the first half and `c + d/2` of the
/// second turn together: `(x₁, x₂) → (x₁·cos − x₂·sin, x₂·cos + x₁·sin)`.
#[derive(Clone, Copy)]
pub(crate) struct Rotation<'a> {
    pub(crate) cos: &'a [f32],
    pub(crate) sin: &'a [f32],
}

impl Rotation<'_> {
    /// Turns `rows` (`(len, d)`, row `j` at position `j`) in place.
    fn apply(&self, rows: &mut [f32], d: usize) {
        let half = d / 2;
        for (j, row) in rows.chunks_exact_mut(d).enumerate() {
            let (cos, sin) = (&self.cos[j * half..][..half], &self.sin[j * half..][..half]);
            let (a, b) = row.split_at_mut(half);
            for (((x1, x2), &c), &s) in a.iter_mut().zip(b.iter_mut()).zip(cos).zip(sin) {
                let (u, v) = (*x1, *x2);
                *x1 = u * c - v * s;
                *x2 = v * c + u * s;
            }
        }
    }
}

/// Where one head's rows of a query, key or value are: row `i` starts at `start + i·stride`.
#[derive(Clone, Copy)]
struct Rows<'a> {
    data: &'a [f32],
    start: usize,
    stride: usize,
}

impl Rows<'_> {
    fn row(&self, i: usize, d: usize) -> &[f32] {
        &self.data[self.start + i * self.stride..][..d]
    }
}

impl CustomOp1 for Attention<'_> {
    fn name(&self) -> &'static str {
        "attention"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous(storage, layout)?;
        let width = self.bias.len();
        let (h, heads) = (width / 3, self.heads);
        let rows = layout.dims().first().copied().unwrap_or(0);
        if layout.dims().len() != 2 || layout.dims()[1] != width || h * 3 != width || heads == 0 || h % heads != 0 {
            candle_core::bail!(
                "attention: a fused product of {width} columns for {heads} heads, got {:?}",
                layout.shape()
            );
        }
        let total: usize = self.lengths.iter().sum();
        if rows != total {
            candle_core::bail!("attention: {rows} rows for sequences of {total} tokens packed");
        }
        let d = h / heads;
        let longest = self.lengths.iter().copied().max().unwrap_or(0);
        if let Some(r) = &self.rotation {
            if d % 2 != 0 || r.cos.len() < longest * d / 2 || r.sin.len() != r.cos.len() {
                candle_core::bail!("attention: rotary tables of {} values for {longest} positions of {d}", r.cos.len());
            }
        }
        let mut out = vec![0f32; rows * h];
        let mut sequences: Vec<&mut [f32]> = Vec::with_capacity(self.lengths.len());
        let mut rest = &mut out[..];
        for &len in &self.lengths {
            let (this, tail) = rest.split_at_mut(len * h);
            sequences.push(this);
            rest = tail;
        }
        let starts: Vec<usize> =
            self.lengths.iter().scan(0, |at, &len| Some(std::mem::replace(at, *at + len))).collect();
        sequences.into_par_iter().enumerate().for_each(|(bi, out)| {
            let mut work = AttentionWork::new(self.lengths[bi], d);
            for head in 0..heads {
                let part = |p: usize| Rows { data: x, start: starts[bi] * width + p * h + head * d, stride: width };
                let bias = |p: usize| &self.bias[p * h + head * d..][..d];
                let qkv = [part(0), part(1), part(2)];
                work.head(qkv, [bias(0), bias(1), bias(2)], self.rotation.as_ref(), &mut out[head * d..], h);
            }
        });
        Ok((CpuStorage::F32(out), Shape::from((rows, h))))
    }
}

/// Query rows per block of the attention kernels, and keys (or value columns) per block: a
/// block's sums, 4 × 16, are eight AVX2 registers.
const QB: usize = 4;
const KB: usize = 16;

/// Scratch for one sequence's attention, reused across its heads.
struct AttentionWork {
    len: usize,
    d: usize,
    /// `len` rounded up to whole key blocks.
    lenp: usize,
    /// The head's queries, keys and values, `(len, d)`, bias added.
    qh: Vec<f32>,
    kh: Vec<f32>,
    vh: Vec<f32>,
    /// Keys transposed, `(d, lenp)`, zero past `len`.
    kt: Vec<f32>,
    /// A block of queries transposed, `(d, QB)`, zero past the sequence.
    qt: Vec<f32>,
    /// Their scores, `(QB, lenp)`.
    scores: Vec<f32>,
    /// Their weights transposed, `(len, QB)`.
    weights: Vec<f32>,
}

impl AttentionWork {
    fn new(len: usize, d: usize) -> AttentionWork {
        let lenp = len.next_multiple_of(KB);
        AttentionWork {
            len,
            d,
            lenp,
            qh: vec![0.0; len * d],
            kh: vec![0.0; len * d],
            vh: vec![0.0; len * d],
            kt: vec![0.0; d * lenp],
            qt: vec![0.0; d * QB],
            scores: vec![0.0; QB * lenp],
            weights: vec![0.0; len * QB],
        }
    }

    /// One head: its query, key and value rows, their biases, and the rotation of its query
    /// and key, if any; `out` its `d` columns of rows `stride` apart. Sums are kept in
    /// registers a block at a time, so that each key or value loaded serves four queries.
    fn head(
        &mut self,
        [q, k, v]: [Rows<'_>; 3],
        [qb, kb, vb]: [&[f32]; 3],
        rotation: Option<&Rotation<'_>>,
        out: &mut [f32],
        stride: usize,
    ) {
        let (len, d, lenp) = (self.len, self.d, self.lenp);
        // The head's rows gathered, bias added, into contiguous `(len, d)` blocks: read in
        // place, rows `3·h` apart, each value row was a cache miss of its own.
        for (rows, dst, b) in [(q, &mut self.qh, qb), (k, &mut self.kh, kb), (v, &mut self.vh, vb)] {
            for (j, o) in dst.chunks_exact_mut(d).enumerate() {
                o.iter_mut().zip(rows.row(j, d)).zip(b).for_each(|((o, &x), &b)| *o = x + b);
            }
        }
        if let Some(r) = rotation {
            r.apply(&mut self.qh, d);
            r.apply(&mut self.kh, d);
        }
        let (q, k, v) = (&self.qh[..], &self.kh[..], &self.vh[..]);
        for (j, key) in k.chunks_exact(d).enumerate() {
            for (c, &x) in key.iter().enumerate() {
                self.kt[c * lenp + j] = x;
            }
        }
        for i0 in (0..len).step_by(QB) {
            let rows = QB.min(len - i0);
            for c in 0..d {
                for r in 0..QB {
                    self.qt[c * QB + r] = if r < rows { q[(i0 + r) * d + c] } else { 0.0 };
                }
            }
            // Scores, a (QB, KB) block per pass over the head's dimensions.
            for j0 in (0..lenp).step_by(KB) {
                let acc = scores_block(&self.qt, &self.kt, lenp, j0);
                for (r, a) in acc.iter().enumerate() {
                    self.scores[r * lenp + j0..][..KB].copy_from_slice(a);
                }
            }
            // Softmax over the real keys, written transposed for the values' pass.
            for r in 0..QB {
                let row = &mut self.scores[r * lenp..r * lenp + len];
                if r >= rows {
                    self.weights.chunks_exact_mut(QB).for_each(|w| w[r] = 0.0);
                    continue;
                }
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                row.iter_mut().for_each(|s| *s = fast_exp(*s - max));
                let inv = 1.0 / row.iter().sum::<f32>();
                for (w, &s) in self.weights.chunks_exact_mut(QB).zip(row.iter()) {
                    w[r] = s * inv;
                }
            }
            // Outputs, a (QB, KB) block of value columns per pass over the keys.
            for c0 in (0..d).step_by(KB) {
                let width = KB.min(d - c0);
                let acc = values_block(&self.weights, v, d, c0);
                for (r, a) in acc.iter().enumerate().take(rows) {
                    out[(i0 + r) * stride + c0..][..width].copy_from_slice(&a[..width]);
                }
            }
        }
    }
}

/// Scores of a block of `QB` queries (`qt`, transposed `(d, QB)`) against keys `j0..j0+KB`
/// (`kt`, transposed `(d, lenp)`). Its own function, not inlined, so that the sums stay in
/// registers whatever the caller around it looks like: inlined, the compiler vectorised
/// these loops or spilled them to the stack depending on the code beside them.
#[inline(never)]
fn scores_block(qt: &[f32], kt: &[f32], lenp: usize, j0: usize) -> [[f32; KB]; QB] {
    let mut acc = [[0f32; KB]; QB];
    for (qc, kc) in qt.chunks_exact(QB).zip(kt.chunks_exact(lenp)) {
        let kv: &[f32; KB] = kc[j0..j0 + KB].try_into().expect("a key block");
        for (a, &x) in acc.iter_mut().zip(qc) {
            for (a, &kx) in a.iter_mut().zip(kv) {
                *a = x.mul_add(kx, *a);
            }
        }
    }
    acc
}

/// Outputs of a block of `QB` queries for value columns `c0..c0+KB` (fewer at the end of a
/// head whose size is not a multiple of `KB`): `weights` is `(len, QB)`, `v` is `(len, d)`.
#[inline(never)]
fn values_block(weights: &[f32], v: &[f32], d: usize, c0: usize) -> [[f32; KB]; QB] {
    let mut acc = [[0f32; KB]; QB];
    for (w, value) in weights.chunks_exact(QB).zip(v.chunks_exact(d)) {
        let value = &value[c0..(c0 + KB).min(d)];
        let mut vv = [0f32; KB];
        let vv: &[f32; KB] = match value.try_into() {
            Ok(full) => full,
            Err(_) => {
                vv[..value.len()].copy_from_slice(value);
                &vv
            }
        };
        for (a, &p) in acc.iter_mut().zip(w) {
            for (a, &x) in a.iter_mut().zip(vv) {
                *a = p.mul_add(x, *a);
            }
        }
    }
    acc
}

/// The values of a contiguous f32 tensor.
fn contiguous<'a>(storage: &'a CpuStorage, layout: &Layout) -> candle_core::Result<&'a [f32]> {
    match (storage, layout.contiguous_offsets()) {
        (CpuStorage::F32(v), Some((start, end))) => Ok(&v[start..end]),
        _ => candle_core::bail!("expected a contiguous f32 tensor, got {:?}", layout.shape()),
    }
}

/// `gelu(x + bias)` over rows of `bias.len()` columns.
pub(crate) struct BiasGelu {
    pub(crate) bias: Vec<f32>,
}

impl InplaceOp1 for BiasGelu {
    fn name(&self) -> &'static str {
        "bias-gelu"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let (CpuStorage::F32(data), Some((start, end))) = (storage, layout.contiguous_offsets()) else {
            candle_core::bail!("bias-gelu: expected a contiguous f32 tensor");
        };
        let x = &mut data[start..end];
        let cols = self.bias.len();
        if cols == 0 || x.len() % cols != 0 {
            candle_core::bail!("bias-gelu: {} values do not make rows of {cols}", x.len());
        }
        // Rows in chunks large enough to amortise scheduling, small enough to share out.
        x.par_chunks_mut(cols * 64).for_each(|x| {
            for row in x.chunks_exact_mut(cols) {
                for (x, &b) in row.iter_mut().zip(&self.bias) {
                    let v = *x + b;
                    *x = 0.5 * v * (1.0 + fast_erf(v * std::f32::consts::FRAC_1_SQRT_2));
                }
            }
        });
        Ok(())
    }
}

/// `LayerNorm(x + bias + residual)` over rows, in one pass: the end of every BERT sub-layer.
pub(crate) struct BiasResidualNorm {
    pub(crate) bias: Vec<f32>,
    pub(crate) gamma: Vec<f32>,
    pub(crate) beta: Vec<f32>,
    pub(crate) eps: f32,
}

impl InplaceOp2 for BiasResidualNorm {
    fn name(&self) -> &'static str {
        "bias-residual-norm"
    }

    fn cpu_fwd(&self, s1: &mut CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> candle_core::Result<()> {
        let (CpuStorage::F32(a), Some((a0, a1))) = (s1, l1.contiguous_offsets()) else {
            candle_core::bail!("bias-residual-norm: expected a contiguous f32 tensor");
        };
        let res = contiguous(s2, l2)?;
        let x = &mut a[a0..a1];
        let cols = self.bias.len();
        if cols == 0 || x.len() != res.len() || x.len() % cols != 0 {
            candle_core::bail!("bias-residual-norm: shapes do not match rows of {cols}");
        }
        let chunk = cols * 64;
        x.par_chunks_mut(chunk).zip(res.par_chunks(chunk)).for_each(|(x, res)| {
            for (row, rrow) in x.chunks_exact_mut(cols).zip(res.chunks_exact(cols)) {
                let mut sum = 0f32;
                for (x, (&b, &r)) in row.iter_mut().zip(self.bias.iter().zip(rrow)) {
                    *x = *x + b + r;
                    sum += *x;
                }
                let mean = sum / cols as f32;
                let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / cols as f32;
                let inv = 1.0 / (var + self.eps).sqrt();
                for ((x, &g), &b) in row.iter_mut().zip(&self.gamma).zip(&self.beta) {
                    *x = (*x - mean) * inv * g + b;
                }
            }
        });
        Ok(())
    }
}

/// `silu(gate) · up` over rows laid out `[gate (ff) | up (ff)]`, as a stacked product gives
/// them: one pass instead of two slices, an activation and a product.
pub(crate) struct SwiGlu;

impl CustomOp1 for SwiGlu {
    fn name(&self) -> &'static str {
        "swiglu"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("swiglu: expected f32");
        };
        let (Some((start, end)), &[rows, width]) = (layout.contiguous_offsets(), layout.dims()) else {
            candle_core::bail!("swiglu: expected a contiguous 2-D tensor, got {:?}", layout.shape());
        };
        if width % 2 != 0 {
            candle_core::bail!("swiglu: {width} columns do not split into gate and up");
        }
        let ff = width / 2;
        let x = &data[start..end];
        let mut out = vec![0f32; rows * ff];
        out.par_chunks_mut(ff * 16).zip(x.par_chunks(width * 16)).for_each(|(o, x)| {
            for (orow, xrow) in o.chunks_exact_mut(ff).zip(x.chunks_exact(width)) {
                let (gate, up) = xrow.split_at(ff);
                for ((o, &g), &u) in orow.iter_mut().zip(gate).zip(up) {
                    *o = g / (1.0 + (-g).exp()) * u;
                }
            }
        });
        Ok((CpuStorage::F32(out), Shape::from((rows, ff))))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::{Attention, Rotation};
    use crate::testing::lcg;

    #[test]
    fn fast_exp_is_within_a_few_ulp() {
        let mut worst = 0f64;
        for i in -87_000..=88_000 {
            let x = i as f32 / 1000.0;
            let want = f64::from(x).exp();
            worst = worst.max(((f64::from(super::fast_exp(x)) - want) / want).abs());
        }
        assert!(worst < 4.0 * f64::from(f32::EPSILON), "max relative error {worst:e}");
        assert!(super::fast_exp(-1e9) >= 0.0 && super::fast_exp(-1e9) < 1e-37);
    }

    /// softmax(q·kᵀ)·v per sequence and head over its first `len` keys, in f64; padding rows zero.
    fn naive(q: &[f32], k: &[f32], v: &[f32], lengths: &[usize], heads: usize, t: usize, d: usize) -> Vec<f32> {
        let h = heads * d;
        let mut out = vec![0f32; lengths.len() * t * h];
        let at =
            |x: &[f32], bi: usize, head: usize, i: usize, c: usize| f64::from(x[((bi * heads + head) * t + i) * d + c]);
        for (bi, &len) in lengths.iter().enumerate() {
            for head in 0..heads {
                for i in 0..len {
                    let scores: Vec<f64> =
                        (0..len).map(|j| (0..d).map(|c| at(q, bi, head, i, c) * at(k, bi, head, j, c)).sum()).collect();
                    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let w: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                    let total: f64 = w.iter().sum();
                    for c in 0..d {
                        let y: f64 = (0..len).map(|j| w[j] / total * at(v, bi, head, j, c)).sum();
                        out[(bi * t + i) * h + head * d + c] = y as f32;
                    }
                }
            }
        }
        out
    }

    /// The fused attention gives the plain formula, for lengths that are not whole blocks of
    /// queries or keys, sequences of different lengths packed, and head sizes that are not
    /// whole blocks of value columns; the bias is added, and with a rotation, query and key
    /// are turned by their position in their own sequence (NeoX halves) before the scores.
    #[test]
    fn attention_is_softmax_of_scores_times_values() -> candle_core::Result<()> {
        let mut seed = 3;
        for (lengths, heads, d) in [(vec![1], 1, 4), (vec![5, 17, 3], 2, 24), (vec![33, 40], 3, 32)] {
            let (b, t) = (lengths.len(), *lengths.iter().max().unwrap_or(&0));
            let h = heads * d;
            let mut values = |n: usize| (0..n).map(|_| lcg(&mut seed) * 2.0).collect::<Vec<f32>>();
            let (q, k, v) = (values(b * heads * t * d), values(b * heads * t * d), values(b * heads * t * d));
            let bias = values(3 * h);
            let half = d / 2;
            let angle = |pos: usize, c: usize| pos as f64 / 10_000f64.powf((2 * c) as f64 / d as f64);
            let cos: Vec<f32> = (0..t * half).map(|i| angle(i / half, i % half).cos() as f32).collect();
            let sin: Vec<f32> = (0..t * half).map(|i| angle(i / half, i % half).sin() as f32).collect();
            // Query and key laid out (b, heads, t, d), each row turned by its position.
            let rotated = |x: &[f32]| {
                let mut out = x.to_vec();
                for (r, row) in out.chunks_exact_mut(d).enumerate() {
                    let pos = r % t;
                    for c in 0..half {
                        let (x1, x2) = (f64::from(x[r * d + c]), f64::from(x[r * d + c + half]));
                        let (co, si) = (f64::from(cos[pos * half + c]), f64::from(sin[pos * half + c]));
                        row[c] = (x1 * co - x2 * si) as f32;
                        row[c + half] = (x2 * co + x1 * si) as f32;
                    }
                }
                out
            };

            // The same values as a fused product of the real tokens packed (Σ lengths, 3·h),
            // less the bias the op adds back; its rows, padded again, must match.
            let starts: Vec<usize> = lengths.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect();
            let rows: usize = lengths.iter().sum();
            let mut fused = vec![0f32; rows * 3 * h];
            for (p, x) in [&q, &k, &v].into_iter().enumerate() {
                for (bi, head, c) in
                    (0..b).flat_map(|bi| (0..heads).flat_map(move |hd| (0..d).map(move |c| (bi, hd, c))))
                {
                    for i in 0..lengths[bi] {
                        let col = p * h + head * d + c;
                        fused[(starts[bi] + i) * 3 * h + col] = x[((bi * heads + head) * t + i) * d + c] - bias[col];
                    }
                }
            }
            let product = Tensor::from_slice(&fused, (rows, 3 * h), &Device::Cpu)?;
            for rotation in [None, Some(Rotation { cos: &cos, sin: &sin })] {
                let want = match rotation {
                    None => naive(&q, &k, &v, &lengths, heads, t, d),
                    Some(_) => naive(&rotated(&q), &rotated(&k), &v, &lengths, heads, t, d),
                };
                let op = Attention { lengths: lengths.clone(), heads, bias: bias.clone(), rotation };
                let packed: Vec<f32> = product.apply_op1_no_bwd(&op)?.flatten_all()?.to_vec1()?;
                let mut padded = vec![0f32; b * t * h];
                for (bi, &len) in lengths.iter().enumerate() {
                    padded[bi * t * h..][..len * h].copy_from_slice(&packed[starts[bi] * h..][..len * h]);
                }
                let worst = padded.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                let form = if rotation.is_some() { "rotary" } else { "plain" };
                assert!(worst < 1e-5, "{form}, lengths {lengths:?}, d {d}: largest difference {worst:e}");
            }
        }
        Ok(())
    }

    #[test]
    fn fast_erf_matches_libm() {
        let mut worst = 0f64;
        for i in -8000..=8000 {
            let x = i as f32 / 1000.0;
            let want = libm_erf(f64::from(x));
            worst = worst.max((f64::from(super::fast_erf(x)) - want).abs());
        }
        assert!(worst < 5e-7, "max abs error {worst:e}");
    }

    /// erf by its Maclaurin series (small |x|) or continued fraction of erfc (large |x|), in
    /// f64: slow and exact enough to check the fast one.
    fn libm_erf(x: f64) -> f64 {
        if x.abs() < 3.0 {
            let mut sum = 0.0;
            let mut term = x;
            let mut n = 0.0;
            while term.abs() > 1e-17 {
                sum += term / (2.0 * n + 1.0);
                n += 1.0;
                term *= -x * x / n;
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            // erfc(x) = exp(-x²)/(x√π) · 1/(1 + 1/(2x²) / (1 + 2/(2x²) / (1 + ...))) via Lentz.
            let a = x.abs();
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = (k as f64 / 2.0) / (a + f);
            }
            let erfc = (-a * a).exp() / std::f64::consts::PI.sqrt() / (a + f);
            (1.0 - erfc).copysign(x)
        }
    }
}
