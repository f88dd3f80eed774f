//! Tests of the store: round trips, scoping, hybrid ranking, schema checks and migrations.

use std::path::Path;

use strata_core::{RecallQuery, Role, StoreError, Tier, Timestamp, Turn};

use crate::{civil_date, fuse, SqliteStore, Store, StoredSummary, TurnVectors, SCHEMA_VERSION};

fn turn(id: &str, content: &str) -> Turn {
    Turn::new(id, Role::User, content)
}

fn query(text: &str, k: usize) -> RecallQuery {
    RecallQuery { text: text.to_string(), k, embedding: None, time_range: None }
}

fn ids(hits: &[strata_core::Hit]) -> Vec<String> {
    hits.iter().map(|h| h.turn.id.clone()).collect()
}

#[test]
fn turns_round_trip_byte_identical_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/store.db");
    let mut t = turn("t1", "naïve café ☕ with \"quotes\", tabs\tand\nnewlines\u{0}nul");
    t.speaker = Some("Ana".into());
    t.timestamp = Some(Timestamp(1_683_504_000));
    let turns = vec![t, turn("t2", "second"), Turn::new("t3", Role::Assistant, "third")];
    {
        let store = SqliteStore::open(&path).unwrap();
        for t in &turns {
            store.append("c", t).unwrap();
        }
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.turns("c").unwrap(), turns);
    assert_eq!(store.turns_from("c", 2).unwrap(), turns[2..]);
    assert_eq!(store.len("c").unwrap(), 3);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn a_turn_id_is_stored_once_per_conversation() {
    let store = SqliteStore::in_memory().unwrap();
    store.append("c", &turn("t1", "a")).unwrap();
    let err = store.append("c", &turn("t1", "b")).unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("turn t1 is already stored"), "{err}");
    // The same id in another conversation is a different turn.
    store.append("d", &turn("t1", "b")).unwrap();
    assert_eq!(store.turns("c").unwrap().len(), 1);
}

#[test]
fn search_never_crosses_conversations() {
    let store = SqliteStore::in_memory().unwrap();
    store.append("alpha", &turn("a1", "the deploy script lives in ops/deploy.sh")).unwrap();
    store.append("beta", &turn("b1", "the deploy script is broken again")).unwrap();
    store.append("beta", &turn("b2", "deploy deploy deploy script")).unwrap();
    let hits = store.search("alpha", &query("deploy script", 10)).unwrap();
    assert_eq!(ids(&hits), ["a1"]);
    assert!(store.search("gamma", &query("deploy", 10)).unwrap().is_empty());
    assert_eq!(store.conversations().unwrap(), ["alpha", "beta"]);
}

#[test]
fn lexical_search_stems_and_ignores_stopwords() {
    let store = SqliteStore::in_memory().unwrap();
    store.append("c", &turn("t1", "I went running with the dogs at the lake")).unwrap();
    store.append("c", &turn("t2", "what is the plan for the weekend, and the one after")).unwrap();
    store.append("c", &turn("t3", "nothing relevant here")).unwrap();
    // "runs" and "dog" match through the stemmer; "the" and "what" match nothing.
    let hits = store.search("c", &query("what runs the dog?", 10)).unwrap();
    assert_eq!(ids(&hits), ["t1"]);
    assert!(store.search("c", &query("the what and", 10)).unwrap().is_empty());
    // Query syntax typed by a user is only ever text.
    assert!(store.search("c", &query("NEAR(\"x\" OR) AND * ^", 10)).is_ok());
}

#[test]
fn speaker_and_date_are_searchable_but_not_stored_in_the_turn() {
    let store = SqliteStore::in_memory().unwrap();
    let mut t = turn("t1", "I adopted a puppy");
    t.speaker = Some("Melanie".into());
    t.timestamp = Some(Timestamp(1_683_504_000)); // 8 May 2023
    store.append("c", &t).unwrap();
    store.append("c", &turn("t2", "a puppy? lovely")).unwrap();
    assert_eq!(ids(&store.search("c", &query("Melanie in May", 10)).unwrap()), ["t1"]);
    assert_eq!(store.turns("c").unwrap()[0].content, "I adopted a puppy");
}

