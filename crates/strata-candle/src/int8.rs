//! 8-bit integer matrix products for linear layers: `x · Wᵀ` with the weights quantized once
//! per output channel and the activations quantized per row as they arrive.
//!
//! Why our own kernel: the f32 matmul already runs near the machine's FMA peak, so the only
//! way to go faster is to do more multiply-adds per instruction. AVX-512 VNNI's `vpdpbusd`
//! multiplies 64 unsigned by signed byte pairs and adds them in fours into 16 32-bit sums:
//! four times the multiply-adds of an f32 FMA. candle's own 8-bit path (GGML's Q8_0) spends
//! its time requantizing activations into 32-wide blocks and in thread hand-offs, and was
//! slower than f32 here.
//!
//! The arithmetic: activations are asymmetric `u8` per row, `x ≈ sₓ·(u − zₓ)`; weights are
//! symmetric `i8` per output channel, `w ≈ s_w·q`. Then
//! `Σ x·w ≈ sₓ·s_w·(Σ u·q − zₓ·Σ q)`, where `Σ q` is a per-channel constant. Integer sums are
//! exact, so the AVX-512 kernel and the portable one give bit-identical results: the output
//! does not depend on the CPU.

// The one place in the workspace with `unsafe`: SIMD intrinsics behind a runtime CPU check.
// The portable kernel computes the same sums and a test holds the two to the bit.
#![allow(unsafe_code)]

use rayon::prelude::*;

use crate::cpu::Kernel;
use crate::int4::Int4Matrix;

/// Columns per packed weight panel: four 16-lane vectors.
const NR: usize = 64;
/// Rows of activations per micro-kernel call: 4 × 4 accumulators stay in registers.
const MR: usize = 4;

/// A weight matrix `(n, k)` packed for the kernels.
#[derive(Debug, Clone)]
pub(crate) struct Int8Matrix {
    n: usize,
    k: usize,
    /// `k` rounded up to a multiple of 4 (the kernel consumes 4 bytes per step).
    kp: usize,
    /// Panels of `NR` output channels; within a panel, for each group of 4 inputs, 4 bytes per
    /// channel: one 64-byte row per vector.
    packed: Vec<i8>,
    scale: Vec<f32>,
    /// `Σ q` per output channel, for the activations' zero point.
    colsum: Vec<i32>,
    /// A 4-bit copy for one-row products (decoding), where reading the weights is the cost.
    decode: Option<Int4Matrix>,
}

impl Int8Matrix {
    /// Quantizes `weight`, row-major `(n, k)` as in a linear layer (`y = x · Wᵀ`).
    pub(crate) fn quantize(weight: &[f32], n: usize, k: usize) -> Int8Matrix {
        assert_eq!(weight.len(), n * k, "weight shape");
        let mut q = vec![0i8; n * k];
        let mut scale = vec![0f32; n];
        for c in 0..n {
            let row = &weight[c * k..(c + 1) * k];
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let s = if max > 0.0 { max / 127.0 } else { 1.0 };
            scale[c] = s;
            for (o, &v) in q[c * k..(c + 1) * k].iter_mut().zip(row) {
                *o = (v / s).round().clamp(-127.0, 127.0) as i8;
            }
        }
        Int8Matrix::from_quantized(&q, n, k, scale)
    }

    /// Weights that are 8-bit already, `w = scale[c] · q` row-major `(n, k)`, as ONNX
    /// Runtime's symmetric quantization stores them: used as they are, so that the products
    /// are the file's own.
    pub(crate) fn from_quantized(q: &[i8], n: usize, k: usize, scale: Vec<f32>) -> Int8Matrix {
        assert_eq!(q.len(), n * k, "weight shape");
        assert_eq!(scale.len(), n, "one scale per output channel");
        let kp = k.next_multiple_of(4);
        let np = n.next_multiple_of(NR);
        let mut packed = vec![0i8; np * kp];
        let mut colsum = vec![0i32; n];
        for c in 0..n {
            let (panel, lane) = (c / NR, c % NR);
            for (i, &v) in q[c * k..(c + 1) * k].iter().enumerate() {
                colsum[c] += i32::from(v);
                packed[panel * NR * kp + (i / 4) * NR * 4 + lane * 4 + i % 4] = v;
            }
        }
        Int8Matrix { n, k, kp, packed, scale, colsum, decode: None }
    }

