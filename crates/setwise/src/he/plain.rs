//! Plaintexts as the sender's products use them: each one's NTT form over the moduli of
//! its level, back to back in one buffer, and the lazy dot product of ciphertexts with
//! them.
//!
//! `fhe`'s own `Plaintext` also keeps each plaintext's N values (half as much memory
//! again at two moduli) and copies it while encoding. A database holds millions of
//! plaintexts and, served in compact mode, encodes them per query: here encoding is the
//! SIMD layout, an inverse NTT modulo t and a forward NTT per modulus, with the same
//! `fhe-math` operators the ciphertexts' polynomials use. The encoding and the sum of
//! products are checked against `fhe`'s to the bit; the constant term is added as
//! ⌊q/t⌋·m, within t per coefficient of `fhe`'s rounding (a few bits of noise, far below
//! what the products leave). Buffers that held the database's values are zeroized.

use super::{Ciphertext, HeContext, HeError};
use fhe::bfv;
use fhe_math::ntt::NttOperator;
use fhe_math::rq::traits::TryConvertFrom;
use fhe_math::rq::{Poly, Representation};
use fhe_math::zq::Modulus;
use std::ops::Range;
use zeroize::{Zeroize, Zeroizing};

/// What encoding needs of a context: the SIMD slot order, the NTT modulo t, the moduli
/// with their NTTs, and per level the scaling of a plaintext added to a ciphertext.
/// Built once per context.
#[derive(Debug)]
pub(super) struct Encoder {
    degree: usize,
    /// Slot `i` goes to coefficient `slot_at[i]` before the inverse NTT (as `fhe` lays
    /// out its SIMD encoding).
    slot_at: Box<[usize]>,
    t_ntt: NttOperator,
    /// The moduli of level 0; level ℓ has all but the last ℓ.
    moduli: Vec<ModulusOps>,
    /// Per level, per modulus: ⌊q/t⌋ modulo it, q the product of the level's moduli.
    deltas: Vec<Vec<u64>>,
}

impl Encoder {
    /// The encoder of `bfv`'s parameters (`t` prime ≡ 1 mod 2N, checked by the context).
    pub(super) fn new(bfv: &bfv::BfvParameters, t: u64) -> Result<Self, HeError> {
        let n = bfv.degree();
        let bad = |what: &str| HeError::Params(format!("encoder: {what}"));
        let t_mod = Modulus::new(t).map_err(|e| bad(&e.to_string()))?;
        let t_ntt = NttOperator::new(&t_mod, n).ok_or_else(|| bad("no NTT modulo t"))?;
        // fhe's SIMD layout (BfvParameters' matrix_reps_index_map): the two rows of N/2
        // slots follow the powers of 3 and their negatives modulo 2N, bit-reversed.
        let (m, row, shift) = (2 * n, n / 2, n.leading_zeros() + 1);
        let mut slot_at = vec![0usize; n];
        let mut pos = 1usize;
        for i in 0..row {
            slot_at[i] = ((pos - 1) >> 1).reverse_bits() >> shift;
            slot_at[row | i] = ((m - pos - 1) >> 1).reverse_bits() >> shift;
            pos = (pos * 3) & (m - 1);
        }
        let moduli = bfv
            .moduli()
            .iter()
            .map(|&q| {
                let m = Modulus::new(q).map_err(|e| bad(&e.to_string()))?;
                let ntt = NttOperator::new(&m, n).ok_or_else(|| bad("no NTT modulo a modulus"))?;
                let t_inv = m.inv(t % q).ok_or_else(|| bad("t is not invertible"))?;
                Ok(ModulusOps { q: m, value: q, bits: 64 - q.leading_zeros(), ntt, t_inv })
            })
            .collect::<Result<Vec<_>, HeError>>()?;
        let deltas = (0..=bfv.max_level())
            .map(|level| {
                let at = &moduli[..moduli.len() - level];
                // ⌊q/t⌋ = (q − (q mod t))/t ≡ −(q mod t)·t⁻¹ (mod qᵢ), as qᵢ divides q.
                let q_mod_t = at.iter().fold(1u64, |acc, m| t_mod.mul(acc, m.value % t));
                at.iter().map(|m| m.q.neg(m.q.mul(q_mod_t % m.value, m.t_inv))).collect()
            })
            .collect();
        Ok(Encoder { degree: n, slot_at: slot_at.into(), t_ntt, moduli, deltas })
    }

