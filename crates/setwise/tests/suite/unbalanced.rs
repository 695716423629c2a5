//! Unbalanced PSI against the plain intersection; database files; parameter checks.

use crate::common::items;
use setwise::he::HeError;
use setwise::net::{Channel, MemoryChannel};
use setwise::protocols::Role;
use setwise::protocols::unbalanced::{self, SenderDb, UnbalancedParams};
use setwise::session::{self, Hello, Input, ProtocolParams, UnbalancedJob, handshake};
use setwise::wire::WireError;
use setwise::{Error, Job, Operation, Outcome, Protocol};
use std::collections::BTreeSet;

/// Small parameters for fast tests.
fn small() -> UnbalancedParams {
    setwise::testing::small_unbalanced_params()
}

/// A hand-driven receiver of one item: hello, the sender's parameters, the OPRF round;
/// the caller sends what follows.
fn open_query(b: &mut MemoryChannel) {
    handshake(b, &Hello::new("unbalanced", "intersection", job().hello_params(), Role::Receiver, 1), u64::MAX).unwrap();
    let _params = b.recv().unwrap();
    let (bl, blinded) = setwise::crypto::oprf::blind(&[b"x"], setwise::crypto::dst::UNBALANCED_OPRF);
    drop(bl);
    let mut frame = vec![0x31, 1, 0, 0, 0];
    frame.extend_from_slice(&blinded[0]);
    b.send(&frame).unwrap();
    let _resp = b.recv().unwrap();
}

fn job() -> Job {
    Job::new(Protocol::Unbalanced, Operation::Intersection)
}

/// Runs a query of `receiver` items against `db`; `fingerprint` pins the parameters.
fn query(
    db: &SenderDb,
    receiver: &[Vec<u8>],
    fingerprint: Option<&str>,
) -> (Result<Outcome, Error>, Result<Outcome, Error>) {
    let (mut a, mut b) = MemoryChannel::pair(64 << 20);
    let pinned =
        job().with_params(ProtocolParams::Unbalanced(UnbalancedJob { fingerprint: fingerprint.map(str::to_string) }));
    std::thread::scope(|s| {
        let t = s.spawn(move || {
            let r = session::run(&mut a, &job(), Role::Sender, Input::<Vec<u8>>::Database(db));
            drop(a);
            r.map(|x| x.0)
        });
        let r = session::run(&mut b, &pinned, Role::Receiver, Input::Items(receiver));
        drop(b);
        (t.join().unwrap(), r.map(|x| x.0))
    })
}

fn check(db: &SenderDb, sender: &[Vec<u8>], receiver: &[Vec<u8>]) {
    let plain = setwise::testing::plain_intersection(sender, receiver);
    let (so, ro) = query(db, receiver, None);
    assert_eq!(so.unwrap(), Outcome::Nothing);
    match ro.unwrap() {
        Outcome::Intersection(got) => assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), plain),
        other => panic!("{other:?}"),
    }
}

#[test]
fn queries_match_the_plain_intersection() {
    let sender = items("s", 0..3000);
    let db = SenderDb::build(&sender, small(), "test").unwrap();
    check(&db, &sender, &[]);
    check(&db, &sender, &items("s", 0..1));
    check(&db, &sender, &items("x", 0..50));
    check(&db, &sender, &[items("s", 100..150), items("x", 0..50)].concat());
    // Long items: the OPRF output, not the item, is split into felts.
    let long: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 2000]).collect();
    let db2 = SenderDb::build(&long[..10], small(), "test").unwrap();
    check(&db2, &long[..10], &long[5..]);
}

/// Queries, labelled, at each evaluation level the sender uses, with and without
/// derived powers: all powers sent over three moduli (level 1), the 1M-256 preset's
/// depth-one basis over two (level 0: the sum is relinearised once), and a depth-one
/// basis at N = 8192 over APSI's chain (level 2: the powers relinearised and switched
/// down before the products), and with a special modulus (the query at level 1).
#[test]
fn labelled_queries_match_at_every_evaluation_level() {
    let preset = |name: &str| {
        let json = setwise::protocols::unbalanced::params::PRESETS.iter().find(|(n, _)| *n == name).unwrap().1;
        UnbalancedParams::from_json(json).unwrap()
    };
    let sources = setwise::he::depth_one_sources(192, 300);
    let n8192 = UnbalancedParams::from_json(&format!(
        r#"{{"table_params":{{"hash_func_count":3,"table_size":1638,"max_items_per_bin":192}},
            "item_params":{{"felts_per_item":5}},
            "query_params":{{"ps_low_degree":0,"query_powers":{sources:?}}},
            "seal_params":{{"poly_modulus_degree":8192,"coeff_modulus_bits":[56,56,56,50],"plain_modulus":4079617}}}}"#
    ))
    .unwrap();
    let sender = items("s", 0..1200);
    let labels: Vec<Vec<u8>> = (0..sender.len()).map(|i| format!("label of {i}").into_bytes()).collect();
    let receiver = [items("s", 300..340), items("z", 0..20)].concat();
    let want: Vec<(usize, Vec<u8>)> = (0..40).map(|i| (i, format!("label of {}", 300 + i).into_bytes())).collect();
    // Paterson–Stockmeyer below level 0: powers derived at level 0 (keys for level 0
    // and the evaluation level), or every power sent (a key for the evaluation level
    // only); and at level 0, where two moduli leave it no lower level with a key.
    let keyed = setwise::testing::keyed_unbalanced_params();
    let mut sent = keyed.clone();
    sent.query_params.query_powers = vec![1, 2, 3, 4, 8, 12];
    let mut two = sent.clone();
    two.seal_params.coeff_modulus_bits = vec![60, 60];
    // A special modulus (auto's chain for slow links): the query at level 1 with one key
    // over every modulus; Paterson–Stockmeyer evaluated there, a direct set lower.
    let mut special_direct = n8192.clone();
    special_direct.seal_params.coeff_modulus_bits = vec![49, 49, 48, 48, 24];
    special_direct.seal_params.special_modulus = true;
    let mut special_ps = special_direct.clone();
    special_ps.table_params.max_items_per_bin = 43;
    special_ps.query_params =
        setwise::protocols::unbalanced::params::QueryParams { ps_low_degree: 10, query_powers: vec![1, 3, 11] };
    let cases = [
        (small(), 1, vec![]),
        (preset("1M-256"), 0, vec![0]),
        (n8192, 2, vec![0]),
        (keyed, 2, vec![0, 2]),
        (sent, 2, vec![2]),
        (two, 0, vec![0]),
        (special_direct, 3, vec![1]),
        (special_ps, 1, vec![1]),
    ];
    for (p, level, keys) in cases {
        p.validate().unwrap();
        assert_eq!(p.eval_level().unwrap(), level);
        assert_eq!(p.query_levels().unwrap().keys, keys);
        let db = SenderDb::build_labelled(&sender, &labels, vec!["l".into()], p.clone(), "test").unwrap();
        assert_eq!(db.eval_level(), level);
        assert_eq!(labelled_query(&db, &receiver), want, "level {level}");
    }
}

