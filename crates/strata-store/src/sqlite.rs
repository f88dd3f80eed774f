//! `SqliteStore`: every turn written durably, searched by BM25 and by embedding, fused by rank.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use rusqlite::{params, Connection, OptionalExtension};
use strata_core::{Hit, RecallQuery, StoreError, Tier, Timestamp, Turn};

use crate::lexical::{self, LexicalIndex};
use crate::pool::Pool;
use crate::schema::{self, backend};
use crate::search::{self, Ranked, TurnVectors};
use crate::vectors::VectorIndex;
use crate::{Store, StoredSummary};

/// What [`SqliteStore::compact`] did: vector rows rewritten from f32 to int8, and the
/// database's size (pages × page size) before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    pub rewritten: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

fn file_bytes(conn: &Connection) -> rusqlite::Result<u64> {
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok((pages * size) as u64)
}

/// Read connections kept open for reuse: enough for the reads a server runs at once on a
/// machine of ordinary size; any beyond it are opened when needed and closed after.
const READERS_KEPT: usize = 16;

/// One index per conversation (by row id), each behind a lock of its own: the map's lock is
/// held only to find or add an entry.
/// The per-conversation search indexes (BM25 or vectors) kept in memory: caches of the stored
/// rows, each caught up from them on use, so one dropped is rebuilt on its next search. At
/// most `kept` are held, the least recently searched dropped first: a server meets new
/// conversations for as long as it runs, and without a bound they held memory for every
/// conversation ever searched (a 30-minute soak grew by about 0.4 MB a conversation).
struct Indexes<I> {
    held: Mutex<IndexCache<I>>,
}

struct IndexCache<I> {
    by_conversation: HashMap<i64, (Arc<Mutex<I>>, u64)>,
    /// Uses so far: each entry's is when it was last used.
    clock: u64,
    kept: usize,
}

impl<I> IndexCache<I> {
    /// Drops the least recently used index but `spare`'s; whether there was one.
    fn drop_oldest(&mut self, spare: Option<i64>) -> bool {
        let oldest = self
            .by_conversation
            .iter()
            .filter(|(k, _)| Some(**k) != spare)
            .min_by_key(|(_, (_, used))| *used)
            .map(|(k, _)| *k);
        oldest.is_some_and(|k| self.by_conversation.remove(&k).is_some())
    }
}

impl<I> Default for Indexes<I> {
    fn default() -> Self {
        Indexes { held: Mutex::new(IndexCache { by_conversation: HashMap::new(), clock: 0, kept: INDEXES_KEPT }) }
    }
}

/// Conversations whose indexes are kept, by default: the server's default `--max-open`.
pub const INDEXES_KEPT: usize = 256;

impl<I> std::fmt::Debug for Indexes<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Indexes")
    }
}

impl<I: Default> Indexes<I> {
    fn cache(&self) -> MutexGuard<'_, IndexCache<I>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn of(&self, conv: i64) -> Arc<Mutex<I>> {
        let mut c = self.cache();
        c.clock += 1;
        let now = c.clock;
        let index = {
            let entry = c.by_conversation.entry(conv).or_insert_with(|| (Arc::default(), now));
            entry.1 = now;
            entry.0.clone()
        };
        // One over at most: drop the least recently used (never the one just asked for). A
        // search still holding it finishes on its own copy.
        while c.by_conversation.len() > c.kept && c.drop_oldest(Some(conv)) {}
        index
    }

    fn clear(&self) {
        self.cache().by_conversation.clear();
    }

    fn keep(&self, n: usize) {
        let mut c = self.cache();
        c.kept = n.max(1);
        while c.by_conversation.len() > c.kept && c.drop_oldest(None) {}
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.cache().by_conversation.len()
    }
}

/// A conversation's index, locked. An index is rebuilt from the stored rows when in doubt, so
/// a poisoned lock is still safe to use.
fn lock<I>(index: &Mutex<I>) -> MutexGuard<'_, I> {
    index.lock().unwrap_or_else(|p| p.into_inner())
}

/// A turn ready to insert: serialised, its vectors encoded (as `vectors.data` and
/// `vectors.sentences` hold them).
struct PreparedTurn {
    turn_id: String,
    ts: Option<i64>,
    body: String,
    vectors: Option<(Vec<u8>, Option<Vec<u8>>)>,
}

/// One call's turns for one conversation, waiting for a group commit.
struct Append {
    conversation: String,
    rows: Vec<PreparedTurn>,
}

/// A turn's vectors as stored: the whole text's, and its sentences' end to end (none when
/// it has none).
fn encode(v: &TurnVectors<'_>) -> (Vec<u8>, Option<Vec<u8>>) {
    let sentences = (!v.sentences.is_empty()).then(|| search::encode_vectors(v.sentences.iter().map(Vec::as_slice)));
    (search::encode_vectors([v.whole]), sentences)
}

