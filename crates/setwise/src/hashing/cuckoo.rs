//! Cuckoo hashing without a stash: each item goes to one of its `h` candidate bins,
//! evicting and re-placing others by random walk. A failure is reported as an error,
//! never a wrong result.

use crate::crypto::rng::csprng;
use rand::RngExt;

/// `log2` of the probability that inserting `n` items into `table_size` bins with `h`
/// hash functions and no stash fails.
///
/// The experimentally fitted security of stash-less 3-way cuckoo hashing used by
/// cryptoTools (`CuckooIndex::selectParams`, after Pinkas–Schneider–Tkachenko–Yanai,
/// Eurocrypt 2019): with `ν = log2 n` and expansion `e = table_size / n`,
/// `λ = a·e + b`, `a = 123.5·Φ((ν − 6.3)/2.3)`, `b = −130·Φ((ν − 6.45)/2.18) − ν`,
/// failure `2^-λ`. It reproduces APSI's receiver bounds (256 items in 585 bins: 2^-110).
/// Only `h = 3` is modelled; more hash functions only help, so `h > 3` uses it too.
/// With `h = 1` an item has one bin, so insertion fails when two items share a bin
/// (union bound `n(n-1)/2 / table_size`; a single item never fails); `h = 2` is reported
/// as certain failure.
pub fn failure_log2(n: usize, table_size: usize, h: usize) -> f64 {
    if n == 0 {
        return f64::NEG_INFINITY;
    }
    if h == 1 && table_size > 0 {
        let pairs = n as f64 * (n as f64 - 1.0) / 2.0;
        return if pairs == 0.0 { f64::NEG_INFINITY } else { (pairs / table_size as f64).log2().min(0.0) };
    }
    if h < 3 || table_size < n {
        return 0.0;
    }
    let nu = (n as f64).log2();
    let e = table_size as f64 / n as f64;
    let a = 123.5 * normal_cdf((nu - 6.3) / 2.3);
    let b = -130.0 * normal_cdf((nu - 6.45) / 2.18) - nu;
    (-(a * e + b)).min(0.0)
}

/// The standard normal distribution function, by Abramowitz–Stegun 7.1.26
/// (|error| < 1.5·10⁻⁷).
fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 { 0.5 * (1.0 + erf) } else { 0.5 * (1.0 - erf) }
}

/// Where each item went: `bin_of[i]` and the hash function used.
#[derive(Debug, Clone)]
pub struct CuckooTable {
    /// For each bin, the index of the item in it.
    pub bins: Vec<Option<u32>>,
}

/// Error: the items could not all be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cuckoo hashing failed: {items} items into {table_size} bins with {hash_funcs} hash functions (a larger table or fewer items is needed)"
)]
pub struct CuckooFailure {
    /// Items inserted.
    pub items: usize,
    /// Bins.
    pub table_size: usize,
    /// Hash functions.
    pub hash_funcs: usize,
}

impl CuckooTable {
    /// Places item `i` (with candidate bins `candidates[i]`) into one of them.
    pub fn build(candidates: &[Vec<u32>], table_size: usize) -> Result<Self, CuckooFailure> {
        let h = candidates.first().map_or(0, |c| c.len());
        let fail = || CuckooFailure { items: candidates.len(), table_size, hash_funcs: h };
        let mut bins: Vec<Option<u32>> = vec![None; table_size];
        // APSI (Kuku) gives up after 500 evictions per item; so do we.
        let max_steps = 500;
        let mut rng = csprng();
        for start in 0..candidates.len() as u32 {
            let mut item = start;
            let mut placed = false;
            for _ in 0..max_steps {
                let cands = &candidates[item as usize];
                if let Some(&free) = cands.iter().find(|&&b| bins[b as usize].is_none()) {
                    bins[free as usize] = Some(item);
                    placed = true;
                    break;
                }
                if cands.is_empty() {
                    return Err(fail());
                }
                let victim_bin = cands[rng.random_range(0..cands.len())] as usize;
                item = bins[victim_bin].replace(item).expect("occupied");
            }
            if !placed {
                return Err(fail());
            }
        }
        Ok(Self { bins })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_bound_matches_published_points() {
        // APSI parameter sets and their values under this fit.
        for (n, size, want) in [(256, 585, -110.4), (1024, 1638, -53.6), (4096, 6552, -55.0)] {
            let got = failure_log2(n, size, 3);
            assert!((got - want).abs() < 0.6, "{n} in {size}: {got}");
        }
        assert_eq!(failure_log2(10, 100, 2), 0.0);
        assert!(failure_log2(256, 1024, 3) < failure_log2(256, 585, 3));
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-9 && (normal_cdf(1.0) - 0.841_344_7).abs() < 1e-6);
    }

    #[test]
    fn placement_is_complete_and_a_forced_failure_is_an_error() {
        let mut rng = csprng();
        let candidates: Vec<Vec<u32>> = (0..500).map(|_| (0..3).map(|_| rng.random_range(0..1024)).collect()).collect();
        let table = CuckooTable::build(&candidates, 1024).unwrap();
        let mut placed = 0;
        for (bin, item) in table.bins.iter().enumerate() {
            if let Some(i) = item {
                assert!(candidates[*i as usize].contains(&(bin as u32)));
                placed += 1;
            }
        }
        assert_eq!(placed, 500);
        // Four items that all hash to the same three bins cannot be placed.
        let e = CuckooTable::build(&vec![vec![1, 2, 3]; 4], 16).unwrap_err();
        assert!(e.to_string().contains("cuckoo hashing failed: 4 items into 16 bins"), "{e}");
    }
}
