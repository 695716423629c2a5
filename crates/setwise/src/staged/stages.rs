//! What a staged run's stages are called, and how an error names the stage, the role and
//! what it concerned (shared by the runner and the workers).

use crate::error::Error;

/// Most buckets whose roles a process keeps running between stages (a thread each):
/// `setwise stage run`, and each executor of a cluster run.
pub const MAX_LIVE_BUCKETS: u32 = 256;
use crate::protocols::Role;

/// The receiver's stages, in order.
pub const RECEIVER_STAGES: &[u8] = &[0, 1, 3];
/// The sender's stages, in order.
pub const SENDER_STAGES: &[u8] = &[0, 1, 2];

/// What stage `n` of a staged ecdh run does.
pub fn stage_name(n: u8) -> &'static str {
    match n {
        0 => "hello",
        1 => "blind",
        2 => "re-blind",
        3 => "finish",
        _ => "unknown",
    }
}

/// The stages of `role`.
pub fn stages_of(role: Role) -> &'static [u8] {
    if role == Role::Receiver { RECEIVER_STAGES } else { SENDER_STAGES }
}

/// What stage `n` of a staged `protocol` run does.
pub fn stage_label(protocol: &str, n: u8) -> String {
    match (protocol, n) {
        ("ecdh", n) => stage_name(n).into(),
        (_, 0) => "hello".into(),
        (_, 1) => "bucket sizes".into(),
        (_, n) => format!("round {}", n - 1),
    }
}

pub(super) fn peer_of(role: Role) -> Role {
    if role == Role::Receiver { Role::Sender } else { Role::Receiver }
}

/// Where an error happened: the stage (number and name), and the peer message and
/// bucket it concerned.
pub(super) fn at_named(
    stage: u8,
    name: impl std::fmt::Display,
    role: Role,
    what: impl Into<String>,
) -> impl FnOnce(Error) -> Error {
    let what = what.into();
    move |e| {
        let head = format!("stage {stage} ({role}: {name})");
        // An error that names this stage and what this would add says where it was.
        if matches!(&e, Error::Stage { at, .. } if at.starts_with(&head) && at.contains(&what)) {
            return e;
        }
        let at = if what.is_empty() { head } else { format!("{head}, {what}") };
        Error::Stage { at, source: Box::new(e) }
    }
}
