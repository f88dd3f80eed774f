//! 4-bit weights for the decoding step: a copy of a generator's linear layers that a
//! one-token product reads in 5 bits per weight instead of 8.
//!
//! Why: generating one token reads every weight once and does little arithmetic with each,
//! so the step is bound by memory bandwidth, and int8 weights are twice the bytes of the
//! 4-bit blocks the GGUF file shipped. Prompts (many rows at once) stay on the int8 kernel,
//! which is bound by arithmetic instead.
//!
//! The arithmetic: weights in blocks of 32 inputs per output channel, asymmetric,
//! `w ≈ s·q + lo` with `q` in 0..=15 and `s`, `lo` in f16 (for a matrix that was 4-bit in its
//! file, a block of 32 is one of its sub-blocks, so the values it held come back nearly
//! exactly). Activations in the same blocks, symmetric `i8`, `x ≈ sₓ·u`. Per block,
//! `Σ w·x ≈ s·sₓ·Σ q·u + lo·sₓ·Σ u`: an exact integer sum and two fused multiply-adds, done in
//! the same order by the AVX-512 VNNI kernel, the AVX2 one and the portable one, so they agree
//! to the bit and the output does not depend on the CPU.

// SIMD intrinsics behind a runtime CPU check, as in `int8.rs`; a test holds the kernels to
// the bit.
#![allow(unsafe_code)]

use half::f16;
use rayon::prelude::*;

use crate::cpu::Kernel;

/// Inputs per block, each with its own scale and offset.
pub(crate) const BLOCK: usize = 32;
/// Output channels per packed panel: four 16-lane vectors.
const NR: usize = 64;
/// Bytes of one block of one panel: 64 channels × 32 inputs at 4 bits.
const BLOCK_BYTES: usize = NR * BLOCK / 2;

/// A weight matrix `(n, k)` with `k` a multiple of [`BLOCK`], packed for the kernels.
#[derive(Debug, Clone)]
pub(crate) struct Int4Matrix {
    n: usize,
    k: usize,
    /// Per panel, per block, four chunks of `NR·4` bytes: byte `lane·4 + i` of chunk `j` holds
    /// input `8j + i` of the block in its low nibble and input `8j + 4 + i` in its high one,
    /// so one chunk unpacks into two of the int8 kernel's 4-input steps.
    packed: Vec<u8>,
    /// Per panel, per block, `NR` scales and `NR` offsets (f16 bits).
    scale: Vec<u16>,
    low: Vec<u16>,
}

impl Int4Matrix {
    /// Quantizes `weight`, row-major `(n, k)`; `None` when `k` is not a multiple of
    /// [`BLOCK`].
    pub(crate) fn quantize(weight: &[f32], n: usize, k: usize) -> Option<Int4Matrix> {
        assert_eq!(weight.len(), n * k, "weight shape");
        if k == 0 || !k.is_multiple_of(BLOCK) {
            return None;
        }
        let blocks = k / BLOCK;
        let panels = n.div_ceil(NR);
        let mut packed = vec![0u8; panels * blocks * BLOCK_BYTES];
        let mut scale = vec![0u16; panels * blocks * NR];
        let mut low = vec![0u16; panels * blocks * NR];
        // Panels are independent: quantized in parallel (a 1.5B model has a billion weights).
        packed
            .par_chunks_mut(blocks * BLOCK_BYTES)
            .zip(scale.par_chunks_mut(blocks * NR))
            .zip(low.par_chunks_mut(blocks * NR))
            .enumerate()
            .for_each(|(p, ((packed, scale), low))| {
                for lane in 0..NR.min(n - p * NR) {
                    let c = p * NR + lane;
                    for b in 0..blocks {
                        let v = &weight[c * k + b * BLOCK..c * k + (b + 1) * BLOCK];
                        let (lo, hi) =
                            v.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &x| (l.min(x), h.max(x)));
                        // The stored (rounded) scale and offset are the ones the codes are chosen for.
                        let lo = f16::from_f32(lo);
                        let s = f16::from_f32((hi - lo.to_f32()) / 15.0);
                        scale[b * NR + lane] = s.to_bits();
                        low[b * NR + lane] = lo.to_bits();
                        let (s, lo) = (s.to_f32(), lo.to_f32());
                        let block = &mut packed[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
                        for (i, &x) in v.iter().enumerate() {
                            let q = if s > 0.0 { ((x - lo) / s).round().clamp(0.0, 15.0) as u8 } else { 0 };
                            let (j, half, t) = (i / 8, (i % 8) / 4, i % 4);
                            block[j * NR * 4 + lane * 4 + t] |= q << (4 * half);
                        }
                    }
                }
            });
        Some(Int4Matrix { n, k, packed, scale, low })
    }

