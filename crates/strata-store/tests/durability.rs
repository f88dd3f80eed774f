//! Crash and isolation tests: a writer killed with SIGKILL at random points loses no
//! acknowledged turn, and concurrent writers never see each other's conversations.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strata_core::{RecallQuery, Role, Turn};
use strata_store::{SqliteStore, Store, TurnVectors};

const CONVERSATION: &str = "crash";

/// The content of the `i`-th turn: deterministic, of varying length, not only ASCII, so a torn
/// write would show.
fn content(i: u64) -> String {
    let mut s = format!("turn {i}: ");
    for k in 0..(i * 7919 % 97) {
        s.push_str(["deploy ", "ü ", "→ ", "line\n", "42 "][(k % 5) as usize]);
    }
    s
}

fn make_turn(i: u64) -> Turn {
    Turn::new(format!("t{i}"), if i.is_multiple_of(2) { Role::User } else { Role::Assistant }, content(i))
}

/// Runs only as the child of `acknowledged_turns_survive_sigkill`: appends turns forever,
/// writing `ack N` after each append returns.
#[test]
#[ignore = "run by acknowledged_turns_survive_sigkill as its child process"]
fn durability_child() {
    let Some(path) = std::env::var_os("STRATA_DURABILITY_DB") else { return };
    let store = SqliteStore::open(std::path::Path::new(&path)).expect("open");
    let mut next = store.len(CONVERSATION).expect("len");
    let mut out = std::io::stdout().lock();
    loop {
        store.append(CONVERSATION, &make_turn(next)).expect("append");
        writeln!(out, "ack {next}").expect("stdout");
        out.flush().expect("flush");
        next += 1;
    }
}

/// SplitMix64: the kill points are random but the same in every run.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn acknowledged_turns_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let exe = std::env::current_exe().unwrap();
    let mut rng = 0x5EED_u64;
    let mut acked_total = 0u64;
    for round in 0..100 {
        let mut child = Command::new(&exe)
            .args(["durability_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .env("STRATA_DURABILITY_DB", &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let acked = Arc::new(Mutex::new(Vec::<u64>::new()));
        let reader = {
            let acked = acked.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(n) = line.strip_prefix("ack ") {
                        acked.lock().unwrap().push(n.parse().unwrap());
                    }
                }
            })
        };
        // Anywhere from before the store is open (the first rounds create and migrate it) to
        // well into a run of appends.
        std::thread::sleep(Duration::from_micros(splitmix(&mut rng) % 40_000));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        reader.join().unwrap();
        let acked = acked.lock().unwrap().clone();
        acked_total += acked.len() as u64;

        let store = SqliteStore::open(&path).unwrap_or_else(|e| panic!("round {round}: reopening: {e}"));
        let stored = store.turns(CONVERSATION).unwrap();
        for &i in &acked {
            let turn = stored.get(i as usize).unwrap_or_else(|| panic!("round {round}: acknowledged turn t{i} lost"));
            assert_eq!(turn, &make_turn(i), "round {round}: turn t{i} differs");
            assert_eq!(turn.content.as_bytes(), content(i).as_bytes());
        }
        // Whatever was stored beyond the acknowledgements is whole as well.
        for (i, turn) in stored.iter().enumerate() {
            assert_eq!(turn, &make_turn(i as u64), "round {round}: position {i}");
        }
        assert_eq!(store.integrity_check().unwrap(), "ok", "round {round}");
    }
    // The kill points must land among appends, not only before the first one.
    assert!(acked_total > 100, "only {acked_total} turns acknowledged across 100 rounds");
}

#[test]
fn concurrent_writers_never_see_each_others_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("shared.db"));
    SqliteStore::open(&path).unwrap();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                // Each writer its own connection, as separate processes would have.
                let store = SqliteStore::open(&path).unwrap();
                let conv = format!("conv{w}");
                for i in 0..100 {
                    let mut t =
                        Turn::new(format!("{conv}-t{i}"), Role::User, format!("shared words about the budget {i}"));
                    t.speaker = Some(format!("writer{w}"));
                    let v = [1.0, w as f32, i as f32 / 100.0];
                    store.append_with(&conv, &t, Some(TurnVectors::whole(&v))).unwrap();
                    if i % 10 == 9 {
                        let q = RecallQuery {
                            text: "shared budget writer0 writer1 writer2 writer3".into(),
                            k: 50,
                            embedding: Some(vec![1.0, 0.0, 0.0]),
                            time_range: None,
                        };
                        let hits = store.search(&conv, &q).unwrap();
                        assert_eq!(hits.len(), (i + 1).min(50));
                        for h in hits {
                            assert!(h.turn.id.starts_with(&format!("{conv}-")), "{conv} got {}", h.turn.id);
                        }
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    for w in 0..4 {
        let turns = store.turns(&format!("conv{w}")).unwrap();
        assert_eq!(turns.len(), 100);
        assert!(turns.iter().enumerate().all(|(i, t)| t.id == format!("conv{w}-t{i}")));
    }
    assert_eq!(store.integrity_check().unwrap(), "ok");
}
