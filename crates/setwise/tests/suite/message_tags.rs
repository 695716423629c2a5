//! Every message tag on the wire names one message, and every tag declared in the source
//! is in the list of tags, `setwise::message_tags::all()` (which the `messages` fuzz
//! target decodes, tag by tag). Two messages sharing a tag let a receiver accept one for
//! the other (PrivateIdUnionCount once shared 0x78 with the PrivateIdUnion stream); a
//! tag missing from the list goes unfuzzed.

use setwise::message_tags::all;
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

/// `code` without `//` comments (doc comments included), line by line.
fn uncommented(code: &str) -> String {
    code.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// A `0x..` byte at the start of `s` (after blanks).
fn hex_byte(s: &str) -> Option<u8> {
    let s = s.trim_start().strip_prefix("0x")?;
    let digits: String = s.chars().take_while(char::is_ascii_hexdigit).collect();
    if digits.len() != 2 {
        return None;
    }
    u8::from_str_radix(&digits, 16).ok()
}

/// Every tag declaration in `code` (one file, without its unit tests): its tag, or the
/// text that declares one whose tag cannot be read (a tag that is not a literal). The
/// forms: `Stream::new(0x.., ..)`, `Counted::new(0x.., ..)`, `fixed_message!(Name, 0x.., ..)`,
/// `const TAG…: u8 = 0x..` anywhere, and any `const X: u8 = 0x..` in a `messages.rs`.
fn declarations(code: &str, messages_file: bool) -> Vec<Result<u8, String>> {
    let code = uncommented(code);
    let mut found = Vec::new();
    for call in ["Stream::new(", "Counted::new(", "fixed_message!("] {
        for (at, _) in code.match_indices(call) {
            let args = &code[at + call.len()..];
            // fixed_message!'s tag is its second argument; the others' their first.
            let arg = if call == "fixed_message!(" { args.split(',').nth(1) } else { args.split(',').next() };
            let snippet: String = code[at..].chars().take(80).collect();
            found.push(arg.and_then(hex_byte).ok_or(snippet));
        }
    }
    for line in code.lines() {
        let line = line.trim();
        let Some((name, value)) = line.split_once(": u8 =") else { continue };
        let is_const = name.starts_with("const ") || name.contains(" const ");
        // `const TAG: u8 = T;` forwards a generic parameter: the tag is declared where the
        // parameter is given.
        let forwards = value.trim().trim_end_matches(';').chars().all(|c| c.is_alphanumeric() || c == '_');
        if is_const && (name.contains("TAG") || messages_file) && !(forwards && hex_byte(value).is_none()) {
            found.push(hex_byte(value).ok_or(line.to_string()));
        }
    }
    found
}

#[test]
fn every_declared_tag_is_listed_once() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut declared: BTreeMap<u8, Vec<String>> = BTreeMap::new();
    let mut unreadable = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit-test modules declare throwaway tags.
        let text = text.split("#[cfg(test)]").next().unwrap();
        let name = file.strip_prefix(&src).unwrap().display().to_string();
        // The macro's own definition is not a declaration.
        let text = if name == "wire/msg.rs" { text.split("macro_rules! fixed_message").next().unwrap() } else { text };
        for d in declarations(text, file.ends_with("messages.rs")) {
            match d {
                Ok(tag) => declared.entry(tag).or_default().push(name.clone()),
                Err(snippet) => unreadable.push(format!("{name}: {snippet}")),
            }
        }
    }
    assert!(unreadable.is_empty(), "tag declarations whose tag is not a literal: {unreadable:#?}");
    let repeats: Vec<_> = declared.iter().filter(|(_, at)| at.len() > 1).collect();
    assert!(repeats.is_empty(), "message tags declared twice: {repeats:#x?}");

    let listed = all();
    let mut by_tag: BTreeMap<u8, Vec<&str>> = BTreeMap::new();
    for t in &listed {
        by_tag.entry(t.tag).or_default().push(t.name);
    }
    let shared: Vec<_> = by_tag.iter().filter(|(_, names)| names.len() > 1).collect();
    assert!(shared.is_empty(), "messages sharing a tag: {shared:#x?}");
    let missing: Vec<_> = declared.iter().filter(|(t, _)| !by_tag.contains_key(t)).collect();
    assert!(missing.is_empty(), "declared but not in setwise::message_tags::all(): {missing:#x?}");
    let undeclared: Vec<_> = by_tag.keys().filter(|t| !declared.contains_key(t)).collect();
    assert!(undeclared.is_empty(), "listed tags this test did not find declared (a new form?): {undeclared:#x?}");
    assert!(declared.len() >= 58, "found only {} tag declarations; has their form changed?", declared.len());
}