    /// `x · Wᵀ` for one row `x` of length `k`.
    pub(crate) fn matvec(&self, x: &[f32]) -> Vec<f32> {
        assert_eq!(x.len(), self.k, "activation shape");
        let (xq, xs, xsum) = quantize_activations(x);
        let blocks = self.k / BLOCK;
        let kernel = Kernel::detect();
        let mut y = vec![0f32; self.n];
        y.par_chunks_mut(NR).enumerate().for_each(|(p, out)| {
            let w = &self.packed[p * blocks * BLOCK_BYTES..(p + 1) * blocks * BLOCK_BYTES];
            let s = &self.scale[p * blocks * NR..(p + 1) * blocks * NR];
            let lo = &self.low[p * blocks * NR..(p + 1) * blocks * NR];
            let mut acc = [0f32; NR];
            match kernel {
                // SAFETY: `Kernel::detect` checked the CPU features each kernel is compiled for.
                Kernel::Vnni => unsafe { kernel_vnni(&xq, &xs, &xsum, w, s, lo, &mut acc) },
                Kernel::Avx2 => unsafe { kernel_avx2(&xq, &xs, &xsum, w, s, lo, &mut acc) },
                Kernel::Portable => kernel_portable(&xq, &xs, &xsum, w, s, lo, &mut acc),
            }
            out.copy_from_slice(&acc[..out.len()]);
        });
        y
    }
}

/// Symmetric `i8` per block of [`BLOCK`]: the codes, each block's scale and its codes' sum.
fn quantize_activations(x: &[f32]) -> (Vec<i8>, Vec<f32>, Vec<f32>) {
    let blocks = x.len() / BLOCK;
    let mut q = vec![0i8; x.len()];
    let mut scale = vec![0f32; blocks];
    let mut sum = vec![0f32; blocks];
    for b in 0..blocks {
        let v = &x[b * BLOCK..(b + 1) * BLOCK];
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        if max == 0.0 {
            continue;
        }
        let s = max / 127.0;
        let mut total = 0i32;
        for (o, &x) in q[b * BLOCK..(b + 1) * BLOCK].iter_mut().zip(v) {
            *o = (x / s).round().clamp(-127.0, 127.0) as i8;
            total += i32::from(*o);
        }
        scale[b] = s;
        sum[b] = s * total as f32;
    }
    (q, scale, sum)
}

/// One panel: per block, the exact integer sums `Σ q·u` per channel, then
/// `acc = fma(Σ, s·sₓ, acc)` and `acc = fma(lo, sₓ·Σ u, acc)`.
fn kernel_portable(xq: &[i8], xs: &[f32], xsum: &[f32], w: &[u8], s: &[u16], lo: &[u16], acc: &mut [f32; NR]) {
    for (b, ((&sx, &sum), wb)) in xs.iter().zip(xsum).zip(w.chunks_exact(BLOCK_BYTES)).enumerate() {
        let mut dot = [0i32; NR];
        let x = &xq[b * BLOCK..(b + 1) * BLOCK];
        for (j, chunk) in wb.chunks_exact(NR * 4).enumerate() {
            let (x0, x1) = (&x[8 * j..8 * j + 4], &x[8 * j + 4..8 * j + 8]);
            for (lane, d) in dot.iter_mut().enumerate() {
                let q = &chunk[lane * 4..lane * 4 + 4];
                for t in 0..4 {
                    *d += i32::from(q[t] & 15) * i32::from(x0[t]) + i32::from(q[t] >> 4) * i32::from(x1[t]);
                }
            }
        }
        let (sb, lb) = (&s[b * NR..(b + 1) * NR], &lo[b * NR..(b + 1) * NR]);
        for (lane, a) in acc.iter_mut().enumerate() {
            *a = (dot[lane] as f32).mul_add(f16::from_bits(sb[lane]).to_f32() * sx, *a);
            *a = f16::from_bits(lb[lane]).to_f32().mul_add(sum, *a);
        }
    }
}

