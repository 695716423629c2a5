//! Writes the seed corpora of every fuzz target from real runs: the frames each honest
//! party heard from its peer, the messages in them, saved databases, credentials and
//! parameter files. Run from `fuzz/` (`cargo run --release --example seed-corpus`); the
//! seeds are committed, so this runs again only when a format changes.

use setwise::crypto::dst::{Domain, SessionId};
use setwise::hashing::bloom::BloomFilter;
use setwise::net::read_frame;
use setwise::protocols::Operation;
use setwise::protocols::authorized::Mode;
use setwise::protocols::ecdh::steps;
use setwise::protocols::unbalanced::SenderDb;
use setwise::testing::transcripts;
use setwise_fuzz::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Seeds above this size are left out: the fuzzer would spend its time copying them.
const MAX_SEED: usize = 1 << 20;

struct Corpus {
    root: PathBuf,
    written: usize,
}

impl Corpus {
    /// Writes `bytes` as a seed of `target`, named `name` or by its hash.
    fn put(&mut self, target: &str, name: Option<&str>, bytes: &[u8]) {
        if bytes.len() > MAX_SEED {
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
    let mut c = Corpus { root, written: 0 };
    let (fhe_last, _) = last_levels();
    let mut frames = BTreeSet::new();

    for family in FAMILIES {
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
    let mut files: Vec<_> = std::fs::read_dir(&path).expect("list").map(|e| e.expect("entry").path()).collect();
    files.sort();
    for (i, f) in files.iter().enumerate() {
        let bytes = std::fs::read(f).expect("read");
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        if name == "MANIFEST" {
            c.put("manifest", Some("small"), &bytes[8..bytes.len() - 32]);
        }
        if name == "MANIFEST" || name == "KEY" || i == files.len() - 1 {
            let kind = if name.starts_with("seg") || name.len() > 8 { "segment" } else { &name };
            c.put("db_files", Some(kind), &[&[i as u8][..], &bytes].concat());
        }
    }

    for mode in [Mode::Full, Mode::Partial] {
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
    println!("wrote {} seeds under {}", c.written, c.root.display());
}
