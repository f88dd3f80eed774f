//! Generations kept on disk by model and prompt hash, so that re-running an eval costs nothing.
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
        std::fs::create_dir_all(&dir).map_err(|e| ModelError::Load { path: dir.clone(), message: e.to_string() })?;
        Ok(CachedGenerator { inner, dir })
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
        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{hex}.json"))
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use strata_core::{ChatMessage, GenerateError, GenerateRequest, Generation, Generator, Role};

    use super::CachedGenerator;

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
            Ok(Generation { text: format!("answer {n}"), prompt_tokens: 3, generated_tokens: 2 })
        }
    }

    #[test]
    fn answers_are_cached_by_prompt_and_failures_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let req = |text: &str| GenerateRequest {
            messages: vec![ChatMessage { role: Role::User, content: text.to_string() }],
            max_tokens: 10,
            deadline: None,
        };
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
}
