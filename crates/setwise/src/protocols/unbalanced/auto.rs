//! Automatic parameters: search N, table size, bin degree and source powers for the
//! cheapest feasible set under a cost model calibrated on this machine.
//!
//! Cost of one query (seconds): sender work / 2 cores + receiver work + bytes / 125 MB/s
//! (a 1 Gbit/s link), where, per candidate,
//! - bundles per index ≈ ⌈(λ + 3√λ) / B⌉ with λ = hash_func_count · sender / table_size
//!   (the fullest bin's load), results = indices · bundles · (1 + label parts);
//! - sender = indices · products · t(ct×ct) + results · (B · t(ct×pt) + \[products > 0\] · t(relin) + t(mod-switch));
//! - receiver = indices · sources · t(encrypt) + results · t(decrypt);
//! - bytes = indices · sources · |fresh ct| + \[products > 0\] · |relin key| + results · |trimmed result|.

use super::LabelLayout;
use super::params::UnbalancedParams;
use crate::error::{Error, Result};
use crate::he::{Evaluator, HeContext, HeParams, SecretKey};
use std::time::Instant;

/// Measured costs of one BFV configuration.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct OpCosts {
    /// ct×ct left unrelinearised (the sender sums products before relinearising), ms.
    pub mul_ms: f64,
    /// One relinearisation (once per result when the sender derives powers), ms.
    pub relin_ms: f64,
    /// ct×pt, ms.
    pub mul_plain_ms: f64,
    /// Mod-switch to the last level, ms.
    pub mod_switch_ms: f64,
    /// Secret-key encryption, ms.
    pub encrypt_ms: f64,
    /// Decryption of a last-level ciphertext, ms.
    pub decrypt_ms: f64,
    /// Bytes of a fresh seeded ciphertext, a trimmed last-level result and a relinearisation key.
    pub bytes: [usize; 3],
}

/// The BFV configurations the search considers: N, moduli, and the plain modulus bits.
/// A large t suits depth 0 (all powers sent); the smallest t for N=4096 leaves room
/// for one product level (a few sources, powers derived by the sender).
const CONFIGS: &[(usize, &[usize], u32)] =
    &[(4096, &[42, 32], 21), (4096, &[47, 47], 16), (8192, &[43, 43, 44, 44, 44], 21)];

/// Measures `OpCosts` for each configuration (about a third of a second in all).
pub fn calibrate() -> Vec<(HeParams, OpCosts)> {
    CONFIGS
        .iter()
        .map(|&(n, moduli, bits)| {
            let he =
                HeParams { degree: n, plain_modulus: HeParams::batching_prime(n, bits), moduli_bits: moduli.to_vec() };
            let ctx = HeContext::new(&he).expect("built-in configuration");
            let mut sk = SecretKey::generate(&ctx);
            let rk = sk.relin_key().expect("relin key");
            let ev = Evaluator::new(Some(&rk));
            let v: Vec<u64> = (0..n as u64).collect();
            let time = |reps: usize, f: &mut dyn FnMut()| {
                let t = Instant::now();
                for _ in 0..reps {
                    f();
                }
                t.elapsed().as_secs_f64() * 1e3 / reps as f64
            };
            let c = sk.encrypt(&v).expect("encrypt");
            let fresh = c.to_bytes().len();
            let encrypt_ms = time(5, &mut || drop(sk.encrypt(&v)));
            let pt = ctx.encode(&v, 0).expect("encode");
            let mul_ms = time(3, &mut || drop(ev.mul_lazy(&c, &c)));
            let product = ev.mul_lazy(&c, &c).expect("product");
            let relin_ms = time(3, &mut || {
                let mut p = product.clone();
                ev.relinearize(&mut p).expect("relinearise");
            });
            let mul_plain_ms = time(20, &mut || drop(ev.dot_plain(&[&c], std::slice::from_ref(&pt), None)));
            let mut last = c.clone();
            let mod_switch_ms = time(3, &mut || {
                last = c.clone();
                last.mod_switch_to_last().expect("switch");
            });
            let decrypt_ms = time(5, &mut || drop(sk.decrypt(&last)));
            let costs = OpCosts {
                mul_ms,
                relin_ms,
                mul_plain_ms,
                mod_switch_ms,
                encrypt_ms,
                decrypt_ms,
                bytes: [fresh, ctx.trimmed_bytes(ctx.result_trim()), rk.to_bytes().len()],
            };
            (he, costs)
        })
        .collect()
}

/// A chosen parameter set with its predicted cost per query.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Choice {
    /// The parameters.
    pub params: UnbalancedParams,
    /// Predicted query seconds (sender on 2 cores + receiver).
    pub seconds: f64,
    /// Predicted bytes both ways.
    pub bytes: usize,
    /// Predicted bundles per bundle index.
    pub bundles_per_index: usize,
}

