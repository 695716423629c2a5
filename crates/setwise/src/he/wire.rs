//! Keys and ciphertexts from a peer, checked field by field before `fhe` sees them.
//!
//! `fhe` 0.1's decoders accept what a message states: polynomials in any representation,
//! keys for any level or decomposition base, coefficients above their modulus, a
//! variable-time flag. Its arithmetic then asserts (a key switch with a `c0` not in
//! NTT-Shoup form panics). So a peer's bytes are first decoded here with the same
//! protobuf layout, every field is checked against the agreed parameters, and only a
//! re-encoding of the checked fields (variable time off) goes to `fhe`.

use super::{Ciphertext, HeContext, HeError, RelinKey, unpack_bits};
use fhe::bfv;
use fhe_traits::DeserializeParametrized;
use prost::Message;

/// fhe-math's polynomial message.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Rq {
    #[prost(int32, tag = "1")]
    pub(crate) representation: i32,
    #[prost(uint32, tag = "2")]
    pub(crate) degree: u32,
    #[prost(bytes = "vec", tag = "3")]
    pub(crate) coefficients: Vec<u8>,
    #[prost(bool, tag = "4")]
    pub(crate) allow_variable_time: bool,
}

/// fhe's key-switching key message.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct KeySwitchingKey {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub(crate) c0: Vec<Vec<u8>>,
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub(crate) c1: Vec<Vec<u8>>,
    #[prost(bytes = "vec", tag = "3")]
    pub(crate) seed: Vec<u8>,
    #[prost(uint32, tag = "4")]
    pub(crate) ciphertext_level: u32,
    #[prost(uint32, tag = "5")]
    pub(crate) ksk_level: u32,
    #[prost(uint32, tag = "6")]
    pub(crate) log_base: u32,
}

/// fhe's relinearisation key message.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RelinearizationKey {
    #[prost(message, optional, tag = "1")]
    pub(crate) ksk: Option<KeySwitchingKey>,
}

/// fhe's ciphertext message.
#[derive(Clone, PartialEq, prost::Message)]
struct CiphertextProto {
    #[prost(bytes = "vec", repeated, tag = "1")]
    c: Vec<Vec<u8>>,
    #[prost(bytes = "vec", tag = "2")]
    seed: Vec<u8>,
    #[prost(uint32, tag = "3")]
    level: u32,
}

/// Representations in fhe-math's message.
const NTT: i32 = 2;
const NTT_SHOUP: i32 = 3;
/// Bytes of the ChaCha8 seed that expands into a seeded polynomial.
const SEED_BYTES: usize = 32;

impl HeContext {
    /// A polynomial from a peer: the stated representation, degree N, exactly the
    /// coefficient bytes of the moduli at `level`, every coefficient below its modulus.
    /// Returns it re-encoded with variable time off.
    fn checked_poly(
        &self,
        bytes: &[u8],
        level: usize,
        representation: i32,
        what: &'static str,
    ) -> Result<Vec<u8>, HeError> {
        let bad = |why: String| HeError::Malformed { what, why };
        let rq = Rq::decode(bytes).map_err(|e| bad(format!("a polynomial does not decode: {e}")))?;
        if rq.representation != representation {
            return Err(bad(format!(
                "a polynomial in representation {} instead of {representation}",
                rq.representation
            )));
        }
        let n = self.params.degree;
        if rq.degree as usize != n {
            return Err(bad(format!("a polynomial of degree {} instead of {n}", rq.degree)));
        }
        let moduli = &self.bfv.moduli()[..self.bfv.moduli().len() - level];
        let mut rest = &rq.coefficients[..];
        for &q in moduli {
            let bits = 64 - (q - 1).leading_zeros();
            let len = (n * bits as usize).div_ceil(8);
            if rest.len() < len {
                return Err(bad("a polynomial's coefficients end early".into()));
            }
            if unpack_bits(&rest[..len], bits, n).iter().any(|&c| c >= q) {
                return Err(bad("a coefficient is not below its modulus".into()));
            }
            rest = &rest[len..];
        }
        if !rest.is_empty() {
            return Err(bad("a polynomial has more coefficients than the moduli at its level".into()));
        }
        Ok(Rq { allow_variable_time: false, ..rq }.encode_to_vec())
    }

