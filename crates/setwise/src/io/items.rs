//! Reading items from users' files and writing matching rows back.
//!
//! Inputs are CSV with a header (key columns by name, default the first column), CSV
//! without a header (key columns by 1-based index), plain text (one item per line), or
//! Parquet and Arrow IPC files (key columns by name; module `columnar`).
//!
//! Policy, as docs/io.md states it:
//! - an item is the bytes of its key column; several key columns are joined
//!   unambiguously (each field length-prefixed), so `("a,b","c")` ≠ `("a","b,c")`;
//! - fields are taken as they are: no trimming or case folding;
//! - rows whose key is empty are skipped and counted;
//! - a key that appears on several rows is one item for the protocol, and the output
//!   holds every row with a matching key (duplicates counted in [`ReadStats`]);
//! - invalid UTF-8, a missing key column or a ragged row is an error naming the line.

use super::columnar::{self, Source, Table};
use super::format::{Format, added_column_name};
use super::rows::{self, Layout, Span};
use super::streamed::{self, Streamed};
use crate::error::InputError;
use rayon::prelude::*;
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

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

/// A user's input: its keys, the distinct items among them, and where its rows are.
///
/// Of a text file, or a CSV file without quotes, only the keys are held, read a block at a
/// time (module `streamed`), and of a Parquet or Arrow file only the keys too (module
/// `columnar`): values and rows are read from the file again when they are asked for. A
/// CSV file with quotes, a pipe, or bytes given in memory is held whole, rows and keys
/// being byte ranges of it (module `rows`): a file of 2^24 rows costs its own size plus
/// 32 bytes a row, not an allocation per row.
#[derive(Debug, Clone)]
pub struct ItemSet {
    format: Format,
    /// The file's bytes, then the keys that had to be built (module `rows`); of a
    /// streamed or columnar file, its keys.
    data: Vec<u8>,
    /// The header's names and its raw line.
    header: Option<(Vec<String>, Span)>,
    /// Fields per row.
    width: usize,
    /// Each row's raw bytes, without its line end (none for a streamed or columnar file).
    rows: Vec<Span>,
    /// Item index of each row, `u32::MAX` for a skipped row.
    row_item: Vec<u32>,
    /// The distinct items.
    items: Vec<Span>,
    /// The key columns (0-based).
    key_cols: Vec<usize>,
    stats: ReadStats,
    /// The Parquet or Arrow file the rows are in.
    table: Option<Table>,
    /// The CSV or text file the rows are in, when it was read a block at a time.
    file: Option<Streamed>,
}

const SKIPPED: u32 = u32::MAX;

/// What a party that writes no rows keeps of its input ([`ItemSet::into_keys`]): the
/// keys' bytes and each distinct item's range of them.
#[derive(Debug)]
pub struct ItemKeys {
    data: Vec<u8>,
    items: Vec<Span>,
}

impl ItemKeys {
    /// The distinct items, as [`ItemSet::items`] gives them, letting go of their ranges
    /// (16 bytes an item; the views take their place): a second call finds none.
    pub fn take_items(&mut self) -> Vec<&[u8]> {
        let spans = std::mem::take(&mut self.items);
        spans.par_iter().map(|s| s.of(&self.data)).collect()
    }
}

impl ItemSet {
    /// Reads `path` in `format`; `key` names the key columns (header names, or 1-based
    /// indices without a header); empty means the first column.
    pub fn read(path: &Path, format: Format, key: &[String]) -> Result<Self, InputError> {
        Self::read_in_blocks(path, format, key, streamed::BLOCK)
    }

    /// [`ItemSet::read`], a CSV or text file in blocks of `block` bytes where it can.
    pub(crate) fn read_in_blocks(
        path: &Path,
        format: Format,
        key: &[String],
        block: usize,
    ) -> Result<Self, InputError> {
        if let Some(k) = streamed::read(path, format, key, block)? {
            let mut set = Self::index(format, k.data, k.header, k.width, vec![], &k.keys, k.key_cols);
            set.file = Some(k.streamed);
            return Ok(set);
        }
        if format.is_columnar() {
            return Self::columnar(Source::File(path.to_owned()), format, path, key);
        }
        let io = |source| InputError::Io { path: path.to_owned(), source };
        let mut file = File::open(path).map_err(io)?;
        let size = file.metadata().map(|m| m.len() as usize).unwrap_or(0);
        let mut data = Vec::with_capacity(size + 1);
        file.read_to_end(&mut data).map_err(io)?;
        Self::from_bytes(data, path, format, key)
    }

