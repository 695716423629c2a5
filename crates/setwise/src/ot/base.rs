//! Base OT over ristretto255, batched: one sender point A for all OTs.
//!
//! Semi-honest: the "simplest OT" of Chou and Orlandi (Latincrypt 2015). Sender: a,
//! A = a·G. Receiver (choice c_i): B_i = b_i·G + c_i·A. Keys: k0_i = H(i, A, B_i, a·B_i),
//! k1_i = H(i, A, B_i, a·(B_i − A)); the receiver gets k_{c_i} = H(i, A, B_i, b_i·A).
//! Secure under CDH with H a random oracle (ristretto255 has prime order, so there is no
//! small-subgroup issue); its simulation against a malicious receiver is disputed
//! (Genç, Iovino, Rial, ePrint 2017/370), so malicious runs use the next one.
//!
//! Malicious: the endemic OT of Masny and Rindal (CCS 2019, Fig. 4 with a 2-round key
//! agreement; libOTe's `MasnyRindal`), UC-secure under CDH with H_G a programmable random
//! oracle to the group. Receiver (choice c_i): sk_i, a random point r_{1−c}, and
//! r_c = sk_i·G − H_G(i, r_{1−c}); it sends (r_0, r_1). Sender: a, A = a·G; with
//! pk_b = r_b + H_G(i, r_{1−b}), the keys are k_b = H(i, A, r_0 ‖ r_1, a·pk_b); the receiver
//! gets k_c = H(i, A, r_0 ‖ r_1, sk_i·A).

use super::Block;
use super::messages::{BaseReceiverPoints, BaseSenderPoint};
use crate::crypto::dst::{self, Domain, SessionId};
use crate::crypto::ristretto::{Encoded, SecretScalar, decode};
use crate::crypto::rng::fill_os;
use crate::crypto::security::Security;
use crate::error::{Error, Result};
use crate::net::Channel;
use crate::wire::msg::Message;
use curve25519_dalek::constants::RISTRETTO_BASEPOINT_TABLE;
use curve25519_dalek::ristretto::RistrettoPoint;
use rayon::prelude::*;
use subtle::{Choice, ConditionallySelectable};
use zeroize::Zeroizing;

fn key(domain: &Domain, i: usize, a: &Encoded, b: &[u8], shared: &RistrettoPoint) -> Block {
    let mut h = domain.hasher();
    h.update(&(i as u64).to_le_bytes());
    h.update(a);
    h.update(b);
    h.update(shared.compress().as_bytes());
    u128::from_le_bytes(h.finalize().as_bytes()[..16].try_into().expect("16 bytes"))
}

/// The base-OT sender: `n` OTs withstanding `security`; returns the key pairs (k0_i, k1_i),
/// wiped when dropped.
pub fn base_send(
    ch: &mut impl Channel,
    sid: SessionId,
    n: usize,
    security: Security,
) -> Result<Zeroizing<Vec<[Block; 2]>>> {
    match security {
        Security::SemiHonest => co_send(ch, sid, n),
        Security::Malicious => mr_send(ch, sid, n),
    }
    .map(Zeroizing::new)
}

/// The base-OT receiver with `choices`, withstanding `security`; returns k_{c_i} for each,
/// wiped when dropped.
pub fn base_receive(
    ch: &mut impl Channel,
    sid: SessionId,
    choices: &[bool],
    security: Security,
) -> Result<Zeroizing<Vec<Block>>> {
    match security {
        Security::SemiHonest => co_receive(ch, sid, choices),
        Security::Malicious => mr_receive(ch, sid, choices),
    }
    .map(Zeroizing::new)
}

fn co_send(ch: &mut impl Channel, sid: SessionId, n: usize) -> Result<Vec<[Block; 2]>> {
    let domain = Domain::new(dst::OT_BASE_KEY, sid);
    let a = SecretScalar::random();
    let big_a = RISTRETTO_BASEPOINT_TABLE * a.expose();
    let a_enc = big_a.compress().0;
    BaseSenderPoint { encoded: a_enc, point: big_a }.send(ch, "sending base OT")?;
    let bs = BaseReceiverPoints::recv(ch, "receiving base OT", n)?.0;
    bs.par_iter()
        .enumerate()
        .map(|(i, b)| {
            let point = decode(b).ok_or(Error::InvalidPoint { what: "BaseOtPoints", index: i })?;
            let k0 = key(&domain, i, &a_enc, b, &(point * a.expose()));
            let k1 = key(&domain, i, &a_enc, b, &((point - big_a) * a.expose()));
            Ok([k0, k1])
        })
        .collect()
}

