//! The library's error type. Its variants separate the caller's mistakes (input, options,
//! files), the peer's garbage (bytes that do not decode), the peer's deviations (messages
//! that decode but break the protocol) and the network, so that a frontend can map them
//! to exit codes or exceptions ([`Error::kind`]).

mod he;
mod input;
mod net;
mod wire;

pub use he::HeError;
pub use input::InputError;
pub use net::{NetError, TlsError};
use std::path::PathBuf;
pub use wire::WireError;

/// A setwise failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The transport failed; `phase` says what the protocol was doing.
    #[error("{phase}: {source}")]
    Net {
        /// The protocol phase.
        phase: &'static str,
        /// The transport error.
        #[source]
        source: NetError,
    },
    /// The peer sent bytes that do not decode.
    #[error("malformed message from peer: {0}")]
    Malformed(#[from] WireError),
    /// The peer sent an invalid group element.
    #[error("peer sent an invalid group element in {what} (item {index})")]
    InvalidPoint {
        /// The message.
        what: &'static str,
        /// Index of the element in the message.
        index: usize,
    },
    /// The two sides' hellos disagree.
    #[error("session mismatch: {field}: this side has {ours}, the peer has {theirs}")]
    Mismatch {
        /// The hello field.
        field: &'static str,
        /// Our value.
        ours: String,
        /// The peer's value.
        theirs: String,
    },
    /// The peer deviated from the protocol in a way that decodes but is not allowed.
    #[error("peer misbehaved: {0}")]
    PeerMisbehaved(#[from] Deviation),
    /// The peer's hello names a protocol this side's `auto` cannot run with it (another
    /// operation, a weaker security, credentials auto does not hold): the peer's choice,
    /// not a mistake in this side's options.
    #[error("auto cannot run the peer's {protocol}: {why}")]
    PeerProtocol {
        /// The protocol the peer named (escaped and bounded).
        protocol: String,
        /// Why auto cannot run it.
        why: String,
    },
    /// The peer ended the session and said why.
    #[error("the peer aborted the session: {0}")]
    PeerAborted(String),
    /// The caller's input (items, values, labels) is unusable.
    #[error(transparent)]
    Input(#[from] InputError),
    /// Parameters are invalid or unsupported.
    #[error("invalid parameters: {why}")]
    Params {
        /// The parameter, option or file at fault (`key_columns`, `table_size`,
        /// `params_file`, …), for a frontend to point at.
        field: &'static str,
        /// What is wrong, naming the parameter in words.
        why: String,
    },
    /// A named option (a protocol, operation, security, …) names nothing this library has.
    #[error(transparent)]
    Unknown(#[from] UnknownName),
    /// The caller asked for what this library does not do: a job, role and input it does
    /// not run, or a step a staged run's state does not allow.
    #[error("{why}")]
    Usage {
        /// What is at fault (`role`, `input`, `credentials`, `workdir`, `exchange_key`,
        /// `run_seed`, …), for a frontend to point at; `internal` when nothing the caller
        /// gave is (a thread that could not start, a role that panicked).
        what: &'static str,
        /// What is wrong, in words.
        why: String,
    },
    /// A file (database, credentials, key) could not be read or written.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file is not what it should be: foreign, truncated or corrupted.
    #[error("{}: {why}", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A stage of a staged run failed; `at` names the stage and the bucket (or part) and
    /// `source` says what went wrong there.
    #[error("{at}: {source}")]
    Stage {
        /// The stage and bucket, e.g. `stage 3 (receiver: finish), sender's stage 2, bucket 7`.
        at: String,
        /// The failure.
        #[source]
        source: Box<Error>,
    },
    /// A staged run's worker on another machine (a cluster's executor) failed, and said
    /// how ([`crate::staged::work`]).
    #[error("{message}")]
    Worker {
        /// Whose fault it was, as the worker judged.
        kind: ErrorKind,
        /// Its error, in full.
        message: String,
    },
    /// A homomorphic-encryption failure: parameters, a peer's ciphertext or key that does
    /// not fit them, or an operation error.
    #[error(transparent)]
    He(#[from] HeError),
}

/// A name (a protocol, operation, security, construction, …) that is not one of those
/// the option takes: what a [`FromStr`](std::str::FromStr) of the library's named
/// options returns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{given}' (expected {expected})")]
pub struct UnknownName {
    /// What was being named (`protocol`, `operation`, …).
    pub what: &'static str,
    /// The name given (shown escaped and cut short).
    pub given: String,
    /// What it may be, in words (`one of: ecdh, vole`).
    pub expected: String,
}

impl UnknownName {
    /// `given` is not a `what`; it may be one of `names`.
    pub fn one_of<'a>(what: &'static str, given: &str, names: impl IntoIterator<Item = &'a str>) -> Self {
        let names: Vec<&str> = names.into_iter().collect();
        Self::new(what, given, format!("one of: {}", names.join(", ")))
    }

    /// `given` is not a `what`; `expected` says what it may be.
    pub fn new(what: &'static str, given: &str, expected: impl Into<String>) -> Self {
        Self { what, given: shown(given), expected: expected.into() }
    }
}

/// A caller's or a file's text as an error shows it: control characters escaped, at most
/// 64 characters.
fn shown(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().take(64) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if text.chars().nth(64).is_some() {
        out.push('…');
    }
    out
}

/// Whose fault an [`Error`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The caller's: input, options, parameters, files.
    Local,
    /// The peer's: garbage, deviation, disagreement, abort.
    Peer,
    /// The network's.
    Network,
}

impl Error {
    /// Whose fault the failure is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Stage { source, .. } => source.kind(),
            Error::Worker { kind, .. } => *kind,
            Error::Net { .. } => ErrorKind::Network,
            Error::Input(_)
            | Error::Params { .. }
            | Error::Unknown(_)
            | Error::Usage { .. }
            | Error::File { .. }
            | Error::Damaged { .. }
            | Error::He(HeError::Params(_) | HeError::Op(_)) => ErrorKind::Local,
            _ => ErrorKind::Peer,
        }
    }

    /// True when the failure is the caller's (bad input, parameters or files) rather than
    /// the peer's or the network's.
    pub fn is_local(&self) -> bool {
        self.kind() == ErrorKind::Local
    }

    /// A request this library does not run, or a step a staged run's state does not
    /// allow: `what` is at fault, because `why`.
    pub fn usage(what: &'static str, why: impl Into<String>) -> Self {
        Error::Usage { what, why: why.into() }
    }

    /// The parameter, option or piece of a run at fault, when the error names one:
    /// a frontend points at it (Python's `err.field`).
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Error::Params { field, .. } => Some(field),
            Error::Usage { what, .. } => Some(what),
            Error::Stage { source, .. } => source.field(),
            _ => None,
        }
    }

    /// Invalid or unsupported parameters: `field` is at fault, because `why`.
    pub(crate) fn params(field: &'static str, why: String) -> Self {
        Error::Params { field, why }
    }

    /// This error, its message prefixed with `place` (a file, a preset) when it is about
    /// parameters; the parameter at fault stays named.
    pub(crate) fn in_params_of(self, place: impl std::fmt::Display) -> Self {
        match self {
            Error::Params { field, why } => Error::Params { field, why: format!("{place}: {why}") },
            other => other,
        }
    }

    /// An I/O failure on `path`.
    pub(crate) fn file(path: &std::path::Path, source: std::io::Error) -> Self {
        Error::File { path: path.to_path_buf(), source }
    }

    /// `path` is damaged or foreign, because `why`.
    pub(crate) fn damaged(path: &std::path::Path, why: impl Into<String>) -> Self {
        Error::Damaged { path: path.to_path_buf(), why: why.into() }
    }
}