    /// [`ItemSet::read`] from any reader; `path` names the input in errors.
    pub fn parse(mut file: impl Read, path: &Path, format: Format, key: &[String]) -> Result<Self, InputError> {
        let mut data = Vec::new();
        file.read_to_end(&mut data).map_err(|source| InputError::Io { path: path.to_owned(), source })?;
        Self::from_bytes(data, path, format, key)
    }

    /// [`ItemSet::read`] from the file's bytes.
    pub fn from_bytes(mut data: Vec<u8>, path: &Path, format: Format, key: &[String]) -> Result<Self, InputError> {
        match format {
            Format::Parquet | Format::Arrow | Format::ArrowStream => {
                Self::columnar(Source::memory(data), format, path, key)
            }
            Format::Text => {
                rows::check_text_key(path, key)?;
                let rows = rows::lines(&data, 0);
                let chunks = rows::plain_keys(path, &data, &rows, Layout::Text, false)?;
                let keys = rows::place_keys(chunks.into_iter(), rows.len(), &mut data);
                Ok(Self::index(Format::Text, data, None, 1, rows, &keys, vec![0]))
            }
            Format::Csv { header } => {
                let p = rows::parse_csv(path, &mut data, header, key)?;
                Ok(Self::index(format, data, p.header, p.width, p.rows, &p.keys, p.key_cols))
            }
        }
    }

    /// Reads the keys of a Parquet or Arrow file, batch by batch.
    fn columnar(source: Source, format: Format, path: &Path, key: &[String]) -> Result<Self, InputError> {
        let mut table = Table::open(source, format, path)?;
        let mut data = Vec::new();
        let keys = table.read_keys(key, &mut data)?;
        let columns = table.key_names().len();
        let mut set = Self::index(format, data, None, 0, vec![], &keys, (0..columns).collect());
        set.table = Some(table);
        Ok(set)
    }

    /// An item set from plain keys (one column named `key`), e.g. generated data.
    pub fn from_keys<S: AsRef<str>>(keys: impl IntoIterator<Item = S>) -> Self {
        let mut data = b"key\n".to_vec();
        for k in keys {
            rows::write_field(&mut data, k.as_ref().as_bytes(), true);
            data.push(b'\n');
        }
        Self::from_bytes(data, Path::new("generated keys"), Format::Csv { header: true }, &[])
            .expect("written as CSV with one column")
    }

    fn index(
        format: Format,
        data: Vec<u8>,
        header: Option<(Vec<String>, Span)>,
        width: usize,
        rows: Vec<Span>,
        keys: &[Span],
        key_cols: Vec<usize>,
    ) -> Self {
        let views: Vec<&[u8]> = keys.par_iter().map(|s| s.of(&data)).collect();
        let first = first_rows(&views);
        drop(views);
        let mut items = Vec::with_capacity(first.par_iter().enumerate().filter(|&(i, &f)| f as usize == i).count());
        let mut row_item = Vec::with_capacity(keys.len());
        let mut stats = ReadStats { rows: keys.len(), ..Default::default() };
        for (i, &f) in first.iter().enumerate() {
            let id = if f == SKIPPED {
                stats.empty_keys += 1;
                SKIPPED
            } else if f as usize == i {
                items.push(keys[i]);
                items.len() as u32 - 1
            } else {
                stats.duplicate_rows += 1;
                row_item[f as usize]
            };
            row_item.push(id);
        }
        Self { format, data, header, width, rows, row_item, items, key_cols, stats, table: None, file: None }
    }

    /// The keys alone, for a party that writes no rows: what only writing rows and reading
    /// columns need goes (each row's item index, the rows' ranges and where the file is:
    /// 4 bytes a row of a file read in blocks, more of one held whole).
    pub fn into_keys(self) -> ItemKeys {
        ItemKeys { data: self.data, items: self.items }
    }

