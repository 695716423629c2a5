//! Splitting an input file's bytes into rows and keys, without a copy per row.
//!
//! A row is a byte range of the file and is written back as it was. A key is a byte range
//! of the file too when it is one field written as it is; a key that must be built
//! (several key columns joined, or a quoted field unescaped) is built once into a second
//! buffer that [`parse_csv`] appends to the file's bytes.
//!
//! A CSV file without a quote character is split into lines and fields on all threads;
//! any quote sends it through the csv crate's RFC 4180 reader on one thread. Both give
//! the same rows and keys for a file without quotes (tested, and fuzzed by `csv`).

use crate::error::InputError;
use rayon::prelude::*;
use std::path::Path;

/// A byte range of an input's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    fn new(start: usize, end: usize) -> Self {
        Self { start, end }
    }

    /// The bytes of `data` in this range.
    pub fn of(self, data: &[u8]) -> &[u8] {
        &data[self.start..self.end]
    }
}

/// A CSV file's rows, keys and header, its buffer extended by the built keys.
#[derive(Debug)]
pub(super) struct CsvRows {
    /// The header's field names and its raw line, if the file has a header.
    pub header: Option<(Vec<String>, Span)>,
    /// Fields per row.
    pub width: usize,
    /// The key columns (0-based).
    pub key_cols: Vec<usize>,
    /// Each data row's raw bytes (without its line end).
    pub rows: Vec<Span>,
    /// Each data row's key.
    pub keys: Vec<Span>,
}

/// Where a key's bytes are while the rows are split: in the file, or in a chunk's buffer
/// of built keys (placed after the file's bytes once all chunks are done).
#[derive(Clone, Copy)]
pub(super) enum Key {
    Field(Span),
    Built(Span),
}

/// Rows per parallel chunk.
const CHUNK_ROWS: usize = 1 << 14;

/// The UTF-8 byte order mark, which spreadsheet programs put before CSV files.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Where the first record starts: after blank lines and byte order marks (a BOM after a
/// blank line would otherwise come first in a file of the rows written back).
pub(super) fn start_of_records(data: &[u8]) -> usize {
    let mut at = 0;
    loop {
        if data[at..].starts_with(BOM) {
            at += BOM.len();
        } else if matches!(data.get(at), Some(b'\n' | b'\r')) {
            at += 1;
        } else {
            return at;
        }
    }
}

/// Quotes the first field of the first line of a CSV file when that line starts with a
/// byte order mark, which a reader takes for an encoding mark and drops: a row written
/// back byte for byte whose key starts with one then reads back the same.
pub(super) fn quote_leading_bom(line: &mut Vec<u8>) {
    if !line.starts_with(BOM) {
        return;
    }
    // The field is unquoted (it starts with the mark, not a quote): it ends at a comma.
    let end = line.iter().position(|&b| matches!(b, b',' | b'\n' | b'\r')).unwrap_or(line.len());
    let mut quoted = Vec::with_capacity(line.len() + 2);
    write_field(&mut quoted, &line[..end], false);
    quoted.extend_from_slice(&line[end..]);
    *line = quoted;
}

/// The 1-based line of byte `at` of `data`.
pub(super) fn line_of(data: &[u8], at: usize) -> u64 {
    memchr::memchr_iter(b'\n', &data[..at.min(data.len())]).count() as u64 + 1
}

/// Every line of `data` from `from` (a final line end does not start another line), each
/// without its `\n` or `\r\n`.
pub(super) fn lines(data: &[u8], from: usize) -> Vec<Span> {
    // Counted first: a guessed capacity doubles past the count, and at 2^24 rows the
    // unused half is 256 MiB.
    let mut out = Vec::with_capacity(memchr::memchr_iter(b'\n', &data[from..]).count() + 1);
    let mut start = from;
    for nl in memchr::memchr_iter(b'\n', &data[from..]) {
        out.push(trim_cr(data, Span::new(start, from + nl)));
        start = from + nl + 1;
    }
    if start < data.len() {
        out.push(trim_cr(data, Span::new(start, data.len())));
    }
    out
}

