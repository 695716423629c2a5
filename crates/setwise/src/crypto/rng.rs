//! Randomness from the operating system, and a CSPRNG shuffle.
//!
//! Each building block draws what it needs here; no RNG type crosses a block's API
//! (the crates below setwise use three different `rand_core` versions).

use rand::rngs::{StdRng, SysRng};
use rand::seq::SliceRandom;
use rand::{SeedableRng, TryRng};

/// Fills `buf` from the operating system's CSPRNG.
///
/// # Panics
/// If the OS has no randomness to give: nothing secure can be done then.
pub fn fill_os(buf: &mut [u8]) {
    SysRng.try_fill_bytes(buf).expect("the operating system's random number generator failed");
}

/// A CSPRNG (ChaCha12) seeded from the OS, for bulk randomness.
pub fn csprng() -> StdRng {
    StdRng::try_from_rng(&mut SysRng).expect("the operating system's random number generator failed")
}

/// Shuffles `items` uniformly (Fisher–Yates) with a fresh OS-seeded CSPRNG.
pub fn shuffle<T>(items: &mut [T]) {
    items.shuffle(&mut csprng());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_is_a_permutation_and_moves_things() {
        let mut v: Vec<u32> = (0..1000).collect();
        shuffle(&mut v);
        let fixed = v.iter().enumerate().filter(|(i, x)| *i as u32 == **x).count();
        assert!(fixed < 20, "{fixed} fixed points out of 1000");
        v.sort_unstable();
        assert_eq!(v, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn os_bytes_differ() {
        let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
        fill_os(&mut a);
        fill_os(&mut b);
        assert_ne!(a, b);
    }
}