    /// As [`Int8Matrix::quantize`], with a 4-bit copy that one-row products use: for weights
    /// that were 4-bit blocks in their file, so that decoding reads about as many bytes as
    /// the file holds. Prompts keep the int8 weights.
    pub(crate) fn quantize_with_4bit_decoding(weight: &[f32], n: usize, k: usize) -> Int8Matrix {
        Int8Matrix { decode: Int4Matrix::quantize(weight, n, k), ..Int8Matrix::quantize(weight, n, k) }
    }

    #[cfg(test)]
    pub(crate) fn has_decoding_copy(&self) -> bool {
        self.decode.is_some()
    }

    /// `x · Wᵀ` for `x` row-major `(m, k)`; returns `(m, n)` row-major; one row through the
    /// 4-bit copy where there is one.
    pub(crate) fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        assert_eq!(x.len(), m * self.k, "activation shape");
        if let (1, Some(d)) = (m, &self.decode) {
            return d.matvec(x);
        }
        let (k, kp, n) = (self.k, self.kp, self.n);
        let mut xq = vec![0u8; m * kp];
        let (xs, xz): (Vec<f32>, Vec<i32>) =
            xq.par_chunks_mut(kp).zip(x.par_chunks(k)).map(|(q, row)| quantize_row(row, &mut q[..k])).unzip();
        let panels = n.div_ceil(NR);
        let kernel = Kernel::detect();
        // AVX2 reads its inputs widened to 16 bits (see `kernel_avx2`), done once here.
        let xw: Vec<i16> = match kernel {
            Kernel::Avx2 => xq.iter().map(|&u| i16::from(u)).collect(),
            _ => Vec::new(),
        };
        let sums = |r0: usize, rows: usize, w: &[i8], acc: &mut [i32]| match kernel {
            // SAFETY: `Kernel::detect` checked the CPU features each kernel is compiled for.
            Kernel::Vnni => unsafe { kernel_vnni(&xq[r0 * kp..(r0 + rows) * kp], rows, kp, w, acc) },
            Kernel::Avx2 => unsafe { kernel_avx2(&xw[r0 * kp..(r0 + rows) * kp], rows, kp, w, acc) },
            Kernel::Portable => kernel_portable(&xq[r0 * kp..(r0 + rows) * kp], rows, kp, w, acc),
        };
        if m == 1 {
            // One row (a decoding step): each panel's results go straight to their place in
            // the output, with no per-panel buffers; the step is bound by reading the weights.
            let mut y = vec![0f32; n];
            y.par_chunks_mut(NR).enumerate().for_each(|(p, out)| {
                let w = &self.packed[p * NR * kp..(p + 1) * NR * kp];
                let mut acc = [0i32; NR];
                sums(0, 1, w, &mut acc);
                let c0 = p * NR;
                for (((o, &a), &sw), &cs) in out.iter_mut().zip(&acc).zip(&self.scale[c0..]).zip(&self.colsum[c0..]) {
                    *o = xs[0] * sw * (a - xz[0] * cs) as f32;
                }
            });
            return y;
        }
        // Tasks of consecutive rows, each through every panel: a panel's weights stay in cache
        // while the task's rows pass them, and each result is scaled into its place in the
        // output at once (no buffer per panel to allocate, zero and copy). Enough tasks for
        // every core even when there are few rows.
        let threads = rayon::current_num_threads().max(1);
        let task_rows = (m / (4 * threads)).clamp(MR, 64).next_multiple_of(MR);
        // Not zeroed first (a tenth of a forward pass went to zeroing fresh buffers): the
        // tasks write every value, each its rows through every panel's columns.
        let mut y: Vec<f32> = Vec::with_capacity(m * n);
        y.spare_capacity_mut()[..m * n].par_chunks_mut(task_rows * n).enumerate().for_each(|(t, ys)| {
            let r0 = t * task_rows;
            let here = ys.len() / n;
            // The kernels set (not add to) the sums of the rows they are given, so one
            // buffer serves every block without zeroing: zeroing a fresh 1 KiB array per
            // block was a memset call each time, 6% of a bge-small pass.
            let mut acc = [0i32; MR * NR];
            for p in 0..panels {
                let w = &self.packed[p * NR * kp..(p + 1) * NR * kp];
                let c0 = p * NR;
                let cols = NR.min(n - c0);
                for rb in (0..here).step_by(MR) {
                    let rows = MR.min(here - rb);
                    sums(r0 + rb, rows, w, &mut acc);
                    for r in 0..rows {
                        let (s, z) = (xs[r0 + rb + r], xz[r0 + rb + r]);
                        let out = &mut ys[(rb + r) * n + c0..(rb + r) * n + c0 + cols];
                        let a = &acc[r * NR..r * NR + cols];
                        for (((o, &a), &sw), &cs) in
                            out.iter_mut().zip(a).zip(&self.scale[c0..]).zip(&self.colsum[c0..])
                        {
                            o.write(s * sw * (a - z * cs) as f32);
                        }
                    }
                }
            }
        });
        // SAFETY: the tasks cover rows 0..m, row blocks cover each task's rows, and the panels
        // cover columns 0..n (the last one `n - c0` wide): every value below m·n is written.
        unsafe { y.set_len(m * n) };
        y
    }
}