    /// Number of distinct items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there is no item.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Distinct item `i` (in order of first appearance).
    pub fn item(&self, i: usize) -> &[u8] {
        self.items[i].of(&self.data)
    }

    /// The distinct items, in order of first appearance: a view of 16 bytes per item into
    /// the file's bytes (for [`crate::Input::Items`]).
    pub fn items(&self) -> Vec<&[u8]> {
        self.items.par_iter().map(|s| s.of(&self.data)).collect()
    }

    /// Number of key columns joined into each item.
    pub fn key_columns(&self) -> usize {
        self.key_cols.len()
    }

    /// The key columns' names: from the header, else `key` (or `key1`, `key2`, …).
    pub fn key_names(&self) -> Vec<String> {
        if let Some(t) = &self.table {
            return t.key_names().to_vec();
        }
        match &self.header {
            Some((h, _)) => self.key_cols.iter().map(|&c| h.get(c).cloned().unwrap_or_else(|| "key".into())).collect(),
            None if self.key_cols.len() == 1 => vec!["key".into()],
            None => (1..=self.key_cols.len()).map(|i| format!("key{i}")).collect(),
        }
    }

    /// The 0-based index of `column` (a header name, or a 1-based index without a header).
    fn column(&self, column: &str) -> Result<usize, InputError> {
        let names = self.header.as_ref().map(|(h, _)| h.as_slice());
        Ok(rows::key_columns(Path::new("input"), names, self.width, &[column.to_string()])?[0])
    }

    /// Calls `f` on each row that has a key, with the row's index, its item and its field
    /// in `column` (a header name, or a 1-based index without a header; a column name of
    /// a Parquet or Arrow file).
    fn each_field(
        &self,
        column: &str,
        mut f: impl FnMut(usize, usize, &str) -> Result<(), InputError>,
    ) -> Result<(), InputError> {
        if let Some(t) = &self.table {
            return t.each_text(column, |row, text| match self.row_item.get(row) {
                Some(&item) if item != SKIPPED => f(row, item as usize, text),
                _ => Ok(()),
            });
        }
        let col = self.column(column)?;
        self.visit_rows(|row, raw| {
            let item = self.row_item[row];
            if item == SKIPPED {
                return Ok(());
            }
            let field = match self.format {
                Format::Csv { .. } => {
                    rows::fields(raw).get(col).map_or_else(String::new, |f| String::from_utf8_lossy(f).into_owned())
                }
                _ => String::from_utf8_lossy(raw).into_owned(),
            };
            f(row, item as usize, &field)
        })
    }

    /// Calls `f` on each row of a CSV or text input, in order, with its index and raw
    /// bytes: from memory, or read again from the file.
    fn visit_rows(&self, mut f: impl FnMut(usize, &[u8]) -> Result<(), InputError>) -> Result<(), InputError> {
        let Some(file) = &self.file else {
            return self.rows.iter().enumerate().try_for_each(|(r, raw)| f(r, raw.of(&self.data)));
        };
        // Each row read again must have the key it had: a file changed in a way its length,
        // time and row count do not show (`cp -p`) must not put wrong rows in an output.
        let layout = match self.format {
            Format::Text => Layout::Text,
            _ => Layout::Csv { width: self.width, key_cols: &self.key_cols },
        };
        let mut joined = Vec::new();
        file.visit(|r, raw| {
            let had = match self.row_item[r] {
                SKIPPED => &[][..],
                item => self.item(item as usize),
            };
            if rows::plain_key(raw, layout, &mut joined) != had {
                return Err(file.changed());
            }
            f(r, raw)
        })
    }

    /// Where row `row` is, for errors: its line in a CSV or text file, its 1-based row in a
    /// Parquet or Arrow file.
    fn place(&self, row: usize) -> String {
        match (&self.table, &self.header) {
            (Some(_), _) => format!("row {}", row + 1),
            (None, Some(_)) => format!("line {}", row + 2),
            (None, None) => format!("line {}", row + 1),
        }
    }

