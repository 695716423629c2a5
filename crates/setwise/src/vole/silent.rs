//! Silent VOLE over GF(2^128) from dual LPN with regular noise (Boyle, Couteau, Gilboa,
//! Ishai, Kohl, Scholl, CCS 2019): the sender ends with Δ and B, the receiver with A and
//! C = B + A·Δ, all of length k, with A and B pseudorandom.
//!
//! 1. The receiver picks, per noise block j < t, a position α_j in the block's 2^d slots
//!    and a nonzero y_j. The noisy VOLE gives it z_j and the sender z_j + y_j·Δ.
//! 2. A punctured PRF per block, with value z_j + y_j·Δ at the puncture: the sender has
//!    every leaf b; the receiver has the same leaves except b_α + z_j + y_j·Δ at α_j,
//!    and adds z_j there. So c = b + e·Δ, with e the sparse vector of the y_j.
//! 3. Both compress with the expand-convolute code G ([`super::code`]): B = G·b,
//!    C = G·c, A = G·e. Dual LPN makes A pseudorandom.
//!
//! Parameters: N = t·2^d ≥ 2k noisy positions (libOTe's scaler 2 for expand-convolute)
//! and t ≥ [`NOISE_WEIGHT`] = 546 blocks: (1 − δ)^t ≤ 2^-128 with δ = 0.15, the bias of a
//! linear test over a large field for libOTe's estimate δ of `ExConv7x24`'s
//! minimum-distance ratio (docs/protocols/vole.md says why not libOTe's t). setwise takes
//! d so that t lands in 546..1092, which only adds noise.
//!
//! Malicious (`Security::Malicious`): the noisy VOLE checks the receiver
//! ([`super::noisy`]), the PPRFs' OTs are KOS's, and the receiver checks the sparse VOLE
//! before the code, as Ferret does (Yang, Weng, Lan, Zhang, Wang, CCS 2020, Fig. 6, the
//! check of Wolverine): one more noisy entry (y′, z′ | z′ + y′·Δ); the receiver sends a
//! seed of challenges χ_i and x′ = Σ χ_i·e_i + y′, and the sender answers
//! H(Σ χ_i·b_i + z′ + y′·Δ + x′·Δ), which equals H(Σ χ_i·c_i + z′) only if c = b + e·Δ
//! (but with probability 2^-128 per try). A sender that breaks the trees passes with
//! probability 2^-ℓ when its break depends on ℓ bits of the noise positions, and then
//! learns them: the leakage Ferret's LPN assumption allows. The answer is a hash, so a
//! receiver sending a wrong x′ learns nothing of Δ from it. Cost: 2 KiB of noisy VOLE,
//! one round trip and one pass over the 2k positions.
use super::code::{CONV_WIDTH, ExConv};
use super::messages::{SparseAnswer, SparseChallenge};
use super::noisy::{noisy_receive, noisy_send};
use super::pprf::{MAX_DEPTH, pprf_receive_into, pprf_send_told};
use super::{Tell, untold};
use crate::crypto::dst::{self, Domain, SessionId};
use crate::crypto::prg::Prg;
use crate::crypto::rng::fill_os;
use crate::crypto::security::Security;
use crate::error::{Deviation, Error, Result};
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::wire::msg::Message;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

/// The least number of noise blocks (the regular noise weight t) for λ = 128 against
/// linear tests over GF(2^128): a test of the dual code's minimum weight δ·N sees noise
/// only when some block's noise falls in its support, so its bias is about (1 − δ)^t
/// (not the binary (1 − 2δ)^t, which gives 248), and (1 − δ)^t ≤ 2^-128 for
/// δ = [`MIN_DISTANCE_RATIO`] needs t ≥ 546.
pub const NOISE_WEIGHT: usize = 546;
/// The minimum-distance ratio δ assumed for the expand-convolute code: libOTe's estimate
/// for `ExConv7x24` in the version volePSI builds (d5586711, `ConfigureCode.cpp`; libOTe
/// raised it to 0.25 in 2025 without a stated reason).
pub const MIN_DISTANCE_RATIO: f64 = 0.15;
/// Noisy positions per output (libOTe's scaler for expand-convolute codes).
pub const EXPANSION: usize = 2;

/// The shape of one silent VOLE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SilentParams {
    /// Outputs k.
    pub outputs: usize,
    /// Noise blocks t, one GGM tree each.
    pub trees: usize,
    /// Depth d of each tree (2^d positions per block).
    pub depth: usize,
}