/// Asymmetric 8-bit quantization of one row; the range always includes zero so that zero
/// (padding, ReLU-like outputs) is exact. Returns the scale and zero point.
fn quantize_row(x: &[f32], out: &mut [u8]) -> (f32, i32) {
    // The range in eight lanes, so that it compiles to vector min and max (a fold of
    // `f32::min` stays scalar: its NaN rule is not a vector instruction's).
    let (mut lo, mut hi) = ([0f32; 8], [0f32; 8]);
    let (chunks, rest) = x.as_chunks::<8>();
    for &v in rest {
        lo[0] = if v < lo[0] { v } else { lo[0] };
        hi[0] = if v > hi[0] { v } else { hi[0] };
    }
    for c in chunks {
        for i in 0..8 {
            lo[i] = if c[i] < lo[i] { c[i] } else { lo[i] };
            hi[i] = if c[i] > hi[i] { c[i] } else { hi[i] };
        }
    }
    let lo = lo.iter().copied().fold(0f32, f32::min);
    let hi = hi.iter().copied().fold(0f32, f32::max);
    if hi <= lo {
        out.iter_mut().for_each(|u| *u = 0);
        return (1.0, 0);
    }
    let s = (hi - lo) / 255.0;
    let z = (-lo / s).round().clamp(0.0, 255.0);
    let inv = 1.0 / s;
    for (u, &v) in out.iter_mut().zip(x) {
        // Adding 2²³ rounds a value in [0, 255] to an integer (ties to even, the FPU's mode)
        // and leaves it in the low mantissa bits: a conversion that vectorises, where Rust's
        // saturating float-to-int cast checks each value for NaN and range one at a time.
        *u = ((v * inv + z).clamp(0.0, 255.0) + 8_388_608.0).to_bits() as u8;
    }
    (s, z as i32)
}

/// As a candle op over a contiguous `(m, k)` f32 tensor.
impl candle_core::CustomOp1 for Int8Matrix {
    fn name(&self) -> &'static str {
        "int8-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &candle_core::CpuStorage,
        layout: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        let candle_core::CpuStorage::F32(data) = storage else {
            candle_core::bail!("int8-matmul: expected f32");
        };
        let (Some((start, end)), &[m, k]) = (layout.contiguous_offsets(), layout.dims()) else {
            candle_core::bail!("int8-matmul: expected a contiguous 2-D tensor, got {:?}", layout.shape());
        };
        if k != self.k {
            candle_core::bail!("int8-matmul: inner dimension {k}, weights have {}", self.k);
        }
        let y = self.matmul(&data[start..end], m);
        Ok((candle_core::CpuStorage::F32(y), candle_core::Shape::from((m, self.n))))
    }
}

