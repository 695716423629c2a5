//! Reading items from users' files and writing matching rows back.
//!
//! Inputs are CSV with a header (key columns by name, default the first column), CSV
//! without a header (key columns by 1-based index), or plain text (one item per line).
//!
//! Policy, as docs/io.md states it:
//! - an item is the bytes of its key column; several key columns are joined
//!   unambiguously (each field length-prefixed), so `("a,b","c")` ≠ `("a","b,c")`;
//! - fields are taken as they are: no trimming or case folding;
//! - rows whose key is empty are skipped and counted;
//! - a key that appears on several rows is one item for the protocol, and the output
//!   holds every row with a matching key (duplicates counted in [`ReadStats`]);
//! - invalid UTF-8, a missing key column or a ragged row is an error naming the line.

use csv::StringRecord;
use rayon::prelude::*;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// The caller's input cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A key column named on the command line is not in the header.
    #[error("{path}: no column named '{column}' (columns: {available})")]
    MissingColumn {
        /// The file.
        path: PathBuf,
        /// The missing name.
        column: String,
        /// The header's names, comma-separated.
        available: String,
    },
    /// A key column index outside the rows.
    #[error("{path}: key column {index} does not exist (rows have {columns} columns; indices start at 1)")]
    ColumnIndex {
        /// The file.
        path: PathBuf,
        /// The 1-based index asked for.
        index: String,
        /// Columns per row.
        columns: usize,
    },
    /// A line is not UTF-8.
    #[error("{path}: line {line} is not valid UTF-8")]
    InvalidUtf8 {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
    },
    /// The CSV is malformed (e.g. a row with a different number of fields).
    #[error("{path}: line {line}: {message}")]
    Csv {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// Two items of a set are equal (a set holds each item once; [`ItemSet`] merges
    /// rows with one key, a library caller must do the same).
    #[error("items {first} and {second} are equal: give each item once")]
    Duplicate {
        /// Index of the first occurrence.
        first: usize,
        /// Index of the repeat.
        second: usize,
    },
    /// Any other invalid input.
    #[error("{0}")]
    Invalid(String),
}

/// The layout of an input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values; `header` says whether the first row names the columns.
    Csv {
        /// First row is a header.
        header: bool,
    },
    /// One item per line (a trailing `\r` is dropped).
    Text,
}

impl Format {
    /// Text for `.txt` files, CSV with a header otherwise.
    pub fn guess(path: &Path, no_header: bool) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some("txt") => Format::Text,
            _ => Format::Csv { header: !no_header },
        }
    }
}

/// Counts from reading an input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReadStats {
    /// Data rows read (header excluded).
    pub rows: usize,
    /// Rows skipped because their key was empty.
    pub empty_keys: usize,
    /// Rows whose key already appeared on an earlier row.
    pub duplicate_rows: usize,
}

/// A user's input: its rows and the distinct items derived from their keys.
#[derive(Debug, Clone)]
pub struct ItemSet {
    format: Format,
    header: Option<StringRecord>,
    rows: Vec<StringRecord>,
    /// Item index of each row, `u32::MAX` for a skipped row.
    row_item: Vec<u32>,
    items: Vec<Vec<u8>>,
    /// The key columns (0-based).
    key_cols: Vec<usize>,
    stats: ReadStats,
}

const SKIPPED: u32 = u32::MAX;

impl ItemSet {
    /// Reads `path` in `format`; `key` names the key columns (header names, or 1-based
    /// indices without a header); empty means the first column.
    pub fn read(path: &Path, format: Format, key: &[String]) -> Result<Self, InputError> {
        let io = |source| InputError::Io { path: path.to_owned(), source };
        let file = BufReader::with_capacity(1 << 16, File::open(path).map_err(io)?);
        Self::parse(file, path, format, key)
    }

    /// [`ItemSet::read`] from any reader; `path` names the input in errors.
    pub fn parse(file: impl Read, path: &Path, format: Format, key: &[String]) -> Result<Self, InputError> {
        match format {
            Format::Text => {
                if !key.is_empty() && key != ["1"] {
                    return Err(InputError::Invalid(format!(
                        "{}: a text file has one item per line; --key does not apply",
                        path.display()
                    )));
                }
                Self::from_text(path, file)
            }
            Format::Csv { header } => Self::from_csv(path, file, header, key),
        }
    }

