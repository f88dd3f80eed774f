//! The cold tier: every turn stored in full, durably, and found again by hybrid search.
//!
//! `SqliteStore` is the embedded default: SQLite (compiled in) in WAL mode with synchronous
//! commits, so a turn is on disk before `append` returns (appends arriving together share one
//! commit); BM25 over stemmed words and one
//! embedding per turn scored by cosine, each held in memory per conversation and built from
//! the stored rows; the two rankings fused by reciprocal rank.
//! Every query is scoped to one conversation. The schema is versioned and migrated forward; a
//! file that is not a Strata store, is damaged, or was written by a newer version is refused
//! and never modified.
//!
//! `PgStore` (feature `postgres`) is the same store on a PostgreSQL server, for deployments
//! where many stateless servers share one store. Both implement [`Store`], the one store trait.

mod lexical;
#[cfg(feature = "postgres")]
mod pg;
mod pool;
mod schema;
mod search;
mod sqlite;
mod store;
pub mod testing;
mod vectors;

#[cfg(feature = "postgres")]
pub use pg::{PgStore, PG_SCHEMA_VERSION};
pub use schema::SCHEMA_VERSION;
pub use search::{
    as_stored, civil_date, embedded_texts, fuse, indexed_text, sentence_texts, Ranked, TurnVectors, RRF_K,
};
pub use sqlite::{Compacted, SqliteStore, INDEXES_KEPT};
pub use store::{Store, StoredSummary};

/// Bytes SQLite holds on the heap in this process (page caches, schemas, statements, over every
/// connection), for the server's `/metrics`: each connection's page cache grows with the file up
/// to its `cache_size`, so this rises early in a process's life and then stays under a bound.
#[allow(unsafe_code)]
pub fn sqlite_heap_bytes() -> u64 {
    // SAFETY: `sqlite3_memory_used` takes nothing and reads a counter SQLite keeps under its own
    // mutex; it is safe to call from any thread at any time, before or after any connection.
    let used = unsafe { rusqlite::ffi::sqlite3_memory_used() };
    u64::try_from(used).unwrap_or(0)
}

#[cfg(test)]
mod tests;
