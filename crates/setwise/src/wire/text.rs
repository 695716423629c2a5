//! Peer text made safe to show: an abort reason, a hello field, a client identity or a
//! column name comes from a party we do not trust and ends up in logs and terminals.
//! [`printable`] escapes whatever could move the cursor, rewrite the screen or reorder
//! what is shown (control and format characters), and bounds the length.

use std::fmt::Write as _;

/// Characters of peer text shown before it is cut.
pub const MAX_SHOWN: usize = 256;

/// `text` with every control, format and separator character escaped as `\u{…}` (and
/// `\` as `\\`, so that an escape cannot be forged), cut after `max` characters with a
/// note of how many bytes were left out.
pub fn printable(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 16);
    for (shown, (at, c)) in text.char_indices().enumerate() {
        if shown == max {
            let _ = write!(out, "… ({} more bytes)", text.len() - at);
            break;
        }
        match c {
            '\\' => out.push_str("\\\\"),
            c if needs_escape(c) => {
                let _ = write!(out, "{}", c.escape_unicode());
            }
            c => out.push(c),
        }
    }
    out
}

/// [`printable`] over bytes that may not be UTF-8 (invalid sequences become U+FFFD).
pub fn printable_bytes(bytes: &[u8], max: usize) -> String {
    printable(&String::from_utf8_lossy(bytes), max)
}

/// Control characters (C0, DEL, C1), the format characters that hide or reorder text
/// (bidirectional overrides and isolates, zero-width characters, the BOM, tags), and the
/// line and paragraph separators.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00ad}'
                | '\u{0600}'..='\u{0605}'
                | '\u{061c}'
                | '\u{06dd}'
                | '\u{070f}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{e0001}'
                | '\u{e0020}'..='\u{e007f}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_terminal_controls_and_reordering() {
        let hostile = "ok\x1b[2J\x1b]0;title\x07\r\nfake line\u{202e}txt.exe\u{200b}\u{9b}";
        let shown = printable(hostile, MAX_SHOWN);
        assert_eq!(shown, "ok\\u{1b}[2J\\u{1b}]0;title\\u{7}\\u{d}\\u{a}fake line\\u{202e}txt.exe\\u{200b}\\u{9b}");
        assert!(shown.chars().all(|c| !needs_escape(c)));
    }

    #[test]
    fn keeps_ordinary_text_and_cannot_be_forged() {
        assert_eq!(printable("café, 東京 — ok", 100), "café, 東京 — ok");
        assert_eq!(printable("\\u{1b}", 100), "\\\\u{1b}", "a literal escape stays distinguishable");
    }

    #[test]
    fn long_text_is_cut_on_a_character() {
        let long = "é".repeat(1000);
        let shown = printable(&long, 10);
        assert_eq!(shown, format!("{}… (1980 more bytes)", "é".repeat(10)));
        assert_eq!(printable_bytes(&[0xff, b'a'], 10), "\u{fffd}a");
    }
}
