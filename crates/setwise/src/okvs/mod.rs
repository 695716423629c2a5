//! An oblivious key-value store from random band matrices (RB-OKVS: Bienstock, Patel,
//! Seo, Yeo, "Near-Optimal Oblivious Key-Value Stores for Efficient PSI, PSU and
//! Volume-Hiding Multi-Maps", USENIX Security 2023).
//!
//! [`Okvs::encode`] finds a vector `P` of `m = (1 + ε)·n` elements such that every key `k`
//! decodes to its value: `⟨row(k), P⟩ = value(k)`, where `row(k)` is `w` random bits
//! (the band) placed at a random start in `0..=m − w`. Rows and starts come from a
//! fixed-key AES hash of the key under a per-store seed (module `band`). Encoding sorts the
//! rows by start and eliminates column by column inside the band (O(n·w) row
//! operations of `w/64` words), then back-substitutes; columns no row pins are random,
//! so `P` reveals nothing about the keys. A system without a solution (probability
//! below 2^-40 at [`OkvsParams::for_items`]'s parameters) is retried with a fresh seed.
//! Decoding a key XORs the ≈ w/2 elements its band selects.

mod band;

pub use band::{Band, BandHasher, EPSILON, LAMBDA, MAX_BAND};

use crate::crypto::prg::Prg;
use crate::crypto::rng::fill_os;
use crate::hashing::buckets::group_by_bucket;
use crate::math::gf128::Gf128;
use rayon::prelude::*;

/// The shape of a store: items it holds, columns and band width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OkvsParams {
    /// Columns `m` of the store (elements of `P`).
    pub columns: usize,
    /// Band width `w` in bits (≤ [`MAX_BAND`]).
    pub band: usize,
}

impl OkvsParams {
    /// Parameters for `n` keys with failure probability ≤ 2^-40 per encoding:
    /// ε = 0.1 and the band width from RB-OKVS's fits (`band::width`: 189 bits up to
    /// 2^16 keys, 206 up to 2^20, 218 up to 2^24).
    pub fn for_items(n: usize) -> Self {
        let band = band::width(n);
        let columns = ((n as f64 * (1.0 + band::EPSILON)).ceil() as usize).max(band + 1);
        Self { columns, band }
    }
}

/// Encoding found no solution: the rows are linearly dependent with conflicting values
/// (or two keys are equal with different values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsolvable;

/// An encoded store: its seed (which fixes every key's row) and its columns. Its shape
/// is checked on construction, so decoding never reads outside the columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Okvs {
    seed: [u8; 16],
    params: OkvsParams,
    columns: Vec<Gf128>,
}

/// [`Okvs::decode_many`] sorts keys by band start from this many keys on (measured: at
/// 2^20 keys the store fits the caches and sorting costs more than it saves; at 2^24
/// it cuts decoding from 5.2 s to 3.8 s).
const SWEEP_FROM: usize = 1 << 22;
/// … into blocks of 2^this columns (16 KiB).
const SWEEP_BLOCK: usize = 10;

/// Encoding tries a fresh seed this many times before giving up; with a failure
/// probability ≤ 2^-40 per try, a second try is already vanishingly rare.
pub const MAX_TRIES: usize = 8;

impl Okvs {
    /// Encodes `keys[i] ↦ values[i]` (distinct keys) under `params`, retrying with fresh
    /// seeds on the rare unsolvable system.
    pub fn encode(params: OkvsParams, keys: &[u128], values: &[Gf128]) -> Result<Self, Unsolvable> {
        assert_eq!(keys.len(), values.len(), "one value per key");
        for _ in 0..MAX_TRIES {
            let mut seed = [0u8; 16];
            fill_os(&mut seed);
            if let Ok(columns) = encode_with(params, &seed, keys, values) {
                return Ok(Self { seed, params, columns });
            }
        }
        Err(Unsolvable)
    }

    /// A store from its parts, e.g. as received from a peer: refused unless the
    /// columns are as many as `params` says and the band fits inside them.
    pub fn from_parts(seed: [u8; 16], params: OkvsParams, columns: Vec<Gf128>) -> crate::Result<Self> {
        if params.band == 0 || params.band > MAX_BAND || params.band >= params.columns {
            return Err(crate::Error::Params(format!(
                "OKVS shape {params:?}: the band must be 1..={MAX_BAND} and narrower than the store"
            )));
        }
        if columns.len() != params.columns {
            return Err(crate::Error::Params(format!(
                "OKVS of {} columns where {} were agreed",
                columns.len(),
                params.columns
            )));
        }
        Ok(Self { seed, params, columns })
    }

    /// The seed of the row hash.
    pub fn seed(&self) -> &[u8; 16] {
        &self.seed
    }

