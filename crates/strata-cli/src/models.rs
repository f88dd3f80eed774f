//! Where the CLI finds model weights (`--models-dir`) and the chat model `--model` names; the
//! models themselves are opened by `strata_models`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use strata_core::Generator;

/// `--models-dir`, else `$STRATA_MODELS`, else `./models`, else the checkout's:
/// [`strata_models::dir`].
pub(crate) fn dir(arg: Option<&Path>) -> PathBuf {
    strata_models::dir(arg)
}

/// The chat model `--model` names, if any, from `--models-dir` (see [`dir`]):
/// [`strata_models::generator`].
pub(crate) fn generator(name: Option<&str>, models_dir: Option<&Path>) -> Result<Option<Arc<dyn Generator>>> {
    Ok(name.map(|name| strata_models::generator(name, &dir(models_dir))).transpose()?)
}

/// The reranking stage `--reranker` names (`msmarco`), or none for `none`: the cross-encoder
/// from `--models-dir` (see [`dir`]), with `deadline` per context.
pub(crate) fn reranking(
    name: &str,
    models_dir: Option<&Path>,
    deadline: Option<std::time::Duration>,
) -> Result<Option<Arc<strata::Reranking>>> {
    if name == "none" {
        return Ok(None);
    }
    let model = strata_models::reranker(name, &dir(models_dir))?;
    Ok(Some(Arc::new(strata::Reranking::new(model, deadline))))
}
