//! How many bins a store has and how many keys each must hold.
//!
//! Keys are thrown into `B` bins by a hash, so a bin's load is binomial with mean
//! μ = n/B. Each bin gets columns for a capacity `C` that no bin exceeds except with
//! probability 2^-(λ+1) in all, from the Bernstein form of the Chernoff bound,
//! P(X ≥ μ + δ) ≤ exp(−δ² / (2μ + 2δ/3)), taken with a union bound over the bins. Each
//! bin's band is then wide enough that a system of `C` keys fails with probability
//! ≤ 2^-(λ+1) / B, so a store fails with probability ≤ 2^-λ. (A bin with fewer keys than
//! its capacity fails less often: a subset of independent rows stays independent.)

/// Keys per bin on average (RR22 clusters its OKVS into bins of 2^14 keys): a bin's rows
/// and columns (≈ 2 MB and 0.6 MB) stay in the caches while it is encoded or decoded.
/// Measured (`okvs-speed`, 2^20 and 2^24 keys): 2^15 is as fast as 2^14 and needs 2 %
/// fewer columns and a narrower band (the capacity's slack shrinks as bins grow); 2^16
/// is slower, its capacity falling past the fit of 2^16 keys. Stores of at most this
/// many keys are one bin.
pub const BIN_ITEMS: usize = 1 << 15;

/// Bins, the capacity of each, and the statistical security each bin's system needs, for
/// `n` keys and a store failing with probability ≤ 2^-`lambda`.
pub(super) fn shape(n: usize, lambda: f64) -> (usize, usize, f64) {
    if n <= BIN_ITEMS {
        return (1, n, lambda);
    }
    let bins = n.div_ceil(BIN_ITEMS);
    (bins, capacity(n, bins, lambda + 1.0), lambda + 1.0 + (bins as f64).log2())
}

/// The smallest `C` with P(some bin holds more than `C` of `n` keys) ≤ 2^-`lambda`.
fn capacity(n: usize, bins: usize, lambda: f64) -> usize {
    let mean = n as f64 / bins as f64;
    // exp(−δ²/(2μ + 2δ/3)) ≤ 2^-λ / B  ⇔  δ² − (2L/3)·δ − 2μL ≥ 0 with L = ln B + λ ln 2.
    let l = (bins as f64).ln() + lambda * std::f64::consts::LN_2;
    let delta = l / 3.0 + (l * l / 9.0 + 2.0 * mean * l).sqrt();
    ((mean + delta).ceil() as usize).min(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_stores_are_one_bin_and_large_ones_get_a_few_percent_of_slack() {
        assert_eq!(shape(1000, 40.0), (1, 1000, 40.0));
        let (bins, cap, lambda) = shape(1 << 24, 40.0);
        assert_eq!(bins, 512);
        assert!((41.0 + 9.0 - lambda).abs() < 1e-9);
        // μ = 32768: the slack is about 4.6 %.
        assert!(cap > 34_100 && cap < 34_500, "{cap}");
    }

    #[test]
    fn the_capacity_bounds_the_fullest_bin_of_random_throws() {
        // At a weak λ = 4 (a bin over capacity in 1 of 16 stores), 200 random stores of
        // 2^16 keys in 64 bins overflow about as rarely as the bound says, or less.
        let (n, bins) = (1 << 16, 64);
        let cap = capacity(n, bins, 4.0);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let (mut overflows, mut fullest) = (0, 0);
        for _ in 0..200 {
            let mut load = vec![0usize; bins];
            for _ in 0..n {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                load[((u128::from(state) * bins as u128) >> 64) as usize] += 1;
            }
            let max = *load.iter().max().unwrap();
            fullest = fullest.max(max);
            overflows += usize::from(max > cap);
        }
        assert!(overflows <= 200 / 16 + 6, "{overflows} of 200 stores overflowed a capacity of {cap}");
        // The bound is not loose by much: the fullest bin seen comes within 4σ of it.
        let sigma = ((n / bins) as f64).sqrt();
        assert!((cap as f64) < fullest as f64 + 4.0 * sigma, "capacity {cap}, fullest bin {fullest}");
    }
}
