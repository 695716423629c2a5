//! The operations on top of the membership test (paper Fig. 7): the client (hello
//! sender) shuffles its items, the server (hello receiver) learns the membership bits,
//! and one batch of IKNP OTs chosen by those bits delivers the operation's output.

use super::codec::ItemCodec;
use super::messages::{MaskedSum, Width};
use super::{MqrpmtParams, client, server, shuffled};
use crate::crypto::dst::{self, Domain};
use crate::crypto::rng::csprng;
use crate::error::{Deviation, Error, Result};
use crate::net::Channel;
use crate::ot;
use crate::protocols::{Context, Operation, Outcome, Report, Security, SumTo};
use crate::wire::WireError;
use crate::wire::msg::Message;
use rand::{Rng, RngExt};
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};

/// Bytes of the tag the intersection transfers: 128 bits, so two of the receiver's items
/// share a tag with probability ≤ |Y|²·2^-129.
const TAG_LEN: usize = 16;

/// One party's XOR shares of the `shares` operation, one row per item of the client
/// (the hello sender), in the client's shuffled order. Row i of the two parties'
/// shares XORs to the encoding of x_i if x_i ∈ Y and to zero bytes otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shares {
    /// The item encoding (bytes per share); [`ItemCodec::decode`] turns a recombined
    /// row into its item.
    pub codec: ItemCodec,
    /// The shares, row after row, `codec.width()` bytes each.
    pub data: Vec<u8>,
    /// Receiver: whether each row is in X ∩ Y (the membership bits it learned).
    /// Sender: empty.
    pub members: Vec<bool>,
    /// Sender: the index of its own item behind each row. Receiver: empty.
    pub items: Vec<usize>,
}

impl Shares {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.data.len() / self.codec.width()
    }

    /// The share of row `i`.
    pub fn share(&self, i: usize) -> &[u8] {
        let w = self.codec.width();
        &self.data[i * w..(i + 1) * w]
    }

    /// Row `i` recombined with the other party's shares: the item if the row is in
    /// X ∩ Y, `None` if not; an error if the XOR is no item encoding (e.g. shares of
    /// different runs).
    pub fn recombine(&self, other: &Shares, i: usize) -> std::result::Result<Option<Vec<u8>>, WireError> {
        let joint: Vec<u8> = self.share(i).iter().zip(other.share(i)).map(|(a, b)| a ^ b).collect();
        Ok(self.codec.decode(&joint)?.map(<[u8]>::to_vec))
    }
}

/// The value holder's input to `sum`: one value per item, each at most `bound`.
#[derive(Debug, Clone, Copy)]
pub struct Values<'a> {
    /// The values, in item order.
    pub values: &'a [u64],
    /// The declared upper bound of every value; it fixes the sum's modulus.
    pub bound: u64,
}

/// Bytes of the sum modulus q = 2^(8·w): the smallest w with q > n·bound, so the sum of
/// any n values up to `bound` never wraps.
pub fn sum_width(n: usize, bound: u64) -> usize {
    let max = n as u128 * bound as u128;
    (128 - max.leading_zeros() as usize).div_ceil(8).max(1)
}

fn tag_domain(ctx: &Context) -> Domain {
    Domain::new(dst::MQRPMT_TAG, ctx.id)
}

fn tag(hasher: &blake3::Hasher, item: &[u8]) -> [u8; TAG_LEN] {
    let mut h = hasher.clone();
    h.update(item);
    let mut t = [0u8; TAG_LEN];
    t.copy_from_slice(&h.finalize().as_bytes()[..TAG_LEN]);
    t
}

fn mask(width: usize) -> u128 {
    if width >= 16 { u128::MAX } else { (1u128 << (8 * width)) - 1 }
}

