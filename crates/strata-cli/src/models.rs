//! Where the CLI finds model weights and how it opens them: one place for every command that
//! takes `--models-dir`, `--model` or embeds text.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use strata_candle::{CachedEmbedder, CachedGenerator};
use strata_core::{Embedder, Generator};

/// `--models-dir`, else `$STRATA_MODELS`, else `./models`.
pub(crate) fn dir(arg: Option<&Path>) -> PathBuf {
    arg.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("STRATA_MODELS").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("models"))
}

/// The sentence embedder `name` selects (`minilm` or `nomic`), its vectors cached on disk
/// under the models folder.
pub(crate) fn embedder(name: &str, models: &Path) -> Result<Arc<dyn Embedder>> {
    let model = strata_candle::load_embedder(name, models)?;
    Ok(Arc::new(CachedEmbedder::open(model, &models.join(".cache"))?))
}

/// The chat model `--model` names, if any: a local one (`qwen`, `qwen1.5b`, `smollm2` or a GGUF
/// path) from `--models-dir` (see [`dir`]), its answers cached on disk under the models folder;
/// or an OpenAI-compatible endpoint, `URL#MODEL`, asked afresh every time (the model behind a
/// name can change).
pub(crate) fn generator(name: Option<&str>, models_dir: Option<&Path>) -> Result<Option<Arc<dyn Generator>>> {
    let Some(name) = name else { return Ok(None) };
    if strata_http::HttpConfig::is_endpoint(name) {
        let config = strata_http::HttpConfig::parse(name).map_err(|e| crate::BadInput(e.to_string()))?;
        return Ok(Some(Arc::new(strata_http::HttpGenerator::new(config))));
    }
    let models = dir(models_dir);
    let g = strata_candle::load_generator(name, &models)?;
    Ok(Some(Arc::new(CachedGenerator::open(g, &models.join(".cache"))?)))
}
