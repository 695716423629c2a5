//! Domain-separated hashing.
//!
//! Every hash in setwise is keyed by a [`Domain`]: a named protocol and purpose (the
//! label constants of this module) plus the per-session identifier, so values from one protocol,
//! purpose or session never collide with another's.

use blake3::Hasher;

// Domain-separation labels, one per (protocol, purpose).

/// DH-PSI: items hashed to ristretto255.
pub const ECDH_ITEM_TO_GROUP: &str = "setwise/ecdh/v1/item-to-group";
/// FHE-PSI: items hashed to field elements of the plaintext modulus.
pub const FHE_ITEM_TO_FIELD: &str = "setwise/fhe/v1/item-to-field";
/// Unbalanced PSI: items hashed to ristretto255 for the OPRF (no session).
pub const UNBALANCED_OPRF: &str = "setwise/unbalanced/v1/oprf-to-group";
/// Unbalanced PSI: OPRF output.
pub const UNBALANCED_OPRF_OUT: &str = "setwise/unbalanced/v1/oprf-output";
/// Unbalanced PSI: what the database keeps of an item, a hash of its OPRF output (the
/// output itself keys the item's label and stays out of the database's files).
pub const UNBALANCED_DIGEST: &str = "setwise/unbalanced/v1/item-digest";
/// Unbalanced PSI: the check value of a database's OPRF key, kept with the database.
pub const UNBALANCED_KEY_CHECK: &str = "setwise/unbalanced/v1/oprf-key-check";
/// Unbalanced PSI: a database build's journal (its header's hash, its records' tags,
/// a bundle's bins), which a resumed build checks.
pub const UNBALANCED_BUILD_JOURNAL: &str = "setwise/unbalanced/v1/build-journal";
/// Unbalanced PSI: the fingerprint of a build's input, which a resumed build must match.
pub const UNBALANCED_BUILD_INPUT: &str = "setwise/unbalanced/v1/build-input";
/// Unbalanced PSI: an item digest to its bins and field elements.
pub const UNBALANCED_ITEM: &str = "setwise/unbalanced/v1/item-to-bins";
/// Authorised PSI: H1(item ‖ client id) to G1 (BLS signatures).
pub const AUTHORIZED_H1: &str = "setwise/authorized/v1/H1-item-to-G1";
/// Partial-APSI: H2 from a G1 commitment to G1.
pub const AUTHORIZED_H2: &str = "setwise/authorized/v1/H2-G1-to-G1";
/// Authorised PSI: digests of pairing values.
pub const AUTHORIZED_DIGEST: &str = "setwise/authorized/v1/gt-digest";
/// Partial-APSI: the exponent-equality argument's batching weights.
pub const AUTHORIZED_EEA_WEIGHT: &str = "setwise/authorized/v1/eea-weight";
/// Partial-APSI: the exponent-equality argument's challenge.
pub const AUTHORIZED_EEA_CHALLENGE: &str = "setwise/authorized/v1/eea-challenge";
/// Unbalanced PSI: a label's encryption key from its item's OPRF output.
pub const UNBALANCED_LABEL_KEY: &str = "setwise/unbalanced/v1/label-key";
/// Compact PSI: H1, items to points of GF(2^128 − 159).
pub const COMPACT_ITEM_TO_FIELD: &str = "setwise/compact/v1/H1-item-to-field";
/// Compact PSI: H2, an item and its agreed key to the tag the receiver matches.
pub const COMPACT_TAG: &str = "setwise/compact/v1/H2-tag";
/// Compact PSI: the round keys of the wide permutation Π.
pub const COMPACT_PERMUTATION: &str = "setwise/compact/v1/permutation";
/// mqRPMT: items hashed to ristretto255 for the cwPRF.
pub const MQRPMT_ITEM_TO_GROUP: &str = "setwise/mqrpmt/v1/item-to-group";
/// mqRPMT: the Bloom filter's positions.
pub const MQRPMT_FILTER: &str = "setwise/mqrpmt/v1/bloom-filter";
/// mqRPMT intersection: the 128-bit tag of an item the receiver looks up.
pub const MQRPMT_TAG: &str = "setwise/mqrpmt/v1/item-tag";
/// mqRPMT from a permuted OPRF: the short tag of a PRF value k·H(x) the client queries with.
pub const MQRPMT_POPRF_TAG: &str = "setwise/mqrpmt/v1/poprf-query-tag";
/// mqRPMT private-ID: the session ids of its two VOLE OPRFs.
pub const MQRPMT_PRIVATE_ID_OPRF: &str = "setwise/mqrpmt/v2/private-id-oprf-session";
/// mqRPMT private-ID: an item's OKVS key in one of the two OPRFs.
pub const MQRPMT_PRIVATE_ID_ITEM: &str = "setwise/mqrpmt/v3/private-id-item-to-key";
/// mqRPMT private-ID: the AES key of an OPRF's value hash (an item's OKVS value from its
/// key).
pub const MQRPMT_PRIVATE_ID_VALUE: &str = "setwise/mqrpmt/v3/private-id-value-aes-key";
/// mqRPMT private-ID: an OPRF's output, half of an item's ID.
pub const MQRPMT_PRIVATE_ID_OUTPUT: &str = "setwise/mqrpmt/v2/private-id-oprf-output";
/// Base OT (Chou–Orlandi): the OT keys.
pub const OT_BASE_KEY: &str = "setwise/ot/v1/base-ot-key";
/// Malicious base OT (Masny–Rindal): the keys.
pub const OT_BASE_KEY_MALICIOUS: &str = "setwise/ot/v1/base-ot-key-masny-rindal";
/// Malicious base OT (Masny–Rindal): the random oracle to ristretto255.
pub const OT_BASE_TO_GROUP: &str = "setwise/ot/v1/base-ot-hash-to-group";
/// Malicious OT extension (KOS): the challenge of the consistency check (Fiat–Shamir).
pub const OT_KOS_CHALLENGE: &str = "setwise/ot/v1/kos-challenge";
/// IKNP: the fixed AES key of the correlation-robust hash.
pub const OT_CRHASH_KEY: &str = "setwise/ot/v1/iknp-crhash-key";
/// Chosen-message and one-sided OT: the pads of the masked messages.
pub const OT_MESSAGE_PAD: &str = "setwise/ot/v1/message-pad";
/// Silent VOLE: the fixed AES keys of the GGM trees' length-doubling generator.
pub const VOLE_GGM_KEY: &str = "setwise/vole/v1/ggm-prg-key";
/// Silent VOLE: the session ids of its sub-protocols (noisy VOLE, punctured PRF).
pub const VOLE_SUBSESSION: &str = "setwise/vole/v1/sub-session";
/// Silent VOLE: the seed of the expand-convolute code.
pub const VOLE_CODE_SEED: &str = "setwise/vole/v1/code-seed";
/// Malicious silent VOLE: the challenge of the noisy VOLE's check (Fiat–Shamir).
pub const VOLE_NOISY_CHALLENGE: &str = "setwise/vole/v1/noisy-check-challenge";
/// Malicious silent VOLE: the sender's answer to the punctured PRFs' check (Ferret).
pub const VOLE_SPARSE_CHECK: &str = "setwise/vole/v1/sparse-check-answer";
/// VOLE-PSI: an item's OKVS key (and, for the malicious output hash, the rest of its
/// digest).
pub const VOLE_PSI_ITEM: &str = "setwise/vole-psi/v2/item-to-key";
/// VOLE-PSI: the AES key of the value hash (an item's OKVS value from its key).
pub const VOLE_PSI_VALUE: &str = "setwise/vole-psi/v2/value-aes-key";
/// VOLE-PSI: the OPRF output of an item (truncated to the tag length).
pub const VOLE_PSI_TAG: &str = "setwise/vole-psi/v1/oprf-output";
/// Malicious VOLE-PSI: the OPRF output of an item's whole digest and its value plus w.
pub const VOLE_PSI_TAG_MALICIOUS: &str = "setwise/vole-psi/v1/oprf-output-malicious";
/// Malicious VOLE-PSI: the sender's commitment to its share w_s of the output mask.
pub const VOLE_PSI_MASK_COMMITMENT: &str = "setwise/vole-psi/v1/mask-commitment";
/// Staged runs: the hello nonce a party derives from its run seed (so a re-run of the
/// hello stage writes the same bytes).
pub const STAGED_HELLO_NONCE: &str = "setwise/staged/v1/hello-nonce";
/// Staged runs: an ecdh exponent derived from the run seed, the session and the bucket.
pub const STAGED_ECDH_SCALAR: &str = "setwise/staged/v1/ecdh-scalar";
/// Staged runs: the keyed hash of an item that picks its bucket.
pub const STAGED_BUCKET: &str = "setwise/staged/v1/bucket";
/// Staged runs: the hello's fingerprint of an operator-given bucket key.
pub const STAGED_BUCKET_KEY_CHECK: &str = "setwise/staged/v1/bucket-key-check";
/// Staged runs: the keyed hash of an output value that picks its mixed partition.
pub const STAGED_MIX: &str = "setwise/staged/v1/mix-partition";
/// Staged runs: the digest of one part of a stage's messages, recorded in its marker.
pub const STAGED_MESSAGE: &str = "setwise/staged/v1/message";
/// Staged runs: the digest of a stage marker's content (counts and part digests), which
/// the consuming stage journals.
pub const STAGED_MARKER_CONTENT: &str = "setwise/staged/v1/marker-content";
/// Staged runs: the fingerprint of a party's input, kept in its workdir.
pub const STAGED_INPUT: &str = "setwise/staged/v1/input-fingerprint";
/// Staged runs: the key of the MAC on one stage marker, derived (BLAKE3 `derive_key`) from
/// the operators' exchange key, the stage, the writer's role and the run id.
pub const STAGED_MARKER_MAC: &str = "setwise/staged/v1/marker-mac";
/// Staged runs: the key of the MAC on a party's abort note, derived from the exchange
/// key, the writer's role and the run id.
pub const STAGED_ABORT_MAC: &str = "setwise/staged/v1/abort-mac";
/// A replayed bucket's session id, from the run's session and the bucket index.
pub const STAGED_BUCKET_SESSION: &str = "setwise/staged/v1/bucket-session";
/// A replayed bucket's randomness, from the party's run seed.
pub const STAGED_REPLAY_SEED: &str = "setwise/staged/v1/replay-seed";
/// The stream a seeded scope draws from (`crypto::rng::seeded`), keyed by its seed.
pub const RNG_SEEDED_STREAM: &str = "setwise/v1/rng/seeded-stream";
/// Staged runs: the public fingerprint of the operators' exchange key.
pub const STAGED_EXCHANGE_KEY_CHECK: &str = "setwise/staged/v1/exchange-key-check";
/// Session identifier derived from both hellos' nonces.
pub const SESSION_ID: &str = "setwise/session/v1/id";
/// `--reveal both`: the digest of an item of the intersection the receiver tells the sender.
pub const REVEAL_ITEM: &str = "setwise/reveal/v1/item-digest";
/// Fingerprint of a judge's public key (hellos, reports).
pub const FINGERPRINT_JUDGE_KEY: &str = "setwise/authorized/v1/key-fingerprint";
/// Fingerprint of unbalanced-PSI parameters (canonical JSON).
pub const FINGERPRINT_UNBALANCED_PARAMS: &str = "setwise/unbalanced/v1/params-fingerprint";
/// Fingerprint of how a database's plaintexts are encoded (a probe's encoding), kept in
/// its encoded copy on disk so that a copy another encoding wrote is not served.
pub const FINGERPRINT_UNBALANCED_ENCODING: &str = "setwise/unbalanced/v1/encoding-fingerprint";

