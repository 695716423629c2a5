//! Reading a CSV or text file a block at a time, keeping only its keys.
//!
//! A file held whole costs its size plus 32 bytes a row, which for a database build or a
//! sender that writes nothing is mostly bytes it never looks at again. A file that takes
//! the fast path (module `rows`: no quote, every `\r` ends a line) is read here in blocks
//! that end at a line end: each block's rows are split and their keys copied on all
//! threads, and the block is dropped. Values, labels and rows written back are read from
//! the file again, block by block ([`Streamed::visit`]); a file that changed in between
//! is an error, not wrong rows.
//!
//! A block with a quote ends the reading (`None`), and the caller reads the file whole,
//! through the csv crate, as before.

use super::format::Format;
use super::room::{file_stamp, rows_room, too_many_rows};
use super::rows::{self, Layout, Span};
use crate::error::InputError;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Bytes read at a time: large enough that a block's rows keep both cores busy, small
/// next to the rows of a file worth streaming.
pub(super) const BLOCK: usize = 64 << 20;

/// A CSV or text file whose rows are read again from it when they are asked for.
#[derive(Debug, Clone)]
pub(super) struct Streamed {
    path: PathBuf,
    text: bool,
    /// Where the data rows start: after byte order marks, blank lines and the header.
    body: u64,
    /// Data rows.
    rows: usize,
    /// The file's length and modification time when it was read.
    stamp: (u64, Option<SystemTime>),
    block: usize,
}

/// A file's keys, read by [`read`].
#[derive(Debug)]
pub(super) struct Keys {
    /// Where to read its rows again.
    pub streamed: Streamed,
    /// The header's names and its raw line (a range of `data`).
    pub header: Option<rows::Header>,
    /// Fields per row.
    pub width: usize,
    /// The key columns (0-based).
    pub key_cols: Vec<usize>,
    /// The keys' bytes (and the header's line).
    pub data: Vec<u8>,
    /// Each data row's key, a range of `data`.
    pub keys: Vec<Span>,
}

/// A file's blocks in order, each ending at a line end (the last at the end of the file);
/// a line longer than a block makes that block longer.
struct Blocks {
    file: File,
    buf: Vec<u8>,
    /// Bytes of `buf` handed out by the last block.
    used: usize,
    block: usize,
    eof: bool,
}

impl Blocks {
    fn new(file: File, block: usize) -> Self {
        Self { file, buf: Vec::new(), used: 0, block: block.max(1), eof: false }
    }

    fn next(&mut self) -> std::io::Result<Option<&[u8]>> {
        self.buf.drain(..self.used);
        self.used = 0;
        let mut want = self.block;
        loop {
            if !self.eof && self.buf.len() < want {
                let need = want - self.buf.len();
                self.buf.reserve_exact(need);
                let got = (&mut self.file).take(need as u64).read_to_end(&mut self.buf)?;
                self.eof = got < need;
            }
            if self.eof {
                self.used = self.buf.len();
                break;
            }
            match memchr::memrchr(b'\n', &self.buf) {
                Some(nl) => {
                    self.used = nl + 1;
                    break;
                }
                None => want = self.buf.len() * 2,
            }
        }
        Ok((self.used > 0).then(|| &self.buf[..self.used]))
    }
}

/// `e` with its line moved on by `by` lines (a block's lines are counted from its start).
fn shifted(e: InputError, by: u64) -> InputError {
    match e {
        InputError::InvalidUtf8 { path, line } => InputError::InvalidUtf8 { path, line: line + by },
        InputError::Csv { path, line, message } => InputError::Csv { path, line: line + by, message },
        e => e,
    }
}

