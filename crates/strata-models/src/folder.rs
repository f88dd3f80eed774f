//! Where models are: the one rule every command, the benches and `cargo xtask` follow.

use std::path::{Path, PathBuf};

/// `explicit` (a `--models-dir` flag), else `$STRATA_MODELS`, else `models/` in the current
/// directory when there is one (as an absolute path, so that it names the same folder for a
/// process started elsewhere), else the `models/` of the checkout this was built from, where
/// `cargo xtask fetch-models` writes (so a binary run from anywhere finds what was fetched for
/// it).
pub fn dir(explicit: Option<&Path>) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("STRATA_MODELS").map(PathBuf::from))
        .or_else(|| std::path::absolute("models").ok().filter(|d| d.is_dir()))
        .unwrap_or_else(checkout_models)
}

/// `models/` at the root of the checkout this crate was built from.
pub fn checkout_models() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir.parent().and_then(Path::parent).unwrap_or(crate_dir).join("models")
}
