//! Punctured PRFs from GGM trees (one per noise block of silent VOLE).
//!
//! The sender grows `t` trees of depth d from random roots with the length-doubling
//! generator G(s) = (AES_k0(s) + s, AES_k1(s) + s) under fixed keys from the session, and
//! for each level sends the sums of its left and of its right children, each masked by
//! one random OT. A tree grows in place in its slice of the output: level l's 2^l nodes
//! are its first 2^l entries, and node i's children are i (left) and i + 2^l (right), so
//! leaf α is reached by taking side bit l of α at level l. The receiver, punctured at α in a tree, chooses at each level the side
//! its path does not take: with that side's sum and the nodes it already knows it
//! recovers the one node off its path, so it ends knowing every leaf but α. Finally the
//! sender sends c = v + Σ leaves and the receiver sets its leaf α to c + Σ_{i≠α} leaves =
//! s_α + v. Cost: t·d random OTs (IKNP), 2·t·d + t field elements sender → receiver.

use super::messages::{PPRF_LEAF_SUMS, PPRF_LEVEL_SUMS};
use super::{Tell, untold};
use crate::crypto::dst::{self, Domain, SessionId};
use crate::crypto::rng::fill_os;
use crate::crypto::security::Security;
use crate::error::{Error, Result};
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::ot::{extend_receive, extend_send};
use aes::Aes128;
use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use zeroize::Zeroizing;

/// Deepest tree accepted (2^24 leaves per tree).
pub const MAX_DEPTH: usize = 24;

/// What a PPRF's progress counts.
const TREES: &str = "GGM trees";

/// The length-doubling generator of the trees.
struct Ggm([Aes128; 2]);

/// Nodes encrypted per AES call (on the stack).
const BATCH: usize = 64;

impl Ggm {
    fn new(sid: SessionId) -> Self {
        let k = Domain::new(dst::VOLE_GGM_KEY, sid).hash64(b"fixed AES keys");
        let key = |i: usize| Aes128::new(&Array(k[16 * i..16 * (i + 1)].try_into().expect("16 bytes")));
        Self([key(0), key(1)])
    }

    /// Grows the level in `tree[..half]` into the next, in `tree[..2 * half]`: node i's
    /// children at i and i + half. Returns the sums of the left and of the right children.
    fn expand(&self, tree: &mut [u128], half: usize) -> (u128, u128) {
        let (parents, right) = tree[..2 * half].split_at_mut(half);
        let (mut left_sum, mut right_sum) = (0u128, 0u128);
        let mut buf = [Array([0u8; 16]); BATCH];
        for (ps, rs) in parents.chunks_mut(BATCH).zip(right.chunks_mut(BATCH)) {
            let buf = &mut buf[..ps.len()];
            let encrypt = |aes: &Aes128, buf: &mut [Array<u8, _>]| {
                for (b, p) in buf.iter_mut().zip(ps.iter()) {
                    *b = Array(p.to_le_bytes());
                }
                aes.encrypt_blocks(buf);
            };
            encrypt(&self.0[1], buf);
            for ((r, p), b) in rs.iter_mut().zip(ps.iter()).zip(buf.iter()) {
                *r = u128::from_le_bytes(b.0) ^ p;
                right_sum ^= *r;
            }
            // The left children overwrite their parents, last.
            encrypt(&self.0[0], buf);
            for (p, b) in ps.iter_mut().zip(buf.iter()) {
                *p ^= u128::from_le_bytes(b.0);
                left_sum ^= *p;
            }
        }
        (left_sum, right_sum)
    }
}

fn check_depth(depth: usize) -> Result<()> {
    if depth == 0 || depth > MAX_DEPTH {
        return Err(Error::params("pprf_depth", format!("PPRF depth {depth}: must be 1..={MAX_DEPTH}")));
    }
    Ok(())
}

/// The sender: trees of `depth` (2^depth leaves each), tree j punctured where the
/// receiver chose and shifted there by `values[j]`. Returns every tree's leaves, tree
/// after tree. Semi-honest.
pub fn pprf_send(ch: &mut impl Channel, sid: SessionId, depth: usize, values: &[Gf128]) -> Result<Vec<Gf128>> {
    pprf_send_told(ch, sid, depth, values, Security::SemiHonest, &untold)
}

