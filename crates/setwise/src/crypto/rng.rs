//! Randomness from the operating system, and a CSPRNG shuffle.
//!
//! Each building block draws what it needs here; no RNG type crosses a block's API
//! (the crates below setwise use three different `rand_core` versions).
//!
//! A staged run replays a party's role from its start at every stage
//! ([`crate::staged::replay`]), so its draws must repeat: inside [`seeded`] this
//! thread's draws come from a BLAKE3 stream keyed by a secret seed (derived from the
//! party's run seed) instead of the OS. Work handed to another thread takes a
//! [`fork`] of the stream with it ([`within`]); a draw inside a parallel loop would not
//! repeat, so the blocks draw before their loops. A draw that did not repeat shows as a
//! replayed message that differs from the one written before, which the replay refuses.

use crate::crypto::dst;
use rand::rngs::{StdRng, SysRng};
use rand::seq::SliceRandom;
use rand::{SeedableRng, TryRng};
use std::cell::RefCell;
use zeroize::{Zeroize, Zeroizing};

thread_local! {
    /// This thread's seeded stream, inside [`seeded`].
    static SEEDED: RefCell<Option<blake3::OutputReader>> = const { RefCell::new(None) };
}

/// Draws from this thread's seeded stream; false outside [`seeded`].
fn draw_seeded(buf: &mut [u8]) -> bool {
    SEEDED.with(|s| match s.borrow_mut().as_mut() {
        Some(stream) => {
            stream.fill(buf);
            true
        }
        None => false,
    })
}

/// Fills `buf` from the operating system's CSPRNG (from the seeded stream inside
/// [`seeded`]).
///
/// # Panics
/// If the OS has no randomness to give: nothing secure can be done then.
pub fn fill_os(buf: &mut [u8]) {
    if !draw_seeded(buf) {
        SysRng.try_fill_bytes(buf).expect("the operating system's random number generator failed");
    }
}

/// A CSPRNG (ChaCha12) seeded from the OS (from the seeded stream inside [`seeded`]),
/// for bulk randomness.
pub fn csprng() -> StdRng {
    let mut seed = Zeroizing::new([0u8; 32]);
    if draw_seeded(&mut seed[..]) {
        return StdRng::from_seed(*seed);
    }
    StdRng::try_from_rng(&mut SysRng).expect("the operating system's random number generator failed")
}

/// Randomness for a parallel loop: a key drawn once (from the OS, or the seeded stream),
/// then an independent stream per index, so the draws do not depend on which thread
/// runs which index. Wiped when dropped.
pub struct PerIndex(Zeroizing<[u8; 32]>);

impl PerIndex {
    /// A fresh key.
    pub fn draw() -> Self {
        let mut key = Zeroizing::new([0u8; 32]);
        fill_os(&mut key[..]);
        Self(key)
    }

    /// The stream of index `i` (BLAKE3 keyed by the key, over `i`); wipe it after use
    /// (`Zeroize`).
    pub fn stream(&self, i: u64) -> blake3::OutputReader {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        let reader = h.update(&i.to_le_bytes()).finalize_xof();
        h.zeroize(); // it holds the key
        reader
    }
}

/// Restores the thread's previous stream when a [`seeded`] scope ends, even by a panic.
struct Restore(Option<blake3::OutputReader>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        let ended = SEEDED.with(|s| std::mem::replace(&mut *s.borrow_mut(), previous));
        if let Some(mut stream) = ended {
            stream.zeroize(); // it holds the scope's key
        }
    }
}

/// Runs `work` with this thread's draws taken from a stream keyed by `seed`: the same
/// seed gives the same draws in the same order.
pub fn seeded<T>(seed: &[u8; 32], work: impl FnOnce() -> T) -> T {
    let mut key = Zeroizing::new(blake3::derive_key(dst::RNG_SEEDED_STREAM, seed));
    let stream = blake3::Hasher::new_keyed(&key).finalize_xof();
    key.fill(0);
    let _restore = Restore(SEEDED.with(|s| s.borrow_mut().replace(stream)));
    work()
}

/// A seed for work another thread does on this thread's behalf: drawn from this thread's
/// stream inside [`seeded`], `None` outside it (the other thread then draws from the OS).
pub fn fork() -> Option<Zeroizing<[u8; 32]>> {
    let mut seed = Zeroizing::new([0u8; 32]);
    draw_seeded(&mut seed[..]).then_some(seed)
}

/// Runs `work` seeded by a [`fork`] if there is one.
pub fn within<T>(fork: Option<&Zeroizing<[u8; 32]>>, work: impl FnOnce() -> T) -> T {
    match fork {
        Some(seed) => seeded(seed, work),
        None => work(),
    }
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
    fn seeded_draws_repeat_and_end_with_their_scope() {
        let draw = || {
            let (mut a, mut b) = ([0u8; 16], [0u8; 40]);
            fill_os(&mut a);
            let forked = fork();
            let other = std::thread::scope(|s| {
                s.spawn(|| {
                    within(forked.as_ref(), || {
                        let mut c = [0u8; 8];
                        fill_os(&mut c);
                        c
                    })
                })
                .join()
                .unwrap()
            });
            fill_os(&mut b);
            let mut v: Vec<u32> = (0..50).collect();
            shuffle(&mut v);
            (a, b, other, v)
        };
        let one = seeded(&[1; 32], draw);
        assert_eq!(one, seeded(&[1; 32], draw), "same seed, same draws, other threads included");
        assert_ne!(one, seeded(&[2; 32], draw));
        assert_ne!(one.0[..], one.1[..16], "a stream, not one block again");
        assert!(fork().is_none(), "the scope ended");
        let nested = seeded(&[1; 32], || seeded(&[2; 32], draw));
        assert_eq!(nested, seeded(&[2; 32], draw));
        assert_ne!(draw(), draw(), "outside a scope, the OS");
    }

    #[test]
    fn os_bytes_differ() {
        let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
        fill_os(&mut a);
        fill_os(&mut b);
        assert_ne!(a, b);
    }
}
