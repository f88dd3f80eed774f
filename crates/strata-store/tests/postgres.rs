//! `PgStore` against a real PostgreSQL server: `STRATA_PG` names it (`.ci/run` starts one from
//! Debian's packages). Each test works in a database of its own.

#![cfg(feature = "postgres")]

use std::sync::atomic::{AtomicUsize, Ordering};

use strata_core::{RecallQuery, Role, StoreError, Timestamp, Turn};
use strata_store::{PgStore, Store, TurnVectors, PG_SCHEMA_VERSION};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Connection parameters of a fresh, empty database on the test server.
fn fresh_database() -> String {
    let admin = std::env::var("STRATA_PG").expect(
        "STRATA_PG must name a PostgreSQL server (e.g. `host=/tmp/pg port=55432 user=postgres`); .ci/run starts one",
    );
    let name = format!("strata_test_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
    let mut client = postgres::Client::connect(&admin, postgres::NoTls).expect("connecting to STRATA_PG");
    // One statement per call: a multi-statement batch runs as one transaction, which DROP and
    // CREATE DATABASE refuse.
    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).expect("dropping an old test database");
    client.batch_execute(&format!("CREATE DATABASE {name}")).expect("creating the test database");
    format!("{admin} dbname={name}")
}

fn turn(id: &str, content: &str) -> Turn {
    Turn::new(id, Role::User, content)
}

fn ids(hits: &[strata_core::Hit]) -> Vec<String> {
    hits.iter().map(|h| h.turn.id.clone()).collect()
}

#[test]
#[ignore = "needs a PostgreSQL server named by STRATA_PG; .ci/run runs it with --ignored"]
fn turns_round_trip_and_ids_are_unique_per_conversation() {
    let db = fresh_database();
    let mut t = turn("t1", "naïve café ☕ \"quoted\"\nnew line");
    t.speaker = Some("Ana".into());
    t.timestamp = Some(Timestamp(1_683_504_000));
    let turns = vec![t, turn("t2", "second"), Turn::new("t3", Role::Assistant, "third")];
    {
        let store = PgStore::connect(&db).unwrap();
        for t in &turns {
            store.append("c", t).unwrap();
        }
        assert!(matches!(store.append("c", &turn("t1", "again")), Err(StoreError::Invalid { .. })));
        store.append("d", &turn("t1", "another conversation's t1")).unwrap();
    }
    let store = PgStore::connect(&db).unwrap();
    assert_eq!(store.turns("c").unwrap(), turns);
    assert_eq!(store.conversations().unwrap(), ["c", "d"]);
}

#[test]
#[ignore = "needs a PostgreSQL server named by STRATA_PG; .ci/run runs it with --ignored"]
fn hybrid_search_is_scoped_ranked_and_filtered_by_time() {
    let db = fresh_database();
    let store = PgStore::connect(&db).unwrap();
    let v = |x: f32, y: f32| vec![x, y, 0.0];
    let add = |conv: &str, id: &str, text: &str, vec: Vec<f32>, ts: i64| {
        let mut t = turn(id, text);
        t.timestamp = Some(Timestamp(ts));
        store.append_with(conv, &t, Some(TurnVectors::whole(&vec))).unwrap();
    };
    add("c", "t1", "the zebra crossing near the station", v(0.0, 1.0), 100);
    add("c", "t2", "pedestrian stripes", v(1.0, 0.0), 200);
    add("c", "t3", "zebras have stripes", v(0.9, 0.1), 300);
    add("other", "o1", "zebra zebra zebra stripes", v(1.0, 0.0), 150);
    let mut q = RecallQuery { text: "zebra".into(), k: 2, embedding: Some(v(1.0, 0.0)), time_range: None };
    let hits = store.search("c", &q).unwrap();
    assert_eq!(ids(&hits), ["t3", "t1"], "stemmed words and meaning agree on t3");
    q.time_range = Some((Timestamp(150), Timestamp(250)));
    assert_eq!(ids(&store.search("c", &q).unwrap()), ["t2"]);
    assert_eq!(ids(&store.search("other", &RecallQuery { time_range: None, ..q.clone() }).unwrap()), ["o1"]);
    q.embedding = Some(vec![1.0; 5]);
    q.time_range = None;
    assert!(matches!(store.search("c", &q), Err(StoreError::Invalid { .. })));
    // A turn is also found by its best sentence: its whole text at cosine 0.5 to the query and
    // one sentence on it score 0.75, between t3 (0.99) and t1 (0).
    let mut t = turn("t4", "qqq");
    t.timestamp = Some(Timestamp(400));
    store.append_with("c", &t, Some(TurnVectors { whole: &v(0.5, 0.866), sentences: &[v(1.0, 0.0)] })).unwrap();
    let dense = RecallQuery { text: String::new(), k: 4, embedding: Some(v(1.0, 0.0)), time_range: None };
    assert_eq!(ids(&store.search("c", &dense).unwrap()), ["t2", "t3", "t4", "t1"]);
    // Query syntax is only ever text.
    let odd = RecallQuery { text: "a & b | !c ' :* ()".into(), k: 5, embedding: None, time_range: None };
    assert!(store.search("c", &odd).is_ok());
}