/// The first byte from `at` that is not a line end (the csv reader places a record
/// after a blank line at the blank line).
fn skip_line_ends(data: &[u8], mut at: usize) -> usize {
    while at < data.len() && matches!(data[at], b'\n' | b'\r') {
        at += 1;
    }
    at
}

fn trim_cr(data: &[u8], s: Span) -> Span {
    if s.end > s.start && data[s.end - 1] == b'\r' { Span::new(s.start, s.end - 1) } else { s }
}

/// Splits CSV `data` (in place: built keys are appended to it) into its header, rows and
/// the keys named by `key` (header names, or 1-based indices without a header; empty
/// means the first column).
pub(super) fn parse_csv(path: &Path, data: &mut Vec<u8>, header: bool, key: &[String]) -> Result<CsvRows, InputError> {
    let from = start_of_records(data);
    let (parsed, built) = if is_plain(&data[from..]) {
        split_plain(path, data, from, header, key)?
    } else {
        split_quoted(path, data, from, header, key)?
    };
    let (header, width, key_cols, rows, keys) = parsed;
    let keys = place_keys(keys.into_iter().zip(built), rows.len(), data);
    Ok(CsvRows { header, width, key_cols, rows, keys })
}

/// Each key's range in `data` once each chunk's built keys are placed after its bytes.
pub(super) fn place_keys(
    chunks: impl Iterator<Item = (Vec<Key>, Vec<u8>)>,
    rows: usize,
    data: &mut Vec<u8>,
) -> Vec<Span> {
    let mut keys = Vec::with_capacity(rows);
    for (chunk, arena) in chunks {
        let base = data.len();
        keys.extend(chunk.into_iter().map(|k| match k {
            Key::Field(s) => s,
            Key::Built(s) => Span::new(base + s.start, base + s.end),
        }));
        data.extend_from_slice(&arena);
    }
    keys
}

/// Whether `data` can take the fast path: no quote, and every `\r` ends a line (the csv
/// reader ends a record at a lone `\r` too).
pub(super) fn is_plain(data: &[u8]) -> bool {
    memchr::memchr(b'"', data).is_none() && memchr::memchr_iter(b'\r', data).all(|at| data.get(at + 1) == Some(&b'\n'))
}

/// A header's names and its raw line.
pub(super) type Header = (Vec<String>, Span);

/// A chunk of rows' keys and the buffer of those that were built.
pub(super) type KeyChunk = (Vec<Key>, Vec<u8>);

type Split = (Option<Header>, usize, Vec<usize>, Vec<Span>, Vec<Vec<Key>>);

/// The fast path: no field is quoted, so a row is a non-empty line and its fields are
/// split at commas.
fn split_plain(
    path: &Path,
    data: &[u8],
    from: usize,
    header: bool,
    key: &[String],
) -> Result<(Split, Vec<Vec<u8>>), InputError> {
    let (head, body) = if header { plain_header(path, data, from)? } else { (None, from) };
    let rows = plain_rows(data, body);
    let width = plain_width(data, head.as_ref(), rows.first());
    let key_cols = key_columns(path, head.as_ref().map(|(n, _)| n.as_slice()), width, key)?;
    let layout = Layout::Csv { width, key_cols: &key_cols };
    let (keys, built) = plain_keys(path, data, &rows, layout, false)?.into_iter().unzip();
    Ok(((head, width, key_cols, rows, keys), built))
}

/// A fast-path file's header (the first line from `from` that is not empty: its names
/// and raw line) and where the rows after it start.
pub(super) fn plain_header(path: &Path, data: &[u8], from: usize) -> Result<(Option<Header>, usize), InputError> {
    let mut body = from;
    for line in memchr::memchr_iter(b'\n', &data[from..]).map(|nl| from + nl).chain([data.len()]) {
        let raw = trim_cr(data, Span::new(body, line));
        body = (line + 1).min(data.len());
        if raw.end > raw.start {
            let text = std::str::from_utf8(raw.of(data))
                .map_err(|_| InputError::InvalidUtf8 { path: path.to_owned(), line: line_of(data, raw.start) })?;
            return Ok((Some((text.split(',').map(str::to_string).collect(), raw)), body));
        }
    }
    Ok((None, body))
}