#[test]
fn dense_and_lexical_ranks_are_fused() {
    let store = SqliteStore::in_memory().unwrap();
    let v = |x: f32, y: f32| vec![x, y, 0.0];
    // t1 matches the words only, t2 the meaning only, t3 both.
    store.append_with("c", &turn("t1", "zebra crossing"), Some(TurnVectors::whole(&v(0.0, 1.0)))).unwrap();
    store.append_with("c", &turn("t2", "pedestrian stripes"), Some(TurnVectors::whole(&v(1.0, 0.0)))).unwrap();
    store.append_with("c", &turn("t3", "zebra stripes on the road"), Some(TurnVectors::whole(&v(0.9, 0.1)))).unwrap();
    store.append_with("c", &turn("t4", "unrelated"), Some(TurnVectors::whole(&v(-1.0, 0.0)))).unwrap();
    // Each list contributes its top two: words [t1, t3], meaning [t2, t3]. Agreement wins; the
    // two single-list winners tie and fall back to storage order.
    let mut q = query("zebra", 2);
    q.embedding = Some(v(1.0, 0.0));
    let hits = store.search("c", &q).unwrap();
    assert_eq!(ids(&hits), ["t3", "t1"]);
    let ranked = store.search_ranked("c", &q).unwrap();
    assert_eq!(ranked.iter().map(|r| r.turn_id.as_str()).collect::<Vec<_>>(), ["t3", "t1", "t2"]);
    assert_eq!(ranked[1].score, ranked[2].score);
    assert_eq!(ranked[0].seq, 2);
    // Without the vector only the words count.
    assert_eq!(ids(&store.search("c", &query("zebra", 3)).unwrap()), ["t1", "t3"]);
    // A vector of another model's width is refused, not silently scored.
    q.embedding = Some(vec![1.0; 5]);
    assert!(matches!(store.search("c", &q), Err(StoreError::Invalid { .. })));
}

#[test]
fn a_turn_is_found_by_its_best_sentence_too() {
    let store = SqliteStore::in_memory().unwrap();
    let v = |x: f32, y: f32| vec![x, y, 0.0];
    let (a, b, c) = (v(0.6, 0.8), v(0.5, 0.866), v(1.0, 0.0));
    let sentences = [v(1.0, 0.0), v(0.0, 1.0)];
    store.append_with("c", &turn("t1", "one"), Some(TurnVectors::whole(&a))).unwrap();
    // Its whole text is further from the query than t1's, but one of its sentences is on it:
    // the mean of the two (0.75) beats t1's 0.6.
    store.append_with("c", &turn("t2", "two"), Some(TurnVectors { whole: &b, sentences: &sentences })).unwrap();
    store.append_with("c", &turn("t3", "three"), Some(TurnVectors::whole(&c))).unwrap();
    let q = RecallQuery { text: String::new(), k: 3, embedding: Some(v(1.0, 0.0)), time_range: None };
    assert_eq!(ids(&store.search("c", &q).unwrap()), ["t3", "t2", "t1"]);
    // Sentence vectors of another width are refused, and the turn is not stored.
    let wrong = [vec![1.0, 0.0]];
    let refused = store.append_with("c", &turn("t4", "four"), Some(TurnVectors { whole: &c, sentences: &wrong }));
    assert!(matches!(refused, Err(StoreError::Invalid { .. })), "{refused:?}");
    assert!(matches!(
        store.append_with("c", &turn("t5", "five"), Some(TurnVectors::whole(&[]))),
        Err(StoreError::Invalid { .. })
    ));
    assert_eq!(store.len("c").unwrap(), 3);
    // They survive a reopen: the index is rebuilt from the stored rows.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let disk = SqliteStore::open(&path).unwrap();
        disk.append_with("c", &turn("t1", "one"), Some(TurnVectors::whole(&a))).unwrap();
        disk.append_with("c", &turn("t2", "two"), Some(TurnVectors { whole: &b, sentences: &sentences })).unwrap();
    }
    assert_eq!(ids(&SqliteStore::open(&path).unwrap().search("c", &q).unwrap()), ["t2", "t1"]);
}

