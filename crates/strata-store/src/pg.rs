//! `PgStore`: the cold tier on PostgreSQL, for deployments where many stateless servers share
//! one store. Full text through `tsvector` (English stemming, ranked by `ts_rank`), embeddings
//! as `real[]` scored in Rust within the conversation's rows (pgvector is not in Debian's
//! stable repositories; a server that has it could index them), fused by reciprocal rank
//! exactly as the SQLite store does.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

use postgres::{Client, NoTls};
use strata_core::{Hit, RecallQuery, StoreError, Tier, Timestamp, Turn};

use crate::pool::{Pool, Pooled};
use crate::search::{self, TurnVectors};
use crate::{Store, StoredSummary};

/// Each entry takes the schema from version `i` to `i + 1`; never edit a published one.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE strata_conversations (id bigserial PRIMARY KEY, name text NOT NULL UNIQUE);
    CREATE TABLE strata_turns (
        id bigserial PRIMARY KEY,
        conversation bigint NOT NULL REFERENCES strata_conversations(id),
        seq bigint NOT NULL,
        turn_id text NOT NULL,
        ts bigint,
        body text NOT NULL,
        tsv tsvector NOT NULL,
        vector real[],
        UNIQUE (conversation, seq),
        UNIQUE (conversation, turn_id)
    );
    CREATE INDEX strata_turns_tsv ON strata_turns USING gin (tsv);
    CREATE INDEX strata_turns_time ON strata_turns (conversation, ts);
",
    "
    -- The vectors of a turn's sentences, end to end (as SQLite's `vectors.sentences`).
    ALTER TABLE strata_turns ADD COLUMN sentences real[];
",
    "
    -- What the tiered memory keeps beside the turns: the embedding model, tiers, summaries.
    CREATE TABLE strata_meta (key text PRIMARY KEY, value text NOT NULL);
    CREATE TABLE strata_tiers (
        conversation bigint NOT NULL REFERENCES strata_conversations(id),
        seq bigint NOT NULL,
        tier text NOT NULL,
        PRIMARY KEY (conversation, seq)
    );
    CREATE TABLE strata_summaries (
        id bigserial PRIMARY KEY,
        conversation bigint NOT NULL REFERENCES strata_conversations(id),
        level text NOT NULL,
        first_seq bigint NOT NULL,
        last_seq bigint NOT NULL,
        model text NOT NULL,
        text text NOT NULL,
        sources text NOT NULL
    );
    CREATE INDEX strata_summaries_span ON strata_summaries (conversation, first_seq);
",
];

/// The schema version this build writes.
pub const PG_SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// Serialises migrations across servers starting at once.
const MIGRATION_LOCK: i64 = 0x5354_5241;

/// Read connections kept open for reuse (see `SqliteStore`'s).
const READERS_KEPT: usize = 16;

/// A store on a PostgreSQL server; many servers may share a database. One writing connection
/// per `PgStore`, and read connections beside it, so that a read never waits on an append.
pub struct PgStore {
    location: String,
    /// What it connects with, for the read connections opened as reads need them.
    params: String,
    client: Mutex<Conn>,
    readers: Pool<Conn>,
}

/// A connection closed on a thread of its own. `postgres::Client` drives a runtime of its own
/// and panics when dropped on a thread that is driving async tasks, which is where a server
/// drops the last handle on a memory (and so its store) that it evicts or shuts down.
struct Conn(Option<Client>);

impl Deref for Conn {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.0.as_ref().expect("present until dropped")
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Client {
        self.0.as_mut().expect("present until dropped")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            // Joined, so that the server sees the connection closed when the store is gone.
            let _ = std::thread::spawn(move || drop(client)).join();
        }
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("location", &self.location).finish()
    }
}

