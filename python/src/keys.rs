//! A party's keys from Python: one or more key columns, each a Python list of
//! `str`/`bytes`/`None` or Arrow arrays (imported through the Arrow C data interface,
//! without copying the values), joined into items exactly as the CLI joins CSV fields
//! ([`setwise::io::join_fields`]), with empty and repeated keys handled as the CLI does.

use crate::errors::input_error;
use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema, from_ffi};
use arrow_array::{Array, ArrayRef, GenericByteArray, make_array, types::ByteArrayType};
use arrow_buffer::{ArrowNativeType, Buffer};
use arrow_schema::DataType;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyCapsuleMethods, PyList, PyString};
use std::collections::HashMap;
use std::sync::Arc;

/// Bytes that items point into: an Arrow values buffer (shared, not copied) or bytes
/// copied from Python objects or joined from several columns.
enum Buf {
    Arrow(Buffer),
    Owned(Vec<u8>),
}

impl Buf {
    fn bytes(&self) -> &[u8] {
        match self {
            Buf::Arrow(b) => b.as_slice(),
            Buf::Owned(v) => v,
        }
    }
}

/// Where one value lives: a buffer and a range in it.
#[derive(Clone, Copy)]
struct Span {
    buf: u32,
    start: usize,
    len: usize,
}

/// Row → item for rows that take no part (an empty or null key).
const NONE: u32 = u32::MAX;

/// The distinct items of a party and, for each input row, which item it is.
pub struct Store {
    bufs: Vec<Buf>,
    items: Vec<Span>,
    rows: Vec<u32>,
    empty_rows: usize,
}

impl Store {
    /// The distinct items, borrowed from the buffers.
    pub fn items(&self) -> Vec<&[u8]> {
        self.items.iter().map(|s| self.slice(*s)).collect()
    }

    /// Number of distinct items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// The bytes of distinct item `i`, if there is one.
    pub fn item(&self, i: usize) -> Option<&[u8]> {
        self.items.get(i).map(|s| self.slice(*s))
    }

    /// The item of each input row (None for rows that take no part).
    pub fn row_items(&self) -> impl ExactSizeIterator<Item = Option<usize>> + '_ {
        self.rows.iter().map(|&i| (i != NONE).then_some(i as usize))
    }

    /// The first input row of each distinct item.
    pub fn first_rows(&self) -> Vec<usize> {
        let mut first = vec![usize::MAX; self.items.len()];
        for (row, &i) in self.rows.iter().enumerate().rev() {
            if i != NONE {
                first[i as usize] = row;
            }
        }
        first
    }

    fn slice(&self, s: Span) -> &[u8] {
        slice(&self.bufs, s)
    }
}

/// One key column: its values' spans (None for null) over `bufs`.
struct Column {
    spans: Vec<Option<Span>>,
}

fn arrow_bytes<T: ByteArrayType>(array: &GenericByteArray<T>, bufs: &mut Vec<Buf>, spans: &mut Vec<Option<Span>>) {
    let buf = bufs.len() as u32;
    bufs.push(Buf::Arrow(array.values().clone()));
    let offsets = array.value_offsets();
    for i in 0..array.len() {
        if array.is_null(i) {
            spans.push(None);
        } else {
            let (a, b) = (offsets[i].as_usize(), offsets[i + 1].as_usize());
            spans.push(Some(Span { buf, start: a, len: b - a }));
        }
    }
}

