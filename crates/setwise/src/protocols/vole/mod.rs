//! PSI from silent VOLE and an OKVS (Raghuraman–Rindal, "Blazing Fast PSI from Improved
//! OKVS and Subfield VOLE", CCS 2022, Fig. 11), semi-honest: the receiver learns X ∩ Y,
//! the sender nothing; each learns the other's set size.
//!
//! Flow (receiver holds Y, sender X; H gives each item an OKVS key k, and its value is
//! h(x) = π(k) ⊕ k for a keyed AES π, `ValueHash`):
//! 1. a silent VOLE of length m (the store's size): the sender gets Δ and B, the
//!    receiver A′ and C = B + A′·Δ ([`crate::vole`]);
//! 2. receiver: P = Encode({k(y) ↦ h(y)}) (RB-OKVS, [`crate::okvs`]); sends the seed and
//!    A = P + A′;
//! 3. sender: K = B + A·Δ = C + P·Δ; for each x the tag
//!    H_o(k(x), Decode(K, k(x)) + h(x)·Δ), truncated to [`tag_bytes`], shuffled, sent;
//! 4. receiver: decoding is linear, so for y ∈ Y, where Decode(P, k(y)) = h(y), the
//!    sender's value is Decode(C, k(y)); the receiver keeps the y whose tag
//!    H_o(k(y), Decode(C, k(y))) came.
//!
//! For x ∉ Y, Decode(P, k(x)) + h(x) is unknown to the sender and nonzero except with
//! probability about |Y|·2^-128 (h is a function of k, so an x sharing some y's key
//! gives zero), so its tag hides a uniform Δ multiple: the receiver sees random
//! strings. Docs: docs/protocols/vole.md (leakage, parameters, failure probability, wire).
//!
//! ```
//! use setwise::net::MemoryChannel;
//! use setwise::{Input, Job, Operation, Outcome, Protocol, Role, run};
//!
//! let job = Job::new(Protocol::Vole, Operation::Intersection);
//! let (x, y) = (["a", "b", "c", "d"], ["d", "e", "b"]);
//! let (mut a, mut b) = MemoryChannel::pair(1 << 24);
//! let got = std::thread::scope(|s| {
//!     let sender = s.spawn(|| run(&mut a, &job, Role::Sender, Input::Items(&x)));
//!     let got = run(&mut b, &job, Role::Receiver, Input::Items(&y)).unwrap();
//!     sender.join().unwrap().unwrap();
//!     got
//! });
//! assert_eq!(got.0, Outcome::Intersection(vec![0, 2]));
//! ```

mod mask;
pub mod messages;
pub(crate) mod oprf;
mod receiver;
mod sender;

pub use receiver::receiver;
pub use sender::sender;

use crate::crypto::dst::{self, Domain, SessionId};
use crate::error::Result;
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::okvs::BATCH;
use crate::okvs::OkvsParams;
use crate::protocols::params::no_params;
use crate::protocols::spec::{Leakage, Spec, items_only};
use crate::protocols::{Call, Input, Outcome, Report, Role};
use crate::protocols::{Context, Security};
use crate::protocols::{Operation, Protocol};
use aes::Aes128;
use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};
use rayon::prelude::*;

/// Largest set either side may hold: 2^26. Memory grows by about 0.5 GiB per 2^20
/// items on the receiver's side; larger sets are split into buckets (docs/scale-out.md).
pub const MAX_SET: usize = 1 << 26;

// The tags' statistical security (2^-40 per run) and length, shared with the other short
// tags on the wire.
pub use crate::wire::tags::{TAG_SECURITY, tag_bytes};

/// The store's shape for the receiver's set.
pub fn store_params(receiver: usize) -> OkvsParams {
    OkvsParams::for_items(receiver)
}

/// Checks both announced sizes against [`MAX_SET`] before anything is allocated.
pub(crate) fn check_sizes(ctx: &Context) -> Result<()> {
    ctx.check_sizes("vole PSI", MAX_SET, "split larger sets into buckets")
}

/// The item hash, the value hash and the output hash of one OPRF session.
pub(crate) struct Hashes {
    // BLAKE3 keys of the item and output domains: `keyed_hash` of a short input is what a
    // keyed `Hasher` gives, without copying the hasher's 1.9 KB state per item.
    item: [u8; 32],
    value: ValueHash,
    output: [u8; 32],
    len: usize,
    // Whether H_o takes the item's whole 256-bit digest, as the malicious variant needs,
    // or its key k only.
    whole: bool,
}

/// The OKVS value h of an item from its key k: h = π(k) ⊕ k for AES π under a key of
/// the session (Matyas–Meyer–Oseas), as volePSI derives an item's value from its 128-bit
/// item (`RsOprf`, `mAesFixedKey.hashBlock`, there under one fixed key). So a party keeps
/// 16 bytes an item, not 32, and computes h when it needs it.
#[derive(Clone)]
pub(crate) struct ValueHash {
    aes: Aes128,
    key: [u8; 16],
}

