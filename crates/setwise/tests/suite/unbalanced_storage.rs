//! The unbalanced database on disk under hostile conditions: who may read it, two
//! updates at once, an update while serving, a manifest that lies.

use crate::common::items;
use setwise::net::MemoryChannel;
use setwise::protocols::Role;
use setwise::protocols::unbalanced::{SenderDb, UnbalancedParams};
use setwise::session::{self, Input};
use setwise::{Error, Job, Operation, Outcome, Protocol};
use std::collections::BTreeSet;
use std::path::Path;

fn small() -> UnbalancedParams {
    setwise::testing::small_unbalanced_params()
}

/// The receiver's matching indices for `receiver` against `db`.
fn query(db: &SenderDb, receiver: &[Vec<u8>]) -> BTreeSet<usize> {
    try_query(db, receiver).unwrap()
}

/// [`query`], or the sender's error.
fn try_query(db: &SenderDb, receiver: &[Vec<u8>]) -> Result<BTreeSet<usize>, Error> {
    let job = Job::new(Protocol::Unbalanced, Operation::Intersection);
    let (mut a, mut b) = MemoryChannel::pair(64 << 20);
    let (sent, r) = std::thread::scope(|s| {
        let t = s.spawn(|| session::run(&mut a, &job, Role::Sender, Input::<Vec<u8>>::Database(db)));
        let r = session::run(&mut b, &job, Role::Receiver, Input::Items(receiver));
        drop(b);
        (t.join().unwrap(), r)
    });
    sent?;
    Ok(match r.unwrap().0 {
        Outcome::Intersection(v) => v.into_iter().collect(),
        Outcome::Labelled { rows, .. } => rows.into_iter().map(|(i, _)| i).collect(),
        other => panic!("{other:?}"),
    })
}

/// The encoded copies in a database directory.
fn copies(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("ROWS-"))
        .collect();
    v.sort();
    v
}

/// A database saved with enough items for several bundles, and a probe of 100 items
/// whose first 60 are the database's (the plain intersection).
fn several_bundles(path: &Path) -> (Vec<Vec<u8>>, BTreeSet<usize>) {
    SenderDb::build(&items("s", 0..6000), small(), "test").unwrap().save(path).unwrap();
    let probe: Vec<Vec<u8>> = [items("s", 0..30), items("s", 5970..6000), items("n", 0..40)].concat();
    (probe, (0..60).collect())
}

/// Plaintexts that do not fit in the memory given are served from an encoded copy on
/// disk, with the same answers: written by the first load that needs it, reused by the
/// next (not rewritten), used by a load with memory to spare too, and deleted by a save
/// (its manifest is another).
#[test]
fn what_does_not_fit_in_memory_is_served_from_an_encoded_copy_on_disk() {
    use setwise::protocols::unbalanced::db::Open;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let (probe, want) = several_bundles(&path);
    let all = SenderDb::load(&path).unwrap();
    let (bundles, bytes) = (all.info().bundles, all.info().plaintext_bytes);
    assert!(bundles >= 3, "{bundles} bundles");
    assert_eq!(all.info().on_disk_bytes, 0);
    assert!(copies(&path).is_empty(), "nothing written when everything fits");
    assert_eq!(query(&all, &probe), want);
    let per_bundle = bytes / bundles;
    let part = SenderDb::open(&path, Open::ServeWithin(per_bundle), None).unwrap();
    assert_eq!(part.info().on_disk_bytes, per_bundle * (bundles - 1));
    assert_eq!(query(&part, &probe), want);
    let copy = copies(&path);
    assert_eq!(copy.len(), 1);
    let written = std::fs::metadata(&copy[0]).unwrap().modified().unwrap();
    let none = SenderDb::open(&path, Open::ServeWithin(0), None).unwrap();
    assert!(none.info().encoded_copy.ends_with("(reused)"), "{}", none.info().encoded_copy);
    assert_eq!(none.info().on_disk_bytes, bytes);
    assert_eq!(query(&none, &probe), want);
    let reused = SenderDb::load(&path).unwrap();
    assert!(reused.info().encoded_copy.ends_with("(reused)"), "{}", reused.info().encoded_copy);
    assert_eq!(reused.info().on_disk_bytes, 0);
    assert_eq!(query(&reused, &probe), want);
    assert_eq!(copies(&path), copy);
    assert_eq!(std::fs::metadata(&copy[0]).unwrap().modified().unwrap(), written, "reused, not rewritten");
    // A served database updated in place answers the update: its changed bundles are
    // encoded anew, not read from the copy.
    let mut served = SenderDb::open(&path, Open::ServeWithin(per_bundle), None).unwrap();
    served.insert(&items("n", 0..10), None).unwrap();
    served.remove(&items("s", 0..5)).unwrap();
    assert_eq!(query(&served, &probe), (5..70).collect());
    // A save makes a new manifest: the copy goes; a server reading it keeps its open file.
    served.save(&path).unwrap();
    assert!(copies(&path).is_empty());
    assert_eq!(query(&none, &probe), want, "the old version still answers");
    assert_eq!(query(&served, &probe), (5..70).collect());
    let updated = SenderDb::open(&path, Open::ServeWithin(per_bundle), None).unwrap();
    assert_eq!(query(&updated, &probe), (5..70).collect());
}