impl SilentParams {
    /// The parameters for `k` outputs.
    pub fn for_outputs(k: usize) -> Result<Self> {
        let target = (EXPANSION * k).max(k + 2 * (CONV_WIDTH + 1)).max(2 * NOISE_WEIGHT);
        let depth = (target / NOISE_WEIGHT).ilog2() as usize;
        if k == 0 || depth > MAX_DEPTH {
            return Err(Error::params(
                "vole_outputs",
                format!("silent VOLE of {k} outputs: must be 1..=2^{}", MAX_DEPTH + 6),
            ));
        }
        Ok(Self { outputs: k, trees: target.div_ceil(1 << depth), depth })
    }

    /// Noisy positions N = t·2^d.
    pub fn positions(&self) -> usize {
        self.trees << self.depth
    }

    fn code(&self, sid: SessionId) -> Result<ExConv> {
        let seed = Domain::new(dst::VOLE_CODE_SEED, sid).hash64(b"expand-convolute");
        ExConv::new(self.outputs, self.positions(), u128::from_le_bytes(seed[..16].try_into().expect("16 bytes")))
    }
}

/// The sender's half: Δ and B, wiped when dropped.
pub struct VoleSender {
    /// The global key Δ.
    pub delta: Gf128,
    /// B, with C = B + A·Δ.
    pub b: Vec<Gf128>,
}

impl Drop for VoleSender {
    fn drop(&mut self) {
        self.delta.zeroize();
        self.b.zeroize();
    }
}

impl ZeroizeOnDrop for VoleSender {}

/// The receiver's half: A and C, side by side as the code left them (separating them
/// would cost two more output-sized buffers, and fresh pages are slow); wiped when
/// dropped.
pub struct VoleReceiver {
    /// `[A_i, C_i]` for each output i.
    pairs: Vec<[Gf128; 2]>,
}

impl Drop for VoleReceiver {
    fn drop(&mut self) {
        self.pairs.zeroize();
    }
}

impl ZeroizeOnDrop for VoleReceiver {}

impl VoleReceiver {
    /// Outputs k.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there are no outputs (never, for a VOLE that ran).
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// `[A_i, C_i]` for each output i, with C = B + A·Δ.
    pub fn pairs(&self) -> &[[Gf128; 2]] {
        &self.pairs
    }

    /// A and C as two vectors (the caller wipes them).
    pub fn split(self) -> (Vec<Gf128>, Vec<Gf128>) {
        self.pairs.iter().map(|&[a, c]| (a, c)).unzip()
    }
}

/// The session id of a sub-protocol, so the noisy VOLE's and the PPRF's OTs hash in
/// separate domains.
fn sub(sid: SessionId, what: &[u8]) -> SessionId {
    sid.sub(dst::VOLE_SUBSESSION, what)
}

fn random_element() -> Gf128 {
    let mut b = [0u8; 16];
    fill_os(&mut b);
    Gf128::from_bytes(b)
}

/// H(V) of the sparse check.
fn sparse_answer(sid: SessionId, v: Gf128) -> SparseAnswer {
    SparseAnswer(Domain::new(dst::VOLE_SPARSE_CHECK, sid).hash32(&v.to_bytes()))
}

/// Noisy entries beyond the trees' at `security`: y′ of the sparse check.
fn extra(security: Security) -> usize {
    usize::from(security == Security::Malicious)
}

/// The sender of a silent VOLE of `k` outputs, semi-honest.
pub fn silent_send(ch: &mut impl Channel, sid: SessionId, k: usize) -> Result<VoleSender> {
    silent_send_told(ch, sid, k, Security::SemiHonest, &untold)
}

/// [`silent_send`] withstanding `security`, telling `tell` of the GGM trees grown, the
/// code's rows and its outputs (the steps that take seconds at 2^24).
pub fn silent_send_told(
    ch: &mut impl Channel,
    sid: SessionId,
    k: usize,
    security: Security,
    tell: Tell,
) -> Result<VoleSender> {
    let p = SilentParams::for_outputs(k)?;
    let code = p.code(sid)?;
    let delta = Zeroizing::new(random_element());
    let shifts = noisy_send(ch, sub(sid, b"noisy"), *delta, p.trees + extra(security), security)?;
    let mut b = Zeroizing::new(pprf_send_told(ch, sub(sid, b"pprf"), p.depth, &shifts[..p.trees], security, tell)?);
    if security == Security::Malicious {
        let challenge = SparseChallenge::recv(ch, "receiving the sparse VOLE check", ())?;
        let [seed, x] = Gf128::pair_from_bytes(challenge.0);
        let v = Prg::new(seed.0).combine(b.len(), |i| b[i]) + shifts[p.trees] + x * *delta;
        sparse_answer(sid, v).send(ch, "sending the sparse VOLE check")?;
    }
    let mut b = std::mem::take(&mut *b);
    code.dual_encode_told(&mut b, tell);
    Ok(VoleSender { delta: *delta, b })
}