    /// The moduli of `level` and their ⌊q/t⌋.
    fn level(&self, level: usize) -> Result<(&[ModulusOps], &[u64]), HeError> {
        let deltas = self.deltas.get(level).ok_or_else(|| HeError::Op(format!("no level {level}")))?;
        Ok((&self.moduli[..deltas.len()], deltas))
    }
}

/// One ciphertext modulus and what encoding and sums need of it.
#[derive(Debug)]
struct ModulusOps {
    q: Modulus,
    value: u64,
    bits: u32,
    ntt: NttOperator,
    t_inv: u64,
}

/// Plaintexts in NTT form at one level, back to back (each `moduli · N` words);
/// zeroized when dropped (they are the sender's database).
#[derive(Clone, Default)]
pub struct PlainRows {
    level: usize,
    width: usize,
    data: Vec<u64>,
}

impl Drop for PlainRows {
    fn drop(&mut self) {
        self.data.zeroize();
    }
}

impl std::fmt::Debug for PlainRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PlainRows({} at level {})", self.all().len(), self.level)
    }
}

/// A run of consecutive plaintexts of a [`PlainRows`].
#[derive(Debug, Clone, Copy)]
pub struct Plains<'a> {
    level: usize,
    width: usize,
    data: &'a [u64],
}

impl PlainRows {
    /// All of them.
    pub fn all(&self) -> Plains<'_> {
        Plains { level: self.level, width: self.width, data: &self.data }
    }

    /// Whether it holds no plaintext.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The words, plaintext after plaintext, each a row of N per modulus: what
    /// [`from_words`](Self::from_words) takes back.
    pub fn words(&self) -> &[u64] {
        &self.data
    }

    /// Plaintexts at `level` of `ctx` from stored `words` (as [`words`](Self::words)
    /// gave them), checked as [`Plains::from_words`] checks them. The words are zeroized
    /// if refused.
    pub fn from_words(ctx: &HeContext, level: usize, words: Vec<u64>) -> Result<Self, HeError> {
        let words = Zeroizing::new(words);
        let width = Plains::from_words(ctx, level, &words)?.width;
        let mut words = words;
        Ok(PlainRows { level, width, data: std::mem::take(&mut *words) })
    }
}

impl<'a> Plains<'a> {
    /// Plaintexts at `level` of `ctx` viewed in stored `words` (as
    /// [`PlainRows::words`] gave them), checked: whole plaintexts, and every word below
    /// its modulus, which is what keeps the sums of products exact: their limbs fit
    /// 32 bits and their 64-bit and 128-bit sums never overflow (`Sums`).
    pub fn from_words(ctx: &HeContext, level: usize, words: &'a [u64]) -> Result<Self, HeError> {
        let (moduli, _) = ctx.encoder.level(level)?;
        let n = ctx.encoder.degree;
        let width = moduli.len() * n;
        if !words.len().is_multiple_of(width) {
            return Err(HeError::Op(format!(
                "stored plaintexts: {} words, not a multiple of {width} (a plaintext at level {level})",
                words.len(),
            )));
        }
        for (k, plain) in words.chunks(width).enumerate() {
            for (m, row) in moduli.iter().zip(plain.chunks(n)) {
                // The largest word, not `all(<)`: a branch-free pass the compiler vectorises.
                if row.iter().fold(0, |a, &w| a.max(w)) >= m.value {
                    return Err(HeError::Op(format!(
                        "stored plaintext {k}: a word is not below its modulus {}",
                        m.value
                    )));
                }
            }
        }
        Ok(Plains { level, width, data: words })
    }

    /// How many plaintexts.
    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.width).unwrap_or(0)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Plaintexts `range`.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Plains<'a> {
        Plains { data: &self.data[range.start * self.width..range.end * self.width], ..*self }
    }

    /// Runs of `size` plaintexts (the last one shorter if need be).
    pub fn chunks(self, size: usize) -> impl Iterator<Item = Plains<'a>> {
        self.data.chunks(size * self.width).map(move |data| Plains { data, ..self })
    }

    /// The level they are encoded for.
    pub fn level(&self) -> usize {
        self.level
    }

    /// Plaintext `k`'s rows.
    pub(super) fn get(&self, k: usize) -> &'a [u64] {
        &self.data[k * self.width..(k + 1) * self.width]
    }
}

