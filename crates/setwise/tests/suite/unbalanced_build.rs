//! A database built into its directory as it goes: killed part way, refused until
//! resumed, resumed with only the missing bundles computed, and answering exactly as the
//! plain computation, labels included. Here a kill is a panic in the build's progress
//! observer once bundles are being written, with the journal then cut to the records a
//! kill would have left; the CLI's test kills a real build with SIGKILL.

use crate::common::items;
use setwise::net::MemoryChannel;
use setwise::protocols::unbalanced::{BuildInto, SenderDb, UnbalancedParams};
use setwise::protocols::{PhaseObserver, Progress, Role};
use setwise::session::{self, Input};
use setwise::{Job, Operation, Outcome, Protocol};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const N: usize = 12000;

fn small() -> UnbalancedParams {
    setwise::testing::small_unbalanced_params()
}

fn labels() -> Vec<Vec<u8>> {
    (0..N).map(|i| format!("row {i} ✓").into_bytes()).collect()
}

fn build(dir: &Path, resume: bool, items: &[Vec<u8>], observer: Option<PhaseObserver>) -> setwise::Result<SenderDb> {
    let to = BuildInto { dir, resume, key_columns: 1, key_file: None };
    let labels = labels();
    SenderDb::build_into(to, items, Some((&labels, vec!["info".into()])), small(), "test", observer)
}

/// Bytes of a journal record (`db/journal.rs`).
const RECORD: u64 = 96;

/// A build into `dir` killed with `recorded` bundles in its journal: stopped by a panic
/// in its observer at the first bundle written (the bundles in flight are still written,
/// as rayon finishes a panicking job's siblings), then the journal cut to `recorded`
/// records. The other segments stay, named by no record, as a kill between a segment's
/// sync and its record leaves them.
fn killed_build(dir: &Path, recorded: u64) {
    // The journal's length when bundles begin: its header alone.
    let header = Arc::new(AtomicU64::new(0));
    let (seen, journal) = (header.clone(), dir.join("BUILD"));
    let observer: PhaseObserver = Arc::new(move |p| match p {
        Progress::Phase(name) if name.starts_with("interpolate") => {
            seen.store(std::fs::metadata(&journal).unwrap().len(), Ordering::SeqCst);
        }
        Progress::Work(w) if w.unit == "bundles" => panic!("killed after {} bundles", w.done),
        _ => {}
    });
    let sender = items("s", 0..N);
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| build(dir, false, &sender, Some(observer))));
    assert!(stopped.is_err(), "the build was not stopped");
    let (journal, keep) = (dir.join("BUILD"), header.load(Ordering::SeqCst) + recorded * RECORD);
    assert!(std::fs::metadata(&journal).unwrap().len() >= keep, "fewer than {recorded} records");
    std::fs::OpenOptions::new().write(true).open(&journal).unwrap().set_len(keep).unwrap();
}

/// The labelled answer of the database in `dir` to a probe, against the plain one.
fn answers_exactly(dir: &Path) {
    let db = SenderDb::load(dir).unwrap();
    let probe: Vec<Vec<u8>> = [items("s", 0..40), items("s", N - 40..N), items("n", 0..40)].concat();
    let job = Job::new(Protocol::Unbalanced, Operation::Intersection);
    let (mut a, mut b) = MemoryChannel::pair(64 << 20);
    let got = std::thread::scope(|s| {
        let t = s.spawn(|| session::run(&mut a, &job, Role::Sender, Input::<Vec<u8>>::Database(&db)));
        let r = session::run(&mut b, &job, Role::Receiver, Input::Items(&probe));
        drop(b);
        t.join().unwrap().unwrap();
        r.unwrap().0
    });
    let Outcome::Labelled { rows, .. } = got else { panic!("{got:?}") };
    let labels = labels();
    let want: Vec<(usize, Vec<u8>)> =
        (0..80).map(|i| (i, labels[if i < 40 { i } else { N - 80 + i }].clone())).collect();
    assert_eq!(rows, want);
}

/// The names of the files in `dir` that start with `prefix`.
fn files(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with(prefix))
        .collect();
    v.sort();
    v
}

#[test]
fn a_build_into_its_directory_answers_exactly_and_leaves_no_build_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = build(&path, false, &items("s", 0..N), None).unwrap();
    assert!(db.info().bundles >= 4, "too few bundles to test resumption: {}", db.info().bundles);
    assert_eq!((db.info().resumed_bundles, db.info().resumed.as_str()), (0, ""));
    assert_eq!(files(&path, "BUILD"), Vec::<String>::new());
    assert_eq!(files(&path, "seg-").len(), db.info().bundles);
    // What it returns is the saved database: to serve, it is loaded, and serving or
    // encoding it as it is says so rather than failing in the evaluation.
    let mut db = db;
    let e = db.prepare().unwrap_err().to_string();
    assert!(e.contains("load it to serve it"), "{e}");
    drop(db);
    answers_exactly(&path);
    // --resume with nothing to resume builds from the start, and says so.
    let db = build(&path, true, &items("s", 0..N), None).unwrap();
    assert!(db.info().resumed.contains("no unfinished build"), "{}", db.info().resumed);
    drop(db);
    answers_exactly(&path);
}

