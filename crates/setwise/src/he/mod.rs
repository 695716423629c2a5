//! Homomorphic encryption: a thin, safe facade over the `fhe` crate's BFV scheme.
//!
//! **INTERNALS:** `fhe` 0.1 panics (asserts) on operands with different parameter
//! objects or levels, and its ciphertext decoder accepts polynomials in the wrong
//! representation. This facade owns the one parameter object of a session
//! ([`HeContext`]), encodes plaintexts at the level they are used, and checks every
//! ciphertext from a peer ([`HeContext::ciphertext_from_wire`]) so no peer input can
//! reach those asserts.
//!
//! Parameters are data ([`HeParams`]) checked against the 128-bit classical security
//! table of the Homomorphic Encryption Standard (2018), for ternary secrets.

mod params;
mod plain;
mod powers;
mod trim;
pub(crate) mod wire;

pub use crate::error::HeError;
pub use params::{HeParams, SECURITY_128};
pub use plain::{PlainRows, Plains};
pub use powers::{PowerPlan, Powers, depth_one_sources};
pub use trim::Trim;
use trim::unpack_bits;

use crate::crypto::rng::fill_os;
use fhe::bfv::{self, BfvParameters, BfvParametersBuilder, Encoding};
use fhe_traits::{FheDecoder, FheDecrypter, FheEncoder, FheEncrypter, Serialize};
use rand_chacha09::ChaCha20Rng;
use rand_chacha09::rand_core::SeedableRng;
use std::sync::Arc;

fn op_err(e: fhe::Error) -> HeError {
    HeError::Op(e.to_string())
}

/// Validated parameters with the one `fhe` parameter object every operand shares.
#[derive(Debug, Clone)]
pub struct HeContext {
    params: HeParams,
    bfv: Arc<BfvParameters>,
    encoder: Arc<plain::Encoder>,
}

impl HeContext {
    /// Validates `params` and builds the context (costly: build once per session).
    pub fn new(params: &HeParams) -> Result<Self, HeError> {
        params.validate()?;
        let bfv = BfvParametersBuilder::new()
            .set_degree(params.degree)
            .set_plaintext_modulus(params.plain_modulus)
            .set_moduli_sizes(&params.moduli_bits)
            .build_arc()
            .map_err(|e| HeError::Params(e.to_string()))?;
        let encoder = Arc::new(plain::Encoder::new(&bfv, params.plain_modulus)?);
        Ok(Self { params: params.clone(), bfv, encoder })
    }

    /// The parameters.
    pub fn params(&self) -> &HeParams {
        &self.params
    }

    /// Batching slots (= N).
    pub fn slots(&self) -> usize {
        self.params.degree
    }

    /// The plaintext modulus t.
    pub fn plain_modulus(&self) -> u64 {
        self.params.plain_modulus
    }

    /// The last level (ciphertexts there have one modulus left).
    pub fn last_level(&self) -> usize {
        self.bfv.max_level()
    }

    /// `fhe`'s plaintext of slot values (each < t) at `level`, for an encryption.
    fn fhe_plaintext(&self, values: &[u64], level: usize) -> Result<bfv::Plaintext, HeError> {
        let t = self.plain_modulus();
        if values.len() > self.slots() || values.iter().any(|&v| v >= t) {
            return Err(HeError::Op(format!("encode: need at most {} values below {t}", self.slots())));
        }
        bfv::Plaintext::try_encode(values, Encoding::simd_at_level(level), &self.bfv).map_err(op_err)
    }

    /// Serialised size bound of a ciphertext at `level` (both polynomials, plus slack
    /// for the encoding's framing).
    pub fn ciphertext_bytes(&self, level: usize, full: bool) -> usize {
        let bits: usize = self.params.moduli_bits[..self.params.moduli_bits.len() - level].iter().sum();
        let polys = if full { 2 } else { 1 };
        polys * bits * self.params.degree / 8 + 256
    }
}

/// A ciphertext under a session's parameters.
#[derive(Debug, Clone)]
pub struct Ciphertext(bfv::Ciphertext);