/// The sum's OT masks r_i, one per client item, each at most `q` (2^(8w) − 1): uniform
/// (the client removes their total from the server's S'), or for the reverse sum uniform
/// but the last, which makes them sum to zero mod 2^(8w) (GMR+21's constraint) so that
/// the server's S' is the sum itself. Any n − 1 of them are then independent and uniform.
fn sum_masks(n: usize, q: u128, sum_to: SumTo, rng: &mut impl Rng) -> Vec<u128> {
    let mut total = 0u128;
    (0..n)
        .map(|k| {
            let r = match sum_to {
                SumTo::Receiver if k + 1 == n => 0u128.wrapping_sub(total) & q,
                _ => rng.random::<u128>() & q,
            };
            total = total.wrapping_add(r) & q;
            r
        })
        .collect()
}

fn to_le(v: u128, out: &mut [u8]) {
    out.copy_from_slice(&v.to_le_bytes()[..out.len()]);
}

fn from_le(bytes: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    b[..bytes.len()].copy_from_slice(bytes);
    u128::from_le_bytes(b)
}

/// The client P2 (the hello's sender) with its items X and, for `sum`, its values;
/// every operation but `private-id`.
///
/// Learns nothing, except with `sum` given to the sender (|X ∩ Y| and the sum of its
/// values over X ∩ Y) and `shares` (its shares).
#[allow(clippy::too_many_arguments)] // one per fact of the run, as the public role has
pub(super) fn sender<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    op: Operation,
    items: &[I],
    values: Option<Values<'_>>,
    sum_to: SumTo,
    params: &MqrpmtParams,
    report: &mut Report,
) -> Result<Outcome> {
    let n = items.len();
    let values = match (op, values) {
        (Operation::Sum, Some(v)) => {
            if v.values.len() != n {
                return Err(Error::params("values", format!("sum: {} values for {n} items", v.values.len())));
            }
            if let Some(i) = v.values.iter().position(|&x| x > v.bound) {
                return Err(Error::params(
                    "values",
                    format!("sum: value {} of item {i} exceeds the declared bound {}", v.values[i], v.bound),
                ));
            }
            Some(v)
        }
        (Operation::Sum, None) => return Err(Error::params("values", "sum: the sender holds a value per item".into())),
        _ => None,
    };
    let codec = match op {
        Operation::Union | Operation::Shares => Some(ItemCodec::for_items(items)?),
        _ => None,
    };
    let width = match (op, codec) {
        (_, Some(c)) => Some(c.width()),
        (Operation::Sum, _) => Some(sum_width(n, values.map_or(0, |v| v.bound))),
        _ => None,
    };
    if let Some(w) = width {
        Width(w).send(ch, "sending the message width")?;
        report.detail("ot_message_bytes", w.to_string());
    }
    let (order, xs) = shuffled(items);
    report.phase("membership test", ch, |ch| client(ch, ctx, &xs, params))?;
    if op == Operation::Cardinality || n == 0 {
        return Ok(match op {
            Operation::Sum if sum_to == SumTo::Sender => Outcome::CardinalitySum { cardinality: 0, sum: 0 },
            Operation::Shares => Outcome::Shares(Shares {
                codec: codec.expect("set for shares"),
                data: vec![],
                members: vec![],
                items: vec![],
            }),
            _ => Outcome::Nothing,
        });
    }
    let sid = ctx.id;
    let pairs = report.phase("ot extension", ch, |ch| ot::extend_send(ch, sid, n, Security::SemiHonest))?;
    report.phase("transfer", ch, |ch| match op {
        Operation::Intersection => {
            let hasher = tag_domain(ctx).hasher();
            let mut tags = vec![0u8; n * TAG_LEN];
            tags.par_chunks_mut(TAG_LEN).zip(&xs).for_each(|(t, x)| t.copy_from_slice(&tag(&hasher, x)));
            ot::send_one_sided(ch, sid, &pairs, &tags, TAG_LEN).map(|()| Outcome::Nothing)
        }
        Operation::Union => {
            let codec = codec.expect("set for union");
            let w = codec.width();
            let mut enc = vec![0u8; n * w];
            enc.par_chunks_mut(w).zip(&xs).for_each(|(e, x)| codec.encode_into(x, e));
            ot::send_one_sided(ch, sid, &pairs, &enc, w).map(|()| Outcome::Nothing)
        }
        Operation::Shares => {
            let codec = codec.expect("set for shares");
            let w = codec.width();
            let mut r = vec![0u8; n * w];
            csprng().fill_bytes(&mut r);
            let mut msgs = vec![0u8; 2 * n * w];
            msgs.par_chunks_mut(2 * w).zip(r.par_chunks(w)).zip(&xs).for_each(|((m, r), x)| {
                let (m0, m1) = m.split_at_mut(w);
                m0.copy_from_slice(r);
                codec.encode_into(x, m1);
                m1.iter_mut().zip(r).for_each(|(b, r)| *b ^= r);
            });
            ot::send_chosen(ch, sid, &pairs, &msgs, w)?;
            Ok(Outcome::Shares(Shares { codec, data: r, members: vec![], items: order.clone() }))
        }
        Operation::Sum => {
            let v = values.expect("checked above");
            let w = width.expect("set for sum");
            let q = mask(w);
            let masks = sum_masks(n, q, sum_to, &mut csprng());
            let r_total = masks.iter().fold(0u128, |a, &r| a.wrapping_add(r) & q);
            let mut msgs = vec![0u8; 2 * n * w];
            for ((m, &i), &r) in msgs.chunks_mut(2 * w).zip(&order).zip(&masks) {
                to_le(r, &mut m[..w]);
                to_le(r.wrapping_add(v.values[i] as u128) & q, &mut m[w..]);
            }
            ot::send_chosen(ch, sid, &pairs, &msgs, w)?;
            if sum_to == SumTo::Receiver {
                return Ok(Outcome::Nothing);
            }
            let MaskedSum { masked, cardinality, .. } = MaskedSum::recv(ch, "receiving the masked sum", (w, n))?;
            let sum = masked.wrapping_sub(r_total) & q;
            // A cheap plausibility check: a random S' fails it with probability ≥ 1 − c/n.
            let max = u128::from(cardinality) * u128::from(v.bound);
            if sum > max {
                return Err(Deviation::OutOfRange { what: "the sum", value: sum, min: 0, max }.into());
            }
            Ok(Outcome::CardinalitySum { cardinality, sum })
        }
        other => Err(Error::usage("operation", format!("mqrpmt {other} is not an operation on the membership bits"))),
    })
}