/// How a peer deviated from the protocol with messages that decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Deviation {
    /// The hello does not start with setwise's magic bytes.
    #[error("the peer is not a setwise peer (bad magic in hello)")]
    NotSetwise,
    /// The peer's TLS certificate names another client than the one in the request.
    #[error("the peer's TLS certificate is for {certified}, but the session is for client ID {claimed}")]
    IdentityMismatch {
        /// The client ID the request or this side's job names (escaped).
        claimed: String,
        /// The identity in the peer's certificate (escaped).
        certified: String,
    },
    /// The peer's TLS certificate names no identity where one is needed.
    #[error(
        "the peer's TLS certificate names no identity (no DNS, IP or URI name, no common name), and authorised PSI binds credentials to one"
    )]
    UnnamedCertificate,
    /// A judge whose allow-list names clients met a client without a certificate.
    #[error(
        "the judge's allow-list names clients, so a client must prove who it is with a TLS certificate (mutual TLS); this one only states it is {claimed}"
    )]
    UnauthenticatedClient {
        /// The client ID the request states (escaped).
        claimed: String,
    },
    /// The peer announced more items than this side accepts.
    #[error("announced set size {announced} exceeds the limit {limit}")]
    SetTooLarge {
        /// The announced size.
        announced: u64,
        /// The limit.
        limit: u64,
    },
    /// A list that must hold distinct elements repeats one.
    #[error("{what}: repeated elements")]
    Repeated {
        /// The message.
        what: &'static str,
    },
    /// A message holds a number of elements other than the protocol requires.
    #[error("{what}: {got} elements where the protocol requires {expected}")]
    Count {
        /// The message.
        what: &'static str,
        /// Elements received.
        got: u64,
        /// Elements required.
        expected: u64,
    },
    /// The peer's set is larger than the protocol, or this side's parameters, take: no
    /// run is possible, and not through this side's doing.
    #[error("{what} takes sets of at most {limit} items, the peer's has {announced}; {advice}")]
    BeyondLimit {
        /// What has the limit (`compact PSI`, `this database's parameters`).
        what: &'static str,
        /// The peer's announced size.
        announced: u64,
        /// The limit.
        limit: u64,
        /// What the peer can do instead.
        advice: &'static str,
    },
    /// The peer's parameters do not fit this side's items (an honest peer's fail with
    /// negligible probability).
    #[error("the peer's {what} do not fit this side's items: {why}")]
    UnfitParams {
        /// Which parameters.
        what: &'static str,
        /// Why not.
        why: String,
    },
    /// A value is outside what honest inputs can produce.
    #[error("{what}: {value} is outside the possible range {min}..={max}")]
    OutOfRange {
        /// What the value is.
        what: &'static str,
        /// The value received.
        value: u128,
        /// The smallest possible value.
        min: u128,
        /// The largest possible value.
        max: u128,
    },
    /// An element that must be a canonical field element is not.
    #[error("{what}: element {index} is not a canonical field element")]
    NotCanonical {
        /// The message.
        what: &'static str,
        /// Index of the element.
        index: usize,
    },
    /// A consistency check of a malicious-secure sub-protocol failed: the peer sent
    /// values that no honest run produces.
    #[error("{what} failed its consistency check ({meaning})")]
    FailedCheck {
        /// The sub-protocol checked.
        what: &'static str,
        /// What a failure means.
        meaning: &'static str,
    },
    /// The compact receiver's polynomial is constant (it would give every item one key).
    #[error("the receiver's polynomial is constant")]
    ConstantPolynomial,
    /// Indices that must be in range and increasing are not.
    #[error("{what}: indices out of range or not increasing")]
    BadIndices {
        /// The message.
        what: &'static str,
    },
    /// Partial-APSI: the client opened another commitment than the one challenged.
    #[error("opened commitment {got} instead of {expected}")]
    WrongOpening {
        /// The index opened.
        got: usize,
        /// The index challenged.
        expected: usize,
    },
    /// A proof or signature does not verify.
    #[error("{what} does not verify")]
    Unverified {
        /// What failed to verify.
        what: &'static str,
    },
    /// A transferred item is not an item encoding.
    #[error("{what} {index} is not an item encoding")]
    NotAnItem {
        /// The message.
        what: &'static str,
        /// Index of the item.
        index: usize,
    },
    /// Private-ID: the union's IDs are not sorted and distinct.
    #[error("the union IDs are not sorted and distinct")]
    UnsortedUnion,
    /// Private-ID: the union lacks the ID of one of our items.
    #[error("the union IDs lack the ID of our item {index}")]
    IncompleteUnion {
        /// Our item.
        index: usize,
    },
    /// A staged run's message in the exchange is missing, damaged or does not agree with
    /// its marker or the peer's hello.
    #[error("{why}")]
    StagedMessage {
        /// What is wrong, naming the file.
        why: String,
    },
    /// The unbalanced sender's parameters decode but cannot be used.
    #[error("the sender's parameters are unusable: {why}")]
    UnusableParams {
        /// Why.
        why: String,
    },
}