/// A fast-path file's rows from `body`: its lines that are not empty (the csv reader
/// skips empty lines too).
pub(super) fn plain_rows(data: &[u8], body: usize) -> Vec<Span> {
    let mut rows = lines(data, body);
    rows.retain(|s| s.end > s.start);
    rows
}

/// Fields per row: the header's, else the first row's, else none.
pub(super) fn plain_width(data: &[u8], head: Option<&Header>, first: Option<&Span>) -> usize {
    match (head, first) {
        (Some((names, _)), _) => names.len(),
        (None, Some(first)) => memchr::memchr_iter(b',', first.of(data)).count() + 1,
        (None, None) => 0,
    }
}

/// How a fast-path row holds its key.
#[derive(Clone, Copy)]
pub(super) enum Layout<'a> {
    /// A text line: the line is the key.
    Text,
    /// A CSV row of `width` fields, keyed by the fields `key_cols`.
    Csv { width: usize, key_cols: &'a [usize] },
}

/// Each row's key, a chunk of rows at a time on all threads, after checking that the row
/// is UTF-8 and (CSV) has the layout's width. A key is a range of `data` where it is one
/// field as written, unless `copy`; otherwise it is built into its chunk's buffer.
pub(super) fn plain_keys(
    path: &Path,
    data: &[u8],
    rows: &[Span],
    layout: Layout<'_>,
    copy: bool,
) -> Result<Vec<KeyChunk>, InputError> {
    let utf8 = |s: Span| {
        std::str::from_utf8(s.of(data))
            .map_err(|_| InputError::InvalidUtf8 { path: path.to_owned(), line: line_of(data, s.start) })
    };
    let chunks: Vec<Result<KeyChunk, InputError>> = rows
        .par_chunks(CHUNK_ROWS)
        .map(|chunk| {
            let mut keys = Vec::with_capacity(chunk.len());
            let mut arena = Vec::new();
            let mut fields: Vec<Span> = Vec::new();
            let mut joined = Vec::new();
            let built = |arena: &mut Vec<u8>, bytes: &[u8]| {
                let at = arena.len();
                arena.extend_from_slice(bytes);
                Key::Built(Span::new(at, arena.len()))
            };
            for &row in chunk {
                utf8(row)?;
                let (width, key_cols) = match layout {
                    Layout::Text => {
                        keys.push(if copy { built(&mut arena, row.of(data)) } else { Key::Field(row) });
                        continue;
                    }
                    Layout::Csv { width, key_cols } => (width, key_cols),
                };
                fields.clear();
                let mut start = row.start;
                for comma in memchr::memchr_iter(b',', row.of(data)) {
                    fields.push(Span::new(start, row.start + comma));
                    start = row.start + comma + 1;
                }
                fields.push(Span::new(start, row.end));
                if fields.len() != width {
                    return Err(InputError::Csv {
                        path: path.to_owned(),
                        line: line_of(data, row.start),
                        message: format!(
                            "found record with {} fields, but the previous record has {width} fields",
                            fields.len()
                        ),
                    });
                }
                keys.push(match key_cols {
                    [c] if !copy => Key::Field(fields[*c]),
                    cols => {
                        join_fields(cols.iter().map(|&c| fields[c].of(data)), cols.len(), &mut joined);
                        built(&mut arena, &joined)
                    }
                });
            }
            Ok((keys, arena))
        })
        .collect();
    // The first error in the file's order, whichever thread met it first.
    chunks.into_iter().collect()
}

/// The key of a fast-path row `row`, as [`plain_keys`] finds it: the row itself (text),
/// its one key field, or the key fields joined into `out`. A row without a key field
/// (ragged) gives an empty key.
pub(super) fn plain_key<'a>(row: &'a [u8], layout: Layout<'_>, out: &'a mut Vec<u8>) -> &'a [u8] {
    let field = |c: usize| row.split(|&b| b == b',').nth(c).unwrap_or(b"");
    match layout {
        Layout::Text => row,
        Layout::Csv { key_cols: [c], .. } => field(*c),
        Layout::Csv { key_cols, .. } => {
            join_fields(key_cols.iter().map(|&c| field(c)), key_cols.len(), out);
            out
        }
    }
}