#[test]
fn turns_written_by_another_handle_are_found_by_the_next_search() {
    // Each handle keeps its own in-memory indexes; another process's appends to the same file
    // must reach them at the next search, not only after a reopen.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let reader = SqliteStore::open(&path).unwrap();
    let writer = SqliteStore::open(&path).unwrap();
    writer.append("c", &turn("t1", "the kayak trip is in June")).unwrap();
    assert_eq!(ids(&reader.search("c", &query("kayak", 10)).unwrap()), ["t1"]);
    writer.append("c", &turn("t2", "we booked kayaks for the whole family")).unwrap();
    writer.append("d", &turn("d1", "kayak kayak kayak")).unwrap();
    assert_eq!(ids(&reader.search("c", &query("kayak", 10)).unwrap()), ["t1", "t2"]);
}

#[test]
fn vectors_added_later_are_seen_by_the_next_search() {
    let store = SqliteStore::in_memory().unwrap();
    store.append("c", &turn("t1", "alpha")).unwrap();
    store.append("c", &turn("t2", "beta")).unwrap();
    let mut q = query("", 1);
    q.embedding = Some(vec![0.0, 1.0]);
    assert!(store.search("c", &q).unwrap().is_empty());
    store.set_vectors("c", &[("t1", TurnVectors::whole(&[1.0, 0.0]))]).unwrap();
    store.set_vectors("c", &[("t2", TurnVectors::whole(&[0.0, 1.0]))]).unwrap();
    assert_eq!(ids(&store.search("c", &q).unwrap()), ["t2"]);
    // Replacing a vector replaces it in the next search too.
    store.set_vectors("c", &[("t1", TurnVectors::whole(&[0.0, 1.0]))]).unwrap();
    store.set_vectors("c", &[("t2", TurnVectors::whole(&[1.0, 0.0]))]).unwrap();
    assert_eq!(ids(&store.search("c", &q).unwrap()), ["t1"]);
    // A batch naming a turn the conversation lacks writes nothing, not even the turns before it.
    let bad = [("t1", TurnVectors::whole(&[1.0, 0.0])), ("nope", TurnVectors::whole(&[1.0, 0.0]))];
    assert!(matches!(store.set_vectors("c", &bad), Err(StoreError::Invalid { .. })));
    assert_eq!(ids(&store.search("c", &q).unwrap()), ["t1"]);
}

#[test]
fn vectors_replaced_by_another_handle_are_scored_once() {
    // The other handle's index is not this one's to clear: a new row for a turn the index
    // holds is what says the index is stale.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let reader = SqliteStore::open(&path).unwrap();
    let writer = SqliteStore::open(&path).unwrap();
    writer.append_with("c", &turn("t1", "alpha"), Some(TurnVectors::whole(&[1.0, 0.0]))).unwrap();
    writer.append_with("c", &turn("t2", "beta"), Some(TurnVectors::whole(&[0.6, 0.8]))).unwrap();
    let mut q = query("", 3);
    q.embedding = Some(vec![0.0, 1.0]);
    assert_eq!(ids(&reader.search("c", &q).unwrap()), ["t2", "t1"]);
    writer.set_vectors("c", &[("t1", TurnVectors::whole(&[0.0, 1.0]))]).unwrap();
    let hits = reader.search("c", &q).unwrap();
    assert_eq!(ids(&hits), ["t1", "t2"], "t1 by its new vector, once");
    assert!(hits[0].score > hits[1].score);
}

