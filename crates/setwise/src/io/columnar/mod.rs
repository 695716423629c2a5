//! Parquet and Arrow IPC files: items from their key columns, read batch by batch, and the
//! matching rows written back with every column and its type (docs/io.md).
//!
//! Only the keys stay in memory (as [`super::rows`] keeps them for CSV, in one buffer):
//! values, labels and the rows written back are read again from the file, batch by batch,
//! so a file is never held whole.
//!
//! A key is the bytes of a string or binary value, or the text of an integer, decimal,
//! date or boolean as Arrow casts it to a string (`42`, `-7`, `1.50`, `2024-01-05`,
//! `true`), which is what a CSV file of the same data holds. Floats, times and
//! timestamps are refused as keys: tools print them differently, so two parties would
//! not match.

use super::format::{Format, added_column_name};
use super::room::{MAX_ROWS, Stamp, rows_room, stamp_of, too_many_rows};
use super::rows::{self, Span};
use crate::error::InputError;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchReader, StringArray, StructArray};
use arrow_buffer::NullBuffer;
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod ipc_sizes;

/// Rows per batch read from a Parquet file (IPC files keep their writer's batches).
const BATCH_ROWS: usize = 1 << 16;

/// Where a columnar file's bytes are: read again for values and for writing rows back.
#[derive(Debug, Clone)]
pub(super) enum Source {
    /// A file, opened again for each pass.
    File(PathBuf),
    /// Bytes already in memory ([`super::ItemSet::from_bytes`]).
    Memory(bytes::Bytes),
}

impl Source {
    /// Bytes in memory.
    pub fn memory(data: Vec<u8>) -> Self {
        Self::Memory(bytes::Bytes::from(data))
    }
}

/// An open Parquet or Arrow IPC input: where it is, its layout and its schema.
#[derive(Debug, Clone)]
pub(super) struct Table {
    format: Format,
    source: Source,
    /// How errors name the input.
    path: PathBuf,
    schema: SchemaRef,
    /// The key columns' names, as given (dotted paths into structs included).
    key_names: Vec<String>,
    /// The file's length and modification time when it was opened: every later pass
    /// checks that it reads the same file.
    stamp: Option<Stamp>,
    /// The rows the key pass read: every later pass must read as many.
    rows: Option<usize>,
}

/// A batch stream of a file.
type Batches = Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>>>;

/// A column found by name: its top-level index and the path of child indices into
/// structs below it.
struct Column {
    root: usize,
    children: Vec<usize>,
}

/// The reading of `path` failed: named, with the reader's words.
fn damaged(path: &Path, format: Format, e: impl std::fmt::Display) -> InputError {
    InputError::Invalid(format!("{}: not a readable {} file: {e}", path.display(), kind_name(format)))
}

fn kind_name(format: Format) -> &'static str {
    match format {
        Format::Parquet => "Parquet",
        Format::ArrowStream => "Arrow IPC stream",
        _ => "Arrow IPC",
    }
}

/// Runs `f`, turning a panic inside the Parquet or Arrow readers (which a damaged file
/// must never cause, but which those crates do not promise) into an error naming the file.
fn guarded<T>(path: &Path, format: Format, f: impl FnOnce() -> Result<T, InputError>) -> Result<T, InputError> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(damaged(path, format, "the reader failed on its contents")))
}

impl Table {
    /// Opens `source` in `format` (Parquet, Arrow or ArrowStream) and reads its schema.
    pub fn open(source: Source, format: Format, path: &Path) -> Result<Self, InputError> {
        let stamp = match &source {
            Source::File(p) => {
                // Read more than once (values, labels, rows written back) and with seeks:
                // a pipe or a device would give its bytes once, or block.
                let m = std::fs::metadata(p).map_err(|e| InputError::Io { path: p.clone(), source: e })?;
                if !m.is_file() {
                    return Err(InputError::Invalid(format!(
                        "{}: not a regular file; a {} input is read more than once, so save it to a file first",
                        path.display(),
                        kind_name(format)
                    )));
                }
                // Stamped from a handle, as each later pass checks its own handle
                // (`open_file`): what it compares is the file it reads.
                let file = std::fs::File::open(p).map_err(|e| InputError::Io { path: p.clone(), source: e })?;
                Some(stamp_of(&file.metadata().map_err(|e| InputError::Io { path: p.clone(), source: e })?))
            }
            Source::Memory(_) => None,
        };
        let mut t = Self {
            format,
            source,
            path: path.to_owned(),
            schema: Arc::new(Schema::empty()),
            key_names: vec![],
            stamp,
            rows: None,
        };
        if format != Format::Parquet {
            t.check_ipc_sizes()?;
        }
        let (schema, _) = t.batches(None)?;
        t.schema = schema;
        Ok(t)
    }

    /// Checks an IPC input's compressed buffers before the reader allocates what they
    /// claim (module `ipc_sizes`).
    fn check_ipc_sizes(&self) -> Result<(), InputError> {
        let limit = super::memory::available_memory().map_or(1 << 40, |m| m as u64);
        let stream = self.format == Format::ArrowStream;
        let checked = match &self.source {
            Source::File(p) => {
                ipc_sizes::check(&mut std::io::BufReader::new(self.open_file(p)?), self.len(), stream, limit)
            }
            Source::Memory(m) => ipc_sizes::check(&mut std::io::Cursor::new(m), self.len(), stream, limit),
        };
        checked.map_err(|e| damaged(&self.path, self.format, e))
    }

    /// The length of the file's bytes.
    fn len(&self) -> u64 {
        match (&self.source, self.stamp) {
            (Source::Memory(m), _) => m.len() as u64,
            (_, Some((len, _))) => len,
            (Source::File(_), None) => unreachable!("a file is stamped when opened"),
        }
    }