impl Ciphertext {
    /// Serialised bytes (a fresh secret-key encryption stores a seed for its second
    /// polynomial, so it is half the size).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.0.to_bytes()
    }

    /// Polynomials: 2, or 3 for a product not yet relinearised.
    pub fn parts(&self) -> usize {
        self.0.len()
    }

    /// Its level: how many of the chain's moduli it has dropped.
    pub fn level(&self) -> usize {
        let moduli = self.0.first().map_or(0, |c| c.ctx().moduli().len());
        (self.0.max_switchable_level() + 1).saturating_sub(moduli)
    }

    /// Drops to `level` (at or below its own, at most the last): fewer moduli, so each
    /// later product costs less; same plaintext, with the noise scaled down by the
    /// moduli dropped plus a rounding term.
    pub fn switch_to_level(&mut self, level: usize) -> Result<(), HeError> {
        self.0.switch_to_level(level).map_err(op_err)
    }

    /// Drops to the last level (one modulus): smaller to send, same plaintext.
    pub fn mod_switch_to_last(&mut self) -> Result<(), HeError> {
        let last = self.0.max_switchable_level();
        self.0.switch_to_level(last).map_err(op_err)
    }
}

/// A relinearisation key (lets the holder of ciphertexts multiply them) for ciphertexts
/// at one level, itself over that level's moduli or over every modulus
/// ([`SecretKey::relin_key_over`]).
#[derive(Debug)]
pub struct RelinKey {
    key: bfv::RelinearizationKey,
    level: usize,
}

impl RelinKey {
    fn new(key: bfv::RelinearizationKey, level: usize) -> Self {
        Self { key, level }
    }

    /// Serialised bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.key.to_bytes()
    }

    /// The level of the ciphertexts it relinearises.
    pub fn level(&self) -> usize {
        self.level
    }
}

/// Where a query's ciphertexts and relinearisation keys are, as both sides derive them
/// from the agreed parameters: the receiver encrypts at `query` and sends a key for each
/// of `keys` (the levels of the ciphertexts each relinearises), each over the moduli of
/// [`over`](Self::over).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryLevels {
    /// The level the query's ciphertexts are encrypted at.
    pub query: usize,
    /// The levels of the ciphertexts the keys relinearise, in the order they are sent.
    pub keys: Vec<usize>,
    /// Whether every key is over every modulus (the moduli below the query level kept
    /// for key switching, as SEAL's special modulus) rather than over its level's own.
    pub keys_over_every_modulus: bool,
}

impl QueryLevels {
    /// Level-0 ciphertexts, with a key over its own moduli for each of `keys`.
    pub fn at_level_zero(keys: &[usize]) -> Self {
        Self { query: 0, keys: keys.to_vec(), keys_over_every_modulus: false }
    }

    /// The level whose moduli the key for ciphertexts at `level` is over.
    pub fn over(&self, level: usize) -> usize {
        if self.keys_over_every_modulus { 0 } else { level }
    }
}

/// A BFV secret key with its own CSPRNG (seeded from the OS); zeroized on drop by `fhe`.
pub struct SecretKey {
    ctx: HeContext,
    sk: bfv::SecretKey,
    rng: ChaCha20Rng,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

impl SecretKey {
    /// A fresh key.
    pub fn generate(ctx: &HeContext) -> Self {
        let mut seed = [0u8; 32];
        fill_os(&mut seed);
        let mut rng = ChaCha20Rng::from_seed(seed);
        let sk = bfv::SecretKey::random(&ctx.bfv, &mut rng);
        Self { ctx: ctx.clone(), sk, rng }
    }

    /// Encrypts slot values (each < t) at level 0 (secret-key, seeded: half the bytes).
    pub fn encrypt(&mut self, values: &[u64]) -> Result<Ciphertext, HeError> {
        self.encrypt_at(values, 0)
    }

    /// Encrypts slot values (each < t) at `level`, over that level's moduli only (a
    /// fresh ciphertext's noise, not a switched one's rounding).
    pub fn encrypt_at(&mut self, values: &[u64], level: usize) -> Result<Ciphertext, HeError> {
        let pt = self.ctx.fhe_plaintext(values, level)?;
        self.sk.try_encrypt(&pt, &mut self.rng).map(Ciphertext).map_err(op_err)
    }