/// A read takes no lock the writer holds: with the store's writer taken (as by an append
/// under way) and SQLite's write lock held by another connection mid-transaction, every read
/// returns, and sees what was committed and nothing of what was not.
#[test]
fn reads_never_wait_on_the_writer() {
    use std::sync::mpsc;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = std::sync::Arc::new(SqliteStore::open(&path).unwrap());
    store.append_with("c", &turn("t1", "the kayak trip is in June"), Some(TurnVectors::whole(&[1.0, 0.0]))).unwrap();
    store
        .put_summary(
            "c",
            &StoredSummary {
                level: "segment".into(),
                first_seq: 0,
                last_seq: 0,
                model: "extractive".into(),
                text: "kayak in June".into(),
                sources: vec!["t1".into()],
            },
        )
        .unwrap();
    store.set_tiers("c", 0, &[Tier::Warm]).unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE; INSERT INTO conversations (name) VALUES ('uncommitted');").unwrap();
    let held = store.hold_writer();
    let (send, receive) = mpsc::channel();
    let reading = store.clone();
    std::thread::spawn(move || {
        let mut q = query("kayak", 5);
        q.embedding = Some(vec![1.0, 0.0]);
        let read = (
            ids(&reading.search("c", &q).unwrap()),
            reading.search_ranked("c", &q).unwrap().len(),
            reading.turns("c").unwrap().len(),
            reading.len("c").unwrap(),
            reading.summaries("c").unwrap().len(),
            reading.tiers("c").unwrap(),
            reading.conversations().unwrap(),
            reading.whole_vectors("c").unwrap().len(),
            reading.embedder().unwrap(),
        );
        send.send(read).unwrap();
    });
    let read = receive.recv_timeout(Duration::from_secs(5)).expect("the reads wait on the writer");
    assert_eq!(read.0, ["t1"]);
    assert_eq!((read.1, read.2, read.3, read.4), (1, 1, 1, 1));
    assert_eq!(read.5, [Tier::Warm]);
    assert_eq!(read.6, ["c"], "the uncommitted conversation is not seen");
    assert_eq!((read.7, read.8), (1, None));
    drop(held);
    other.execute_batch("ROLLBACK").unwrap();
    // The writer goes on after them.
    store.append("c", &turn("t2", "we booked kayaks")).unwrap();
    assert_eq!(store.search("c", &query("kayak", 5)).unwrap().len(), 2);
}

/// Appends that arrive while a group is being written are committed together, each on disk
/// before it returns; one refused (a turn stored already) leaves the others stored.
#[test]
fn appends_waiting_together_are_committed_in_one_group() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = std::sync::Arc::new(SqliteStore::open(&path).unwrap());
    store.append("c0", &turn("t0", "stored first")).unwrap();
    let groups = store.commit_counts().2;
    let held = store.hold_writer();
    let append = |conversation: String, id: &'static str| {
        let store = store.clone();
        std::thread::spawn(move || store.append_with(&conversation, &turn(id, "a turn"), None))
    };
    // The first becomes the writer of a group and waits for the lock; the others queue.
    let first = append("c1".into(), "t1");
    while store.commit_counts() != (0, true, groups) {
        std::thread::yield_now();
    }
    let mut others: Vec<_> = (2..=9).map(|i| append(format!("c{i}"), "t1")).collect();
    others.push(append("c0".into(), "t0"));
    while store.commit_counts().0 < 9 {
        std::thread::yield_now();
    }
    drop(held);
    assert_eq!(first.join().unwrap().unwrap(), 0);
    let refused = others.pop().unwrap().join().unwrap().unwrap_err();
    assert!(refused.to_string().contains("turn t0 is already stored"), "{refused}");
    for t in others {
        assert_eq!(t.join().unwrap().unwrap(), 0);
    }
    assert_eq!(store.commit_counts(), (0, false, groups + 2), "one group for the first, one for the nine");
    drop(store);
    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(reopened.conversations().unwrap().len(), 10);
    assert!((0..=9).all(|i| reopened.len(&format!("c{i}")).unwrap() == 1));
}

#[test]
fn time_range_filters_both_rankings() {
    let store = SqliteStore::in_memory().unwrap();
    for (i, ts) in [100, 200, 300].into_iter().enumerate() {
        let mut t = turn(&format!("t{i}"), "budget meeting notes");
        t.timestamp = Some(Timestamp(ts));
        store.append_with("c", &t, Some(TurnVectors::whole(&[1.0, 0.0]))).unwrap();
    }
    store.append_with("c", &turn("untimed", "budget meeting notes"), Some(TurnVectors::whole(&[1.0, 0.0]))).unwrap();
    let mut q = query("budget", 10);
    q.embedding = Some(vec![1.0, 0.0]);
    q.time_range = Some((Timestamp(150), Timestamp(300)));
    let mut got = ids(&store.search("c", &q).unwrap());
    got.sort();
    assert_eq!(got, ["t1", "t2"]);
}

