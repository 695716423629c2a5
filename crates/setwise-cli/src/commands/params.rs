//! `setwise params`: unbalanced-PSI parameters chosen for given sizes.

use crate::Failure;
use clap::Args;
use setwise::protocols::human_bytes;
use setwise::protocols::unbalanced::auto;

/// `setwise params`.
#[derive(Args)]
pub struct ParamsArgs {
    /// Sender items.
    #[arg(long)]
    sender_size: usize,
    /// Most receiver items per query.
    #[arg(long, default_value_t = 256)]
    receiver_size: usize,
    /// Label bytes as a database stores them, as `db info` prints them: the longest
    /// label's columns, each with a 2-byte length (a 32-character value in one column is
    /// 34). 0: unlabelled.
    #[arg(long, default_value_t = 0)]
    label_bytes: usize,
    /// The link queries cross: `lan` (10 Gbit/s), `wan` (50 Mbit/s) or a bandwidth in
    /// Mbit/s.
    #[arg(long, default_value = "1000", value_parser = crate::params::parse_link)]
    link: auto::Link,
    /// Predict for these parameters instead of choosing: a preset name or a JSON file
    /// (its N and moduli must be among those `auto` measures); `auto`: choose.
    #[arg(long, value_name = "PRESET|FILE")]
    params: Option<String>,
}

/// Runs `setwise params`: prints the chosen (or given) JSON (stdout) and the prediction
/// (stderr).
pub fn run_params(a: ParamsArgs) -> Result<(), Failure> {
    // A named set is read (and refused) before the calibration's seconds.
    let given = match a.params.as_deref().filter(|&s| s != "auto") {
        Some(spec) => {
            let r = auto::resolve(spec, a.sender_size, a.receiver_size, a.label_bytes, auto::Serving::here(a.link))
                .map_err(Failure::usage)?;
            auto::check_measured(&r.params).map_err(Failure::usage)?;
            Some(r)
        }
        None => None,
    };
    let costs = auto::calibrate();
    for (he, c) in &costs {
        eprintln!(
            "measured {}{}: ct×ct {} ms, relinearisation {} ms (by level), ct×pt {:.3} ms (+ {:.3} ms a sum), mod-switch {:.2} ms, trim {:.3} ms, encode {:.3} ms, encrypt {:.2} ms, key {:.1} ms, decrypt {:.2} ms; query ciphertext {} B, trimmed result {} B, key {} B",
            he.describe(),
            if c.query_level > 0 { " (last a special modulus; at level 1)" } else { "" },
            by_level(&c.mul_ms[c.query_level..]),
            by_level(&c.relin_ms[c.query_level..]),
            c.mul_plain_ms,
            c.result_ms,
            c.mod_switch_ms,
            c.trim_ms,
            c.encode_ms,
            c.encrypt_ms,
            c.key_ms,
            c.decrypt_ms,
            c.bytes[0],
            c.bytes[1],
            c.bytes[2]
        );
    }
    let serving = auto::Serving::here(a.link);
    let choice = match given {
        Some(r) => {
            if let Some(max) = r.receiver_max_below {
                eprintln!("note: {} allows at most {max} receiver items per query", r.name);
            }
            auto::predict_for(&r.params, a.sender_size, a.label_bytes, &costs, serving)
        }
        None => auto::choose(a.sender_size, a.receiver_size, a.label_bytes, &costs, serving),
    }
    .map_err(Failure::usage)?;
    eprintln!(
        "predicted per query: {:.3} s (sender on 2 cores + receiver), {} both ways, {} bundles per index; receiver maximum {}; {}",
        choice.seconds,
        human_bytes(choice.bytes as u64),
        choice.bundles_per_index,
        choice.params.receiver_max(),
        crate::params::serving_line(&choice)
    );
    println!("{}", choice.params.to_json());
    Ok(())
}

/// Milliseconds from the query level down, as `9.1/7.5/5.2`.
fn by_level(ms: &[f64]) -> String {
    ms.iter().map(|m| format!("{m:.2}")).collect::<Vec<_>>().join("/")
}