impl ValueHash {
    fn new(label: &'static str, sid: SessionId) -> Self {
        let k = Domain::new(label, sid).hash32(b"AES key");
        Self::with_key(k[..16].try_into().expect("16 bytes"))
    }

    fn with_key(key: [u8; 16]) -> Self {
        Self { aes: Aes128::new(&Array(key)), key }
    }

    /// Whether an OKVS seed would key the store's band hash with this AES key: then a
    /// key's bin, band start and bits would be read off h(k), h(k ⊕ 1) and h(k ⊕ 2), and
    /// the values of keys outside a store would no longer be independent of their rows.
    /// The evaluator chooses the seed, so the key holder refuses this one.
    pub(crate) fn is_keyed_by(&self, seed: &[u8; 16]) -> bool {
        &self.key == seed
    }

    /// h(k) of each of `keys` into `out` (as long): [`BATCH`] keys to an AES call, which
    /// the cipher pipelines (one block a call costs 20 times as much).
    pub(crate) fn of_many(&self, keys: &[u128], out: &mut [Gf128]) {
        assert_eq!(keys.len(), out.len(), "a value per key");
        let mut blocks = [Array([0u8; 16]); BATCH];
        for (keys, out) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            let blocks = &mut blocks[..keys.len()];
            blocks.iter_mut().zip(keys).for_each(|(b, k)| *b = Array(k.to_le_bytes()));
            self.aes.encrypt_blocks(blocks);
            for ((o, b), k) in out.iter_mut().zip(blocks.iter()).zip(keys) {
                *o = Gf128(u128::from_le_bytes(b.0) ^ k);
            }
        }
    }
}

/// One OPRF session's items hashed ([`Hashes::items`]), in item order: each item's OKVS
/// key k and, where H_o takes the whole digest, the digest's second half k′.
pub(crate) struct Hashed {
    keys: Vec<u128>,
    second_halves: Option<Vec<u128>>,
}

impl Hashed {
    /// The items' OKVS keys.
    pub(crate) fn keys(&self) -> &[u128] {
        &self.keys
    }

    /// Item `i` as the output hash takes it.
    pub(crate) fn item(&self, i: usize) -> HashedItem {
        HashedItem { key: self.keys[i], second_half: self.second_halves.as_ref().map(|s| s[i]) }
    }

    /// Number of items.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }
}

/// A hashed item: its OKVS key, and its digest's second half where H_o takes it.
#[derive(Clone, Copy)]
pub(crate) struct HashedItem {
    key: u128,
    second_half: Option<u128>,
}

/// The domain labels of one OPRF session's hashes.
pub(crate) struct Labels {
    /// Items to their OKVS keys (and digests).
    pub item: &'static str,
    /// The AES key of the value hash.
    pub value: &'static str,
    /// The OPRF output.
    pub output: &'static str,
}

impl Hashes {
    /// The hashes of VOLE-PSI in session `ctx` at `security`: tags of [`tag_bytes`]
    /// (semi-honest), or 16 bytes of H_o over the whole item digest (malicious: the
    /// receiver's store may hold more keys than it announced, so the tag length cannot
    /// count on its size).
    pub(crate) fn new(ctx: &Context, security: Security) -> Self {
        let labels = |output| Labels { item: dst::VOLE_PSI_ITEM, value: dst::VOLE_PSI_VALUE, output };
        match security {
            Security::SemiHonest => {
                Self::of(ctx.id, labels(dst::VOLE_PSI_TAG), tag_bytes(ctx.sender_size(), ctx.receiver_size()))
            }
            Security::Malicious => Self { whole: true, ..Self::of(ctx.id, labels(dst::VOLE_PSI_TAG_MALICIOUS), 16) },
        }
    }

    /// The hashes of session `sid` under `labels`, tags of `len` bytes (at most 16), H_o
    /// over an item's key.
    pub(crate) fn of(sid: SessionId, labels: Labels, len: usize) -> Self {
        Self {
            item: Domain::new(labels.item, sid).key(),
            value: ValueHash::new(labels.value, sid),
            output: Domain::new(labels.output, sid).key(),
            len,
            whole: false,
        }
    }

    /// Each item's OKVS key (and, for H_o over the whole digest, the digest's second
    /// half): the halves of BLAKE3 keyed by the item domain.
    pub(crate) fn items<I: AsRef<[u8]> + Sync>(&self, items: &[I]) -> Hashed {
        let digest = |x: &I| {
            let out = blake3::keyed_hash(&self.item, x.as_ref());
            let b = out.as_bytes();
            let half = |i: usize| u128::from_le_bytes(b[16 * i..16 * i + 16].try_into().expect("16 bytes"));
            (half(0), half(1))
        };
        if self.whole {
            let (keys, second_halves) = items.par_iter().map(digest).unzip();
            Hashed { keys, second_halves: Some(second_halves) }
        } else {
            Hashed { keys: items.par_iter().map(|x| digest(x).0).collect(), second_halves: None }
        }
    }

    /// The value hash h.
    pub(crate) fn value(&self) -> &ValueHash {
        &self.value
    }