/// [`kernel_portable`] with AVX-512: per chunk, one load of 64 bytes per 16 channels gives
/// two 4-input steps (low and high nibbles) of `vpdpbusd`.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn kernel_vnni(xq: &[i8], xs: &[f32], xsum: &[f32], w: &[u8], s: &[u16], lo: &[u16], acc: &mut [f32; NR]) {
    use std::arch::x86_64::*;
    let blocks = xs.len();
    debug_assert!(xq.len() >= blocks * BLOCK && w.len() >= blocks * BLOCK_BYTES);
    debug_assert!(s.len() >= blocks * NR && lo.len() >= blocks * NR);
    let nibble = _mm512_set1_epi8(15);
    let mut f = [_mm512_setzero_ps(); 4];
    for b in 0..blocks {
        // SAFETY: the bounds asserted above: block b's bytes, codes, scales and offsets.
        unsafe {
            let mut d = [_mm512_setzero_si512(); 4];
            let wb = w.as_ptr().add(b * BLOCK_BYTES);
            let xb = xq.as_ptr().add(b * BLOCK);
            for j in 0..4 {
                let x0 = _mm512_set1_epi32(std::ptr::read_unaligned(xb.add(8 * j).cast::<i32>()));
                let x1 = _mm512_set1_epi32(std::ptr::read_unaligned(xb.add(8 * j + 4).cast::<i32>()));
                for (v, dv) in d.iter_mut().enumerate() {
                    let raw = _mm512_loadu_si512(wb.add(j * NR * 4 + v * 64).cast());
                    let low = _mm512_and_si512(raw, nibble);
                    let high = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble);
                    *dv = _mm512_dpbusd_epi32(*dv, low, x0);
                    *dv = _mm512_dpbusd_epi32(*dv, high, x1);
                }
            }
            let sx = _mm512_set1_ps(xs[b]);
            let sum = _mm512_set1_ps(xsum[b]);
            for (v, fv) in f.iter_mut().enumerate() {
                let sc = _mm512_cvtph_ps(_mm256_loadu_si256(s.as_ptr().add(b * NR + v * 16).cast()));
                let lw = _mm512_cvtph_ps(_mm256_loadu_si256(lo.as_ptr().add(b * NR + v * 16).cast()));
                *fv = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[v]), _mm512_mul_ps(sc, sx), *fv);
                *fv = _mm512_fmadd_ps(lw, sum, *fv);
            }
        }
    }
    for (v, fv) in f.iter().enumerate() {
        // SAFETY: `acc` has NR lanes; each vector covers 16 of them.
        unsafe { _mm512_storeu_ps(acc.as_mut_ptr().add(v * 16), *fv) };
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel_vnni(xq: &[i8], xs: &[f32], xsum: &[f32], w: &[u8], s: &[u16], lo: &[u16], acc: &mut [f32; NR]) {
    kernel_portable(xq, xs, xsum, w, s, lo, acc)
}

/// [`kernel_portable`] with AVX2, for CPUs without VNNI. A 4-bit code times an `i8` input is
/// at most 15·127, so `vpmaddubsw`'s 16-bit pair sums cannot saturate here (unlike the int8
/// kernel's full bytes), and `vpmaddwd` by ones completes each 4-input sum exactly as
/// `vpdpbusd` does. Half a panel (32 channels) at a time keeps its sums in registers.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn kernel_avx2(xq: &[i8], xs: &[f32], xsum: &[f32], w: &[u8], s: &[u16], lo: &[u16], acc: &mut [f32; NR]) {
    use std::arch::x86_64::*;
    let blocks = xs.len();
    debug_assert!(xq.len() >= blocks * BLOCK && w.len() >= blocks * BLOCK_BYTES);
    debug_assert!(s.len() >= blocks * NR && lo.len() >= blocks * NR);
    let nibble = _mm256_set1_epi8(15);
    let ones = _mm256_set1_epi16(1);
    for half in 0..2 {
        let mut f = [_mm256_setzero_ps(); 4];
        for b in 0..blocks {
            // SAFETY: the bounds asserted above: block b's bytes, codes, scales and offsets.
            unsafe {
                let mut d = [_mm256_setzero_si256(); 4];
                let wb = w.as_ptr().add(b * BLOCK_BYTES + half * 128);
                let xb = xq.as_ptr().add(b * BLOCK);
                for j in 0..4 {
                    let x0 = _mm256_set1_epi32(std::ptr::read_unaligned(xb.add(8 * j).cast::<i32>()));
                    let x1 = _mm256_set1_epi32(std::ptr::read_unaligned(xb.add(8 * j + 4).cast::<i32>()));
                    for (v, dv) in d.iter_mut().enumerate() {
                        let raw = _mm256_loadu_si256(wb.add(j * NR * 4 + v * 32).cast());
                        let low = _mm256_and_si256(raw, nibble);
                        let high = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
                        *dv = _mm256_add_epi32(*dv, _mm256_madd_epi16(_mm256_maddubs_epi16(low, x0), ones));
                        *dv = _mm256_add_epi32(*dv, _mm256_madd_epi16(_mm256_maddubs_epi16(high, x1), ones));
                    }
                }
                let sx = _mm256_set1_ps(xs[b]);
                let sum = _mm256_set1_ps(xsum[b]);
                for (v, fv) in f.iter_mut().enumerate() {
                    let at = b * NR + half * 32 + v * 8;
                    let sc = _mm256_cvtph_ps(_mm_loadu_si128(s.as_ptr().add(at).cast()));
                    let lw = _mm256_cvtph_ps(_mm_loadu_si128(lo.as_ptr().add(at).cast()));
                    *fv = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d[v]), _mm256_mul_ps(sc, sx), *fv);
                    *fv = _mm256_fmadd_ps(lw, sum, *fv);
                }
            }
        }
        for (v, fv) in f.iter().enumerate() {
            // SAFETY: `acc` has NR lanes; each vector covers 8 of them.
            unsafe { _mm256_storeu_ps(acc.as_mut_ptr().add(half * 32 + v * 8), *fv) };
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel_avx2(xq: &[i8], xs: &[f32], xsum: &[f32], w: &[u8], s: &[u16], lo: &[u16], acc: &mut [f32; NR]) {
    kernel_portable(xq, xs, xsum, w, s, lo, acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{cosine, lcg};

    /// Weights already on a 4-bit grid per block (as a GGUF file's 4-bit blocks are) come
    /// back to within f16 rounding, random ones close to f32; the kernels agree to the bit.
    #[test]
    fn int4_product_is_close_to_f32_and_kernels_agree() {
        let mut seed = 11;
        for (n, k) in [(64, 32), (70, 96), (130, 1536)] {
            let x: Vec<f32> = (0..k).map(|_| lcg(&mut seed)).collect();
            let random: Vec<f32> = (0..n * k).map(|_| lcg(&mut seed) * 0.1).collect();
            // Each block: a scale and an offset of its own, codes 0..=15 that use the range.
            let mut gridded = vec![0f32; n * k];
            for (i, block) in gridded.chunks_mut(BLOCK).enumerate() {
                let (s, lo) = (0.01 + 0.002 * (i % 7) as f32, -0.08 + 0.01 * (i % 5) as f32);
                for (t, v) in block.iter_mut().enumerate() {
                    let q = if t == 0 {
                        0
                    } else if t == 1 {
                        15
                    } else {
                        (lcg(&mut seed).abs() * 15.99) as u32
                    };
                    *v = s * q as f32 + lo;
                }
            }
            for (w, floor) in [(&random, 0.99), (&gridded, 0.9999)] {
                let m = Int4Matrix::quantize(w, n, k).unwrap();
                let want: Vec<f32> = (0..n).map(|c| (0..k).map(|i| x[i] * w[c * k + i]).sum()).collect();
                let y = m.matvec(&x);
                assert!(cosine(&y, &want) > floor, "({n}, {k}): cosine {}", cosine(&y, &want));

                let (xq, xs, xsum) = quantize_activations(&x);
                let blocks = k / BLOCK;
                for p in 0..n.div_ceil(NR) {
                    let args = (
                        &m.packed[p * blocks * BLOCK_BYTES..(p + 1) * blocks * BLOCK_BYTES],
                        &m.scale[p * blocks * NR..(p + 1) * blocks * NR],
                        &m.low[p * blocks * NR..(p + 1) * blocks * NR],
                    );
                    let mut slow = [0f32; NR];
                    kernel_portable(&xq, &xs, &xsum, args.0, args.1, args.2, &mut slow);
                    if crate::cpu::has_vnni() {
                        let mut fast = [0f32; NR];
                        // SAFETY: checked just above.
                        unsafe { kernel_vnni(&xq, &xs, &xsum, args.0, args.1, args.2, &mut fast) };
                        assert_eq!(fast.map(f32::to_bits), slow.map(f32::to_bits), "vnni ({n}, {k}) panel {p}");
                    }
                    if crate::cpu::has_avx2() {
                        let mut fast = [0f32; NR];
                        // SAFETY: checked just above.
                        unsafe { kernel_avx2(&xq, &xs, &xsum, args.0, args.1, args.2, &mut fast) };
                        assert_eq!(fast.map(f32::to_bits), slow.map(f32::to_bits), "avx2 ({n}, {k}) panel {p}");
                    }
                }
            }
        }
        assert!(Int4Matrix::quantize(&[0.0; 40], 1, 40).is_none(), "40 inputs are not whole blocks");
    }
}
