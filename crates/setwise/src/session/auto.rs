//! `--protocol auto`: both parties name `auto` in the hello; then each picks the same
//! protocol from the operation and the two set sizes, which the hello has just told
//! both of them. The rule is deterministic, so the parties agree without another
//! message; the crossovers are the ones measured in docs/benchmarks.md ("auto").
//!
//! Only semi-honest protocols on plain items are candidates: a sender with a prepared
//! database names `unbalanced`, and malicious security is asked for by naming `compact`.

use crate::protocols::{Operation, Protocol};

/// Below this many items on the larger side, intersection runs `ecdh`; from it on, `vole`.
///
/// Measured (docs/benchmarks.md, "auto"): on loopback `vole` is the faster at every size
/// (0.02 s against ecdh's 0.29 s at 2^12 × 2^12), but over an 80 ms link its six round
/// trips cost 0.46 s, against ecdh's 0.37 s at 2^12 with a tenth of the bytes; at
/// 2^16 × 2^8 `vole` wins on both links (0.54 s against 2.3 s). The crossover on the slow
/// link lies between 2^12 and 2^16; 2^13 keeps every choice within about 0.1 s of the
/// best on either link.
pub const VOLE_FROM: usize = 1 << 13;

/// The protocol `auto` runs for `op` between a sender of `sender` and a receiver of
/// `receiver` items, and why (for the report).
pub fn choose(op: Operation, sender: usize, receiver: usize) -> (Protocol, &'static str) {
    match op {
        Operation::Intersection if sender.max(receiver) >= VOLE_FROM => {
            (Protocol::Vole, "intersection of a set of 2^13 items or more: vole is the fastest on any link")
        }
        Operation::Intersection => (
            Protocol::Ecdh,
            "intersection of sets under 2^13 items: ecdh takes two round trips and a tenth of vole's bytes",
        ),
        Operation::Cardinality => (Protocol::Ecdh, "cardinality: ecdh, as fast as mqrpmt's and with fewer round trips"),
        _ => (Protocol::Mqrpmt, "sum, shares, union and private-id: only mqrpmt implements them"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_follows_the_sizes_and_the_operation() {
        use Operation::*;
        assert_eq!(choose(Intersection, 100, 100).0, Protocol::Ecdh);
        assert_eq!(choose(Intersection, VOLE_FROM - 1, 5).0, Protocol::Ecdh);
        assert_eq!(choose(Intersection, 5, VOLE_FROM).0, Protocol::Vole);
        assert_eq!(choose(Intersection, 1 << 20, 1 << 20).0, Protocol::Vole);
        assert_eq!(choose(Cardinality, 1 << 20, 1 << 20).0, Protocol::Ecdh);
        for op in [Sum, Shares, Union, PrivateId] {
            assert_eq!(choose(op, 10, 10).0, Protocol::Mqrpmt);
        }
    }
}