/// The server P1 (the hello's receiver) with its items Y; learns the operation's output;
/// every operation but `private-id`.
pub(super) fn receiver<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    op: Operation,
    items: &[I],
    sum_to: SumTo,
    params: &MqrpmtParams,
    report: &mut Report,
) -> Result<Outcome> {
    let n = ctx.sender_size();
    let width = match op {
        Operation::Union | Operation::Shares | Operation::Sum => Width::recv(ch, "receiving the message width", op)?.0,
        _ => 0,
    };
    let codec = match op {
        Operation::Union | Operation::Shares => Some(ItemCodec::from_width(width)?),
        _ => None,
    };
    let bits = report.phase("membership test", ch, |ch| server(ch, ctx, items, params))?;
    let cardinality = bits.iter().filter(|&&b| b).count() as u64;
    if op == Operation::Cardinality || n == 0 {
        return Ok(match op {
            Operation::Intersection => Outcome::Intersection(vec![]),
            Operation::Union => Outcome::Union(vec![]),
            Operation::Shares => Outcome::Shares(Shares {
                codec: codec.expect("set for shares"),
                data: vec![],
                members: vec![],
                items: vec![],
            }),
            Operation::Sum if sum_to == SumTo::Receiver => Outcome::CardinalitySum { cardinality, sum: 0 },
            _ => Outcome::Cardinality(cardinality),
        });
    }
    let sid = ctx.id;
    // Union transfers the items the server does *not* hold.
    let choices: Vec<bool> = if op == Operation::Union { bits.iter().map(|b| !b).collect() } else { bits.clone() };
    let keys = report.phase("ot extension", ch, |ch| ot::extend_receive(ch, sid, &choices, Security::SemiHonest))?;
    report.phase("transfer", ch, |ch| match op {
        Operation::Intersection => {
            let got = ot::receive_one_sided(ch, sid, &keys, &choices, TAG_LEN)?;
            let hasher = tag_domain(ctx).hasher();
            let own: Vec<[u8; TAG_LEN]> = items.par_iter().map(|y| tag(&hasher, y.as_ref())).collect();
            let index: HashMap<[u8; TAG_LEN], usize> = own.into_iter().enumerate().map(|(i, t)| (t, i)).collect();
            // A tag that is none of ours is a false positive of the membership test (Bloom
            // filter, pOPRF query tag): not a match.
            let mut matched: Vec<usize> = got.iter().filter_map(|(_, t)| index.get(&t[..]).copied()).collect();
            matched.sort_unstable();
            matched.dedup();
            Ok(Outcome::Intersection(matched))
        }
        Operation::Union => {
            let codec = codec.expect("set for union");
            let got = ot::receive_one_sided(ch, sid, &keys, &choices, width)?;
            // Keep each item once and none of ours: the union stays a set whatever the
            // client sends.
            let mut seen: HashSet<&[u8]> = items.iter().map(AsRef::as_ref).collect();
            let mut extra = Vec::with_capacity(got.len());
            for (i, enc) in &got {
                match codec.decode(enc) {
                    Ok(Some(item)) => {
                        if seen.insert(item) {
                            extra.push(item.to_vec());
                        }
                    }
                    _ => return Err(Deviation::NotAnItem { what: "union item", index: *i }.into()),
                }
            }
            Ok(Outcome::Union(extra))
        }
        Operation::Shares => {
            let data = ot::receive_chosen(ch, sid, &keys, &choices, width)?;
            Ok(Outcome::Shares(Shares {
                codec: codec.expect("set for shares"),
                data,
                members: bits.clone(),
                items: vec![],
            }))
        }
        Operation::Sum => {
            let got = ot::receive_chosen(ch, sid, &keys, &choices, width)?;
            let q = mask(width);
            let masked = got.chunks(width).fold(0u128, |acc, m| acc.wrapping_add(from_le(m)) & q);
            if sum_to == SumTo::Receiver {
                // The masks summed to zero: `masked` is the sum. An honest sender's
                // modulus exceeds n·bound, so no honest sum is above cardinality·⌊q/n⌋;
                // one that is comes from a damaged or mismatched run (a sender that lies
                // about its values within its bound is not caught).
                let max = u128::from(cardinality) * (q / n as u128);
                if masked > max {
                    return Err(Deviation::OutOfRange { what: "the sum", value: masked, min: 0, max }.into());
                }
                return Ok(Outcome::CardinalitySum { cardinality, sum: masked });
            }
            MaskedSum { width, masked, cardinality }.send(ch, "sending the masked sum")?;
            Ok(Outcome::Cardinality(cardinality))
        }
        other => Err(Error::usage("operation", format!("mqrpmt {other} is not an operation on the membership bits"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_sum_masks_sum_to_zero_and_the_rest_are_uniform() {
        let mut rng = csprng();
        for w in [1usize, 6, 8, 16] {
            let q = mask(w);
            let sum = |m: &[u128]| m.iter().fold(0u128, |a, &r| a.wrapping_add(r) & q);
            for n in [1usize, 2, 1000] {
                let m = sum_masks(n, q, SumTo::Receiver, &mut rng);
                assert_eq!((m.len(), sum(&m)), (n, 0), "w {w}, n {n}");
                assert!(m.iter().all(|&r| r <= q));
            }
            // The first n − 1 are fresh: no two draws alike, and (at 8 bytes and more)
            // no repeats among a thousand, as uniform values would have none.
            let (a, b) = (sum_masks(1000, q, SumTo::Receiver, &mut rng), sum_masks(1000, q, SumTo::Receiver, &mut rng));
            assert_ne!(a, b, "w {w}");
            if w >= 8 {
                let distinct: std::collections::BTreeSet<u128> = a.iter().copied().collect();
                assert_eq!(distinct.len(), 1000, "w {w}");
                // The forward masks are all uniform: their total is not zero.
                assert_ne!(sum(&sum_masks(1000, q, SumTo::Sender, &mut rng)), 0, "w {w}");
            }
        }
        assert_eq!(sum_masks(1, mask(4), SumTo::Receiver, &mut rng), [0], "one item: the message is its value");
    }
}
