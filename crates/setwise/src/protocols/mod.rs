//! The protocol families. Each role is a function over a [`Channel`]
//! that gets the agreed [`Context`] and records its phases in a [`Report`]; no protocol
//! reads files or sockets itself. Each family's spec ([`Spec::roles`]) maps a [`Call`] to
//! its role functions; [`session::run`](crate::session::run) calls it for a job.

pub mod authorized;
pub mod compact;
mod context;
pub mod ecdh;
pub mod fhe;
pub mod he_query;
pub mod mqrpmt;
pub mod params;
pub mod registry;
mod report;
pub mod reveal;
pub mod spec;
pub mod unbalanced;
pub mod vole;

pub use crate::crypto::security::Security;
pub use context::{Context, MAX_SET_SIZE, Role};
pub use params::{Named, ProtocolParams};
pub use report::{
    Meter, Observed, Phase, PhaseObserver, Progress, RESULT_DETAILS, Report, WORK_PIECE, Work, human_bytes,
};
pub use reveal::Reveal;
pub use spec::Spec;

use crate::error::{Error, Result, UnknownName};
use crate::net::Channel;
use spec::Takes;
use std::fmt;
use std::str::FromStr;

/// A protocol: a handle on its [`Spec`]. Each family names its own in its folder
/// (`Protocol::Vole` in `protocols/vole`), so no list here grows with the protocols;
/// [`registry::ALL`] lists their specs, and names resolve through it ([`FromStr`]).
#[derive(Clone, Copy)]
pub struct Protocol(&'static Spec);

impl Protocol {
    /// The protocol `spec` declares; for a family's own constant.
    pub(crate) const fn declared_by(spec: &'static Spec) -> Self {
        Self(spec)
    }

    /// Its entry in the [registry](registry::ALL).
    pub fn spec(self) -> &'static Spec {
        self.0
    }

    /// The CLI and wire name.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// The operations this protocol implements.
    pub fn operations(self) -> &'static [Operation] {
        self.0.operations
    }

    /// The strongest adversary the protocol withstands in both roles (docs/protocols/).
    pub fn security(self) -> Security {
        self.0.security
    }
}

// Names are unique in the registry (its test checks), so they identify a protocol.
impl PartialEq for Protocol {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Protocol {}

impl fmt::Debug for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Protocol {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Protocol {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        Spec::named(s)
            .map(Spec::protocol)
            .ok_or_else(|| UnknownName::one_of("protocol", s, registry::ALL.iter().map(|spec| spec.name)))
    }
}

/// A set operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Operation {
    /// The receiver learns X ∩ Y.
    Intersection,
    /// The receiver learns |X ∩ Y|.
    Cardinality,
    /// Both learn |X ∩ Y|; the sender, who holds a value per item, learns the sum of
    /// its values over X ∩ Y ([`SumTo::Sender`]); or the receiver learns both and the
    /// sender nothing ([`SumTo::Receiver`]).
    Sum,
    /// Both get XOR shares of the items of X ∩ Y; the receiver learns |X ∩ Y|.
    Shares,
    /// The receiver learns X ∪ Y.
    Union,
    /// Each party gets a pseudorandom ID per item (equal items, equal IDs) and the IDs
    /// of X ∪ Y.
    PrivateId,
    /// Authorised PSI: a judge signs the client's allowed items (the credentials for
    /// later intersections); the client is the receiver, the judge the third role.
    Authorize,
}

impl Operation {
    /// Every operation between two parties (all but [`Operation::Authorize`], which
    /// needs a judge): what `mqrpmt` implements and `auto` can pick a protocol for.
    pub const OF_TWO_PARTIES: &'static [Operation] = &[
        Operation::Intersection,
        Operation::Cardinality,
        Operation::Sum,
        Operation::Shares,
        Operation::Union,
        Operation::PrivateId,
    ];

    /// Whether the sender has an output of its own (the sum unless `sum_to` gives it to
    /// the receiver, its shares, its IDs), beside what `--reveal both` gives it of an
    /// intersection or cardinality.
    pub fn sender_learns(self, sum_to: SumTo) -> bool {
        match self {
            Operation::Sum => sum_to == SumTo::Sender,
            _ => matches!(self, Operation::Shares | Operation::PrivateId),
        }
    }

    /// The CLI and wire name.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Intersection => "intersection",
            Operation::Cardinality => "cardinality",
            Operation::Sum => "sum",
            Operation::Shares => "shares",
            Operation::Union => "union",
            Operation::PrivateId => "private-id",
            Operation::Authorize => "authorize",
        }
    }
}