    /// Decrypts to slot values.
    pub fn decrypt(&self, ct: &Ciphertext) -> Result<Vec<u64>, HeError> {
        let pt = self.sk.try_decrypt(&ct.0).map_err(op_err)?;
        Vec::<u64>::try_decode(&pt, Encoding::simd()).map_err(op_err)
    }

    /// A relinearisation key for ciphertexts at level 0.
    pub fn relin_key(&mut self) -> Result<RelinKey, HeError> {
        self.relin_key_at(0)
    }

    /// A relinearisation key for ciphertexts at `level`, over that level's moduli (a
    /// smaller key than level 0's: one part per modulus left, each over those moduli).
    pub fn relin_key_at(&mut self, level: usize) -> Result<RelinKey, HeError> {
        self.relin_key_over(level, level)
    }

    /// A relinearisation key for ciphertexts at `level`, itself over the moduli of
    /// `over` ≤ `level`: one part per modulus of `level`, each over `over`'s moduli. With
    /// `over` below `level` the moduli in between act as SEAL's special modulus: `fhe`
    /// switches each key switch's result down over them, dividing its noise.
    pub fn relin_key_over(&mut self, level: usize, over: usize) -> Result<RelinKey, HeError> {
        bfv::RelinearizationKey::new_leveled(&self.sk, level, over, &mut self.rng)
            .map(|key| RelinKey::new(key, level))
            .map_err(op_err)
    }

    /// The noise of `ct` in bits (log2 of its largest noise coefficient), for tests
    /// that check a parameter set's noise budget. Not for production: the noise tells
    /// about the secret key, which is why `fhe` marks its measurement `unsafe`.
    #[cfg(any(test, feature = "testing"))]
    #[allow(unsafe_code)]
    pub fn noise_bits(&self, ct: &Ciphertext) -> Result<usize, HeError> {
        // SAFETY: no memory hazard; `fhe` marks the measurement unsafe only because its
        // result leaks information about the secret key. Compiled for tests only.
        unsafe { self.sk.measure_noise(&ct.0) }.map_err(op_err)
    }
}

/// Homomorphic operations on ciphertexts: products, relinearised at the levels its
/// relinearisation keys are for, and dot products with plaintexts at the plaintexts' level.
#[derive(Debug)]
pub struct Evaluator<'a> {
    keys: &'a [RelinKey],
}

impl<'a> Evaluator<'a> {
    /// An evaluator; `keys` (at most one per level) are needed only for ciphertext
    /// products.
    pub fn new(keys: &'a [RelinKey]) -> Self {
        Self { keys }
    }

    /// `a·b`, relinearised.
    pub fn mul(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, HeError> {
        let mut c = self.mul_lazy(a, b)?;
        self.relinearize(&mut c)?;
        Ok(c)
    }

    /// `a·b` left as 3 parts: products summed before one relinearisation carry the
    /// key-switching noise once, not per product ([`dot_rows`](Self::dot_rows) does
    /// that). 3-part operands are relinearised first.
    pub fn mul_lazy(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, HeError> {
        let (a, b) = (self.two_parts(a)?, self.two_parts(b)?);
        Ok(Ciphertext(&a.0 * &b.0))
    }

    fn two_parts<'c>(&self, c: &'c Ciphertext) -> Result<std::borrow::Cow<'c, Ciphertext>, HeError> {
        if c.parts() == 2 {
            return Ok(std::borrow::Cow::Borrowed(c));
        }
        let mut r = c.clone();
        self.relinearize(&mut r)?;
        Ok(std::borrow::Cow::Owned(r))
    }

    /// Brings a 3-part ciphertext back to 2 parts (no-op for 2 parts).
    pub fn relinearize(&self, c: &mut Ciphertext) -> Result<(), HeError> {
        if c.parts() == 2 {
            return Ok(());
        }
        let level = c.level();
        let rk = self.keys.iter().find(|k| k.level == level).ok_or_else(|| {
            HeError::Op(format!("a ciphertext product at level {level} needs a relinearisation key for that level"))
        })?;
        rk.key.relinearizes(&mut c.0).map_err(op_err)
    }