/// Appends waiting for the next group commit, and the outcomes of those written.
#[derive(Default)]
struct Commits {
    state: Mutex<CommitState>,
    changed: Condvar,
}

impl std::fmt::Debug for Commits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Commits")
    }
}

#[derive(Default)]
struct CommitState {
    waiting: Vec<(u64, Append)>,
    outcomes: HashMap<u64, Result<Vec<u64>, StoreError>>,
    next: u64,
    /// A caller is writing a group now.
    writing: bool,
    /// Groups written, for tests.
    #[cfg(test)]
    groups: u64,
}

/// The cold tier on SQLite: WAL journaling, synchronous commits, vectors per turn (its whole
/// text and its sentences), and per-conversation indexes in memory (BM25 over stemmed words,
/// the vectors in int8 with sign bits) built from the stored rows.
///
/// One writing connection per `SqliteStore`, behind a mutex (SQLite serialises writers
/// anyway, and several stores, threads or processes, may open the same file), and read
/// connections beside it: a read never takes the writer's lock, and in WAL mode it sees the
/// last committed state while an append is under way. Each conversation's indexes have a lock
/// of their own, so searches of two conversations run at once.
#[derive(Debug)]
pub struct SqliteStore {
    location: String,
    writer: Mutex<Connection>,
    /// The file and its idle read connections; `None` in memory, where a private database has
    /// one connection and reads take the writer's.
    readers: Option<(PathBuf, Pool<Connection>)>,
    /// Each conversation's vectors in memory, filled incrementally from the `vectors` table, so
    /// a search scores vectors without reading them from disk. A turn's vectors replaced (a
    /// new row for a turn already held) make the conversation's index start again.
    vectors: Indexes<VectorIndex>,
    /// Each conversation's BM25 index, filled incrementally from `turns` (only ever added).
    lexical: Indexes<LexicalIndex>,
    /// Appends waiting to be committed together.
    commits: Commits,
    /// Conversations with at most this many vectors are scanned exactly (see `vectors.rs`).
    exact_up_to: std::sync::atomic::AtomicUsize,
}