/// The receiver of a silent VOLE of `k` outputs, semi-honest.
pub fn silent_receive(ch: &mut impl Channel, sid: SessionId, k: usize) -> Result<VoleReceiver> {
    silent_receive_told(ch, sid, k, Security::SemiHonest, &untold)
}

/// [`silent_receive`] withstanding `security`, telling `tell` as [`silent_send_told`]
/// does.
pub fn silent_receive_told(
    ch: &mut impl Channel,
    sid: SessionId,
    k: usize,
    security: Security,
    tell: Tell,
) -> Result<VoleReceiver> {
    let p = SilentParams::for_outputs(k)?;
    let code = p.code(sid)?;
    // The noise: positions and values (the VOLE's secret input), wiped when dropped.
    let mut points = Zeroizing::new(Vec::with_capacity(p.trees));
    let mut ys = Zeroizing::new(Vec::with_capacity(p.trees + 1));
    for _ in 0..p.trees {
        let mut r = [0u8; 8];
        fill_os(&mut r);
        points.push((u64::from_le_bytes(r) % (1u64 << p.depth)) as usize);
        ys.push(loop {
            let y = random_element();
            if y != Gf128::ZERO {
                break y;
            }
        });
    }
    if security == Security::Malicious {
        ys.push(random_element()); // y′ of the sparse check
    }
    let zs = noisy_receive(ch, sub(sid, b"noisy"), &ys, security)?;
    // A and C side by side, lane 0 and lane 1, so that the code's random reads fetch
    // both at once.
    let mut ac = Zeroizing::new(vec![[Gf128::ZERO; 2]; p.positions()]);
    pprf_receive_into(ch, sub(sid, b"pprf"), p.depth, &points, &mut ac, |o, leaf| o[1] = leaf, security, tell)?;
    for (j, ((alpha, y), z)) in points.iter().zip(ys.iter()).zip(zs.iter()).enumerate() {
        let at = (j << p.depth) + alpha;
        ac[at][1] += *z;
        ac[at][0] = *y;
    }
    if security == Security::Malicious {
        let seed = random_element(); // any 16 bytes: the challenges' seed
        let chi = Prg::new(seed.0);
        // x = Σ χ_i·e_i over the t noise positions.
        let x = points
            .iter()
            .zip(ys.iter())
            .enumerate()
            .fold(Gf128::ZERO, |acc, (j, (alpha, y))| acc + Gf128(chi.blocks((j << p.depth) + alpha, 1)[0]) * *y);
        let (y1, z1) = (ys[p.trees], zs[p.trees]);
        SparseChallenge(Gf128::pair_to_bytes([seed, x + y1])).send(ch, "sending the sparse VOLE check")?;
        let ours = sparse_answer(sid, chi.combine(ac.len(), |i| ac[i][1]) + z1);
        if SparseAnswer::recv(ch, "receiving the sparse VOLE check", ())? != ours {
            return Err(Deviation::FailedCheck {
                what: "the sparse VOLE (punctured PRFs)",
                meaning: "the sender's GGM trees or values are inconsistent with its Δ",
            }
            .into());
        }
    }
    let mut pairs = std::mem::take(&mut *ac);
    code.dual_encode_told(&mut pairs, tell);
    Ok(VoleReceiver { pairs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_noise_weight_meets_its_bound() {
        let bits = |t: usize| -(t as f64) * (1.0 - MIN_DISTANCE_RATIO).log2();
        assert!(bits(NOISE_WEIGHT) >= 128.0 && bits(NOISE_WEIGHT - 1) < 128.0);
        for k in [1, 100, 1 << 10, 1_153_434, 1 << 24, 18_454_938] {
            let p = SilentParams::for_outputs(k).unwrap();
            assert!((NOISE_WEIGHT..2 * NOISE_WEIGHT).contains(&p.trees), "k = {k}: t = {}", p.trees);
            assert!(p.positions() >= 2 * k && p.positions() >= k + 2 * (CONV_WIDTH + 1), "k = {k}");
        }
    }
}