/// Imports an object with `__arrow_c_array__` (the Arrow PyCapsule interface).
pub(crate) fn import_arrow(obj: &Bound<'_, PyAny>) -> PyResult<ArrayRef> {
    let pair = obj.call_method0("__arrow_c_array__")?;
    let (schema, array): (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>) = pair.extract()?;
    let schema_ptr = schema.pointer_checked(Some(c"arrow_schema"))?.as_ptr() as *mut FFI_ArrowSchema;
    let array_ptr = array.pointer_checked(Some(c"arrow_array"))?.as_ptr() as *mut FFI_ArrowArray;
    // SAFETY: the capsules hold valid C data interface structs (checked by name); the
    // array is moved out (its release callback becomes ours, the capsule's destructor
    // sees it released), the schema is only borrowed while the capsule lives.
    let data = unsafe {
        let array = FFI_ArrowArray::from_raw(array_ptr);
        from_ffi(array, &*schema_ptr)
    }
    .map_err(|e| input_error(format!("reading an Arrow array: {e}")))?;
    // The producer's offsets and UTF-8 are checked once here, so no key slice below can
    // fall outside its buffer.
    data.validate_full().map_err(|e| input_error(format!("an invalid Arrow array: {e}")))?;
    Ok(make_array(data))
}

fn arrow_column(chunks: &Bound<'_, PyList>, bufs: &mut Vec<Buf>) -> PyResult<Column> {
    let mut spans = Vec::new();
    for chunk in chunks.iter() {
        let array = import_arrow(&chunk)?;
        let any = array.as_any();
        match array.data_type() {
            DataType::Utf8 => {
                arrow_bytes(any.downcast_ref::<arrow_array::StringArray>().expect("utf8"), bufs, &mut spans)
            }
            DataType::LargeUtf8 => {
                arrow_bytes(any.downcast_ref::<arrow_array::LargeStringArray>().expect("large utf8"), bufs, &mut spans)
            }
            DataType::Binary => {
                arrow_bytes(any.downcast_ref::<arrow_array::BinaryArray>().expect("binary"), bufs, &mut spans)
            }
            DataType::LargeBinary => arrow_bytes(
                any.downcast_ref::<arrow_array::LargeBinaryArray>().expect("large binary"),
                bufs,
                &mut spans,
            ),
            other => {
                return Err(PyTypeError::new_err(format!(
                    "a key column must be Arrow string or binary, not {other} (cast it to string first)"
                )));
            }
        }
    }
    Ok(Column { spans })
}

fn python_column(values: &Bound<'_, PyList>, bufs: &mut Vec<Buf>) -> PyResult<Column> {
    let buf = bufs.len() as u32;
    let mut data = Vec::new();
    let mut spans = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let start = data.len();
        if v.is_none() {
            spans.push(None);
            continue;
        } else if let Ok(s) = v.cast::<PyString>() {
            data.extend_from_slice(s.to_cow()?.as_bytes());
        } else if let Ok(b) = v.cast::<PyBytes>() {
            data.extend_from_slice(b.as_bytes());
        } else {
            return Err(PyTypeError::new_err(format!("key {i} is a {}, not str, bytes or None", v.get_type().name()?)));
        }
        spans.push(Some(Span { buf, start, len: data.len() - start }));
    }
    bufs.push(Buf::Owned(data));
    Ok(Column { spans })
}

/// A party's keys, ready for a run: built once from its columns and shared by runs.
#[pyclass(module = "setwise._setwise", frozen)]
pub struct Keys {
    /// The distinct items and the rows behind them.
    pub store: Arc<Store>,
    /// Number of key columns joined into each item.
    #[pyo3(get)]
    pub key_columns: usize,
}