/// Who learns the sum of `sum` (PSI-card-sum). Both learn |X ∩ Y| with the sum going to
/// the value holder (the sender); the reverse functionality gives the receiver, who
/// holds no values, |X ∩ Y| and the sum, and the sender nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SumTo {
    /// PSI-card-sum as Ion et al. define it (paper Fig. 7): both learn |X ∩ Y|, the
    /// sender, who holds the values, learns their sum over X ∩ Y.
    #[default]
    Sender,
    /// Reverse PSI-card-sum (Garimella et al., CRYPTO 2021; the mqRPMT paper's §1.4 and
    /// §6.1): the receiver learns |X ∩ Y| and the sum of the sender's values over it; the
    /// sender learns nothing. The ad-conversion case: the party that showed the ads learns
    /// the converted value without seeing any purchase. Semi-honest: a receiver that
    /// deviates in its OT choices can learn other sums of the values.
    Receiver,
}

impl SumTo {
    /// Refuses [`SumTo::Receiver`] for an operation other than `sum`, naming it.
    pub fn check(self, op: Operation) -> Result<()> {
        if self == SumTo::Receiver && op != Operation::Sum {
            return Err(Error::usage("sum_to", format!("--sum-to receiver is for the sum operation, not {op}")));
        }
        Ok(())
    }

    /// The CLI and hello name.
    pub fn name(self) -> &'static str {
        match self {
            SumTo::Sender => "sender",
            SumTo::Receiver => "receiver",
        }
    }
}

macro_rules! named_enum {
    ($t:ty, $what:literal, [$($v:expr),+]) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
        impl FromStr for $t {
            type Err = UnknownName;
            fn from_str(s: &str) -> Result<Self, UnknownName> {
                [$($v),+]
                    .into_iter()
                    .find(|v| v.name() == s)
                    .ok_or_else(|| UnknownName::one_of($what, s, [$($v),+].map(|v| v.name())))
            }
        }
    };
}
named_enum!(Security, "security", [Security::SemiHonest, Security::Malicious]);
named_enum!(SumTo, "sum_to", [SumTo::Sender, SumTo::Receiver]);
named_enum!(
    Operation,
    "operation",
    [
        Operation::Intersection,
        Operation::Cardinality,
        Operation::Sum,
        Operation::Shares,
        Operation::Union,
        Operation::PrivateId,
        Operation::Authorize
    ]
);

/// What a role brings to a run besides the job.
#[non_exhaustive]
pub enum Input<'a, I = Vec<u8>> {
    /// Distinct items: every role of `ecdh`, `fhe`, `compact`, `mqrpmt` (but the `sum`
    /// sender), the `unbalanced` receiver, the `authorized` server and an authorising
    /// client.
    Items(&'a [I]),
    /// `mqrpmt` `sum`, sender: distinct items, one value per item, and the declared bound
    /// of every value (it fixes the sum's modulus).
    Values {
        /// The items.
        items: &'a [I],
        /// One value per item.
        values: &'a [u64],
        /// The largest value any item may have.
        bound: u64,
    },
    /// `unbalanced`, sender: the preprocessed database.
    Database(&'a unbalanced::SenderDb),
    /// `authorized` / `partial` intersection, client (receiver): its items and the judge's
    /// credentials; only the items with a signature take part.
    Credentials {
        /// The items.
        items: &'a [I],
        /// The credentials from an authorisation.
        credentials: &'a authorized::Credentials,
    },
    /// The judge of an authorisation: its key, what it allows and how it decides.
    Judge {
        /// The judge's key pair.
        key: &'a authorized::JudgeKey,
        /// Which items it signs.
        policy: &'a dyn authorized::Policy,
        /// Partial fraction and strictness.
        config: authorized::JudgeConfig,
    },
}

impl<I> std::fmt::Debug for Input<'_, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Input::Items(_) => "Input::Items",
            Input::Values { .. } => "Input::Values",
            Input::Database(_) => "Input::Database",
            Input::Credentials { .. } => "Input::Credentials",
            Input::Judge { .. } => "Input::Judge",
        })
    }
}