/// A 32-byte per-session value both parties agree on in the hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionId(pub [u8; 32]);

impl SessionId {
    /// The session id of sub-protocol `what` of this session, derived in the domain
    /// `label` (so that the sub-protocols' hashes never meet each other's or this one's).
    pub fn sub(self, label: &'static str, what: &[u8]) -> SessionId {
        SessionId(Domain::new(label, self).hash32(what))
    }
}

/// A hashing domain: label and session.
#[derive(Debug, Clone, Copy)]
pub struct Domain {
    label: &'static str,
    session: SessionId,
}

impl Domain {
    /// The domain `label` within `session`.
    pub fn new(label: &'static str, session: SessionId) -> Self {
        Self { label, session }
    }

    /// A domain without a session, for values that outlive one session (an OPRF
    /// whose outputs a sender database stores). The label alone separates it.
    pub fn fixed(label: &'static str) -> Self {
        Self { label, session: SessionId([0; 32]) }
    }

    /// The domain's tag bytes: length-prefixed label, then the session id.
    pub fn tag(&self) -> Vec<u8> {
        let mut t = Vec::with_capacity(2 + self.label.len() + 32);
        t.extend_from_slice(&(self.label.len() as u16).to_le_bytes());
        t.extend_from_slice(self.label.as_bytes());
        t.extend_from_slice(&self.session.0);
        t
    }