/// Refuses key columns for a text file, whose line is its key.
pub(super) fn check_text_key(path: &Path, key: &[String]) -> Result<(), InputError> {
    if !key.is_empty() && key != ["1"] {
        return Err(InputError::Invalid(format!(
            "{}: a text file has one item per line; --key does not apply",
            path.display()
        )));
    }
    Ok(())
}

/// The general path: RFC 4180 records from the csv crate, one thread; every key is built.
fn split_quoted(
    path: &Path,
    data: &[u8],
    from: usize,
    header: bool,
    key: &[String],
) -> Result<(Split, Vec<Vec<u8>>), InputError> {
    let mut rdr = csv::ReaderBuilder::new().has_headers(false).flexible(false).from_reader(&data[from..]);
    // Lines are counted in the file (the csv crate does not count blank lines).
    let csv_err = |e: csv::Error| {
        let line = e.position().map_or(0, |p| line_of(data, skip_line_ends(data, from + p.byte() as usize)));
        let message = match e.kind() {
            csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
                format!("found record with {len} fields, but the previous record has {expected_len} fields")
            }
            _ => e.to_string(),
        };
        InputError::Csv { path: path.to_owned(), line, message }
    };
    // Each record's start; a record runs to the next one's start.
    let mut starts: Vec<usize> = Vec::new();
    let mut rec = csv::ByteRecord::new();
    let mut next = |rdr: &mut csv::Reader<&[u8]>, rec: &mut csv::ByteRecord| -> Result<bool, InputError> {
        let more = rdr.read_byte_record(rec).map_err(csv_err)?;
        if more {
            let pos = rec.position().expect("the reader sets positions");
            starts.push(from + pos.byte() as usize);
        }
        Ok(more)
    };
    let text = |f: &[u8]| String::from_utf8_lossy(f).into_owned();
    let names = match header && next(&mut rdr, &mut rec)? {
        true => Some(rec.iter().map(text).collect::<Vec<_>>()),
        false => None,
    };
    let mut arena = Vec::new();
    let mut keys = Vec::new();
    let mut joined = Vec::new();
    let mut cols: Option<(usize, Vec<usize>)> = None;
    while next(&mut rdr, &mut rec)? {
        if cols.is_none() {
            let width = names.as_ref().map_or(rec.len(), Vec::len);
            cols = Some((width, key_columns(path, names.as_deref(), width, key)?));
        }
        let (_, key_cols) = cols.as_ref().expect("set above");
        join_fields(key_cols.iter().map(|&c| rec.get(c).unwrap_or(b"")), key_cols.len(), &mut joined);
        let at = arena.len();
        arena.extend_from_slice(&joined);
        keys.push(Key::Built(Span::new(at, arena.len())));
    }
    let (width, key_cols) = match cols {
        Some(c) => c,
        None => {
            let width = names.as_ref().map_or(0, Vec::len);
            (width, key_columns(path, names.as_deref(), width, key)?)
        }
    };
    // Raw rows without line ends (blank lines between records are skipped by the reader;
    // a quoted field never ends in a line end).
    let mut spans = Vec::with_capacity(starts.len());
    for (i, &start) in starts.iter().enumerate() {
        let mut s = Span::new(start, starts.get(i + 1).map_or(data.len(), |&r| r));
        while s.end > s.start && matches!(data[s.end - 1], b'\n' | b'\r') {
            s.end -= 1;
        }
        s.start = skip_line_ends(data, s.start).min(s.end);
        if std::str::from_utf8(s.of(data)).is_err() {
            return Err(InputError::InvalidUtf8 { path: path.to_owned(), line: line_of(data, s.start) });
        }
        spans.push(s);
    }
    // An unclosed quote runs to the end of the file, so only the last record can have one.
    if let Some(&last) = spans.last()
        && !closes_its_quotes(last.of(data))
    {
        return Err(InputError::Csv {
            path: path.to_owned(),
            line: line_of(data, last.start),
            message: "a quoted field is not closed before the end of the file".into(),
        });
    }
    let head = names.map(|n| (n, spans.remove(0)));
    Ok(((head, width, key_cols, spans, vec![keys]), vec![arena]))
}

