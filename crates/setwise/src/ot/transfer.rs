//! Chosen-message and one-sided OT from random OTs with chosen choice bits (IKNP
//! outputs): the sender masks each message with a pad expanded from the random OT
//! message, m_b ⊕ PRG(k_b); the receiver can open only the pad of its choice.
//!
//! One-sided OT sends only the choice-1 message: a receiver with choice 0 gets nothing
//! (mqRPMT uses it to hand over exactly the items the membership bits select).

use super::Block;
use super::messages::{FRAME_BYTES, masked};
use crate::crypto::dst::{self, Domain, SessionId};
use crate::error::Result;
use crate::net::Channel;
use rayon::prelude::*;

/// XORs into `buf` the pad of OT `index` under `key`.
fn xor_pad(hasher: &blake3::Hasher, key: Block, index: usize, buf: &mut [u8]) {
    let mut h = hasher.clone();
    h.update(&key.to_le_bytes());
    h.update(&(index as u64).to_le_bytes());
    let mut xof = h.finalize_xof();
    let mut pad = [0u8; 64];
    for chunk in buf.chunks_mut(64) {
        xof.fill(&mut pad[..chunk.len()]);
        chunk.iter_mut().zip(&pad).for_each(|(b, p)| *b ^= p);
    }
}

/// Sends `ways` masked messages of `len` bytes per OT, in frames.
fn send_masked(
    ch: &mut impl Channel,
    sid: SessionId,
    ot: &[[Block; 2]],
    messages: &[u8],
    len: usize,
    ways: &[usize],
) -> Result<()> {
    assert!(len > 0, "OT messages have at least one byte");
    let per = ways.len() * len;
    assert_eq!(messages.len(), ot.len() * per, "{} messages of {per} bytes", ot.len());
    let hasher = Domain::new(dst::OT_MESSAGE_PAD, sid).hasher();
    let stream = masked(per);
    let per_frame = stream.per_frame;
    for (f, (keys, msgs)) in ot.chunks(per_frame).zip(messages.chunks(per_frame * per)).enumerate() {
        let mut masked = msgs.to_vec();
        masked.par_chunks_mut(per).zip(keys).enumerate().for_each(|(i, (m, k))| {
            for (w, &which) in ways.iter().enumerate() {
                xor_pad(&hasher, k[which], f * per_frame + i, &mut m[w * len..(w + 1) * len]);
            }
        });
        stream.send_encoded(ch, keys.len(), &masked, (f * per_frame, ot.len()), "sending OT messages")?;
    }
    Ok(())
}

/// Receives `n` records of `ways·len` bytes and unmasks the `way` each choice selects.
fn receive_masked(
    ch: &mut impl Channel,
    sid: SessionId,
    ot: &[Block],
    choices: &[bool],
    len: usize,
    ways: usize,
) -> Result<Vec<u8>> {
    let n = ot.len();
    assert!(len > 0, "OT messages have at least one byte");
    assert_eq!(choices.len(), n, "one choice per OT");
    let hasher = Domain::new(dst::OT_MESSAGE_PAD, sid).hasher();
    let per = ways * len;
    // Grows as frames arrive: memory follows what the peer actually sent, not the count.
    let mut out = Vec::with_capacity(n.saturating_mul(len).min(FRAME_BYTES));
    let mut at = 0;
    masked(per).recv(ch, n, "receiving OT messages", |r| {
        let rec = r.take(per, "OtMessages")?;
        // One-sided: a choice-0 receiver holds no pad for the message, so skip it.
        if ways == 2 || choices[at] {
            let way = if ways == 2 { usize::from(choices[at]) } else { 0 };
            out.extend_from_slice(&rec[way * len..(way + 1) * len]);
            let start = out.len() - len;
            xor_pad(&hasher, ot[at], at, &mut out[start..]);
        } else {
            out.resize(out.len() + len, 0);
        }
        at += 1;
        Ok(())
    })?;
    Ok(out)
}

/// Chosen-message OT, sender: `messages` holds, per OT, m0 then m1, each `len` bytes.
pub fn send_chosen(
    ch: &mut impl Channel,
    sid: SessionId,
    ot: &[[Block; 2]],
    messages: &[u8],
    len: usize,
) -> Result<()> {
    send_masked(ch, sid, ot, messages, len, &[0, 1])
}

/// Chosen-message OT, receiver: m_{c_j} for each OT, `len` bytes each, concatenated.
/// `ot` are the receiver's random-OT outputs for the same `choices`.
pub fn receive_chosen(
    ch: &mut impl Channel,
    sid: SessionId,
    ot: &[Block],
    choices: &[bool],
    len: usize,
) -> Result<Vec<u8>> {
    receive_masked(ch, sid, ot, choices, len, 2)
}

/// One-sided OT, sender: per OT one message of `len` bytes, which only a receiver with
/// choice 1 can open.
pub fn send_one_sided(
    ch: &mut impl Channel,
    sid: SessionId,
    ot: &[[Block; 2]],
    messages: &[u8],
    len: usize,
) -> Result<()> {
    send_masked(ch, sid, ot, messages, len, &[1])
}

/// One-sided OT, receiver: the messages of the OTs whose choice is 1, as (index, bytes).
pub fn receive_one_sided(
    ch: &mut impl Channel,
    sid: SessionId,
    ot: &[Block],
    choices: &[bool],
    len: usize,
) -> Result<Vec<(usize, Vec<u8>)>> {
    let all = receive_masked(ch, sid, ot, choices, len, 1)?;
    Ok(choices
        .iter()
        .enumerate()
        .filter(|(_, c)| **c)
        .map(|(i, _)| (i, all[i * len..(i + 1) * len].to_vec()))
        .collect())
}
