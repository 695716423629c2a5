//! An oblivious key-value store from random band matrices (RB-OKVS: Bienstock, Patel,
//! Seo, Yeo, "Near-Optimal Oblivious Key-Value Stores for Efficient PSI, PSU and
//! Volume-Hiding Multi-Maps", USENIX Security 2023), in bins.
//!
//! [`Okvs::encode`] finds a vector `P` of `m` elements such that every key `k` decodes to
//! its value: `⟨row(k), P⟩ = value(k)`. Keys are hashed to bins of about
//! [`BIN_ITEMS`] keys (as RR22 clusters its OKVS), each bin its own system over its own
//! `(1 + ε)·capacity` columns, so that a large store is encoded and decoded one
//! cache-sized bin at a time and on all threads. In a bin, `row(k)` is `w` random bits
//! (the band) at a random start; rows, starts and bins come from a fixed-key AES hash of
//! the key under a per-store seed (module `band`). Encoding sorts a bin's rows by start
//! and eliminates column by column inside the band, then back-substitutes; columns no
//! row pins are random, so `P` reveals nothing about the keys. A store fails to encode
//! with probability ≤ 2^-40 ([`OkvsParams::for_items`]); it is retried with a fresh
//! seed. Decoding a key XORs the ≈ w/2 elements its band selects in its bin.

mod band;
mod bins;

pub use band::{Band, BandHasher, EPSILON, LAMBDA, MAX_BAND};
pub use bins::BIN_ITEMS;

use crate::crypto::prg::Prg;
use crate::crypto::rng::fill_os;
use crate::hashing::buckets::{group_by_bucket, split_groups};
use crate::math::gf128::Gf128;
use rayon::prelude::*;

/// The shape of a store: its columns, band width and bins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OkvsParams {
    /// Columns `m` of the store (elements of `P`): `bins` times the columns of a bin.
    pub columns: usize,
    /// Band width `w` in bits (≤ [`MAX_BAND`]).
    pub band: usize,
    /// Bins the keys are hashed to, each a system over `columns / bins` columns.
    pub bins: usize,
}

impl OkvsParams {
    /// Parameters for `n` keys with failure probability ≤ 2^-40 per encoding, ε = 0.1:
    /// - up to [`BIN_ITEMS`] keys, one bin of ⌈1.1·n⌉ columns, the band width from
    ///   RB-OKVS's fits for λ = 40 (189 bits up to 2^16 keys);
    /// - beyond, ⌈n / BIN_ITEMS⌉ bins, each with columns for a capacity that no bin
    ///   exceeds except with probability 2^-41 (a Chernoff bound), and a band for that
    ///   capacity failing with probability ≤ 2^-41 / bins (so ≤ 2^-41 for all bins).
    pub fn for_items(n: usize) -> Self {
        let (bins, capacity, lambda) = bins::shape(n, LAMBDA);
        let band = band::width(capacity, lambda);
        let bin_columns = ((capacity as f64 * (1.0 + EPSILON)).ceil() as usize).max(band + 1);
        Self { columns: bins * bin_columns, band, bins }
    }

