//! mqRPMT from a commutative weak PRF (paper Fig. 3), F_k(P) = k·P on ristretto255.
//!
//! 1. server → client: F_k1(H(y_j)) for every y_j;
//! 2. client → server: Ω = {F_k2(F_k1(H(y_j)))} as a shuffled list or a Bloom filter
//!    (false-positive rate 2^-40, §4.3 "Optimization"; order-hiding), then F_k2(H(x_i))
//!    in the client's order;
//! 3. server: e_i = [F_k1(F_k2(H(x_i))) ∈ Ω].

use super::super::messages::{CLIENT_ITEMS, FilterPart, SHUFFLED};
use super::{LastMove, hasher, key_server_items, send_server_items, send_shuffled};
use crate::crypto::dst::{self, Domain};
use crate::crypto::ristretto::{Encoded, SecretScalar};
use crate::error::{Error, Result};
use crate::hashing::bloom::BloomFilter;
use crate::net::Channel;
use crate::protocols::Context;
use crate::wire::Reader;
use crate::wire::msg::Message;
use crate::wire::stream::CHUNK;
use std::collections::HashSet;

/// Bloom filter false-positive exponent: 2^-40 per test.
const LAMBDA: u32 = 40;
/// Most filter bytes per frame: 1 MiB.
const FILTER_FRAME: usize = 1 << 20;

fn filter_domain(ctx: &Context) -> Domain {
    Domain::new(dst::MQRPMT_FILTER, ctx.id)
}

/// The server P1 with its items Y; returns e_i for each of the client's items, in the
/// client's order.
pub(super) fn server<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    last: LastMove,
) -> Result<Vec<bool>> {
    let k1 = SecretScalar::random();
    send_server_items(ch, ctx, &k1, items)?;
    let omega: Box<dyn Fn(&Encoded) -> bool> = match last {
        LastMove::Shuffle => {
            let all: HashSet<Encoded> =
                SHUFFLED.recv_all(ch, ctx.receiver_size(), "receiving Ω")?.into_iter().collect();
            Box::new(move |e| all.contains(e))
        }
        LastMove::Bloom => {
            let expected = BloomFilter::dimensions(ctx.receiver_size(), LAMBDA).0.div_ceil(64) as usize * 8;
            let mut body = Vec::with_capacity(expected);
            while body.len() < expected {
                let part = FilterPart::recv(ch, "receiving Ω", expected - body.len())?;
                body.extend_from_slice(&part.0);
            }
            let mut r = Reader::new(&body);
            let f = BloomFilter::read(&mut r, &filter_domain(ctx), ctx.receiver_size(), LAMBDA)?;
            r.finish("MqrpmtFilter")?;
            Box::new(move |e| f.contains(e))
        }
    };
    let mut bits = Vec::with_capacity(ctx.sender_size().min(CHUNK)); // grows with the data
    CLIENT_ITEMS.recv(ch, ctx.sender_size(), "testing", |at, chunk| {
        let keyed =
            k1.mul_encoded(chunk).map_err(|i| Error::InvalidPoint { what: "MqrpmtClientItems", index: at + i })?;
        bits.extend(keyed.iter().map(&omega));
        Ok(())
    })?;
    Ok(bits)
}

/// The client P2 with its items X; learns nothing.
pub(super) fn client<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    last: LastMove,
) -> Result<()> {
    let k2 = SecretScalar::random();
    let doubled = key_server_items(ch, ctx, &k2)?;
    match last {
        LastMove::Shuffle => send_shuffled(ch, doubled)?,
        LastMove::Bloom => {
            let f = BloomFilter::from_items(&filter_domain(ctx), &doubled, LAMBDA);
            // In frames, so a 2^24-item filter (120 MB) stays under any frame limit.
            for part in f.to_bytes().chunks(FILTER_FRAME) {
                FilterPart(part.to_vec()).send(ch, "sending Ω")?;
            }
        }
    }
    let h = hasher(ctx);
    for (i, chunk) in items.chunks(CHUNK).enumerate() {
        CLIENT_ITEMS.send_chunk(ch, &k2.hash_and_mul(&h, chunk), (i * CHUNK, items.len()), "sending keyed items")?;
    }
    Ok(())
}
