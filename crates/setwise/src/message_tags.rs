//! Every message tag on the wire, in one constant list. Each entry reads its tag and name
//! off the declaration itself (the message type's [`Message::TAG`], the stream's or
//! counted stream's constant), so the list cannot disagree with the code, and **no two
//! messages share a tag: the crate does not compile otherwise** (a `const` assertion
//! over [`ALL`]). What the list can miss is a new declaration: `tests/suite/message_tags.rs`
//! checks that every tag declared in the source is here. The `messages` fuzz target
//! decodes each listed tag and refuses to run while one has no decoder.

use crate::protocols::authorized::messages as auth;
use crate::protocols::mqrpmt::messages as mq;
use crate::protocols::unbalanced::messages as ub;
use crate::protocols::{compact, ecdh, fhe, reveal, vole as vole_psi};
use crate::session::TAG_HELLO;
use crate::wire::msg::{Message, TAG_ABORT};
use crate::wire::stream::{Counted, Stream};
use crate::{ot, vole};

/// One message tag: its byte, the message's name in errors, and the module declaring it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageTag {
    /// The first byte of every frame of the message.
    pub tag: u8,
    /// The message's name in errors.
    pub name: &'static str,
    /// The module that declares it (`ecdh`, `ot`, …).
    pub module: &'static str,
}

const fn message<M: Message>(module: &'static str) -> MessageTag {
    MessageTag { tag: M::TAG, name: M::NAME, module }
}

const fn stream<const N: usize>(s: Stream<N>, module: &'static str) -> MessageTag {
    MessageTag { tag: s.tag, name: s.name, module }
}

const fn counted(c: Counted, module: &'static str) -> MessageTag {
    MessageTag { tag: c.tag, name: c.name, module }
}

/// Every message tag, in the order of the wire format's sections.
pub const ALL: &[MessageTag] = &[
    MessageTag { tag: TAG_HELLO, name: "Hello", module: "session" },
    MessageTag { tag: TAG_ABORT, name: "Abort", module: "wire" },
    stream(ecdh::messages::RECEIVER_BLINDED, "ecdh"),
    stream(ecdh::messages::SENDER_BLINDED, "ecdh"),
    stream(ecdh::messages::DOUBLE_BLINDED, "ecdh"),
    message::<ecdh::messages::Request>("ecdh"),
    message::<ecdh::messages::Response>("ecdh"),
    message::<fhe::messages::Key>("fhe"),
    message::<fhe::messages::Query>("fhe"),
    message::<fhe::messages::Result>("fhe"),
    message::<ub::Params>("unbalanced"),
    stream(ub::OPRF_REQUEST, "unbalanced"),
    stream(ub::OPRF_RESPONSE, "unbalanced"),
    message::<ub::Key>("unbalanced"),
    message::<ub::Query>("unbalanced"),
    message::<ub::ResultHeader>("unbalanced"),
    message::<ub::ResultPart>("unbalanced"),
    message::<auth::JudgeKeyMessage>("authorized"),
    counted(auth::ITEMS, "authorized"),
    stream(auth::COMMITMENTS, "authorized"),
    message::<auth::Challenge>("authorized"),
    message::<auth::Opening>("authorized"),
    counted(auth::SIGNATURES, "authorized"),
    message::<auth::ServerKey>("authorized"),
    stream(auth::DIGESTS, "authorized"),
    stream(auth::OPRF_REQUEST, "authorized"),
    stream(auth::OPRF_RESPONSE, "authorized"),
    message::<auth::AuthHeader>("authorized"),
    message::<compact::messages::SenderKey>("compact"),
    message::<compact::messages::Polynomial>("compact"),
    stream(compact::messages::TAGS, "compact"),
    message::<ot::messages::BaseSenderPoint>("ot"),
    message::<ot::messages::BaseReceiverPoints>("ot"),
    message::<ot::messages::CorrectionChunk>("ot"),
    // The tag of every size of masked message.
    counted(ot::messages::masked(1), "ot"),
    message::<ot::messages::KosCheck>("ot"),
    stream(mq::SERVER_ITEMS, "mqrpmt"),
    stream(mq::SHUFFLED, "mqrpmt"),
    message::<mq::FilterPart>("mqrpmt"),
    stream(mq::CLIENT_ITEMS, "mqrpmt"),
    message::<mq::Width>("mqrpmt"),
    message::<mq::MaskedSum>("mqrpmt"),
    stream(mq::UNION_IDS, "mqrpmt"),
    message::<mq::UnionCount>("mqrpmt"),
    stream(mq::QUERY_TAGS, "mqrpmt"),
    message::<reveal::Revealed>("reveal"),
    stream(reveal::REVEALED_DIGESTS, "reveal"),
    stream(vole::messages::NOISY_CORRECTIONS, "vole"),
    stream(vole::messages::PPRF_LEVEL_SUMS, "vole"),
    stream(vole::messages::PPRF_LEAF_SUMS, "vole"),
    message::<vole_psi::messages::StoreSeed>("protocols::vole"),
    stream(vole_psi::messages::STORE, "protocols::vole"),
    stream(vole_psi::messages::TAGS, "protocols::vole"),
    message::<vole_psi::messages::MaskCommitment>("protocols::vole"),
    message::<vole_psi::messages::MaskShare>("protocols::vole"),
    message::<vole::messages::NoisyCheck>("vole"),
    message::<vole::messages::SparseChallenge>("vole"),
    message::<vole::messages::SparseAnswer>("vole"),
];

/// Whether no two entries of `tags` share a tag.
const fn distinct(tags: &[MessageTag]) -> bool {
    let mut i = 0;
    while i < tags.len() {
        let mut j = 0;
        while j < i {
            if tags[i].tag == tags[j].tag {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

const _: () = assert!(distinct(ALL), "two messages share a tag: see message_tags::ALL");

/// Every message tag, as a list ([`ALL`]).
pub fn all() -> Vec<MessageTag> {
    ALL.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_two_messages_share_a_tag() {
        let all = all();
        for (i, a) in all.iter().enumerate() {
            for b in &all[..i] {
                assert_ne!(a.tag, b.tag, "{a:?} and {b:?}");
            }
        }
        assert_eq!(all[0].tag, 0x01, "the hello's tag");
    }
}