    /// Opens the file `p` again, refused unless the open file has the length and
    /// modification time it had when the table was opened.
    fn open_file(&self, p: &Path) -> Result<std::fs::File, InputError> {
        let io = |e| InputError::Io { path: p.to_owned(), source: e };
        let file = std::fs::File::open(p).map_err(io)?;
        if Some(stamp_of(&file.metadata().map_err(io)?)) != self.stamp {
            return Err(InputError::Invalid(format!(
                "{}: the file changed after its keys were read; run again on a file that stays as it is",
                self.path.display()
            )));
        }
        Ok(file)
    }

    /// The schema and batches of the file, limited to the top-level columns `roots`.
    fn batches(&self, roots: Option<Vec<usize>>) -> Result<(SchemaRef, Batches), InputError> {
        let bad = |e: &dyn std::fmt::Display| damaged(&self.path, self.format, e);
        guarded(&self.path, self.format, || match self.format {
            Format::Parquet => {
                let b = match &self.source {
                    Source::File(p) => parquet_reader(self.open_file(p)?, self.len(), roots),
                    Source::Memory(m) => parquet_reader(m.clone(), self.len(), roots),
                };
                b.map_err(|e| bad(&e))
            }
            Format::Arrow | Format::ArrowStream => {
                let reader: Box<dyn ReadSeek> = match &self.source {
                    Source::File(p) => Box::new(std::io::BufReader::new(self.open_file(p)?)),
                    Source::Memory(m) => Box::new(std::io::Cursor::new(m.clone())),
                };
                let opened: Result<(SchemaRef, Batches), ArrowError> = if self.format == Format::Arrow {
                    arrow_ipc::reader::FileReader::try_new(reader, roots).map(|r| (r.schema(), Box::new(r) as Batches))
                } else {
                    arrow_ipc::reader::StreamReader::try_new(reader, roots)
                        .map(|r| (r.schema(), Box::new(r) as Batches))
                };
                opened.map_err(|e| bad(&e))
            }
            Format::Csv { .. } | Format::Text => unreachable!("a columnar table is Parquet or Arrow"),
        })
    }

    /// Calls `f` on every batch of the columns `roots`, in file order, with the index of
    /// its first row; a batch that cannot be read is an error naming the file.
    fn each_batch(
        &self,
        roots: Option<Vec<usize>>,
        mut f: impl FnMut(usize, &RecordBatch) -> Result<(), InputError>,
    ) -> Result<(), InputError> {
        let (_, mut batches) = self.batches(roots)?;
        let mut row = 0;
        // The key pass keeps about 48 bytes a row: it may take what memory allows
        // (`room::rows_room`), counted at its start. A later pass keeps nothing a row, and
        // must find the rows the key pass found.
        let room = match self.rows {
            Some(rows) => rows,
            None => rows_room(),
        };
        loop {
            let next = guarded(&self.path, self.format, || Ok(batches.next()))?;
            let Some(batch) = next else { break };
            let batch = batch.map_err(|e| damaged(&self.path, self.format, e))?;
            if batch.num_rows() > room - row.min(room) {
                return Err(match self.rows {
                    Some(rows) => self.reread_mismatch(row + batch.num_rows(), rows),
                    None => too_many_rows(&self.path, row + batch.num_rows(), room),
                });
            }
            // The batch's arrays came from the file: what is done with them (casts,
            // filters, writing) is guarded as the reading is.
            guarded(&self.path, self.format, || f(row, &batch))?;
            row += batch.num_rows();
        }
        match self.rows {
            Some(rows) if rows != row => Err(self.reread_mismatch(row, rows)),
            _ => Ok(()),
        }
    }

    /// A later pass found `row` rows (or more) where the key pass found `rows`.
    fn reread_mismatch(&self, row: usize, rows: usize) -> InputError {
        InputError::Invalid(format!(
            "{}: read again, the file gave {row} rows where it gave {rows} before: it changed while in use",
            self.path.display()
        ))
    }