/// [`pprf_send`] with random OTs withstanding `security`, telling `tell` of each tree
/// grown. (A malicious sender's trees are checked by the silent VOLE, on the leaves.)
pub fn pprf_send_told(
    ch: &mut impl Channel,
    sid: SessionId,
    depth: usize,
    values: &[Gf128],
    security: Security,
    tell: Tell,
) -> Result<Vec<Gf128>> {
    check_depth(depth)?;
    let t = values.len();
    let ots = extend_send(ch, sid, t * depth, security)?;
    let ggm = Ggm::new(sid);
    // Each tree grows in place in its own slice of the output.
    let mut leaves = vec![0u128; t << depth];
    let grown = AtomicU64::new(0);
    // The roots are drawn before the parallel loop, in tree order, so that a seeded run
    // (a staged run's replay, crate::crypto::rng::seeded) draws the same ones again.
    let mut roots = Zeroizing::new(vec![0u8; 16 * t]);
    fill_os(&mut roots);
    let per_tree: Vec<(Vec<[u8; 16]>, [u8; 16])> = leaves
        .par_chunks_mut(1 << depth)
        .zip(values)
        .zip(roots.par_chunks(16))
        .enumerate()
        .map(|(j, ((tree, v), root))| {
            tree[0] = u128::from_le_bytes(root.try_into().expect("16 bytes"));
            let mut sums = Vec::with_capacity(2 * depth);
            for l in 0..depth {
                let (left, right) = ggm.expand(tree, 1 << l);
                let [m0, m1] = ots[j * depth + l];
                sums.push((left ^ m0).to_le_bytes());
                sums.push((right ^ m1).to_le_bytes());
            }
            let total = tree.iter().fold(v.0, |acc, x| acc ^ x);
            tell(TREES, grown.fetch_add(1, Ordering::Relaxed) + 1, t as u64);
            (sums, total.to_le_bytes())
        })
        .collect();
    let level_sums: Vec<[u8; 16]> = per_tree.iter().flat_map(|(s, _)| s.iter().copied()).collect();
    PPRF_LEVEL_SUMS.send(ch, &level_sums, "sending the PPRF")?;
    let leaf_sums: Vec<[u8; 16]> = per_tree.iter().map(|(_, l)| *l).collect();
    PPRF_LEAF_SUMS.send(ch, &leaf_sums, "sending the PPRF")?;
    Ok(leaves.into_iter().map(Gf128).collect())
}

/// The receiver, punctured at `points[j]` in tree j: every leaf of the sender's trees,
/// except at each punctured leaf the sender's leaf plus its value. Semi-honest.
pub fn pprf_receive(ch: &mut impl Channel, sid: SessionId, depth: usize, points: &[usize]) -> Result<Vec<Gf128>> {
    let mut leaves = vec![Gf128::ZERO; points.len() << depth];
    pprf_receive_into(ch, sid, depth, points, &mut leaves, |o, leaf| *o = leaf, Security::SemiHonest, &untold)?;
    Ok(leaves)
}

/// [`pprf_receive`] into `out` (t·2^depth entries): `set(&mut out[i], leaf i)`, so that a
/// caller can place the leaves beside other data; random OTs withstanding `security`.
#[allow(clippy::too_many_arguments)] // the tree's shape, where its leaves go, and how
pub fn pprf_receive_into<T: Send>(
    ch: &mut impl Channel,
    sid: SessionId,
    depth: usize,
    points: &[usize],
    out: &mut [T],
    set: impl Fn(&mut T, Gf128) + Sync,
    security: Security,
    tell: Tell,
) -> Result<()> {
    check_depth(depth)?;
    if let Some(&p) = points.iter().find(|&&p| p >> depth != 0) {
        return Err(Error::params("pprf_point", format!("PPRF point {p} is outside a tree of 2^{depth} leaves")));
    }
    let t = points.len();
    assert_eq!(out.len(), t << depth, "a leaf per output");
    // At level l the path to α takes side bit l of α.
    let bit = |alpha: usize, l: usize| (alpha >> l) & 1;
    let choices =
        Zeroizing::new(points.iter().flat_map(|&a| (0..depth).map(move |l| bit(a, l) == 0)).collect::<Vec<bool>>());
    let keys = extend_receive(ch, sid, &choices, security)?;
    let sums = PPRF_LEVEL_SUMS.recv_all(ch, 2 * t * depth, "receiving the PPRF")?;
    let leaf_sums = PPRF_LEAF_SUMS.recv_all(ch, t, "receiving the PPRF")?;
    let ggm = Ggm::new(sid);
    let grown = AtomicU64::new(0);
    out.par_chunks_mut(1 << depth).enumerate().for_each_init(
        || Zeroizing::new(vec![0u128; 1 << depth]),
        |tree, (j, out)| {
            let alpha = points[j];
            // The node on the path is unknown (kept at zero): its children come out wrong
            // and are replaced, the one off the path from the sender's masked sum.
            tree[0] = 0;
            let mut path = 0usize;
            for l in 0..depth {
                let half = 1 << l;
                let (left, right) = ggm.expand(tree, half);
                let a = bit(alpha, l);
                let (on, off) = (path + a * half, path + (1 - a) * half);
                let ot = j * depth + l;
                let known = if a == 0 { right } else { left };
                // The side's sum as computed holds a wrong child at `off`: take it out.
                let sent = u128::from_le_bytes(sums[2 * ot + (1 - a)]) ^ keys[ot];
                tree[off] ^= sent ^ known;
                tree[on] = 0;
                path = on;
            }
            let others = tree.iter().fold(0u128, |acc, x| acc ^ x);
            tree[alpha] = u128::from_le_bytes(leaf_sums[j]) ^ others;
            for (o, x) in out.iter_mut().zip(tree.iter()) {
                set(o, Gf128(*x));
            }
            tell(TREES, grown.fetch_add(1, Ordering::Relaxed) + 1, t as u64);
        },
    );
    Ok(())
}