    /// Columns of one bin.
    pub fn bin_columns(&self) -> usize {
        self.columns / self.bins.max(1)
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
        let OkvsParams { columns: m, band, bins } = params;
        if bins == 0 || m % bins != 0 || band == 0 || band > MAX_BAND || band >= m / bins {
            return Err(crate::Error::Params(format!(
                "OKVS shape {params:?}: the bins must divide the columns and the band must be 1..={MAX_BAND} and \
                 narrower than a bin"
            )));
        }
        if columns.len() != m {
            return Err(crate::Error::Params(format!("OKVS of {} columns where {m} were agreed", columns.len())));
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

    /// The columns of bin `b`.
    fn bin(&self, b: usize) -> &[Gf128] {
        let c = self.params.bin_columns();
        &self.columns[b * c..(b + 1) * c]
    }

    /// The value of `key` (a random-looking element for a key not encoded).
    pub fn decode(&self, key: u128) -> Gf128 {
        let hasher = BandHasher::new(&self.seed, self.params);
        hasher.band(key).dot(self.bin(hasher.bin(key)))
    }

    /// The values of many keys, in parallel, bin by bin (so that a large store is read
    /// one cache-sized bin at a time).
    pub fn decode_many(&self, keys: &[u128]) -> Vec<Gf128> {
        let hasher = BandHasher::new(&self.seed, self.params);
        if self.params.bins == 1 {
            let columns = self.bin(0);
            let mut out = vec![Gf128::ZERO; keys.len()];
            out.par_chunks_mut(1024).zip(keys.par_chunks(1024)).for_each(|(out, keys)| {
                let mut bands = vec![Band::default(); keys.len()];
                hasher.bands(keys, &mut bands);
                out.iter_mut().zip(&bands).for_each(|(o, b)| *o = b.dot(columns));
            });
            return out;
        }
        let (order, grouped) = self.decode_grouped(&hasher, keys);
        let mut out = vec![Gf128::ZERO; keys.len()];
        for (&i, v) in order.iter().zip(grouped) {
            out[i as usize] = v;
        }
        out
    }

    /// The keys' indices grouped by bin, and their values in that order.
    fn decode_grouped(&self, hasher: &BandHasher, keys: &[u128]) -> (Vec<u32>, Vec<Gf128>) {
        let (starts, order) = by_bin(hasher, keys, self.params.bins);
        let mut values = vec![Gf128::ZERO; keys.len()];
        let parts = split_groups(&mut values, &starts);
        parts.into_par_iter().enumerate().for_each(|(b, out)| {
            let columns = self.bin(b);
            let group: Vec<u128> = order[starts[b]..starts[b + 1]].iter().map(|&i| keys[i as usize]).collect();
            let mut bands = vec![Band::default(); group.len()];
            hasher.bands(&group, &mut bands);
            out.iter_mut().zip(&bands).for_each(|(o, band)| *o = band.dot(columns));
        });
        (order, values)
    }
}

/// The keys' indices grouped by bin, and where each bin's group starts.
fn by_bin(hasher: &BandHasher, keys: &[u128], bins: usize) -> (Vec<usize>, Vec<u32>) {
    let mut bin_of = vec![0u32; keys.len()];
    bin_of.par_chunks_mut(1 << 12).zip(keys.par_chunks(1 << 12)).for_each(|(out, keys)| hasher.bins(keys, out));
    group_by_bucket(&bin_of, bins)
}

/// Encodes with one seed: each bin's rows by sorted band elimination and back
/// substitution, the bins in parallel; columns no row pins stay random.
pub fn encode_with(
    params: OkvsParams,
    seed: &[u8; 16],
    keys: &[u128],
    values: &[Gf128],
) -> Result<Vec<Gf128>, Unsolvable> {
    let hasher = BandHasher::new(seed, params);
    let mut p = random_columns(params.columns);
    if params.bins == 1 {
        solve(rows(&hasher, keys, values), &mut p)?;
        return Ok(p);
    }
    let (starts, order) = by_bin(&hasher, keys, params.bins);
    p.par_chunks_mut(params.bin_columns()).enumerate().try_for_each(|(b, columns)| {
        let group = &order[starts[b]..starts[b + 1]];
        let keys: Vec<u128> = group.iter().map(|&i| keys[i as usize]).collect();
        let values: Vec<Gf128> = group.iter().map(|&i| values[i as usize]).collect();
        solve(rows(&hasher, &keys, &values), columns)
    })?;
    Ok(p)
}

/// The rows of `keys` and `values`.
fn rows(hasher: &BandHasher, keys: &[u128], values: &[Gf128]) -> Vec<(Band, Gf128)> {
    let mut bands = vec![Band::default(); keys.len()];
    hasher.bands(keys, &mut bands);
    bands.into_iter().zip(values.iter().copied()).collect()
}

/// Solves one bin: sets `p`'s pivot columns so that every row's band selects its value
/// (the other columns keep what they hold).
fn solve(mut rows: Vec<(Band, Gf128)>, p: &mut [Gf128]) -> Result<(), Unsolvable> {
    if rows.len() > p.len() {
        return Err(Unsolvable); // more equations than unknowns
    }
    rows.sort_unstable_by_key(|(b, _)| b.start);
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
    // Back substitution, last pivot first.
    for (i, (row, value)) in rows.iter().enumerate().rev() {
        let pivot = pivots[i];
        if pivot == usize::MAX {
            continue;
        }
        p[pivot] = Gf128::ZERO;
        p[pivot] = *value + row.dot(p);
    }
    Ok(())
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