impl SqliteStore {
    /// Opens the store at `path`, creating it (and its folder) if absent. A file that is not a
    /// Strata store, is damaged or comes from a newer version is refused and left untouched.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let conn = schema::open(path)?;
        let mut store = SqliteStore::with(path.display().to_string(), conn);
        store.readers = Some((path.to_path_buf(), Pool::new(READERS_KEPT, |_| true)));
        Ok(store)
    }

    /// A store that lives in memory only: for evaluation runs and tests.
    pub fn in_memory() -> Result<SqliteStore, StoreError> {
        Ok(SqliteStore::with(":memory:".to_string(), schema::open_in_memory()?))
    }

    fn with(location: String, conn: Connection) -> SqliteStore {
        SqliteStore {
            location,
            writer: Mutex::new(conn),
            readers: None,
            vectors: Indexes::default(),
            lexical: Indexes::default(),
            commits: Commits::default(),
            exact_up_to: std::sync::atomic::AtomicUsize::new(crate::vectors::EXACT_UP_TO),
        }
    }

    /// Keeps the search indexes of at most `n` conversations in memory (default
    /// [`INDEXES_KEPT`]), the least recently searched dropped first and rebuilt from the
    /// stored rows when searched again: a server sets its `--max-open`.
    pub fn keep_indexes(&self, n: usize) {
        self.vectors.keep(n);
        self.lexical.keep(n);
    }

    /// How many conversations' indexes are in memory (vectors, words).
    #[cfg(test)]
    pub(crate) fn indexes_held(&self) -> (usize, usize) {
        (self.vectors.held(), self.lexical.held())
    }

    /// Scans conversations with at most `n` vectors (turns and sentences) exactly; longer ones
    /// get a first pass over sign bits and exact scores for the best candidates only. The
    /// default, 20,000, keeps conversations of ordinary length exact; `usize::MAX` scans
    /// everything exactly (what the benchmark compares the first pass against).
    pub fn set_exact_scan_up_to(&self, n: usize) {
        self.exact_up_to.store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// The writing connection.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent (transactions roll
        // back when dropped), so a poisoned lock is still safe to use.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on a read connection: one of the pool's for a file, so that it takes no lock
    /// the writer holds; the writer's own in memory.
    fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let Some((path, pool)) = &self.readers else { return f(&self.conn()) };
        let conn = pool.get(|| schema::open_reader(path, &self.location))?;
        f(&conn)
    }

    /// Holds the writer's lock, as an append under way does: for tests of what reads wait on.
    #[cfg(test)]
    pub(crate) fn hold_writer(&self) -> MutexGuard<'_, Connection> {
        self.conn()
    }

    /// Appends waiting for a group commit, whether a group is being written, and how many
    /// were written so far.
    #[cfg(test)]
    pub(crate) fn commit_counts(&self) -> (usize, bool, u64) {
        let s = lock(&self.commits.state);
        (s.waiting.len(), s.writing, s.groups)
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        backend(&self.location, e)
    }

    /// Stores several turns in one transaction (one sync): for bulk loading. `vectors` is
    /// either empty or one entry per turn. Appends that arrive while another is being written
    /// are committed together, in one transaction and one sync (each in a savepoint of its
    /// own, so one refused append leaves the others stored); each returns once its turns are
    /// on disk.
    pub fn append_batch(
        &self,
        conversation: &str,
        turns: &[Turn],
        vectors: &[Option<TurnVectors<'_>>],
    ) -> Result<Vec<u64>, StoreError> {
        if !vectors.is_empty() && vectors.len() != turns.len() {
            return Err(StoreError::Invalid {
                location: self.location.clone(),
                message: format!("{} turns but {} vectors", turns.len(), vectors.len()),
            });
        }
        let mut rows = Vec::with_capacity(turns.len());
        for (i, turn) in turns.iter().enumerate() {
            let v = vectors.get(i).and_then(Option::as_ref);
            self.check_vectors(conversation, &turn.id, v)?;
            let body = serde_json::to_string(turn).map_err(|e| StoreError::Invalid {
                location: self.location.clone(),
                message: format!("turn {}: {e}", turn.id),
            })?;
            rows.push(PreparedTurn {
                turn_id: turn.id.clone(),
                ts: turn.timestamp.map(Timestamp::seconds),
                body,
                vectors: v.map(encode),
            });
        }
        self.commit(Append { conversation: conversation.to_string(), rows })
    }

    /// Queues `append` for the next group commit and waits for its outcome; the first caller
    /// to find no group being written writes every append waiting.
    fn commit(&self, append: Append) -> Result<Vec<u64>, StoreError> {
        let commits = &self.commits;
        let mut s = lock(&commits.state);
        let ticket = s.next;
        s.next += 1;
        s.waiting.push((ticket, append));
        loop {
            if let Some(outcome) = s.outcomes.remove(&ticket) {
                return outcome;
            }
            if !s.writing {
                s.writing = true;
                let group = std::mem::take(&mut s.waiting);
                drop(s);
                let outcomes = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.write_group(&group)))
                    .unwrap_or_else(|_| {
                        let failed = |t: &(u64, Append)| (t.0, Err(self.backend("the group commit panicked")));
                        group.iter().map(failed).collect()
                    });
                s = lock(&commits.state);
                s.outcomes.extend(outcomes);
                s.writing = false;
                #[cfg(test)]
                {
                    s.groups += 1;
                }
                commits.changed.notify_all();
                continue;
            }
            s = commits.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// One transaction for the group: each append in a savepoint, rolled back alone when it
    /// is refused; a commit that fails fails them all.
    fn write_group(&self, group: &[(u64, Append)]) -> Vec<(u64, Result<Vec<u64>, StoreError>)> {
        let mut conn = self.conn();
        let mut tx = match conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            // rusqlite's errors are not `Clone`: each append gets the code and message.
            Err(e) => return group.iter().map(|(t, _)| (*t, Err(self.shared(&e)))).collect(),
        };
        let mut outcomes = Vec::with_capacity(group.len());
        for (ticket, append) in group {
            let outcome = match tx.savepoint() {
                Ok(mut sp) => match self.insert_append(&sp, append) {
                    Ok(seqs) => sp.commit().map(|()| seqs).map_err(|e| self.err(e)),
                    Err(refused) => match sp.rollback() {
                        Ok(()) => Err(refused),
                        // Its rows might stay and be committed with the others: write none.
                        Err(e) => {
                            return group.iter().map(|(t, _)| (*t, Err(self.shared(&e)))).collect();
                        }
                    },
                },
                Err(e) => Err(self.err(e)),
            };
            outcomes.push((*ticket, outcome));
        }
        if let Err(e) = tx.commit() {
            for (_, outcome) in &mut outcomes {
                if outcome.is_ok() {
                    *outcome = Err(self.shared(&e));
                }
            }
        }
        outcomes
    }

    /// One append's rows, within the group's transaction.
    fn insert_append(&self, conn: &Connection, append: &Append) -> Result<Vec<u64>, StoreError> {
        let conversation = append.conversation.as_str();
        let conv = conversation_id(conn, conversation, true).map_err(|e| self.err(e))?.expect("created");
        let first: i64 = conn
            .query_row("SELECT coalesce(max(seq) + 1, 0) FROM turns WHERE conversation = ?1", [conv], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        let mut seqs = Vec::with_capacity(append.rows.len());
        for (i, turn) in append.rows.iter().enumerate() {
            let seq = first + i as i64;
            let exists: Option<i64> = conn
                .query_row(
                    "SELECT seq FROM turns WHERE conversation = ?1 AND turn_id = ?2",
                    params![conv, turn.turn_id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|e| self.err(e))?;
            if let Some(at) = exists {
                return Err(StoreError::Invalid {
                    location: self.location.clone(),
                    message: format!(
                        "conversation {conversation}: turn {} is already stored (position {at})",
                        turn.turn_id
                    ),
                });
            }
            conn.execute(
                "INSERT INTO turns (conversation, seq, turn_id, ts, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![conv, seq, turn.turn_id, turn.ts, turn.body],
            )
            .map_err(|e| self.err(e))?;
            let row = conn.last_insert_rowid();
            if let Some((whole, sentences)) = &turn.vectors {
                self.insert_encoded(conn, conv, row, whole, sentences.as_deref())?;
            }
            seqs.push(seq as u64);
        }
        Ok(seqs)
    }

    /// One group's failure as each of its appends' error.
    fn shared(&self, e: &rusqlite::Error) -> StoreError {
        schema::failure(&self.location, e.sqlite_error_code(), e.to_string())
    }

    fn backend(&self, message: &str) -> StoreError {
        StoreError::Backend { location: self.location.clone(), message: message.to_string() }
    }

    /// Deletes every vector and binds the store to `model`, in one transaction: the first step
    /// of re-embedding a store with another model. The turns stay; until their new vectors are
    /// set they are found by their words.
    pub fn rebind_embedder(&self, model: &str, dim: usize) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM vectors", []).map_err(|e| self.err(e))?;
        Self::write_binding(&tx, model, dim).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        self.vectors.clear();
        Ok(())
    }

    fn write_binding(conn: &Connection, model: &str, dim: usize) -> rusqlite::Result<()> {
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('embedder.model', ?1)", [model])?;
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('embedder.dim', ?1)", [dim.to_string()])?;
        Ok(())
    }

    fn check_vectors(&self, conversation: &str, turn_id: &str, v: Option<&TurnVectors<'_>>) -> Result<(), StoreError> {
        match v.and_then(TurnVectors::problem) {
            Some(problem) => Err(StoreError::Invalid {
                location: self.location.clone(),
                message: format!("conversation {conversation}: turn {turn_id}: {problem}"),
            }),
            None => Ok(()),
        }
    }

    /// One `vectors` row: the whole text's vector and the sentences' end to end, all of one
    /// length (checked by the caller).
    fn insert_vectors(&self, conn: &Connection, conv: i64, row: i64, v: &TurnVectors<'_>) -> Result<(), StoreError> {
        let (whole, sentences) = encode(v);
        self.insert_encoded(conn, conv, row, &whole, sentences.as_deref())
    }

    fn insert_encoded(
        &self,
        conn: &Connection,
        conv: i64,
        row: i64,
        whole: &[u8],
        sentences: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        conn.execute(
            "INSERT INTO vectors (conversation, turn, data, sentences, encoding) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![conv, row, whole, sentences, search::ENCODING_INT8],
        )
        .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Turns from position `from` on, in order: what a reader that has seen `from` turns lacks.
    pub fn turns_from(&self, conversation: &str, from: u64) -> Result<Vec<Turn>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT t.seq, t.body FROM turns t JOIN conversations c ON c.id = t.conversation
                     WHERE c.name = ?1 AND t.seq >= ?2 ORDER BY t.seq",
                )
                .map_err(|e| self.err(e))?;
            let rows = stmt
                .query_map(params![conversation, from as i64], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
                .map_err(|e| self.err(e))?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, body) = row.map_err(|e| self.err(e))?;
                out.push(self.decode(conversation, seq, &body)?);
            }
            Ok(out)
        })
    }

    fn decode(&self, conversation: &str, seq: i64, body: &str) -> Result<Turn, StoreError> {
        serde_json::from_str(body).map_err(|e| StoreError::Corrupt {
            location: self.location.clone(),
            message: format!("conversation {conversation}: turn at position {seq}: {e}"),
        })
    }

    /// Rewrites the vectors that schema versions before 6 stored as f32 in the int8 encoding
    /// written since (a quarter of the bytes; they rank exactly as before, since a search
    /// quantizes them the same way), then `VACUUM`s so that the freed pages leave the file.
    /// The rewrite is one transaction. `VACUUM` fails while another connection is writing;
    /// the rows then stay rewritten, and running it again shrinks the file.
    pub fn compact(&self) -> Result<Compacted, StoreError> {
        let mut conn = self.conn();
        let bytes_before = file_bytes(&conn).map_err(|e| self.err(e))?;
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        let rows: Vec<(i64, Vec<u8>, Option<Vec<u8>>)> = {
            let mut stmt = tx
                .prepare("SELECT id, data, sentences FROM vectors WHERE encoding = ?1 ORDER BY id")
                .map_err(|e| self.err(e))?;
            let rows = stmt
                .query_map([search::ENCODING_F32], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(|e| self.err(e))?;
            rows.collect::<Result<_, _>>().map_err(|e| self.err(e))?
        };
        for (id, data, sentences) in &rows {
            let corrupt = |message: String| StoreError::Corrupt {
                location: self.location.clone(),
                message: format!("vectors row {id}: {message}"),
            };
            let whole = search::decode_vectors(data, search::ENCODING_F32, None).map_err(corrupt)?;
            let dim = whole.first().map_or(0, |v| v.values.len());
            let sentences = match sentences {
                Some(s) => Some(search::encode_quantized(
                    &search::decode_vectors(s, search::ENCODING_F32, Some(dim)).map_err(corrupt)?,
                )),
                None => None,
            };
            tx.execute(
                "UPDATE vectors SET data = ?1, sentences = ?2, encoding = ?3 WHERE id = ?4",
                params![search::encode_quantized(&whole), sentences, search::ENCODING_INT8, id],
            )
            .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        // Row ids are kept and the quantized values are the ones a search already computed
        // from the f32 rows, so the cached index stays valid.
        conn.execute_batch("VACUUM").map_err(|e| self.err(e))?;
        let bytes_after = file_bytes(&conn).map_err(|e| self.err(e))?;
        Ok(Compacted { rewritten: rows.len() as u64, bytes_before, bytes_after })
    }

    /// SQLite's full integrity check; `ok` when the file is sound.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        self.read(|conn| {
            let mut stmt = conn.prepare("PRAGMA integrity_check").map_err(|e| self.err(e))?;
            let lines = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(|e| self.err(e))?;
            let lines: Vec<String> = lines.collect::<Result<_, _>>().map_err(|e| self.err(e))?;
            Ok(lines.join("\n"))
        })
    }

    /// Row ids of the conversation's turns with their fused scores, best first.
    fn fused(&self, conn: &Connection, conversation: &str, query: &RecallQuery) -> Result<Vec<(i64, f32)>, StoreError> {
        let Some(conv) = conversation_id(conn, conversation, false).map_err(|e| self.err(e))? else {
            return Ok(Vec::new());
        };
        let depth = query.k.max(1);
        let lexical = self.lexical(conn, conversation, conv, query, depth)?;
        let dense = match &query.embedding {
            Some(q) => self.dense(conn, conv, q, query.time_range, depth)?,
            None => Vec::new(),
        };
        Ok(search::fuse(&[&lexical, &dense]))
    }

    /// Up to `depth` rows by BM25 over the indexed text, best first.
    fn lexical(
        &self,
        conn: &Connection,
        conversation: &str,
        conv: i64,
        query: &RecallQuery,
        depth: usize,
    ) -> Result<Vec<i64>, StoreError> {
        let terms = lexical::query_terms(&query.text);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let index = self.lexical.of(conv);
        let mut index = lock(&index);
        self.refresh_lexical(conn, conversation, conv, &mut index)?;
        Ok(index.search(&terms, depth, |ts| within(ts, query.time_range)))
    }

    /// Indexes the conversation's turns stored since the index last looked: positions from
    /// the number it holds on, one range of the `(conversation, seq)` index.
    fn refresh_lexical(
        &self,
        conn: &Connection,
        conversation: &str,
        conv: i64,
        index: &mut LexicalIndex,
    ) -> Result<(), StoreError> {
        let mut stmt = conn
            .prepare_cached("SELECT id, seq, ts, body FROM turns WHERE conversation = ?1 AND seq >= ?2 ORDER BY seq")
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query(params![conv, index.len() as i64]).map_err(|e| self.err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let id: i64 = row.get(0).map_err(|e| self.err(e))?;
            let seq: i64 = row.get(1).map_err(|e| self.err(e))?;
            let ts: Option<i64> = row.get(2).map_err(|e| self.err(e))?;
            let body: String = row.get(3).map_err(|e| self.err(e))?;
            if seq != index.len() as i64 {
                return Err(StoreError::Corrupt {
                    location: self.location.clone(),
                    message: format!("conversation {conversation}: turn at position {seq} follows {}", index.len()),
                });
            }
            let turn = self.decode(conversation, seq, &body)?;
            index.add(id, ts, &search::indexed_text(&turn));
        }
        Ok(())
    }

    /// Up to `depth` rows by cosine similarity to the query vector, best first.
    fn dense(
        &self,
        conn: &Connection,
        conv: i64,
        q: &[f32],
        range: Option<(Timestamp, Timestamp)>,
        depth: usize,
    ) -> Result<Vec<i64>, StoreError> {
        let index = self.vectors.of(conv);
        let mut index = lock(&index);
        if !self.refresh(conn, conv, &mut index)? {
            // A turn's vectors were replaced since the index last looked: start again, from
            // one statement, which sees each turn's vectors once.
            *index = VectorIndex::default();
            self.refresh(conn, conv, &mut index)?;
        }
        if index.is_empty() {
            return Ok(Vec::new());
        }
        if index.dim() != q.len() {
            return Err(StoreError::Invalid {
                location: self.location.clone(),
                message: format!(
                    "query vector has {} dimensions but the stored vectors have {}: embedded by another model",
                    q.len(),
                    index.dim()
                ),
            });
        }
        let exact_up_to = self.exact_up_to.load(std::sync::atomic::Ordering::Relaxed);
        Ok(index.search(q, depth, |ts| within(ts, range), exact_up_to))
    }

    /// Adds the conversation's vector rows stored since the index last looked; `false`, with
    /// the index half refreshed, when one of them replaces vectors the index holds.
    fn refresh(&self, conn: &Connection, conv: i64, index: &mut VectorIndex) -> Result<bool, StoreError> {
        let mut stmt = conn
            .prepare_cached(
                // CROSS JOIN fixes the loop order: the conversation's new vectors first (one
                // range of `vectors_new`, usually empty), not every turn of the conversation.
                "SELECT v.id, v.turn, t.ts, v.data, v.sentences, v.encoding FROM vectors v CROSS JOIN turns t ON t.id = v.turn
                 WHERE v.conversation = ?1 AND v.id > ?2 ORDER BY v.id",
            )
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query(params![conv, index.watermark]).map_err(|e| self.err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let id: i64 = row.get(0).map_err(|e| self.err(e))?;
            let turn: i64 = row.get(1).map_err(|e| self.err(e))?;
            if index.holds(turn) {
                return Ok(false);
            }
            let ts: Option<i64> = row.get(2).map_err(|e| self.err(e))?;
            let whole = row.get_ref(3).map_err(|e| self.err(e))?.as_blob().map_err(|e| self.err(e.into()))?;
            let sentences =
                row.get_ref(4).map_err(|e| self.err(e))?.as_blob_or_null().map_err(|e| self.err(e.into()))?;
            let encoding: i64 = row.get(5).map_err(|e| self.err(e))?;
            let corrupt = |message: String| StoreError::Corrupt {
                location: self.location.clone(),
                message: format!("stored row {turn}: {message}"),
            };
            let whole = search::decode_vectors(whole, encoding, None).map_err(corrupt)?;
            let dim = whole[0].values.len();
            let sentences =
                search::decode_vectors(sentences.unwrap_or_default(), encoding, Some(dim)).map_err(corrupt)?;
            index.add(turn, ts, &whole[0], &sentences).map_err(corrupt)?;
            index.watermark = id;
        }
        Ok(true)
    }
}