    fn from_text(path: &Path, mut file: impl Read) -> Result<Self, InputError> {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|source| InputError::Io { path: path.to_owned(), source })?;
        let mut rows = Vec::new();
        for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let text = std::str::from_utf8(line)
                .map_err(|_| InputError::InvalidUtf8 { path: path.to_owned(), line: i as u64 + 1 })?;
            rows.push(StringRecord::from(vec![text]));
        }
        if bytes.ends_with(b"\n") {
            rows.pop(); // the empty "line" after the final newline
        }
        Ok(Self::index(Format::Text, None, rows, &[0]))
    }

    fn from_csv(path: &Path, file: impl Read, header: bool, key: &[String]) -> Result<Self, InputError> {
        let mut rdr = csv::ReaderBuilder::new().has_headers(header).flexible(false).from_reader(file);
        let csv_err = |e: csv::Error| {
            let line = e.position().map_or(0, |p| p.line());
            match e.kind() {
                csv::ErrorKind::Utf8 { .. } => InputError::InvalidUtf8 { path: path.to_owned(), line },
                csv::ErrorKind::Io(_) => {
                    InputError::Io { path: path.to_owned(), source: std::io::Error::other(e.to_string()) }
                }
                _ => InputError::Csv { path: path.to_owned(), line, message: e.to_string() },
            }
        };
        let header_row = if header { Some(rdr.headers().map_err(csv_err)?.clone()) } else { None };
        let mut rows = Vec::new();
        for rec in rdr.records() {
            rows.push(rec.map_err(csv_err)?);
        }
        let width = header_row.as_ref().or(rows.first()).map_or(0, |r| r.len());
        let columns = key_columns(path, header_row.as_ref(), width, key)?;
        Ok(Self::index(Format::Csv { header }, header_row, rows, &columns))
    }

    /// An item set from plain keys (one column named `key`), e.g. generated data.
    pub fn from_keys<S: AsRef<str>>(keys: impl IntoIterator<Item = S>) -> Self {
        let rows = keys.into_iter().map(|k| StringRecord::from(vec![k.as_ref()])).collect();
        Self::index(Format::Csv { header: true }, Some(StringRecord::from(vec!["key"])), rows, &[0])
    }

    fn index(format: Format, header: Option<StringRecord>, rows: Vec<StringRecord>, columns: &[usize]) -> Self {
        let n = rows.len();
        let mut keys: Vec<Vec<u8>> = rows
            .par_iter()
            .map(|row| {
                let mut key = Vec::new();
                join_fields(columns.iter().map(|&c| row.get(c).unwrap_or("").as_bytes()), columns.len(), &mut key);
                key
            })
            .collect();
        let first = first_rows(&keys);
        let mut items: Vec<Vec<u8>> = Vec::new();
        let mut row_item = Vec::with_capacity(n);
        let mut stats = ReadStats { rows: n, ..Default::default() };
        for (i, &f) in first.iter().enumerate() {
            let id = if f == SKIPPED {
                stats.empty_keys += 1;
                SKIPPED
            } else if f as usize == i {
                items.push(std::mem::take(&mut keys[i]));
                items.len() as u32 - 1
            } else {
                stats.duplicate_rows += 1;
                row_item[f as usize]
            };
            row_item.push(id);
        }
        Self { format, header, rows, row_item, items, key_cols: columns.to_vec(), stats }
    }

    /// The distinct items, in order of first appearance.
    pub fn items(&self) -> &[Vec<u8>] {
        &self.items
    }

    /// Number of key columns joined into each item.
    pub fn key_columns(&self) -> usize {
        self.key_cols.len()
    }

    /// The key columns' names: from the header, else `key` (or `key1`, `key2`, …).
    pub fn key_names(&self) -> Vec<String> {
        match &self.header {
            Some(h) => self.key_cols.iter().map(|&c| h.get(c).unwrap_or("key").to_string()).collect(),
            None if self.key_cols.len() == 1 => vec!["key".into()],
            None => (1..=self.key_cols.len()).map(|i| format!("key{i}")).collect(),
        }
    }

    /// For each distinct item, the sum of `column` (a header name, or a 1-based index
    /// without a header) over the item's rows; every value must be a non-negative
    /// integer below 2^64.
    pub fn column_sums(&self, column: &str) -> Result<Vec<u128>, InputError> {
        let width = self.header.as_ref().or(self.rows.first()).map_or(0, |r| r.len());
        let col = key_columns(Path::new("input"), self.header.as_ref(), width, &[column.to_string()])?[0];
        let mut sums = vec![0u128; self.items.len()];
        let first_line = if self.header.is_some() { 2 } else { 1 };
        for (line, (row, &item)) in self.rows.iter().zip(&self.row_item).enumerate() {
            if item == SKIPPED {
                continue;
            }
            let text = row.get(col).unwrap_or("").trim();
            let v: u64 = text.parse().map_err(|_| {
                InputError::Invalid(format!(
                    "line {}: value '{text}' in column {column} is not a non-negative integer below 2^64",
                    line + first_line
                ))
            })?;
            sums[item as usize] += u128::from(v);
        }
        Ok(sums)
    }

    /// For every row with a key: its item's index and its value in `column` (a header
    /// name, or a 1-based index without a header). Unlike [`ItemSet::column_values`],
    /// an item repeated on several rows appears once per row.
    pub fn row_values(&self, column: &str) -> Result<Vec<(usize, String)>, InputError> {
        let width = self.header.as_ref().or(self.rows.first()).map_or(0, |r| r.len());
        let col = key_columns(Path::new("input"), self.header.as_ref(), width, &[column.to_string()])?[0];
        Ok(self
            .rows
            .iter()
            .zip(&self.row_item)
            .filter(|&(_, &item)| item != SKIPPED)
            .map(|(row, &item)| (item as usize, row.get(col).unwrap_or("").to_string()))
            .collect())
    }

    /// Counts from reading.
    pub fn stats(&self) -> ReadStats {
        self.stats
    }

    /// Writes the header (if any) and every row whose item index is in `matched`;
    /// returns the number of rows written.
    pub fn write_rows(&self, matched: &[usize], out: impl Write) -> Result<usize, InputError> {
        let mut hit = vec![false; self.items.len()];
        for &i in matched {
            hit[i] = true;
        }
        let err =
            |e: csv::Error| InputError::Io { path: "output".into(), source: std::io::Error::other(e.to_string()) };
        let mut w = csv::WriterBuilder::new().flexible(true).from_writer(out);
        if let Some(h) = &self.header {
            w.write_record(h).map_err(err)?;
        }
        let mut written = 0;
        for (row, &item) in self.rows.iter().zip(&self.row_item) {
            if item != SKIPPED && hit[item as usize] {
                match self.format {
                    // A text line is written as it was, not CSV-quoted.
                    Format::Text => {
                        let line = row.get(0).unwrap_or("");
                        w.write_field(line).map_err(err)?;
                        w.write_record(None::<&[u8]>).map_err(err)?;
                    }
                    Format::Csv { .. } => w.write_record(row).map_err(err)?,
                }
                written += 1;
            }
        }
        w.flush().map_err(|source| InputError::Io { path: "output".into(), source })?;
        Ok(written)
    }

    /// For each distinct item, the values of `columns` (by header name, or 1-based index
    /// without a header) on the item's first row.
    pub fn column_values(&self, columns: &[String]) -> Result<Vec<Vec<String>>, InputError> {
        let width = self.header.as_ref().or(self.rows.first()).map_or(0, |r| r.len());
        let cols = key_columns(Path::new("input"), self.header.as_ref(), width, columns)?;
        let mut out: Vec<Option<Vec<String>>> = vec![None; self.items.len()];
        for (row, &item) in self.rows.iter().zip(&self.row_item) {
            if item != SKIPPED && out[item as usize].is_none() {
                out[item as usize] = Some(cols.iter().map(|&c| row.get(c).unwrap_or("").to_string()).collect());
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Writes the header (if any) followed by `extra_header`, and every row whose item is
    /// in `matched`, followed by that item's extra values.
    pub fn write_rows_with(
        &self,
        matched: &[(usize, Vec<String>)],
        extra_header: &[String],
        out: impl Write,
    ) -> Result<usize, InputError> {
        let mut extra: Vec<Option<&Vec<String>>> = vec![None; self.items.len()];
        for (i, values) in matched {
            extra[*i] = Some(values);
        }
        let err =
            |e: csv::Error| InputError::Io { path: "output".into(), source: std::io::Error::other(e.to_string()) };
        let mut w = csv::WriterBuilder::new().flexible(true).from_writer(out);
        if let Some(h) = &self.header {
            let mut names: Vec<String> = h.iter().map(str::to_string).collect();
            for name in extra_header {
                // A sender column that clashes with one of ours gets the prefix `sender.`.
                names.push(if h.iter().any(|c| c == name) { format!("sender.{name}") } else { name.clone() });
            }
            w.write_record(&names).map_err(err)?;
        }
        let mut written = 0;
        for (row, &item) in self.rows.iter().zip(&self.row_item) {
            if let Some(values) = extra.get(item as usize).copied().flatten() {
                let fields = row.iter().map(str::to_string).chain(values.iter().cloned());
                w.write_record(fields).map_err(err)?;
                written += 1;
            }
        }
        w.flush().map_err(|source| InputError::Io { path: "output".into(), source })?;
        Ok(written)
    }

    /// Writes matching rows to `path`.
    pub fn write_rows_to(&self, matched: &[usize], path: &Path) -> Result<usize, InputError> {
        let file = File::create(path).map_err(|source| InputError::Io { path: path.to_owned(), source })?;
        self.write_rows(matched, std::io::BufWriter::new(file))
    }
}

/// Resolves key column names or 1-based indices to 0-based positions.
fn key_columns(
    path: &Path,
    header: Option<&StringRecord>,
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
                available: h.iter().collect::<Vec<_>>().join(", "),
            }),
            None => match k.parse::<usize>() {
                Ok(i) if i >= 1 && (i <= width || width == 0) => Ok(i - 1),
                _ => Err(InputError::ColumnIndex { path: path.to_owned(), index: k.clone(), columns: width }),
            },
        })
        .collect()
}