/// Whether the csv reader ends the record `raw` within it: between two other records
/// (the first keeps a byte order mark in `raw` from being read as the file's), it reads
/// three records unless a quote in `raw` is still open.
fn closes_its_quotes(raw: &[u8]) -> bool {
    let probe = [b",\n", raw, b"\n,"].concat();
    let mut rdr = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(&probe[..]);
    rdr.byte_records().count() == 3
}

/// Resolves key column names or 1-based indices to 0-based positions.
pub(super) fn key_columns(
    path: &Path,
    header: Option<&[String]>,
    width: usize,
    key: &[String],
) -> Result<Vec<usize>, InputError> {
    if key.is_empty() {
        return Ok(vec![0]);
    }
    key.iter()
        .map(|k| match header {
            Some(h) => h.iter().position(|c| c == k).ok_or_else(|| InputError::MissingColumn {
                path: path.to_owned(),
                column: k.clone(),
                available: h.join(", "),
            }),
            None => match k.parse::<usize>() {
                Ok(i) if i >= 1 && (i <= width || width == 0) => Ok(i - 1),
                _ => Err(InputError::ColumnIndex { path: path.to_owned(), index: k.clone(), columns: width }),
            },
        })
        .collect()
}

/// The fields of one raw CSV row (unquoted and unescaped where the row has quotes).
pub(super) fn fields(row: &[u8]) -> Vec<std::borrow::Cow<'_, [u8]>> {
    if memchr::memchr(b'"', row).is_none() {
        return row.split(|&b| b == b',').map(std::borrow::Cow::Borrowed).collect();
    }
    let mut rdr = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(row);
    let mut rec = csv::ByteRecord::new();
    match rdr.read_byte_record(&mut rec) {
        Ok(true) => rec.iter().map(|f| std::borrow::Cow::Owned(f.to_vec())).collect(),
        _ => vec![std::borrow::Cow::Borrowed(row)],
    }
}