    /// Finds `name`: a top-level column, or a dotted path into structs (`user.email`).
    fn column(&self, name: &str) -> Result<Column, InputError> {
        let missing = || InputError::MissingColumn {
            path: self.path.clone(),
            column: name.to_string(),
            available: self.schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", "),
        };
        if let Ok(root) = self.schema.index_of(name) {
            return Ok(Column { root, children: vec![] });
        }
        let mut parts = name.split('.');
        let root = self.schema.index_of(parts.next().unwrap_or_default()).map_err(|_| missing())?;
        let mut field = self.schema.field(root);
        let mut children = vec![];
        for part in parts {
            let DataType::Struct(fields) = field.data_type() else { return Err(missing()) };
            let (i, f) = fields.find(part).ok_or_else(missing)?;
            children.push(i);
            field = f;
        }
        Ok(Column { root, children })
    }

    /// The values of `column` in `batch` (where the column's root is at `at`), with the
    /// nulls of the structs above it.
    fn values(&self, batch: &RecordBatch, at: usize, column: &Column) -> Result<ArrayRef, InputError> {
        let mut array = batch.column(at).clone();
        for &i in &column.children {
            let parent: &StructArray = array.as_struct();
            let child = parent.column(i).clone();
            // A null struct makes its fields null, whatever the child holds there.
            array = match parent.nulls() {
                None => child,
                Some(outer) => {
                    let nulls = NullBuffer::union(Some(outer), child.logical_nulls().as_ref());
                    let data = child.to_data().into_builder().nulls(nulls).build();
                    arrow_array::make_array(data.map_err(|e| damaged(&self.path, self.format, e))?)
                }
            };
        }
        Ok(array)
    }

    /// Reads the key columns `key` (empty: the first column) of every row, joined as
    /// CSV keys are ([`rows::join_fields`]) into `data`; returns each row's key.
    pub fn read_keys(&mut self, key: &[String], data: &mut Vec<u8>) -> Result<Vec<Span>, InputError> {
        let names: Vec<String> =
            match key {
                [] => {
                    vec![self.schema.fields().first().map(|f| f.name().clone()).ok_or_else(|| {
                        InputError::Invalid(format!("{}: the file has no columns", self.path.display()))
                    })?]
                }
                k => k.to_vec(),
            };
        let columns = names.iter().map(|n| self.column(n)).collect::<Result<Vec<_>, _>>()?;
        let (roots, at) = projection(&columns);
        for (name, c) in names.iter().zip(&columns) {
            let field = leaf_field(&self.schema, c);
            key_type(field.data_type()).map_err(|why| {
                InputError::Invalid(format!("{}: column {name} is {}: {why}", self.path.display(), field.data_type()))
            })?;
        }
        let mut keys = Vec::new();
        let mut joined = Vec::new();
        self.each_batch(Some(roots), |_, batch| {
            let arrays = columns
                .iter()
                .zip(&at)
                .map(|(c, &a)| {
                    let values = self.values(batch, a, c)?;
                    key_text(&values).map_err(|e| damaged(&self.path, self.format, e))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let texts: Vec<Texts<'_>> = arrays.iter().map(|a| Texts::of(a.as_ref())).collect();
            keys.reserve(batch.num_rows());
            for row in 0..batch.num_rows() {
                rows::join_fields(texts.iter().map(|t| t.get(row).unwrap_or_default()), texts.len(), &mut joined);
                let start = data.len();
                data.extend_from_slice(&joined);
                keys.push(Span { start, end: data.len() });
            }
            Ok(())
        })?;
        self.key_names = names;
        self.rows = Some(keys.len());
        Ok(keys)
    }

    /// Refuses a CSV output of this file's rows when a column is nested, which CSV
    /// cannot hold.
    pub fn check_csv(&self) -> Result<(), InputError> {
        match self.schema.fields().iter().find(|f| f.data_type().is_nested()) {
            Some(f) => Err(nested_in_csv(f)),
            None => Ok(()),
        }
    }

    /// The key columns' names, as given.
    pub fn key_names(&self) -> &[String] {
        &self.key_names
    }

    /// Calls `f` with each row's index and the text of its value in `name` (empty for a
    /// null), as Arrow casts it to a string.
    pub fn each_text(
        &self,
        name: &str,
        mut f: impl FnMut(usize, &str) -> Result<(), InputError>,
    ) -> Result<(), InputError> {
        let column = self.column(name)?;
        let (roots, _) = projection(std::slice::from_ref(&column));
        self.each_batch(Some(roots), |first, batch| {
            let values = self.values(batch, 0, &column)?;
            let text = arrow_cast::cast(&values, &DataType::Utf8).map_err(|e| {
                InputError::Invalid(format!("{}: column {name} cannot be read as text: {e}", self.path.display()))
            })?;
            let text = text.as_string::<i32>();
            for row in 0..text.len() {
                f(first + row, if text.is_null(row) { "" } else { text.value(row) })?;
            }
            Ok(())
        })
    }

    /// Writes the rows `keep` selects (by row index), each followed by its extra values
    /// (named `extra_header`, as strings), in `format`, with every column and type of the
    /// input; returns the number of rows written.
    pub fn write_rows<'a>(
        &self,
        keep: &dyn Fn(usize) -> Option<&'a [String]>,
        extra_header: &[String],
        format: Format,
        out: impl Write + Send,
    ) -> Result<usize, InputError> {
        let schema = with_extra(&self.schema, extra_header);
        let mut sink = Sink::new(format, out, &schema)?;
        let mut written = 0;
        self.each_batch(None, |first, batch| {
            let mask: BooleanArray = (first..first + batch.num_rows()).map(|r| Some(keep(r).is_some())).collect();
            let kept = arrow_select::filter::filter_record_batch(batch, &mask).map_err(write_error)?;
            let rows: Vec<&[String]> = (first..first + batch.num_rows()).filter_map(keep).collect();
            let mut columns = kept.columns().to_vec();
            columns.extend(extra_columns(&rows, extra_header.len()));
            sink.write(&RecordBatch::try_new(schema.clone(), columns).map_err(write_error)?)?;
            written += rows.len();
            Ok(())
        })?;
        sink.finish()?;
        Ok(written)
    }
}

/// Reading a Parquet file: the schema and its batches, of the top-level columns `roots`.
fn parquet_reader<R: parquet::file::reader::ChunkReader + 'static>(
    reader: R,
    len: u64,
    roots: Option<Vec<usize>>,
) -> Result<(SchemaRef, Batches), parquet::errors::ParquetError> {
    let mut b = ParquetRecordBatchReaderBuilder::try_new(reader)?.with_batch_size(BATCH_ROWS);
    check_chunks(b.metadata(), len)?;
    if let Some(roots) = roots {
        let mask = ProjectionMask::roots(b.parquet_schema(), roots);
        b = b.with_projection(mask);
    }
    let r = b.build()?;
    Ok((r.schema(), Box::new(r)))
}

/// Refuses a footer whose row groups claim negative or more rows than setwise takes
/// ([`MAX_ROWS`]), or whose column chunks lie past the file's `len` bytes: checked before
/// any page is read.
fn check_chunks(
    meta: &parquet::file::metadata::ParquetMetaData,
    len: u64,
) -> Result<(), parquet::errors::ParquetError> {
    let general = parquet::errors::ParquetError::General;
    let mut rows: u64 = 0;
    for (g, group) in meta.row_groups().iter().enumerate() {
        let n =
            u64::try_from(group.num_rows()).map_err(|_| general(format!("row group {g} has a negative row count")))?;
        rows = rows.saturating_add(n);
        for c in group.columns() {
            // byte_range() would panic on a negative offset: the fields, checked.
            let start = c.dictionary_page_offset().unwrap_or(c.data_page_offset());
            let (Ok(start), Ok(size)) = (u64::try_from(start), u64::try_from(c.compressed_size())) else {
                return Err(general(format!("row group {g}, column {}: a negative offset or size", c.column_path())));
            };
            if start.checked_add(size).is_none_or(|end| end > len) {
                return Err(general(format!(
                    "row group {g}, column {}: its bytes {start}+{size} lie past the file's end ({len} bytes)",
                    c.column_path()
                )));
            }
        }
    }
    if rows > MAX_ROWS as u64 {
        return Err(general(format!("the footer claims {rows} rows, more than {MAX_ROWS}")));
    }
    Ok(())
}

