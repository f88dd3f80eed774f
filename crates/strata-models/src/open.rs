//! Opening models by name: each [`table`](crate::table) entry's files checked against their
//! pins, then built by strata-candle's loader for its [`Open`] variant; any OpenAI-compatible
//! endpoint through strata-http; the disk caches around them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_candle::{BertEmbedder, CrossEncoder, EmbedderConfig, EngineError, GgufGenerator, Precision, RerankConfig};
use strata_core::{Embedder, Generator, Reranker, TokenCounter};

use crate::table::{self, Kind, Model, Open};
use crate::{CachedEmbedder, CachedGenerator, CachedReranker, LazyGenerator, ModelError};

/// The model of `kind` called `name`, or an error listing the names there are.
fn find(kind: Kind, name: &str) -> Result<&'static Model, ModelError> {
    table::find(kind, name).ok_or_else(|| unknown(kind, name))
}

/// No model of `kind` is called `name`: the error lists those that are.
fn unknown(kind: Kind, name: &str) -> ModelError {
    let mut known = table::aliases(kind).join(", ");
    if kind == Kind::Generator {
        known.push_str("; or a path to a GGUF file, or an endpoint as URL#MODEL");
    }
    ModelError::Unknown { kind, name: name.to_string(), known }
}

/// Checks every file of `model` in `models_dir` for its pinned size and, when `hash`, its
/// sha256, and returns the model's folder. A file that is there but wrong is an error, never a
/// reason to look elsewhere, so a corrupt download is never silently bypassed.
pub(crate) fn checked(model: &'static Model, models_dir: &Path, hash: bool) -> Result<PathBuf, ModelError> {
    for f in model.files {
        let path = models_dir.join(f.out);
        let m = model.name;
        let meta = std::fs::metadata(&path).map_err(|_| ModelError::Missing { path: path.clone(), model: m })?;
        if meta.len() != f.size {
            return Err(ModelError::WrongSize { path, size: meta.len(), expected: f.size, model: m });
        }
        if hash {
            let load = |e: std::io::Error| EngineError::Load { path: path.clone(), message: e.to_string() };
            let got = strata_text::sha256_hex(std::fs::File::open(&path).map_err(load)?).map_err(load)?;
            if got != f.sha256 {
                return Err(ModelError::WrongHash { path, got, expected: f.sha256.to_string(), model: m });
            }
        }
    }
    Ok(models_dir.join(model.name))
}

/// The folder of the pinned model of `kind` that `name` selects in `models_dir`, every file
/// checked against its pins, and its table entry: for a caller that builds the model itself,
/// with settings of its own (the benches).
pub fn pinned(kind: Kind, name: &str, models_dir: &Path) -> Result<(PathBuf, &'static Model), ModelError> {
    let model = find(kind, name)?;
    Ok((checked(model, models_dir, true)?, model))
}

fn open_embedder(name: &str, models_dir: &Path) -> Result<BertEmbedder, ModelError> {
    let model = find(Kind::Embedder, name)?;
    let folder = checked(model, models_dir, true)?;
    // Turns of a chat rarely reach 512 tokens; nomic reads up to 2,048 and bge 512, at a
    // quadratic cost in attention.
    let long = EmbedderConfig { max_tokens: 512, ..EmbedderConfig::default() };
    Ok(match model.open {
        Open::BertSafetensors => BertEmbedder::load(&folder, model.name, EmbedderConfig::default())?,
        Open::NomicGguf { vocabulary } => {
            // F32: 8-bit linear layers put nomic's vectors at a cosine of 0.99 to llama.cpp's
            // (F32: 0.99999), and are faster only on CPUs with AVX-512 VNNI.
            let vocab = checked(find(Kind::Embedder, vocabulary)?, models_dir, true)?;
            let gguf = models_dir.join(model.files[0].out);
            BertEmbedder::load_nomic(&gguf, &vocab.join("tokenizer.json"), model.name, long)?
        }
        // The file's own 8-bit weights on our int8 path: twice the dequantized F32's speed,
        // and as close to ONNX Runtime's vectors (docs/results.md, "Reranking").
        Open::BgeOnnx => {
            BertEmbedder::load_bge(&folder, model.name, EmbedderConfig { precision: Precision::Int8, ..long })?
        }
        // `find` returns embedders only; a table whose kinds disagree is refused, not run.
        Open::CrossEncoderOnnx | Open::Gguf => return Err(unknown(Kind::Embedder, name)),
    })
}

