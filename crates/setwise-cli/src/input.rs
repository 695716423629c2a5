//! Reading a party's items (and, for `sum`, its values) from its file.

use crate::Failure;
use crate::args::InputArgs;
use setwise::io::{Format, ItemSet};

/// Reads the items named by `a`, telling about skipped and repeated rows.
pub fn read_items(a: &InputArgs) -> Result<ItemSet, Failure> {
    let path = a.input.as_ref().ok_or_else(|| Failure::usage(anyhow::anyhow!("--input FILE is required")))?;
    let format = match a.format.as_deref() {
        Some(name) => Format::by_name(name, a.no_header)
            .ok_or_else(|| Failure::usage(anyhow::anyhow!("--format {name}: not a format")))?,
        None => Format::guess(path, a.no_header),
    };
    let set = ItemSet::read(path, format, &a.key)?;
    let s = set.stats();
    if s.empty_keys > 0 || s.duplicate_rows > 0 {
        eprintln!(
            "{}: {} rows, {} distinct items ({} rows with an empty key skipped, {} rows repeat an earlier key)",
            path.display(),
            s.rows,
            set.len(),
            s.empty_keys,
            s.duplicate_rows
        );
    }
    Ok(set)
}

/// For `sum`: each item's value (rows with one key added), checked against `bound`.
pub fn sum_values(set: &ItemSet, column: &str, bound: u64) -> Result<Vec<u64>, Failure> {
    set.column_sums(column)?
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            u64::try_from(v).ok().filter(|&v| v <= bound).ok_or_else(|| {
                Failure::usage(anyhow::anyhow!(
                    "item {} has the value {v}, above --value-bound {bound}",
                    String::from_utf8_lossy(set.item(i))
                ))
            })
        })
        .collect()
}