impl PgStore {
    /// Connects (`host=/run/postgresql dbname=strata user=app`, or a `postgres://` URL) and
    /// brings the schema up to date; a schema written by a newer Strata is refused.
    pub fn connect(params: &str) -> Result<PgStore, StoreError> {
        // Name the server in messages, never the password.
        let location = match params.parse::<postgres::Config>() {
            Ok(c) => format!(
                "postgres {:?} db {}",
                c.get_hosts().first().map(|h| format!("{h:?}")).unwrap_or_default(),
                c.get_dbname().unwrap_or("(default)")
            ),
            Err(e) => return Err(StoreError::Invalid { location: "postgres".into(), message: e.to_string() }),
        };
        let mut client = Client::connect(params, NoTls)
            .map_err(|e| StoreError::Backend { location: location.clone(), message: e.to_string() })?;
        migrate(&mut client, &location)?;
        Ok(PgStore {
            location,
            params: params.to_string(),
            client: Mutex::new(Conn(Some(client))),
            readers: Pool::new(READERS_KEPT, |c: &Conn| !c.is_closed()),
        })
    }

    /// The conversation's row id, created if absent.
    fn ensure_conversation(&self, client: &mut Client, name: &str) -> Result<i64, StoreError> {
        client
            .execute("INSERT INTO strata_conversations (name) VALUES ($1) ON CONFLICT DO NOTHING", &[&name])
            .map_err(|e| self.err(e))?;
        Ok(self.conversation_id(client, name)?.expect("inserted above"))
    }

    /// A PostgreSQL failure as the store's error: a lost or refused connection (the server
    /// restarted) and a full disk are transient, told apart from the rest.
    fn err(&self, e: postgres::Error) -> StoreError {
        let (location, message) = (self.location.clone(), e.to_string());
        let lost = e.is_closed()
            || std::error::Error::source(&e).is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
            || e.code().is_some_and(|c| c.code().starts_with("57P") || c.code().starts_with("08"));
        if lost {
            StoreError::Unreachable { location, message }
        } else if e.code() == Some(&postgres::error::SqlState::DISK_FULL) {
            StoreError::Full { location, message }
        } else {
            StoreError::Backend { location, message }
        }
    }

    fn open(&self) -> Result<Conn, StoreError> {
        Client::connect(&self.params, NoTls).map(|c| Conn(Some(c))).map_err(|e| self.err(e))
    }

    /// The writing connection, opened again if the server closed it (a restart): the call
    /// that found it closed failed, the next one goes through.
    fn client(&self) -> Result<std::sync::MutexGuard<'_, Conn>, StoreError> {
        let mut client = self.client.lock().unwrap_or_else(|p| p.into_inner());
        if client.is_closed() {
            *client = self.open()?;
        }
        Ok(client)
    }

    /// A read connection: one that no append holds.
    fn reader(&self) -> Result<Pooled<'_, Conn>, StoreError> {
        self.readers.get(|| self.open())
    }

    fn conversation_id(&self, client: &mut Client, name: &str) -> Result<Option<i64>, StoreError> {
        let row = client
            .query_opt("SELECT id FROM strata_conversations WHERE name = $1", &[&name])
            .map_err(|e| self.err(e))?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Row ids of the conversation's turns with their fused scores, best first.
    fn fused(
        &self,
        client: &mut Client,
        conversation: &str,
        query: &RecallQuery,
    ) -> Result<Vec<(i64, f32)>, StoreError> {
        let Some(conv) = self.conversation_id(client, conversation)? else { return Ok(Vec::new()) };
        let depth = query.k.max(1) as i64;
        let (from, to) = match query.time_range {
            Some((a, b)) => (Some(a.seconds()), Some(b.seconds())),
            None => (None, None),
        };
        let mut lexical: Vec<i64> = Vec::new();
        if let Some(q) = tsquery(&query.text) {
            let rows = client
                .query(
                    "SELECT id FROM strata_turns
                     WHERE conversation = $1 AND tsv @@ to_tsquery('english', $2)
                       AND ($3::bigint IS NULL OR ts >= $3) AND ($4::bigint IS NULL OR ts <= $4)
                     ORDER BY ts_rank(tsv, to_tsquery('english', $2)) DESC, id LIMIT $5",
                    &[&conv, &q, &from, &to, &depth],
                )
                .map_err(|e| self.err(e))?;
            lexical = rows.iter().map(|r| r.get(0)).collect();
        }
        let mut dense: Vec<i64> = Vec::new();
        if let Some(q) = &query.embedding {
            let rows = client
                .query(
                    "SELECT id, vector, sentences FROM strata_turns
                     WHERE conversation = $1 AND vector IS NOT NULL
                       AND ($2::bigint IS NULL OR ts >= $2) AND ($3::bigint IS NULL OR ts <= $3)",
                    &[&conv, &from, &to],
                )
                .map_err(|e| self.err(e))?;
            let (q8, qf) = search::quantize(q);
            let mut scored: Vec<(f32, i64)> = Vec::with_capacity(rows.len());
            for r in &rows {
                let v: Vec<f32> = r.get(1);
                if v.len() != q.len() {
                    return Err(StoreError::Invalid {
                        location: self.location.clone(),
                        message: format!(
                            "query vector has {} dimensions but the stored vectors have {}: embedded by another model",
                            q.len(),
                            v.len()
                        ),
                    });
                }
                let cosine = |v: &[f32]| {
                    let (v8, vf) = search::quantize(v);
                    search::dot_i8(&q8, &v8) as f32 * qf * vf
                };
                let sentences: Option<Vec<f32>> = r.get(2);
                let best =
                    sentences.as_deref().unwrap_or_default().chunks_exact(v.len().max(1)).map(cosine).reduce(f32::max);
                scored.push((search::dense_score(cosine(&v), best), r.get(0)));
            }
            scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            dense = scored.into_iter().take(depth as usize).map(|(_, id)| id).collect();
        }
        Ok(search::fuse(&[&lexical, &dense]))
    }

    fn decode(&self, conversation: &str, seq: i64, body: &str) -> Result<Turn, StoreError> {
        serde_json::from_str(body).map_err(|e| StoreError::Corrupt {
            location: self.location.clone(),
            message: format!("conversation {conversation}: turn at position {seq}: {e}"),
        })
    }
}

