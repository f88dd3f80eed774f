//! Helpers the kernels' and the decoder's unit tests share: seeded values and a cosine.

/// The next value in -1..1 of a seeded linear congruential sequence: test data without a
/// random-number crate, the same on every machine.
pub(crate) fn lcg(seed: &mut u64) -> f32 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// The cosine of two vectors, summed in f64.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (d, x, y) = a.iter().zip(b).fold((0f64, 0f64, 0f64), |(d, x, y), (&p, &q)| {
        (d + f64::from(p) * f64::from(q), x + f64::from(p * p), y + f64::from(q * q))
    });
    d / (x.sqrt() * y.sqrt())
}
