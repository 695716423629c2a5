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

pub(crate) use band::BATCH;
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

/// Wipes the columns (a store that holds a secret: an OPRF key K, or its evaluator's C).
impl zeroize::Zeroize for Okvs {
    fn zeroize(&mut self) {
        self.columns.zeroize();
    }
}

/// Encoding tries a fresh seed this many times before giving up; with a failure
/// probability ≤ 2^-40 per try, a second try is already vanishingly rare.
pub const MAX_TRIES: usize = 8;

impl Okvs {
    /// Encodes each `(key, value)` of `pairs` (distinct keys) under `params`, retrying
    /// with fresh seeds on the rare unsolvable system.
    pub fn encode(params: OkvsParams, pairs: &[(u128, Gf128)]) -> Result<Self, Unsolvable> {
        Self::encode_by(params, pairs.len(), |i| pairs[i].0, values_of(pairs))
    }

    /// [`encode`](Self::encode) of `n` keys given by index, `key(i)`, their values a group
    /// at a time: `values(indices, keys, out)` fills the values of one bin's keys, `keys`
    /// being `key` of each of `indices`, in that order; for a caller that computes the
    /// values as it goes rather than keeping them.
    pub fn encode_by(
        params: OkvsParams,
        n: usize,
        key: impl Fn(usize) -> u128 + Sync,
        values: impl Fn(&[u32], &[u128], &mut [Gf128]) + Sync,
    ) -> Result<Self, Unsolvable> {
        for _ in 0..MAX_TRIES {
            let mut seed = [0u8; 16];
            fill_os(&mut seed);
            if let Ok(columns) = encode_rows(params, &seed, n, &key, &values) {
                return Ok(Self { seed, params, columns });
            }
        }
        Err(Unsolvable)
    }

    /// A store from its parts, e.g. as received from a peer: refused unless the
    /// columns are as many as `params` says and the band fits inside them.
    pub fn from_parts(seed: [u8; 16], params: OkvsParams, columns: Vec<Gf128>) -> crate::error::Result<Self> {
        let OkvsParams { columns: m, band, bins } = params;
        if bins == 0 || m % bins != 0 || band == 0 || band > MAX_BAND || band >= m / bins {
            return Err(crate::error::Error::params(
                "okvs_shape",
                format!(
                    "OKVS shape {params:?}: the bins must divide the columns and the band must be 1..={MAX_BAND} and \
                 narrower than a bin"
                ),
            ));
        }
        if columns.len() != m {
            return Err(crate::error::Error::params(
                "okvs_columns",
                format!("OKVS of {} columns where {m} were agreed", columns.len()),
            ));
        }
        Ok(Self { seed, params, columns })
    }

    /// The seed and the columns, taking the store apart (to reuse its buffer).
    pub fn into_parts(self) -> ([u8; 16], Vec<Gf128>) {
        (self.seed, self.columns)
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
        let found = self.decode_with(keys, |k| *k, |i, _, v| (i as u32, v));
        let mut out = vec![Gf128::ZERO; keys.len()];
        for (i, v) in found {
            out[i as usize] = v;
        }
        out
    }

    /// `f(i, &items[i], value of key_of(&items[i]))` for every item, in parallel, bin by
    /// bin, in no particular order: for a caller that needs each item's value once (no
    /// vector of values in item order is made, and each item is read from memory once).
    pub fn decode_with<E: Sync, T: Default + Clone + Send>(
        &self,
        items: &[E],
        key_of: impl Fn(&E) -> u128 + Sync,
        f: impl Fn(usize, &E, Gf128) -> T + Sync,
    ) -> Vec<T> {
        self.decode_ordered(items, key_of, f, |_| {}).0
    }

    /// [`decode_with`](Self::decode_with), with the order of its results: result j is
    /// item `order[j]`'s (so a caller need not store the index in each result); `done`
    /// is told the number of items of each finished batch (for progress).
    pub fn decode_ordered<E: Sync, T: Default + Clone + Send>(
        &self,
        items: &[E],
        key_of: impl Fn(&E) -> u128 + Sync,
        f: impl Fn(usize, &E, Gf128) -> T + Sync,
        done: impl Fn(usize) + Sync,
    ) -> (Vec<T>, Vec<u32>) {
        let each = |group: &[u32], _: &[u128], values: &[Gf128], out: &mut [T]| {
            for ((o, &i), &v) in out.iter_mut().zip(group).zip(values) {
                *o = f(i as usize, &items[i as usize], v);
            }
        };
        self.decode_groups(items.len(), |i| key_of(&items[i]), each, done)
    }