fn open_reranker(name: &str, models_dir: &Path) -> Result<CrossEncoder, ModelError> {
    let model = find(Kind::Reranker, name)?;
    let folder = checked(model, models_dir, true)?;
    match model.open {
        Open::CrossEncoderOnnx => Ok(CrossEncoder::load(&folder, model.name, RerankConfig::default())?),
        _ => Err(unknown(Kind::Reranker, name)),
    }
}

/// The sentence embedder `name` selects (an alias of [`table::aliases`]`(Kind::Embedder)`, or
/// a folder name) from `models_dir`, checked against its pins, computing every vector it is
/// asked for.
pub fn embedder(name: &str, models_dir: &Path) -> Result<Arc<dyn Embedder>, ModelError> {
    Ok(Arc::new(open_embedder(name, models_dir)?))
}

/// Like [`embedder`], with vectors kept on disk by model, task and text under
/// `models_dir/.cache`: for batch runs over the same texts (the eval harness, segmentation).
pub fn cached_embedder(name: &str, models_dir: &Path) -> Result<Arc<dyn Embedder>, ModelError> {
    let model = open_embedder(name, models_dir)?;
    Ok(Arc::new(CachedEmbedder::open(model, &models_dir.join(".cache"))?))
}

/// The reranker `name` selects (`msmarco`) from `models_dir`, scoring every pair it is asked
/// about (a server's questions rarely repeat).
pub fn reranker(name: &str, models_dir: &Path) -> Result<Arc<dyn Reranker>, ModelError> {
    Ok(Arc::new(open_reranker(name, models_dir)?))
}

/// The reranker `name` selects (`msmarco`) from `models_dir`, its scores kept on disk by
/// model, question and passage under `models_dir/.cache`, as [`cached_embedder`] keeps vectors.
pub fn cached_reranker(name: &str, models_dir: &Path) -> Result<Arc<dyn Reranker>, ModelError> {
    let model = open_reranker(name, models_dir)?;
    Ok(Arc::new(CachedReranker::open(model, &models_dir.join(".cache"))?))
}

/// A local chat model's file and id: a pinned model by alias or folder name, else a path to
/// a GGUF file (named by its stem). A bare word that names no model is refused with the
/// names there are, rather than looked for as a file.
fn gguf(name: &str, models_dir: &Path) -> Result<(PathBuf, String, Option<&'static Model>), ModelError> {
    if let Some(model) = table::find(Kind::Generator, name) {
        return Ok((models_dir.join(model.files[0].out), model.name.to_string(), Some(model)));
    }
    let path = Path::new(name);
    let is_path = path.components().count() > 1 || path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if !is_path {
        return Err(unknown(Kind::Generator, name));
    }
    if !path.is_file() {
        return Err(EngineError::Missing { path: path.to_path_buf() }.into());
    }
    let id = path.file_stem().map_or_else(|| name.to_string(), |s| s.to_string_lossy().into_owned());
    Ok((path.to_path_buf(), id, None))
}

/// The GGUF model `name` selects, read now, a pinned one checked against its hash.
fn load_gguf(name: &str, models_dir: &Path) -> Result<GgufGenerator, ModelError> {
    let (path, id, model) = gguf(name, models_dir)?;
    if let Some(model) = model {
        checked(model, models_dir, true)?;
    }
    Ok(GgufGenerator::load(&path, &id)?)
}

