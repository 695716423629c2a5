//! The protocol families. Each role is a function over a [`Channel`](crate::net::Channel);
//! no protocol reads files or sockets itself.

pub mod authorized;
pub mod chunks;
pub mod compact;
pub mod ecdh;
pub mod fhe;
mod he_query;
pub mod mqrpmt;
pub mod unbalanced;

use std::fmt;
use std::str::FromStr;

/// A protocol family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Protocol {
    /// Diffie–Hellman PSI over ristretto255.
    Ecdh,
    /// FHE-PSI with depth-bounded BFV.
    Fhe,
    /// Unbalanced PSI from HE with a preprocessed sender database (APSI design).
    Unbalanced,
    /// Authorised PSI: the client's items carry a judge's BLS signatures.
    Authorized,
    /// Partial-APSI: the judge saw only a fraction of the client's items.
    Partial,
    /// Compact malicious PSI for small sets (Rosulek–Trieu).
    Compact,
}

impl Protocol {
    /// The CLI and wire name.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ecdh => "ecdh",
            Protocol::Fhe => "fhe",
            Protocol::Unbalanced => "unbalanced",
            Protocol::Authorized => "authorized",
            Protocol::Partial => "partial",
            Protocol::Compact => "compact",
        }
    }

    /// The operations this protocol implements.
    pub fn operations(self) -> &'static [Operation] {
        match self {
            Protocol::Ecdh => &[Operation::Intersection, Operation::Cardinality],
            Protocol::Fhe | Protocol::Unbalanced | Protocol::Authorized | Protocol::Partial | Protocol::Compact => {
                &[Operation::Intersection]
            }
        }
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
}

impl Operation {
    /// The CLI and wire name.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Intersection => "intersection",
            Operation::Cardinality => "cardinality",
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
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                [$($v),+].into_iter().find(|v| v.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = [$($v),+].iter().map(|v| v.name()).collect();
                    format!("unknown {} '{s}' (expected one of: {})", $what, names.join(", "))
                })
            }
        }
    };
}
named_enum!(
    Protocol,
    "protocol",
    [Protocol::Ecdh, Protocol::Fhe, Protocol::Unbalanced, Protocol::Authorized, Protocol::Partial, Protocol::Compact]
);
named_enum!(Operation, "operation", [Operation::Intersection, Operation::Cardinality]);

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
}
