//! `--protocol auto`: both parties name `auto` in the hello; then each picks the same
//! protocol (and its parameters) from the operation, the security asked for and the two
//! set sizes, which the hello has just told both of them. The rule is deterministic, so
//! the parties agree without another message; the crossovers are the ones measured in
//! docs/benchmarks.md ("auto").
//!
//! Only protocols on plain items are candidates: a sender with a prepared database names
//! `unbalanced`, and so must its receiver.
//!
//! A side saying `auto` also meets a peer that names a protocol ([`meet`]): it runs the
//! peer's protocol with the peer's parameters, when that protocol gives the operation at
//! the security asked for, and says so in the report. An `auto` receiver can so query a
//! database server that names `unbalanced`.

use crate::error::{Error, Result};
use crate::protocols::mqrpmt::{Construction, LastMove, MqrpmtParams};
use crate::protocols::params::ProtocolParams;
use crate::protocols::{Operation, Protocol, Role, Security};
use crate::session::hello::{Hello, check, check_protocol};
use crate::session::job::Job;
use crate::wire::text::printable;

/// Below this many items on the larger side, intersection runs `ecdh`; from it on, `vole`.
///
/// Measured (docs/benchmarks.md, "auto"): on loopback `vole` is the faster at every size
/// (0.02 s against ecdh's 0.29 s at 2^12 × 2^12), but over an 80 ms link its six round
/// trips cost 0.46 s, against ecdh's 0.37 s at 2^12 with a tenth of the bytes; at
/// 2^16 × 2^8 `vole` wins on both links (0.54 s against 2.3 s). The crossover on the slow
/// link lies between 2^12 and 2^16; 2^13 keeps every choice within about 0.1 s of the
/// best on either link.
pub const VOLE_FROM: usize = 1 << 13;

/// Under malicious security, below this many items on the larger side intersection runs
/// `compact`; from it on, `vole` (its malicious variant).
///
/// Measured (docs/benchmarks.md, "auto under malicious security", 2026-11-29, with
/// compact's O(n log² n) interpolation): on loopback malicious `vole` is the faster from
/// 2^10 (0.027 s against compact's 0.17 s at 2^11), but over an 80 ms link its round trips
/// cost about 0.6 s: 0.65 s at 2^11 against compact's 0.28 s, 0.66 s at 2^12 against
/// 0.45 s, 0.74 s at 2^14 against 1.51 s. Taking the protocol whose larger loss against
/// the other on either link is smaller gives compact up to 2^11 (it loses 0.14 s on
/// loopback, vole 0.37 s on the slow link) and vole from 2^12 (it loses 0.21 s on the
/// slow link, compact 0.28 s on loopback).
pub const MALICIOUS_VOLE_FROM: usize = 1 << 12;

/// The sender must hold at least this many times the receiver's items for the mqRPMT to
/// use the permuted-OPRF test: it costs |X| + 3·|Y| multiplications against cwPRF's
/// 2·|X| + 2·|Y|, measured 0.60 of cwPRF's time at |X| = 16·|Y| and 1.37 times it at
/// |Y| = 16·|X| (docs/benchmarks.md, "Constructions"). At 2× the model gives pOPRF 0.83
/// of the multiplications, a margin over the machine's noise.
pub const POPRF_FROM_RATIO: usize = 2;

/// What `auto` runs, and why (for the report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The protocol.
    pub protocol: Protocol,
    /// Its parameters.
    pub params: ProtocolParams,
    /// In plain words, for the report.
    pub why: &'static str,
}

