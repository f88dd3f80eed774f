//! Embeddings kept on disk by content hash and model id, so re-running an eval recomputes
//! nothing.
//!
//! One append-only file per model: records of a 32-byte key (sha256 of the model id and the
//! text) followed by the vector as little-endian f32. The file is read whole when opened; new
//! vectors are appended and flushed after each call. A torn last record (a crash mid-write) is
//! ignored and overwritten by the next append, so the cache can lose at most what was being
//! written, never corrupt what was there.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};
use strata_core::{EmbedError, Embedder, RerankError, Reranker};

use crate::ModelError;

type Key = [u8; 32];

struct VectorFile {
    vectors: HashMap<Key, Vec<f32>>,
    file: File,
}

/// An [`Embedder`] that answers from a disk cache and asks `inner` only for texts it has not
/// seen.
pub struct CachedEmbedder<E> {
    inner: E,
    path: PathBuf,
    store: Mutex<VectorFile>,
}

impl<E: Embedder> std::fmt::Debug for CachedEmbedder<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedEmbedder").field("model", &self.inner.model_id()).field("path", &self.path).finish()
    }
}

/// A model id as a file name: anything but letters, digits, `-`, `.` and `+` becomes `_`.
pub(crate) fn file_name(model_id: &str) -> String {
    model_id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '+' { c } else { '_' })
        .collect()
}

/// Which side of a search a text is on: asymmetric models embed the two differently.
#[derive(Clone, Copy)]
enum Side {
    Document,
    Query,
    Clustering,
}

fn key(model: &str, side: Side, text: &str) -> Key {
    let mut h = Sha256::new();
    h.update(model.as_bytes());
    // Documents keep the key they always had, so caches written before queries were told
    // apart stay valid.
    match side {
        Side::Document => h.update([0u8]),
        Side::Query => h.update(b"\0query\0"),
        Side::Clustering => h.update(b"\0clustering\0"),
    }
    h.update(text.as_bytes());
    h.finalize().into()
}

impl<E: Embedder> CachedEmbedder<E> {
    /// Opens (or creates) the cache for `inner`'s model under `dir`.
    pub fn open(inner: E, dir: &Path) -> Result<CachedEmbedder<E>, ModelError> {
        CachedEmbedder::open_as("embeddings", inner, dir)
    }

    /// As [`CachedEmbedder::open`], in a file whose name starts with `kind`.
    fn open_as(kind: &str, inner: E, dir: &Path) -> Result<CachedEmbedder<E>, ModelError> {
        let name = file_name(inner.model_id());
        let path = dir.join(format!("{kind}-{name}-{}.bin", inner.dim()));
        let io = |e: std::io::Error| ModelError::Cache { path: path.clone(), message: e.to_string() };
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let record = 32 + 4 * inner.dim();
        let whole = bytes.len() / record * record;
        let mut vectors = HashMap::with_capacity(whole / record);
        for r in bytes[..whole].chunks_exact(record) {
            let k: Key = r[..32].try_into().expect("32 bytes");
            let v = r[32..].chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect();
            vectors.insert(k, v);
        }
        // Appends continue after the last whole record, over any torn tail.
        file.seek(SeekFrom::Start(whole as u64)).map_err(io)?;
        file.set_len(whole as u64).map_err(io)?;
        Ok(CachedEmbedder { inner, path, store: Mutex::new(VectorFile { vectors, file }) })
    }

    /// How many vectors the cache holds.
    pub fn len(&self) -> usize {
        self.store.lock().map(|s| s.vectors.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn inner(&self) -> &E {
        &self.inner
    }
}

impl<E: Embedder> Embedder for CachedEmbedder<E> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.cached(texts, Side::Document)
    }

    fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.cached(texts, Side::Query)
    }

    fn embed_clustering(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.cached(texts, Side::Clustering)
    }
}