/// A copy changed under a running server fails that query by name, even where every
/// word stays below its modulus, and never overflows a sum; a load that finds a damaged
/// or cut copy replaces it (it is derived data) and says so; a load deletes copies of
/// other manifests and what dead writers left, but not a copy being written.
#[cfg(unix)]
#[test]
fn a_damaged_encoded_copy_fails_its_query_and_is_replaced_by_the_next_load() {
    use setwise::protocols::unbalanced::db::Open;
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let (probe, want) = several_bundles(&path);
    let served = SenderDb::open(&path, Open::ServeWithin(0), None).unwrap();
    assert!(served.info().encoded_copy.ends_with("(written)"), "{}", served.info().encoded_copy);
    let copy = copies(&path).remove(0);
    let name = copy.file_name().unwrap().to_string_lossy().into_owned();
    let len = std::fs::metadata(&copy).unwrap().len();
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&copy).unwrap();
    let word = |at: u64| {
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, at).unwrap();
        b
    };
    // Two words of the last bundle swapped: each still below its modulus.
    let (a, b) = (len - 8, (1..).map(|k| len - 8 * k).find(|&at| word(at) != word(len - 8)).unwrap());
    let (wa, wb) = (word(a), word(b));
    f.write_all_at(&wb, a).unwrap();
    f.write_all_at(&wa, b).unwrap();
    let e = try_query(&served, &probe).unwrap_err().to_string();
    assert!(e.contains(&name) && e.contains("checksum mismatch") && e.contains("changed after it was loaded"), "{e}");
    // A word above every modulus: the same, and no sum overflows.
    f.write_all_at(&[0xff; 8], a).unwrap();
    assert!(try_query(&served, &probe).unwrap_err().to_string().contains(&name));
    // The next load replaces it, saying why; so for a copy cut short.
    for cut in [false, true] {
        if cut {
            std::fs::OpenOptions::new().write(true).open(&copy).unwrap().set_len(len - 8).unwrap();
        }
        let again = SenderDb::open(&path, Open::ServeWithin(0), None).unwrap();
        let note = &again.info().encoded_copy;
        assert!(note.contains("written, replacing a copy that did not check"), "{note}");
        assert!(note.contains(if cut { "bytes where" } else { "checksum mismatch" }), "{note}");
        assert_eq!(query(&again, &probe), want);
    }
    drop(f);
    // Where everything fits, a copy that does not check is deleted, and the load says so.
    std::fs::write(&copy, b"not a copy").unwrap();
    let held = SenderDb::load(&path).unwrap();
    let note = &held.info().encoded_copy;
    assert!(note.contains("deleted a copy that did not check") && note.contains("everything fits"), "{note}");
    assert!(!copy.exists());
    assert_eq!(query(&held, &probe), want);
    SenderDb::open(&path, Open::ServeWithin(0), None).unwrap();
    // Another manifest's copy and a dead writer's temporary file go; a live writer's stays.
    let (stale, dead, live, fresh) = (
        path.join("ROWS-0000000000000000-l0"),
        path.join("ROWS-1-l0.00.tmp"),
        path.join("ROWS-2-l0.00.tmp"),
        path.join("ROWS-3-l0.00.new"),
    );
    for p in [&stale, &dead, &live, &fresh] {
        std::fs::write(p, b"partial").unwrap();
    }
    let writer = std::fs::File::open(&live).unwrap();
    writer.lock().unwrap();
    let reused = SenderDb::load(&path).unwrap();
    assert!(reused.info().encoded_copy.ends_with("(reused)"), "{}", reused.info().encoded_copy);
    assert!(!stale.exists() && !dead.exists() && live.exists() && fresh.exists());
    assert_eq!(query(&reused, &probe), want);
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// The directory is its owner's only: 0700, every file 0600.
#[cfg(unix)]
#[test]
fn only_the_owner_can_read_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let mut db = SenderDb::build(&items("s", 0..500), small(), "test").unwrap();
    db.save(&path).unwrap();
    assert_eq!(mode(&path), 0o700);
    for entry in std::fs::read_dir(&path).unwrap() {
        let p = entry.unwrap().path();
        assert_eq!(mode(&p), 0o600, "{}", p.display());
    }
}