    /// Decodes a relinearisation key from the peer: at most 16 level-0 ciphertexts'
    /// bytes; for ciphertexts at `level`, which has at least two moduli, and itself over
    /// the moduli of `over` (≤ `level`: [`SecretKey::relin_key_over`](super::SecretKey::relin_key_over)); no decomposition
    /// base; `c1` expanded from a seed (not sent); one `c0` per modulus of `level`, each
    /// in NTT-Shoup form over `over`'s moduli.
    pub fn relin_key_from_wire(&self, bytes: &[u8], level: usize, over: usize) -> Result<RelinKey, HeError> {
        let what = "relinearisation key";
        let bad = |why: String| HeError::Malformed { what, why };
        let max_bytes = 16 * self.ciphertext_bytes(0, true);
        if bytes.len() > max_bytes {
            return Err(bad(format!("{} bytes, limit {max_bytes}", bytes.len())));
        }
        // fhe relinearises only where at least two moduli are left.
        let digits = self.bfv.moduli().len().saturating_sub(level);
        if digits < 2 {
            return Err(bad(format!("level {level} leaves {digits} moduli; fhe relinearises only where 2 are left")));
        }
        let rk = RelinearizationKey::decode(bytes).map_err(|e| bad(format!("does not decode: {e}")))?;
        let ksk = rk.ksk.ok_or_else(|| bad("no key-switching key".into()))?;
        if over > level {
            return Err(bad(format!("a key over level {over} cannot serve ciphertexts at level {level}")));
        }
        if ksk.ciphertext_level as usize != level || ksk.ksk_level as usize != over {
            return Err(bad(format!(
                "for ciphertexts at level {} over level {}, not at {level} over {over}",
                ksk.ciphertext_level, ksk.ksk_level
            )));
        }
        // One key part per modulus, with no decomposition by a base.
        if ksk.log_base != 0 {
            return Err(bad(format!("decomposition base 2^{} instead of none (one part per modulus)", ksk.log_base)));
        }
        if ksk.seed.len() != SEED_BYTES || !ksk.c1.is_empty() {
            return Err(bad("c1 must come from a 32-byte seed, not be sent".into()));
        }
        if ksk.c0.len() != digits {
            return Err(bad(format!("{} c0 polynomials instead of {digits}", ksk.c0.len())));
        }
        let c0 = ksk.c0.iter().map(|p| self.checked_poly(p, over, NTT_SHOUP, what)).collect::<Result<Vec<_>, _>>()?;
        let clean = RelinearizationKey { ksk: Some(KeySwitchingKey { c0, ..ksk }) }.encode_to_vec();
        let key = bfv::RelinearizationKey::from_bytes(&clean, &self.bfv).map_err(|e| bad(e.to_string()))?;
        Ok(RelinKey::new(key, level))
    }