impl<E: Embedder> CachedEmbedder<E> {
    fn cached(&self, texts: &[&str], side: Side) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = self.inner.model_id();
        let keys: Vec<Key> = texts.iter().map(|t| key(model, side, t)).collect();
        let missing: Vec<usize> = {
            let store = self.store.lock().map_err(|_| poisoned(model))?;
            let mut seen = std::collections::HashSet::new();
            (0..texts.len()).filter(|&i| !store.vectors.contains_key(&keys[i]) && seen.insert(keys[i])).collect()
        };
        if !missing.is_empty() {
            // The model runs outside the lock, so other threads keep reading the cache.
            let ask: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
            let fresh = match side {
                Side::Document => self.inner.embed(&ask)?,
                Side::Query => self.inner.embed_query(&ask)?,
                Side::Clustering => self.inner.embed_clustering(&ask)?,
            };
            let mut store = self.store.lock().map_err(|_| poisoned(model))?;
            let mut buf = Vec::with_capacity(missing.len() * (32 + 4 * self.dim()));
            for (&i, v) in missing.iter().zip(&fresh) {
                buf.extend_from_slice(&keys[i]);
                v.iter().for_each(|x| buf.extend_from_slice(&x.to_le_bytes()));
            }
            // A cache that cannot be written still answers; it only stops saving work.
            let _ = store.file.write_all(&buf).and_then(|()| store.file.flush());
            for (&i, v) in missing.iter().zip(fresh) {
                store.vectors.insert(keys[i], v);
            }
        }
        let store = self.store.lock().map_err(|_| poisoned(model))?;
        Ok(keys.iter().map(|k| store.vectors[k].clone()).collect())
    }
}

/// A [`Reranker`] that answers from a disk cache and asks `inner` only for pairs it has not
/// scored. Scores are kept as one-number vectors by [`CachedEmbedder`]'s file format, keyed by
/// the model, the query and the passage.
pub struct CachedReranker<R> {
    cache: CachedEmbedder<PairScores<R>>,
}

impl<R: Reranker> std::fmt::Debug for CachedReranker<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedReranker").field("model", &self.model_id()).field("path", &self.cache.path).finish()
    }
}

/// Separates the query from the passage in a cached pair's text.
const PAIR: char = '\u{1f}';

/// A reranker seen as a one-dimensional embedder of `query PAIR passage` texts.
struct PairScores<R>(R);

impl<R: Reranker> Embedder for PairScores<R> {
    fn model_id(&self) -> &str {
        self.0.model_id()
    }

    fn dim(&self) -> usize {
        1
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let err = |message: String| EmbedError::Backend { model: self.0.model_id().to_string(), message };
        let mut out = Vec::with_capacity(texts.len());
        // Consecutive pairs of one query go to the model in one call.
        let pairs: Vec<(&str, &str)> = texts.iter().map(|t| t.split_once(PAIR).unwrap_or(("", t))).collect();
        for group in pairs.chunk_by(|a, b| a.0 == b.0) {
            let passages: Vec<&str> = group.iter().map(|p| p.1).collect();
            let scores = self.0.score(group[0].0, &passages).map_err(|e| err(e.to_string()))?;
            out.extend(scores.into_iter().map(|s| vec![s]));
        }
        Ok(out)
    }
}

impl<R: Reranker> CachedReranker<R> {
    /// Opens (or creates) the cache for `inner`'s model under `dir`.
    pub fn open(inner: R, dir: &Path) -> Result<CachedReranker<R>, ModelError> {
        Ok(CachedReranker { cache: CachedEmbedder::open_as("rerank", PairScores(inner), dir)? })
    }

