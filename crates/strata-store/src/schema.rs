//! The on-disk schema, its migrations, and the checks made before a file is touched.
//!
//! A store file is identified by SQLite's `application_id` header field and versioned by
//! `user_version`. Opening checks both before writing anything, so that a file that belongs to
//! another program, a damaged file or one written by a newer Strata is refused and left exactly
//! as it was.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use strata_core::StoreError;

/// "STRA" in ASCII: written into the header of every store file.
pub(crate) const APPLICATION_ID: i32 = 0x5354_5241;

/// One entry per schema version; entry `i` takes a store from version `i` to `i + 1`. Never
/// edit a published entry: add a new one.
pub(crate) const MIGRATIONS: &[&str] = &[
    // Version 1: conversations, turns in full, the full-text index and one vector per turn.
    "
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE conversations (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
    CREATE TABLE turns (
        id INTEGER PRIMARY KEY,
        conversation INTEGER NOT NULL REFERENCES conversations(id),
        seq INTEGER NOT NULL,
        turn_id TEXT NOT NULL,
        ts INTEGER,
        body TEXT NOT NULL,
        UNIQUE (conversation, seq),
        UNIQUE (conversation, turn_id)
    );
    CREATE INDEX turns_time ON turns (conversation, ts);
    -- Contentless: the text lives in `turns.body`; the index holds only postings. The `conv`
    -- column carries one token per conversation so that a search intersects with it inside
    -- FTS5 instead of ranking every conversation's matches and filtering afterwards.
    CREATE VIRTUAL TABLE turns_fts USING fts5 (conv, text, content = '', tokenize = 'porter unicode61');
    -- `conversation` repeats the turn's so that a search reads the vectors added since its last
    -- look with one range of an index, whatever the other conversations wrote meanwhile.
    CREATE TABLE vectors (
        id INTEGER PRIMARY KEY,
        conversation INTEGER NOT NULL REFERENCES conversations(id),
        turn INTEGER NOT NULL UNIQUE REFERENCES turns(id),
        data BLOB NOT NULL
    );
    CREATE INDEX vectors_new ON vectors (conversation, id);
    ",
    // Version 2: summaries made by the background compaction, so a reopened memory reuses them.
    "
    CREATE TABLE summaries (
        id INTEGER PRIMARY KEY,
        conversation INTEGER NOT NULL REFERENCES conversations(id),
        level TEXT NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        model TEXT NOT NULL,
        text TEXT NOT NULL,
        sources TEXT NOT NULL
    );
    CREATE INDEX summaries_span ON summaries (conversation, first_seq, last_seq);
    ",
    // Version 3: the tier the policy last gave each turn, so a reopened memory resumes its plan.
    "
    CREATE TABLE tiers (
        conversation INTEGER NOT NULL REFERENCES conversations(id),
        seq INTEGER NOT NULL,
        tier TEXT NOT NULL CHECK (tier IN ('hot', 'warm', 'cool', 'cold')),
        PRIMARY KEY (conversation, seq)
    ) WITHOUT ROWID;
    ",
    // Version 4: BM25 moves into memory, built from `turns` (FTS5 ranked every matching row of
    // a conversation, 24 ms per search at 100,000 turns); the full-text table goes.
    "
    DROP TABLE turns_fts;
    ",
    // Version 5: the vectors of a turn's sentences, end to end, beside its whole text's.
    "
    ALTER TABLE vectors ADD COLUMN sentences BLOB;
    ",
    // Version 6: vectors written from now on are int8 with one scale each (encoding 1), a
    // quarter of the f32 bytes; rows already written stay f32 (encoding 0) and read as before.
    "
    ALTER TABLE vectors ADD COLUMN encoding INTEGER NOT NULL DEFAULT 0;
    ",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Opens (creating if absent) a store file and brings its schema up to [`SCHEMA_VERSION`].
pub(crate) fn open(path: &Path) -> Result<Connection, StoreError> {
    let location = path.display().to_string();
    check_header(path, &location)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| StoreError::Backend {
            location: location.clone(),
            message: format!("creating {}: {e}", parent.display()),
        })?;
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| backend(&location, e))?;
    prepare(conn, &location, true)
}

/// A read connection to a store file that [`open`] has checked and migrated: read-only, so
/// it can never write, and beside the writer in WAL mode.
pub(crate) fn open_reader(path: &Path, location: &str) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| backend(location, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(|e| backend(location, e))?;
    Ok(conn)
}

/// A private in-memory store, for the eval and tests.
pub(crate) fn open_in_memory() -> Result<Connection, StoreError> {
    let conn = Connection::open_in_memory().map_err(|e| backend(":memory:", e))?;
    prepare(conn, ":memory:", false)
}