    /// The shape.
    pub fn params(&self) -> OkvsParams {
        self.params
    }

    /// The columns `P`.
    pub fn columns(&self) -> &[Gf128] {
        &self.columns
    }

    /// The value of `key` (a random-looking element for a key not encoded).
    pub fn decode(&self, key: u128) -> Gf128 {
        let hasher = BandHasher::new(&self.seed, self.params);
        hasher.band(key).dot(&self.columns)
    }

    /// The values of many keys, in parallel. Keys are decoded in the order of where
    /// their bands start (grouped by blocks of 2^10 columns, `hashing::buckets`), so the
    /// decoding sweeps the store once instead of jumping around it: a large store does
    /// not fit in the caches, and each band reads w/8 of its bytes.
    pub fn decode_many(&self, keys: &[u128]) -> Vec<Gf128> {
        let hasher = BandHasher::new(&self.seed, self.params);
        let decode = |k: u128| hasher.band(k).dot(&self.columns);
        if keys.len() < SWEEP_FROM {
            return keys.par_iter().with_min_len(1024).map(|&k| decode(k)).collect();
        }
        self.decode_sweeping(&hasher, keys)
    }

    /// [`decode_many`](Self::decode_many) for large key lists: in order of band start.
    fn decode_sweeping(&self, hasher: &BandHasher, keys: &[u128]) -> Vec<Gf128> {
        let decode = |k: u128| hasher.band(k).dot(&self.columns);
        let blocks: Vec<u32> = keys.par_iter().map(|&k| (hasher.start(k) >> SWEEP_BLOCK) as u32).collect();
        let (_, order) = group_by_bucket(&blocks, (self.params.columns >> SWEEP_BLOCK) + 1);
        let values: Vec<Gf128> = order.par_iter().with_min_len(1024).map(|&i| decode(keys[i as usize])).collect();
        let mut out = vec![Gf128::ZERO; keys.len()];
        for (&i, v) in order.iter().zip(values) {
            out[i as usize] = v;
        }
        out
    }
}

/// Encodes with one seed: sorted band elimination, then back substitution.
pub fn encode_with(
    params: OkvsParams,
    seed: &[u8; 16],
    keys: &[u128],
    values: &[Gf128],
) -> Result<Vec<Gf128>, Unsolvable> {
    let hasher = BandHasher::new(seed, params);
    let mut rows: Vec<(Band, Gf128)> =
        keys.par_iter().with_min_len(1024).zip(values).map(|(&k, &v)| (hasher.band(k), v)).collect();
    rows.par_sort_unstable_by_key(|(b, _)| b.start);
    // Forward elimination: each row's lowest set column becomes its pivot and is cleared
    // from the later rows whose band reaches it (they start at or before it).
    let mut pivots = vec![usize::MAX; rows.len()];
    for i in 0..rows.len() {
        let Some(offset) = rows[i].0.lowest() else {
            // An all-zero row: consistent only if its value is zero too.
            if rows[i].1 == Gf128::ZERO {
                continue;
            }
            return Err(Unsolvable);
        };
        let pivot = rows[i].0.start + offset;
        pivots[i] = pivot;
        let (done, rest) = rows.split_at_mut(i + 1);
        let (row, value) = done[i];
        for (other, other_value) in rest.iter_mut().take_while(|(b, _)| b.start <= pivot) {
            if other.get(pivot - other.start) {
                other.xor_shifted(&row, other.start - row.start);
                *other_value += value;
            }
        }
    }
    // Back substitution, last pivot first; free columns stay random.
    let mut p: Vec<Gf128> = random_columns(params.columns);
    for (i, (row, value)) in rows.iter().enumerate().rev() {
        let pivot = pivots[i];
        if pivot == usize::MAX {
            continue;
        }
        p[pivot] = Gf128::ZERO;
        p[pivot] = *value + row.dot(&p);
    }
    Ok(p)
}

/// `n` random columns: AES in counter mode from a fresh OS seed (the OS generator
/// itself is an order of magnitude slower for hundreds of megabytes).
fn random_columns(n: usize) -> Vec<Gf128> {
    let mut seed = [0u8; 16];
    fill_os(&mut seed);
    let prg = Prg::new(u128::from_le_bytes(seed));
    let mut p = vec![Gf128::ZERO; n];
    p.par_chunks_mut(1 << 14).enumerate().for_each(|(c, chunk)| {
        let blocks = prg.blocks(c << 14, chunk.len());
        for (x, b) in chunk.iter_mut().zip(blocks) {
            *x = Gf128(b);
        }
    });
    p
}

#[cfg(test)]
mod tests;