/// Two updates at once: each sees the other's result, and the database stays whole.
#[test]
fn concurrent_updates_are_serialised() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let base = items("s", 0..800);
    SenderDb::build(&base, small(), "test").unwrap().save(&path).unwrap();
    let (a, b) = (items("a", 0..40), items("b", 0..40));
    std::thread::scope(|s| {
        for new in [&a, &b] {
            let path = &path;
            s.spawn(move || {
                let mut db = SenderDb::load_for_update(path).unwrap();
                db.insert(new, None).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(50));
                db.save(path).unwrap();
            });
        }
    });
    let db = SenderDb::load(&path).unwrap();
    assert_eq!(db.info().sender_size, 880, "both inserts are in");
    let probe: Vec<Vec<u8>> = [items("a", 0..40), items("b", 0..40), items("s", 0..20)].concat();
    assert_eq!(query(&db, &probe), (0..100).collect());
}

/// A sender serving a loaded database keeps answering from that version while an
/// update of the directory runs; a new load sees the update.
#[test]
fn serving_goes_on_during_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    SenderDb::build(&items("s", 0..600), small(), "test").unwrap().save(&path).unwrap();
    let served = SenderDb::load(&path).unwrap();
    let probe: Vec<Vec<u8>> = [items("s", 590..600), items("n", 0..10)].concat();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut db = SenderDb::load_for_update(&path).unwrap();
            db.insert(&items("n", 0..10), None).unwrap();
            db.remove(&items("s", 590..600)).unwrap();
            db.save(&path).unwrap();
        });
        for _ in 0..3 {
            assert_eq!(query(&served, &probe), (0..10).collect(), "the loaded version answers");
        }
    });
    assert_eq!(query(&SenderDb::load(&path).unwrap(), &probe), (10..20).collect(), "a new load sees the update");
}

/// A manifest whose bins lie (checksum valid) is refused by name on load, before an
/// update could trip over it: an item listed twice in a bin, an item missing from one of
/// its bins, an item moved to a bin it does not hash to.
#[test]
fn a_manifest_that_lies_is_refused() {
    type Lie = fn(&mut SenderDb, usize);
    let lies: [(Lie, &str); 3] = [
        (|db, bin| db.tamper_bin(0, 0, bin, |ids| ids.push(ids[0])), "twice"),
        (
            |db, bin| {
                db.tamper_bin(0, 0, bin, |ids| {
                    ids.pop();
                })
            },
            "bins, not its",
        ),
        (
            |db, bin| {
                let mut moved = 0;
                db.tamper_bin(0, 0, bin, |ids| moved = ids.pop().unwrap());
                // Another bin with room that lists the item in no bundle: it does not
                // hash there.
                let bundles = db.info().bundles;
                let to = (0..1024)
                    .filter(|&to| to != bin)
                    .find(|&to| {
                        let mut ok = true;
                        for b in 0..bundles {
                            db.tamper_bin(0, b, to, |ids| ok &= !ids.contains(&moved) && (b > 0 || ids.len() < 8));
                        }
                        ok
                    })
                    .unwrap();
                db.tamper_bin(0, 0, to, |ids| ids.insert(0, moved));
            },
            "does not hash to it",
        ),
    ];
    let sender = items("s", 0..500);
    let labels: Vec<Vec<u8>> = sender.to_vec();
    for (lie, named) in lies {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut db = SenderDb::build_labelled(&sender, &labels, vec!["l".into()], small(), "test").unwrap();
        let bin = (0..256).find(|&bin| !db_bin_is_empty(&mut db, bin)).unwrap();
        lie(&mut db, bin);
        db.save(&path).unwrap();
        let e = SenderDb::load_for_update(&path).map(|_| ()).expect_err(named);
        assert!(matches!(e, Error::Damaged { .. }) && e.to_string().contains(named), "{named}: {e}");
        let e = SenderDb::load(&path).map(|_| ()).unwrap_err();
        assert!(matches!(e, Error::Damaged { .. }), "{e}");
    }
}

fn db_bin_is_empty(db: &mut SenderDb, bin: usize) -> bool {
    let mut empty = false;
    db.tamper_bin(0, 0, bin, |ids| empty = ids.is_empty());
    empty
}