/// The same sums as [`kernel_vnni`] in plain integer code, for CPUs without VNNI.
fn kernel_portable(x: &[u8], rows: usize, kp: usize, w: &[i8], out: &mut [i32]) {
    for r in 0..rows {
        let xr = &x[r * kp..(r + 1) * kp];
        let o = &mut out[r * NR..(r + 1) * NR];
        o.fill(0);
        for (k4, xs) in xr.chunks_exact(4).enumerate() {
            let wk = &w[k4 * NR * 4..(k4 + 1) * NR * 4];
            for (lane, acc) in o.iter_mut().enumerate() {
                let q = &wk[lane * 4..lane * 4 + 4];
                *acc += xs.iter().zip(q).map(|(&u, &q)| i32::from(u) * i32::from(q)).sum::<i32>();
            }
        }
    }
}

/// Up to `MR` rows against one `NR`-column panel: per step of 4 inputs, each row's 4 bytes
/// are broadcast and multiplied into four 16-channel accumulators. Sets the first
/// `rows · NR` sums of `out`, whatever was there.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn kernel_vnni(x: &[u8], rows: usize, kp: usize, w: &[i8], out: &mut [i32]) {
    use std::arch::x86_64::*;
    debug_assert!(x.len() >= rows * kp && w.len() >= kp * NR && out.len() >= rows * NR);
    let mut acc = [[_mm512_setzero_si512(); 4]; MR];
    let wp = w.as_ptr();
    let xp = x.as_ptr();
    for k4 in 0..kp / 4 {
        // SAFETY: the panel holds kp/4 steps of NR·4 bytes, and each row kp bytes.
        unsafe {
            let wk = wp.add(k4 * NR * 4);
            let w0 = _mm512_loadu_si512(wk.cast());
            let w1 = _mm512_loadu_si512(wk.add(64).cast());
            let w2 = _mm512_loadu_si512(wk.add(128).cast());
            let w3 = _mm512_loadu_si512(wk.add(192).cast());
            for (r, a) in acc.iter_mut().enumerate().take(rows) {
                let b = _mm512_set1_epi32(std::ptr::read_unaligned(xp.add(r * kp + k4 * 4).cast::<i32>()));
                a[0] = _mm512_dpbusd_epi32(a[0], b, w0);
                a[1] = _mm512_dpbusd_epi32(a[1], b, w1);
                a[2] = _mm512_dpbusd_epi32(a[2], b, w2);
                a[3] = _mm512_dpbusd_epi32(a[3], b, w3);
            }
        }
    }
    for (r, a) in acc.iter().enumerate().take(rows) {
        for (j, v) in a.iter().enumerate() {
            // SAFETY: row r of `out` has NR lanes; each vector covers 16 of them.
            unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(r * NR + j * 16).cast(), *v) };
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel_vnni(x: &[u8], rows: usize, kp: usize, w: &[i8], out: &mut [i32]) {
    kernel_portable(x, rows, kp, w, out)
}

/// The sums of [`kernel_portable`] with AVX2, from the inputs widened to i16. AVX2's byte
/// product `vpmaddubsw` saturates its pair sums at 16 bits (255·127·2 does not fit; ONNX
/// Runtime's AVX2 path accepts that), so the weights are widened too, 16 bytes (4 channels × 4
/// inputs) per load, and `vpmaddwd` adds products in exact 32-bit pairs; a channel's two pair
/// sums are added at the end. Sets the first `rows · NR` sums of `out`.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn kernel_avx2(x: &[i16], rows: usize, kp: usize, w: &[i8], out: &mut [i32]) {
    debug_assert!(x.len() >= rows * kp && w.len() >= kp * NR && out.len() >= rows * NR);
    // 16 channels by two rows at a time: 8 accumulators, 4 widened weight vectors and the
    // broadcast inputs fit AVX2's 16 registers.
    for c in 0..NR / 16 {
        let mut r = 0;
        while r < rows {
            // SAFETY: AVX2 is checked by the caller; rows r.. exist in `x` and `out`.
            unsafe {
                if rows - r >= 2 {
                    avx2_block::<2>(x, r, kp, w, c, out);
                } else {
                    avx2_block::<1>(x, r, kp, w, c, out);
                }
            }
            r += 2;
        }
    }
}