#[test]
fn a_receiver_at_the_maximum_fills_every_bin_position() {
    let p = small();
    let max = p.receiver_max();
    assert!(max >= 256, "receiver maximum {max}");
    let sender = items("s", 0..2000);
    let db = SenderDb::build(&sender, p, "test").unwrap();
    let receiver: Vec<Vec<u8>> = [items("s", 0..max / 2), items("r", 0..max - max / 2)].concat();
    check(&db, &sender, &receiver);
}

#[test]
fn too_many_receiver_items_is_a_clear_error() {
    let sender = items("s", 0..100);
    let db = SenderDb::build(&sender, small(), "test").unwrap();
    let (so, ro) = query(&db, &items("r", 0..2000), None);
    let e = ro.unwrap_err().to_string();
    assert!(e.contains("at most") && e.contains("per query"), "{e}");
    // The receiver's own mistake for it, the peer's doing for the sender.
    let so = so.unwrap_err();
    assert!(!so.is_local() && so.to_string().contains("this database's parameters"), "{so}");
}

#[test]
fn a_different_parameter_fingerprint_is_refused() {
    let sender = items("s", 0..100);
    let db = SenderDb::build(&sender, small(), "test").unwrap();
    let (so, ro) = query(&db, &items("s", 0..3), Some("0123456789abcdef"));
    let e = ro.unwrap_err().to_string();
    assert!(e.contains("parameter fingerprint: this side has 0123456789abcdef, the peer has"), "{e}");
    assert!(so.unwrap_err().to_string().contains("aborted"));
    let fp = db.params().fingerprint();
    assert!(matches!(query(&db, &items("s", 0..3), Some(&fp)).1.unwrap(), Outcome::Intersection(v) if v.len() == 3));
}

#[test]
fn database_files_round_trip_and_refuse_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let sender = items("s", 0..1500);
    let mut db = SenderDb::build(&sender, small(), "test").unwrap();
    db.save(&path).unwrap();
    let loaded = SenderDb::load(&path).unwrap();
    assert_eq!(loaded.info().sender_size, 1500);
    assert_eq!(loaded.params(), db.params());
    check(&loaded, &sender, &[items("s", 10..60), items("q", 0..40)].concat());

    // A database is a directory: a MANIFEST and one segment file per bundle.
    let manifest = std::fs::read(path.join("MANIFEST")).unwrap();
    let segment = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("seg-"))
        .unwrap();
    let seg_bytes = std::fs::read(&segment).unwrap();
    let damage = |file: &std::path::Path, bytes: &[u8], want: &str| {
        std::fs::write(file, bytes).unwrap();
        let e = SenderDb::load(&path).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    };
    let mut flipped = manifest.clone();
    flipped[manifest.len() / 2] ^= 1;
    damage(&path.join("MANIFEST"), &flipped, "MANIFEST checksum");
    damage(&path.join("MANIFEST"), &manifest[..manifest.len() - 1000], "MANIFEST checksum");
    std::fs::write(path.join("MANIFEST"), &manifest).unwrap();
    let mut flipped = seg_bytes.clone();
    flipped[seg_bytes.len() / 3] ^= 4;
    damage(&segment, &flipped, "checksum mismatch");
    damage(&segment, &seg_bytes[..seg_bytes.len() - 4], "truncated");
    std::fs::write(&segment, &seg_bytes).unwrap();
    check(&SenderDb::load(&path).unwrap(), &sender, &items("s", 0..30));
    let csv = dir.path().join("items.csv");
    std::fs::write(&csv, b"id,name\n1,ann\n").unwrap();
    assert!(SenderDb::load(&csv).unwrap_err().to_string().contains("not a setwise database"));
    assert!(SenderDb::load(dir.path()).unwrap_err().to_string().contains("MANIFEST"));
    // Saving into a directory that is not a database is refused (saving deletes the
    // segment files its manifest does not name); saving elsewhere copies the segments.
    assert!(db.save(dir.path()).unwrap_err().to_string().contains("not a setwise database"));
    let copy = dir.path().join("copy.db");
    let mut served = SenderDb::load(&path).unwrap();
    served.save(&copy).unwrap();
    check(&SenderDb::load(&copy).unwrap(), &sender, &items("s", 0..30));
    assert!(SenderDb::load(&dir.path().join("missing.db")).is_err());
}