/// Every file of the directory, concatenated.
fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        out.extend(std::fs::read(e.unwrap().path()).unwrap());
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A database whose key is kept apart: its directory holds neither the key nor any
/// item's OPRF output (which keys the item's label), so a reader of the directory can
/// neither test items nor open labels; opening it to serve needs the key file, a wrong
/// key file is refused, and inspecting needs none.
#[test]
fn a_key_kept_apart_is_needed_to_serve_and_absent_from_the_data() {
    use setwise::crypto::dst::{UNBALANCED_OPRF, UNBALANCED_OPRF_OUT};
    use setwise::crypto::oprf::OprfKey;
    use setwise::crypto::ristretto::SecretScalar;
    use setwise::protocols::unbalanced::db::Open;
    let dir = tempfile::tempdir().unwrap();
    let (path, key_file) = (dir.path().join("s.db"), dir.path().join("s.key"));
    let sender = items("s", 0..400);
    let labels: Vec<Vec<u8>> = sender.iter().map(|k| [b"label-", &k[..]].concat()).collect();
    let mut db = SenderDb::build_labelled(&sender, &labels, vec!["l".into()], small(), "test").unwrap();
    let key = db.key_bytes().unwrap();
    // Kept in the directory by default: its KEY file (0600), not the manifest.
    db.save(&path).unwrap();
    assert!(path.join("KEY").exists() && !contains(&std::fs::read(path.join("MANIFEST")).unwrap(), &key));
    db.keep_key_apart(&key_file).unwrap();
    db.save(&path).unwrap();
    let data = all_bytes(&path);
    assert!(!path.join("KEY").exists() && !contains(&data, &key), "no key in the directory");
    let oprf = OprfKey::from_scalar(SecretScalar::from_bytes(key).unwrap(), UNBALANCED_OPRF, UNBALANCED_OPRF_OUT);
    for output in oprf.evaluate_items(&sender[..50]) {
        assert!(!contains(&data, &output), "no OPRF output in the directory");
    }
    let e = SenderDb::load(&path).map(|_| ()).unwrap_err();
    assert!(e.is_local() && e.to_string().contains("--key-file"), "{e}");
    let inspected = SenderDb::open(&path, Open::Inspect, None).unwrap();
    assert_eq!(inspected.info().sender_size, 400);
    let served = SenderDb::open(&path, Open::Serve, Some(&key_file)).unwrap();
    assert_eq!(query(&served, &[items("s", 0..5), items("x", 0..5)].concat()), (0..5).collect());
    // Another database's key file.
    let other_key = dir.path().join("other.key");
    SenderDb::build(&items("o", 0..10), small(), "test").unwrap().keep_key_apart(&other_key).unwrap();
    let e = SenderDb::open(&path, Open::Serve, Some(&other_key)).map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("the key of another database"), "{e}");
}

/// A thread that holds a database open for an update and opens it again gets an error,
/// not a wait for itself.
#[test]
fn reopening_a_database_this_thread_updates_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    SenderDb::build(&items("s", 0..100), small(), "test").unwrap().save(&path).unwrap();
    let update = SenderDb::load_for_update(&path).unwrap();
    let e = SenderDb::load(&path).map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("open for an update by this thread"), "{e}");
    drop(update);
    SenderDb::load(&path).unwrap();
}

#[test]
fn an_observed_build_tells_its_steps_and_builds_the_same_database() {
    use setwise::protocols::{PhaseObserver, Progress};
    use std::sync::{Arc, Mutex};
    let events = Arc::new(Mutex::new(Vec::new()));
    let e = events.clone();
    let observer: PhaseObserver = Arc::new(move |p| e.lock().unwrap().push(p));
    let (sender, receiver) = (items("s", 0..700), items("s", 650..760));
    let db = SenderDb::build_observed(&sender, None, small(), "test", Some(observer)).unwrap();
    let events = events.lock().unwrap();
    let phases: Vec<&str> =
        events.iter().filter_map(|p| if let Progress::Phase(n) = p { Some(*n) } else { None }).collect();
    assert_eq!(phases, ["OPRF of the items", "place the items in bundles", "interpolate each bundle's polynomials"]);
    // Each metered step ends with all of its units done.
    for unit in ["items", "bundles"] {
        let last = events.iter().rev().find_map(|p| match p {
            Progress::Work(w) if w.unit == unit => Some(*w),
            _ => None,
        });
        let w = last.unwrap_or_else(|| panic!("no {unit} counted"));
        assert_eq!(w.done, w.total, "{unit}");
    }
    let items_counted = events.iter().find_map(|p| if let Progress::Work(w) = p { Some(w.total) } else { None });
    assert_eq!(items_counted, Some(700));
    // The database answers as a plainly built one does: the common items.
    assert_eq!(query(&db, &receiver), (0..50).collect());
}