/// Appends `field` to `out` as a CSV field: quoted (and its quotes doubled) when it holds
/// a comma, a quote or a line end, when it is empty and alone on its row, or when it
/// starts with a byte order mark (which a reader would drop at the start of a file).
pub(super) fn write_field(out: &mut Vec<u8>, field: &[u8], alone: bool) {
    let quote = (alone && field.is_empty())
        || field.starts_with(BOM)
        || field.iter().any(|&b| matches!(b, b',' | b'"' | b'\n' | b'\r'));
    if !quote {
        out.extend_from_slice(field);
        return;
    }
    out.push(b'"');
    for &b in field {
        if b == b'"' {
            out.push(b'"');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// A CSV file's rows and keys (and header names) as bytes, split by the fast path
/// (`general` false) or the csv crate (`general` true), for tests and fuzzing that the two
/// agree; `None` if the file cannot take the fast path.
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::type_complexity)]
pub(crate) fn split_with(
    text: &[u8],
    header: bool,
    key: &[String],
    general: bool,
) -> Option<Result<(Vec<Vec<u8>>, Vec<Vec<u8>>, Option<Vec<String>>), String>> {
    let from = start_of_records(text);
    if !is_plain(&text[from..]) {
        return None;
    }
    let mut data = text.to_vec();
    let path = Path::new("t");
    let split = if general {
        split_quoted(path, &data, from, header, key)
    } else {
        split_plain(path, &data, from, header, key)
    };
    let ((head, _, _, rows, keys), built) = match split {
        Ok(s) => s,
        Err(e) => return Some(Err(e.to_string())),
    };
    let flat = place_keys(keys.into_iter().zip(built), rows.len(), &mut data);
    let rows = rows.iter().map(|s| s.of(&data).to_vec()).collect();
    let keys = flat.iter().map(|s| s.of(&data).to_vec()).collect();
    Some(Ok((rows, keys, head.map(|h| h.0))))
}

/// Joins the `n` key fields of one row into `out` as every front end must, so that
/// parties reading their keys differently (CSV, pandas, Arrow) still agree: the field
/// itself for one key column, each field with a little-endian u32 length prefix for
/// several, and nothing if every field is empty (such a row takes no part).
pub fn join_fields<'a>(fields: impl Iterator<Item = &'a [u8]> + Clone, n: usize, out: &mut Vec<u8>) {
    out.clear();
    if n == 1 {
        fields.take(1).for_each(|f| out.extend_from_slice(f));
        return;
    }
    if fields.clone().all(<[u8]>::is_empty) {
        return;
    }
    for f in fields {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::type_complexity)]
    fn both(text: &[u8], header: bool, key: &[&str]) -> [(Vec<Vec<u8>>, Vec<Vec<u8>>, Option<Vec<String>>); 2] {
        let key: Vec<String> = key.iter().map(|k| k.to_string()).collect();
        [false, true].map(|general| split_with(text, header, &key, general).unwrap().unwrap())
    }

    #[test]
    fn the_fast_and_the_general_path_agree_without_quotes() {
        let text = b"a,b,c\r\n1,x,y\n\n2,,z\r\n3,p,q";
        for key in [&[][..], &["b"], &["c", "a"]] {
            let [plain, quoted] = both(text, true, key);
            assert_eq!(plain, quoted, "key {key:?}");
            assert_eq!(plain.0, [b"1,x,y".to_vec(), b"2,,z".to_vec(), b"3,p,q".to_vec()]);
        }
        let [plain, quoted] = both(b"x,1\ny,2\n", false, &["2", "1"]);
        assert_eq!(plain, quoted);
        assert!(plain.2.is_none());
        // A lone \r ends a record for the csv reader: such a file takes the general path.
        let e = parse_csv(Path::new("t"), &mut b"k\n\"open\n,x".to_vec(), true, &[]).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("not closed"), "{e}");
        assert!(split_with(b"a\rb\n", false, &[], false).is_none());
    }

    #[test]
    fn quoted_fields_are_unescaped_and_rows_kept_as_written() {
        let mut data = b"k,v\n\"a,\"\"b\"\"\",1\n\"multi\nline\",2\n".to_vec();
        let rows = parse_csv(Path::new("t"), &mut data, true, &[]).unwrap();
        let keys: Vec<&[u8]> = rows.keys.iter().map(|s| s.of(&data)).collect();
        assert_eq!(keys, [&b"a,\"b\""[..], b"multi\nline"]);
        assert_eq!(rows.rows[1].of(&data), b"\"multi\nline\",2");
        assert_eq!(fields(rows.rows[0].of(&data))[0].as_ref(), b"a,\"b\"");
    }

    #[test]
    fn fields_written_back_read_the_same() {
        for f in [&b""[..], b"plain", b"a,b", b"say \"hi\"", b"two\nlines", b"cr\r"] {
            let mut row = Vec::new();
            write_field(&mut row, f, true);
            row.extend_from_slice(b",x");
            assert_eq!(fields(&row)[0].as_ref(), f);
        }
    }

    #[test]
    fn a_bom_is_skipped_and_ragged_rows_name_their_line() {
        let mut data = b"\xEF\xBB\xBFid,n\n1,2\n".to_vec();
        let rows = parse_csv(Path::new("t"), &mut data, true, &["id".into()]).unwrap();
        assert_eq!(rows.header.unwrap().0, ["id", "n"]);
        for text in [&b"a,b\n1,2\n\n3\n"[..], b"a,b\n1,2\n\n\"3\"\n"] {
            let e = parse_csv(Path::new("t"), &mut text.to_vec(), true, &[]).unwrap_err().to_string();
            assert!(e.contains("line 4"), "{e}");
        }
    }
}