    /// For each distinct item, the sum of `column` (a header name, or a 1-based index
    /// without a header) over the item's rows; every value must be a non-negative
    /// integer below 2^64.
    pub fn column_sums(&self, column: &str) -> Result<Vec<u128>, InputError> {
        let mut sums = vec![0u128; self.items.len()];
        self.each_field(column, |row, item, text| {
            let text = text.trim();
            let v: u64 = text.parse().map_err(|_| {
                InputError::Invalid(format!(
                    "{}: value '{text}' in column {column} is not a non-negative integer below 2^64",
                    self.place(row)
                ))
            })?;
            sums[item] += u128::from(v);
            Ok(())
        })?;
        Ok(sums)
    }

    /// For every row with a key: its item's index and its value in `column` (a header
    /// name, or a 1-based index without a header). Unlike [`ItemSet::column_values`],
    /// an item repeated on several rows appears once per row.
    pub fn row_values(&self, column: &str) -> Result<Vec<(usize, String)>, InputError> {
        let mut out = Vec::new();
        self.each_field(column, |_, item, value| {
            out.push((item, value.to_string()));
            Ok(())
        })?;
        Ok(out)
    }

    /// For each distinct item, the values of `columns` (by header name, or 1-based index
    /// without a header) on the item's first row.
    pub fn column_values(&self, columns: &[String]) -> Result<Vec<Vec<String>>, InputError> {
        let mut out: Vec<Vec<String>> = vec![Vec::with_capacity(columns.len()); self.items.len()];
        // One pass over the rows per column (a pass over a Parquet or Arrow file reads only
        // that column); a text line is one field, as when its key was read.
        for column in columns {
            // The first row of each item holds its values; later rows of it are skipped.
            let mut done = vec![false; self.items.len()];
            self.each_field(column, |_, item, value| {
                if !std::mem::replace(&mut done[item], true) {
                    out[item].push(value.to_string());
                }
                Ok(())
            })?;
        }
        Ok(out)
    }

    /// Counts from reading.
    pub fn stats(&self) -> ReadStats {
        self.stats
    }

    /// Writes the header (if any) and every row whose item index is in `matched`, as
    /// they were in the input; returns the number of rows written.
    pub fn write_rows(&self, matched: &[usize], out: impl Write + Send) -> Result<usize, InputError> {
        self.write_selected(matched.iter().map(|&i| (i, &[][..])), &[], None, out)
    }

    /// Writes the header (if any) followed by `extra_header`, and every row whose item is
    /// in `matched`, followed by that item's extra values; in `format`, or the input's
    /// own layout for `None`. Rows of a Parquet or Arrow input keep their columns' types
    /// in a Parquet or Arrow output; rows of a CSV or text input become string columns.
    pub fn write_rows_with(
        &self,
        matched: &[(usize, Vec<String>)],
        extra_header: &[String],
        format: Option<Format>,
        out: impl Write + Send,
    ) -> Result<usize, InputError> {
        self.write_selected(matched.iter().map(|(i, v)| (*i, v.as_slice())), extra_header, format, out)
    }

    /// Checks, before any work, that rows of this input can be written in `format` (a
    /// Parquet or Arrow input with nested columns cannot be written as CSV).
    pub fn check_output(&self, format: Format) -> Result<(), InputError> {
        match &self.table {
            Some(t) if !format.is_columnar() => t.check_csv(),
            _ => Ok(()),
        }
    }

