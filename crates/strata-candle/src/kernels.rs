//! Fused CPU kernels for the BERT forward pass: each replaces several candle element-wise ops
//! (and their passes over memory and thread-pool hand-offs) with one pass over rows.
//!
//! Profiling a MiniLM forward pass showed a sixth of the time in libm's scalar `erff` (candle's
//! GELU) and as much again in element-wise ops between the matmuls. [`BiasGelu`] adds the bias
//! and applies `x · (1 + erf(x/√2)) / 2` with the rational approximation of erf that Eigen and
//! XLA use for f32 (a ratio of two polynomials in x², no exp, a few ulp from exact), which LLVM
//! compiles to SIMD; [`BiasResidualNorm`] ends each sub-layer; [`QkvHeads`] lays out attention
//! heads.

use candle_core::{CpuStorage, CustomOp1, Layout, Shape};
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

/// `gelu(x + bias)` over rows of `bias.len()` columns.
pub(crate) struct BiasGelu {
    pub(crate) bias: Vec<f32>,
}

impl CustomOp1 for BiasGelu {
    fn name(&self) -> &'static str {
        "bias-gelu"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("bias-gelu: expected f32");
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("bias-gelu: expected a contiguous tensor");
        };
        let x = &data[start..end];
        let cols = self.bias.len();
        if cols == 0 || x.len() % cols != 0 {
            candle_core::bail!("bias-gelu: {} values do not make rows of {cols}", x.len());
        }
        let mut out = vec![0f32; x.len()];
        // Rows in chunks large enough to amortise scheduling, small enough to share out.
        let chunk = cols * 64;
        out.par_chunks_mut(chunk).zip(x.par_chunks(chunk)).for_each(|(o, x)| {
            for (orow, xrow) in o.chunks_exact_mut(cols).zip(x.chunks_exact(cols)) {
                for ((o, &x), &b) in orow.iter_mut().zip(xrow).zip(&self.bias) {
                    let v = x + b;
                    *o = 0.5 * v * (1.0 + fast_erf(v * std::f32::consts::FRAC_1_SQRT_2));
                }
            }
        });
        Ok((CpuStorage::F32(out), layout.shape().clone()))
    }
}

/// `LayerNorm(x + bias + residual)` over rows, in one pass: the end of every BERT sub-layer.
pub(crate) struct BiasResidualNorm {
    pub(crate) bias: Vec<f32>,
    pub(crate) gamma: Vec<f32>,
    pub(crate) beta: Vec<f32>,
    pub(crate) eps: f32,
}

impl candle_core::CustomOp2 for BiasResidualNorm {
    fn name(&self) -> &'static str {
        "bias-residual-norm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (CpuStorage::F32(a), CpuStorage::F32(r)) = (s1, s2) else {
            candle_core::bail!("bias-residual-norm: expected f32");
        };
        let (Some((a0, a1)), Some((r0, r1))) = (l1.contiguous_offsets(), l2.contiguous_offsets()) else {
            candle_core::bail!("bias-residual-norm: expected contiguous tensors");
        };
        let (x, res) = (&a[a0..a1], &r[r0..r1]);
        let cols = self.bias.len();
        if cols == 0 || x.len() != res.len() || x.len() % cols != 0 {
            candle_core::bail!("bias-residual-norm: shapes do not match rows of {cols}");
        }
        let mut out = vec![0f32; x.len()];
        let chunk = cols * 64;
        out.par_chunks_mut(chunk).zip(x.par_chunks(chunk).zip(res.par_chunks(chunk))).for_each(|(o, (x, res))| {
            for ((orow, xrow), rrow) in o.chunks_exact_mut(cols).zip(x.chunks_exact(cols)).zip(res.chunks_exact(cols)) {
                let mut sum = 0f32;
                for ((o, &x), (&b, &r)) in orow.iter_mut().zip(xrow).zip(self.bias.iter().zip(rrow)) {
                    *o = x + b + r;
                    sum += *o;
                }
                let mean = sum / cols as f32;
                let var = orow.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / cols as f32;
                let inv = 1.0 / (var + self.eps).sqrt();
                for ((o, &g), &b) in orow.iter_mut().zip(&self.gamma).zip(&self.beta) {
                    *o = (*o - mean) * inv * g + b;
                }
            }
        });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
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

/// Adds the bias to a fused query-key-value product `(b·t, 3·h)` and lays it out as
/// `(3, b, heads, t, d)`, so that each of query, key and value is a contiguous
/// `(b, heads, t, d)` block: one pass instead of an add and three transposing copies.
pub(crate) struct QkvHeads {
    pub(crate) bias: Vec<f32>,
    pub(crate) batch: usize,
    pub(crate) tokens: usize,
    pub(crate) heads: usize,
}

impl CustomOp1 for QkvHeads {
    fn name(&self) -> &'static str {
        "qkv-heads"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("qkv-heads: expected f32");
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("qkv-heads: expected a contiguous tensor");
        };
        let x = &data[start..end];
        let (b, t, heads) = (self.batch, self.tokens, self.heads);
        let width = self.bias.len();
        let h = width / 3;
        let d = h / heads;
        if x.len() != b * t * width || h * 3 != width || d * heads != h {
            candle_core::bail!("qkv-heads: {} values do not make ({b}·{t}, {width})", x.len());
        }
        let mut out = vec![0f32; x.len()];
        // Destination blocks are (part, batch, head): each a (t, d) matrix.
        out.par_chunks_mut(t * d).enumerate().for_each(|(block, dst)| {
            let (part, rest) = (block / (b * heads), block % (b * heads));
            let (bi, head) = (rest / heads, rest % heads);
            let col = part * h + head * d;
            for ti in 0..t {
                let src = &x[(bi * t + ti) * width + col..][..d];
                let bias = &self.bias[col..col + d];
                for ((o, s), bb) in dst[ti * d..(ti + 1) * d].iter_mut().zip(src).zip(bias) {
                    *o = s + bb;
                }
            }
        });
        Ok((CpuStorage::F32(out), Shape::from((3, b, heads, t, d))))
    }
}

#[cfg(test)]
mod tests {
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