#[test]
fn a_killed_build_is_refused_until_resumed_and_then_computes_only_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    killed_build(&path, 2);
    assert!(files(&path, "BUILD").len() == 3 && files(&path, "MANIFEST").is_empty());
    let written = files(&path, "seg-").len();
    // Refused, naming --resume: to serve, to build again, to save another database there.
    for e in [
        SenderDb::load(&path).unwrap_err(),
        build(&path, false, &items("s", 0..N), None).unwrap_err(),
        SenderDb::build(&items("x", 0..10), small(), "test").unwrap().save(&path).unwrap_err(),
    ] {
        assert!(e.to_string().contains("--resume"), "{e}");
    }
    // Another input is refused: resuming it would mix two databases.
    let e = build(&path, true, &items("t", 0..N), None).unwrap_err().to_string();
    assert!(e.contains("another input"), "{e}");
    assert_eq!(files(&path, "seg-").len(), written, "a refused resume wrote nothing");
    // Resumed: every bundle written before the kill is reused, the OPRF is not run again.
    let db = build(&path, true, &items("s", 0..N), None).unwrap();
    let (reused, total) = (db.info().resumed_bundles, db.info().bundles);
    assert!(reused == 2 && total > 2, "reused {reused} of {total}");
    assert!(db.info().resumed.starts_with("reused the OPRF results and"), "{}", db.info().resumed);
    drop(db);
    assert_eq!(files(&path, "BUILD"), Vec::<String>::new());
    assert_eq!(files(&path, "seg-").len(), total, "a segment no manifest names was left");
    answers_exactly(&path);
}

#[test]
fn a_resumed_build_recomputes_what_does_not_check() {
    // Damaged segments: their bundles are computed again.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    killed_build(&path, 3);
    for seg in files(&path, "seg-") {
        let mut bytes = std::fs::read(path.join(&seg)).unwrap();
        bytes[100] ^= 1;
        std::fs::write(path.join(&seg), bytes).unwrap();
    }
    let db = build(&path, true, &items("s", 0..N), None).unwrap();
    assert_eq!(db.info().resumed_bundles, 0, "a damaged segment was reused");
    drop(db);
    answers_exactly(&path);

    // A journal cut in the middle of a record: the cut record's bundle is computed again.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    killed_build(&path, 3);
    let journal = path.join("BUILD");
    let len = std::fs::metadata(&journal).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&journal).unwrap().set_len(len - 7).unwrap();
    let db = build(&path, true, &items("s", 0..N), None).unwrap();
    assert!(db.info().resumed.contains("cut short"), "{}", db.info().resumed);
    drop(db);
    answers_exactly(&path);

    // Damaged OPRF results: the OPRF runs again and, since labels are sealed anew, every
    // bundle is computed again.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    killed_build(&path, 2);
    let spilled = path.join("BUILD-ITEMS");
    let mut bytes = std::fs::read(&spilled).unwrap();
    bytes[64] ^= 1;
    std::fs::write(&spilled, bytes).unwrap();
    let db = build(&path, true, &items("s", 0..N), None).unwrap();
    assert_eq!(db.info().resumed_bundles, 0);
    assert!(db.info().resumed.starts_with("reused 0 of"), "{}", db.info().resumed);
    drop(db);
    answers_exactly(&path);

    // A damaged journal header: built from the start, saying why.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    killed_build(&path, 2);
    let mut bytes = std::fs::read(path.join("BUILD")).unwrap();
    bytes[30] ^= 1;
    std::fs::write(path.join("BUILD"), bytes).unwrap();
    let db = build(&path, true, &items("s", 0..N), None).unwrap();
    assert!(db.info().resumed.contains("built from the start"), "{}", db.info().resumed);
    assert_eq!(files(&path, "seg-").len(), db.info().bundles);
    drop(db);
    answers_exactly(&path);
}

#[test]
fn a_build_over_a_database_leaves_it_whole_until_the_build_is_done() {
    use setwise::protocols::unbalanced::db::Open;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    build(&path, false, &items("s", 0..N), None).unwrap();
    let old_key = std::fs::read(path.join("KEY")).unwrap();
    // A killed rebuild over it: the old database still loads and answers, but is not
    // updated (the update's save would delete the rebuild's segments).
    killed_build(&path, 2);
    answers_exactly(&path);
    let e = SenderDb::open(&path, Open::Update, None).unwrap_err().to_string();
    assert!(e.contains("--resume"), "{e}");
    let (journal, build_key) =
        (std::fs::read(path.join("BUILD")).unwrap(), std::fs::read(path.join("BUILD-KEY")).unwrap());
    // Resumed, it replaces the old one and deletes its segments.
    let db = build(&path, true, &items("s", 0..N), None).unwrap();
    assert_eq!(files(&path, "seg-").len(), db.info().bundles);
    drop(db);
    answers_exactly(&path);
    // Stopped after the manifest's rename but before its key and the end: the old KEY
    // beside the new manifest, the build's files still there. A load finds the key in
    // BUILD-KEY; a resume writes KEY and deletes the build's files.
    std::fs::write(path.join("KEY"), &old_key).unwrap();
    std::fs::write(path.join("BUILD-KEY"), &build_key).unwrap();
    std::fs::write(path.join("BUILD"), &journal).unwrap();
    answers_exactly(&path);
    let db = build(&path, true, &items("s", 0..N), None).unwrap();
    assert!(db.info().resumed.contains("the build had finished"), "{}", db.info().resumed);
    drop(db);
    assert_eq!(files(&path, "BUILD"), Vec::<String>::new());
    assert_ne!(std::fs::read(path.join("KEY")).unwrap(), old_key);
    answers_exactly(&path);
}
