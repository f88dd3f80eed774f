//! Which integer kernels this CPU runs, detected at run time: the 8-bit encoder's and the
//! 4-bit decoder's matmuls share the choice.

/// The integer kernels this CPU runs (`int8.rs` and `int4.rs`). Each kind computes the same
/// exact sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// AVX-512 VNNI: 64 byte products per instruction.
    Vnni,
    /// AVX2 with FMA and F16C, which every CPU the workspace builds for has.
    Avx2,
    Portable,
}

impl Kernel {
    pub(crate) fn detect() -> Kernel {
        if has_vnni() {
            return Kernel::Vnni;
        }
        if has_avx2() {
            return Kernel::Avx2;
        }
        Kernel::Portable
    }
}

/// Whether the VNNI kernels can run.
pub(crate) fn has_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the AVX2 kernels (which also convert f16 and fuse multiply-adds) can run.
pub(crate) fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
