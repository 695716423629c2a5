//! Users' files: items from CSV, text, Parquet or Arrow IPC (key columns, values, labels) and matching rows
//! written back ([`ItemSet`]), the check that a caller's items form a set, outputs that
//! appear complete or not at all ([`AtomicFile`]), hexadecimal text, and the memory the
//! kernel says is left ([`memory`]).

mod atomic;
#[cfg(feature = "columnar")]
mod columnar;
#[cfg(not(feature = "columnar"))]
#[path = "columnar_off.rs"]
mod columnar;
mod distinct;
mod format;
mod hex;
mod items;
pub mod memory;
mod room;
mod rows;
mod small;
mod streamed;

#[cfg(feature = "testing")]
pub(crate) use rows::split_with;

pub use crate::error::InputError;
pub(crate) use atomic::private_options;
pub use atomic::{AtomicFile, sync_dir, write_atomic, write_new};
pub use distinct::{check_distinct, first_occurrences};
pub use format::Format;
pub use hex::{from_hex, hex};
pub use items::{ItemKeys, ItemSet, ReadStats, split_key};
pub use rows::join_fields;
pub use small::read_small;

/// A named pipe `name` made in `dir`, for tests of inputs and outputs that are not files.
#[cfg(all(test, unix))]
fn fifo_in(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let fifo = dir.join(name);
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    fifo
}