#[test]
fn tiers_round_trip_and_default_to_hot() {
    let store = SqliteStore::in_memory().unwrap();
    for i in 0..4 {
        store.append("c", &turn(&format!("t{i}"), "x")).unwrap();
    }
    assert_eq!(store.tiers("c").unwrap(), [Tier::Hot; 4]);
    store.set_tiers("c", 0, &[Tier::Cold, Tier::Cool]).unwrap();
    store.set_tiers("c", 1, &[Tier::Warm]).unwrap();
    assert_eq!(store.tiers("c").unwrap(), [Tier::Cold, Tier::Warm, Tier::Hot, Tier::Hot]);
    assert!(store.tiers("other").unwrap().is_empty());
}

#[test]
fn summaries_round_trip() {
    let store = SqliteStore::in_memory().unwrap();
    let s = StoredSummary {
        level: "segment".into(),
        first_seq: 0,
        last_seq: 4,
        model: "extractive".into(),
        text: "[Earlier conversation summary: x]".into(),
        sources: vec!["t0".into(), "t4".into()],
    };
    store.put_summary("c", &s).unwrap();
    assert_eq!(store.summaries("c").unwrap(), [s]);
    assert!(store.summaries("other").unwrap().is_empty());
}

fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.db");
    std::fs::write(&path, "these are my notes, not a database\n".repeat(200)).unwrap();
    let before = bytes(&path);
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
    assert!(err.to_string().contains("notes.db") && err.to_string().contains("not a SQLite database"), "{err}");
    assert_eq!(bytes(&path), before);
    assert!(!dir.path().join("notes.db-wal").exists());
}

#[test]
fn another_programs_database_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ana');").unwrap();
    }
    let before = bytes(&path);
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
    assert!(err.to_string().contains("another program"), "{err}");
    assert_eq!(bytes(&path), before);
}

#[test]
fn a_newer_schema_is_refused_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    SqliteStore::open(&path).unwrap().append("c", &turn("t1", "x")).unwrap();
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        c.pragma_update(None, "journal_mode", "DELETE").unwrap();
    }
    let before = bytes(&path);
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1), "{err}");
    assert!(err.to_string().contains("upgrade strata"), "{err}");
    assert_eq!(bytes(&path), before);
}

#[test]
fn a_damaged_store_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        for i in 0..200 {
            store.append("c", &turn(&format!("t{i}"), &"some words to fill pages ".repeat(20))).unwrap();
        }
    }
    let mut data = bytes(&path);
    assert!(data.len() > 5 * 4096, "{}", data.len());
    // Overwrite pages 3 and 4 with garbage; the header (page 1) stays valid.
    for b in &mut data[2 * 4096..4 * 4096] {
        *b = 0x5a;
    }
    std::fs::write(&path, &data).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("s.db"), "{err}");
    assert_eq!(bytes(&path), data);
}

#[test]
fn an_old_schema_is_migrated_and_keeps_its_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        crate::schema::migrate(&c, "old.db", 1).unwrap();
        let v: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(v, 1);
        let body = serde_json::to_string(&turn("t1", "kept across versions")).unwrap();
        c.execute_batch(&format!(
            "INSERT INTO conversations (id, name) VALUES (1, 'c');
             INSERT INTO turns (id, conversation, seq, turn_id, ts, body) VALUES (1, 1, 0, 't1', NULL, '{body}');
             INSERT INTO turns_fts (rowid, conv, text) VALUES (1, 'c1', 'kept across versions');"
        ))
        .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.turns("c").unwrap(), [turn("t1", "kept across versions")]);
    assert_eq!(ids(&store.search("c", &query("versions", 5)).unwrap()), ["t1"]);
    let s = StoredSummary {
        level: "segment".into(),
        first_seq: 0,
        last_seq: 0,
        model: "extractive".into(),
        text: "x".into(),
        sources: vec!["t1".into()],
    };
    store.put_summary("c", &s).unwrap();
    drop(store);
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    // Version 4 dropped the full-text table that version 1 made.
    let fts: i64 =
        c.query_row("SELECT count(*) FROM sqlite_master WHERE name = 'turns_fts'", [], |r| r.get(0)).unwrap();
    assert_eq!(fts, 0);
}