/// Reads the keys of the CSV or text file at `path` in blocks of `block` bytes; `None` if
/// the file is not a regular file or has a block that does not take the fast path.
pub(super) fn read(path: &Path, format: Format, key: &[String], block: usize) -> Result<Option<Keys>, InputError> {
    let io = |source| InputError::Io { path: path.to_owned(), source };
    let (text, header) = match format {
        Format::Text => (true, false),
        Format::Csv { header } => (false, header),
        _ => return Ok(None),
    };
    if text && !key.is_empty() && key != ["1"] {
        return Ok(None); // refused by the whole-file reader, in its words
    }
    let file = File::open(path).map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Ok(None);
    }
    let stamp = file_stamp(path)?;
    let room = rows_room();
    let mut blocks = Blocks::new(file, block);
    let (mut offset, mut lines_before) = (0u64, 0u64);
    // Before the first record: byte order marks and blank lines are skipped (CSV).
    let mut started = text;
    let mut need_header = header;
    let mut head: Option<rows::Header> = None;
    let mut body = None;
    let mut layout: Option<(usize, Vec<usize>)> = text.then(|| (1, vec![0]));
    let mut data = Vec::new();
    let mut keys = Vec::new();
    let mut failed = None;
    while let Some(b) = blocks.next().map_err(io)? {
        let mut from = 0;
        if !started {
            from = rows::start_of_records(b);
            started = from < b.len();
        }
        if !text && !rows::is_plain(&b[from..]) {
            return Ok(None);
        }
        // After an error the rest is only checked for quotes: a file that has one anywhere
        // is the whole-file reader's, errors included.
        if failed.is_none() {
            let mut take = || -> Result<(), InputError> {
                if started && need_header {
                    let (names, after) = rows::plain_header(path, b, from).map_err(|e| shifted(e, lines_before))?;
                    head = names.map(|(names, raw)| {
                        data.extend_from_slice(raw.of(b));
                        (names, Span { start: 0, end: data.len() })
                    });
                    from = after;
                    need_header = false;
                }
                if started && !need_header && body.is_none() {
                    body = Some(offset + from as u64);
                }
                let found = match (text, body) {
                    (true, _) => rows::lines(b, from),
                    (false, Some(_)) => rows::plain_rows(b, from),
                    (false, None) => vec![],
                };
                if layout.is_none() && (head.is_some() || !found.is_empty()) {
                    let width = rows::plain_width(b, head.as_ref(), found.first());
                    let names = head.as_ref().map(|(n, _)| n.as_slice());
                    layout = Some((width, rows::key_columns(path, names, width, key)?));
                }
                if keys.len() + found.len() > room {
                    return Err(too_many_rows(path, keys.len() + found.len(), room));
                }
                if let Some((width, key_cols)) = &layout {
                    let layout = if text { Layout::Text } else { Layout::Csv { width: *width, key_cols } };
                    let chunks =
                        rows::plain_keys(path, b, &found, layout, true).map_err(|e| shifted(e, lines_before))?;
                    keys.extend(rows::place_keys(chunks.into_iter(), found.len(), &mut data));
                }
                Ok(())
            };
            if let Err(e) = take() {
                failed = Some(e);
                (data, keys) = (Vec::new(), Vec::new());
            }
        }
        lines_before += memchr::memchr_iter(b'\n', b).count() as u64;
        offset += b.len() as u64;
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let (width, key_cols) = match layout {
        Some(l) => l,
        None => (0, rows::key_columns(path, head.as_ref().map(|(n, _)| n.as_slice()), 0, key)?),
    };
    let streamed =
        Streamed { path: path.to_owned(), text, body: body.unwrap_or(offset), rows: keys.len(), stamp, block };
    Ok(Some(Keys { streamed, header: head, width, key_cols, data, keys }))
}

impl Streamed {
    /// Calls `f` on each data row of the file, in order, with its index and raw bytes
    /// (without its line end).
    pub fn visit(&self, mut f: impl FnMut(usize, &[u8]) -> Result<(), InputError>) -> Result<(), InputError> {
        let io = |source| InputError::Io { path: self.path.clone(), source };
        let changed = || InputError::Invalid(format!("{}: the file changed since it was read", self.path.display()));
        let mut file = File::open(&self.path).map_err(io)?;
        if file_stamp(&self.path)? != self.stamp {
            return Err(changed());
        }
        file.seek(SeekFrom::Start(self.body)).map_err(io)?;
        let mut blocks = Blocks::new(file, self.block);
        let mut row = 0;
        while let Some(b) = blocks.next().map_err(io)? {
            let found = if self.text { rows::lines(b, 0) } else { rows::plain_rows(b, 0) };
            for raw in found {
                if row == self.rows {
                    return Err(changed());
                }
                f(row, raw.of(b))?;
                row += 1;
            }
        }
        if row != self.rows {
            return Err(changed());
        }
        Ok(())
    }
}
