//! A Bloom filter sized for a false-positive rate of 2^-λ, with indices drawn from a
//! domain-separated hash, so that a filter sent to a peer reveals nothing but its contents'
//! hashes and no order (the order-hiding property mqRPMT relies on).
//!
//! Sizing (Bloom 1970): for n items and λ bits, k = λ hash positions and
//! m = ⌈n·λ / ln 2⌉ bits (≈ 1.44·λ bits per item) give a false-positive rate of about
//! (1/2)^λ. Both sides derive (m, k) from n and λ, so a received filter is checked against
//! them before anything is allocated.

use crate::crypto::dst::Domain;
use crate::wire::{Reader, WireError};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// A Bloom filter over byte strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BloomFilter {
    words: Vec<u64>,
    bits: u64,
    hashes: u32,
    key: [u8; 32],
}

impl BloomFilter {
    /// (bits, hash count) for `n` items at false-positive rate 2^-`lambda`.
    pub fn dimensions(n: usize, lambda: u32) -> (u64, u32) {
        let bits = ((n.max(1) as f64) * f64::from(lambda) / std::f64::consts::LN_2).ceil() as u64;
        (bits.max(64), lambda.max(1))
    }

    /// An empty filter for `n` items at rate 2^-`lambda`, hashing in `domain`.
    pub fn new(domain: &Domain, n: usize, lambda: u32) -> Self {
        let (bits, hashes) = Self::dimensions(n, lambda);
        Self { words: vec![0; bits.div_ceil(64) as usize], bits, hashes, key: key_of(domain) }
    }

    /// The filter holding `items`, built in parallel.
    pub fn from_items<I: AsRef<[u8]> + Sync>(domain: &Domain, items: &[I], lambda: u32) -> Self {
        let mut f = Self::new(domain, items.len(), lambda);
        let words: Vec<AtomicU64> = f.words.iter().map(|_| AtomicU64::new(0)).collect();
        items.par_iter().for_each(|item| {
            positions(&f.key, f.bits, f.hashes, item.as_ref(), |p| {
                words[(p / 64) as usize].fetch_or(1 << (p % 64), Ordering::Relaxed);
            });
        });
        f.words = words.into_iter().map(AtomicU64::into_inner).collect();
        f
    }

    /// Adds `item`.
    pub fn insert(&mut self, item: &[u8]) {
        let words = &mut self.words;
        positions(&self.key, self.bits, self.hashes, item, |p| words[(p / 64) as usize] |= 1 << (p % 64));
    }

    /// Whether `item` may be in the filter (false positives at rate ≈ 2^-λ).
    pub fn contains(&self, item: &[u8]) -> bool {
        let mut all = true;
        positions(&self.key, self.bits, self.hashes, item, |p| {
            all &= self.words[(p / 64) as usize] >> (p % 64) & 1 == 1
        });
        all
    }

    /// Size in bits.
    pub fn bits(&self) -> u64 {
        self.bits
    }

    /// The filter's bit array as little-endian bytes, ⌈bits / 64⌉·8 of them.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// A filter received from a peer for `n` items at 2^-`lambda`: exactly the expected
    /// number of bytes, and no bit set beyond `bits`.
    pub fn read(r: &mut Reader<'_>, domain: &Domain, n: usize, lambda: u32) -> Result<Self, WireError> {
        let mut f = Self::new(domain, n, lambda);
        let bytes = r.take(f.words.len() * 8, "BloomFilter")?;
        for (w, b) in f.words.iter_mut().zip(bytes.chunks_exact(8)) {
            *w = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        }
        let spare = f.words.len() as u64 * 64 - f.bits;
        if spare > 0 && f.words.last().is_some_and(|w| w >> (64 - spare) != 0) {
            return Err(WireError::Invalid { what: "BloomFilter", why: "bits set beyond the filter's length" });
        }
        Ok(f)
    }
}

/// The k positions of `item`: 64-bit words of a keyed BLAKE3 XOF, reduced mod m
/// (bias ≤ m/2^64, negligible).
fn positions(key: &[u8; 32], bits: u64, hashes: u32, item: &[u8], mut f: impl FnMut(u64)) {
    let mut h = blake3::Hasher::new_keyed(key);
    h.update(item);
    let mut xof = h.finalize_xof();
    let mut buf = [0u8; 8 * 16];
    let mut left = hashes as usize;
    while left > 0 {
        let take = left.min(16);
        xof.fill(&mut buf[..take * 8]);
        for c in buf[..take * 8].chunks_exact(8) {
            f(u64::from_le_bytes(c.try_into().expect("8 bytes")) % bits);
        }
        left -= take;
    }
}

fn key_of(domain: &Domain) -> [u8; 32] {
    domain.hash32(b"bloom filter positions")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::dst::SessionId;

    fn domain() -> Domain {
        Domain::new("test/bloom", SessionId([3; 32]))
    }

    #[test]
    fn no_false_negatives_and_the_false_positive_rate_is_as_sized() {
        let items: Vec<Vec<u8>> = (0..5000u32).map(|i| i.to_le_bytes().to_vec()).collect();
        // λ = 10: expect ~1/1024 false positives.
        let f = BloomFilter::from_items(&domain(), &items, 10);
        assert!(items.iter().all(|i| f.contains(i)));
        let fp = (5000..205_000u32).filter(|i| f.contains(&i.to_le_bytes())).count();
        assert!((100..300).contains(&fp), "{fp} false positives in 200000 (expected ≈ 195)");
        let mut g = BloomFilter::new(&domain(), items.len(), 10);
        items.iter().for_each(|i| g.insert(i));
        assert_eq!(f, g, "parallel and sequential builds agree, whatever the order");
    }

    #[test]
    fn sized_like_the_paper() {
        let (bits, k) = BloomFilter::dimensions(1 << 20, 40);
        assert_eq!(k, 40);
        assert!((bits as f64 / f64::from(1 << 20) - 57.7).abs() < 0.1, "1.44·40 bits per item");
    }

    #[test]
    fn round_trips_and_rejects_wrong_sizes() {
        let items = [b"a".to_vec(), b"b".to_vec()];
        let f = BloomFilter::from_items(&domain(), &items, 40);
        let bytes = f.to_bytes();
        assert_eq!(BloomFilter::read(&mut Reader::new(&bytes), &domain(), 2, 40).unwrap(), f);
        assert!(BloomFilter::read(&mut Reader::new(&bytes[1..]), &domain(), 2, 40).is_err());
        let mut bad = bytes.clone();
        *bad.last_mut().unwrap() = 0xff;
        assert!(BloomFilter::read(&mut Reader::new(&bad), &domain(), 2, 40).is_err());
    }
}