    /// Decodes a ciphertext from the peer: at `level`; two polynomials, or one and the
    /// seed of the second; each in NTT form over the moduli of `level`; at most the
    /// bytes of a two-polynomial ciphertext there.
    pub fn ciphertext_from_wire(&self, bytes: &[u8], level: usize, what: &'static str) -> Result<Ciphertext, HeError> {
        let bad = |why: String| HeError::Malformed { what, why };
        let max = self.ciphertext_bytes(level, true);
        if bytes.len() > max {
            return Err(bad(format!("{} bytes, more than the {max} a ciphertext at level {level} takes", bytes.len())));
        }
        let ct = CiphertextProto::decode(bytes).map_err(|e| bad(format!("does not decode: {e}")))?;
        if ct.level as usize != level {
            return Err(bad(format!("level {} instead of {level}", ct.level)));
        }
        match (ct.c.len(), ct.seed.len()) {
            (2, 0) | (1, SEED_BYTES) => {}
            (c, s) => return Err(bad(format!("{c} polynomials and a {s}-byte seed instead of 2, or 1 and a seed"))),
        }
        let c = ct.c.iter().map(|p| self.checked_poly(p, level, NTT, what)).collect::<Result<Vec<_>, _>>()?;
        let clean = CiphertextProto { c, ..ct }.encode_to_vec();
        let ct = bfv::Ciphertext::from_bytes(&clean, &self.bfv).map_err(|e| bad(e.to_string()))?;
        // Re-assembling checks once more that both polynomials share one context in NTT form.
        bfv::Ciphertext::new(ct.to_vec(), &self.bfv).map(Ciphertext).map_err(|e| bad(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{HeParams, SecretKey};
    use super::*;

    fn ctx() -> HeContext {
        HeContext::new(&HeParams {
            degree: 4096,
            plain_modulus: HeParams::batching_prime(4096, 20),
            moduli_bits: vec![36, 36, 37],
        })
        .unwrap()
    }

    fn edit_poly(bytes: &[u8], f: impl FnOnce(&mut Rq)) -> Vec<u8> {
        let mut rq = Rq::decode(bytes).unwrap();
        f(&mut rq);
        rq.encode_to_vec()
    }

    #[test]
    fn keys_are_checked_field_by_field() {
        let he = ctx();
        let mut sk = SecretKey::generate(&he);
        let good = sk.relin_key().unwrap().to_bytes();
        assert!(he.relin_key_from_wire(&good, 0, 0).is_ok());
        // A key is for one level over one level's moduli: each is refused at the others.
        let lower = sk.relin_key_at(1).unwrap().to_bytes();
        assert!(lower.len() < good.len(), "fewer moduli, fewer bytes");
        assert_eq!(he.relin_key_from_wire(&lower, 1, 1).unwrap().level(), 1);
        // For level-1 ciphertexts over every modulus (a special modulus): a part fewer
        // than level 0's, each over every modulus.
        let special = sk.relin_key_over(1, 0).unwrap().to_bytes();
        assert!(lower.len() < special.len() && special.len() < good.len());
        assert_eq!(he.relin_key_from_wire(&special, 1, 0).unwrap().level(), 1);
        for (bytes, level, over) in [(&lower, 0, 0), (&good, 1, 1), (&special, 1, 1), (&lower, 1, 0), (&good, 1, 0)] {
            let e = he.relin_key_from_wire(bytes, level, over).unwrap_err().to_string();
            assert!(e.contains("not at"), "{e}");
        }
        let e = he.relin_key_from_wire(&lower, 0, 1).unwrap_err().to_string();
        assert!(e.contains("cannot serve"), "{e}");
        // Level 1's own key relabelled as over every modulus: its parts are a modulus short.
        let mut relabelled = RelinearizationKey::decode(&lower[..]).unwrap();
        relabelled.ksk.as_mut().unwrap().ksk_level = 0;
        let e = he.relin_key_from_wire(&relabelled.encode_to_vec(), 1, 0).unwrap_err().to_string();
        assert!(e.contains("more coefficients than") || e.contains("end early"), "{e}");
        // No key at a level of one modulus (fhe makes none).
        assert!(sk.relin_key_at(he.last_level()).is_err());
        let e = he.relin_key_from_wire(&good, he.last_level(), 0).unwrap_err().to_string();
        assert!(e.contains("only where 2 are left"), "{e}");
        let edit = |f: &dyn Fn(&mut KeySwitchingKey)| {
            let mut rk = RelinearizationKey::decode(&good[..]).unwrap();
            f(rk.ksk.as_mut().unwrap());
            rk.encode_to_vec()
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("representation", edit(&|k| k.c0[0] = edit_poly(&k.c0[0], |p| p.representation = NTT))),
            ("degree", edit(&|k| k.c0[1] = edit_poly(&k.c0[1], |p| p.degree = 8))),
            ("end early", edit(&|k| k.c0[0] = edit_poly(&k.c0[0], |p| p.coefficients.truncate(100)))),
            ("below its modulus", edit(&|k| k.c0[0] = edit_poly(&k.c0[0], |p| p.coefficients[..8].fill(0xff)))),
            ("not at", edit(&|k| k.ksk_level = 2)),
            ("decomposition", edit(&|k| k.log_base = 7)),
            ("seed", edit(&|k| k.seed.clear())),
            (
                "c0 polynomials",
                edit(&|k| {
                    k.c0.pop();
                }),
            ),
            ("does not decode", vec![0xff; 64]),
        ];
        for (why, bytes) in cases {
            let e = he.relin_key_from_wire(&bytes, 0, 0).unwrap_err().to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
        // The variable-time flag a peer sets is dropped, not refused.
        let flagged = edit(&|k| k.c0[0] = edit_poly(&k.c0[0], |p| p.allow_variable_time = true));
        assert!(he.relin_key_from_wire(&flagged, 0, 0).is_ok());
    }

    #[test]
    fn ciphertexts_are_checked_field_by_field() {
        let he = ctx();
        let mut sk = SecretKey::generate(&he);
        let good = sk.encrypt(&[1, 2, 3]).unwrap().to_bytes();
        assert!(he.ciphertext_from_wire(&good, 0, "query").is_ok());
        let edit = |f: &dyn Fn(&mut CiphertextProto)| {
            let mut ct = CiphertextProto::decode(&good[..]).unwrap();
            f(&mut ct);
            ct.encode_to_vec()
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("representation", edit(&|c| c.c[0] = edit_poly(&c.c[0], |p| p.representation = NTT_SHOUP))),
            ("below its modulus", edit(&|c| c.c[0] = edit_poly(&c.c[0], |p| p.coefficients[..8].fill(0xff)))),
            ("level", edit(&|c| c.level = 1)),
            ("polynomials", edit(&|c| c.seed.truncate(5))),
            ("polynomials", edit(&|c| c.c.push(c.c[0].clone()))),
        ];
        for (why, bytes) in cases {
            let e = he.ciphertext_from_wire(&bytes, 0, "query").unwrap_err().to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
    }
}
