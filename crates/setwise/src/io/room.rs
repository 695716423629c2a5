//! How many rows an input read a part at a time may have (Parquet and Arrow batches, CSV
//! and text blocks), and the stamp by which a later pass knows its file is unchanged.

use crate::error::InputError;
use std::path::Path;

/// Most rows of an input: items and rows are indexed by `u32`, with `u32::MAX` kept for
/// a skipped row.
pub(super) const MAX_ROWS: usize = u32::MAX as usize - 1;

/// Bytes a row takes at the least while its keys are read (its key's range, its item's
/// and the index of distinct items), to refuse a file that claims more rows than fit in
/// memory before they are read: a few kilobytes of run-length-encoded Parquet can hold
/// billions of rows.
const ROW_BYTES: usize = 48;

/// The rows the memory this machine has left can index (see [`ROW_BYTES`]), at most
/// [`MAX_ROWS`].
pub(super) fn rows_room() -> usize {
    super::memory::available_memory().map_or(MAX_ROWS, |m| (m / ROW_BYTES).min(MAX_ROWS))
}

/// The error for a file with more rows than `room`.
pub(super) fn too_many_rows(path: &Path, rows: usize, room: usize) -> InputError {
    InputError::Invalid(format!(
        "{}: the file holds more than {room} rows ({rows} read so far), more than setwise can index in the memory this machine has left",
        path.display()
    ))
}

/// A file's length and modification time.
pub(super) type Stamp = (u64, Option<std::time::SystemTime>);

/// The stamp of a file's metadata (of an open file: the file read, whatever its path
/// names by then).
pub(super) fn stamp_of(m: &std::fs::Metadata) -> Stamp {
    (m.len(), m.modified().ok())
}