/// Rows `r..r + R` against channels `16c..16c + 16` of the panel, for [`kernel_avx2`].
///
/// # Safety
/// The CPU must support AVX2; `x` holds rows `r..r + R` of `kp` values, `w` a whole panel.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn avx2_block<const R: usize>(x: &[i16], r: usize, kp: usize, w: &[i8], c: usize, out: &mut [i32]) {
    use std::arch::x86_64::*;
    let (xp, wp) = (x.as_ptr(), w.as_ptr());
    // SAFETY (whole body): the caller's contract; every offset is inside the panel or the rows.
    unsafe {
        let mut acc = [[_mm256_setzero_si256(); 4]; R];
        for k4 in 0..kp / 4 {
            let wk = wp.add(k4 * NR * 4 + c * 64);
            let wv = [
                _mm256_cvtepi8_epi16(_mm_loadu_si128(wk.cast())),
                _mm256_cvtepi8_epi16(_mm_loadu_si128(wk.add(16).cast())),
                _mm256_cvtepi8_epi16(_mm_loadu_si128(wk.add(32).cast())),
                _mm256_cvtepi8_epi16(_mm_loadu_si128(wk.add(48).cast())),
            ];
            for (i, a) in acc.iter_mut().enumerate() {
                // The row's 4 inputs, as four i16, in every 64-bit lane.
                let b = _mm256_set1_epi64x(std::ptr::read_unaligned(xp.add((r + i) * kp + k4 * 4).cast::<i64>()));
                for (a, wv) in a.iter_mut().zip(&wv) {
                    *a = _mm256_add_epi32(*a, _mm256_madd_epi16(b, *wv));
                }
            }
        }
        for (i, a) in acc.iter().enumerate() {
            for j in [0, 2] {
                // a[j] holds channels 4j..4j+4 as pairs of sums; hadd with the next four
                // channels gives (0 1 | 4 5 | 2 3 | 6 7) by 64-bit lane: put them in order.
                let h = _mm256_permute4x64_epi64(_mm256_hadd_epi32(a[j], a[j + 1]), 0b11_01_10_00);
                _mm256_storeu_si256(out.as_mut_ptr().add((r + i) * NR + c * 16 + j * 4).cast(), h);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel_avx2(x: &[i16], rows: usize, kp: usize, w: &[i8], out: &mut [i32]) {
    let x: Vec<u8> = x.iter().map(|&v| v as u8).collect();
    kernel_portable(&x, rows, kp, w, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{cosine, lcg};

    fn reference(x: &[f32], w: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
        let mut y = vec![0f32; m * n];
        for r in 0..m {
            for c in 0..n {
                y[r * n + c] = (0..k).map(|i| x[r * k + i] * w[c * k + i]).sum();
            }
        }
        y
    }

    /// Odd shapes (rows not a multiple of 4, columns not of 64, inputs not of 4) close to
    /// the f32 product, and the fast and portable kernels agree to the bit.
    #[test]
    fn int8_product_is_close_to_f32_and_kernels_agree() {
        let mut seed = 7;
        for (m, n, k) in [(1, 64, 4), (5, 70, 33), (13, 384, 384), (9, 130, 1536)] {
            let x: Vec<f32> = (0..m * k).map(|_| lcg(&mut seed)).collect();
            let w: Vec<f32> = (0..n * k).map(|_| lcg(&mut seed) * 0.1).collect();
            let q = Int8Matrix::quantize(&w, n, k);
            let y = q.matmul(&x, m);
            let want = reference(&x, &w, m, n, k);
            let cosine = cosine(&y, &want);
            assert!(cosine > 0.999, "({m}, {n}, {k}): cosine {cosine}");

            let mut xq = vec![0u8; m * q.kp];
            for r in 0..m {
                quantize_row(&x[r * k..(r + 1) * k], &mut xq[r * q.kp..r * q.kp + k]);
            }
            for p in 0..n.div_ceil(NR) {
                let w = &q.packed[p * NR * q.kp..(p + 1) * NR * q.kp];
                for r0 in (0..m).step_by(MR) {
                    let rows = MR.min(m - r0);
                    let xr = &xq[r0 * q.kp..(r0 + rows) * q.kp];
                    // Buffers with old sums in them: the kernels set, they do not add.
                    let mut slow = vec![7i32; rows * NR];
                    kernel_portable(xr, rows, q.kp, w, &mut slow);
                    if crate::cpu::has_vnni() {
                        let mut fast = vec![-3i32; rows * NR];
                        // SAFETY: checked just above.
                        unsafe { kernel_vnni(xr, rows, q.kp, w, &mut fast) };
                        assert_eq!(fast, slow, "vnni ({m}, {n}, {k}) panel {p} rows {r0}");
                    }
                    if crate::cpu::has_avx2() {
                        let xw: Vec<i16> = xr.iter().map(|&u| i16::from(u)).collect();
                        let mut fast = vec![5i32; rows * NR];
                        // SAFETY: checked just above.
                        unsafe { kernel_avx2(&xw, rows, q.kp, w, &mut fast) };
                        assert_eq!(fast, slow, "avx2 ({m}, {n}, {k}) panel {p} rows {r0}");
                    }
                }
            }
        }
    }

    /// Inputs of 255 against weights of ±127, where a 16-bit pair sum would overflow: every
    /// kernel still gives the exact sums.
    #[test]
    fn extreme_products_are_exact() {
        let (m, n, k) = (3, 64, 8);
        let w: Vec<f32> = (0..n * k).map(|i| if i % 3 == 0 { -1.0 } else { 1.0 }).collect();
        let q = Int8Matrix::quantize(&w, n, k);
        let y = q.matmul(&vec![1.0; m * k], m);
        for (c, got) in y.iter().take(n).enumerate() {
            let want: f32 = w[c * k..(c + 1) * k].iter().sum();
            assert!((got - want).abs() < 1e-4, "channel {c}: {got} against {want}");
        }
    }

    /// The vectorised range and rounding give what the plain formula gives, ties included
    /// (values on half steps), for rows of every length modulo the eight lanes.
    #[test]
    fn row_quantization_is_the_plain_formula() {
        let mut seed = 11;
        for len in [1, 7, 8, 9, 33, 384] {
            let mut x: Vec<f32> = (0..len).map(|_| lcg(&mut seed) * 3.0).collect();
            x[0] = -1.0;
            if len > 2 {
                x[1] = 254.0 / 255.0 * 2.0 - 1.0;
            }
            let mut got = vec![0u8; len];
            let (s, z) = quantize_row(&x, &mut got);
            let (lo, hi) = x.iter().fold((0f32, 0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            assert_eq!(s, (hi - lo) / 255.0, "len {len}");
            assert_eq!(z, (-lo / s).round().clamp(0.0, 255.0) as i32, "len {len}");
            let want: Vec<u8> =
                x.iter().map(|&v| (v * (1.0 / s) + z as f32).round_ties_even().clamp(0.0, 255.0) as u8).collect();
            assert_eq!(got, want, "len {len}");
        }
        let mut got = vec![9u8; 3];
        assert_eq!(quantize_row(&[0.0, 0.0, 0.0], &mut got), (1.0, 0));
        assert_eq!(got, [0, 0, 0]);
    }

    #[test]
    fn zero_rows_quantize_to_zero() {
        let q = Int8Matrix::quantize(&[0.5, -0.25, 0.0, 1.0], 2, 2);
        assert_eq!(q.matmul(&[0.0, 0.0], 1), vec![0.0, 0.0]);
    }
}
