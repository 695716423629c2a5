//! A pseudorandom generator from AES-128 in counter mode: a 128-bit seed expands to
//! any number of 128-bit blocks (OT extension rows, noisy-VOLE pads).

use aes::Aes128;
use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};

/// The generator of one seed.
pub struct Prg(Aes128);

impl Prg {
    /// The generator seeded with `seed`.
    pub fn new(seed: u128) -> Self {
        Self(Aes128::new(&Array(seed.to_le_bytes())))
    }

    /// Blocks `first .. first + n` of the stream.
    pub fn blocks(&self, first: usize, n: usize) -> Vec<u128> {
        let mut buf: Vec<Array<u8, _>> = (0..n).map(|b| Array(((first + b) as u128).to_le_bytes())).collect();
        self.0.encrypt_blocks(&mut buf);
        buf.iter().map(|a| u128::from_le_bytes(a.0)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_deterministic_positional_and_seeded() {
        let (a, b) = (Prg::new(1), Prg::new(2));
        let s = a.blocks(0, 10);
        assert_eq!(a.blocks(3, 4), s[3..7]);
        assert_ne!(b.blocks(0, 10), s);
        assert_eq!(s.iter().collect::<std::collections::HashSet<_>>().len(), 10);
    }
}