    /// [`decode_ordered`](Self::decode_ordered) of `n` keys given by index, a group of
    /// keys at a time: `f(indices, keys, values, out)` fills the results of one group
    /// (at most 4096 keys of one bin), so that a caller can batch its own per-key work.
    pub fn decode_groups<T: Default + Clone + Send>(
        &self,
        n: usize,
        key: impl Fn(usize) -> u128 + Sync,
        f: impl Fn(&[u32], &[u128], &[Gf128], &mut [T]) + Sync,
        done: impl Fn(usize) + Sync,
    ) -> (Vec<T>, Vec<u32>) {
        let hasher = BandHasher::new(&self.seed, self.params);
        let (starts, order) = match self.params.bins {
            1 => (vec![0, n], (0..n as u32).collect()),
            bins => by_bin(&hasher, n, &key, bins),
        };
        // Tasks of at most 4096 items within a bin (so one bin of a small store still
        // spreads over the threads); together they cover `order` from start to end.
        const TASK: usize = 1 << 12;
        let mut cuts = vec![0];
        for b in 0..self.params.bins {
            cuts.extend((starts[b]..starts[b + 1]).step_by(TASK).skip(1));
            cuts.push(starts[b + 1]);
        }
        cuts.dedup();
        let mut out = vec![T::default(); n];
        split_groups(&mut out, &cuts).into_par_iter().enumerate().for_each_init(Scratch::default, |s, (task, out)| {
            let group = &order[cuts[task]..cuts[task + 1]];
            let Some(&first) = group.first() else { return };
            let columns = self.bin(hasher.bin(key(first as usize)));
            s.bands_of(&hasher, group.iter().map(|&i| key(i as usize)));
            s.values.clear();
            s.values.extend(s.bands.iter().map(|band| band.dot(columns)));
            f(group, &s.keys, &s.values, out);
            done(group.len());
        });
        (out, order)
    }
}

/// The indices of `n` keys (`key(i)`) grouped by bin, and where each bin's group starts.
fn by_bin(hasher: &BandHasher, n: usize, key: impl Fn(usize) -> u128 + Sync, bins: usize) -> (Vec<usize>, Vec<u32>) {
    const CHUNK: usize = 1 << 10;
    let mut bin_of = vec![0u32; n];
    bin_of.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
        let mut keys = [0u128; CHUNK];
        for (j, k) in keys[..out.len()].iter_mut().enumerate() {
            *k = key(c * CHUNK + j);
        }
        hasher.bins(&keys[..out.len()], out);
    });
    group_by_bucket(&bin_of, bins)
}

/// Encodes with one seed: each bin's rows by sorted band elimination and back
/// substitution, the bins in parallel; columns no row pins stay random.
pub fn encode_with(params: OkvsParams, seed: &[u8; 16], pairs: &[(u128, Gf128)]) -> Result<Vec<Gf128>, Unsolvable> {
    encode_rows(params, seed, pairs.len(), &|i| pairs[i].0, &values_of(pairs))
}

/// The values of `pairs` at some indices, as [`Okvs::encode_by`] asks for them.
fn values_of(pairs: &[(u128, Gf128)]) -> impl Fn(&[u32], &[u128], &mut [Gf128]) + Sync {
    |group, _, out| out.iter_mut().zip(group).for_each(|(o, &i)| *o = pairs[i as usize].1)
}

/// [`encode_with`] of `n` keys given by index, their values by group.
fn encode_rows(
    params: OkvsParams,
    seed: &[u8; 16],
    n: usize,
    key: &(impl Fn(usize) -> u128 + Sync),
    values: &(impl Fn(&[u32], &[u128], &mut [Gf128]) + Sync),
) -> Result<Vec<Gf128>, Unsolvable> {
    let hasher = BandHasher::new(seed, params);
    let mut p = random_columns(params.columns);
    let (starts, order) = match params.bins {
        1 => (vec![0, n], (0..n as u32).collect()),
        bins => by_bin(&hasher, n, key, bins),
    };
    p.par_chunks_mut(params.bin_columns()).enumerate().try_for_each_init(Scratch::default, |s, (b, columns)| {
        let group = &order[starts[b]..starts[b + 1]];
        s.bands_of(&hasher, group.iter().map(|&i| key(i as usize)));
        s.values.clear();
        s.values.resize(group.len(), Gf128::ZERO);
        values(group, &s.keys, &mut s.values);
        s.rows.clear();
        s.rows.extend(s.bands.iter().copied().zip(s.values.iter().copied()));
        solve(s, columns)
    })?;
    Ok(p)
}

/// Buffers a task reuses from bin to bin (a fresh allocation per bin of a large store
/// costs more in page faults than the bin's arithmetic).
#[derive(Default)]
struct Scratch {
    keys: Vec<u128>,
    bands: Vec<Band>,
    values: Vec<Gf128>,
    rows: Vec<(Band, Gf128)>,
    pivots: Vec<usize>,
}

impl Scratch {
    /// The bands of `keys` into `self.bands`.
    fn bands_of(&mut self, hasher: &BandHasher, keys: impl Iterator<Item = u128>) {
        self.keys.clear();
        self.keys.extend(keys);
        self.bands.clear();
        self.bands.resize(self.keys.len(), Band::default());
        hasher.bands(&self.keys, &mut self.bands);
    }
}

/// Solves one bin's `rows` (in `s`): sets `p`'s pivot columns so that every row's band
/// selects its value (the other columns keep what they hold).
fn solve(s: &mut Scratch, p: &mut [Gf128]) -> Result<(), Unsolvable> {
    let (rows, pivots) = (&mut s.rows, &mut s.pivots);
    if rows.len() > p.len() {
        return Err(Unsolvable); // more equations than unknowns
    }
    rows.sort_unstable_by_key(|(b, _)| b.start);
    // Forward elimination: each row's lowest set column becomes its pivot and is cleared
    // from the later rows whose band reaches it (they start at or before it).
    pivots.clear();
    pivots.resize(rows.len(), usize::MAX);
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
        prg.each(c << 14, chunk.len(), |i, b| chunk[i] = Gf128(b));
    });
    p
}

#[cfg(test)]
mod tests;