    /// The input's layout.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Rows of the selected items, each as it was in the input (a text line as a CSV field
    /// when columns follow), then the item's extra fields.
    fn write_selected<'a>(
        &self,
        selected: impl Iterator<Item = (usize, &'a [String])>,
        extra_header: &[String],
        format: Option<Format>,
        out: impl Write + Send,
    ) -> Result<usize, InputError> {
        let mut extra: Vec<Option<&[String]>> = vec![None; self.items.len()];
        for (i, values) in selected {
            extra[i] = Some(values);
        }
        let keep = |row: usize| extra.get(*self.row_item.get(row)? as usize).copied().flatten();
        let format = format.unwrap_or(self.format);
        if let Some(t) = &self.table {
            return t.write_rows(&keep, extra_header, format, out);
        }
        if format.is_columnar() {
            let names = match (&self.header, self.format) {
                (Some((h, _)), _) => h.clone(),
                (None, Format::Text) => self.key_names(),
                (None, _) => (1..=self.width).map(|i| format!("column{i}")).collect(),
            };
            let mut writer = columnar::SplitRows::new(&names, extra_header, format, out)?;
            self.visit_rows(|r, raw| {
                let Some(values) = keep(r) else { return Ok(()) };
                match self.format {
                    Format::Csv { .. } => writer.push(&rows::fields(raw), values),
                    _ => writer.push(&[raw.into()], values),
                }
            })?;
            return writer.finish();
        }
        let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
        let io = |source| InputError::Io { path: "output".into(), source };
        let mut line = Vec::new();
        if let Some((names, raw)) = &self.header {
            line.extend_from_slice(raw.of(&self.data));
            for name in extra_header {
                let name = added_column_name(|n| names.iter().any(|h| h == n), name);
                line.push(b',');
                rows::write_field(&mut line, name.as_bytes(), false);
            }
            line.push(b'\n');
            rows::quote_leading_bom(&mut line);
            out.write_all(&line).map_err(io)?;
        }
        let mut written = 0;
        self.visit_rows(|r, row| {
            let Some(values) = keep(r) else { return Ok(()) };
            line.clear();
            match self.format {
                Format::Text if !values.is_empty() => rows::write_field(&mut line, row, false),
                _ => line.extend_from_slice(row),
            }
            for v in values {
                line.push(b',');
                rows::write_field(&mut line, v.as_bytes(), false);
            }
            line.push(b'\n');
            if written == 0 && self.header.is_none() && matches!(self.format, Format::Csv { .. }) {
                rows::quote_leading_bom(&mut line);
            }
            out.write_all(&line).map_err(io)?;
            written += 1;
            Ok(())
        })?;
        out.flush().map_err(io)?;
        Ok(written)
    }
}