#[test]
fn parameter_files_are_checked_by_field() {
    let base = small().to_json();
    let bad = |from: &str, to: &str| UnbalancedParams::from_json(&base.replace(from, to)).unwrap_err().to_string();
    assert!(bad("31\n", "60\n").contains("seal_params") && bad("31\n", "60\n").contains("128-bit"));
    assert!(bad("\"felts_per_item\": 4", "\"felts_per_item\": 3").contains("felts_per_item"));
    assert!(bad("\"felts_per_item\": 4", "\"felts_per_item\": 2").contains("at least 80"));
    assert!(bad("\"table_size\": 1024", "\"table_size\": 1000").contains("table_size"));
    assert!(bad("\"hash_func_count\": 3", "\"hash_func_count\": 0").contains("hash_func_count"));
    assert!(bad("\"hash_func_count\": 3", "\"hash_func_count\": 2").contains("too small for any receiver item"));
    // Only x^1 sent, degree 8: depth 3 at N=4096 is infeasible.
    let e = UnbalancedParams::from_json(
        &base.replace("[\n      1,\n      2,\n      3,\n      4,\n      5,\n      6,\n      7,\n      8\n    ]", "[1]"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("infeasible") && e.contains("noise budget"), "{e}");
    assert!(UnbalancedParams::from_json("{\"table_params\": {}}").unwrap_err().to_string().contains("parameter file"));
    for (name, json) in unbalanced::params::PRESETS {
        UnbalancedParams::from_json(json).unwrap_or_else(|e| panic!("preset {name}: {e}"));
    }
}

#[test]
fn paterson_stockmeyer_matches_direct_evaluation() {
    // N=8192 gives depth for a power plan with products and PS.
    let p = setwise::testing::keyed_unbalanced_params();
    assert!(p.depth().unwrap().1);
    let sender = items("s", 0..4000);
    let db = SenderDb::build(&sender, p, "test").unwrap();
    check(&db, &sender, &[items("s", 0..40), items("n", 0..40)].concat());
}

#[test]
fn hostile_query_ciphertexts_end_the_session_with_an_error() {
    let sender = items("s", 0..100);
    let db = SenderDb::build(&sender, small(), "test").unwrap();
    // The sender expects a query ciphertext (tag 0x34; these parameters need no key).
    type Pin = fn(&Error) -> bool;
    let he_refusal: Pin = |e| matches!(e, Error::He(HeError::Malformed { what: "Ciphertext", .. }));
    let wrong_tag: Pin =
        |e| matches!(e, Error::Malformed(WireError::UnexpectedMessage { expected: "Ciphertext", got: 0x35 }));
    let cases = [
        (vec![0x34], he_refusal),
        (vec![0x34; 100], he_refusal),
        (vec![0x34; 2 << 20], he_refusal),
        (vec![0x35, 0, 0], wrong_tag),
    ];
    for (garbage, pinned) in cases {
        let (mut a, mut b) = MemoryChannel::pair(64 << 20);
        let e = std::thread::scope(|s| {
            let db = &db;
            let t = s
                .spawn(move || session::run(&mut a, &job(), Role::Sender, Input::<Vec<u8>>::Database(db)).unwrap_err());
            open_query(&mut b);
            b.send(&garbage).unwrap();
            t.join().unwrap()
        });
        assert!(pinned(&e), "{:?}: {e}", &garbage[..garbage.len().min(4)]);
    }
}

/// What a malicious receiver's malformed OPRF request gets: an error naming the point or
/// the count, and no evaluation. (A well-formed point of its choice gets k·P and nothing
/// else: the database holds only OPRF outputs, so it learns about the items it sent
/// through the OPRF and no others; see docs/protocols/unbalanced.md.)
#[test]
fn a_malformed_oprf_request_is_refused_by_name() {
    let sender = items("s", 0..100);
    let db = SenderDb::build(&sender, small(), "test").unwrap();
    let (_, good) = setwise::crypto::oprf::blind(&[b"a", b"b"], setwise::crypto::dst::UNBALANCED_OPRF);
    type Pin = fn(&Error) -> bool;
    let point: Pin = |e| matches!(e, Error::InvalidPoint { what: "OprfRequest", index: 1 });
    let count: Pin = |e| matches!(e, Error::Malformed(_));
    let cases: [(Vec<u8>, Pin); 4] = [
        ([&[0x31, 2, 0, 0, 0][..], &good[0], &[0xff; 32]].concat(), point), // not canonical
        ([&[0x31, 2, 0, 0, 0][..], &good[0], &[0; 32]].concat(), point),    // the identity
        ([&[0x31, 3, 0, 0, 0][..], &good[0], &good[1], &good[1]].concat(), count), // more than announced
        ([&[0x31, 2, 0, 0, 0][..], &good[0]].concat(), count),              // fewer bytes than its count
    ];
    for (frame, pinned) in cases {
        let (mut a, mut b) = MemoryChannel::pair(64 << 20);
        let e = std::thread::scope(|s| {
            let db = &db;
            let t = s
                .spawn(move || session::run(&mut a, &job(), Role::Sender, Input::<Vec<u8>>::Database(db)).unwrap_err());
            let hello = Hello::new("unbalanced", "intersection", job().hello_params(), Role::Receiver, 2);
            handshake(&mut b, &hello, u64::MAX).unwrap();
            let _params = b.recv().unwrap();
            b.send(&frame).unwrap();
            t.join().unwrap()
        });
        assert!(pinned(&e), "{:?}: {e}", &frame[..5]);
    }
}

#[test]
fn hostile_parameter_values_are_refused_before_any_allocation() {
    let base = small().to_json();
    let huge_power =
        base.replacen("\"query_powers\": [\n      1,", "\"query_powers\": [\n      1,\n      4000000000,", 1);
    assert!(UnbalancedParams::from_json(&huge_power).unwrap_err().to_string().contains("query_powers"));
    let huge_table = base.replace("\"table_size\": 1024", "\"table_size\": 1099511627776");
    assert!(UnbalancedParams::from_json(&huge_table).unwrap_err().to_string().contains("table_size"));
}

fn labelled_query(db: &SenderDb, receiver: &[Vec<u8>]) -> Vec<(usize, Vec<u8>)> {
    match query(db, receiver, None).1.unwrap() {
        Outcome::Labelled { rows, .. } => rows,
        other => panic!("{other:?}"),
    }
}

#[test]
fn labelled_queries_return_exactly_the_labels_of_held_items() {
    let sender = items("s", 0..2000);
    let label = |i: usize| -> Vec<u8> {
        match i % 5 {
            0 => Vec::new(),                                      // empty label value
            1 => vec![b'x'],                                      // 1 byte
            2 => "Zürich – 東京 ✓".as_bytes().to_vec(),           // unicode
            3 => (0..1024).map(|j| (i * 31 + j) as u8).collect(), // 1 KiB
            _ => format!("row {i}").into_bytes(),
        }
    };
    let labels: Vec<Vec<u8>> = (0..sender.len()).map(label).collect();
    let mut db = SenderDb::build_labelled(&sender, &labels, vec!["info".into()], small(), "test").unwrap();
    assert_eq!(db.info().label_bytes, 1024);
    let receiver: Vec<Vec<u8>> = [items("s", 0..30), items("nope", 0..30), items("s", 1990..2000)].concat();
    let got = labelled_query(&db, &receiver);
    let expected: Vec<(usize, Vec<u8>)> = receiver
        .iter()
        .enumerate()
        .filter_map(|(i, y)| sender.iter().position(|x| x == y).map(|j| (i, labels[j].clone())))
        .collect();
    assert_eq!(got, expected, "labels of every match exact, nothing for items not held");

    // Round trip through a file gives the same answers.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.db");
    db.save(&path).unwrap();
    let loaded = SenderDb::load(&path).unwrap();
    assert_eq!(labelled_query(&loaded, &receiver), expected);
}

#[test]
fn a_receiver_without_the_item_cannot_open_its_label() {
    // The receiver sees label slots only through its own bins, and a label record is
    // encrypted under the item's OPRF output: decrypting another item's record with our
    // output gives noise, never the label.
    let sender = items("s", 0..500);
    let secret = b"top secret label".to_vec();
    let labels: Vec<Vec<u8>> = (0..500).map(|_| secret.clone()).collect();
    let db = SenderDb::build_labelled(&sender, &labels, vec!["l".into()], small(), "test").unwrap();
    let got = labelled_query(&db, &items("other", 0..200));
    assert!(got.is_empty());
}

#[test]
fn inserts_and_removes_answer_like_a_rebuild_and_touch_few_bundles() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.db");
    let sender = items("s", 0..3000);
    // Fixed-width labels: a longer label than the database's would need a rebuild.
    let label = |k: &[u8], v: u32| -> Vec<u8> { format!("v{v}-{}", &blake3::hash(k).to_hex()[..12]).into_bytes() };
    let labels: Vec<Vec<u8>> = sender.iter().map(|k| label(k, 0)).collect();
    SenderDb::build_labelled(&sender, &labels, vec!["l".into()], small(), "test").unwrap().save(&path).unwrap();

    // Random edits: 60 new items, 20 new labels for existing ones, 90 removals (10 absent).
    let added = items("new", 0..60);
    let relabel: Vec<Vec<u8>> = (0..20).map(|i| format!("s{}", i * 97).into_bytes()).collect();
    let removed: Vec<Vec<u8>> =
        [(0..80).map(|i| format!("s{}", 1000 + i * 13).into_bytes()).collect::<Vec<_>>(), items("ghost", 0..10)]
            .concat();
    let mut db = SenderDb::load_for_update(&path).unwrap();
    // One item touches at most one bundle per hash function.
    let one = items("single", 0..1);
    let st = db.insert(&one, Some(&[label(&one[0], 1)])).unwrap();
    assert!(st.added == 1 && st.bundles_touched <= 3, "{st:?}");
    let ins: Vec<Vec<u8>> = [added.clone(), relabel.clone(), one.clone()].concat();
    let ins_labels: Vec<Vec<u8>> = ins.iter().map(|k| label(k, 1)).collect();
    let st = db.insert(&ins, Some(&ins_labels)).unwrap();
    assert_eq!((st.added, st.relabelled), (60, 21));
    let st = db.remove(&removed).unwrap();
    assert_eq!((st.removed, st.unchanged), (80, 10));
    db.save(&path).unwrap();
    drop(db); // releases the update's lock

    // The plain edited set and its labels.
    let mut expect: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
        sender.iter().map(|k| (k.clone(), label(k, 0))).collect();
    for k in &ins {
        expect.insert(k.clone(), label(k, 1));
    }
    for k in &removed {
        expect.remove(k);
    }
    let updated = SenderDb::load(&path).unwrap();
    assert_eq!(updated.info().sender_size, expect.len());
    let (keys, vals): (Vec<Vec<u8>>, Vec<Vec<u8>>) = expect.iter().map(|(k, v)| (k.clone(), v.clone())).unzip();
    let rebuilt = SenderDb::build_labelled(&keys, &vals, vec!["l".into()], small(), "test").unwrap();
    let receiver: Vec<Vec<u8>> =
        [items("s", 990..1110), relabel[..10].to_vec(), added[..10].to_vec(), items("ghost", 0..5)].concat();
    let want: Vec<(usize, Vec<u8>)> =
        receiver.iter().enumerate().filter_map(|(i, y)| expect.get(y).map(|v| (i, v.clone()))).collect();
    assert_eq!(labelled_query(&updated, &receiver), want);
    assert_eq!(labelled_query(&rebuilt, &receiver), want);
}