impl<'a, I: AsRef<[u8]> + Sync> Input<'a, I> {
    /// The items this input brings, if any.
    pub fn items(&self) -> Option<&'a [I]> {
        match self {
            Input::Items(x) | Input::Values { items: x, .. } | Input::Credentials { items: x, .. } => Some(x),
            Input::Database(_) | Input::Judge { .. } => None,
        }
    }

    /// What kind of input it is.
    pub fn kind(&self) -> Takes {
        match self {
            Input::Items(_) => Takes::Items,
            Input::Values { .. } => Takes::Values,
            Input::Database(_) => Takes::Database,
            Input::Credentials { .. } => Takes::Credentials,
            Input::Judge { .. } => Takes::Judge,
        }
    }
}

/// One role's run as the session hands it to its protocol ([`Spec::roles`]): the job's
/// facts, the agreed context and what the role brings, its items as byte slices.
#[derive(Debug)]
pub struct Call<'a> {
    /// The protocol (a concrete one: `auto` is resolved before the roles run).
    pub protocol: Protocol,
    /// The operation.
    pub operation: Operation,
    /// The security asked for.
    pub security: Security,
    /// Who learns the sum of [`Operation::Sum`].
    pub sum_to: SumTo,
    /// The protocol's parameters.
    pub params: &'a ProtocolParams,
    /// The context both sides agreed on (its role is this side's).
    pub ctx: &'a Context,
    /// What the role brings.
    pub input: Input<'a, &'a [u8]>,
    /// An authorised client's items that the judge signed, with their signatures.
    pub usable: Option<&'a [(usize, crate::crypto::bls12_381::G1Affine)]>,
}

impl Call<'_> {
    /// The error for a role and input the protocol has no function for (the session's
    /// checks against the spec keep it from happening).
    pub fn unsupported(&self) -> Error {
        Error::usage(
            "role",
            format!(
                "{} {} has no {} role that takes {}",
                self.protocol,
                self.operation,
                self.ctx.role,
                self.input.kind().name()
            ),
        )
    }
}

/// A protocol's roles: runs the one the call names over the channel ([`Spec::roles`]).
pub type Roles = fn(&mut dyn Channel, Call<'_>, &mut Report) -> Result<Outcome>;

/// What a role learned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The role learns nothing (the sender in most operations).
    Nothing,
    /// Indices, into the role's own item list, of the items in the intersection (sorted).
    Intersection(Vec<usize>),
    /// The size of the intersection.
    Cardinality(u64),
    /// The intersection with each item's label from the sender.
    Labelled {
        /// The sender's names of the label columns.
        columns: Vec<String>,
        /// Sorted indices into the role's items, each with its serialised label
        /// ([`unbalanced::decode_label`] splits it into the columns).
        rows: Vec<(usize, Vec<u8>)>,
    },
    /// `sum`, for the party holding the values: |X ∩ Y| and the sum of its values over X ∩ Y.
    CardinalitySum {
        /// |X ∩ Y|.
        cardinality: u64,
        /// The sum of the values of the items in X ∩ Y.
        sum: u128,
    },
    /// `union`: the peer's items that are not in the own set (X ∪ Y is the own set plus
    /// these), in no meaningful order.
    Union(Vec<Vec<u8>>),
    /// `shares`: this party's share of each row.
    Shares(mqrpmt::Shares),
    /// `private-id`: the ID of each own item (in item order) and the sorted IDs of X ∪ Y.
    PrivateIds {
        /// One ID per own item.
        own: Vec<[u8; 32]>,
        /// The IDs of the union, sorted.
        union: Vec<[u8; 32]>,
    },
    /// `authorize`, client: the judge's signatures on its allowed items, and the indices
    /// of the items the judge refused.
    Credentials {
        /// The credentials, to save and present in intersections.
        credentials: Box<authorized::Credentials>,
        /// Indices into the client's items of the refused ones.
        refused: Vec<usize>,
    },
    /// `authorize`, judge: what it signed for whom.
    Judged(authorized::JudgeOutcome),
}