/// For each row, the first row with the same key (itself if none is earlier), or
/// [`SKIPPED`] for an empty key (such a row takes no part).
fn first_rows(keys: &[Vec<u8>]) -> Vec<u32> {
    let mut first = super::first_occurrences(keys);
    first.iter_mut().zip(keys).filter(|(_, k)| k.is_empty()).for_each(|(f, _)| *f = SKIPPED);
    first
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

/// The key fields of an item: the inverse of how rows' keys are joined into items
/// (`columns` key columns); `None` if `item` is not such a join.
pub fn split_key(item: &[u8], columns: usize) -> Option<Vec<String>> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if columns == 1 {
        return Some(vec![text(item)]);
    }
    let mut fields = Vec::with_capacity(columns);
    let mut rest = item;
    for _ in 0..columns {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return None;
        }
        fields.push(text(&tail[..len]));
        rest = &tail[len..];
    }
    rest.is_empty().then_some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_rows_point_at_each_keys_first_appearance() {
        let keys: Vec<Vec<u8>> = ["a", "b", "", "a", "c", "b", "a", ""].iter().map(|k| k.as_bytes().to_vec()).collect();
        assert_eq!(first_rows(&keys), [0, 1, SKIPPED, 0, 4, 1, 0, SKIPPED]);
        // Against a map, with many repeats of a few keys and one key on 50 000 rows.
        let keys: Vec<Vec<u8>> = (0..100_000u32)
            .map(|i| if i % 2 == 0 { b"same".to_vec() } else { (i % 997).to_le_bytes().to_vec() })
            .collect();
        let mut seen = std::collections::HashMap::new();
        let want: Vec<u32> = keys.iter().enumerate().map(|(i, k)| *seen.entry(k.clone()).or_insert(i as u32)).collect();
        assert_eq!(first_rows(&keys), want);
    }

    fn file(content: &[u8], ext: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new().suffix(ext).tempfile().unwrap();
        f.write_all(content).unwrap();
        f
    }

    #[test]
    fn csv_with_header_duplicates_and_empty_keys() {
        let f = file(b"name,email\nann,a@x\nbob,\nann,a2@x\n,c@x\n", ".csv");
        let s = ItemSet::read(f.path(), Format::Csv { header: true }, &[]).unwrap();
        assert_eq!(s.items(), &[b"ann".to_vec(), b"bob".to_vec()]);
        assert_eq!(s.stats(), ReadStats { rows: 4, empty_keys: 1, duplicate_rows: 1 });
        let mut out = Vec::new();
        assert_eq!(s.write_rows(&[0], &mut out).unwrap(), 2);
        assert_eq!(String::from_utf8(out).unwrap(), "name,email\nann,a@x\nann,a2@x\n");
    }

    #[test]
    fn keys_split_back_and_values_sum_per_item() {
        let f = file(b"a,b,v\nx,y,3\nx,y,4\np,,10\n", ".csv");
        let s = ItemSet::read(f.path(), Format::Csv { header: true }, &["a".into(), "b".into()]).unwrap();
        assert_eq!(s.key_names(), ["a", "b"]);
        assert_eq!(split_key(&s.items()[0], 2).unwrap(), ["x", "y"]);
        assert_eq!(split_key(&s.items()[1], 2).unwrap(), ["p", ""]);
        assert!(split_key(b"\x05\0\0\0ab", 2).is_none());
        assert_eq!(s.column_sums("v").unwrap(), [7, 10]);
        let bad = file(b"k,v\nx,-1\n", ".csv");
        let s = ItemSet::read(bad.path(), Format::Csv { header: true }, &[]).unwrap();
        assert!(s.column_sums("v").unwrap_err().to_string().contains("line 2: value '-1'"));
    }

    #[test]
    fn several_key_columns_join_unambiguously() {
        let f = file(b"a,b\n\"x,y\",z\nx,\"y,z\"\n", ".csv");
        let s = ItemSet::read(f.path(), Format::Csv { header: true }, &["a".into(), "b".into()]).unwrap();
        assert_eq!(s.items().len(), 2);
        assert_eq!(s.key_columns(), 2);
    }

    #[test]
    fn missing_column_lists_the_columns() {
        let f = file(b"name,email\nann,a@x\n", ".csv");
        let e = ItemSet::read(f.path(), Format::Csv { header: true }, &["id".into()]).unwrap_err().to_string();
        assert!(e.contains("no column named 'id'") && e.contains("name, email"), "{e}");
    }

    #[test]
    fn no_header_by_index() {
        let f = file(b"1,ann\n2,bob\n", ".csv");
        let s = ItemSet::read(f.path(), Format::Csv { header: false }, &["2".into()]).unwrap();
        assert_eq!(s.items(), &[b"ann".to_vec(), b"bob".to_vec()]);
        let e = ItemSet::read(f.path(), Format::Csv { header: false }, &["3".into()]).unwrap_err();
        assert!(e.to_string().contains("key column 3 does not exist"), "{e}");
        assert!(ItemSet::read(f.path(), Format::Csv { header: false }, &["0".into()]).is_err());
    }

    #[test]
    fn invalid_utf8_and_ragged_rows_name_the_line() {
        let f = file(b"k\nok\n\xff\xfe\n", ".csv");
        let e = ItemSet::read(f.path(), Format::Csv { header: true }, &[]).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("UTF-8"), "{e}");
        let f = file(b"ok\n\xff\n", ".txt");
        let e = ItemSet::read(f.path(), Format::Text, &[]).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        let f = file(b"a,b\n1,2\n3\n", ".csv");
        let e = ItemSet::read(f.path(), Format::Csv { header: true }, &[]).unwrap_err().to_string();
        assert!(e.contains("line 3"), "{e}");
    }

    #[test]
    fn text_lines_crlf_and_empty() {
        let f = file(b"a\r\n\nb\na\n", ".txt");
        let s = ItemSet::read(f.path(), Format::guess(f.path(), false), &[]).unwrap();
        assert_eq!(s.items(), &[b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(s.stats(), ReadStats { rows: 4, empty_keys: 1, duplicate_rows: 1 });
        let mut out = Vec::new();
        s.write_rows(&[0], &mut out).unwrap();
        assert_eq!(out, b"a\na\n");
    }

    #[test]
    fn missing_file_is_an_error() {
        let e = ItemSet::read(Path::new("/nonexistent/x.csv"), Format::Csv { header: true }, &[]).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.csv"));
    }
}
