//! Reading a CSV or text file a block at a time, keeping only its keys.
//!
//! A file held whole costs its size plus 32 bytes a row, which for a database build or a
//! sender that writes nothing is mostly bytes it never looks at again. A text file, or a
//! CSV file that takes the fast path (module `rows`: no quote, every `\r` ends a line), is
//! read here in blocks that end at a line end: each block's rows are split and their keys
//! copied on all threads, and the block is dropped. Values, labels and rows written back
//! are read from the file again, block by block ([`Streamed::visit`]), which must find
//! the file as it was (its stamp, what precedes its rows and its row count here, each
//! row's key in `ItemSet`).
//!
//! A CSV block with a quote or a lone `\r` ends the reading (`None`), and the caller
//! reads the file whole, through the csv crate, as before.

use super::format::Format;
use super::room::{Stamp, rows_room, stamp_of, too_many_rows};
use super::rows::{self, Layout, Span};
use crate::error::InputError;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The BLAKE3 key-derivation context of the digest of what precedes a file's rows (byte
/// order marks, blank lines, the header), which each later pass checks: domain-separated
/// as `crypto::dst`'s labels are, without that layer above this one.
const HEAD_DIGEST: &str = "setwise/io/v1/file-head";

/// Bytes read at a time: large enough that a block's rows keep both cores busy, small
/// next to the rows of a file worth streaming.
pub(super) const BLOCK: usize = 64 << 20;

/// A CSV or text file whose rows are read again from it when they are asked for.
#[derive(Debug, Clone)]
pub(super) struct Streamed {
    path: PathBuf,
    text: bool,
    /// Where the data rows start: after byte order marks, blank lines and the header
    /// (CSV; a text file's start at 0).
    body: u64,
    /// Data rows.
    rows: usize,
    /// The file's length and modification time when it was read.
    stamp: Stamp,
    /// The digest of the bytes before `body`: the header written back is the one read.
    head: [u8; 32],
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
struct Blocks<R> {
    file: R,
    buf: Vec<u8>,
    /// Bytes of `buf` handed out by the last block.
    used: usize,
    block: usize,
    eof: bool,
}

impl<R: Read> Blocks<R> {
    fn new(file: R, block: usize) -> Self {
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
/// it is not a regular file, is Parquet or Arrow, or is a CSV file with a block that does
/// not take the fast path (a quote or a lone `\r`).
pub(super) fn read(path: &Path, format: Format, key: &[String], block: usize) -> Result<Option<Keys>, InputError> {
    let io = |source| InputError::Io { path: path.to_owned(), source };
    let (text, header) = match format {
        Format::Text => (true, false),
        Format::Csv { header } => (false, header),
        _ => return Ok(None),
    };
    // Looked at before opening: opening a named pipe and closing it again would end its
    // writer's stream before the whole-file reader opens it (and refuses a bad --key).
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Ok(None);
    }
    if text {
        rows::check_text_key(path, key)?;
    }
    let file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Ok(None);
    }
    let stamp = stamp_of(&meta);
    // Read up to the stamped length: rows appended meanwhile are not this reading's.
    let mut blocks = Blocks::new(file.take(stamp.0), block);
    let mut r = KeyReader {
        path,
        key,
        text,
        room: rows_room(),
        started: text,
        need_header: header,
        head: None,
        body: None,
        layout: text.then(|| (1, vec![0])),
        data: Vec::new(),
        keys: Vec::new(),
        offset: 0,
        lines_before: 0,
    };
    let mut failed = None;
    // What precedes the rows, hashed block by block until the rows are reached.
    let (mut head, mut head_done) = (blake3::Hasher::new_derive_key(HEAD_DIGEST), false);
    while let Some(b) = blocks.next().map_err(io)? {
        let mut from = 0;
        if !r.started {
            from = rows::start_of_records(b);
            r.started = from < b.len();
        }
        if !text && !rows::is_plain(&b[from..]) {
            return Ok(None);
        }
        // After an error the rest is only checked for quotes: a file that has one anywhere
        // is the whole-file reader's, errors included.
        if failed.is_none()
            && let Err(e) = r.block(b, from)
        {
            failed = Some(e);
            (r.data, r.keys) = (Vec::new(), Vec::new());
        }
        if !head_done {
            head.update(&b[..r.body.map_or(b.len(), |body| (body - r.offset) as usize)]);
            head_done = r.body.is_some();
        }
        r.lines_before += memchr::memchr_iter(b'\n', b).count() as u64;
        r.offset += b.len() as u64;
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let (width, key_cols) = match r.layout {
        Some(l) => l,
        None => (0, rows::key_columns(path, r.head.as_ref().map(|(n, _)| n.as_slice()), 0, key)?),
    };
    let body = r.body.unwrap_or(r.offset);
    let head = *head.finalize().as_bytes();
    let streamed = Streamed { path: path.to_owned(), text, body, rows: r.keys.len(), stamp, head, block };
    Ok(Some(Keys { streamed, header: r.head, width, key_cols, data: r.data, keys: r.keys }))
}

/// What [`read`] has found so far.
struct KeyReader<'a> {
    path: &'a Path,
    key: &'a [String],
    text: bool,
    /// Most rows that memory allows.
    room: usize,
    /// Whether the first record has been reached (CSV: byte order marks and blank lines
    /// before it are skipped).
    started: bool,
    need_header: bool,
    head: Option<rows::Header>,
    /// Where the data rows start, once known.
    body: Option<u64>,
    /// Fields per row and the key columns, once known.
    layout: Option<(usize, Vec<usize>)>,
    /// The keys' bytes (after the header's line).
    data: Vec<u8>,
    keys: Vec<Span>,
    /// Bytes and lines of the blocks before this one.
    offset: u64,
    lines_before: u64,
}

impl KeyReader<'_> {
    /// Takes the header and keys of block `b`, of which the first `from` bytes come
    /// before the first record.
    fn block(&mut self, b: &[u8], mut from: usize) -> Result<(), InputError> {
        let (path, by) = (self.path, self.lines_before);
        if self.started && self.need_header {
            let (names, after) = rows::plain_header(path, b, from).map_err(|e| shifted(e, by))?;
            self.head = names.map(|(names, raw)| {
                self.data.extend_from_slice(raw.of(b));
                (names, Span { start: 0, end: self.data.len() })
            });
            from = after;
            self.need_header = false;
        }
        if self.started && !self.need_header && self.body.is_none() {
            self.body = Some(self.offset + from as u64);
        }
        let found = match (self.text, self.body) {
            (true, _) => rows::lines(b, from),
            (false, Some(_)) => rows::plain_rows(b, from),
            (false, None) => vec![],
        };
        if self.layout.is_none() && (self.head.is_some() || !found.is_empty()) {
            let width = rows::plain_width(b, self.head.as_ref(), found.first());
            let names = self.head.as_ref().map(|(n, _)| n.as_slice());
            self.layout = Some((width, rows::key_columns(path, names, width, self.key)?));
        }
        let Some((width, key_cols)) = &self.layout else { return Ok(()) };
        let layout = if self.text { Layout::Text } else { Layout::Csv { width: *width, key_cols } };
        let chunks = rows::plain_keys(path, b, &found, layout, true).map_err(|e| shifted(e, by))?;
        let rows = self.keys.len() + found.len();
        if rows > self.room {
            return Err(too_many_rows(path, rows, self.room));
        }
        self.keys.extend(rows::place_keys(chunks.into_iter(), found.len(), &mut self.data));
        Ok(())
    }
}

