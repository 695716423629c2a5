//! Base OT: the "simplest OT" of Chou and Orlandi (Latincrypt 2015) over ristretto255,
//! batched: one sender point A for all OTs.
//!
//! Sender: a, A = a·G. Receiver (choice c_i): B_i = b_i·G + c_i·A. Keys:
//! k0_i = H(i, A, B_i, a·B_i), k1_i = H(i, A, B_i, a·(B_i − A)); the receiver gets
//! k_{c_i} = H(i, A, B_i, b_i·A). Semi-honest secure under CDH with H a random oracle
//! (ristretto255 has prime order, so there is no small-subgroup issue).

use super::Block;
use super::messages::{BaseReceiverPoints, BaseSenderPoint};
use crate::crypto::dst::{self, Domain, SessionId};
use crate::crypto::ristretto::{Encoded, SecretScalar, decode};
use crate::error::{Error, Result};
use crate::net::Channel;
use crate::wire::msg::Message;
use curve25519_dalek::constants::RISTRETTO_BASEPOINT_TABLE;
use curve25519_dalek::ristretto::RistrettoPoint;
use rayon::prelude::*;
use subtle::{Choice, ConditionallySelectable};

fn key(domain: &Domain, i: usize, a: &Encoded, b: &Encoded, shared: &RistrettoPoint) -> Block {
    let mut h = domain.hasher();
    h.update(&(i as u64).to_le_bytes());
    h.update(a);
    h.update(b);
    h.update(shared.compress().as_bytes());
    u128::from_le_bytes(h.finalize().as_bytes()[..16].try_into().expect("16 bytes"))
}

/// The base-OT sender: `n` OTs; returns the key pairs (k0_i, k1_i).
pub fn base_send(ch: &mut impl Channel, sid: SessionId, n: usize) -> Result<Vec<[Block; 2]>> {
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

/// The base-OT receiver with `choices`; returns k_{c_i} for each.
pub fn base_receive(ch: &mut impl Channel, sid: SessionId, choices: &[bool]) -> Result<Vec<Block>> {
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
