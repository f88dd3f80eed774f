//! Generations kept on disk by model and prompt hash, so that re-running an eval costs nothing,
//! and a model loaded only when a prompt is new ([`LazyGenerator`]).
//!
//! One small JSON file per request, named by sha256 of the decoder's revision, the model id,
//! the messages and the token limit, written to a temporary name and renamed into place, so a
//! crash leaves either the whole answer or none. Failures are not cached: a timeout may succeed
//! next time.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use strata_core::{GenerateError, GenerateRequest, Generation, Generator};

use crate::ModelError;

/// Part of every key, changed whenever the decoder's arithmetic changes (session 19: one-token
/// steps read 4-bit copies), so that answers an older engine cached are recomputed rather than
/// returned as this one's.
const DECODER_REVISION: &[u8] = b"decoder 2";

#[derive(Serialize, Deserialize)]
struct Stored {
    text: String,
    prompt_tokens: usize,
    generated_tokens: usize,
}

/// A [`Generator`] that answers from a disk cache and asks `inner` only for new prompts.
pub struct CachedGenerator<G> {
    inner: G,
    dir: PathBuf,
}

impl<G: Generator> std::fmt::Debug for CachedGenerator<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedGenerator").field("model", &self.inner.model_id()).field("dir", &self.dir).finish()
    }
}

impl<G: Generator> CachedGenerator<G> {
    /// Caches `inner`'s answers under `dir/generations/<model id>/`.
    pub fn open(inner: G, dir: &Path) -> Result<CachedGenerator<G>, ModelError> {
        let dir = dir.join("generations").join(crate::cache::file_name(inner.model_id()));
        std::fs::create_dir_all(&dir).map_err(|e| ModelError::Cache { path: dir.clone(), message: e.to_string() })?;
        Ok(CachedGenerator { inner, dir })
    }

    /// The generator behind the cache.
    pub fn inner(&self) -> &G {
        &self.inner
    }

    fn path(&self, request: &GenerateRequest) -> PathBuf {
        let mut h = Sha256::new();
        h.update(DECODER_REVISION);
        h.update(self.inner.model_id().as_bytes());
        for m in &request.messages {
            h.update([0u8]);
            h.update(m.role.as_str().as_bytes());
            h.update([0u8]);
            h.update(m.content.as_bytes());
        }
        h.update(request.max_tokens.to_le_bytes());
        self.dir.join(format!("{}.json", strata_text::hex(&h.finalize())))
    }
}

impl<G: Generator> Generator for CachedGenerator<G> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn generate(&self, request: &GenerateRequest) -> Result<Generation, GenerateError> {
        let path = self.path(request);
        if let Ok(bytes) = std::fs::read(&path) {
            // An unreadable entry is recomputed and replaced, never trusted.
            if let Ok(s) = serde_json::from_slice::<Stored>(&bytes) {
                return Ok(Generation {
                    text: s.text,
                    prompt_tokens: s.prompt_tokens,
                    generated_tokens: s.generated_tokens,
                    reused_tokens: 0,
                });
            }
        }
        let g = self.inner.generate(request)?;
        let stored =
            Stored { text: g.text.clone(), prompt_tokens: g.prompt_tokens, generated_tokens: g.generated_tokens };
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        // The cache is an optimisation: failing to write it costs the next run time, not this one.
        if std::fs::write(&tmp, serde_json::to_vec(&stored).unwrap_or_default()).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
        Ok(g)
    }
}

/// A generator loaded on its first request: a run whose every prompt is cached (behind
/// [`CachedGenerator`]) never reads the weights, which for Qwen 1.5B is about 25 seconds and a
/// gigabyte. A load that fails fails every request, with the loader's message.
pub struct LazyGenerator<G> {
    model_id: String,
    load: Box<dyn Fn() -> Result<G, ModelError> + Send + Sync>,
    model: std::sync::OnceLock<Result<G, String>>,
}

impl<G> std::fmt::Debug for LazyGenerator<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyGenerator")
            .field("model", &self.model_id)
            .field("loaded", &self.model.get().is_some())
            .finish()
    }
}

