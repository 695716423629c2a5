//! Writes the seed corpora of every fuzz target from real runs: the frames each honest
//! party heard from its peer, the messages in them, saved databases, credentials and
//! parameter files. Run from `fuzz/` (`cargo run --release --example seed-corpus
//! [TARGET...]`: only the seeds of the targets named, all without); the seeds are
//! committed, so this runs again only when a format changes.

use setwise::crypto::dst::{Domain, SessionId};
use setwise::hashing::bloom::BloomFilter;
use setwise::net::read_frame;
use setwise::protocols::Operation;
use setwise::protocols::authorized::{Mode, public_key_hex};
use setwise::protocols::ecdh::steps;
use setwise::protocols::unbalanced::db::Open;
use setwise::protocols::unbalanced::{SenderDb, encode_label};
use setwise::testing::transcripts;
use setwise_fuzz::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Seeds above this size are left out: the fuzzer would spend its time copying them.
const MAX_SEED: usize = 1 << 20;

struct Corpus {
    root: PathBuf,
    written: usize,
    /// The targets to write seeds of (all if empty).
    only: Vec<String>,
}

impl Corpus {
    /// Whether seeds of any of `targets` are wanted.
    fn wants(&self, targets: &[&str]) -> bool {
        self.only.is_empty() || targets.iter().any(|t| self.only.iter().any(|o| o == t))
    }

    /// Writes `bytes` as a seed of `target`, named `name` or by its hash.
    fn put(&mut self, target: &str, name: Option<&str>, bytes: &[u8]) {
        if bytes.len() > MAX_SEED || !self.wants(&[target]) {
            return;
        }
        let dir = self.root.join(target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        let hash = blake3::hash(bytes).to_hex();
        let file = name.map_or_else(|| hash[..16].to_string(), str::to_string);
        std::fs::write(dir.join(file), bytes).expect("seed");
        self.written += 1;
    }
}

fn frames_of(script: &[u8]) -> Vec<Vec<u8>> {
    let mut r = script;
    std::iter::from_fn(|| read_frame(&mut r, usize::MAX).ok()).collect()
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut c = Corpus { root, written: 0, only: std::env::args().skip(1).collect() };
    let (fhe_last, _) = last_levels();
    let mut frames = BTreeSet::new();

    let recorded: Vec<String> = FAMILIES.iter().map(|f| format!("session_{f}")).collect();
    // The runs are recorded for all seeds or for these targets' (`messages` named alone
    // gets only its crafted frames, below).
    let recorded: Vec<&str> = recorded.iter().map(String::as_str).chain(["frame", "hello", "he_wire"]).collect();
    let families: &[&str] = if c.wants(&recorded) { &FAMILIES } else { &[] };
    for &family in families {
        for (i, case) in warm_up(family).iter().enumerate() {
            let ([heard, _], ok) = transcripts((case.honest)(), (case.peer)());
            assert_eq!(ok, [true, true], "{family}/{}: the recorded run must succeed", case.name);
            let seed = [&[i as u8][..], &heard].concat();
            c.put(&format!("session_{family}"), Some(case.name), &seed);
            if i == 0 {
                c.put("frame", Some(family), &heard[..heard.len().min(1 << 16)]);
            }
            let fs = frames_of(&heard);
            c.put("hello", Some(&format!("{family}-{}", case.name)), &fs[0]);
            frames.extend(fs.into_iter().skip(1));
        }
    }
    // A few frames of each message type: the HE ones are large and alike.
    let mut per_tag = [0usize; 256];
    for f in &frames {
        per_tag[f[0] as usize] += 1;
        if per_tag[f[0] as usize] > 3 {
            continue;
        }
        c.put("messages", None, f);
        let he = match f[0] {
            0x20 => Some(he_select(false, None)),
            0x21 => Some(he_select(false, Some(0))),
            0x22 => Some(he_select(false, Some(fhe_last))),
            0x33 => Some(he_select(true, None)),
            0x34 => Some(he_select(true, Some(0))),
            _ => None,
        };
        if let Some(select) = he {
            c.put("he_wire", None, &[&[select][..], &f[1..]].concat());
        }
    }

    for n in [1usize, 10, 40] {
        let items: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8]).collect();
        let f = BloomFilter::from_items(&Domain::new("setwise/fuzz/bloom", SessionId([0; 32])), &items, 40);
        c.put("bloom", Some(&format!("n{n}")), &[&[(n - 1) as u8][..], &f.to_bytes()].concat());
    }

    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("db");
    SenderDb::build(sender_items(), unbalanced_params(), "fuzz").expect("database").save(&path).expect("save");
    SenderDb::open(&path, Open::ServeWithin(0), None).expect("load writing the encoded copy");
    let mut files: Vec<_> = std::fs::read_dir(&path).expect("list").map(|e| e.expect("entry").path()).collect();
    files.sort();
    for (i, f) in files.iter().enumerate() {
        let bytes = std::fs::read(f).expect("read");
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        if name == "MANIFEST" {
            c.put("manifest", Some("small"), &bytes[8..bytes.len() - 32]);
        }
        if name == "MANIFEST" || name == "KEY" || name.starts_with("ROWS-") || i == files.len() - 1 {
            let kind = match &name {
                n if n.starts_with("ROWS-") => "rows",
                n if n.starts_with("seg") || n.len() > 8 => "segment",
                n => n,
            };
            c.put("db_files", Some(kind), &[&[i as u8][..], &bytes].concat());
        }
    }

    if c.wants(&["build_resume"]) {
        let mut files: Vec<_> =
            std::fs::read_dir(unfinished_build()).expect("list").map(|e| e.expect("entry").path()).collect();
        files.sort();
        for (i, f) in files.iter().enumerate() {
            let name = f.file_name().expect("name").to_string_lossy().into_owned();
            let kind = if name.starts_with("seg-") { "segment".into() } else { name.to_lowercase() };
            c.put("build_resume", Some(&kind), &[&[i as u8][..], &std::fs::read(f).expect("read")].concat());
        }
    }

    let modes: &[Mode] = if c.wants(&["credentials"]) { &[Mode::Full, Mode::Partial] } else { &[] };
    for &mode in modes {
        let file = dir.path().join("creds");
        credentials(mode).save(&file).expect("save credentials");
        let bytes = std::fs::read(&file).expect("read");
        c.put("credentials", Some(&format!("{mode:?}").to_lowercase()), &bytes[8..bytes.len() - 32]);
    }

    c.put("params_json", Some("small"), unbalanced_params().to_json().as_bytes());
    let presets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../params");
    for e in std::fs::read_dir(presets).expect("params directory") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "json") {
            let name = p.file_stem().expect("stem").to_string_lossy().into_owned();
            c.put("params_json", Some(&name), &std::fs::read(&p).expect("read preset"));
        }
    }

    // Selector: format (text, csv with header, csv without) + 3 × key (first, "id", "2,1").
    let csvs: [(&str, u8, &str); 5] = [
        ("text", 0, "ann\nbob\r\ncy\n\n"),
        ("header-first", 1, "id,name\n1,ann\n2,\"b,o\"\"b\"\n"),
        ("header-id", 4, "name,id\nann,1\nbob,1\n"),
        ("no-header-two-keys", 8, "a,b\nc,d\n"),
        ("quoted-newline", 1, "id\n\"multi\nline\"\n"),
    ];
    for (name, select, text) in csvs {
        c.put("csv", Some(name), &[&[select][..], text.as_bytes()].concat());
    }

    for op in [Operation::Intersection, Operation::Cardinality] {
        let (state, _) = steps::request(op, receiver_items()).expect("request");
        c.put("ecdh_state", Some(&format!("{op:?}").to_lowercase()), &state.to_bytes());
    }
    message_seeds(&mut c);
    report_seeds(&mut c);
    for (name, columns, fields) in
        [("none", 0, &[][..]), ("one", 1, &["Ann"][..]), ("unicode-and-empty", 3, &["Zoë", "", "東京"][..])]
    {
        c.put("label", Some(name), &[&[columns][..], &encode_label(fields)].concat());
    }
    let key = public_key_hex(judge_key().public());
    c.put("judge_key", Some("file"), format!("{key}\n").as_bytes());
    c.put("judge_key", Some("upper-case"), key.to_uppercase().as_bytes());
    c.put("judge_key", Some("short"), &key.as_bytes()[..key.len() - 2]);
    println!("wrote {} seeds under {}", c.written, c.root.display());
}

