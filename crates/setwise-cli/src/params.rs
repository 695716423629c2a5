//! Unbalanced-PSI parameters from the command line: `auto`, a preset name or a file.

use crate::Failure;
use setwise::protocols::human_bytes;
use setwise::protocols::unbalanced::{UnbalancedParams, auto, params::PRESETS};
use std::path::Path;

/// `auto` (search under a cost model calibrated here), a shipped preset name, or a JSON
/// file; `(name, parameters)`.
pub fn resolve(
    spec: &str,
    sender: usize,
    receiver_max: usize,
    label_bytes: usize,
) -> Result<(String, UnbalancedParams), Failure> {
    if spec == "auto" {
        let choice = auto::choose(sender, receiver_max, label_bytes, &auto::calibrate()).map_err(Failure::usage)?;
        eprintln!(
            "auto parameters: predicted {:.3} s and {} per query ({} bundles per index)",
            choice.seconds,
            human_bytes(choice.bytes as u64),
            choice.bundles_per_index
        );
        return Ok(("auto".into(), choice.params));
    }
    if let Some((name, json)) = PRESETS.iter().find(|(n, _)| *n == spec) {
        return Ok((name.to_string(), UnbalancedParams::from_json(json).map_err(Failure::usage)?));
    }
    let path = Path::new(spec);
    let json = std::fs::read_to_string(path).map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", path.display())))?;
    let p =
        UnbalancedParams::from_json(&json).map_err(|e| Failure::usage(anyhow::anyhow!("{}: {e}", path.display())))?;
    if receiver_max > p.receiver_max() {
        eprintln!("note: {} allows at most {} receiver items per query", path.display(), p.receiver_max());
    }
    Ok((path.display().to_string(), p))
}