    /// How many scores the cache holds.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}

impl<R: Reranker> Reranker for CachedReranker<R> {
    fn model_id(&self) -> &str {
        self.cache.model_id()
    }

    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, RerankError> {
        let texts: Vec<String> = passages.iter().map(|p| format!("{query}{PAIR}{p}")).collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let scores = self
            .cache
            .embed(&texts)
            .map_err(|e| RerankError::Backend { model: self.model_id().to_string(), message: e.to_string() })?;
        Ok(scores.into_iter().map(|v| v[0]).collect())
    }
}

fn poisoned(model: &str) -> EmbedError {
    EmbedError::Backend { model: model.to_string(), message: "embedding cache lock poisoned".to_string() }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts calls; vectors are the text's length and its first byte.
    struct Counting(AtomicUsize);

    impl Embedder for Counting {
        fn model_id(&self) -> &str {
            "counting"
        }
        fn dim(&self) -> usize {
            2
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|t| vec![t.len() as f32, f32::from(t.bytes().next().unwrap_or(0))]).collect())
        }
        /// A query's vector is its document vector negated.
        fn embed_query(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(self.embed(texts)?.into_iter().map(|v| v.into_iter().map(|x| -x).collect()).collect())
        }
        /// A clustering vector is its document vector doubled.
        fn embed_clustering(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(self.embed(texts)?.into_iter().map(|v| v.into_iter().map(|x| 2.0 * x).collect()).collect())
        }
    }

    #[test]
    fn a_query_and_a_document_of_the_same_text_are_cached_apart() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CachedEmbedder::open(Counting(AtomicUsize::new(0)), dir.path()).unwrap();
        assert_eq!(cache.embed(&["ab"]).unwrap(), vec![vec![2.0, 97.0]]);
        assert_eq!(cache.embed_query(&["ab"]).unwrap(), vec![vec![-2.0, -97.0]]);
        assert_eq!(cache.embed_query(&["ab"]).unwrap(), vec![vec![-2.0, -97.0]]);
        assert_eq!(cache.embed(&["ab"]).unwrap(), vec![vec![2.0, 97.0]]);
        assert_eq!(cache.embed_clustering(&["ab"]).unwrap(), vec![vec![4.0, 194.0]]);
        assert_eq!(cache.embed_clustering(&["ab"]).unwrap(), vec![vec![4.0, 194.0]]);
        assert_eq!(cache.inner().0.load(Ordering::SeqCst), 3, "one call per side, then the cache");
    }

    /// Scores a passage by its length; counts the passages it is asked about.
    struct Lengths(AtomicUsize);

    impl Reranker for Lengths {
        fn model_id(&self) -> &str {
            "lengths"
        }
        fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, RerankError> {
            self.0.fetch_add(passages.len(), Ordering::SeqCst);
            Ok(passages.iter().map(|p| (p.len() + query.len()) as f32).collect())
        }
    }

    #[test]
    fn rerank_scores_are_cached_by_query_and_passage() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CachedReranker::open(Lengths(AtomicUsize::new(0)), dir.path()).unwrap();
        assert_eq!(cache.score("q", &["ab", "c"]).unwrap(), vec![3.0, 2.0]);
        assert_eq!(cache.score("qq", &["ab", "c", "def"]).unwrap(), vec![4.0, 3.0, 5.0]);
        assert_eq!(cache.cache.inner().0 .0.load(Ordering::SeqCst), 5, "a new query scores its passages anew");
        drop(cache);
        let again = CachedReranker::open(Lengths(AtomicUsize::new(0)), dir.path()).unwrap();
        assert_eq!(again.len(), 5);
        assert_eq!(again.score("q", &["c", "ab"]).unwrap(), vec![2.0, 3.0]);
        assert_eq!(again.cache.inner().0 .0.load(Ordering::SeqCst), 0, "answered from disk");
    }

    #[test]
    fn vectors_survive_reopening_and_torn_tails() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CachedEmbedder::open(Counting(AtomicUsize::new(0)), dir.path()).unwrap();
        let v = cache.embed(&["ab", "c", "ab"]).unwrap();
        assert_eq!(v, vec![vec![2.0, 97.0], vec![1.0, 99.0], vec![2.0, 97.0]]);
        assert_eq!(cache.inner().0.load(Ordering::SeqCst), 2, "a repeated text is embedded once");
        let path = cache.path.clone();
        drop(cache);
        // A crash mid-append leaves a partial record.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[1, 2, 3]).unwrap();
        drop(f);
        let again = CachedEmbedder::open(Counting(AtomicUsize::new(0)), dir.path()).unwrap();
        assert_eq!(again.len(), 2);
        assert_eq!(again.embed(&["c", "ab"]).unwrap(), vec![vec![1.0, 99.0], vec![2.0, 97.0]]);
        assert_eq!(again.inner().0.load(Ordering::SeqCst), 0, "answered from disk");
        again.embed(&["new"]).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, 3 * (32 + 8), "the torn tail was overwritten");
    }
}