impl Streamed {
    /// Calls `f` on each data row of the file, in order, with its index and raw bytes
    /// (without its line end).
    pub fn visit(&self, mut f: impl FnMut(usize, &[u8]) -> Result<(), InputError>) -> Result<(), InputError> {
        let io = |source| InputError::Io { path: self.path.clone(), source };
        let mut file = File::open(&self.path).map_err(io)?;
        if stamp_of(&file.metadata().map_err(io)?) != self.stamp {
            return Err(self.changed());
        }
        let mut head = blake3::Hasher::new_derive_key(HEAD_DIGEST);
        std::io::copy(&mut (&mut file).take(self.body), &mut head).map_err(io)?;
        if *head.finalize().as_bytes() != self.head {
            return Err(self.changed());
        }
        file.seek(SeekFrom::Start(self.body)).map_err(io)?;
        let mut blocks = Blocks::new(file.take(self.stamp.0.saturating_sub(self.body)), self.block);
        let mut row = 0;
        while let Some(b) = blocks.next().map_err(io)? {
            let found = if self.text { rows::lines(b, 0) } else { rows::plain_rows(b, 0) };
            for raw in found {
                if row == self.rows {
                    return Err(self.changed());
                }
                f(row, raw.of(b))?;
                row += 1;
            }
        }
        if row != self.rows {
            return Err(self.changed());
        }
        Ok(())
    }

    /// The error for a file that is not as it was when its keys were read.
    pub fn changed(&self) -> InputError {
        InputError::Invalid(format!("{}: the file changed since it was read", self.path.display()))
    }
}
