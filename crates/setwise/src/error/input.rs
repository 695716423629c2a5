//! What is wrong with the caller's input file.

use std::path::PathBuf;

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
    /// Two items of a set are equal (a set holds each item once; [`ItemSet`](crate::io::ItemSet) merges
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
