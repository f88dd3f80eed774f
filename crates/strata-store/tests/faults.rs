//! Faults under the store: a disk that fills while turns are appended, a store file that is
//! read-only, truncated, or has bytes flipped. Each must give a clear error naming the file,
//! keep every acknowledged turn, read back nothing half-written, and never reset the store.
//! The small-disk tests mount a tmpfs of their own (root only): `#[ignore]`d, run by CI as
//! `cargo test --release --workspace --tests disk_ -- --ignored`.

use std::path::Path;

use strata_core::{RecallQuery, Role, Turn};
use strata_store::testing::SmallDisk;
use strata_store::{SqliteStore, Store};

/// A turn of about 2 KB whose words say which it is, so that a torn one would show.
fn turn(i: usize) -> Turn {
    let words: String = (0..150).map(|k| format!("w{i}x{k} ")).collect();
    Turn::new(format!("t{i}"), if i.is_multiple_of(2) { Role::User } else { Role::Assistant }, words)
}

fn contents(store: &SqliteStore) -> Vec<(String, String)> {
    store.turns("c").unwrap().into_iter().map(|t| (t.id, t.content)).collect()
}

/// Appends until the disk is full; returns the acknowledged turns and the error.
fn fill(store: &SqliteStore) -> (Vec<(String, String)>, strata_core::StoreError) {
    let mut acknowledged = Vec::new();
    for i in 0..100_000 {
        let t = turn(i);
        match store.append("c", &t) {
            Ok(()) => acknowledged.push((t.id, t.content)),
            Err(e) => return (acknowledged, e),
        }
    }
    panic!("the disk never filled");
}

#[test]
#[ignore = "mounts a tmpfs: needs root (CI runs it)"]
fn disk_full_fails_the_append_keeps_what_was_acknowledged_and_recovers() {
    let disk = SmallDisk::mount(2 << 20).unwrap();
    let path = disk.path().join("s.db");
    let store = SqliteStore::open(&path).unwrap();
    let (acknowledged, e) = fill(&store);
    assert!(acknowledged.len() > 20, "only {} turns fit", acknowledged.len());
    assert!(e.is_transient(), "not a full disk: {e}");
    assert!(!e.is_bad_input());
    let message = e.to_string();
    assert!(message.contains("s.db") && message.contains("disk is full"), "{message}");

    // Every acknowledged turn is read back whole, and nothing of the failed one.
    assert_eq!(contents(&store), acknowledged);
    let failed = turn(acknowledged.len());
    let hits =
        store.search("c", &RecallQuery { text: failed.content.clone(), k: 5, embedding: None, time_range: None });
    assert!(hits.unwrap().iter().all(|h| h.turn.id != failed.id), "the failed turn is searchable");
    // Still full: the same append fails the same way, and changes nothing.
    assert!(store.append("c", &failed).unwrap_err().is_transient());
    assert_eq!(contents(&store), acknowledged);

    // Space returns: the same handle appends again, and a reopened store has it all.
    disk.resize(16 << 20).unwrap();
    store.append("c", &failed).unwrap();
    let mut all = acknowledged.clone();
    all.push((failed.id.clone(), failed.content.clone()));
    assert_eq!(contents(&store), all);
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(contents(&store), all);
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
#[ignore = "mounts a tmpfs: needs root (CI runs it)"]
fn disk_full_at_open_is_a_clear_error_and_the_store_is_kept() {
    let disk = SmallDisk::mount(2 << 20).unwrap();
    let path = disk.path().join("s.db");
    let acknowledged = {
        let store = SqliteStore::open(&path).unwrap();
        fill(&store).0
    };
    // Fill what is left with another file, so the store has no room to reopen in.
    let filler = disk.path().join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 1 << 20]);
    match SqliteStore::open(&path) {
        Ok(store) => assert_eq!(contents(&store), acknowledged),
        Err(e) => assert!(e.to_string().contains("s.db"), "{e}"),
    }
    std::fs::remove_file(&filler).unwrap();
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(contents(&store), acknowledged);
}

#[test]
#[ignore = "mounts a tmpfs: needs root (CI runs it)"]
fn disk_read_only_is_refused_naming_the_file_and_left_as_it_was() {
    let disk = SmallDisk::mount(4 << 20).unwrap();
    let path = disk.path().join("s.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        for i in 0..10 {
            store.append("c", &turn(i)).unwrap();
        }
    }
    let before = std::fs::read(&path).unwrap();
    disk.set_writable(false).unwrap();
    let e = SqliteStore::open(&path).unwrap_err();
    assert!(e.to_string().contains("s.db") && e.to_string().contains("cannot be written"), "{e}");
    assert!(e.is_bad_input(), "a read-only store is the user's to fix: {e}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    disk.set_writable(true).unwrap();
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.len("c").unwrap(), 10);
}

/// A store of `n` turns, closed, as its bytes.
fn written(path: &Path, n: usize) -> Vec<u8> {
    {
        let store = SqliteStore::open(path).unwrap();
        for i in 0..n {
            store.append("c", &turn(i)).unwrap();
        }
    }
    std::fs::read(path).unwrap()
}

#[test]
fn a_truncated_store_is_refused_naming_the_file_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.db");
    let whole = written(&path, 200);
    for keep in [whole.len() / 2, whole.len() - 4096, 4096 + 100] {
        std::fs::write(&path, &whole[..keep]).unwrap();
        let e = SqliteStore::open(&path).unwrap_err();
        assert!(e.to_string().contains("cut.db"), "cut to {keep} bytes: {e}");
        assert!(e.is_bad_input(), "cut to {keep} bytes: {e}");
        assert_eq!(std::fs::read(&path).unwrap(), &whole[..keep], "cut to {keep} bytes: the file changed");
    }
}

/// Bytes flipped in a b-tree page (not only overwritten, as the store's unit test does) are
/// found when the store opens, wherever they fall among the pages that hold the tables.
#[test]
fn flipped_bytes_in_any_page_are_found_or_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flip.db");
    let whole = written(&path, 120);
    let pages = whole.len() / 4096;
    let (mut refused, mut opened) = (0, 0);
    for page in 1..pages {
        let mut data = whole.clone();
        // Flip the page's header bytes: its type, free-block pointer and cell count.
        for b in &mut data[page * 4096..page * 4096 + 8] {
            *b ^= 0xa5;
        }
        std::fs::write(&path, &data).unwrap();
        match SqliteStore::open(&path) {
            Err(e) => {
                assert!(e.to_string().contains("flip.db"), "page {page}: {e}");
                assert_eq!(std::fs::read(&path).unwrap(), data, "page {page}: the file changed");
                refused += 1;
            }
            // A page no table uses (a free page) may hold anything; what is read back must
            // then be every turn, unchanged.
            Ok(store) => {
                let back: Vec<String> = store.turns("c").unwrap().into_iter().map(|t| t.content).collect();
                assert_eq!(back, (0..120).map(|i| turn(i).content).collect::<Vec<_>>(), "page {page}");
                opened += 1;
            }
        }
    }
    assert!(refused > pages / 2, "{refused} of {pages} damaged pages refused, {opened} opened");
}