    /// The OPRF output of a hashed item and its value: H_o(k, v), or H_o(k, k′, v) over
    /// the whole digest (k′ its second half), 32 bytes.
    pub(crate) fn output(&self, item: HashedItem, value: Gf128) -> [u8; 32] {
        let mut input = [0u8; 48];
        input[..16].copy_from_slice(&item.key.to_le_bytes());
        let at = match item.second_half {
            Some(k2) => {
                input[16..32].copy_from_slice(&k2.to_le_bytes());
                32
            }
            None => 16,
        };
        input[at..at + 16].copy_from_slice(&value.to_bytes());
        *blake3::keyed_hash(&self.output, &input[..at + 16]).as_bytes()
    }

    /// The tag of a hashed item and its OPRF value: the first [`Hashes::len`] bytes of
    /// [`Hashes::output`], the rest zero.
    pub(crate) fn tag(&self, item: HashedItem, value: Gf128) -> u128 {
        let t = u128::from_le_bytes(self.output(item, value)[..16].try_into().expect("16 bytes"));
        if self.len == 16 { t } else { t & ((1u128 << (8 * self.len)) - 1) }
    }

    /// Bytes per tag on the wire (at most 16).
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Its roles ([`Spec::roles`]): the sender and the receiver, each with its items.
fn roles(mut ch: &mut dyn Channel, call: Call<'_>, report: &mut Report) -> Result<Outcome> {
    match (call.ctx.role, &call.input) {
        (Role::Sender, &Input::Items(x)) => {
            sender(&mut ch, call.ctx, call.security, x, report).map(|()| Outcome::Nothing)
        }
        (Role::Receiver, &Input::Items(y)) => receiver(&mut ch, call.ctx, call.security, y, report),
        _ => Err(call.unsupported()),
    }
}

// Named like the variants these constants replaced, so callers' `Protocol::Vole` reads
// as before.
#[allow(non_upper_case_globals)]
impl Protocol {
    /// PSI from silent VOLE and an OKVS (Raghuraman–Rindal): fast for large sets.
    pub const Vole: Protocol = Protocol::declared_by(&SPEC);
}

/// The registry's facts about PSI from silent VOLE.
pub static SPEC: Spec = Spec {
    name: "vole",
    operations: &[Operation::Intersection],
    security: Security::Malicious,
    reveal_both: &[Operation::Intersection],
    staged: &[Operation::Intersection],
    own_stages: false,
    // Peak RSS of the larger role of a one-bucket `setwise stage run` ÷ its items (2^20;
    // compact 2^15), an upper bound (docs/scale-out.md, "Memory").
    live_role_bytes: 360,
    takes: items_only,
    leakage: Leakage {
        model: "semi-honest, or malicious with --security malicious",
        text: "Each party learns the other's set size. The receiver learns the intersection; the \
               sender learns nothing. The sender shuffles its tags, so their order tells the \
               receiver nothing about where the matches sit in the sender's list. Under \
               --security malicious, checks refuse a peer that deviates; a cheating receiver can \
               test up to the store's size (about 1.15 times its announced items) of its choice.",
        doc: "docs/protocols/vole.md",
    },
    page: include_str!("../../../../../docs/protocols/vole.md"),
    demo_items: 1 << 20,
    options: &[],
    params: no_params,
    roles,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> [u8; 16] {
        std::array::from_fn(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
    }

    #[test]
    fn the_value_hash_is_aes_of_the_key_xor_the_key() {
        // FIPS-197 appendix C.1: AES-128 of 00112233…ff under key 00010203…0f.
        let h = ValueHash::with_key(hex("000102030405060708090a0b0c0d0e0f"));
        let plain = u128::from_le_bytes(hex("00112233445566778899aabbccddeeff"));
        let cipher = u128::from_le_bytes(hex("69c4e0d86a7b0430d8cdb78070b4c55a"));
        let mut out = [Gf128::ZERO];
        h.of_many(&[plain], &mut out);
        assert_eq!(out[0], Gf128(cipher ^ plain));
        // In batches of any length, each key as if alone.
        for n in [0, 1, 63, 64, 65, 200] {
            let keys: Vec<u128> =
                (0..n as u128).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835)).collect();
            let mut many = vec![Gf128::ZERO; n];
            h.of_many(&keys, &mut many);
            for (k, v) in keys.iter().zip(&many) {
                let mut block = Array(k.to_le_bytes());
                h.aes.encrypt_block(&mut block);
                assert_eq!(*v, Gf128(u128::from_le_bytes(block.0) ^ k), "{n} keys");
            }
        }
    }

    #[test]
    fn sessions_and_labels_give_their_own_value_hashes() {
        let sid = |b: u8| dst::session_id(&[b; 16], &[0; 16], None);
        let value = |label, s| {
            let mut out = [Gf128::ZERO];
            ValueHash::new(label, s).of_many(&[7], &mut out);
            out[0]
        };
        assert_ne!(value(dst::VOLE_PSI_VALUE, sid(1)), value(dst::VOLE_PSI_VALUE, sid(2)));
        assert_ne!(value(dst::VOLE_PSI_VALUE, sid(1)), value(dst::MQRPMT_PRIVATE_ID_VALUE, sid(1)));
    }
}
