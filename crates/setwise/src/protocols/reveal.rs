//! `--reveal both`: after a protocol gave the receiver its result, the receiver tells the
//! sender, so that both parties learn it.
//!
//! One step for every protocol that supports it (`ecdh`, `mqrpmt` intersection and
//! cardinality, `fhe`, `compact`, `vole`): the receiver sends a [`Revealed`] count and, for an
//! intersection, a [`REVEALED_DIGESTS`] stream of the matching items' digests
//! (BLAKE3 keyed by the session, [`dst::REVEAL_ITEM`]), sorted. The sender hashes its own
//! items the same way and finds its rows.
//!
//! Security: the sender relies on the receiver reporting honestly. It checks what it can
//! — the count is at most the smaller set, the digests are distinct and each is the
//! digest of one of its own items — so a receiver cannot make it output an item it does
//! not hold, but it can leave matches out or, by guessing, add sender items it does not
//! hold. The digests are of items the sender holds, so they tell the sender nothing
//! beyond which of its items are claimed. See docs/protocols/reveal.md.

use crate::crypto::dst::{self, Domain};
use crate::error::{Deviation, Result, UnknownName};
use crate::net::Channel;
use crate::protocols::{Context, Operation, Outcome, Protocol, Report};
use crate::wire::msg::Message;
use crate::wire::stream::Stream;
use crate::wire::{Reader, Writer};
use rayon::prelude::*;
use std::fmt;
use std::str::FromStr;

/// Who learns the result of an intersection or cardinality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reveal {
    /// Only the receiver (every protocol's own model).
    #[default]
    Receiver,
    /// Both: the receiver tells the sender afterwards (see the module docs for what the
    /// sender then trusts).
    Both,
}

impl Reveal {
    /// The CLI and hello name.
    pub fn name(self) -> &'static str {
        match self {
            Reveal::Receiver => "receiver",
            Reveal::Both => "both",
        }
    }

    /// Whether `protocol` can reveal the result of `op` to both parties.
    pub fn supported(protocol: Protocol, op: Operation) -> bool {
        protocol.spec().reveal_both.contains(&op)
    }
}

impl fmt::Display for Reveal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Reveal {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "receiver" => Ok(Reveal::Receiver),
            "both" => Ok(Reveal::Both),
            _ => Err(UnknownName::one_of("reveal", s, ["receiver", "both"])),
        }
    }
}

/// A matching item's digest.
pub type Digest = [u8; 32];

/// Receiver → sender: the size of the result (for an intersection, the number of
/// digests that follow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revealed(pub u64);

impl Message for Revealed {
    const TAG: u8 = 0x80;
    const NAME: &'static str = "Revealed";
    /// The two set sizes: the result is at most the smaller.
    type Agreed<'a> = (usize, usize);

    fn write(&self, w: &mut Writer) {
        w.u64(self.0);
    }

    fn read(r: &mut Reader<'_>, (a, b): (usize, usize)) -> Result<Self> {
        let n = r.u64(Self::NAME)?;
        let max = a.min(b) as u128;
        if u128::from(n) > max {
            return Err(
                Deviation::OutOfRange { what: "the revealed result's size", value: n.into(), min: 0, max }.into()
            );
        }
        Ok(Self(n))
    }
}

/// Receiver → sender: the digests of the intersection's items, sorted, chunked.
pub const REVEALED_DIGESTS: Stream<32> = Stream::new(0x81, "RevealedDigests");

/// The sorted digests of `items[i]` for each `i` in `matched`, in `session`.
pub fn digests<I: AsRef<[u8]> + Sync>(ctx: &Context, items: &[I], matched: &[usize]) -> Vec<Digest> {
    let base = Domain::new(dst::REVEAL_ITEM, ctx.id).hasher();
    let mut out: Vec<Digest> = matched.par_iter().map(|&i| digest(&base, items[i].as_ref())).collect();
    out.par_sort_unstable();
    out
}

fn digest(base: &blake3::Hasher, item: &[u8]) -> Digest {
    let mut h = base.clone();
    h.update(item);
    *h.finalize().as_bytes()
}

