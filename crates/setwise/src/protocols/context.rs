//! What a running role knows: its role, the session id agreed in the hello and both set
//! sizes. The session layer builds a [`Context`] from the hello; a protocol role only
//! reads it.

use crate::crypto::dst::SessionId;
use crate::error::{Deviation, Error, Result};
use std::fmt;

/// Largest set size a peer may announce: 2^32 items.
pub const MAX_SET_SIZE: u64 = 1 << 32;

/// Which side a party plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Holds a set and learns nothing (or what the operation grants the sender).
    Sender,
    /// Holds a set and learns the output.
    Receiver,
    /// Authorises a client's items (authorised PSI); plays the sender's part in hellos.
    Judge,
}

impl Role {
    /// The CLI and report name.
    pub fn name(self) -> &'static str {
        match self {
            Role::Sender => "sender",
            Role::Receiver => "receiver",
            Role::Judge => "judge",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What both sides agreed before the protocol's first message.
#[derive(Debug, Clone)]
pub struct Context {
    /// Per-session value for domain separation.
    pub id: SessionId,
    /// This side's role.
    pub role: Role,
    /// This side's set size.
    pub own_size: usize,
    /// The peer's announced set size.
    pub peer_size: usize,
}

impl Context {
    /// The sender's set size.
    pub fn sender_size(&self) -> usize {
        if self.role == Role::Receiver { self.peer_size } else { self.own_size }
    }

    /// The receiver's set size.
    pub fn receiver_size(&self) -> usize {
        if self.role == Role::Receiver { self.own_size } else { self.peer_size }
    }

    /// Whether either side holds no items (the intersection is empty without a run).
    pub fn has_empty_side(&self) -> bool {
        self.own_size == 0 || self.peer_size == 0
    }

    /// Checks both sizes against a protocol's limit `max` before anything is allocated;
    /// the error names the protocol (`what`), the side and `advice`. This side's own set
    /// is a local error; the peer's is the peer's doing ([`Deviation::BeyondLimit`]).
    pub fn check_sizes(&self, what: &'static str, max: usize, advice: &'static str) -> Result<()> {
        if self.own_size > max {
            let n = self.own_size;
            return Err(Error::params(
                "set_size",
                format!("{what} takes sets of at most {max} items, this side ({}) has {n}; {advice}", self.role),
            ));
        }
        self.check_peer_size(what, max, advice)
    }

    /// Checks the peer's announced size against a limit `max` of `what` (the protocol,
    /// this side's parameters): beyond it is the peer's doing.
    pub fn check_peer_size(&self, what: &'static str, max: usize, advice: &'static str) -> Result<()> {
        if self.peer_size > max {
            return Err(
                Deviation::BeyondLimit { what, announced: self.peer_size as u64, limit: max as u64, advice }.into()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn a_set_beyond_a_limit_is_local_when_own_and_the_peers_doing_when_announced() {
        let ctx = |role, own_size, peer_size| Context { id: SessionId([0; 32]), role, own_size, peer_size };
        let own = ctx(Role::Sender, 11, 3).check_sizes("compact PSI", 10, "use ecdh").unwrap_err();
        assert_eq!(own.kind(), ErrorKind::Local, "{own}");
        assert!(own.to_string().contains("this side (sender) has 11"), "{own}");
        let peer = ctx(Role::Receiver, 3, 11).check_sizes("compact PSI", 10, "use ecdh").unwrap_err();
        assert_eq!(peer.kind(), ErrorKind::Peer, "{peer}");
        assert!(
            matches!(peer, Error::PeerMisbehaved(Deviation::BeyondLimit { announced: 11, limit: 10, .. })),
            "{peer}"
        );
        assert!(peer.to_string().contains("the peer's has 11; use ecdh"), "{peer}");
        ctx(Role::Sender, 10, 10).check_sizes("compact PSI", 10, "").unwrap();
    }
}