trait ReadSeek: std::io::Read + std::io::Seek {}
impl<T: std::io::Read + std::io::Seek> ReadSeek for T {}

/// The top-level columns to read for `columns`, in order and without repeats, and where
/// each column's root lands in the projected batch.
fn projection(columns: &[Column]) -> (Vec<usize>, Vec<usize>) {
    let mut roots: Vec<usize> = columns.iter().map(|c| c.root).collect();
    roots.sort_unstable();
    roots.dedup();
    let at = columns.iter().map(|c| roots.binary_search(&c.root).expect("listed")).collect();
    (roots, at)
}

/// The field a column path ends at.
fn leaf_field<'a>(schema: &'a Schema, c: &Column) -> &'a Field {
    let mut field = schema.field(c.root);
    for &i in &c.children {
        let DataType::Struct(fields) = field.data_type() else { unreachable!("resolved through structs") };
        field = &fields[i];
    }
    field
}

/// Whether values of `t` can be keys (see the module's comment), and why not.
fn key_type(t: &DataType) -> Result<(), &'static str> {
    use DataType::*;
    match t {
        Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => Ok(()),
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => Ok(()),
        Decimal32(..) | Decimal64(..) | Decimal128(..) | Decimal256(..) | Date32 | Date64 | Boolean => Ok(()),
        Dictionary(_, values) => key_type(values),
        Float16 | Float32 | Float64 => {
            Err("floats are not keys (tools print them differently: 3.0 or 3); cast the column to integers or strings")
        }
        Timestamp(..) | Time32(_) | Time64(_) | Duration(_) | Interval(_) => Err(
            "times are not keys (tools print them differently); cast the column to strings in the form your peer uses",
        ),
        Struct(_) => Err("a struct is not a key; name one of its fields as column.field"),
        _ => Err("keys are strings, binary, integers, decimals, dates or booleans"),
    }
}

/// A key column's values as strings or binary: text and bytes as they are, dictionaries
/// unpacked, numbers, dates and booleans as Arrow casts them to strings (a `Date64` through
/// `Date32`, so that it prints as a date, not a date and a time).
fn key_text(values: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    use DataType::*;
    let values = match values.data_type() {
        Dictionary(_, v) => arrow_cast::cast(values, v)?,
        _ => values.clone(),
    };
    match values.data_type() {
        Utf8 | LargeUtf8 | Utf8View | Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => Ok(values),
        Date64 => arrow_cast::cast(&arrow_cast::cast(&values, &Date32)?, &LargeUtf8),
        _ => arrow_cast::cast(&values, &LargeUtf8),
    }
}