#[test]
fn an_interrupted_update_leaves_the_old_database_valid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i.db");
    let sender = items("s", 0..500);
    SenderDb::build(&sender, small(), "test").unwrap().save(&path).unwrap();
    let original = std::fs::read(path.join("MANIFEST")).unwrap();
    // An update dies after writing a new segment and part of its manifest, before the
    // rename.
    std::fs::write(path.join("seg-00000000deadbeef"), vec![7u8; 4096]).unwrap();
    std::fs::write(path.join("MANIFEST.tmp"), &original[..original.len() / 3]).unwrap();
    assert_eq!(std::fs::read(path.join("MANIFEST")).unwrap(), original);
    let db = SenderDb::load(&path).unwrap();
    check(&db, &sender, &items("s", 0..20));
    // The next update overwrites the stale manifest, renames it over the old one, and
    // deletes the segments no manifest names.
    let mut db = SenderDb::load_for_update(&path).unwrap();
    db.insert(&items("t", 0..5), None).unwrap();
    db.save(&path).unwrap();
    assert!(!path.join("MANIFEST.tmp").exists() && !path.join("seg-00000000deadbeef").exists());
    let files = std::fs::read_dir(&path).unwrap().count();
    assert_eq!(files, 3 + db.info().bundles, "the manifest, the key, the lock and one segment per bundle");
    drop(db); // releases the update's lock
    let db = SenderDb::load(&path).unwrap();
    assert_eq!(db.info().sender_size, 505);
    check(&db, &[sender, items("t", 0..5)].concat(), &[items("s", 0..20), items("t", 0..5)].concat());
}

