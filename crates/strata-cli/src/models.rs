//! Where the CLI finds model weights (`--models-dir`) and the chat model `--model` names; the
//! models themselves are opened by `strata_eval::embeddings` and `strata_eval::generator`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use strata_core::Generator;

/// `--models-dir`, else `$STRATA_MODELS`, else `./models`.
pub(crate) fn dir(arg: Option<&Path>) -> PathBuf {
    arg.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("STRATA_MODELS").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("models"))
}

/// The chat model `--model` names, if any, from `--models-dir` (see [`dir`]):
/// [`strata_eval::generator`].
pub(crate) fn generator(name: Option<&str>, models_dir: Option<&Path>) -> Result<Option<Arc<dyn Generator>>> {
    name.map(|name| strata_eval::generator(name, &dir(models_dir))).transpose()
}