fn co_receive(ch: &mut impl Channel, sid: SessionId, choices: &[bool]) -> Result<Vec<Block>> {
    let domain = Domain::new(dst::OT_BASE_KEY, sid);
    let BaseSenderPoint { encoded: a_enc, point: big_a } = BaseSenderPoint::recv(ch, "receiving base OT", ())?;
    let secrets: Vec<SecretScalar> = choices.iter().map(|_| SecretScalar::random()).collect();
    let bs: Vec<Encoded> = secrets
        .par_iter()
        .zip(choices)
        .map(|(b, &c)| {
            let gb = RISTRETTO_BASEPOINT_TABLE * b.expose();
            // Constant time in the choice bit.
            let p = RistrettoPoint::conditional_select(&gb, &(gb + big_a), Choice::from(u8::from(c)));
            p.compress().0
        })
        .collect();
    let msg = BaseReceiverPoints(bs);
    msg.send(ch, "sending base OT")?;
    let bs = msg.0;
    Ok(secrets
        .par_iter()
        .zip(&bs)
        .enumerate()
        .map(|(i, (b, be))| key(&domain, i, &a_enc, be, &(big_a * b.expose())))
        .collect())
}

/// H_G(i, r): Masny–Rindal's random oracle to the group.
fn to_group(domain: &Domain, i: usize, r: &Encoded) -> RistrettoPoint {
    let mut input = [0u8; 40];
    input[..8].copy_from_slice(&(i as u64).to_le_bytes());
    input[8..].copy_from_slice(r);
    RistrettoPoint::from_uniform_bytes(&domain.hash64(&input))
}

fn mr_send(ch: &mut impl Channel, sid: SessionId, n: usize) -> Result<Vec<[Block; 2]>> {
    let (keys, to) = (Domain::new(dst::OT_BASE_KEY_MALICIOUS, sid), Domain::new(dst::OT_BASE_TO_GROUP, sid));
    // The pairs travel as 2n points, each checked before the sender's point goes out.
    let flat = BaseReceiverPoints::recv(ch, "receiving base OT", 2 * n)?.0;
    let pairs = flat.as_chunks::<2>().0;
    let points: Vec<[RistrettoPoint; 2]> = pairs
        .par_iter()
        .enumerate()
        .map(|(i, [r0, r1])| {
            let p = |r: &Encoded, at: usize| {
                decode(r).ok_or(Error::InvalidPoint { what: BaseReceiverPoints::NAME, index: 2 * i + at })
            };
            Ok([p(r0, 0)? + to_group(&to, i, r1), p(r1, 1)? + to_group(&to, i, r0)])
        })
        .collect::<Result<_>>()?;
    let a = SecretScalar::random();
    let big_a = RISTRETTO_BASEPOINT_TABLE * a.expose();
    let a_enc = big_a.compress().0;
    BaseSenderPoint { encoded: a_enc, point: big_a }.send(ch, "sending base OT")?;
    Ok(pairs
        .par_iter()
        .zip(&points)
        .enumerate()
        .map(|(i, (pair, pks))| pks.map(|pk| key(&keys, i, &a_enc, pair.as_flattened(), &(pk * a.expose()))))
        .collect())
}

fn mr_receive(ch: &mut impl Channel, sid: SessionId, choices: &[bool]) -> Result<Vec<Block>> {
    let (keys, to) = (Domain::new(dst::OT_BASE_KEY_MALICIOUS, sid), Domain::new(dst::OT_BASE_TO_GROUP, sid));
    let secrets: Vec<SecretScalar> = choices.iter().map(|_| SecretScalar::random()).collect();
    // Drawn before the parallel loop, in order, so that a seeded run draws them again.
    let mut wides = Zeroizing::new(vec![0u8; 64 * choices.len()]);
    fill_os(&mut wides);
    let pairs: Vec<[Encoded; 2]> = secrets
        .par_iter()
        .zip(choices)
        .zip(wides.par_chunks(64))
        .enumerate()
        .map(|(i, ((sk, &c), wide))| {
            let wide: &[u8; 64] = wide.try_into().expect("64 bytes");
            let other = RistrettoPoint::from_uniform_bytes(wide).compress().0;
            let chosen = (RISTRETTO_BASEPOINT_TABLE * sk.expose() - to_group(&to, i, &other)).compress().0;
            // Constant time in the choice bit: (r_0, r_1) = (chosen, other), swapped if c.
            let (mut r0, mut r1) = (chosen, other);
            let swap = Choice::from(u8::from(c));
            for (x, y) in r0.iter_mut().zip(r1.iter_mut()) {
                u8::conditional_swap(x, y, swap);
            }
            [r0, r1]
        })
        .collect();
    BaseReceiverPoints(pairs.as_flattened().to_vec()).send(ch, "sending base OT")?;
    let BaseSenderPoint { encoded: a_enc, point: big_a } = BaseSenderPoint::recv(ch, "receiving base OT", ())?;
    Ok(secrets
        .par_iter()
        .zip(&pairs)
        .enumerate()
        .map(|(i, (sk, pair))| key(&keys, i, &a_enc, pair.as_flattened(), &(big_a * sk.expose())))
        .collect())
}