impl HeContext {
    /// Encodes `values` (a multiple of N, each below t; N slot values per plaintext) as
    /// plaintexts for products with ciphertexts at `level`.
    pub fn encode_rows<T: Copy + Into<u64>>(&self, values: &[T], level: usize) -> Result<PlainRows, HeError> {
        let enc = &self.encoder;
        let (n, t) = (enc.degree, self.plain_modulus());
        let (moduli, _) = enc.level(level)?;
        if !values.len().is_multiple_of(n) {
            return Err(HeError::Op(format!("encode: {} values, not a multiple of {n}", values.len())));
        }
        let width = moduli.len() * n;
        let mut data = vec![0u64; values.len() / n * width];
        let mut coeffs = Zeroizing::new(vec![0u64; n]);
        for (slots, out) in values.chunks(n).zip(data.chunks_mut(width)) {
            for (&at, &v) in enc.slot_at.iter().zip(slots) {
                let v: u64 = v.into();
                if v >= t {
                    return Err(HeError::Op(format!("encode: value {v} is not below t = {t}")));
                }
                coeffs[at] = v;
            }
            enc.t_ntt.backward(&mut coeffs);
            for (m, row) in moduli.iter().zip(out.chunks_mut(n)) {
                row.iter_mut().zip(coeffs.iter()).for_each(|(r, &c)| *r = m.q.reduce(c));
                m.ntt.forward(row);
            }
        }
        Ok(PlainRows { level, width, data })
    }
}