/// Vectors written as f32 before schema 6 stay readable after the migration and rank exactly
/// as the int8 rows written since (a search quantizes both the same way), in a quarter of the
/// bytes for the new ones; `compact` rewrites the old ones.
#[test]
fn f32_vectors_from_before_version_6_rank_as_int8_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old.db"), dir.path().join("new.db"));
    let mut seed = 3u64;
    let mut noise = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
    };
    let rows: Vec<(Vec<f32>, Vec<Vec<f32>>)> = (0..30)
        .map(|i| {
            let whole: Vec<f32> = (0..16).map(|_| noise()).collect();
            let sentences = (0..i % 3).map(|_| (0..16).map(|_| noise()).collect()).collect();
            (whole, sentences)
        })
        .collect();
    let f32_bytes =
        |vs: &[&Vec<f32>]| -> Vec<u8> { vs.iter().flat_map(|v| v.iter()).flat_map(|x| x.to_le_bytes()).collect() };
    {
        // A version-5 store, its vectors as that version wrote them.
        let c = rusqlite::Connection::open(&old).unwrap();
        crate::schema::migrate(&c, "old.db", 5).unwrap();
        c.execute("INSERT INTO conversations (id, name) VALUES (1, 'c')", []).unwrap();
        for (i, (whole, sentences)) in rows.iter().enumerate() {
            let body = serde_json::to_string(&turn(&format!("t{i}"), "text")).unwrap();
            c.execute(
                "INSERT INTO turns (id, conversation, seq, turn_id, ts, body) VALUES (?1, 1, ?2, ?3, NULL, ?4)",
                rusqlite::params![i as i64 + 1, i as i64, format!("t{i}"), body],
            )
            .unwrap();
            let sentences = (!sentences.is_empty()).then(|| f32_bytes(&sentences.iter().collect::<Vec<_>>()));
            c.execute(
                "INSERT INTO vectors (conversation, turn, data, sentences) VALUES (1, ?1, ?2, ?3)",
                rusqlite::params![i as i64 + 1, f32_bytes(&[whole]), sentences],
            )
            .unwrap();
        }
    }
    let fresh = SqliteStore::open(&new).unwrap();
    for (i, (whole, sentences)) in rows.iter().enumerate() {
        let v = TurnVectors { whole, sentences };
        fresh.append_with("c", &turn(&format!("t{i}"), "text"), Some(v)).unwrap();
    }
    let migrated = SqliteStore::open(&old).unwrap();
    for k in 0..10 {
        let q = RecallQuery { text: String::new(), k: 10, embedding: Some(rows[k * 3].0.clone()), time_range: None };
        let (a, b) = (ids(&migrated.search("c", &q).unwrap()), ids(&fresh.search("c", &q).unwrap()));
        assert_eq!(a, b, "query {k}");
        assert_eq!(a[0], format!("t{}", k * 3));
    }
    let c = rusqlite::Connection::open(&new).unwrap();
    let (encoding, len): (i64, i64) =
        c.query_row("SELECT encoding, length(data) FROM vectors LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!((encoding, len), (1, 16 + 4));

    // Compaction rewrites the old rows byte for byte as a fresh store writes them, both before
    // and after reopening the file the rankings stay the same, and a second pass finds nothing.
    let done = migrated.compact().unwrap();
    assert_eq!(done.rewritten, 30);
    assert!(done.bytes_after <= done.bytes_before, "{done:?}");
    let blobs = |path: &std::path::Path| -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
        let c = rusqlite::Connection::open(path).unwrap();
        let mut stmt = c.prepare("SELECT encoding, data, sentences FROM vectors ORDER BY turn").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(blobs(&old), blobs(&new));
    let reopened = SqliteStore::open(&old).unwrap();
    for k in 0..10 {
        let q =
            RecallQuery { text: String::new(), k: 10, embedding: Some(rows[k * 3 + 1].0.clone()), time_range: None };
        let want = ids(&fresh.search("c", &q).unwrap());
        assert_eq!(ids(&migrated.search("c", &q).unwrap()), want, "query {k}, compacted");
        assert_eq!(ids(&reopened.search("c", &q).unwrap()), want, "query {k}, reopened");
    }
    assert_eq!(reopened.compact().unwrap().rewritten, 0);
    assert_eq!(reopened.integrity_check().unwrap(), "ok");
}