#[test]
fn sixteen_concurrent_receivers_share_one_database() {
    let sender = items("s", 0..4000);
    let db = std::sync::Arc::new(SenderDb::build(&sender, small(), "test").unwrap());
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|k| {
                let db = std::sync::Arc::clone(&db);
                let sender = &sender;
                s.spawn(move || {
                    // Each receiver has its own set: 20 of the sender's items and 20 others.
                    let receiver: Vec<Vec<u8>> =
                        [items("s", k * 200..k * 200 + 20), items(&format!("r{k}-"), 0..20)].concat();
                    check(&db, sender, &receiver);
                })
            })
            .collect();
        for h in handles {
            h.join().expect("a receiver's answer was wrong");
        }
    });
}

#[test]
fn compact_mode_answers_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let sender = items("s", 0..1500);
    let labels: Vec<Vec<u8>> = sender.iter().map(|k| [b"L:", &k[..]].concat()).collect();
    SenderDb::build_labelled(&sender, &labels, vec!["l".into()], small(), "test").unwrap().save(&path).unwrap();
    let compact = SenderDb::load_compact(&path).unwrap();
    // Encoded, a slot is 8 bytes a modulus at the evaluation level: here level 1, two of
    // the three moduli (the products need no more).
    let p = compact.params();
    assert_eq!(p.eval_level().unwrap(), 1);
    assert_eq!(
        compact.info().compact_bytes * 2 * p.moduli_at(1),
        compact.info().plaintext_bytes,
        "4 bytes against 2·8"
    );
    let receiver = [items("s", 100..140), items("z", 0..10)].concat();
    let want: Vec<(usize, Vec<u8>)> = (0..40).map(|i| (i, [b"L:", &receiver[i][..]].concat())).collect();
    assert_eq!(labelled_query(&compact, &receiver), want);
    assert_eq!(labelled_query(&SenderDb::load(&path).unwrap(), &receiver), want);
}

/// Fixed costs of two configurations (this machine's order of magnitude), for tests of
/// `auto` that must not depend on a calibration.
fn fixed_costs() -> Vec<(setwise::he::HeParams, setwise::protocols::unbalanced::auto::OpCosts)> {
    use setwise::he::HeParams;
    use setwise::protocols::unbalanced::auto::OpCosts;
    vec![
        (
            HeParams { degree: 4096, plain_modulus: HeParams::batching_prime(4096, 21), moduli_bits: vec![42, 32] },
            OpCosts {
                mul_ms: vec![5.0],
                relin_ms: vec![1.0],
                mul_plain_ms: 0.03,
                result_ms: 0.2,
                mod_switch_ms: 1.0,
                trim_ms: 0.05,
                encode_ms: 0.1,
                encrypt_ms: 1.1,
                key_ms: 20.0,
                decrypt_ms: 0.4,
                bytes: [55_857, 36_896, 167_507],
                query_level: 0,
            },
        ),
        (
            HeParams {
                degree: 8192,
                plain_modulus: HeParams::batching_prime(8192, 21),
                moduli_bits: vec![43, 43, 44, 44, 44],
            },
            OpCosts {
                mul_ms: vec![20.0],
                relin_ms: vec![4.0],
                mul_plain_ms: 0.12,
                result_ms: 0.6,
                mod_switch_ms: 8.0,
                trim_ms: 0.05,
                encode_ms: 0.3,
                encrypt_ms: 3.5,
                key_ms: 20.0,
                decrypt_ms: 1.5,
                bytes: [223_281, 88_096, 1_116_273],
                query_level: 0,
            },
        ),
    ]
}