    /// A 64-byte hash of `input` in this domain (BLAKE3 XOF, keyed by the domain).
    pub fn hash64(&self, input: &[u8]) -> [u8; 64] {
        let mut h = self.hasher();
        h.update(input);
        let mut out = [0u8; 64];
        h.finalize_xof().fill(&mut out);
        out
    }

    /// A 32-byte hash of `input` in this domain: the first half of [`hash64`](Self::hash64)
    /// (BLAKE3's output is a prefix of its XOF).
    pub fn hash32(&self, input: &[u8]) -> [u8; 32] {
        let mut h = self.hasher();
        h.update(input);
        *h.finalize().as_bytes()
    }

    /// A BLAKE3 hasher keyed by this domain, to stream input into.
    pub fn hasher(&self) -> Hasher {
        Hasher::new_keyed(&self.key())
    }

    /// The BLAKE3 key of this domain (what [`hasher`](Self::hasher) is keyed with), for
    /// callers that hash many short inputs with `blake3::keyed_hash`.
    pub fn key(&self) -> [u8; 32] {
        blake3::derive_key("setwise domain key v1", &self.tag())
    }
}

/// A short public name for `bytes` in the domain `label`: 16 hex digits (64 bits) of
/// their hash, enough to tell apart the keys or parameter sets one deployment uses.
pub fn fingerprint(label: &'static str, bytes: &[u8]) -> String {
    let mut h = Domain::fixed(label).hasher();
    h.update(bytes);
    h.finalize().to_hex()[..16].to_string()
}