/// Refuses a non-empty file that does not start with SQLite's header, without opening it:
/// SQLite would otherwise report it only on first use, after the caller may have written.
fn check_header(path: &Path, location: &str) -> Result<(), StoreError> {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else { return Ok(()) };
    let mut head = [0u8; 16];
    let mut read = 0;
    while read < head.len() {
        match file.read(&mut head[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) => return Err(StoreError::Backend { location: location.to_string(), message: e.to_string() }),
        }
    }
    if read == 0 || &head == SQLITE_HEADER {
        return Ok(());
    }
    Err(StoreError::Foreign { location: location.to_string(), message: "not a SQLite database".to_string() })
}

fn prepare(conn: Connection, location: &str, on_disk: bool) -> Result<Connection, StoreError> {
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(|e| backend(location, e))?;
    // Everything up to the migration only reads, so a refused file is never modified.
    let corrupt = |e: rusqlite::Error| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            StoreError::Corrupt { location: location.to_string(), message: e.to_string() }
        }
        // SQLite says "unable to open database file" when it cannot make the write-ahead log
        // beside a file it may not write: that is no damage.
        _ => match on_disk.then(|| unwritable(location)).flatten() {
            Some(why) => StoreError::ReadOnly { location: location.to_string(), message: why },
            None => backend(location, e),
        },
    };
    let app: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(corrupt)?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(corrupt)?;
    let objects: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).map_err(corrupt)?;
    if app != APPLICATION_ID && objects > 0 {
        return Err(StoreError::Foreign {
            location: location.to_string(),
            message: format!(
                "a SQLite database of another program (application_id {app:#x}, {objects} schema objects)"
            ),
        });
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            location: location.to_string(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if objects > 0 {
        let verdict: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0)).map_err(corrupt)?;
        if verdict != "ok" {
            return Err(StoreError::Corrupt { location: location.to_string(), message: verdict });
        }
    }
    if on_disk {
        // WAL lets readers run beside the one writer; FULL syncs the log on every commit, so an
        // acknowledged turn survives power loss as well as a killed process.
        let mode: String =
            conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(|e| backend(location, e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Backend {
                location: location.to_string(),
                message: format!("could not switch to WAL journaling (got {mode})"),
            });
        }
    }
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;").map_err(|e| backend(location, e))?;
    migrate(&conn, location, SCHEMA_VERSION)?;
    Ok(conn)
}

/// Why the store file at `location` cannot be opened for writing, if it cannot.
fn unwritable(location: &str) -> Option<String> {
    std::fs::OpenOptions::new().append(true).open(location).err().map(|e| e.to_string())
}

/// Applies the migrations from the file's version up to `target`, in one transaction; another
/// process migrating at the same moment waits on the write lock and then finds nothing to do.
pub(crate) fn migrate(conn: &Connection, location: &str, target: i64) -> Result<(), StoreError> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| backend(location, e))?;
    if version >= target {
        return Ok(());
    }
    // Take the write lock before reading the version again, so two openers cannot both apply
    // the same migration.
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| backend(location, e))?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| backend(location, e))?;
    if version == 0 {
        tx.pragma_update(None, "application_id", APPLICATION_ID).map_err(|e| backend(location, e))?;
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().take(target as usize).skip(version.max(0) as usize) {
        tx.execute_batch(sql).map_err(|e| StoreError::Backend {
            location: location.to_string(),
            message: format!("migrating to schema version {}: {e}", i + 1),
        })?;
    }
    if version < target {
        tx.pragma_update(None, "user_version", target).map_err(|e| backend(location, e))?;
    }
    tx.commit().map_err(|e| backend(location, e))
}

/// A SQLite failure as the store's error: a full disk and an unwritable file are told apart,
/// since a server answers the first with 503 and a user must fix the second.
pub(crate) fn backend(location: &str, e: rusqlite::Error) -> StoreError {
    failure(location, e.sqlite_error_code(), e.to_string())
}

/// [`backend`] from a SQLite error's code and message, for an error that several appends of
/// one group share (rusqlite's errors are not `Clone`).
pub(crate) fn failure(location: &str, code: Option<rusqlite::ErrorCode>, message: String) -> StoreError {
    let location = location.to_string();
    match code {
        Some(rusqlite::ErrorCode::DiskFull) => StoreError::Full { location, message },
        Some(rusqlite::ErrorCode::ReadOnly) => StoreError::ReadOnly { location, message },
        _ => StoreError::Backend { location, message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn application_id_spells_stra() {
        assert_eq!(APPLICATION_ID.to_be_bytes(), *b"STRA");
    }
}
