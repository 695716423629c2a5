//! Unbalanced-PSI parameters from the command line: `auto`, a preset name or a file
//! (resolved by the library's [`auto::resolve`]), with what the choice means printed.

use crate::Failure;
use setwise::protocols::human_bytes;
use setwise::protocols::unbalanced::{UnbalancedParams, auto};

/// `--link`: a link's name or bandwidth ([`auto::Link::parse`]).
pub fn parse_link(s: &str) -> Result<auto::Link, String> {
    auto::Link::parse(s).map_err(|e| e.to_string())
}

/// How `choice` is predicted to serve, and in how much memory.
pub fn serving_line(choice: &auto::Choice) -> String {
    match (choice.compact, choice.on_disk_bytes) {
        (false, 0) => format!("served encoded in about {}", human_bytes(choice.memory_bytes as u64)),
        (false, disk) => format!(
            "served encoded with about {} in memory and {} read per query from its encoded copy on disk: all of \
             its plaintexts would not fit in the memory available here",
            human_bytes(choice.memory_bytes as u64),
            human_bytes(disk as u64)
        ),
        (true, _) => format!(
            "served in compact mode (--compact) in about {}: encoded, its plaintexts would not fit in the memory \
             available here, and encoding them per query is cheaper than reading them from disk",
            human_bytes(choice.memory_bytes as u64)
        ),
    }
}

/// `auto` (search under a cost model calibrated here, the bytes crossing `link`), a
/// shipped preset name, or a JSON file; `(name, parameters)`.
pub fn resolve(
    spec: &str,
    sender: usize,
    receiver_max: usize,
    label_bytes: usize,
    link: auto::Link,
) -> Result<(String, UnbalancedParams), Failure> {
    // The database is assumed to serve on a machine like this one.
    let r = auto::resolve(spec, sender, receiver_max, label_bytes, auto::Serving::here(link))
        .map_err(|e| Failure::usage(anyhow::Error::new(e)))?;
    if let Some(choice) = &r.predicted {
        eprintln!(
            "auto parameters: predicted {:.3} s and {} per query ({} bundles per index); {}",
            choice.seconds,
            human_bytes(choice.bytes as u64),
            choice.bundles_per_index,
            serving_line(choice)
        );
    }
    if let Some(max) = r.receiver_max_below {
        eprintln!("note: {} allows at most {max} receiver items per query", r.name);
    }
    Ok((r.name, r.params))
}