/// The sender's rows named by `revealed` (sorted, distinct digests of its own items):
/// sorted indices into `items`. A digest out of order, repeated or of no own item is
/// the receiver's deviation.
pub fn rows_of<I: AsRef<[u8]> + Sync>(ctx: &Context, items: &[I], revealed: &[Digest]) -> Result<Vec<usize>> {
    if revealed.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Deviation::Repeated { what: "RevealedDigests (sorted, distinct)" }.into());
    }
    let base = Domain::new(dst::REVEAL_ITEM, ctx.id).hasher();
    let mut own: Vec<(Digest, usize)> =
        items.par_iter().enumerate().map(|(i, x)| (digest(&base, x.as_ref()), i)).collect();
    own.par_sort_unstable();
    // Both lists are sorted: one merge walk finds each revealed digest among our own.
    let mut rows = Vec::with_capacity(revealed.len());
    let mut mine = own.iter().peekable();
    for (index, d) in revealed.iter().enumerate() {
        while mine.next_if(|(o, _)| o < d).is_some() {}
        match mine.next_if(|(o, _)| o == d) {
            Some(&(_, i)) => rows.push(i),
            None => return Err(Deviation::NotAnItem { what: "RevealedDigests: digest", index }.into()),
        }
    }
    rows.par_sort_unstable();
    Ok(rows)
}

/// Receiver: tells the sender `outcome` (an intersection of `items`, or a cardinality).
pub fn tell_sender<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    items: &[I],
    outcome: &Outcome,
    report: &mut Report,
) -> Result<()> {
    report.phase("reveal to the sender", ch, |ch| match outcome {
        Outcome::Cardinality(c) => Revealed(*c).send(ch, "revealing the cardinality"),
        Outcome::Intersection(matched) => {
            Revealed(matched.len() as u64).send(ch, "revealing the intersection")?;
            REVEALED_DIGESTS.send(ch, &digests(ctx, items, matched), "revealing the intersection")
        }
        other => unreachable!("reveal=both is validated for intersections and cardinalities, not {other:?}"),
    })
}

/// Sender: learns the result of `op` from the receiver; an intersection as indices into
/// its own `items`.
pub fn learn<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    ctx: &Context,
    op: Operation,
    items: &[I],
    report: &mut Report,
) -> Result<Outcome> {
    report.phase("learn the result", ch, |ch| {
        let Revealed(n) = Revealed::recv(ch, "receiving the result", (ctx.own_size, ctx.peer_size))?;
        if op == Operation::Cardinality {
            return Ok(Outcome::Cardinality(n));
        }
        // n ≤ the smaller set size, so the digests fit in memory as the sets do.
        let revealed = REVEALED_DIGESTS.recv_all(ch, n as usize, "receiving the intersection")?;
        rows_of(ctx, items, &revealed).map(Outcome::Intersection)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::dst::SessionId;
    use crate::protocols::Role;

    fn ctx(role: Role) -> Context {
        Context { id: SessionId([3; 32]), role, own_size: 5, peer_size: 4 }
    }

    #[test]
    fn the_sender_finds_its_rows_and_refuses_what_it_does_not_hold() {
        let sender = ["a", "b", "c", "d", "e"];
        let receiver = ["e", "x", "b", "y"];
        let d = digests(&ctx(Role::Receiver), &receiver, &[0, 2]);
        assert_eq!(rows_of(&ctx(Role::Sender), &sender, &d).unwrap(), vec![1, 4]);
        let foreign = digests(&ctx(Role::Receiver), &receiver, &[1]);
        let e = rows_of(&ctx(Role::Sender), &sender, &foreign).unwrap_err();
        assert!(e.to_string().contains("RevealedDigests: digest 0"), "{e}");
        let repeated = [d[0], d[0]];
        assert!(rows_of(&ctx(Role::Sender), &sender, &repeated).unwrap_err().to_string().contains("distinct"));
        let other_session = Context { id: SessionId([4; 32]), ..ctx(Role::Receiver) };
        assert!(rows_of(&ctx(Role::Sender), &sender, &digests(&other_session, &receiver, &[0])).is_err());
        assert!(Revealed::decode(&5u64.to_le_bytes(), (5, 4)).is_err(), "more than the smaller set");
        assert_eq!(Revealed::decode(&4u64.to_le_bytes(), (5, 4)).unwrap(), Revealed(4));
    }
}
