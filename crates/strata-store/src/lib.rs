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

#[cfg(test)]
mod tests;
