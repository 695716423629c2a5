//! mqrpmt's parameters: the membership test's construction and its last move (the
//! protocol's own code is in `protocols::mqrpmt`, which re-exports these). They live here,
//! beside the other kinds of [`ProtocolParams`](super::ProtocolParams), because the spec
//! every family declares names that enum: were it to import a family, the families
//! that build on one another (mqrpmt on vole's OPRF) would import each other in a cycle.

use crate::error::{Error, Result, UnknownName};

/// What both sides of an mqRPMT run agree on besides the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MqrpmtParams {
    /// The membership test's construction.
    pub construction: Construction,
    /// How the client returns the server's keyed items (`poprf`: only
    /// [`LastMove::Shuffle`]).
    pub last_move: LastMove,
}

impl MqrpmtParams {
    /// The construction with its default last move ([`Construction::default_last_move`]).
    pub fn of(construction: Construction) -> Self {
        Self { construction, last_move: construction.default_last_move() }
    }

    /// How a benchmark row names these parameters: `cwprf/bloom`, `cwprf/shuffle`, and
    /// `poprf` (whose only last move is the shuffle).
    pub fn label(&self) -> String {
        match self.construction {
            Construction::Poprf if self.last_move == LastMove::Shuffle => self.construction.to_string(),
            c => format!("{c}/{}", self.last_move),
        }
    }

    /// Checks that the last move exists for the construction.
    pub fn check(&self) -> Result<()> {
        if self.construction == Construction::Poprf && self.last_move == LastMove::Bloom {
            return Err(Error::params(
                "last_move",
                "mqrpmt: the poprf construction has no Bloom-filter last move (the receiver unmasks the permuted \
                 points, so they travel as points): use the shuffle last move (poprf's default), or the cwprf \
                 construction for the filter"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// The membership test's construction (paper §4 and §5). It is named in the hello so
/// that a peer with another construction is refused rather than misread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Construction {
    /// Fig. 3: from a commutative weak PRF, F_k(P) = k·P on ristretto255. Takes either
    /// last move; 2 multiplications per item on each side.
    #[default]
    Cwprf,
    /// Figs. 5–6: from a permuted OPRF over the same map as a commutative weak
    /// pseudorandom permutation (P ↦ k·P is a bijection of the prime-order group, undone
    /// by k⁻¹). Shuffled list only; 1 multiplication and one short tag per client item,
    /// 3 per server item: the cheaper one when the client (hello sender) holds the
    /// larger set.
    Poprf,
}

impl Construction {
    /// Every construction.
    pub const ALL: [Construction; 2] = [Construction::Cwprf, Construction::Poprf];

    /// The CLI and hello name.
    pub fn name(self) -> &'static str {
        match self {
            Construction::Cwprf => "cwprf",
            Construction::Poprf => "poprf",
        }
    }

    /// The last move when none is named: the Bloom filter for cwPRF, the shuffled list
    /// (its only one) for pOPRF.
    pub fn default_last_move(self) -> LastMove {
        match self {
            Construction::Cwprf => LastMove::Bloom,
            Construction::Poprf => LastMove::Shuffle,
        }
    }
}

impl std::fmt::Display for Construction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Construction {
    type Err = UnknownName;
    fn from_str(s: &str) -> std::result::Result<Self, UnknownName> {
        Construction::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownName::one_of("mqRPMT construction", s, Construction::ALL.map(Construction::name)))
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
    type Err = UnknownName;
    fn from_str(s: &str) -> std::result::Result<Self, UnknownName> {
        const ALL: [LastMove; 2] = [LastMove::Bloom, LastMove::Shuffle];
        ALL.into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownName::one_of("last move", s, ALL.map(LastMove::name)))
    }
}