/// The cheapest feasible parameters for `sender` items, up to `receiver_max` receiver
/// items per query and labels of `label_bytes`, under `costs` (from [`calibrate`]).
pub fn choose(sender: usize, receiver_max: usize, label_bytes: usize, costs: &[(HeParams, OpCosts)]) -> Result<Choice> {
    const DEGREES: [usize; 14] = [4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256];
    // Sources per degree: every power (depth 0), or a depth-one basis (powers derived by
    // the sender); the basis search runs once per degree, not per configuration.
    let bases: Vec<[Vec<u32>; 2]> =
        DEGREES.iter().map(|&d| [(1..=d as u32).collect(), crate::he::depth_one_sources(d as u32, 300)]).collect();
    let mut best: Option<(f64, Choice)> = None;
    for (he, c) in costs {
        let n = he.degree;
        let felt_bits = 63 - he.plain_modulus.leading_zeros() as usize;
        let min_felts = 80usize.div_ceil(felt_bits);
        for (felts, (degree, bases)) in
            (min_felts..=min_felts + 1).flat_map(|f| DEGREES.iter().copied().zip(&bases).map(move |d| (f, d)))
        {
            let bpb = n / felts;
            for sources in bases {
                let s = sources.len();
                // One hash function serves single-item queries: each sender item is stored once.
                for h in if receiver_max <= 1 { vec![1, 3] } else { vec![3] } {
                    let mut table = bpb;
                    while crate::hashing::cuckoo::failure_log2(receiver_max.max(1), table, h)
                        > super::params::MAX_CUCKOO_FAILURE_LOG2
                    {
                        table += bpb;
                    }
                    for table in [table, 2 * table] {
                        let p = UnbalancedParams {
                            table_params: super::params::TableParams {
                                hash_func_count: h,
                                table_size: table,
                                max_items_per_bin: degree,
                            },
                            item_params: super::params::ItemParams { felts_per_item: felts },
                            query_params: super::params::QueryParams {
                                ps_low_degree: 0,
                                query_powers: sources.clone(),
                            },
                            seal_params: super::params::SealParams {
                                poly_modulus_degree: n,
                                coeff_modulus_bits: he.moduli_bits.clone(),
                                plain_modulus: he.plain_modulus,
                            },
                        };
                        if p.validate().is_err() {
                            continue;
                        }
                        let indices = p.bundle_indices();
                        let lambda = h as f64 * sender as f64 / table as f64;
                        let bundles = ((lambda + 3.0 * lambda.sqrt()) / degree as f64).ceil().max(1.0) as usize;
                        // The built database is checked at the table's receiver maximum and
                        // its real bundle count, which can exceed the estimate by a few.
                        let margin = bundles + bundles.div_ceil(16) + 1;
                        if p.false_match_log2(p.receiver_max(), margin) > super::params::MAX_FALSE_MATCH_LOG2 {
                            continue;
                        }
                        let parts =
                            if label_bytes > 0 { LabelLayout::new(&p, Vec::new(), label_bytes).parts } else { 0 };
                        let products = p.plan().map(|pl| pl.products()).unwrap_or(usize::MAX / 4);
                        let results = (indices * bundles * (1 + parts)) as f64;
                        let relin = if products > 0 { c.relin_ms } else { 0.0 };
                        let sender_ms = (indices * products) as f64 * c.mul_ms
                            + results * (degree as f64 * c.mul_plain_ms + relin + c.mod_switch_ms);
                        let receiver_ms = (indices * s) as f64 * c.encrypt_ms + results * c.decrypt_ms;
                        let key = if products > 0 { c.bytes[2] } else { 0 };
                        let bytes = indices * s * c.bytes[0] + key + results as usize * c.bytes[1];
                        let seconds = sender_ms / 2e3 + receiver_ms / 1e3;
                        let cost = seconds + bytes as f64 / 125e6;
                        if best.as_ref().is_none_or(|(b, _)| cost < *b) {
                            best = Some((cost, Choice { params: p, seconds, bytes, bundles_per_index: bundles }));
                        }
                    }
                }
            }
        }
    }
    best.map(|(_, c)| c).ok_or_else(|| {
        Error::params(
            "sizes",
            format!("no feasible parameters for {sender} sender items and {receiver_max} receiver items"),
        )
    })
}

/// Parameters resolved from what a user names: `auto`, a preset or a JSON file.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Where they came from: `auto`, the preset's name, or the file's path.
    pub name: String,
    /// The parameters.
    pub params: UnbalancedParams,
    /// `auto`: the predicted cost of a query.
    pub predicted: Option<Choice>,
    /// A JSON file allowing fewer receiver items per query than asked for: how many.
    pub receiver_max_below: Option<usize>,
}

/// Resolves `spec` for a database of `sender` items serving up to `receiver_max` items
/// per query with labels of `label_bytes`: `auto` (a search under a cost model
/// calibrated on this machine), a shipped preset name (see
/// [`PRESETS`](super::params::PRESETS)), or the path of an APSI-style JSON file. The
/// one rule for the CLI and the Python package.
pub fn resolve(spec: &str, sender: usize, receiver_max: usize, label_bytes: usize) -> Result<Resolved> {
    if spec == "auto" {
        let choice = choose(sender, receiver_max, label_bytes, &calibrate())?;
        let params = choice.params.clone();
        return Ok(Resolved { name: "auto".into(), params, predicted: Some(choice), receiver_max_below: None });
    }
    if let Some((name, json)) = super::params::PRESETS.iter().find(|(n, _)| *n == spec) {
        let params = UnbalancedParams::from_json(json)?;
        return Ok(Resolved { name: name.to_string(), params, predicted: None, receiver_max_below: None });
    }
    let path = std::path::Path::new(spec);
    let json = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
    let params = UnbalancedParams::from_json(&json).map_err(|e| e.in_params_of(path.display()))?;
    let below = (receiver_max > params.receiver_max()).then(|| params.receiver_max());
    Ok(Resolved { name: path.display().to_string(), params, predicted: None, receiver_max_below: below })
}
