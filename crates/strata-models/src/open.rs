//! Opening models by name: the embedders and generators of strata-candle, and any
//! OpenAI-compatible endpoint through strata-http.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_candle::ModelError;
use strata_core::{Embedder, Generator, Reranker};

/// A model that could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Weights missing, not the pinned ones, unreadable, or a name no loader knows.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A `URL#MODEL` that does not parse.
    #[error(transparent)]
    Endpoint(#[from] strata_http::SpecError),
}

impl OpenError {
    /// Whether the user can fix it by what they pass (a name, a path, fetching the weights),
    /// as opposed to a model that failed while running.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, OpenError::Model(ModelError::Run { .. }))
    }
}

/// Where models are, one rule for every command: `explicit` (a `--models-dir` flag), else
/// `$STRATA_MODELS`, else `models/` in the current directory when there is one, else the
/// `models/` of the checkout this was built from, where `cargo xtask fetch-models` writes (so
/// a binary run from anywhere finds what was fetched for it).
pub fn dir(explicit: Option<&Path>) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("STRATA_MODELS").map(PathBuf::from))
        .or_else(|| Some(PathBuf::from("models")).filter(|d| d.is_dir()))
        .unwrap_or_else(checkout_models)
}

/// `models/` at the root of the checkout this crate was built from.
pub fn checkout_models() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir.parent().and_then(Path::parent).unwrap_or(crate_dir).join("models")
}

/// The sentence embedder `name` selects (`minilm`, `nomic`), from `models_dir`, computing every
/// vector it is asked for.
pub fn embedder(name: &str, models_dir: &Path) -> Result<Arc<dyn Embedder>, OpenError> {
    Ok(Arc::new(strata_candle::load_embedder(name, models_dir)?))
}

/// Like [`embedder`], with vectors kept on disk by model, task and text under
/// `models_dir/.cache`: for batch runs over the same texts (the eval harness, segmentation).
pub fn cached_embedder(name: &str, models_dir: &Path) -> Result<Arc<dyn Embedder>, OpenError> {
    let model = strata_candle::load_embedder(name, models_dir)?;
    Ok(Arc::new(strata_candle::CachedEmbedder::open(model, &models_dir.join(".cache"))?))
}

/// The reranker `name` selects (`msmarco`) from `models_dir`, scoring every pair it is asked
/// about (a server's questions rarely repeat).
pub fn reranker(name: &str, models_dir: &Path) -> Result<Arc<dyn Reranker>, OpenError> {
    Ok(Arc::new(strata_candle::load_reranker(name, models_dir)?))
}

/// The reranker `name` selects (`msmarco`) from `models_dir`, its scores kept on disk by
/// model, question and passage under `models_dir/.cache`, as [`cached_embedder`] keeps vectors.
pub fn cached_reranker(name: &str, models_dir: &Path) -> Result<Arc<dyn Reranker>, OpenError> {
    let model = strata_candle::load_reranker(name, models_dir)?;
    Ok(Arc::new(strata_candle::CachedReranker::open(model, &models_dir.join(".cache"))?))
}

/// As [`generator`], with an endpoint's answers cached on disk too (by `MODEL@URL`, prompt and
/// token limit): for a batch job such as the harness's reader, whose reruns should cost nothing.
/// Clear `models_dir/.cache/generations` when the model behind the name changes.
pub fn cached_generator(name: &str, models_dir: &Path) -> Result<Arc<dyn Generator>, OpenError> {
    if strata_http::HttpConfig::is_endpoint(name) {
        let http = strata_http::HttpGenerator::new(strata_http::HttpConfig::parse(name)?);
        return Ok(Arc::new(strata_candle::CachedGenerator::open(http, &models_dir.join(".cache"))?));
    }
    generator(name, models_dir)
}

/// The chat model `name` selects: a local one (`qwen`, `qwen1.5b`, `smollm2` or a GGUF path)
/// from `models_dir`, read on its first uncached prompt, its answers cached on disk under
/// `models_dir/.cache`; or an OpenAI-compatible endpoint, `URL#MODEL`, asked afresh every time
/// (the model behind a name can change).
pub fn generator(name: &str, models_dir: &Path) -> Result<Arc<dyn Generator>, OpenError> {
    if strata_http::HttpConfig::is_endpoint(name) {
        let config = strata_http::HttpConfig::parse(name)?;
        return Ok(Arc::new(strata_http::HttpGenerator::new(config)));
    }
    let g = strata_candle::open_generator(name, models_dir)?;
    Ok(Arc::new(strata_candle::CachedGenerator::open(g, &models_dir.join(".cache"))?))
}