impl Store for PgStore {
    fn location(&self) -> &str {
        &self.location
    }

    /// Stores a turn and its vectors in one transaction; returns its position.
    fn append_with(
        &self,
        conversation: &str,
        turn: &Turn,
        vectors: Option<TurnVectors<'_>>,
    ) -> Result<u64, StoreError> {
        if let Some(problem) = vectors.and_then(|v| v.problem()) {
            return Err(StoreError::Invalid {
                location: self.location.clone(),
                message: format!("conversation {conversation}: turn {}: {problem}", turn.id),
            });
        }
        let mut client = self.client()?;
        let mut tx = client.transaction().map_err(|e| self.err(e))?;
        tx.execute("INSERT INTO strata_conversations (name) VALUES ($1) ON CONFLICT DO NOTHING", &[&conversation])
            .map_err(|e| self.err(e))?;
        // Locking the conversation's row orders concurrent appends to it, so positions never
        // collide; other conversations are not blocked.
        let conv: i64 = tx
            .query_one("SELECT id FROM strata_conversations WHERE name = $1 FOR UPDATE", &[&conversation])
            .map_err(|e| self.err(e))?
            .get(0);
        let exists = tx
            .query_opt("SELECT seq FROM strata_turns WHERE conversation = $1 AND turn_id = $2", &[&conv, &turn.id])
            .map_err(|e| self.err(e))?;
        if let Some(row) = exists {
            let at: i64 = row.get(0);
            return Err(StoreError::Invalid {
                location: self.location.clone(),
                message: format!("conversation {conversation}: turn {} is already stored (position {at})", turn.id),
            });
        }
        let seq: i64 = tx
            .query_one("SELECT coalesce(max(seq) + 1, 0) FROM strata_turns WHERE conversation = $1", &[&conv])
            .map_err(|e| self.err(e))?
            .get(0);
        let body = serde_json::to_string(turn).map_err(|e| StoreError::Invalid {
            location: self.location.clone(),
            message: format!("turn {}: {e}", turn.id),
        })?;
        let ts = turn.timestamp.map(Timestamp::seconds);
        let vector: Option<Vec<f32>> = vectors.map(|v| v.whole.to_vec());
        let sentences: Option<Vec<f32>> = vectors.filter(|v| !v.sentences.is_empty()).map(|v| v.sentences.concat());
        tx.execute(
            "INSERT INTO strata_turns (conversation, seq, turn_id, ts, body, tsv, vector, sentences)
             VALUES ($1, $2, $3, $4, $5, to_tsvector('english', $6), $7, $8)",
            &[&conv, &seq, &turn.id, &ts, &body, &search::indexed_text(turn), &vector, &sentences],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(seq as u64)
    }

    fn set_vectors(&self, conversation: &str, batch: &[(&str, TurnVectors<'_>)]) -> Result<(), StoreError> {
        for (turn_id, vectors) in batch {
            if let Some(problem) = vectors.problem() {
                return Err(StoreError::Invalid {
                    location: self.location.clone(),
                    message: format!("conversation {conversation}: turn {turn_id}: {problem}"),
                });
            }
        }
        let mut client = self.client()?;
        let mut tx = client.transaction().map_err(|e| self.err(e))?;
        for (turn_id, vectors) in batch {
            let vector: Vec<f32> = vectors.whole.to_vec();
            let sentences: Option<Vec<f32>> = (!vectors.sentences.is_empty()).then(|| vectors.sentences.concat());
            let updated = tx
                .execute(
                    "UPDATE strata_turns t SET vector = $3, sentences = $4 FROM strata_conversations c
                     WHERE c.id = t.conversation AND c.name = $1 AND t.turn_id = $2",
                    &[&conversation, turn_id, &vector, &sentences],
                )
                .map_err(|e| self.err(e))?;
            if updated == 0 {
                // Dropping the transaction rolls back what the batch wrote before this turn.
                return Err(StoreError::Invalid {
                    location: self.location.clone(),
                    message: format!("conversation {conversation}: no stored turn {turn_id}"),
                });
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    fn bind_embedder(&self, model: &str, dim: usize) -> Result<(), StoreError> {
        let mut client = self.client()?;
        let mut tx = client.transaction().map_err(|e| self.err(e))?;
        // Servers binding at once: the first one's model wins, the others compare with it.
        tx.execute("LOCK TABLE strata_meta IN EXCLUSIVE MODE", &[]).map_err(|e| self.err(e))?;
        let stored: Option<String> = tx
            .query_opt("SELECT value FROM strata_meta WHERE key = 'embedder.model'", &[])
            .map_err(|e| self.err(e))?
            .map(|r| r.get(0));
        if crate::store::bound_already(stored, model, &self.location)? {
            return Ok(());
        }
        let found: Option<i32> = tx
            .query_opt("SELECT array_length(vector, 1) FROM strata_turns WHERE vector IS NOT NULL LIMIT 1", &[])
            .map_err(|e| self.err(e))?
            .and_then(|r| r.get(0));
        if let Some(found) = found.filter(|&n| n as usize != dim) {
            return Err(StoreError::OtherEmbedder {
                location: self.location.clone(),
                stored: format!("an unrecorded model of {found} dimensions"),
                given: format!("{model} ({dim} dimensions)"),
            });
        }
        for (key, value) in [("embedder.model", model.to_string()), ("embedder.dim", dim.to_string())] {
            tx.execute("INSERT INTO strata_meta (key, value) VALUES ($1, $2)", &[&key, &value])
                .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    fn embedder(&self) -> Result<Option<(String, usize)>, StoreError> {
        let rows = self
            .reader()?
            .query("SELECT key, value FROM strata_meta WHERE key IN ('embedder.model', 'embedder.dim')", &[])
            .map_err(|e| self.err(e))?;
        let get = |key: &str| rows.iter().find(|r| r.get::<_, String>(0) == key).map(|r| r.get::<_, String>(1));
        match (get("embedder.model"), get("embedder.dim")) {
            (Some(model), Some(dim)) => {
                let dim = dim.parse().map_err(|_| StoreError::Corrupt {
                    location: self.location.clone(),
                    message: format!("strata_meta embedder.dim is {dim:?}, not a number"),
                })?;
                Ok(Some((model, dim)))
            }
            _ => Ok(None),
        }
    }

    /// Names of the stored conversations, sorted.
    fn conversations(&self) -> Result<Vec<String>, StoreError> {
        let rows = self
            .reader()?
            .query("SELECT name FROM strata_conversations ORDER BY name", &[])
            .map_err(|e| self.err(e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn len(&self, conversation: &str) -> Result<u64, StoreError> {
        let n: i64 = self
            .reader()?
            .query_one(
                "SELECT count(*) FROM strata_turns t JOIN strata_conversations c ON c.id = t.conversation
                 WHERE c.name = $1",
                &[&conversation],
            )
            .map_err(|e| self.err(e))?
            .get(0);
        Ok(n as u64)
    }

    fn whole_vectors(&self, conversation: &str) -> Result<Vec<Vec<f32>>, StoreError> {
        let rows = self
            .reader()?
            .query(
                "SELECT t.vector FROM strata_turns t JOIN strata_conversations c ON c.id = t.conversation
                 WHERE c.name = $1 ORDER BY t.seq",
                &[&conversation],
            )
            .map_err(|e| self.err(e))?;
        // As the SQLite store gives them back, so a memory detects the same topics on both.
        Ok(rows
            .iter()
            .map(|r| r.get::<_, Option<Vec<f32>>>(0).map(|v| search::as_stored(&v)).unwrap_or_default())
            .collect())
    }

    fn put_summary(&self, conversation: &str, summary: &StoredSummary) -> Result<(), StoreError> {
        let mut client = self.client()?;
        let conv = self.ensure_conversation(&mut client, conversation)?;
        let sources = serde_json::to_string(&summary.sources).expect("strings serialise");
        client
            .execute(
                "INSERT INTO strata_summaries (conversation, level, first_seq, last_seq, model, text, sources)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &conv,
                    &summary.level,
                    &(summary.first_seq as i64),
                    &(summary.last_seq as i64),
                    &summary.model,
                    &summary.text,
                    &sources,
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn summaries(&self, conversation: &str) -> Result<Vec<StoredSummary>, StoreError> {
        let rows = self
            .reader()?
            .query(
                "SELECT s.level, s.first_seq, s.last_seq, s.model, s.text, s.sources
                 FROM strata_summaries s JOIN strata_conversations c ON c.id = s.conversation
                 WHERE c.name = $1 ORDER BY s.first_seq, s.last_seq, s.id",
                &[&conversation],
            )
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|r| {
                let (first, last): (i64, i64) = (r.get(1), r.get(2));
                let sources: String = r.get(5);
                let sources = serde_json::from_str(&sources).map_err(|e| StoreError::Corrupt {
                    location: self.location.clone(),
                    message: format!("conversation {conversation}: summary of positions {first}-{last}: {e}"),
                })?;
                Ok(StoredSummary {
                    level: r.get(0),
                    first_seq: first as u64,
                    last_seq: last as u64,
                    model: r.get(3),
                    text: r.get(4),
                    sources,
                })
            })
            .collect()
    }

    fn set_tiers(&self, conversation: &str, from: u64, tiers: &[Tier]) -> Result<(), StoreError> {
        let mut client = self.client()?;
        let conv = self.ensure_conversation(&mut client, conversation)?;
        let seqs: Vec<i64> = (0..tiers.len()).map(|i| (from + i as u64) as i64).collect();
        let names: Vec<&str> = tiers.iter().map(|t| t.as_str()).collect();
        // One statement for the whole run of tiers.
        client
            .execute(
                "INSERT INTO strata_tiers (conversation, seq, tier)
                 SELECT $1, s, t FROM unnest($2::bigint[], $3::text[]) AS u(s, t)
                 ON CONFLICT (conversation, seq) DO UPDATE SET tier = excluded.tier",
                &[&conv, &seqs, &names],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn tiers(&self, conversation: &str) -> Result<Vec<Tier>, StoreError> {
        let rows = self
            .reader()?
            .query(
                "SELECT t.seq, r.tier FROM strata_turns t JOIN strata_conversations c ON c.id = t.conversation
                 LEFT JOIN strata_tiers r ON r.conversation = t.conversation AND r.seq = t.seq
                 WHERE c.name = $1 ORDER BY t.seq",
                &[&conversation],
            )
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|r| {
                let seq: i64 = r.get(0);
                match r.get::<_, Option<String>>(1) {
                    None => Ok(Tier::Hot),
                    Some(name) => Tier::parse(&name).ok_or_else(|| StoreError::Corrupt {
                        location: self.location.clone(),
                        message: format!("conversation {conversation}: turn at position {seq} has tier `{name}`"),
                    }),
                }
            })
            .collect()
    }

    /// Fused ranking of the conversation's turns, best first (as `SqliteStore::search_ranked`).
    fn search_ranked(&self, conversation: &str, query: &RecallQuery) -> Result<Vec<search::Ranked>, StoreError> {
        let mut client = self.reader()?;
        let fused = self.fused(&mut client, conversation, query)?;
        let mut out = Vec::with_capacity(fused.len());
        for (id, score) in fused {
            let row = client
                .query_one("SELECT seq, turn_id FROM strata_turns WHERE id = $1", &[&id])
                .map_err(|e| self.err(e))?;
            let seq: i64 = row.get(0);
            out.push(search::Ranked { seq: seq as u64, turn_id: row.get(1), score });
        }
        Ok(out)
    }

    fn turns(&self, conversation: &str) -> Result<Vec<Turn>, StoreError> {
        let rows = self
            .reader()?
            .query(
                "SELECT t.seq, t.body FROM strata_turns t JOIN strata_conversations c ON c.id = t.conversation
                 WHERE c.name = $1 ORDER BY t.seq",
                &[&conversation],
            )
            .map_err(|e| self.err(e))?;
        rows.iter().map(|r| self.decode(conversation, r.get(0), r.get(1))).collect()
    }

    fn search(&self, conversation: &str, query: &RecallQuery) -> Result<Vec<Hit>, StoreError> {
        let mut client = self.reader()?;
        let fused = self.fused(&mut client, conversation, query)?;
        let mut hits = Vec::new();
        for (id, score) in fused.into_iter().take(query.k) {
            let row = client
                .query_one("SELECT seq, body FROM strata_turns WHERE id = $1", &[&id])
                .map_err(|e| self.err(e))?;
            hits.push(Hit { turn: self.decode(conversation, row.get(0), row.get(1))?, score });
        }
        Ok(hits)
    }
}

/// Brings the schema up to [`PG_SCHEMA_VERSION`] under an advisory lock, so servers starting
/// together migrate once.
fn migrate(client: &mut Client, location: &str) -> Result<(), StoreError> {
    let err = |e: postgres::Error| StoreError::Backend { location: location.to_string(), message: e.to_string() };
    let mut tx = client.transaction().map_err(err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(err)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS strata_schema (version integer NOT NULL)").map_err(err)?;
    let version: i32 = match tx.query_opt("SELECT version FROM strata_schema", &[]).map_err(err)? {
        Some(r) => r.get(0),
        None => {
            tx.execute("INSERT INTO strata_schema (version) VALUES (0)", &[]).map_err(err)?;
            0
        }
    };
    if version > PG_SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            location: location.to_string(),
            found: i64::from(version),
            supported: i64::from(PG_SCHEMA_VERSION),
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version.max(0) as usize) {
        tx.batch_execute(sql).map_err(|e| StoreError::Backend {
            location: location.to_string(),
            message: format!("migrating to schema version {}: {e}", i + 1),
        })?;
    }
    tx.execute("UPDATE strata_schema SET version = $1", &[&PG_SCHEMA_VERSION]).map_err(err)?;
    tx.commit().map_err(err)
}

/// A `to_tsquery` expression matching any content word of `text`: the same words as the
/// SQLite store's query, reduced to letters and digits so nothing is read as syntax.
fn tsquery(text: &str) -> Option<String> {
    let terms = crate::lexical::query_words(text);
    if terms.is_empty() {
        None
    } else {
        Some(terms.join(" | "))
    }
}