#[test]
#[ignore = "needs a PostgreSQL server named by STRATA_PG; .ci/run runs it with --ignored"]
fn concurrent_servers_migrate_once_and_never_see_each_others_turns() {
    let db = fresh_database();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                // Four servers starting at once on an empty database.
                let store = PgStore::connect(&db).unwrap();
                let conv = format!("conv{w}");
                for i in 0..50 {
                    let t = turn(&format!("{conv}-t{i}"), &format!("shared words about the budget {i}"));
                    store.append_with(&conv, &t, Some(TurnVectors::whole(&[1.0, w as f32, 0.5]))).unwrap();
                    if i % 10 == 9 {
                        let q = RecallQuery {
                            text: "shared budget".into(),
                            k: 100,
                            embedding: Some(vec![1.0, 0.0, 0.0]),
                            time_range: None,
                        };
                        let hits = store.search(&conv, &q).unwrap();
                        assert_eq!(hits.len(), i + 1);
                        assert!(hits.iter().all(|h| h.turn.id.starts_with(&format!("{conv}-"))));
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let store = PgStore::connect(&db).unwrap();
    for w in 0..4 {
        let turns = store.turns(&format!("conv{w}")).unwrap();
        assert_eq!(turns.len(), 50);
        assert!(turns.iter().enumerate().all(|(i, t)| t.id == format!("conv{w}-t{i}")));
    }
}

#[test]
#[ignore = "needs a PostgreSQL server named by STRATA_PG; .ci/run runs it with --ignored"]
fn a_newer_schema_is_refused() {
    let db = fresh_database();
    PgStore::connect(&db).unwrap().append("c", &turn("t1", "x")).unwrap();
    let mut client = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    client.execute("UPDATE strata_schema SET version = $1", &[&(PG_SCHEMA_VERSION + 1)]).unwrap();
    let err = PgStore::connect(&db).unwrap_err();
    assert!(matches!(err, StoreError::NewerSchema { .. }), "{err}");
    assert!(err.to_string().contains("upgrade strata"), "{err}");
    // Nothing was changed.
    let v: i32 = client.query_one("SELECT version FROM strata_schema", &[]).unwrap().get(0);
    assert_eq!(v, PG_SCHEMA_VERSION + 1);
}

#[test]
#[ignore = "needs a PostgreSQL server named by STRATA_PG; .ci/run runs it with --ignored"]
fn vectors_set_after_the_turn_are_searched_and_a_bad_batch_writes_nothing() {
    let db = fresh_database();
    let store = PgStore::connect(&db).unwrap();
    store.append("c", &turn("t1", "alpha")).unwrap();
    store.append("c", &turn("t2", "beta")).unwrap();
    store.append("d", &turn("t1", "gamma")).unwrap();
    let query = |v: [f32; 2]| RecallQuery { text: String::new(), k: 1, embedding: Some(v.to_vec()), time_range: None };
    assert!(store.search("c", &query([0.0, 1.0])).unwrap().is_empty());
    let whole = [[1.0f32, 0.0], [0.0, 1.0]];
    store.set_vectors("c", &[("t1", TurnVectors::whole(&whole[0])), ("t2", TurnVectors::whole(&whole[1]))]).unwrap();
    assert_eq!(ids(&store.search("c", &query([0.0, 1.0])).unwrap()), ["t2"]);
    assert_eq!(store.whole_vectors("c").unwrap().iter().filter(|v| !v.is_empty()).count(), 2);
    // Another conversation's turn of the same id is untouched.
    assert_eq!(store.whole_vectors("d").unwrap(), vec![Vec::<f32>::new()]);
    // A batch naming a turn the conversation lacks writes nothing, not even the turns before it.
    let err = store
        .set_vectors("c", &[("t1", TurnVectors::whole(&whole[1])), ("nope", TurnVectors::whole(&whole[0]))])
        .unwrap_err();
    assert!(err.to_string().contains("no stored turn nope"), "{err}");
    assert_eq!(ids(&store.search("c", &query([1.0, 0.0])).unwrap()), ["t1"]);
}

/// A read never waits on an append under way: with another session holding the turns table
/// against writers, an append blocks (holding the store's writing connection) and every read
/// still returns what was committed.
#[test]
#[ignore = "needs a PostgreSQL server named by STRATA_PG; .ci/run runs it with --ignored"]
fn reads_never_wait_on_an_append_under_way() {
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    let db = fresh_database();
    let store = Arc::new(PgStore::connect(&db).unwrap());
    store.append("c", &turn("t1", "the kayak trip is in June")).unwrap();
    let mut other = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let mut lock = other.transaction().unwrap();
    lock.batch_execute("LOCK TABLE strata_turns IN EXCLUSIVE MODE").unwrap();
    let appending = store.clone();
    let append = std::thread::spawn(move || appending.append("c", &turn("t2", "we booked kayaks")));
    // Let the append reach the lock; were it later, the reads below would pass without
    // testing anything, never fail wrongly.
    std::thread::sleep(Duration::from_millis(300));
    let (send, receive) = mpsc::channel();
    let reading = store.clone();
    std::thread::spawn(move || {
        let q = RecallQuery { text: "kayak".into(), k: 5, embedding: None, time_range: None };
        let read = (ids(&reading.search("c", &q).unwrap()), reading.turns("c").unwrap().len(), reading.len("c"));
        send.send(read).unwrap();
    });
    let (found, turns, len) = receive.recv_timeout(Duration::from_secs(5)).expect("the reads wait on the append");
    assert_eq!((found, turns, len.unwrap()), (vec!["t1".to_string()], 1, 1));
    assert!(!append.is_finished(), "the append waits on the lock");
    lock.rollback().unwrap();
    append.join().unwrap().unwrap();
    assert_eq!(store.len("c").unwrap(), 2);
}
