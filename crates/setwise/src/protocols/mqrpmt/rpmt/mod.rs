//! The multi-query reverse private membership test: the server P1 (the hello's
//! receiver, holding Y) learns e_i = [x_i ∈ Y] for each item of the client P2 (the
//! hello's sender, holding X), in the client's order, and nothing else; the client learns
//! nothing. Two constructions (paper §4 and §5), both with F_k(P) = k·P on ristretto255
//! and the same first two moves:
//!
//! 1. server → client: a_j = k1·H(y_j) for every y_j;
//! 2. client → server: k2·a_j, shuffled (or, cwPRF only, in a Bloom filter);
//! 3. client → server, per item x_i in the client's order:
//!    - [`cwprf`] (Fig. 3): the point k2·H(x_i); the server keys it with k1 and looks
//!      k1·k2·H(x_i) up in step 2's set (|X| multiplications on the server);
//!    - [`poprf`] (Figs. 5–6): a short tag of k2·H(x_i); the server removes its own key
//!      from step 2's points, k1⁻¹·k2·k1·H(y) = k2·H(y), and looks the tag up among
//!      theirs (|Y| multiplications on the server, ~10 bytes per query instead of 32).

mod cwprf;
mod poprf;

use super::MqrpmtParams;
use super::messages::{SERVER_ITEMS, SHUFFLED};
use crate::crypto::dst::{self, Domain};
use crate::crypto::ristretto::{Encoded, ItemHasher, SecretScalar};
use crate::crypto::rng::shuffle;
use crate::error::{Error, Result};
use crate::net::Channel;
use crate::protocols::Context;
use crate::wire::stream::CHUNK;

pub use crate::protocols::params::mqrpmt::{Construction, LastMove};

/// The server P1 (the hello's receiver) with its items Y; returns e_i for each of the
/// client's items, in the client's order.
pub fn server<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    params: &MqrpmtParams,
) -> Result<Vec<bool>> {
    params.check()?;
    match params.construction {
        Construction::Cwprf => cwprf::server(ch, ctx, items, params.last_move),
        Construction::Poprf => poprf::server(ch, ctx, items),
    }
}

/// The client P2 (the hello's sender) with its items X; learns nothing.
pub fn client<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    params: &MqrpmtParams,
) -> Result<()> {
    params.check()?;
    match params.construction {
        Construction::Cwprf => cwprf::client(ch, ctx, items, params.last_move),
        Construction::Poprf => poprf::client(ch, ctx, items),
    }
}

fn hasher(ctx: &Context) -> ItemHasher {
    ItemHasher::new(&Domain::new(dst::MQRPMT_ITEM_TO_GROUP, ctx.id))
}

/// Step 1, server: `key`·H(y) for every own item, chunk by chunk.
fn send_server_items<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    key: &SecretScalar,
    items: &[I],
) -> Result<()> {
    let h = hasher(ctx);
    for (i, chunk) in items.chunks(CHUNK).enumerate() {
        SERVER_ITEMS.send_chunk(ch, &key.hash_and_mul(&h, chunk), (i * CHUNK, items.len()), "sending keyed items")?;
    }
    Ok(())
}

/// Step 2, client: the server's items keyed again with `key`, in the server's order.
fn key_server_items(ch: &mut impl Channel, ctx: &Context, key: &SecretScalar) -> Result<Vec<Encoded>> {
    let theirs = SERVER_ITEMS.recv_all(ch, ctx.receiver_size(), "receiving")?;
    key.mul_encoded(&theirs).map_err(|index| Error::InvalidPoint { what: "MqrpmtServerItems", index })
}

/// Step 2, client, the shuffled list: `doubled` in a random order.
fn send_shuffled(ch: &mut impl Channel, mut doubled: Vec<Encoded>) -> Result<()> {
    shuffle(&mut doubled);
    SHUFFLED.send(ch, &doubled, "sending Ω")
}