#[test]
fn auto_parameters_are_valid_across_a_grid() {
    use setwise::protocols::unbalanced::auto::{Link, Serving, choose};
    // Validity does not depend on the costs.
    let costs = fixed_costs();
    for sender in [1usize << 10, 1 << 14, 1 << 20, 1 << 24] {
        for receiver in [1usize, 16, 256, 4096] {
            for label in [0usize, 32, 1024] {
                let c = choose(sender, receiver, label, &costs, Serving::unbounded(Link::GIGABIT))
                    .unwrap_or_else(|e| panic!("{sender}×{receiver}×{label}: {e}"));
                c.params.validate().unwrap();
                assert!(c.params.receiver_max() >= receiver, "{sender}×{receiver}: max {}", c.params.receiver_max());
                assert!(c.params.false_match_log2(c.params.receiver_max(), c.bundles_per_index) <= -40.0);
                assert!(c.seconds > 0.0 && c.bytes > 0);
                // Feasible, not only valid: the database builds (the false-match bound is
                // checked on its real bundles) and answers.
                if sender <= 1 << 14 && label <= 32 {
                    let s = items("s", 0..sender);
                    let labels: Vec<Vec<u8>> = s.iter().map(|k| vec![k[1]; label]).collect();
                    let db = if label == 0 {
                        SenderDb::build(&s, c.params.clone(), "auto")
                    } else {
                        SenderDb::build_labelled(&s, &labels, vec!["l".into()], c.params.clone(), "auto")
                    }
                    .unwrap_or_else(|e| panic!("{sender}×{receiver}×{label}: {e}"));
                    let r: Vec<Vec<u8>> = [items("s", 0..receiver.div_ceil(2)), items("r", 0..receiver / 2)].concat();
                    if label == 0 {
                        check(&db, &s, &r);
                    } else {
                        let want: Vec<(usize, Vec<u8>)> =
                            (0..receiver.div_ceil(2).min(sender)).map(|i| (i, vec![r[i][1]; label])).collect();
                        assert!(labelled_query(&db, &r) == want, "{sender}×{receiver}×{label}: wrong labels");
                    }
                }
            }
        }
    }
}

/// On a slow link `auto` takes the special-modulus chain (this machine's costs for it,
/// `setwise params`), whose query and key are smaller: fewer bytes than the best set
/// without it, one key, for level-1 ciphertexts over every modulus.
#[test]
fn auto_takes_a_special_modulus_where_bytes_cost_most() {
    use setwise::he::HeParams;
    use setwise::protocols::unbalanced::auto::{Link, OpCosts, Serving, choose};
    let special = (
        HeParams {
            degree: 8192,
            plain_modulus: HeParams::batching_prime(8192, 22),
            moduli_bits: vec![49, 49, 48, 48, 24],
        },
        OpCosts {
            mul_ms: vec![15.6, 15.6],
            relin_ms: vec![7.4, 7.4],
            mul_plain_ms: 0.12,
            result_ms: 0.94,
            mod_switch_ms: 3.5,
            trim_ms: 0.05,
            encode_ms: 0.71,
            encrypt_ms: 3.55,
            key_ms: 20.0,
            decrypt_ms: 0.94,
            bytes: [198_707, 63_488, 893_028],
            query_level: 1,
        },
    );
    let slow = Serving::unbounded(Link::new(1e6).unwrap());
    let without = choose(1 << 22, 1024, 0, &fixed_costs(), slow).unwrap();
    let with = choose(1 << 22, 1024, 0, &[fixed_costs(), vec![special.clone()]].concat(), slow).unwrap();
    let p = &with.params;
    assert!(p.seal_params.special_modulus && p.query_params.ps_low_degree > 0, "{p:?}");
    p.validate().unwrap();
    let levels = p.query_levels().unwrap();
    assert_eq!((levels.query, levels.keys.as_slice(), levels.over(1)), (1, &[1][..], 0));
    assert!(with.bytes < without.bytes, "{} against {}", with.bytes, without.bytes);
    // On a fast link its larger plaintexts cost more than its bytes save.
    let fast = choose(1 << 22, 1024, 0, &[fixed_costs(), vec![special]].concat(), Serving::unbounded(Link::GIGABIT));
    assert!(!fast.unwrap().params.seal_params.special_modulus);
}

