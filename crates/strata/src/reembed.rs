//! Re-embedding a store with another model: the explicit step that lets a store written by
//! one embedder be searched with another's vectors.

use strata_core::Embedder;
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
            let own = crate::embedding::embed_turns(embedder.model_id(), chunk, |t| embedder.embed(t))?;
            let batch: Vec<(&str, TurnVectors<'_>)> = chunk
                .iter()
                .zip(&own)
                .map(|(turn, v)| (turn.id.as_str(), TurnVectors { whole: &v[0], sentences: &v[1..] }))
                .collect();
            store.set_vectors(&conversation, &batch)?;
            done += chunk.len();
            progress(&conversation, (b * BATCH + chunk.len()).min(turns.len()), turns.len());
        }
    }
    Ok(done)
}