/// Derives the session id from the two hello nonces, in role order, and the TLS
/// session's exporter value when the channel has one (so the id is bound to it).
pub fn session_id(sender_nonce: &[u8; 16], receiver_nonce: &[u8; 16], binding: Option<&[u8; 32]>) -> SessionId {
    let mut h = Hasher::new_derive_key(SESSION_ID);
    h.update(sender_nonce);
    h.update(receiver_nonce);
    if let Some(b) = binding {
        h.update(b"tls-exporter");
        h.update(b);
    }
    SessionId(*h.finalize().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_separate() {
        let s1 = SessionId([1; 32]);
        let s2 = SessionId([2; 32]);
        let a = Domain::new(ECDH_ITEM_TO_GROUP, s1).hash64(b"x");
        assert_eq!(a, Domain::new(ECDH_ITEM_TO_GROUP, s1).hash64(b"x"));
        assert_ne!(a, Domain::new(ECDH_ITEM_TO_GROUP, s2).hash64(b"x"));
        assert_ne!(a, Domain::new(SESSION_ID, s1).hash64(b"x"));
        assert_eq!(Domain::new(ECDH_ITEM_TO_GROUP, s1).hash32(b"x"), a[..32], "a prefix of the XOF");
        assert_ne!(session_id(&[0; 16], &[1; 16], None), session_id(&[1; 16], &[0; 16], None));
        assert_ne!(session_id(&[0; 16], &[1; 16], None), session_id(&[0; 16], &[1; 16], Some(&[0; 32])));
    }
}
