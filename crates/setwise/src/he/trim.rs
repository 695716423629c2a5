//! Trimmed results: a last-level ciphertext with the low bits of its coefficients
//! rounded away before it travels (the bits decryption does not need), and its checked
//! decoding.

use super::{Ciphertext, HeContext, HeError, op_err};
use fhe::bfv;
use fhe_math::rq::traits::TryConvertFrom;
use fhe_math::rq::{Poly, Representation};

/// Low bits dropped from each polynomial of a last-level ciphertext on the wire
/// ([`Ciphertext::to_trimmed_bytes`]): rounding `c0` to a multiple of `2^c0` adds at
/// most `2^(c0-1)` to the noise, rounding `c1` adds at most `N·2^(c1-1)` (it is
/// multiplied by the ternary secret).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trim {
    /// Bits dropped from `c0`.
    pub c0: u32,
    /// Bits dropped from `c1`.
    pub c1: u32,
}

impl HeContext {
    /// The trim for last-level ciphertexts whose noise is at most `2^(T-2)`, where
    /// `2^T = q_last / 2t` is the bound decryption needs: each rounding adds at most
    /// `2^(T-2)`, so the total stays below `2^T`. Callers check the noise bound (the
    /// unbalanced parameters require `2^(T-10)`).
    pub fn result_trim(&self) -> Trim {
        let q0 = self.bfv.moduli()[0] as f64;
        let t_bits = (q0 / (2.0 * self.plain_modulus() as f64)).log2().floor() as i64;
        let log_n = self.params.degree.trailing_zeros() as i64;
        Trim { c0: (t_bits - 1).max(0) as u32, c1: (t_bits - 1 - log_n).max(0) as u32 }
    }

    /// Width in bits of a trimmed coefficient, and the largest value it may take.
    fn trimmed_width(&self, drop: u32) -> (u32, u64) {
        let q0 = self.bfv.moduli()[0];
        let max = if drop == 0 { q0 - 1 } else { (q0 - 1 + (1 << (drop - 1))) >> drop };
        (64 - max.leading_zeros(), max)
    }

    /// Exact bytes of a trimmed last-level ciphertext.
    pub fn trimmed_bytes(&self, trim: Trim) -> usize {
        let n = self.params.degree;
        [trim.c0, trim.c1].iter().map(|&d| (n * self.trimmed_width(d).0 as usize).div_ceil(8)).sum()
    }

    /// Decodes a trimmed last-level ciphertext from the peer: exact length, every
    /// coefficient in range.
    pub fn trimmed_from_wire(&self, bytes: &[u8], trim: Trim, what: &'static str) -> Result<Ciphertext, HeError> {
        let bad = |why: String| HeError::Malformed { what, why };
        if bytes.len() != self.trimmed_bytes(trim) {
            return Err(bad(format!("{} bytes instead of {}", bytes.len(), self.trimmed_bytes(trim))));
        }
        let ctx = self.bfv.context_at_level(self.last_level()).map_err(op_err)?;
        let q0 = self.bfv.moduli()[0];
        let n = self.params.degree;
        let mut polys = Vec::with_capacity(2);
        let mut rest = bytes;
        for drop in [trim.c0, trim.c1] {
            let (width, max) = self.trimmed_width(drop);
            let len = (n * width as usize).div_ceil(8);
            let values = unpack_bits(&rest[..len], width, n);
            rest = &rest[len..];
            if let Some(i) = values.iter().position(|&v| v > max) {
                return Err(bad(format!("coefficient {i} is {}, above {max}", values[i])));
            }
            let coeffs: Vec<u64> = values.iter().map(|&v| ((v as u128) << drop) as u64 % q0).collect();
            let mut poly = Poly::try_convert_from(coeffs, ctx, true, Representation::PowerBasis)
                .map_err(|e| bad(e.to_string()))?;
            poly.change_representation(Representation::Ntt);
            polys.push(poly);
        }
        bfv::Ciphertext::new(polys, &self.bfv).map(Ciphertext).map_err(|e| bad(e.to_string()))
    }
}

