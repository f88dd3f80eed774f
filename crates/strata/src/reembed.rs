//! Re-embedding a store with another model: the explicit step that lets a store written by
//! one embedder be searched with another's vectors.

use strata_core::{EmbedError, Embedder};
use strata_store::{SqliteStore, Store, TurnVectors};

use crate::MemoryError;

/// Turns embedded per model call and written per transaction.
const BATCH: usize = 64;

/// Replaces the vectors of every turn of every conversation in `store` with `embedder`'s, and
/// binds the store to it. `progress(conversation, done, total)` is called after each batch.
/// Returns the number of turns embedded.
///
/// The old vectors are deleted first, in one transaction with the new binding; an
/// interrupted run leaves some turns without vectors (found by their words) and a second run
/// completes it. Turns themselves are never touched.
pub fn reembed(
    store: &SqliteStore,
    embedder: &dyn Embedder,
    mut progress: impl FnMut(&str, usize, usize),
) -> Result<usize, MemoryError> {
    store.rebind_embedder(embedder.model_id(), embedder.dim())?;
    let mut done = 0;
    for conversation in store.conversations()? {
        let turns = store.turns(&conversation)?;
        for (b, chunk) in turns.chunks(BATCH).enumerate() {
            let texts: Vec<Vec<String>> = chunk.iter().map(strata_store::embedded_texts).collect();
            let flat: Vec<&str> = texts.iter().flatten().map(String::as_str).collect();
            let vectors = embedder.embed(&flat)?;
            if vectors.len() != flat.len() {
                return Err(EmbedError::Backend {
                    model: embedder.model_id().to_string(),
                    message: format!("{} vectors for {} texts", vectors.len(), flat.len()),
                }
                .into());
            }
            let mut at = 0;
            let mut batch = Vec::with_capacity(chunk.len());
            for (turn, t) in chunk.iter().zip(&texts) {
                let own = &vectors[at..at + t.len()];
                at += t.len();
                batch.push((turn.id.as_str(), TurnVectors { whole: &own[0], sentences: &own[1..] }));
            }
            store.set_vectors(&conversation, &batch)?;
            done += chunk.len();
            progress(&conversation, (b * BATCH + chunk.len()).min(turns.len()), turns.len());
        }
    }
    Ok(done)
}