#[pymethods]
impl Keys {
    /// `columns`: one `("py", list)` or `("arrow", [arrays])` per key column, all with
    /// the same number of rows.
    #[new]
    fn new(py: Python<'_>, columns: Vec<(String, Bound<'_, PyList>)>) -> PyResult<Self> {
        if columns.is_empty() {
            return Err(input_error("at least one key column is needed"));
        }
        let mut bufs = Vec::new();
        let cols = columns
            .iter()
            .map(|(kind, values)| match kind.as_str() {
                "arrow" => arrow_column(values, &mut bufs),
                _ => python_column(values, &mut bufs),
            })
            .collect::<PyResult<Vec<Column>>>()?;
        let n = cols[0].spans.len();
        if let Some(c) = cols.iter().position(|c| c.spans.len() != n) {
            return Err(input_error(format!("key column {c} has {} rows, the first has {n}", cols[c].spans.len())));
        }
        if n >= NONE as usize {
            return Err(input_error(format!("{n} rows: at most {} per run", NONE - 1)));
        }
        let key_columns = cols.len();
        let store = py.detach(|| build(bufs, &cols, n));
        Ok(Self { store: Arc::new(store), key_columns })
    }

    /// Number of input rows.
    #[getter]
    fn rows(&self) -> usize {
        self.store.rows.len()
    }

    /// Number of distinct items (what the peer learns as this party's set size).
    fn __len__(&self) -> usize {
        self.store.len()
    }

    /// Rows whose key was empty or null (they take no part).
    #[getter]
    fn empty_rows(&self) -> usize {
        self.store.empty_rows
    }

    /// Rows whose key repeats an earlier row's.
    #[getter]
    fn repeated_rows(&self) -> usize {
        self.store.rows.len() - self.store.empty_rows - self.store.items.len()
    }

    /// The input rows (ascending) whose item is one of `items` (indices of distinct
    /// items, as a run returns them).
    fn rows_of(&self, py: Python<'_>, items: Vec<usize>) -> PyResult<Vec<usize>> {
        let n = self.store.items.len();
        if let Some(&bad) = items.iter().find(|&&i| i >= n) {
            return Err(input_error(format!("item {bad} is out of range: there are {n} items")));
        }
        Ok(py.detach(|| {
            let mut wanted = vec![false; n];
            items.iter().for_each(|&i| wanted[i] = true);
            let rows = &self.store.rows;
            (0..rows.len()).filter(|&r| rows[r] != NONE && wanted[rows[r] as usize]).collect()
        }))
    }

    /// The item of each row (None for rows that take no part).
    fn row_items(&self) -> Vec<Option<usize>> {
        self.store.row_items().collect()
    }

    /// The bytes of item `i`.
    fn item<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyBytes>> {
        let item = self.store.item(i).ok_or_else(|| input_error(format!("no item {i}")))?;
        Ok(PyBytes::new(py, item))
    }
}

/// Joins the columns row by row and keeps each distinct item once (first row wins).
fn build(mut bufs: Vec<Buf>, cols: &[Column], n: usize) -> Store {
    // Several columns: join into one owned buffer first (one column stays in place).
    let keyed: Vec<Option<Span>> = if let [col] = cols {
        col.spans.clone()
    } else {
        let joined_buf = bufs.len() as u32;
        let mut joined = Vec::new();
        let mut key = Vec::new();
        let spans = (0..n)
            .map(|r| {
                let fields = cols.iter().map(|c| c.spans[r].map_or(&[][..], |s| slice(&bufs, s)));
                setwise::io::join_fields(fields, cols.len(), &mut key);
                let start = joined.len();
                joined.extend_from_slice(&key);
                Some(Span { buf: joined_buf, start, len: key.len() })
            })
            .collect();
        bufs.push(Buf::Owned(joined));
        spans
    };
    let mut index: HashMap<&[u8], u32> = HashMap::with_capacity(n);
    let mut items = Vec::new();
    let mut rows = Vec::with_capacity(n);
    let mut empty_rows = 0;
    for span in &keyed {
        match span.filter(|s| s.len > 0) {
            None => {
                empty_rows += 1;
                rows.push(NONE);
            }
            Some(s) => {
                let next = items.len() as u32;
                let i = *index.entry(slice(&bufs, s)).or_insert(next);
                if i == next {
                    items.push(s);
                }
                rows.push(i);
            }
        }
    }
    drop(index);
    Store { bufs, items, rows, empty_rows }
}

fn slice(bufs: &[Buf], s: Span) -> &[u8] {
    &bufs[s.buf as usize].bytes()[s.start..s.start + s.len]
}
