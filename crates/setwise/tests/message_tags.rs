//! Every message tag on the wire names one message. Two messages sharing a tag let a
//! receiver accept one for the other (PrivateIdUnionCount once shared 0x78 with the
//! PrivateIdUnion stream), so the declarations in the source are checked for repeats.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The tag in a declaration line such as `const TAG: u8 = 0x7a;`,
/// `pub const X: Stream<32> = Stream::new(0x79, "Name");` or `const TAG_HELLO: u8 = 0x01;`.
fn declared_tag(line: &str) -> Option<u8> {
    let line = line.trim();
    if line.starts_with("//") {
        return None;
    }
    let rest = if let Some(i) = line.find("Stream::new(0x") {
        &line[i + "Stream::new(".len()..]
    } else if line.contains("const TAG") && line.contains(": u8 = 0x") {
        &line[line.find("0x")?..]
    } else {
        return None;
    };
    u8::from_str_radix(rest.get(2..4)?, 16).ok()
}

#[test]
fn message_tags_are_unique() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut seen: BTreeMap<u8, String> = BTreeMap::new();
    let mut repeats = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit-test modules declare throwaway tags.
        let text = text.split("#[cfg(test)]").next().unwrap();
        for (n, line) in text.lines().enumerate() {
            if let Some(tag) = declared_tag(line) {
                let here = format!("{}:{}", file.strip_prefix(&src).unwrap().display(), n + 1);
                if let Some(first) = seen.insert(tag, here.clone()) {
                    repeats.push(format!("{tag:#04x} at {first} and {here}"));
                }
            }
        }
    }
    assert!(seen.len() > 20, "found only {} tag declarations; has their form changed?", seen.len());
    assert!(repeats.is_empty(), "message tags used twice: {repeats:#?}");
}