impl<G: Generator> LazyGenerator<G> {
    /// `model_id` must be the id the loaded model reports: caches are keyed by it.
    pub fn new(model_id: &str, load: impl Fn() -> Result<G, ModelError> + Send + Sync + 'static) -> LazyGenerator<G> {
        LazyGenerator { model_id: model_id.to_string(), load: Box::new(load), model: std::sync::OnceLock::new() }
    }

    /// Whether the weights have been read (or tried).
    pub fn loaded(&self) -> bool {
        self.model.get().is_some()
    }
}

impl<G: Generator> Generator for LazyGenerator<G> {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn generate(&self, request: &GenerateRequest) -> Result<Generation, GenerateError> {
        match self.model.get_or_init(|| (self.load)().map_err(|e| e.to_string())) {
            Ok(g) => g.generate(request),
            Err(message) => Err(GenerateError::Backend { model: self.model_id.clone(), message: message.clone() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use strata_core::{ChatMessage, GenerateError, GenerateRequest, Generation, Generator, Role};

    use super::{CachedGenerator, LazyGenerator};
    use crate::ModelError;

    struct Counting(AtomicUsize);

    impl Generator for Counting {
        fn model_id(&self) -> &str {
            "counting/1"
        }
        fn generate(&self, r: &GenerateRequest) -> Result<Generation, GenerateError> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            if r.messages[0].content == "fail" {
                return Err(GenerateError::Backend { model: "counting/1".into(), message: "no".into() });
            }
            Ok(Generation { text: format!("answer {n}"), prompt_tokens: 3, generated_tokens: 2, reused_tokens: 0 })
        }
    }

    fn req(text: &str) -> GenerateRequest {
        GenerateRequest {
            messages: vec![ChatMessage { role: Role::User, content: text.to_string() }],
            max_tokens: 10,
            deadline: None,
        }
    }

    #[test]
    fn answers_are_cached_by_prompt_and_failures_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let g = CachedGenerator::open(Counting(AtomicUsize::new(0)), dir.path()).unwrap();
        assert_eq!(g.generate(&req("a")).unwrap().text, "answer 0");
        assert_eq!(g.generate(&req("a")).unwrap().text, "answer 0");
        assert_eq!(g.generate(&req("b")).unwrap().text, "answer 1");
        assert!(g.generate(&req("fail")).is_err());
        assert!(g.generate(&req("fail")).is_err());
        assert_eq!(g.inner.0.load(Ordering::SeqCst), 4, "a and b once each, the failure twice");
        // A second process sees the first one's answers.
        let again = CachedGenerator::open(Counting(AtomicUsize::new(100)), dir.path()).unwrap();
        assert_eq!(again.generate(&req("b")).unwrap().text, "answer 1");
    }

    #[test]
    fn a_lazy_model_is_loaded_only_for_a_new_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let lazy = || LazyGenerator::new("counting/1", || Ok(Counting(AtomicUsize::new(0))));
        let first = CachedGenerator::open(lazy(), dir.path()).unwrap();
        assert!(!first.inner.loaded());
        assert_eq!(first.generate(&req("a")).unwrap().text, "answer 0");
        assert!(first.inner.loaded());
        // Another run: the cached prompt is answered without the weights, a new one loads them.
        let second = CachedGenerator::open(lazy(), dir.path()).unwrap();
        assert_eq!(second.generate(&req("a")).unwrap().text, "answer 0");
        assert!(!second.inner.loaded());
        assert_eq!(second.generate(&req("c")).unwrap().text, "answer 0");
        assert!(second.inner.loaded());
        // A load that fails says why, on every request.
        let path = dir.path().join("gone.gguf");
        let broken = LazyGenerator::<Counting>::new("gone", move || {
            Err(ModelError::Missing { path: path.clone(), model: "gone" })
        });
        for _ in 0..2 {
            let err = broken.generate(&req("a")).unwrap_err().to_string();
            assert!(err.starts_with("generator gone: ") && err.contains("gone.gguf: missing"), "{err}");
        }
    }
}