/// `Σ cᵢ·pᵢ` over `terms` (each a ciphertext and a plaintext's rows at `level`), plus
/// `constant` (a plaintext's rows) if given, exactly as `fhe`'s `dot_product_scalar`
/// gives it: the products summed unreduced (in 64-bit limb sums folded into 128-bit
/// totals, `Sums`) and reduced at the end, and every 2^(127 − 2·bits) terms where
/// the totals could overflow (8 at 62 bits). Every ciphertext has the same number of
/// parts, at `level`.
pub(super) fn dot(
    ctx: &HeContext,
    level: usize,
    terms: &[(&Ciphertext, &[u64])],
    constant: Option<&[u64]>,
) -> Result<Ciphertext, HeError> {
    let (moduli, deltas) = ctx.encoder.level(level)?;
    let n = ctx.encoder.degree;
    let parts = terms.first().ok_or_else(|| HeError::Op("a dot product of no ciphertexts".into()))?.0.parts();
    let context = ctx.bfv.context_at_level(level).map_err(super::op_err)?;
    // Over this level's moduli and degree: `fhe` asserts on operands of another context.
    let at_level =
        |c: &Ciphertext| c.0.iter().all(|p| p.ctx().moduli() == context.moduli() && p.coefficients().ncols() == n);
    let width = moduli.len() * n;
    if terms.iter().any(|(c, p)| c.parts() != parts || !at_level(c) || p.len() != width)
        || constant.is_some_and(|c| c.len() != width)
    {
        return Err(HeError::Op(format!("dot product: operands not all of {parts} parts at level {level}")));
    }
    // `fhe`'s moduli have at most 62 bits, which the limb sums below rely on.
    let bits = moduli.iter().map(|m| m.bits as usize).max().unwrap_or(64);
    if bits > 62 {
        return Err(HeError::Op(format!("dot product over a modulus of {bits} bits: at most 62")));
    }
    // Each term's polynomials as one slice each (modulus-major rows of n).
    let rows = terms
        .iter()
        .map(|(c, _)| {
            c.0.iter()
                .map(|p| {
                    p.coefficients().to_slice().ok_or_else(|| HeError::Op("a ciphertext is not contiguous".into()))
                })
                .collect::<Result<Vec<&[u64]>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let pts: Vec<&[u64]> = terms.iter().map(|&(_, pt)| pt).collect();
    // The running sums are of the database's values: zeroized when dropped.
    let mut acc = Zeroizing::new(vec![0u128; parts * moduli.len() * n]);
    pulp::Arch::new().dispatch(Sums { moduli, bits, n, rows: &rows, pts: &pts, acc: &mut acc });
    let polys = (0..parts)
        .map(|p| {
            let mut v = vec![0u64; moduli.len() * n];
            for (j, (m, &delta)) in moduli.iter().zip(deltas).enumerate() {
                let q = &m.q;
                let (out, a) = (&mut v[j * n..][..n], &acc[(p * moduli.len() + j) * n..][..n]);
                out.iter_mut().zip(a).for_each(|(o, &a)| *o = q.reduce_u128(a));
                // The constant is added to the first part scaled by ⌊q/t⌋, as a
                // plaintext is added to a ciphertext.
                if let (0, Some(c)) = (p, constant) {
                    let c = &c[j * n..][..n];
                    out.iter_mut().zip(c).for_each(|(o, &c)| *o = q.add(*o, q.mul(c, delta)));
                }
            }
            // Variable time allowed, as `fhe`'s own dot product leaves its results.
            Poly::try_convert_from(v, context, true, Representation::Ntt).map_err(|e| HeError::Op(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    bfv::Ciphertext::new(polys, &ctx.bfv).map(Ciphertext).map_err(super::op_err)
}

/// Coefficients a tile of [`Sums`] covers: its 64-bit limb sums, which every term
/// updates, stay in the first-level cache (3 words a part: 24 KiB for 2 parts).
const TILE: usize = 512;

/// `acc[p][i]` ≡ `Σ_k rows[k][p][i] · pts[k][i]` modulo the row's modulus, in 128-bit
/// integers (every value below 2^bits), for `dot`. A 64×64→128-bit product is one
/// scalar multiplication a coefficient; here each word is split into two limbs of
/// w = ⌈bits/2⌉ bits, so that every product is of two 32-bit values, which AVX-512 and
/// AVX2 multiply 8 or 4 at a time (`pulp` runs this in the widest SIMD context the CPU
/// has, chosen at run time, where the loop below vectorises; scalar without AVX2). The
/// limb products are summed in 64-bit words, folded into the 128-bit totals every
/// `room` terms before they could overflow, and the totals reduced before they could;
/// tile by tile over the coefficients, so that the sums stay in the first-level cache
/// while each term's operands stream through once. Above 58 bits the limb sums would
/// fold every few terms, so there each product is summed in 128 bits directly.
struct Sums<'a> {
    moduli: &'a [ModulusOps],
    bits: usize,
    n: usize,
    rows: &'a [Vec<&'a [u64]>],
    pts: &'a [&'a [u64]],
    acc: &'a mut [u128],
}

impl pulp::WithSimd for Sums<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let Sums { moduli, bits, n, rows, pts, acc } = self;
        let w = bits.div_ceil(2);
        let mask = (1u64 << w) - 1;
        // Limb products are below 2^2w; the middle sum takes two a term.
        let room = 1u64 << (63 - 2 * w).min(20);
        let parts = rows.first().map_or(0, Vec::len);
        let width = pts.first().map_or(0, |p| p.len());
        let mut low = Zeroizing::new(vec![0u64; 3 * parts * TILE]);
        // A term adds less than 2^(2·bits) to a total: 2^(127 − 2·bits) of them fit
        // between reductions (8 at 62 bits, 2048 at 58).
        let between = 1u64 << (127 - 2 * bits).min(40);
        let wide = room < 32;
        // A tile within one modulus's row (n, a power of two from 1024, is a multiple of it).
        let tile = TILE.min(n);
        for start in (0..width).step_by(tile) {
            let len = tile.min(width - start);
            let q = &moduli[start / n].q;
            let mut unreduced = 0;
            for (k, (polys, pt)) in (0u64..).zip(rows.iter().zip(pts)) {
                let y = &pt[start..start + len];
                if wide {
                    // Each product in 128 bits; the totals reduced every `between` terms.
                    if k % between == 0 && k > 0 {
                        for p in 0..parts {
                            let a = &mut acc[p * width + start..][..len];
                            a.iter_mut().for_each(|a| *a = q.reduce_u128(*a) as u128);
                        }
                    }
                    for (p, poly) in polys.iter().enumerate() {
                        let a = &mut acc[p * width + start..][..len];
                        for ((a, &x), &y) in a.iter_mut().zip(&poly[start..start + len]).zip(y) {
                            *a += x as u128 * y as u128;
                        }
                    }
                    continue;
                }
                if k % room == 0 && k > 0 {
                    unreduced += room;
                    let reduce = unreduced + room > between;
                    fold(&mut low, &mut acc[..], q, parts, width, start..start + len, w, reduce);
                    if reduce {
                        unreduced = 0;
                    }
                }
                for (p, poly) in polys.iter().enumerate() {
                    let x = &poly[start..start + len];
                    let (s00, rest) = low[3 * p * TILE..3 * (p + 1) * TILE].split_at_mut(TILE);
                    let (s01, s11) = rest.split_at_mut(TILE);
                    let sums = s00[..len].iter_mut().zip(&mut s01[..len]).zip(&mut s11[..len]);
                    for (((s00, s01), s11), (&x, &y)) in sums.zip(x.iter().zip(y)) {
                        // Limbs below 2^32, so that each product is a 32×32→64-bit one.
                        let (x0, x1) = ((x & mask) as u32 as u64, (x >> w) as u32 as u64);
                        let (y0, y1) = ((y & mask) as u32 as u64, (y >> w) as u32 as u64);
                        *s00 += x0 * y0;
                        *s01 += x0 * y1 + x1 * y0;
                        *s11 += x1 * y1;
                    }
                }
            }
            if !wide {
                fold(&mut low, &mut acc[..], q, parts, width, start..start + len, w, false);
            }
        }
    }
}

/// Adds a tile's 64-bit limb sums (of `range`, within one modulus `q`'s row) into the
/// 128-bit totals and clears them; `reduce` reduces the totals modulo `q` too, which
/// [`Sums`] asks for before they could overflow.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn fold(
    low: &mut [u64],
    acc: &mut [u128],
    q: &Modulus,
    parts: usize,
    width: usize,
    range: Range<usize>,
    w: usize,
    reduce: bool,
) {
    let len = range.len();
    for p in 0..parts {
        let (s00, rest) = low[3 * p * TILE..3 * (p + 1) * TILE].split_at_mut(TILE);
        let (s01, s11) = rest.split_at_mut(TILE);
        let a = &mut acc[p * width + range.start..][..len];
        for (((a, s00), s01), s11) in a.iter_mut().zip(&mut s00[..len]).zip(&mut s01[..len]).zip(&mut s11[..len]) {
            *a += *s00 as u128 + ((*s01 as u128) << w) + ((*s11 as u128) << (2 * w));
            if reduce {
                *a = q.reduce_u128(*a) as u128;
            }
            (*s00, *s01, *s11) = (0, 0, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::dot;
    use super::{Poly, Representation, TryConvertFrom};
    use fhe_traits::FheEncoder;

    fn ctx(degree: usize, moduli_bits: Vec<usize>, t_bits: u32) -> HeContext {
        HeContext::new(&HeParams { degree, plain_modulus: HeParams::batching_prime(degree, t_bits), moduli_bits })
            .unwrap()
    }

    /// Three plaintexts' worth of values below t.
    fn values(ctx: &HeContext, seed: u64) -> Vec<u64> {
        let t = ctx.plain_modulus();
        (0..3 * ctx.slots() as u64).map(|i| (i * 2_654_435_761 + seed * 97) % t).collect()
    }

    #[test]
    fn dot_products_equal_fhes_to_the_bit() {
        for (degree, moduli, t_bits) in [(4096, vec![42, 32], 21), (8192, vec![56, 56, 56, 50], 22)] {
            let ctx = ctx(degree, moduli, t_bits);
            let mut sk = SecretKey::generate(&ctx);
            let vals = values(&ctx, 1);
            let cts: Vec<Ciphertext> = (0..3).map(|i| sk.encrypt(&values(&ctx, i + 7)[..degree]).unwrap()).collect();
            let refs: Vec<&Ciphertext> = cts.iter().collect();
            for level in [0, 1] {
                let at: Vec<Ciphertext> = cts
                    .iter()
                    .map(|c| {
                        let mut c = c.clone();
                        c.0.switch_to_level(level).unwrap();
                        c
                    })
                    .collect();
                let at: Vec<&Ciphertext> = at.iter().collect();
                let rows = ctx.encode_rows(&vals, level).unwrap();
                let theirs: Vec<bfv::Plaintext> = vals
                    .chunks(degree)
                    .map(|v| bfv::Plaintext::try_encode(v, bfv::Encoding::simd_at_level(level), &ctx.bfv).unwrap())
                    .collect();
                let want = bfv::dot_product_scalar(at.iter().map(|c| &c.0), theirs.iter()).unwrap();
                let terms: Vec<_> = at.iter().enumerate().map(|(k, &c)| (c, rows.all().get(k))).collect();
                let got = dot(&ctx, level, &terms, None).unwrap();
                let coeffs = |c: &bfv::Ciphertext| c.iter().map(|p| p.coefficients().to_owned()).collect::<Vec<_>>();
                assert_eq!(coeffs(&got.0), coeffs(&want), "N = {degree}, level {level}");
            }
            // The constant decrypts as added: Σ xᵢ·yᵢ + z slot by slot.
            let rows = ctx.encode_rows(&vals, 0).unwrap();
            let all = rows.all();
            let r = dot(&ctx, 0, &[(refs[0], all.get(0)), (refs[1], all.get(1))], Some(all.get(2))).unwrap();
            let got = sk.decrypt(&r).unwrap();
            let t = ctx.plain_modulus() as u128;
            for s in 0..degree {
                let x = |i: u64| values(&ctx, i + 7)[s] as u128;
                let y = |k: usize| vals[k * degree + s] as u128;
                assert_eq!(got[s] as u128, (x(0) * y(0) + x(1) * y(1) + y(2)) % t, "N = {degree}, slot {s}");
            }
        }
    }

    #[test]
    fn long_sums_of_both_kinds_of_terms_equal_fhes_to_the_bit() {
        // 300 terms over 56-bit moduli: the 64-bit limb sums fold into the totals every
        // 128 terms; 3-part terms (products) as well as 2-part ones.
        for (degree, moduli, t_bits, terms) in [(8192, vec![56, 56, 56, 50], 22, 300), (4096, vec![42, 32], 21, 300)] {
            let ctx = ctx(degree, moduli, t_bits);
            let mut sk = SecretKey::generate(&ctx);
            let rk = sk.relin_key().unwrap();
            let fresh: Vec<Ciphertext> = (0..3).map(|i| sk.encrypt(&values(&ctx, i + 11)[..degree]).unwrap()).collect();
            let products: Vec<Ciphertext> =
                fresh.iter().map(|c| Evaluator::new(std::slice::from_ref(&rk)).mul_lazy(c, c).unwrap()).collect();
            let t = ctx.plain_modulus();
            let vals: Vec<u64> = (0..(terms * degree) as u64).map(|i| (i * 2_654_435_761 + 5) % t).collect();
            let rows = ctx.encode_rows(&vals, 0).unwrap();
            let theirs: Vec<bfv::Plaintext> = vals
                .chunks(degree)
                .map(|v| bfv::Plaintext::try_encode(v, bfv::Encoding::simd_at_level(0), &ctx.bfv).unwrap())
                .collect();
            for cts in [&fresh, &products] {
                let at: Vec<&Ciphertext> = (0..terms).map(|k| &cts[k % 3]).collect();
                let want = bfv::dot_product_scalar(at.iter().map(|c| &c.0), theirs.iter()).unwrap();
                let pairs: Vec<_> = at.iter().enumerate().map(|(k, &c)| (c, rows.all().get(k))).collect();
                let got = dot(&ctx, 0, &pairs, None).unwrap();
                let coeffs = |c: &bfv::Ciphertext| c.iter().map(|p| p.coefficients().to_owned()).collect::<Vec<_>>();
                assert_eq!(coeffs(&got.0), coeffs(&want), "N = {degree}, {} parts", cts[0].parts());
            }
        }
    }

    #[test]
    fn sums_of_the_largest_words_are_exact_at_every_width() {
        // Every word q − 1, the largest a checked word can be, in 2- and 3-part terms:
        // (q − 1)² ≡ 1, so each sum of k terms is k mod q. The widest modulus sets the
        // limbs: 52 and 57–58 bits fold the limb sums every 2048, 64 and 32 terms and
        // (57–58) reduce the totals every 8192 and 2048; 59 and 62 bits sum in 128 bits,
        // reducing every 512 and 8 terms. An overflow anywhere changes the count.
        for (widest, terms) in [(52usize, 5000usize), (57, 3 * 8192), (58, 3 * 2048), (59, 3 * 512), (62, 40)] {
            let ctx = ctx(4096, vec![widest, 47], 20);
            let (moduli, _) = ctx.encoder.level(0).unwrap();
            let words: Vec<u64> = moduli.iter().flat_map(|m| std::iter::repeat_n(m.value - 1, 4096)).collect();
            let context = ctx.bfv.context_at_level(0).unwrap();
            for parts in [2, 3] {
                let polys = (0..parts)
                    .map(|_| Poly::try_convert_from(words.clone(), context, true, Representation::Ntt).unwrap())
                    .collect::<Vec<_>>();
                let c = Ciphertext(bfv::Ciphertext::new(polys, &ctx.bfv).unwrap());
                let pairs: Vec<(&Ciphertext, &[u64])> = (0..terms).map(|_| (&c, &words[..])).collect();
                let got = dot(&ctx, 0, &pairs, None).unwrap();
                for poly in got.0.iter() {
                    for (row, m) in poly.coefficients().outer_iter().zip(moduli) {
                        let want = terms as u64 % m.value;
                        assert!(row.iter().all(|&v| v == want), "{widest} bits, {parts} parts, {terms} terms");
                    }
                }
            }
        }
    }

    #[test]
    fn long_sums_reduce_before_128_bits_overflow() {
        // 62-bit moduli leave room for 8 products between reductions of the 128-bit
        // sums: 40 terms reduce four times.
        let ctx = ctx(4096, vec![62, 47], 20);
        let mut sk = SecretKey::generate(&ctx);
        let v = values(&ctx, 3);
        let c = sk.encrypt(&v[..4096]).unwrap();
        let ones = vec![1u64; 40 * 4096];
        let rows = ctx.encode_rows(&ones, 0).unwrap();
        let terms: Vec<_> = (0..40).map(|k| (&c, rows.all().get(k))).collect();
        let r = dot(&ctx, 0, &terms, None).unwrap();
        let t = ctx.plain_modulus();
        let got = sk.decrypt(&r).unwrap();
        assert!(got.iter().zip(&v).all(|(&g, &x)| g == 40 * x % t));
    }

    #[test]
    fn encoding_refuses_what_is_not_a_plaintext() {
        let ctx = ctx(4096, vec![42, 32], 21);
        assert!(ctx.encode_rows(&[1u64; 100], 0).is_err(), "not a multiple of N");
        assert!(ctx.encode_rows(&vec![ctx.plain_modulus(); 4096], 0).is_err(), "not below t");
        assert!(ctx.encode_rows(&vec![0u64; 4096], 2).is_err(), "no such level");
    }

    #[test]
    fn stored_rows_come_back_whole_and_below_their_moduli_or_not_at_all() {
        let ctx = ctx(4096, vec![42, 32], 21);
        let rows = ctx.encode_rows(&values(&ctx, 5), 0).unwrap();
        let back = PlainRows::from_words(&ctx, 0, rows.words().to_vec()).unwrap();
        assert_eq!(back.words(), rows.words());
        assert_eq!(back.all().len(), 3);
        // A plaintext cut short, a level that does not exist.
        let short = rows.words()[..rows.words().len() - 1].to_vec();
        assert!(PlainRows::from_words(&ctx, 0, short).unwrap_err().to_string().contains("not a multiple"));
        assert!(PlainRows::from_words(&ctx, 2, rows.words().to_vec()).is_err());
        // A word of the second plaintext's second row at or above its 32-bit modulus.
        let q1 = ctx.bfv.moduli()[1];
        for bad in [q1, u64::MAX] {
            let mut words = rows.words().to_vec();
            words[2 * 4096 + 4096 + 17] = bad;
            let e = PlainRows::from_words(&ctx, 0, words).unwrap_err().to_string();
            assert!(e.contains("stored plaintext 1") && e.contains(&q1.to_string()), "{e}");
        }
    }
}
