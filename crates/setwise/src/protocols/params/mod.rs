//! A protocol's own parameters ([`ProtocolParams`]) and the named options a frontend sets
//! them by ([`Named`]): a CLI flag or a Python keyword reaches a protocol as a name and
//! a text value, and the protocol's [`Spec`](super::Spec) alone decides what it means.

pub mod mqrpmt;

use crate::crypto::bls12_381::G2Affine;
use crate::error::{Result, UnknownName};
use mqrpmt::MqrpmtParams;

/// Per-protocol parameters of a [`Job`](crate::session::Job).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ProtocolParams {
    /// `ecdh`, `fhe`, `compact`, `vole`: nothing beyond the protocol and the operation
    /// (the FHE parameters follow from the two set sizes).
    #[default]
    None,
    /// `mqrpmt`: the construction and the last move of the membership test.
    Mqrpmt(MqrpmtParams),
    /// `unbalanced`: what the receiver expects of the sender's database.
    Unbalanced(UnbalancedJob),
    /// `authorized`, `partial`: whose credentials, signed by which judge.
    Authorized(AuthorizedJob),
}

impl ProtocolParams {
    /// How a benchmark row or a log line names these parameters, if they are more than
    /// the protocol's name: `cwprf/bloom`, `poprf` (its only last move left unsaid).
    pub fn label(&self) -> Option<String> {
        match self {
            ProtocolParams::Mqrpmt(m) => Some(m.label()),
            _ => None,
        }
    }
}

/// `unbalanced` job parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UnbalancedJob {
    /// Receiver: refuse a database whose parameters have another fingerprint
    /// (`UnbalancedParams::fingerprint`). The sender ignores it.
    pub fingerprint: Option<String>,
}

/// `authorized` / `partial` job parameters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthorizedJob {
    /// The client identity the judge's signatures are bound to. An intersection's server
    /// and client must both name it; an authorisation's client asks for it (the judge
    /// learns it from the request).
    pub client_id: Vec<u8>,
    /// The judge's public key (intersection: both sides; authorisation: unused).
    pub judge_key: Option<G2Affine>,
}

/// An option a protocol takes from a frontend, as its spec declares it.
#[derive(Debug, Clone, Copy)]
pub struct OptionDoc {
    /// Its name: the Python keyword; the CLI's flag is named alike (`--rpmt`,
    /// `--last-move`, `--client-id`, `--judge-key`; `fingerprint` is
    /// `--params-fingerprint`).
    pub name: &'static str,
    /// The values it may take, when they are a fixed list (a benchmark runs each).
    pub values: &'static [&'static str],
    /// What it sets.
    pub help: &'static str,
}

/// Options named by a frontend, each a name and its text; a protocol's spec turns them
/// into its [`ProtocolParams`] ([`Spec::params`](super::Spec::params)) and refuses any
/// it does not take.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Named {
    pairs: Vec<(String, String)>,
}

impl Named {
    /// No option named: the protocol's defaults.
    pub fn none() -> Self {
        Self::default()
    }

    /// These options and `name` set to `value`, if there is one (a later value of the
    /// same name replaces an earlier one).
    pub fn with(mut self, name: &str, value: Option<impl Into<String>>) -> Self {
        if let Some(v) = value {
            self.pairs.retain(|(n, _)| n != name);
            self.pairs.push((name.to_string(), v.into()));
        }
        self
    }

    /// The value named `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The names given, in the order they were.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pairs.iter().map(|(n, _)| n.as_str())
    }

    /// The value of `name` parsed, if named; an unparsable value is an error naming it.
    pub fn parse<T: std::str::FromStr<Err = UnknownName>>(&self, name: &str) -> Result<Option<T>> {
        Ok(self.get(name).map(str::parse).transpose()?)
    }
}

/// A protocol without options: [`ProtocolParams::None`].
pub fn no_params(_: &Named) -> Result<ProtocolParams> {
    Ok(ProtocolParams::None)
}