/// `count` little-endian `width`-bit values packed back to back.
fn pack_bits(values: &[u64], width: u32, out: &mut Vec<u8>) {
    let (mut acc, mut bits) = (0u128, 0u32);
    for &v in values {
        acc |= (v as u128) << bits;
        bits += width;
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
    if bits > 0 {
        out.push(acc as u8);
    }
}

pub(super) fn unpack_bits(bytes: &[u8], width: u32, count: usize) -> Vec<u64> {
    let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
    let (mut acc, mut bits, mut next) = (0u128, 0u32, bytes.iter());
    (0..count)
        .map(|_| {
            while bits < width {
                acc |= (*next.next().unwrap_or(&0) as u128) << bits;
                bits += 8;
            }
            let v = acc as u64 & mask;
            acc >>= width;
            bits -= width;
            v
        })
        .collect()
}

impl Ciphertext {
    /// Serialised bytes of a 2-part last-level ciphertext with the low bits `trim`
    /// rounded away (see [`Trim`]; the caller checks the noise leaves room for it).
    pub fn to_trimmed_bytes(&self, ctx: &HeContext, trim: Trim) -> Result<Vec<u8>, HeError> {
        if self.0.len() != 2 || self.0[0].ctx().moduli().len() != 1 {
            return Err(HeError::Op("only 2-part last-level ciphertexts are trimmed".into()));
        }
        let mut out = Vec::with_capacity(ctx.trimmed_bytes(trim));
        for (poly, drop) in self.0.iter().zip([trim.c0, trim.c1]) {
            let mut p = poly.clone();
            p.change_representation(Representation::PowerBasis);
            let half = if drop == 0 { 0 } else { 1u64 << (drop - 1) };
            let values: Vec<u64> =
                p.coefficients().row(0).iter().map(|&c| ((c as u128 + half as u128) >> drop) as u64).collect();
            let (width, max) = ctx.trimmed_width(drop);
            debug_assert!(values.iter().all(|&v| v <= max));
            pack_bits(&values, width, &mut out);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{HeParams, SecretKey};
    use super::*;

    fn small() -> HeParams {
        HeParams { degree: 4096, plain_modulus: HeParams::batching_prime(4096, 20), moduli_bits: vec![36, 36, 37] }
    }

    #[test]
    fn trimmed_results_decrypt_and_bad_ones_are_refused() {
        let ctx = HeContext::new(&small()).unwrap();
        let mut sk = SecretKey::generate(&ctx);
        let v: Vec<u64> = (0..4096u64).map(|i| i % 1000).collect();
        let mut c = sk.encrypt(&v).unwrap();
        c.mod_switch_to_last().unwrap();
        let trim = ctx.result_trim();
        assert!(trim.c0 > 0 && trim.c1 > 0, "{trim:?}");
        let bytes = c.to_trimmed_bytes(&ctx, trim).unwrap();
        assert_eq!(bytes.len(), ctx.trimmed_bytes(trim));
        assert!(bytes.len() * 10 < c.to_bytes().len() * 8, "trimming saves over 20%");
        let back = ctx.trimmed_from_wire(&bytes, trim, "result").unwrap();
        assert_eq!(sk.decrypt(&back).unwrap(), v);
        // Wrong length, and a coefficient above the range of its width.
        assert!(ctx.trimmed_from_wire(&bytes[1..], trim, "result").is_err());
        let mut high = bytes.clone();
        let (w0, _) = ctx.trimmed_width(trim.c0);
        let first = (4096 * w0 as usize).div_ceil(8);
        high[..first].iter_mut().for_each(|b| *b = 0xff);
        let e = ctx.trimmed_from_wire(&high, trim, "result").unwrap_err().to_string();
        assert!(e.contains("above"), "{e}");
        // Only 2-part last-level ciphertexts are trimmed.
        assert!(sk.encrypt(&v).unwrap().to_trimmed_bytes(&ctx, trim).is_err());
    }

    #[test]
    fn bit_packing_round_trips() {
        for width in [1u32, 7, 13, 31, 50, 64] {
            let mask = if width == 64 { u64::MAX } else { (1 << width) - 1 };
            let vals: Vec<u64> = (0..100u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask).collect();
            let mut out = Vec::new();
            pack_bits(&vals, width, &mut out);
            assert_eq!(out.len(), (100 * width as usize).div_ceil(8));
            assert_eq!(unpack_bits(&out, width, 100), vals);
        }
    }
}