    /// `a + b`.
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, HeError> {
        if a.0.len() != b.0.len() {
            return Err(HeError::Op("adding ciphertexts of different sizes".into()));
        }
        Ok(Ciphertext(&a.0 + &b.0))
    }

    /// `Σ cts[i]·pts[i]` over plaintexts encoded by [`HeContext::encode_rows`], plus
    /// `constant` (one such plaintext) if given, as a 2-part ciphertext: the 3-part
    /// terms are summed first and relinearised once. Every ciphertext is at the
    /// plaintexts' level.
    pub fn dot_rows(
        &self,
        ctx: &HeContext,
        cts: &[&Ciphertext],
        pts: Plains<'_>,
        constant: Option<Plains<'_>>,
    ) -> Result<Ciphertext, HeError> {
        if cts.is_empty() || cts.len() != pts.len() || constant.is_some_and(|c| c.len() != 1) {
            return Err(HeError::Op(format!("dot product of {} ciphertexts and {} plaintexts", cts.len(), pts.len())));
        }
        let level = pts.level();
        let mut constant = constant.map(|c| c.get(0));
        let mut acc: Option<Ciphertext> = None;
        for parts in [2, 3] {
            let terms: Vec<_> =
                cts.iter().enumerate().filter(|(_, c)| c.parts() == parts).map(|(k, &c)| (c, pts.get(k))).collect();
            if terms.is_empty() {
                continue;
            }
            // The constant joins the first sum.
            let mut sum = plain::dot(ctx, level, &terms, constant.take())?;
            self.relinearize(&mut sum)?;
            acc = Some(match acc {
                None => sum,
                Some(a) => self.add(&a, &sum)?,
            });
        }
        acc.ok_or_else(|| HeError::Op("ciphertexts of neither 2 nor 3 parts".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> HeParams {
        HeParams { degree: 4096, plain_modulus: HeParams::batching_prime(4096, 20), moduli_bits: vec![36, 36, 37] }
    }

    #[test]
    fn validation_names_the_field() {
        let mut p = small();
        p.validate().unwrap();
        p.moduli_bits = vec![60, 60];
        assert!(p.validate().unwrap_err().to_string().contains("above the 109 bits"));
        p = small();
        p.plain_modulus = 12289; // prime, but ≡ 4097 mod 8192
        assert!(p.validate().unwrap_err().to_string().contains("plain_modulus"));
        p = small();
        p.degree = 3000;
        assert!(p.validate().unwrap_err().to_string().contains("degree"));
    }

    #[test]
    fn encrypt_multiply_dot_decrypt() {
        let ctx = HeContext::new(&small()).unwrap();
        let t = ctx.plain_modulus();
        let mut sk = SecretKey::generate(&ctx);
        let rk = sk.relin_key().unwrap();
        let v: Vec<u64> = (0..4096u64).map(|i| (i * 31 + 7) % t).collect();
        let c = sk.encrypt(&v).unwrap();
        let ev = Evaluator::new(std::slice::from_ref(&rk));
        let c2 = ev.mul(&c, &c).unwrap();
        let w: Vec<u64> = (0..4096u64).map(|i| (i + 1) % t).collect();
        let pts = ctx.encode_rows(&[w.clone(), w.clone(), vec![1; 4096]].concat(), 0).unwrap();
        let (pw, one) = (pts.all().slice(0..2), Some(pts.all().slice(2..3)));
        let mut r = ev.dot_rows(&ctx, &[&c, &c2], pw, one).unwrap();
        r.mod_switch_to_last().unwrap();
        let got = sk.decrypt(&r).unwrap();
        for i in 0..4096 {
            let (x, y) = (v[i] as u128, w[i] as u128);
            let want = ((x * y + x * x % t as u128 * y + 1) % t as u128) as u64;
            assert_eq!(got[i], want, "slot {i}");
        }
    }

    #[test]
    fn products_below_level_zero_take_that_levels_key() {
        let ctx = HeContext::new(&small()).unwrap();
        let t = ctx.plain_modulus();
        let mut sk = SecretKey::generate(&ctx);
        let v: Vec<u64> = (0..4096u64).map(|i| (i * 29 + 5) % t).collect();
        let mut c = sk.encrypt(&v).unwrap();
        c.switch_to_level(1).unwrap();
        assert_eq!(c.level(), 1);
        let level0 = [sk.relin_key().unwrap()];
        let e = Evaluator::new(&level0).mul(&c, &c).unwrap_err().to_string();
        assert!(e.contains("level 1"), "{e}");
        let keys = [sk.relin_key().unwrap(), sk.relin_key_at(1).unwrap()];
        let sq = Evaluator::new(&keys).mul(&c, &c).unwrap();
        assert_eq!((sq.parts(), sq.level()), (2, 1));
        let got = sk.decrypt(&sq).unwrap();
        for (i, &x) in v.iter().enumerate() {
            assert_eq!(got[i] as u128, x as u128 * x as u128 % t as u128, "slot {i}");
        }
    }

    #[test]
    fn wire_ciphertexts_are_checked() {
        let ctx = HeContext::new(&small()).unwrap();
        let mut sk = SecretKey::generate(&ctx);
        let c = sk.encrypt(&[1, 2, 3]).unwrap();
        let bytes = c.to_bytes();
        assert!(ctx.ciphertext_from_wire(&bytes, 0, "query").is_ok());
        assert!(ctx.ciphertext_from_wire(&bytes, 1, "query").is_err(), "wrong level");
        // Encrypted at level 1: fewer bytes, read at level 1 only, and it decrypts.
        let one = sk.encrypt_at(&[1, 2, 3], 1).unwrap();
        assert!(one.to_bytes().len() < bytes.len());
        assert!(ctx.ciphertext_from_wire(&one.to_bytes(), 0, "query").is_err());
        let back = ctx.ciphertext_from_wire(&one.to_bytes(), 1, "query").unwrap();
        assert_eq!(sk.decrypt(&back).unwrap()[..3], [1, 2, 3]);
        for cut in [0, 1, 10, bytes.len() / 2, bytes.len() - 1] {
            assert!(ctx.ciphertext_from_wire(&bytes[..cut], 0, "query").is_err());
        }
        let mut flipped = bytes.clone();
        for b in flipped.iter_mut().take(64) {
            *b ^= 0x5a;
        }
        assert!(ctx.ciphertext_from_wire(&flipped, 0, "query").is_err());
        assert!(ctx.ciphertext_from_wire(&vec![0u8; 10 << 20], 0, "query").is_err());
        let mut last = c.clone();
        last.mod_switch_to_last().unwrap();
        assert!(ctx.ciphertext_from_wire(&last.to_bytes(), ctx.last_level(), "result").is_ok());
        assert!(ctx.relin_key_from_wire(&[1, 2, 3], 0, 0).is_err());
    }

    #[test]
    fn lazy_products_sum_then_relinearise_once() {
        let ctx = HeContext::new(&small()).unwrap();
        let t = ctx.plain_modulus();
        let mut sk = SecretKey::generate(&ctx);
        let rk = sk.relin_key().unwrap();
        let ev = Evaluator::new(std::slice::from_ref(&rk));
        let v: Vec<u64> = (0..4096u64).map(|i| (i * 17 + 3) % t).collect();
        let c = sk.encrypt(&v).unwrap();
        let sq = ev.mul_lazy(&c, &c).unwrap();
        assert_eq!(sq.parts(), 3);
        let cube = ev.mul_lazy(&sq, &c).unwrap(); // relinearises the 3-part operand first
        // x·2 + x²·2 + x³·2 + 1 with 2- and 3-part terms mixed.
        let pts = ctx.encode_rows(&[vec![2u64; 3 * 4096], vec![1; 4096]].concat(), 0).unwrap();
        let r = ev.dot_rows(&ctx, &[&c, &sq, &cube], pts.all().slice(0..3), Some(pts.all().slice(3..4))).unwrap();
        assert_eq!(r.parts(), 2);
        let got = sk.decrypt(&r).unwrap();
        for (i, &x) in v.iter().enumerate() {
            let (x, t) = (x as u128, t as u128);
            let want = (2 * (x + x * x % t + x * x % t * x % t) + 1) % t;
            assert_eq!(got[i] as u128, want, "slot {i}");
        }
    }
}