/// The protocol `auto` runs for `op` at `security` between a sender of `sender` and a
/// receiver of `receiver` items; an error when no protocol of setwise gives it.
pub fn choose(op: Operation, security: Security, sender: usize, receiver: usize) -> Result<Choice> {
    let plain = |protocol, why| Choice { protocol, params: ProtocolParams::None, why };
    if security == Security::Malicious {
        return match op {
            Operation::Intersection if sender.max(receiver) >= MALICIOUS_VOLE_FROM => Ok(plain(
                Protocol::Vole,
                "malicious intersection of a set of 2^12 items or more: vole's malicious variant loses at most 0.21 s to \
                 compact on a slow link, compact 0.28 s or more to vole on a fast one",
            )),
            Operation::Intersection => Ok(plain(
                Protocol::Compact,
                "malicious intersection of sets under 2^12 items: compact takes one and a half round trips and a fifth \
                 or less of vole's bytes",
            )),
            op => Err(Error::params(
                "security",
                format!(
                    "no protocol of setwise gives {op} with malicious security (only intersection, with vole or compact)"
                ),
            )),
        };
    }
    Ok(match op {
        Operation::Intersection if sender.max(receiver) >= VOLE_FROM => {
            plain(Protocol::Vole, "intersection of a set of 2^13 items or more: vole is the fastest on any link")
        }
        Operation::Intersection => plain(
            Protocol::Ecdh,
            "intersection of sets under 2^13 items: ecdh takes two round trips and a tenth of vole's bytes",
        ),
        Operation::Cardinality => {
            plain(Protocol::Ecdh, "cardinality: ecdh, as fast as mqrpmt's and with fewer round trips")
        }
        _ => mqrpmt(
            sender,
            receiver,
            "sum, shares, union and private-id: only mqrpmt implements them; the sender holds at least twice the \
             receiver's items, so its test from a permuted OPRF (fewer multiplications and bytes)",
            "sum, shares, union and private-id: only mqrpmt implements them; its test from a commutative weak PRF \
             with a Bloom filter (the fewest bytes for balanced sets)",
        ),
    })
}

/// mqrpmt with the test that suits the sizes: from a permuted OPRF when the sender holds
/// at least [`POPRF_FROM_RATIO`] times the receiver's items, else from a commutative weak
/// PRF with a Bloom filter; `why` for each.
fn mqrpmt(sender: usize, receiver: usize, poprf: &'static str, cwprf: &'static str) -> Choice {
    let (construction, why) = match sender >= POPRF_FROM_RATIO.saturating_mul(receiver.max(1)) {
        true => (Construction::Poprf, poprf),
        false => (Construction::Cwprf, cwprf),
    };
    Choice { protocol: Protocol::Mqrpmt, params: ProtocolParams::Mqrpmt(MqrpmtParams::of(construction)), why }
}

/// The protocol `auto` runs in a staged run ([`crate::staged`]) of `op` between a sender
/// of `sender` and a receiver of `receiver` items (semi-honest, as staged runs are).
///
/// Only protocols the runner replays are candidates: whether a run replays or runs stages
/// of its own (ecdh's) is fixed when it starts, before the peer's hello tells its size.
/// Intersection runs `vole` (faster than ecdh from a few hundred items on, on loopback,
/// docs/benchmarks.md "auto"; a staged run's stages wait for storage, not for a link's
/// round trips), the other operations `mqrpmt`, with the test [`choose`] would take
/// (its cardinality leaks per-bucket counts where staged ecdh's does not:
/// docs/scale-out.md, "What leaks"). The sizes are the whole sets': every bucket runs
/// the same protocol.
pub fn choose_staged(op: Operation, sender: usize, receiver: usize) -> Result<Choice> {
    let plain = |protocol, why| Choice { protocol, params: ProtocolParams::None, why };
    Ok(match op {
        Operation::Intersection => plain(
            Protocol::Vole,
            "staged intersection: vole, the fastest replayed protocol (auto stages no ecdh, whose stages are its own)",
        ),
        Operation::Cardinality | Operation::Sum | Operation::Union | Operation::PrivateId => mqrpmt(
            sender,
            receiver,
            "staged cardinality, sum, union and private-id: mqrpmt; the sender holds at least twice the receiver's \
             items, so its test from a permuted OPRF",
            "staged cardinality, sum, union and private-id: mqrpmt, its test from a commutative weak PRF with a \
             Bloom filter (the fewest bytes for balanced sets)",
        ),
        op => {
            let ops: Vec<&str> = Protocol::Auto.spec().staged.iter().map(|o| o.name()).collect();
            return Err(Error::params("protocol", format!("auto stages no {op}: it stages {}", ops.join(", "))));
        }
    })
}