/// A local chat model with what a server needs to prompt it: its own token counter (the
/// prompt counted as the model reads it, chat template included) and its window.
pub struct LocalGenerator {
    pub generator: Arc<dyn Generator>,
    pub counter: Arc<dyn TokenCounter>,
    /// The longest prompt and reply together, from the file's metadata.
    pub window: usize,
}

impl std::fmt::Debug for LocalGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalGenerator")
            .field("model", &self.generator.model_id())
            .field("window", &self.window)
            .finish()
    }
}

/// The local chat model `name` selects (`qwen`, `qwen1.5b`, `smollm2` or a GGUF path), read
/// now and asked afresh every time, with its counter and window.
pub fn local_generator(name: &str, models_dir: &Path) -> Result<LocalGenerator, ModelError> {
    let g = load_gguf(name, models_dir)?;
    let (counter, window) = (Arc::new(g.token_counter()), g.context_length());
    Ok(LocalGenerator { generator: Arc::new(g), counter, window })
}

/// As [`generator`], with an endpoint's answers cached on disk too (by `MODEL@URL`, prompt and
/// token limit): for a batch job such as the harness's reader, whose reruns should cost nothing.
/// Clear `models_dir/.cache/generations` when the model behind the name changes.
pub fn cached_generator(name: &str, models_dir: &Path) -> Result<Arc<dyn Generator>, ModelError> {
    if strata_http::HttpConfig::is_endpoint(name) {
        let http = strata_http::HttpGenerator::new(strata_http::HttpConfig::parse(name)?);
        return Ok(Arc::new(CachedGenerator::open(http, &models_dir.join(".cache"))?));
    }
    generator(name, models_dir)
}

/// The chat model `name` selects: a local one (`qwen`, `qwen1.5b`, `smollm2` or a GGUF path)
/// from `models_dir`, read on its first uncached prompt (what is checked now is that the file
/// is there, of the pinned size), its answers cached on disk under `models_dir/.cache`; or an
/// OpenAI-compatible endpoint, `URL#MODEL`, asked afresh every time (the model behind a name
/// can change).
pub fn generator(name: &str, models_dir: &Path) -> Result<Arc<dyn Generator>, ModelError> {
    Ok(match chat_model(name, models_dir)? {
        ChatModel::Local(lazy) => Arc::new(CachedGenerator::open(*lazy, &models_dir.join(".cache"))?),
        ChatModel::Endpoint(endpoint) => endpoint,
    })
}

/// As [`generator`], with nothing kept on disk: for a server, whose prompts do not repeat, so
/// that a cache of its answers would only grow for as long as it runs.
pub fn fresh_generator(name: &str, models_dir: &Path) -> Result<Arc<dyn Generator>, ModelError> {
    Ok(match chat_model(name, models_dir)? {
        ChatModel::Local(lazy) => Arc::new(*lazy),
        ChatModel::Endpoint(endpoint) => endpoint,
    })
}

/// What a chat model's name opens, before any disk cache.
enum ChatModel {
    /// A local model, read on its first prompt.
    Local(Box<LazyGenerator<GgufGenerator>>),
    /// An OpenAI-compatible endpoint's client.
    Endpoint(Arc<dyn Generator>),
}

fn chat_model(name: &str, models_dir: &Path) -> Result<ChatModel, ModelError> {
    if strata_http::HttpConfig::is_endpoint(name) {
        let config = strata_http::HttpConfig::parse(name)?;
        return Ok(ChatModel::Endpoint(Arc::new(strata_http::HttpGenerator::new(config))));
    }
    let (_, id, model) = gguf(name, models_dir)?;
    if let Some(model) = model {
        checked(model, models_dir, false)?;
    }
    let (name, dir) = (name.to_string(), models_dir.to_path_buf());
    Ok(ChatModel::Local(Box::new(LazyGenerator::new(&id, move || load_gguf(&name, &dir)))))
}
