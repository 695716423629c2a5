//! The layouts of users' files: CSV, text, Parquet and Arrow IPC, named by extension or
//! on the command line.

use std::path::Path;

/// The layout of a user's file, read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values; `header` says whether the first row names the columns.
    Csv {
        /// First row is a header.
        header: bool,
    },
    /// One item per line (a trailing `\r` is dropped).
    Text,
    /// A Parquet file.
    Parquet,
    /// An Arrow IPC file (Feather 2).
    Arrow,
    /// An Arrow IPC stream.
    ArrowStream,
}

impl Format {
    /// Text for `.txt` files, Parquet for `.parquet` and `.pq`, Arrow IPC for `.arrow`,
    /// `.feather` and `.ipc`, an Arrow IPC stream for `.arrows`, CSV (with a header unless
    /// `no_header`) otherwise.
    pub fn guess(path: &Path, no_header: bool) -> Self {
        match Self::by_extension(path) {
            Some(Format::Csv { .. }) | None => Format::Csv { header: !no_header },
            Some(other) => other,
        }
    }

    /// The format a file's extension names, if it names one (`.csv` is CSV with a header).
    pub fn by_extension(path: &Path) -> Option<Self> {
        let ext = path.extension().and_then(|e| e.to_str())?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "txt" => Format::Text,
            "csv" => Format::Csv { header: true },
            "parquet" | "pq" => Format::Parquet,
            "arrow" | "feather" | "ipc" => Format::Arrow,
            "arrows" => Format::ArrowStream,
            _ => return None,
        })
    }

    /// The format named `name` on a command line (`csv`, `text`, `parquet`, `arrow`,
    /// `arrows`), CSV with a header unless `no_header`.
    pub fn by_name(name: &str, no_header: bool) -> Option<Self> {
        Some(match name {
            "csv" => Format::Csv { header: !no_header },
            "text" => Format::Text,
            "parquet" => Format::Parquet,
            "arrow" => Format::Arrow,
            "arrows" => Format::ArrowStream,
            _ => return None,
        })
    }

    /// Whether this is Parquet or Arrow IPC, whose rows are typed columns.
    pub fn is_columnar(self) -> bool {
        matches!(self, Format::Parquet | Format::Arrow | Format::ArrowStream)
    }
}

/// The name of a column added to a user's rows (a label, `private_id`): `name`, or
/// `sender.name` when the rows already have a column of that name (`taken`).
pub(super) fn added_column_name(taken: impl Fn(&str) -> bool, name: &str) -> String {
    if taken(name) { format!("sender.{name}") } else { name.to_string() }
}