/// Checks the peer's protocol and parameters against ours, where one side may say
/// `auto`. Returns the job an `auto` side runs when the peer named its protocol (the
/// peer's protocol and parameters), else `None`: the protocols and parameters are the
/// same (two `auto` sides choose later, from the sizes), or this side named its protocol
/// and the peer's `auto` will follow it.
///
/// Both sides decide alike: a named protocol's parameters, stripped of what only that
/// protocol has, must be the `auto` side's (key columns, reveal, security). An `auto`
/// side that cannot run the peer's protocol (another operation or a weaker security,
/// credentials it does not hold) refuses with an error that reaches the peer.
pub fn meet(job: &Job, role: Role, ours: &Hello, theirs: &Hello) -> Result<Option<Job>> {
    let auto = Protocol::Auto.name();
    match (ours.protocol == auto, theirs.protocol == auto) {
        (true, false) => adopt(job, role, theirs).map(Some),
        (false, true) => {
            check("parameters", &job.clone().resolved(Protocol::Auto).hello_params(), &theirs.params).map(|()| None)
        }
        _ => check_protocol(ours, theirs).map(|()| None),
    }
}

/// The job an `auto` side runs for the peer's hello naming its protocol.
fn adopt(job: &Job, role: Role, theirs: &Hello) -> Result<Job> {
    // The peer's strings reach errors and logs escaped and cut short.
    let named = printable(&theirs.protocol, 64);
    let refuse = |why: String| Error::PeerProtocol { protocol: named.clone(), why };
    let protocol: Protocol = theirs.protocol.parse().map_err(|_| refuse("it is not a protocol of setwise".into()))?;
    let base = job.clone().resolved(protocol);
    let candidates: Vec<Job> = if protocol == Protocol::Mqrpmt {
        [Construction::Cwprf, Construction::Poprf]
            .into_iter()
            .flat_map(|c| [LastMove::Bloom, LastMove::Shuffle].map(|m| MqrpmtParams { construction: c, last_move: m }))
            .map(|p| base.clone().with_params(ProtocolParams::Mqrpmt(p)))
            .collect()
    } else if protocol == Protocol::Authorized || protocol == Protocol::Partial {
        return Err(refuse("it needs the judge's key and credentials, which auto does not hold".into()));
    } else {
        vec![base]
    };
    // Parameters that no run of the protocol matches differ in what both must agree on
    // (key columns, reveal, security): a mismatch, which the peer finds too.
    let Some(adopted) = candidates.into_iter().find(|c| c.hello_params() == theirs.params) else {
        let theirs = printable(&theirs.params, 200);
        return Err(Error::Mismatch { field: "parameters", ours: job.hello_params(), theirs });
    };
    adopted.validate(role).map_err(|e| refuse(e.to_string()))?;
    Ok(adopted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_follows_the_sizes_and_the_operation() {
        use Operation::*;
        let pick = |op, s, r| choose(op, Security::SemiHonest, s, r).unwrap().protocol;
        assert_eq!(pick(Intersection, 100, 100), Protocol::Ecdh);
        assert_eq!(pick(Intersection, VOLE_FROM - 1, 5), Protocol::Ecdh);
        assert_eq!(pick(Intersection, 5, VOLE_FROM), Protocol::Vole);
        assert_eq!(pick(Intersection, 1 << 20, 1 << 20), Protocol::Vole);
        assert_eq!(pick(Cardinality, 1 << 20, 1 << 20), Protocol::Ecdh);
        for op in [Sum, Shares, Union, PrivateId] {
            assert_eq!(pick(op, 10, 10), Protocol::Mqrpmt);
        }
    }

    #[test]
    fn mqrpmt_takes_the_permuted_oprf_when_the_sender_holds_the_larger_set() {
        let params = |s, r| choose(Operation::Union, Security::SemiHonest, s, r).unwrap().params;
        let poprf = ProtocolParams::Mqrpmt(MqrpmtParams::of(Construction::Poprf));
        assert_eq!(params(1 << 16, 1 << 12), poprf);
        assert_eq!(params(2, 1), poprf);
        assert_eq!(params(2, 0), poprf);
        assert_eq!(params(1000, 1000), ProtocolParams::Mqrpmt(MqrpmtParams::default()));
        assert_eq!(params(1 << 12, 1 << 16), ProtocolParams::Mqrpmt(MqrpmtParams::default()));
    }

    fn hello(protocol: &str, op: &str, params: &str) -> Hello {
        Hello::new(protocol, op, params.into(), Role::Sender, 10)
    }

    #[test]
    fn auto_follows_a_named_protocol_only_when_it_can_run_it() {
        let auto = |op| Job::new(Protocol::Auto, op);
        let ours = |op: Operation| hello("auto", op.name(), "key_columns=1");
        let meet = |job: &Job, theirs: &Hello| meet(job, Role::Receiver, &ours(job.operation), theirs);
        let union = auto(Operation::Union);
        let adopted = meet(&union, &hello("mqrpmt", "union", "key_columns=1;rpmt=poprf;last_move=shuffle"));
        let adopted = adopted.unwrap().expect("the peer's protocol");
        assert_eq!(adopted.params, ProtocolParams::Mqrpmt(MqrpmtParams::of(Construction::Poprf)));
        let sum = meet(&auto(Operation::Sum), &hello("ecdh", "sum", "key_columns=1")).unwrap_err().to_string();
        assert!(sum.contains("auto cannot run the peer's ecdh") && sum.contains("has no operation sum"), "{sum}");
        let judge = "key_columns=1;client_id=61;judge=00";
        let authorized = meet(&auto(Operation::Intersection), &hello("authorized", "intersection", judge));
        assert!(authorized.unwrap_err().to_string().contains("judge's key"));
        let bad = meet(&union, &hello("mqrpmt", "union", "key_columns=2;rpmt=cwprf;last_move=bloom"));
        assert!(matches!(bad, Err(Error::Mismatch { field: "parameters", .. })), "{bad:?}");
        // A peer naming mqrpmt without its fields matches no run of it, though the rest
        // is auto's own.
        let bare = meet(&union, &hello("mqrpmt", "union", "key_columns=1"));
        assert!(matches!(bare, Err(Error::Mismatch { field: "parameters", .. })), "{bare:?}");
        // The peer named what auto cannot run: a disagreement of the peer's making, not a
        // mistake in this side's options.
        for refused in [
            meet(&auto(Operation::Sum), &hello("ecdh", "sum", "key_columns=1")),
            meet(&auto(Operation::Intersection), &hello("authorized", "intersection", judge)),
            meet(&union, &hello("nope", "union", "key_columns=1")),
        ] {
            let e = refused.unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::Peer, "{e}");
        }
        let unknown = meet(&union, &hello("nope", "union", "key_columns=1")).unwrap_err().to_string();
        assert!(unknown.contains("peer's nope: it is not a protocol of setwise"), "{unknown}");
        let hostile = meet(&union, &hello("\u{1b}[2J", "union", "key_columns=1")).unwrap_err().to_string();
        assert!(!hostile.contains('\u{1b}'), "{hostile}");
    }

    #[test]
    fn auto_and_a_named_side_must_agree_who_learns_a_sum() {
        use crate::protocols::SumTo;
        let reverse = Job::new(Protocol::Auto, Operation::Sum).with_sum_to(SumTo::Receiver);
        let ours = hello("auto", "sum", &reverse.hello_params());
        let named = "key_columns=1;rpmt=cwprf;last_move=bloom";
        // An auto side asking for the reverse sum meets a peer naming mqrpmt: the same
        // recipient runs, another is a mismatch.
        let same = meet(&reverse, Role::Receiver, &ours, &hello("mqrpmt", "sum", &format!("{named};sum_to=receiver")));
        assert_eq!(same.unwrap().expect("adopted").sum_to, SumTo::Receiver);
        let other = meet(&reverse, Role::Receiver, &ours, &hello("mqrpmt", "sum", named));
        assert!(matches!(other, Err(Error::Mismatch { field: "parameters", .. })), "{other:?}");
        // A named side asking for the reverse sum meets an auto peer that did not.
        let named_job = reverse.clone().resolved(Protocol::Mqrpmt);
        let ours = hello("mqrpmt", "sum", &named_job.hello_params());
        let forward = hello("auto", "sum", "key_columns=1");
        let e = meet(&named_job, Role::Receiver, &ours, &forward).unwrap_err().to_string();
        assert!(e.contains("sum_to=receiver"), "{e}");
    }

    #[test]
    fn malicious_security_gets_compact_vole_or_a_clear_refusal() {
        let m = |op, s, r| choose(op, Security::Malicious, s, r);
        assert_eq!(m(Operation::Intersection, 10, MALICIOUS_VOLE_FROM - 1).unwrap().protocol, Protocol::Compact);
        assert_eq!(m(Operation::Intersection, MALICIOUS_VOLE_FROM, 10).unwrap().protocol, Protocol::Vole);
        assert_eq!(m(Operation::Intersection, 1 << 20, 10).unwrap().protocol, Protocol::Vole);
        let union = m(Operation::Union, 10, 10).unwrap_err().to_string();
        assert!(union.contains("union with malicious security"), "{union}");
    }
}