#[test]
fn auto_serves_what_would_not_fit_in_memory_from_disk_or_compact_and_charges_it() {
    use setwise::protocols::unbalanced::auto::{DISK_READ_BYTES_PER_SEC, Link, Serving, choose};
    let costs = fixed_costs();
    let (s, r, label) = (1usize << 24, 1024, 32);
    let free = choose(s, r, label, &costs, Serving::unbounded(Link::GIGABIT)).unwrap();
    assert!(!free.compact && free.on_disk_bytes == 0);
    // Half the memory its plaintexts take: the rest read from disk per query, or served
    // compact (each charged), or a set whose plaintexts fit; either way within the
    // memory, and no cheaper.
    let half = free.memory_bytes / 2;
    let tight = choose(s, r, label, &costs, Serving { link: Link::GIGABIT, memory: Some(half) }).unwrap();
    assert!(tight.memory_bytes <= half, "{} > {half}", tight.memory_bytes);
    assert!(!(tight.compact && tight.on_disk_bytes > 0));
    assert!(tight.seconds >= tight.on_disk_bytes as f64 / DISK_READ_BYTES_PER_SEC);
    assert!(tight.seconds + 8.0 * tight.bytes as f64 / 1e9 >= free.seconds + 8.0 * free.bytes as f64 / 1e9);
    // 16 MiB holds nearly nothing of a 2^24-item database: served from disk, charged
    // its reads (compact's coefficients would not fit either).
    let tiny = choose(s, r, label, &costs, Serving { link: Link::GIGABIT, memory: Some(16 << 20) }).unwrap();
    assert!(!tiny.compact && tiny.on_disk_bytes > 0 && tiny.memory_bytes <= 16 << 20, "{tiny:?}");
    assert!(tiny.seconds >= tiny.on_disk_bytes as f64 / DISK_READ_BYTES_PER_SEC);
    assert!(tiny.seconds + 8.0 * tiny.bytes as f64 / 1e9 > free.seconds + 8.0 * free.bytes as f64 / 1e9);
}

#[test]
fn a_database_whose_bundles_break_the_false_match_bound_is_refused() {
    // B = 256 with 4 felts of 20 bits: even one bundle gives 2^(9.4 + 4·(8 − 20)) ≈ 2^-38.6
    // at the 686-item receiver maximum.
    let powers: Vec<String> = (1..=256).map(|i| i.to_string()).collect();
    let json = format!(
        r#"{{"table_params":{{"hash_func_count":3,"table_size":1024,"max_items_per_bin":256}},
            "item_params":{{"felts_per_item":4}},
            "query_params":{{"ps_low_degree":0,"query_powers":[{}]}},
            "seal_params":{{"poly_modulus_degree":4096,"coeff_modulus_bits":[42,36,31],"plain_modulus":2056193}}}}"#,
        powers.join(",")
    );
    let p = UnbalancedParams::from_json(&json).unwrap();
    let e = SenderDb::build(&items("s", 0..100), p, "test").unwrap_err().to_string();
    assert!(e.contains("falsely match") && e.contains("> 2^-40"), "{e}");
}

#[test]
fn single_item_parameters_use_one_hash_function() {
    let p = UnbalancedParams::from_json(&small().to_json().replace("\"hash_func_count\": 3", "\"hash_func_count\": 1"))
        .unwrap();
    assert_eq!(p.receiver_max(), 1, "two items may share their only bin");
    let sender = items("s", 0..3000);
    let db = SenderDb::build(&sender, p, "test").unwrap();
    // Each item is stored once: fewer bundles than three hash functions need.
    let three = SenderDb::build(&sender, small(), "test").unwrap();
    assert!(db.info().bundles < three.info().bundles, "{} vs {}", db.info().bundles, three.info().bundles);
    for q in [items("s", 1234..1235), items("n", 0..1), Vec::new()] {
        check(&db, &sender, &q);
    }
    let (_, r) = query(&db, &items("s", 0..2), None);
    assert!(r.unwrap_err().to_string().contains("at most 1"));
}

/// A relinearisation key whose `c0` polynomials claim the NTT form instead of NTT-Shoup
/// (or another level, a decomposition base, explicit `c1`): refused by name before any
/// product, never a panic in the sender; so is each of those as the second key, for the
/// evaluation level of Paterson–Stockmeyer below level 0, and level 0's key sent there.
#[test]
fn crafted_relinearisation_keys_are_refused() {
    use setwise::he::{HeContext, SecretKey};
    use setwise::math::zp::Zp;
    // Parameters whose sender derives powers: the key is needed and used.
    let p = setwise::testing::keyed_unbalanced_params();
    let sender = items("s", 0..300);
    let db = SenderDb::build(&sender, p.clone(), "test").unwrap();
    let he = HeContext::new(&p.he()).unwrap();
    let mut sk = SecretKey::generate(&he);
    let good = sk.relin_key().unwrap().to_bytes();
    let level = p.eval_level().unwrap();
    assert_eq!(p.query_levels().unwrap().keys, [0, level]);
    let good_at_level = sk.relin_key_at(level).unwrap().to_bytes();
    let crafted = setwise::testing::crafted_relin_keys(&good);
    assert_eq!(crafted.len(), 5);
    let mut cases: Vec<(String, Vec<Vec<u8>>)> =
        crafted.into_iter().map(|(what, key)| (what.to_string(), vec![key])).collect();
    for (what, key) in setwise::testing::crafted_relin_keys(&good_at_level) {
        cases.push((format!("level {level}: {what}"), vec![good.clone(), key]));
    }
    cases.push((format!("level 0's key for level {level}"), vec![good.clone(), good.clone()]));
    let plan = p.plan().unwrap();
    let t = p.seal_params.plain_modulus;
    for (what, keys) in cases {
        let (mut a, mut b) = MemoryChannel::pair(64 << 20);
        let e = std::thread::scope(|s| {
            let db = &db;
            let t_sender = s.spawn(move || session::run(&mut a, &job(), Role::Sender, Input::<Vec<u8>>::Database(db)));
            open_query(&mut b);
            for key in &keys {
                let _ = b.send(&[&[0x33][..], key].concat());
            }
            // Valid query ciphertexts follow, so a key that passed would be used.
            for _ in 0..p.bundle_indices() {
                for &e in plan.sources() {
                    let v: Vec<u64> = (0..he.slots() as u64).map(|x| Zp::new(t).pow(x % t, e as u64)).collect();
                    let _ = b.send(&[&[0x34][..], &sk.encrypt(&v).unwrap().to_bytes()].concat());
                }
            }
            let e = t_sender.join().expect("the sender must not panic").unwrap_err();
            let told = b.recv().map(|f| f.first().copied());
            (e, told)
        });
        let (e, told) = e;
        assert!(matches!(e, Error::He(HeError::Malformed { what: "relinearisation key", .. })), "{what}: {e}");
        assert_eq!(told.ok().flatten(), Some(0xff), "{what}: the receiver is told (abort)");
    }
}