/// Frames of the messages no recorded run sends (the sans-I/O ecdh messages, the abort)
/// or whose runs are not recorded: one each.
fn message_seeds(c: &mut Corpus) {
    use setwise::protocols::vole::messages as vp;
    use setwise::vole::messages as vm;
    use setwise::wire::msg::Message;
    let (_, request) = steps::request(Operation::Intersection, receiver_items()).expect("request");
    let response = steps::respond(Operation::Intersection, sender_items(), &request).expect("response");
    let (mut a, mut b) = setwise::net::MemoryChannel::pair(1 << 16);
    setwise::wire::msg::send_abort(&mut a, "the operator stopped the run");
    let abort = setwise::net::Channel::recv(&mut b).expect("the abort frame");
    let seeds: [(&str, Vec<u8>); 10] = [
        ("ecdh-request", request.encode()),
        ("ecdh-response", response.encode()),
        ("abort", abort),
        ("kos-check", setwise::ot::messages::KosCheck([7; 32]).encode()),
        ("store-seed", vp::StoreSeed([7; 16]).encode()),
        ("mask-commitment", vp::MaskCommitment([7; 32]).encode()),
        ("mask-share", vp::MaskShare([7; 16]).encode()),
        ("noisy-check", vm::NoisyCheck([7; 32]).encode()),
        ("sparse-challenge", vm::SparseChallenge([7; 32]).encode()),
        ("sparse-answer", vm::SparseAnswer([7; 32]).encode()),
    ];
    for (name, frame) in seeds {
        c.put("messages", Some(name), &frame);
    }
}

/// Reports of a real run: both parties', the receiver's with its results, and one in
/// the layout of reports written before results had their own section.
fn report_seeds(c: &mut Corpus) {
    use setwise::protocols::Protocol;
    use setwise::session::{Input, Job, run};
    if !c.wants(&["report"]) {
        return;
    }
    let job = Job::new(Protocol::Ecdh, Operation::Intersection);
    let (mut a, mut b) = setwise::net::MemoryChannel::pair(1 << 20);
    let (sent, got) = std::thread::scope(|s| {
        let sender = s.spawn(|| run(&mut a, &job, setwise::Role::Sender, Input::Items(sender_items())));
        let got = run(&mut b, &job, setwise::Role::Receiver, Input::Items(receiver_items())).expect("receiver");
        (sender.join().expect("sender thread").expect("sender"), got)
    });
    c.put("report", Some("sender"), sent.1.to_json().as_bytes());
    c.put("report", Some("receiver-with-results"), got.1.to_json_with_results().as_bytes());
    let mut old: serde_json::Value = serde_json::from_str(&got.1.to_json()).expect("report JSON");
    old["results"] = serde_json::json!({ "intersection_size": 10 });
    old["details"]["intersection_sum"] = "12345".into();
    c.put("report", Some("old-layout"), old.to_string().as_bytes());
}