/// Attaches a phase name to transport errors.
pub(crate) trait NetContext<T> {
    fn during(self, phase: &'static str) -> Result<T, Error>;
}

impl<T> NetContext<T> for Result<T, NetError> {
    fn during(self, phase: &'static str) -> Result<T, Error> {
        self.map_err(|source| Error::Net { phase, source })
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whose_fault_an_error_is() {
        // An operation of the HE library that fails on this side's own values.
        assert_eq!(Error::He(HeError::Op("encoding".into())).kind(), ErrorKind::Local);
        assert_eq!(Error::He(HeError::Params("degree".into())).kind(), ErrorKind::Local);
        let peer_ciphertext = HeError::Malformed { what: "query", why: "level".into() };
        assert_eq!(Error::He(peer_ciphertext).kind(), ErrorKind::Peer);
        let unknown: Error = UnknownName::one_of("protocol", "nope", ["ecdh", "vole"]).into();
        assert_eq!(unknown.kind(), ErrorKind::Local);
    }

    #[test]
    fn an_unknown_name_says_what_it_may_be_and_shows_the_name_escaped_and_bounded() {
        let e = UnknownName::one_of("protocol", "vol\u{1b}[2J", ["ecdh", "vole"]);
        assert_eq!(e.to_string(), "unknown protocol 'vol\\u{1b}[2J' (expected one of: ecdh, vole)");
        let long = UnknownName::new("operation", &"x".repeat(500), "intersection");
        assert_eq!(long.given.chars().count(), 65, "64 characters and an ellipsis");
    }
}