/// With a special modulus the sender takes one key, for level-1 ciphertexts over every
/// modulus, and level-1 query ciphertexts: what a receiver that ignores the special
/// modulus sends (level 0's key, or a level-0 query) is refused by name, never a panic.
#[test]
fn a_special_modulus_query_is_checked_for_its_level() {
    use setwise::he::{HeContext, SecretKey};
    let mut p = setwise::testing::keyed_unbalanced_params();
    p.seal_params.poly_modulus_degree = 8192;
    p.seal_params.coeff_modulus_bits = vec![49, 49, 48, 48, 24];
    p.seal_params.plain_modulus = setwise::he::HeParams::batching_prime(8192, 22);
    p.seal_params.special_modulus = true;
    p.item_params.felts_per_item = 5;
    p.table_params.table_size = 1638;
    let levels = p.query_levels().unwrap();
    assert_eq!((levels.query, levels.keys.as_slice()), (1, &[1][..]));
    let db = SenderDb::build(&items("s", 0..300), p.clone(), "test").unwrap();
    let he = HeContext::new(&p.he()).unwrap();
    let mut sk = SecretKey::generate(&he);
    let plan = p.plan().unwrap();
    let special = sk.relin_key_over(1, 0).unwrap().to_bytes();
    let cases = [
        ("level 0's key", sk.relin_key().unwrap().to_bytes(), 1, "relinearisation key", "not at 1 over 0"),
        ("level 1's own key", sk.relin_key_at(1).unwrap().to_bytes(), 1, "relinearisation key", "not at 1 over 0"),
        ("a level-0 query", special, 0, "Ciphertext", "level 0 instead of 1"),
    ];
    for (what, key, query_level, refused, why) in cases {
        let (mut a, mut b) = MemoryChannel::pair(64 << 20);
        let e = std::thread::scope(|s| {
            let db = &db;
            let t_sender = s.spawn(move || session::run(&mut a, &job(), Role::Sender, Input::<Vec<u8>>::Database(db)));
            open_query(&mut b);
            let _ = b.send(&[&[0x33][..], &key].concat());
            for _ in 0..p.bundle_indices() * plan.sources().len() {
                let ct = sk.encrypt_at(&[1, 2, 3], query_level).unwrap();
                let _ = b.send(&[&[0x34][..], &ct.to_bytes()].concat());
            }
            t_sender.join().expect("the sender must not panic").unwrap_err()
        });
        assert!(matches!(&e, Error::He(HeError::Malformed { what: w, .. }) if *w == refused), "{what}: {e}");
        assert!(e.to_string().contains(why), "{what}: {e}");
    }
}

/// A plain modulus above 2^32 would not fit the database's 32-bit coefficients: refused
/// by name (it used to pass, and the database then matched wrongly).
#[test]
fn plain_moduli_above_32_bits_are_refused() {
    let t = setwise::he::HeParams::batching_prime(4096, 40);
    let json = format!(
        r#"{{"table_params":{{"hash_func_count":3,"table_size":2048,"max_items_per_bin":4}},
            "item_params":{{"felts_per_item":3}},
            "query_params":{{"ps_low_degree":0,"query_powers":[1,2,3,4]}},
            "seal_params":{{"poly_modulus_degree":4096,"coeff_modulus_bits":[54,54],"plain_modulus":{t}}}}}"#
    );
    let e = UnbalancedParams::from_json(&json).unwrap_err().to_string();
    assert!(e.contains("plain_modulus") && e.contains("2^32"), "{e}");
}

/// A receiver saying `auto` queries a database server, which names `unbalanced`: it runs
/// the server's protocol and says so in its report.
#[test]
fn an_auto_receiver_queries_a_database_server() {
    let sender = items("s", 0..2000);
    let db = SenderDb::build(&sender, small(), "test").unwrap();
    let receiver = [items("s", 10..40), items("x", 0..20)].concat();
    let (mut a, mut b) = MemoryChannel::pair(64 << 20);
    let auto = Job::new(Protocol::Auto, Operation::Intersection);
    let (s, r) = std::thread::scope(|sc| {
        let t = sc.spawn(move || {
            let r = session::run(&mut a, &job(), Role::Sender, Input::<Vec<u8>>::Database(&db));
            drop(a);
            r
        });
        let r = session::run(&mut b, &auto, Role::Receiver, Input::Items(&receiver));
        drop(b);
        (t.join().unwrap(), r)
    });
    s.unwrap();
    let (Outcome::Intersection(got), report) = r.unwrap() else { panic!("intersection") };
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), setwise::testing::plain_intersection(&sender, &receiver));
    assert_eq!(report.protocol, "unbalanced");
    assert!(report.details["protocol"].contains("named by the peer"), "{:?}", report.details);
}