/// For each row, the first row with the same key (itself if none is earlier), or
/// [`SKIPPED`] for an empty key (such a row takes no part).
fn first_rows(keys: &[&[u8]]) -> Vec<u32> {
    let mut first = super::first_occurrences(keys);
    first.iter_mut().zip(keys).filter(|(_, k)| k.is_empty()).for_each(|(f, _)| *f = SKIPPED);
    first
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
        let views: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        assert_eq!(first_rows(&views), [0, 1, SKIPPED, 0, 4, 1, 0, SKIPPED]);
        // Against a map, with many repeats of a few keys and one key on 50 000 rows.
        let keys: Vec<Vec<u8>> = (0..100_000u32)
            .map(|i| if i % 2 == 0 { b"same".to_vec() } else { (i % 997).to_le_bytes().to_vec() })
            .collect();
        let mut seen = std::collections::HashMap::new();
        let want: Vec<u32> = keys.iter().enumerate().map(|(i, k)| *seen.entry(k.clone()).or_insert(i as u32)).collect();
        let views: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        assert_eq!(first_rows(&views), want);
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
        assert_eq!(split_key(s.item(0), 2).unwrap(), ["x", "y"]);
        assert_eq!(split_key(s.item(1), 2).unwrap(), ["p", ""]);
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
    fn formats_by_extension_and_name() {
        let guess = |p: &str, no_header| Format::guess(Path::new(p), no_header);
        assert_eq!(guess("x.csv", true), Format::Csv { header: false });
        assert_eq!(guess("x.dat", false), Format::Csv { header: true });
        assert_eq!(guess("x.txt", false), Format::Text);
        assert_eq!(guess("x.PARQUET", true), Format::Parquet);
        assert_eq!(guess("x.feather", false), Format::Arrow);
        assert_eq!(guess("x.arrows", false), Format::ArrowStream);
        assert_eq!(Format::by_extension(Path::new("out")), None);
        assert_eq!(Format::by_name("csv", true), Some(Format::Csv { header: false }));
        assert_eq!(Format::by_name("json", false), None);
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
    fn a_key_starting_with_a_byte_order_mark_reads_back_when_its_row_is_written_first() {
        // Found by the csv fuzz target: the first row is skipped (empty key), so the row
        // whose key is a BOM would come first in the output and lose its key on reading.
        for (bytes, header) in [(&b",x\n\xEF\xBB\xBF,y\n"[..], false), (&b",x\n\xEF\xBB\xBFa\"b,y\n"[..], false)] {
            let s = ItemSet::parse(bytes, Path::new("t.csv"), Format::Csv { header }, &[]).unwrap();
            let mut out = Vec::new();
            let all: Vec<usize> = (0..s.len()).collect();
            s.write_rows(&all, &mut out).unwrap();
            assert!(out.starts_with(b"\""), "{out:?}");
            let again = ItemSet::parse(&out[..], Path::new("t.csv"), Format::Csv { header }, &[]).unwrap();
            assert_eq!(again.items(), s.items());
        }
    }

    /// A CSV or text file of `rows` rows over a few repeated keys, with what the fast path
    /// must handle: blank lines, `\r\n`, a byte order mark, empty keys, no final line end.
    fn awkward_file(seed: u64, rows: usize, text: bool) -> Vec<u8> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let words = ["ann", "bob", "", "x y", "é", "a-much-longer-key-than-a-block@example.org", "7"];
        let mut out = Vec::new();
        if next(2) == 0 {
            out.extend_from_slice(b"\xEF\xBB\xBF\n");
        }
        if !text {
            out.extend_from_slice(b"k,v,n\r\n");
        }
        for _ in 0..rows {
            let word = |i: u64| words[i as usize].as_bytes();
            out.extend_from_slice(word(next(words.len() as u64)));
            if !text {
                out.push(b',');
                out.extend_from_slice(word(next(words.len() as u64)));
                out.extend_from_slice(format!(",{}", next(100)).as_bytes());
            }
            out.extend_from_slice(match next(5) {
                0 => b"\r\n",
                1 => b"\n\n",
                _ => b"\n",
            });
        }
        if next(2) == 0 {
            // No final line end (a lone `\r` would send the file down the csv crate's path).
            out.truncate(out.len() - if out.ends_with(b"\r\n") { 2 } else { 1 });
        }
        out
    }

    /// Everything a command asks of an input, as text, to compare two readings of it.
    fn all_of(s: &ItemSet, text: bool) -> String {
        let half: Vec<usize> = (0..s.len()).step_by(2).collect();
        let mut rows = Vec::new();
        s.write_rows(&half, &mut rows).unwrap();
        let extra: Vec<(usize, Vec<String>)> = half.iter().map(|&i| (i, vec![format!("x{i}")])).collect();
        let mut with = Vec::new();
        s.write_rows_with(&extra, &["extra".into()], None, &mut with).unwrap();
        let column = if text { "1" } else { "n" };
        format!(
            "{:?}\n{:?}\n{:?}\n{}\n{}\n{:?}\n{:?}",
            s.items(),
            s.stats(),
            s.key_names(),
            String::from_utf8_lossy(&rows),
            String::from_utf8_lossy(&with),
            s.row_values(column),
            s.column_values(&[column.to_string()]),
        )
    }

    #[test]
    fn a_file_read_in_blocks_reads_as_it_does_whole() {
        for seed in 0..24 {
            let text = seed % 3 == 0;
            let content = awkward_file(seed, 1 + seed as usize * 7, text);
            let (ext, format) = if text { (".txt", Format::Text) } else { (".csv", Format::Csv { header: true }) };
            let f = file(&content, ext);
            let keys: &[&[String]] = if text { &[&[]] } else { &[&[], &["v".into()], &["v".into(), "k".into()]] };
            for &key in keys {
                let whole = ItemSet::from_bytes(content.clone(), f.path(), format, key).unwrap();
                assert!(whole.file.is_none());
                let want = all_of(&whole, text);
                for block in [1, 2, 3, 5, 8, 13, 40, streamed::BLOCK] {
                    let s = ItemSet::read_in_blocks(f.path(), format, key, block).unwrap();
                    assert!(s.file.is_some() && s.rows.is_empty(), "seed {seed}: not read in blocks");
                    assert_eq!(all_of(&s, text), want, "seed {seed}, key {key:?}, block {block}");
                }
            }
        }
    }

    #[test]
    fn errors_name_the_same_line_read_in_blocks() {
        for content in [
            &b"k,v\n1,2\n\n3,4\n5\n6,7\n"[..],
            b"k,v\n1,2\n\xff,4\n",
            b"\n\xEF\xBB\xBF\r\nk,\xff\n1,2\n",
            b"\n\n",
            b"",
            // Found by the csv fuzz target: a bad header, then a quote in a later block.
            b"id\x1anam\xff\n1,aln\n2,\"",
        ] {
            let f = file(content, ".csv");
            for key in [&[][..], &["v".to_string()]] {
                let format = Format::Csv { header: true };
                let whole = ItemSet::from_bytes(content.to_vec(), f.path(), format, key).map(|s| s.items().len());
                for block in [1, 4, 64] {
                    let s = ItemSet::read_in_blocks(f.path(), format, key, block).map(|s| s.items().len());
                    assert_eq!(format!("{s:?}"), format!("{whole:?}"), "{content:?} {key:?} {block}");
                }
            }
        }
    }

    #[test]
    fn a_file_with_quotes_is_read_whole_and_a_changed_file_is_refused() {
        let f = file(b"k,v\nann,1\nbob,2\n\"c,d\",3\n", ".csv");
        let s = ItemSet::read_in_blocks(f.path(), Format::Csv { header: true }, &[], 4).unwrap();
        assert!(s.file.is_none());
        assert_eq!(s.items(), [&b"ann"[..], b"bob", b"c,d"]);
        let mut f = file(b"k,v\nann,1\nbob,2\n", ".csv");
        let s = ItemSet::read_in_blocks(f.path(), Format::Csv { header: true }, &[], 4).unwrap();
        assert!(s.file.is_some());
        f.write_all(b"cy,3\n").unwrap();
        let e = s.write_rows(&[0], Vec::new()).unwrap_err().to_string();
        assert!(e.contains("changed since it was read"), "{e}");
        // The same length and modification time (`cp -p`), another key, or another header
        // (the one written back would not be the file's): refused too.
        let swapped: [(&[u8], &[u8]); 2] = [
            (b"k,v\nann,1\nbob,2\n", b"k,v\nann,1\nbib,2\n"),
            (b"\xef\xbb\xbf\n\nk,v\nann,1\nbob,2\n", b"\xef\xbb\xbf\n\nK,v\nann,1\nbob,2\n"),
        ];
        for (read, then) in swapped {
            let f = file(read, ".csv");
            let s = ItemSet::read_in_blocks(f.path(), Format::Csv { header: true }, &[], 4).unwrap();
            let when = std::fs::metadata(f.path()).unwrap().modified().unwrap();
            std::fs::write(f.path(), then).unwrap();
            std::fs::File::options().write(true).open(f.path()).unwrap().set_modified(when).unwrap();
            let e = s.write_rows(&[0, 1], Vec::new()).unwrap_err().to_string();
            assert!(e.contains("changed since it was read"), "{e}");
        }
    }

    #[test]
    fn the_first_bad_line_is_named_whichever_thread_finds_one() {
        // Two bad lines in different chunks of rows (16 Ki rows each) of one block.
        let mut text = b"a\n".repeat((1 << 14) - 1);
        text.extend_from_slice(b"\xff\n\xfe\n");
        let f = file(&text, ".txt");
        for _ in 0..8 {
            let whole = ItemSet::from_bytes(text.clone(), f.path(), Format::Text, &[]).unwrap_err().to_string();
            let blocks = ItemSet::read(f.path(), Format::Text, &[]).unwrap_err().to_string();
            assert!(whole.contains("line 16384") && blocks == whole, "{whole} / {blocks}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_named_pipe_is_read_whole_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = crate::io::fifo_in(dir.path(), "in.csv");
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, b"k\na\nb\n"))
        };
        let s = ItemSet::read(&fifo, Format::Csv { header: true }, &[]).unwrap();
        writer.join().unwrap().unwrap();
        assert!(s.file.is_none());
        assert_eq!(s.items(), [&b"a"[..], b"b"]);
    }

    #[test]
    fn missing_file_is_an_error() {
        let e = ItemSet::read(Path::new("/nonexistent/x.csv"), Format::Csv { header: true }, &[]).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.csv"));
    }
}