/// Byte access to a string or binary array's values.
enum Texts<'a> {
    Str(&'a arrow_array::StringArray),
    LargeStr(&'a arrow_array::LargeStringArray),
    StrView(&'a arrow_array::StringViewArray),
    Bin(&'a arrow_array::BinaryArray),
    LargeBin(&'a arrow_array::LargeBinaryArray),
    BinView(&'a arrow_array::BinaryViewArray),
    Fixed(&'a arrow_array::FixedSizeBinaryArray),
}

impl<'a> Texts<'a> {
    fn of(a: &'a dyn Array) -> Self {
        use DataType::*;
        match a.data_type() {
            Utf8 => Self::Str(a.as_string()),
            LargeUtf8 => Self::LargeStr(a.as_string()),
            Utf8View => Self::StrView(a.as_string_view()),
            Binary => Self::Bin(a.as_binary()),
            LargeBinary => Self::LargeBin(a.as_binary()),
            BinaryView => Self::BinView(a.as_binary_view()),
            FixedSizeBinary(_) => Self::Fixed(a.as_fixed_size_binary()),
            other => unreachable!("key_text gives strings or binary, not {other}"),
        }
    }

    /// Row `i`'s bytes; `None` for a null.
    fn get(&self, i: usize) -> Option<&'a [u8]> {
        let a: &dyn Array = match self {
            Self::Str(a) => *a,
            Self::LargeStr(a) => *a,
            Self::StrView(a) => *a,
            Self::Bin(a) => *a,
            Self::LargeBin(a) => *a,
            Self::BinView(a) => *a,
            Self::Fixed(a) => *a,
        };
        if a.is_null(i) {
            return None;
        }
        Some(match self {
            Self::Str(a) => a.value(i).as_bytes(),
            Self::LargeStr(a) => a.value(i).as_bytes(),
            Self::StrView(a) => a.value(i).as_bytes(),
            Self::Bin(a) => a.value(i),
            Self::LargeBin(a) => a.value(i),
            Self::BinView(a) => a.value(i),
            Self::Fixed(a) => a.value(i),
        })
    }
}

/// `schema` followed by string columns named `extra` (a name that clashes with one of the
/// input's gets the prefix `sender.`, as in CSV outputs).
pub(super) fn with_extra(schema: &Schema, extra: &[String]) -> SchemaRef {
    let mut fields: Vec<Arc<Field>> = schema.fields().iter().cloned().collect();
    for name in extra {
        let name = added_column_name(|n| schema.fields().iter().any(|f| f.name() == n), name);
        fields.push(Arc::new(Field::new(name, DataType::Utf8, false)));
    }
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The extra columns of `rows` (each row's `n` values), as string arrays.
pub(super) fn extra_columns(rows: &[&[String]], n: usize) -> Vec<ArrayRef> {
    (0..n)
        .map(|j| Arc::new(rows.iter().map(|r| r.get(j).map(String::as_str)).collect::<StringArray>()) as ArrayRef)
        .collect()
}

/// Rows of a CSV or text input (each its fields, then its extra values) written in
/// `format` as string columns named `names`, then `extra_header`, a batch at a time as
/// they are pushed (so a caller streaming its input holds one batch, not every row).
pub(super) struct SplitRows<W: Write + Send> {
    sink: Sink<W>,
    schema: SchemaRef,
    columns: Vec<arrow_array::builder::StringBuilder>,
    /// How many of `columns` are the input's (the rest are the extra values).
    own: usize,
    pending: usize,
    written: usize,
}

impl<W: Write + Send> SplitRows<W> {
    /// A writer of rows with the fields `names`, then `extra_header`.
    pub fn new(names: &[String], extra_header: &[String], format: Format, out: W) -> Result<Self, InputError> {
        let fields: Vec<Arc<Field>> = names.iter().map(|n| Arc::new(Field::new(n, DataType::Utf8, false))).collect();
        let schema = with_extra(&Schema::new(fields), extra_header);
        let sink = Sink::new(format, out, &schema)?;
        let columns =
            (0..names.len() + extra_header.len()).map(|_| arrow_array::builder::StringBuilder::new()).collect();
        Ok(Self { sink, schema, columns, own: names.len(), pending: 0, written: 0 })
    }

    /// Adds a row: its fields (a missing one is empty), then its extra values (a missing
    /// one is null).
    pub fn push(&mut self, fields: &[std::borrow::Cow<'_, [u8]>], values: &[String]) -> Result<(), InputError> {
        let (own, extra) = self.columns.split_at_mut(self.own);
        for (j, column) in own.iter_mut().enumerate() {
            column.append_value(fields.get(j).map_or(std::borrow::Cow::Borrowed(""), |f| String::from_utf8_lossy(f)));
        }
        for (j, column) in extra.iter_mut().enumerate() {
            column.append_option(values.get(j));
        }
        self.pending += 1;
        if self.pending == BATCH_ROWS { self.flush() } else { Ok(()) }
    }

    fn flush(&mut self) -> Result<(), InputError> {
        if self.pending == 0 {
            return Ok(());
        }
        let columns: Vec<ArrayRef> = self.columns.iter_mut().map(|c| Arc::new(c.finish()) as ArrayRef).collect();
        self.sink.write(&RecordBatch::try_new(self.schema.clone(), columns).map_err(write_error)?)?;
        self.written += std::mem::take(&mut self.pending);
        Ok(())
    }

    /// Writes what is pending and ends the file; returns the number of rows written.
    pub fn finish(mut self) -> Result<usize, InputError> {
        self.flush()?;
        self.sink.finish()?;
        Ok(self.written)
    }
}

/// `t` with every dictionary, at any depth, replaced by its values' type.
fn without_dictionaries(t: &DataType) -> DataType {
    use DataType::*;
    let field = |f: &Arc<Field>| Arc::new(f.as_ref().clone().with_data_type(without_dictionaries(f.data_type())));
    match t {
        Dictionary(_, v) => without_dictionaries(v),
        Struct(fields) => Struct(fields.iter().map(field).collect()),
        List(f) => List(field(f)),
        LargeList(f) => LargeList(field(f)),
        FixedSizeList(f, n) => FixedSizeList(field(f), *n),
        Map(f, sorted) => Map(field(f), *sorted),
        other => other.clone(),
    }
}

fn nested_in_csv(f: &Field) -> InputError {
    InputError::Invalid(format!(
        "column {} is {}, which CSV cannot hold: write the output as .parquet or .arrow",
        f.name(),
        f.data_type()
    ))
}

fn write_error(e: impl std::fmt::Display) -> InputError {
    InputError::Invalid(format!("writing the output: {e}"))
}

/// A writer of record batches in one of the output formats.
pub(super) enum Sink<W: Write + Send> {
    Parquet(parquet::arrow::ArrowWriter<W>),
    /// An Arrow IPC file, its schema with dictionary columns as their values.
    Arrow(arrow_ipc::writer::FileWriter<W>, SchemaRef),
    ArrowStream(arrow_ipc::writer::StreamWriter<W>),
    Csv(arrow_csv::Writer<W>, SchemaRef, bool),
}

impl<W: Write + Send> Sink<W> {
    /// A writer of `format` (CSV for CSV and text) with the columns of `schema`.
    pub fn new(format: Format, out: W, schema: &SchemaRef) -> Result<Self, InputError> {
        Ok(match format {
            Format::Parquet => {
                let props = parquet::file::properties::WriterProperties::builder()
                    .set_compression(parquet::basic::Compression::SNAPPY)
                    .build();
                Self::Parquet(
                    parquet::arrow::ArrowWriter::try_new(out, schema.clone(), Some(props)).map_err(write_error)?,
                )
            }
            Format::Arrow => {
                // An IPC file holds one dictionary per column for all its batches, and a
                // Parquet file's row groups each bring their own: dictionary columns are
                // written as their values there (Parquet and streams keep them).
                let fields: Vec<Arc<Field>> = schema
                    .fields()
                    .iter()
                    .map(|f| Arc::new(f.as_ref().clone().with_data_type(without_dictionaries(f.data_type()))))
                    .collect();
                let plain = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
                Self::Arrow(arrow_ipc::writer::FileWriter::try_new(out, &plain).map_err(write_error)?, plain)
            }
            Format::ArrowStream => {
                Self::ArrowStream(arrow_ipc::writer::StreamWriter::try_new(out, schema).map_err(write_error)?)
            }
            Format::Csv { .. } | Format::Text => {
                if let Some(f) = schema.fields().iter().find(|f| f.data_type().is_nested()) {
                    return Err(nested_in_csv(f));
                }
                Self::Csv(arrow_csv::WriterBuilder::new().with_header(true).build(out), schema.clone(), false)
            }
        })
    }

    /// Writes one batch.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), InputError> {
        match self {
            Self::Parquet(w) => w.write(batch).map_err(write_error),
            Self::Arrow(w, plain) => {
                let columns = batch
                    .columns()
                    .iter()
                    .zip(plain.fields())
                    .map(|(c, f)| match c.data_type() == f.data_type() {
                        true => Ok(c.clone()),
                        false => arrow_cast::cast(c, f.data_type()),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(write_error)?;
                w.write(&RecordBatch::try_new(plain.clone(), columns).map_err(write_error)?).map_err(write_error)
            }
            Self::ArrowStream(w) => w.write(batch).map_err(write_error),
            Self::Csv(w, _, wrote) => {
                *wrote = true;
                w.write(batch).map_err(write_error)
            }
        }
    }

    /// Ends the file (a CSV output of no rows still gets its header).
    pub fn finish(self) -> Result<(), InputError> {
        match self {
            Self::Parquet(w) => w.close().map(drop).map_err(write_error),
            Self::Arrow(mut w, _) => w.finish().map_err(write_error),
            Self::ArrowStream(mut w) => w.finish().map_err(write_error),
            Self::Csv(mut w, schema, wrote) => {
                if !wrote {
                    w.write(&RecordBatch::new_empty(schema)).map_err(write_error)?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ItemSet;
    use super::*;
    use arrow_array::{DictionaryArray, Int32Array, Int64Array, types::Int32Type};

    /// A table with awkward keys: unicode, a comma and quotes, an empty string, a null,
    /// a repeat; the same keys dictionary-encoded; integers; a struct with a string field.
    fn awkward() -> RecordBatch {
        let keys = ["Zoë", "a,\"b\"", "", "x", "Zoë", "日本"];
        let key: StringArray = keys.iter().enumerate().map(|(i, k)| (i != 3).then_some(*k)).collect();
        let dict: DictionaryArray<Int32Type> = keys.iter().copied().collect();
        let n = Int64Array::from(vec![-7, 42, 0, 42, 1, 99]);
        let inner: StringArray =
            vec![Some("e1"), Some("e2"), None, Some("e4"), Some("e5"), Some("e6")].into_iter().collect();
        let fields = arrow_schema::Fields::from(vec![Field::new("email", DataType::Utf8, true)]);
        let valid = NullBuffer::from(vec![true, true, true, true, false, true]);
        let st = StructArray::new(fields, vec![Arc::new(inner)], Some(valid));
        RecordBatch::try_from_iter(vec![
            ("key", Arc::new(key) as ArrayRef),
            ("dict", Arc::new(dict) as ArrayRef),
            ("n", Arc::new(n) as ArrayRef),
            ("user", Arc::new(st) as ArrayRef),
            ("v", Arc::new(Int32Array::from(vec![1, 2, 3, 4, 5, 6])) as ArrayRef),
        ])
        .unwrap()
    }

    fn written(format: Format, batches: &[RecordBatch]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut sink = Sink::new(format, &mut out, &batches[0].schema()).unwrap();
        batches.iter().for_each(|b| sink.write(b).unwrap());
        sink.finish().unwrap();
        out
    }

    fn items(set: &ItemSet) -> Vec<String> {
        set.items().iter().map(|i| String::from_utf8(i.to_vec()).unwrap()).collect()
    }

    fn batches_of(format: Format, bytes: Vec<u8>) -> Vec<RecordBatch> {
        let t = Table::open(Source::memory(bytes), format, Path::new("t")).unwrap();
        let mut all = vec![];
        t.each_batch(None, |_, b| {
            all.push(b.clone());
            Ok(())
        })
        .unwrap();
        all
    }

    #[test]
    fn keys_of_every_kind_match_the_plain_reading_in_every_format() {
        let batch = awkward();
        for format in [Format::Parquet, Format::Arrow, Format::ArrowStream] {
            let bytes = written(format, &[batch.slice(0, 2), batch.slice(2, 4)]);
            let read = |key: &[&str]| {
                let key: Vec<String> = key.iter().map(|k| k.to_string()).collect();
                ItemSet::from_bytes(bytes.clone(), Path::new("t"), format, &key).unwrap()
            };
            // The null and the empty string take no part; the repeat is one item.
            let s = read(&[]);
            assert_eq!(items(&s), ["Zoë", "a,\"b\"", "日本"], "{format:?}");
            assert_eq!(s.stats(), super::super::ReadStats { rows: 6, empty_keys: 2, duplicate_rows: 1 });
            assert_eq!(items(&read(&["dict"])), ["Zoë", "a,\"b\"", "x", "日本"]);
            // Integers as their text, as a CSV file of them holds it.
            let csv =
                ItemSet::parse(&b"n\n-7\n42\n0\n42\n1\n99\n"[..], Path::new("c"), Format::Csv { header: true }, &[])
                    .unwrap();
            assert_eq!(read(&["n"]).items(), csv.items());
            // A struct's field; a null struct is a null key.
            assert_eq!(items(&read(&["user.email"])), ["e1", "e2", "e4", "e6"]);
            // Several columns join as CSV's do.
            let two = read(&["dict", "n"]);
            let csv2 = ItemSet::parse(
                "d,n\nZoë,-7\n\"a,\"\"b\"\"\",42\n,0\nx,42\nZoë,1\n日本,99\n".as_bytes(),
                Path::new("c"),
                Format::Csv { header: true },
                &["d".into(), "n".into()],
            )
            .unwrap();
            assert_eq!(two.items(), csv2.items());
            assert_eq!(two.key_names(), ["dict", "n"]);
            assert_eq!(read(&[]).column_sums("v").unwrap(), [6, 2, 6]);
            assert_eq!(read(&["n"]).column_values(&["user.email".into()]).unwrap()[1], ["e2"]);
        }
    }

    /// Whether an IPC file was written on the way, which holds dictionaries as values.
    fn file_in(a: Format, b: Format) -> bool {
        a == Format::Arrow || b == Format::Arrow
    }

    #[test]
    fn matching_rows_keep_every_column_and_type() {
        let batch = awkward();
        for format in [Format::Parquet, Format::Arrow, Format::ArrowStream] {
            let s = ItemSet::from_bytes(written(format, std::slice::from_ref(&batch)), Path::new("t"), format, &[])
                .unwrap();
            // Items 0 ("Zoë", rows 0 and 4) and 2 ("日本", row 5), with one label each.
            let matched = [(0, vec!["L0".to_string()]), (2, vec!["L2".to_string()])];
            for out_format in [Format::Parquet, Format::Arrow, Format::ArrowStream] {
                let mut out = Vec::new();
                assert_eq!(s.write_rows_with(&matched, &["v".into()], Some(out_format), &mut out).unwrap(), 3);
                let got = arrow_select::concat::concat_batches(
                    &batches_of(out_format, out.clone())[0].schema(),
                    &batches_of(out_format, out),
                )
                .unwrap();
                let rows = arrow_array::UInt32Array::from(vec![0, 4, 5]);
                // An IPC file holds the dictionary column as its values (Sink::new).
                let want: Vec<ArrayRef> = batch
                    .columns()
                    .iter()
                    .map(|c| arrow_select::take::take(c, &rows, None).unwrap())
                    .map(|c| match c.data_type() {
                        DataType::Dictionary(_, v) if file_in(format, out_format) => arrow_cast::cast(&c, v).unwrap(),
                        _ => c,
                    })
                    .collect();
                assert_eq!(&got.columns()[..5], &want[..], "{format:?} to {out_format:?}");
                assert_eq!(got.schema().field(5).name(), "sender.v");
                assert_eq!(
                    got.column(5).as_string::<i32>().iter().collect::<Vec<_>>(),
                    [Some("L0"), Some("L0"), Some("L2")]
                );
                if !file_in(format, out_format) {
                    assert_eq!(got.schema().field(1).data_type(), batch.schema().field(1).data_type());
                }
            }
            // CSV cannot hold the struct: refused before any work.
            assert!(s.check_output(Format::Csv { header: true }).unwrap_err().to_string().contains("column user"));
        }
    }

    #[test]
    fn csv_rows_written_as_parquet_read_back_as_strings() {
        let s = ItemSet::parse(&b"k,v\nb,1\na,\"x,y\"\nb,3\n"[..], Path::new("c"), Format::Csv { header: true }, &[])
            .unwrap();
        let mut out = Vec::new();
        assert_eq!(s.write_rows_with(&[(0, vec![])], &[], Some(Format::Parquet), &mut out).unwrap(), 2);
        let back = ItemSet::from_bytes(out, Path::new("p"), Format::Parquet, &["v".into()]).unwrap();
        assert_eq!(items(&back), ["1", "3"]);
        // And a Parquet input's rows as CSV.
        let mut csv = Vec::new();
        let p = ItemSet::from_bytes(
            written(Format::Parquet, &[awkward().project(&[0, 2]).unwrap()]),
            Path::new("p"),
            Format::Parquet,
            &[],
        )
        .unwrap();
        p.write_rows_with(&[(2, vec![])], &[], Some(Format::Csv { header: true }), &mut csv).unwrap();
        assert_eq!(String::from_utf8(csv).unwrap(), "key,n\n日本,99\n");
    }

    #[test]
    fn rows_line_up_across_batches_with_their_own_dictionaries() {
        // Two batches whose dictionaries differ (a stream may replace one, an IPC file may
        // not): the rows written back are those of the matching keys, batch after batch.
        let batch = |keys: &[&str], v: &[i32]| {
            let dict: DictionaryArray<Int32Type> = keys.iter().copied().collect();
            RecordBatch::try_from_iter(vec![
                ("k", Arc::new(dict) as ArrayRef),
                ("v", Arc::new(Int32Array::from(v.to_vec())) as ArrayRef),
            ])
            .unwrap()
        };
        let (one, two) = (batch(&["a", "b", "a"], &[1, 2, 3]), batch(&["c", "a", "d"], &[4, 5, 6]));
        let s =
            ItemSet::from_bytes(written(Format::ArrowStream, &[one, two]), Path::new("t"), Format::ArrowStream, &[])
                .unwrap();
        assert_eq!(items(&s), ["a", "b", "c", "d"]);
        assert_eq!(s.column_sums("v").unwrap(), [9, 2, 4, 6]);
        // "a" (rows 0, 2 and 4) and "d" (row 5).
        let matched = [(0, vec![]), (3, vec![])];
        for out_format in [Format::Parquet, Format::Arrow, Format::ArrowStream, Format::Csv { header: true }] {
            let mut out = Vec::new();
            assert_eq!(s.write_rows_with(&matched, &[], Some(out_format), &mut out).unwrap(), 4, "{out_format:?}");
            if out_format == (Format::Csv { header: true }) {
                assert_eq!(String::from_utf8(out).unwrap(), "k,v\na,1\na,3\na,5\nd,6\n");
                continue;
            }
            let back = ItemSet::from_bytes(out, Path::new("o"), out_format, &["v".into()]).unwrap();
            assert_eq!(items(&back), ["1", "3", "5", "6"], "{out_format:?}");
        }
        // A dictionary inside a struct, differing between the batches, into an IPC file.
        let nested = |keys: &[&str]| {
            let dict: DictionaryArray<Int32Type> = keys.iter().copied().collect();
            let f = arrow_schema::Fields::from(vec![Field::new("d", dict.data_type().clone(), true)]);
            let st = StructArray::new(f, vec![Arc::new(dict) as ArrayRef], None);
            let k: StringArray = keys.iter().map(|k| Some(*k)).collect();
            RecordBatch::try_from_iter(vec![("k", Arc::new(k) as ArrayRef), ("s", Arc::new(st) as ArrayRef)]).unwrap()
        };
        let s = ItemSet::from_bytes(
            written(Format::ArrowStream, &[nested(&["a", "b"]), nested(&["c", "a"])]),
            Path::new("t"),
            Format::ArrowStream,
            &[],
        )
        .unwrap();
        let mut out = Vec::new();
        assert_eq!(s.write_rows_with(&[(0, vec![]), (2, vec![])], &[], Some(Format::Arrow), &mut out).unwrap(), 3);
        let back = ItemSet::from_bytes(out, Path::new("o"), Format::Arrow, &["s.d".into()]).unwrap();
        assert_eq!(items(&back), ["a", "c"]);
        // A Parquet file of several row groups, read in batches across them.
        let mut out = Vec::new();
        let props = parquet::file::properties::WriterProperties::builder().set_max_row_group_row_count(Some(2)).build();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, awkward().schema(), Some(props)).unwrap();
        w.write(&awkward()).unwrap();
        w.close().unwrap();
        let p = ItemSet::from_bytes(out, Path::new("p"), Format::Parquet, &["n".into()]).unwrap();
        assert_eq!(items(&p), ["-7", "42", "0", "1", "99"]);
        assert_eq!(p.column_values(&["key".into()]).unwrap(), [["Zoë"], ["a,\"b\""], [""], ["Zoë"], ["日本"]]);
    }

    #[test]
    fn dates_are_keyed_as_dates_and_a_changed_file_is_refused() {
        let days = arrow_array::Date32Array::from(vec![19727]);
        let ms = arrow_array::Date64Array::from(vec![19727 * 86_400_000]);
        for (name, a) in [("d32", Arc::new(days) as ArrayRef), ("d64", Arc::new(ms) as ArrayRef)] {
            let b = RecordBatch::try_from_iter(vec![(name, a)]).unwrap();
            let s = ItemSet::from_bytes(written(Format::Parquet, &[b]), Path::new("t"), Format::Parquet, &[]).unwrap();
            assert_eq!(items(&s), ["2024-01-05"], "{name}");
        }
        // A device or a pipe is refused: it could not be read a second time.
        let e = ItemSet::read(Path::new("/dev/null"), Format::ArrowStream, &[]).unwrap_err().to_string();
        assert!(e.contains("/dev/null: not a regular file"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.arrow");
        std::fs::write(&path, written(Format::Arrow, &[awkward()])).unwrap();
        let s = ItemSet::read(&path, Format::Arrow, &[]).unwrap();
        assert_eq!(s.column_sums("v").unwrap(), [6, 2, 6]);
        std::fs::write(&path, written(Format::Arrow, &[awkward().slice(0, 3)])).unwrap();
        let e = s.column_sums("v").unwrap_err().to_string();
        assert!(e.contains("t.arrow: the file changed"), "{e}");
    }

    #[test]
    fn a_compressed_buffer_claiming_more_than_memory_is_refused_before_it_is_decoded() {
        use arrow_ipc::writer::{FileWriter, IpcWriteOptions, StreamWriter};
        let opts =
            IpcWriteOptions::default().try_with_compression(Some(arrow_ipc::CompressionType::LZ4_FRAME)).unwrap();
        for format in [Format::Arrow, Format::ArrowStream] {
            let mut bytes = Vec::new();
            if format == Format::Arrow {
                let mut w = FileWriter::try_new_with_options(&mut bytes, &awkward().schema(), opts.clone()).unwrap();
                w.write(&awkward()).unwrap();
                w.finish().unwrap();
            } else {
                let mut w = StreamWriter::try_new_with_options(&mut bytes, &awkward().schema(), opts.clone()).unwrap();
                w.write(&awkward()).unwrap();
                w.finish().unwrap();
            }
            assert_eq!(items(&ItemSet::from_bytes(bytes.clone(), Path::new("c"), format, &[]).unwrap()).len(), 3);
            // Each 8-byte word (buffers are aligned to 8) made to claim 2^50 bytes: the
            // reader would abort the process allocating that; it is refused first.
            let mut refused = 0;
            for at in (0..bytes.len() - 8).step_by(8) {
                let mut b = bytes.clone();
                b[at..at + 8].copy_from_slice(&(1i64 << 50).to_le_bytes());
                if let Err(e) = ItemSet::from_bytes(b, Path::new("c.arrow"), format, &[]) {
                    let e = e.to_string();
                    assert!(e.contains("c.arrow"), "{e}");
                    refused += usize::from(e.contains("bytes uncompressed"));
                }
            }
            assert!(refused > 0, "{format:?}");
        }
    }

    #[test]
    fn refusals_name_the_file_and_the_column() {
        let bytes = written(Format::Parquet, &[awkward()]);
        let err = |key: &str, bytes: Vec<u8>| {
            ItemSet::from_bytes(bytes, Path::new("in.parquet"), Format::Parquet, &[key.to_string()])
                .unwrap_err()
                .to_string()
        };
        let e = err("nope", bytes.clone());
        assert!(
            e.contains("in.parquet") && e.contains("no column named 'nope'") && e.contains("key, dict, n, user, v"),
            "{e}"
        );
        assert!(err("user", bytes.clone()).contains("column user is Struct"));
        assert!(err("user.x", bytes.clone()).contains("no column named 'user.x'"));
        let floats =
            RecordBatch::try_from_iter(vec![("f", Arc::new(arrow_array::Float64Array::from(vec![3.0])) as ArrayRef)])
                .unwrap();
        assert!(err("f", written(Format::Parquet, &[floats])).contains("floats are not keys"));
        // A damaged file, cut or flipped anywhere, is an error naming it or a reading of
        // the intact part; never a panic.
        for cut in (0..bytes.len()).step_by(7) {
            let r = ItemSet::from_bytes(bytes[..cut].to_vec(), Path::new("in.parquet"), Format::Parquet, &[]);
            assert!(r.unwrap_err().to_string().contains("in.parquet"));
        }
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            b[at] ^= 0x5a;
            if let Err(e) = ItemSet::from_bytes(b, Path::new("in.parquet"), Format::Parquet, &[]) {
                assert!(e.to_string().contains("in.parquet"), "{e}");
            }
        }
        let arrow = written(Format::Arrow, &[awkward()]);
        for at in 0..arrow.len() {
            let mut b = arrow.clone();
            b[at] ^= 0x5a;
            if let Err(e) = ItemSet::from_bytes(b, Path::new("in.arrow"), Format::Arrow, &[]) {
                assert!(e.to_string().contains("in.arrow"), "{e}");
            }
        }
    }
}