fn conversation_id(conn: &Connection, name: &str, create: bool) -> rusqlite::Result<Option<i64>> {
    let found: Option<i64> =
        conn.query_row("SELECT id FROM conversations WHERE name = ?1", [name], |r| r.get(0)).optional()?;
    if found.is_some() || !create {
        return Ok(found);
    }
    conn.execute("INSERT INTO conversations (name) VALUES (?1)", [name])?;
    Ok(Some(conn.last_insert_rowid()))
}

fn within(ts: Option<i64>, range: Option<(Timestamp, Timestamp)>) -> bool {
    match range {
        None => true,
        Some((from, to)) => ts.is_some_and(|t| t >= from.seconds() && t <= to.seconds()),
    }
}

impl Store for SqliteStore {
    fn location(&self) -> &str {
        &self.location
    }

    /// Stores a turn, and its vectors when given, in one transaction; returns its position
    /// in the conversation. When this returns, the turn is on disk.
    fn append_with(
        &self,
        conversation: &str,
        turn: &Turn,
        vectors: Option<TurnVectors<'_>>,
    ) -> Result<u64, StoreError> {
        self.append_batch(conversation, std::slice::from_ref(turn), &[vectors]).map(|seqs| seqs[0])
    }

    fn set_vectors(&self, conversation: &str, batch: &[(&str, TurnVectors<'_>)]) -> Result<(), StoreError> {
        for (turn_id, vectors) in batch {
            self.check_vectors(conversation, turn_id, Some(vectors))?;
        }
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        for (turn_id, vectors) in batch {
            let row: Option<(i64, i64)> = tx
                .query_row(
                    "SELECT t.conversation, t.id FROM turns t JOIN conversations c ON c.id = t.conversation
                     WHERE c.name = ?1 AND t.turn_id = ?2",
                    params![conversation, turn_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(|e| self.err(e))?;
            let Some((conv, row)) = row else {
                return Err(StoreError::Invalid {
                    location: self.location.clone(),
                    message: format!("conversation {conversation}: no stored turn {turn_id}"),
                });
            };
            tx.execute("DELETE FROM vectors WHERE turn = ?1", [row]).map_err(|e| self.err(e))?;
            self.insert_vectors(&tx, conv, row, vectors)?;
        }
        // A replaced vector gets a new id above every watermark, for a turn the conversation's
        // index already holds: the next search sees that and rebuilds the index.
        tx.commit().map_err(|e| self.err(e))
    }

    /// Records that `model` (vectors of `dim` numbers) writes this store's vectors, so that a
    /// later run with another model is refused ([`StoreError::OtherEmbedder`]) rather than
    /// ranking by the cosine of two unrelated spaces. A store written before models were
    /// recorded is bound to `model` when its vectors have `dim` numbers.
    fn bind_embedder(&self, model: &str, dim: usize) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx =
            rusqlite::Transaction::new(&mut conn, rusqlite::TransactionBehavior::Immediate).map_err(|e| self.err(e))?;
        let stored: Option<String> = tx
            .query_row("SELECT value FROM meta WHERE key = 'embedder.model'", [], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        if crate::store::bound_already(stored, model, &self.location)? {
            return Ok(());
        }
        let old: Option<(Vec<u8>, i64)> = tx
            .query_row("SELECT data, encoding FROM vectors LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(|e| self.err(e))?;
        if let Some((data, encoding)) = old {
            let found = search::decode_vectors(&data, encoding, None)
                .map_err(|message| StoreError::Corrupt { location: self.location.clone(), message })?
                .first()
                .map_or(0, |v| v.unit().len());
            if found != dim {
                return Err(StoreError::OtherEmbedder {
                    location: self.location.clone(),
                    stored: format!("an unrecorded model of {found} dimensions"),
                    given: format!("{model} ({dim} dimensions)"),
                });
            }
        }
        Self::write_binding(&tx, model, dim).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// The embedding model whose vectors this store holds, and their length, as
    /// [`SqliteStore::bind_embedder`] recorded them.
    fn embedder(&self) -> Result<Option<(String, usize)>, StoreError> {
        self.read(|conn| {
            let get = |key: &str| -> Result<Option<String>, StoreError> {
                conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                    .optional()
                    .map_err(|e| self.err(e))
            };
            match (get("embedder.model")?, get("embedder.dim")?) {
                (Some(model), Some(dim)) => {
                    let dim = dim.parse().map_err(|_| StoreError::Corrupt {
                        location: self.location.clone(),
                        message: format!("meta embedder.dim is {dim:?}, not a number"),
                    })?;
                    Ok(Some((model, dim)))
                }
                _ => Ok(None),
            }
        })
    }

    /// Names of the stored conversations, sorted.
    fn conversations(&self) -> Result<Vec<String>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn.prepare("SELECT name FROM conversations ORDER BY name").map_err(|e| self.err(e))?;
            let names = stmt.query_map([], |r| r.get(0)).map_err(|e| self.err(e))?;
            names.collect::<Result<_, _>>().map_err(|e| self.err(e))
        })
    }

    /// How many turns a conversation has stored.
    fn len(&self, conversation: &str) -> Result<u64, StoreError> {
        self.read(|conn| {
            let n: i64 = conn
                .query_row(
                    "SELECT count(*) FROM turns t JOIN conversations c ON c.id = t.conversation WHERE c.name = ?1",
                    [conversation],
                    |r| r.get(0),
                )
                .map_err(|e| self.err(e))?;
            Ok(n as u64)
        })
    }

    /// Each turn's whole-text vector in order, as [`crate::as_stored`] gives it (empty for a
    /// turn stored without one): what a reopened memory detects topic shifts with.
    fn whole_vectors(&self, conversation: &str) -> Result<Vec<Vec<f32>>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT t.seq, v.data, v.encoding FROM turns t JOIN conversations c ON c.id = t.conversation
                     LEFT JOIN vectors v ON v.turn = t.id WHERE c.name = ?1 ORDER BY t.seq",
                )
                .map_err(|e| self.err(e))?;
            let mut rows = stmt.query([conversation]).map_err(|e| self.err(e))?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(|e| self.err(e))? {
                let seq: i64 = row.get(0).map_err(|e| self.err(e))?;
                let data: Option<Vec<u8>> = row.get(1).map_err(|e| self.err(e))?;
                let Some(data) = data else {
                    out.push(Vec::new());
                    continue;
                };
                let encoding: i64 = row.get(2).map_err(|e| self.err(e))?;
                let v = search::decode_vectors(&data, encoding, None).map_err(|message| StoreError::Corrupt {
                    location: self.location.clone(),
                    message: format!("conversation {conversation}: vector of the turn at position {seq}: {message}"),
                })?;
                out.push(v[0].unit());
            }
            Ok(out)
        })
    }

    /// Saves a summary made by compaction.
    fn put_summary(&self, conversation: &str, summary: &StoredSummary) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        let conv = conversation_id(&tx, conversation, true).map_err(|e| self.err(e))?.expect("created");
        let sources = serde_json::to_string(&summary.sources).expect("strings serialise");
        tx.execute(
            "INSERT INTO summaries (conversation, level, first_seq, last_seq, model, text, sources)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                conv,
                summary.level,
                summary.first_seq as i64,
                summary.last_seq as i64,
                summary.model,
                summary.text,
                sources
            ],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// A conversation's summaries, oldest span first.
    fn summaries(&self, conversation: &str) -> Result<Vec<StoredSummary>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT s.level, s.first_seq, s.last_seq, s.model, s.text, s.sources
                     FROM summaries s JOIN conversations c ON c.id = s.conversation
                     WHERE c.name = ?1 ORDER BY s.first_seq, s.last_seq, s.id",
                )
                .map_err(|e| self.err(e))?;
            let rows = stmt
                .query_map([conversation], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                    ))
                })
                .map_err(|e| self.err(e))?;
            let mut out = Vec::new();
            for row in rows {
                let (level, first, last, model, text, sources) = row.map_err(|e| self.err(e))?;
                let sources = serde_json::from_str(&sources).map_err(|e| StoreError::Corrupt {
                    location: self.location.clone(),
                    message: format!("conversation {conversation}: summary of positions {first}-{last}: {e}"),
                })?;
                out.push(StoredSummary { level, first_seq: first as u64, last_seq: last as u64, model, text, sources });
            }
            Ok(out)
        })
    }

    /// Records the tiers of the turns at positions `from..from + tiers.len()`, in one
    /// transaction.
    fn set_tiers(&self, conversation: &str, from: u64, tiers: &[Tier]) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        let conv = conversation_id(&tx, conversation, true).map_err(|e| self.err(e))?.expect("created");
        {
            let mut stmt = tx
                .prepare_cached("INSERT OR REPLACE INTO tiers (conversation, seq, tier) VALUES (?1, ?2, ?3)")
                .map_err(|e| self.err(e))?;
            for (i, tier) in tiers.iter().enumerate() {
                stmt.execute(params![conv, (from + i as u64) as i64, tier.as_str()]).map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// The recorded tier of every turn, in order; turns never planned are hot.
    fn tiers(&self, conversation: &str) -> Result<Vec<Tier>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT t.seq, r.tier FROM turns t JOIN conversations c ON c.id = t.conversation
                     LEFT JOIN tiers r ON r.conversation = t.conversation AND r.seq = t.seq
                     WHERE c.name = ?1 ORDER BY t.seq",
                )
                .map_err(|e| self.err(e))?;
            let rows = stmt
                .query_map([conversation], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?)))
                .map_err(|e| self.err(e))?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, tier) = row.map_err(|e| self.err(e))?;
                out.push(match tier.as_deref() {
                    None => Tier::Hot,
                    Some(name) => Tier::parse(name).ok_or_else(|| StoreError::Corrupt {
                        location: self.location.clone(),
                        message: format!("conversation {conversation}: turn at position {seq} has tier `{name}`"),
                    })?,
                });
            }
            Ok(out)
        })
    }

    /// Hybrid search returning every fused candidate with its turn id and position, best
    /// first: for callers that re-rank (by neighbours, by speaker) before cutting to `k`.
    fn search_ranked(&self, conversation: &str, query: &RecallQuery) -> Result<Vec<Ranked>, StoreError> {
        self.read(|conn| {
            let fused = self.fused(conn, conversation, query)?;
            let mut stmt =
                conn.prepare_cached("SELECT seq, turn_id FROM turns WHERE id = ?1").map_err(|e| self.err(e))?;
            let mut out = Vec::with_capacity(fused.len());
            for (row, score) in fused {
                let (seq, turn_id): (i64, String) =
                    stmt.query_row([row], |r| Ok((r.get(0)?, r.get(1)?))).map_err(|e| self.err(e))?;
                out.push(Ranked { seq: seq as u64, turn_id, score });
            }
            Ok(out)
        })
    }

    fn turns(&self, conversation: &str) -> Result<Vec<Turn>, StoreError> {
        self.turns_from(conversation, 0)
    }

    fn search(&self, conversation: &str, query: &RecallQuery) -> Result<Vec<Hit>, StoreError> {
        self.read(|conn| {
            let fused = self.fused(conn, conversation, query)?;
            let mut stmt = conn.prepare_cached("SELECT seq, body FROM turns WHERE id = ?1").map_err(|e| self.err(e))?;
            let mut hits = Vec::new();
            for (row, score) in fused.into_iter().take(query.k) {
                let (seq, body): (i64, String) =
                    stmt.query_row([row], |r| Ok((r.get(0)?, r.get(1)?))).map_err(|e| self.err(e))?;
                hits.push(Hit { turn: self.decode(conversation, seq, &body)?, score });
            }
            Ok(hits)
        })
    }
}
