//! mqRPMT from a commutative weak PRF (paper Fig. 3), F_k(P) = k·P on ristretto255.
//!
//! 1. server → client: F_k1(H(y_j)) for every y_j;
//! 2. client → server: Ω = {F_k2(F_k1(H(y_j)))} as a shuffled list or a Bloom filter
//!    (false-positive rate 2^-40, §4.3 "Optimization"; order-hiding), then F_k2(H(x_i))
//!    in the client's order;
//! 3. server: e_i = [F_k1(F_k2(H(x_i))) ∈ Ω].

use super::messages::{CLIENT_ITEMS, FilterPart, SERVER_ITEMS, SHUFFLED};
use crate::crypto::dst::{self, Domain};
use crate::crypto::ristretto::{Encoded, ItemHasher, SecretScalar};
use crate::crypto::rng::shuffle;
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

/// The membership test's construction (paper §4): from a commutative weak PRF, the
/// only one setwise implements. It is named in the hello so that a peer with another
/// construction is refused rather than misread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Construction {
    /// Fig. 3: F_k(P) = k·P on ristretto255.
    #[default]
    Cwprf,
}

impl Construction {
    /// The hello name.
    pub fn name(self) -> &'static str {
        match self {
            Construction::Cwprf => "cwprf",
        }
    }
}

/// How the client returns the server's doubly-keyed items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LastMove {
    /// A Bloom filter (1.44·40 bits per item; false positives at 2^-40 per test).
    #[default]
    Bloom,
    /// The 32-byte encodings in a random order.
    Shuffle,
}

impl LastMove {
    /// The CLI and hello name.
    pub fn name(self) -> &'static str {
        match self {
            LastMove::Bloom => "bloom",
            LastMove::Shuffle => "shuffle",
        }
    }
}

impl std::fmt::Display for LastMove {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for LastMove {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        [LastMove::Bloom, LastMove::Shuffle]
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown last move '{s}' (expected bloom or shuffle)"))
    }
}

fn hasher(ctx: &Context) -> ItemHasher {
    ItemHasher::new(&Domain::new(dst::MQRPMT_ITEM_TO_GROUP, ctx.id))
}

fn filter_domain(ctx: &Context) -> Domain {
    Domain::new(dst::MQRPMT_FILTER, ctx.id)
}

/// The server P1 (the hello's receiver) with its items Y; returns e_i for each of the
/// client's items, in the client's order.
pub fn server<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    last: LastMove,
) -> Result<Vec<bool>> {
    let k1 = SecretScalar::random();
    let h = hasher(ctx);
    for chunk in items.chunks(CHUNK) {
        SERVER_ITEMS.send_chunk(ch, &k1.hash_and_mul(&h, chunk), "sending keyed items")?;
    }
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

/// The client P2 (the hello's sender) with its items X; learns nothing.
pub fn client<I: AsRef<[u8]> + Sync>(ch: &mut impl Channel, ctx: &Context, items: &[I], last: LastMove) -> Result<()> {
    let k2 = SecretScalar::random();
    let theirs = SERVER_ITEMS.recv_all(ch, ctx.receiver_size(), "receiving")?;
    let mut doubled =
        k2.mul_encoded(&theirs).map_err(|index| Error::InvalidPoint { what: "MqrpmtServerItems", index })?;
    match last {
        LastMove::Shuffle => {
            shuffle(&mut doubled);
            SHUFFLED.send(ch, &doubled, "sending Ω")?;
        }
        LastMove::Bloom => {
            let f = BloomFilter::from_items(&filter_domain(ctx), &doubled, LAMBDA);
            // In frames, so a 2^24-item filter (120 MB) stays under any frame limit.
            for part in f.to_bytes().chunks(FILTER_FRAME) {
                FilterPart(part.to_vec()).send(ch, "sending Ω")?;
            }
        }
    }
    let h = hasher(ctx);
    for chunk in items.chunks(CHUNK) {
        CLIENT_ITEMS.send_chunk(ch, &k2.hash_and_mul(&h, chunk), "sending keyed items")?;
    }
    Ok(())
}