#[test]
fn fusion_prefers_agreement_and_breaks_ties_by_row() {
    let fused = fuse(&[&[1, 2, 3], &[3, 4]]);
    assert_eq!(fused.iter().map(|f| f.0).collect::<Vec<_>>(), [3, 1, 2, 4]);
    let tied = fuse(&[&[7], &[5]]);
    assert_eq!(tied.iter().map(|f| f.0).collect::<Vec<_>>(), [5, 7]);
}

#[test]
fn civil_dates() {
    assert_eq!(civil_date(0), "1 January 1970");
    assert_eq!(civil_date(1_683_504_000), "8 May 2023");
    assert_eq!(civil_date(951_782_400), "29 February 2000");
    assert_eq!(civil_date(-86_400), "31 December 1969");
}

#[test]
fn a_store_remembers_its_embedder_and_refuses_another() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.embedder().unwrap(), None);
        store.bind_embedder("model-a", 3).unwrap();
        store.append_with("c", &turn("t1", "alpha"), Some(TurnVectors::whole(&[1.0, 0.0, 0.0]))).unwrap();
        // The same model again is fine.
        store.bind_embedder("model-a", 3).unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.embedder().unwrap(), Some(("model-a".to_string(), 3)));
    let err = store.bind_embedder("model-b", 3).unwrap_err();
    assert!(matches!(err, StoreError::OtherEmbedder { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("written by model-a, not model-b") && message.contains("strata reembed"), "{message}");
    // Re-embedding: the old vectors go, the binding moves, the turns stay.
    store.rebind_embedder("model-b", 2).unwrap();
    assert_eq!(store.embedder().unwrap(), Some(("model-b".to_string(), 2)));
    assert_eq!(store.whole_vectors("c").unwrap(), vec![Vec::<f32>::new()]);
    store.set_vectors("c", &[("t1", TurnVectors::whole(&[0.0, 1.0]))]).unwrap();
    assert_eq!(store.whole_vectors("c").unwrap().len(), 1);
    assert_eq!(store.turns("c").unwrap().len(), 1);
}

#[test]
fn a_store_from_before_embedders_were_recorded_binds_by_dimension() {
    let store = SqliteStore::in_memory().unwrap();
    store.append_with("c", &turn("t1", "alpha"), Some(TurnVectors::whole(&[1.0, 0.0, 0.0]))).unwrap();
    let err = store.bind_embedder("wide", 768).unwrap_err();
    assert!(err.to_string().contains("an unrecorded model of 3 dimensions, not wide (768 dimensions)"), "{err}");
    assert_eq!(store.embedder().unwrap(), None, "a refused binding records nothing");
    store.bind_embedder("narrow", 3).unwrap();
    assert_eq!(store.embedder().unwrap(), Some(("narrow".to_string(), 3)));
}

/// The indexes of at most `keep_indexes` conversations stay in memory; one dropped is rebuilt
/// from the stored rows and finds what it found before.
#[test]
fn search_indexes_are_kept_for_the_conversations_searched_last() {
    let store = SqliteStore::in_memory().unwrap();
    store.keep_indexes(2);
    let conversations = ["a", "b", "c", "d", "e"];
    for c in conversations {
        for i in 0..5 {
            store.append(c, &turn(&format!("t{i}"), &format!("{c} talks about topic{i} and more"))).unwrap();
        }
    }
    let found = |c: &str| ids(&store.search(c, &query("topic3", 3)).unwrap());
    let first: Vec<Vec<String>> = conversations.iter().map(|c| found(c)).collect();
    assert_eq!(store.indexes_held(), (0, 2), "only the words are indexed without vectors");
    for (c, before) in conversations.iter().zip(&first) {
        assert_eq!(&found(c), before, "conversation {c} after its index was dropped");
        assert!(before.contains(&"t3".to_string()), "{before:?}");
    }
    assert_eq!(store.indexes_held().1, 2);
}
