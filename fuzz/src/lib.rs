//! What the fuzz targets share: fixtures built once per process, the honest parties a
//! scripted peer is played against, and one entry point per decoder family.
//!
//! A session target's input is one selector byte (which honest party, modulo the
//! family's cases) and then a script: the frames a hostile peer sends, each a `u32`
//! little-endian length and its payload, exactly as on the TCP wire. `seed-corpus`
//! records the scripts of real runs as the seeds.
//!
//! Every entry point may return any error; it must not panic, hang or allocate without
//! bound. That is what the fuzzer checks.

use setwise::crypto::dst::{Domain, SessionId};
use setwise::hashing::bloom::BloomFilter;
use setwise::he::HeContext;
use setwise::io::{Format, ItemSet};
use setwise::message_tags;
use setwise::net::read_frame;
use setwise::protocols::authorized::{
    AllowList, Credentials, JudgeConfig, JudgeKey, MAX_ITEM, Mode, messages as auth, public_key_from_hex,
    public_key_hex,
};
use setwise::protocols::ecdh::steps::ReceiverState;
use setwise::protocols::fhe::FheParams;
use setwise::protocols::mqrpmt::{Construction, LastMove, MqrpmtParams, messages as mq};
use setwise::protocols::reveal::{REVEALED_DIGESTS, Revealed};
use setwise::protocols::unbalanced::db::Open;
use setwise::protocols::unbalanced::{
    BuildInto, SenderDb, UnbalancedParams, decode_label, encode_label, messages as ub,
};
use setwise::protocols::vole::messages as vole_psi;
use setwise::protocols::{PhaseObserver, Progress, Reveal, Security, compact, ecdh, fhe};
use setwise::session::{self, Hello, Input, Job, ProtocolParams};
use setwise::testing::{Party, ScriptedChannel};
use setwise::wire::Reader;
use setwise::wire::msg::{Message, TAG_ABORT, abort_error};
use setwise::wire::stream::Stream;
use setwise::wire::tags::{self, TagReader};
use setwise::{Operation, Outcome, Protocol, Role, ot};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// The report page of `setwise report`: the CLI's own source, compiled here so that the
/// `report` target reads report JSON and renders pages exactly as the CLI does.
#[path = "../../crates/setwise-cli/src/report_page.rs"]
pub mod report_page;

/// Largest frame a scripted peer may send: big enough for every message of the small
/// fixtures, small enough that the fuzzer spends its time on structure.
pub const MAX_FRAME: usize = 4 << 20;

/// Sender items `s0..s39` and receiver items `s30..s49`: 10 in common.
pub fn sender_items() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| (0..40).map(|i| format!("s{i}").into_bytes()).collect())
}

/// See [`sender_items`].
pub fn receiver_items() -> &'static [Vec<u8>] {
    static R: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    R.get_or_init(|| (30..50).map(|i| format!("s{i}").into_bytes()).collect())
}

fn values() -> &'static [u64] {
    static V: OnceLock<Vec<u64>> = OnceLock::new();
    V.get_or_init(|| (0..40).collect())
}

/// Small unbalanced parameters (`testing::small_unbalanced_params`).
pub fn unbalanced_params() -> UnbalancedParams {
    setwise::testing::small_unbalanced_params()
}

fn database(labelled: bool) -> &'static SenderDb {
    static PLAIN: OnceLock<SenderDb> = OnceLock::new();
    static LABELLED: OnceLock<SenderDb> = OnceLock::new();
    let (cell, items) = (if labelled { &LABELLED } else { &PLAIN }, sender_items());
    cell.get_or_init(|| {
        if labelled {
            let labels: Vec<Vec<u8>> = items.iter().map(|i| encode_label(&[String::from_utf8_lossy(i)])).collect();
            SenderDb::build_labelled(items, &labels, vec!["label".into()], unbalanced_params(), "fuzz")
        } else {
            SenderDb::build(items, unbalanced_params(), "fuzz")
        }
        .expect("a small database builds")
    })
}

/// The judge's key, the same in every process (so recorded client hellos, which name
/// the judge's public key, still match): loaded from a fixed secret.
pub fn judge_key() -> &'static JudgeKey {
    static K: OnceLock<JudgeKey> = OnceLock::new();
    K.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("judge-secret");
        std::fs::write(&path, [7u8; 32]).expect("write the fixed judge secret");
        JudgeKey::load_or_create(&path).expect("a fixed valid judge secret")
    })
}

fn allow_list() -> &'static AllowList {
    static A: OnceLock<AllowList> = OnceLock::new();
    A.get_or_init(|| AllowList::new(&receiver_items()[..15]))
}

const CLIENT: &[u8] = b"fuzz-client";
const JUDGING: JudgeConfig = JudgeConfig { fraction: 0.5, strict: false };

fn judge_input() -> Input<'static> {
    Input::Judge { key: judge_key(), policy: allow_list(), config: JUDGING }
}

/// Credentials of the receiver's items, from a real authorisation in `mode`.
pub fn credentials(mode: Mode) -> &'static Credentials {
    static FULL: OnceLock<Credentials> = OnceLock::new();
    static PARTIAL: OnceLock<Credentials> = OnceLock::new();
    let cell = if mode == Mode::Full { &FULL } else { &PARTIAL };
    cell.get_or_init(|| {
        let (mut a, mut b) = setwise::net::MemoryChannel::pair(MAX_FRAME);
        let job = Job::new(Protocol::Authorized, Operation::Authorize);
        std::thread::scope(|s| {
            s.spawn(move || session::run(&mut a, &job, Role::Judge, judge_input()));
            let run =
                session::run(&mut b, &Job::authorize(mode, CLIENT), Role::Receiver, Input::Items(receiver_items()));
            match run.expect("authorisation").0 {
                Outcome::Credentials { credentials, .. } => *credentials,
                other => panic!("an authorisation gave {other:?}"),
            }
        })
    })
}

/// An honest party and the peer whose recorded messages seed the fuzzing.
#[derive(Clone, Copy)]
pub struct Case {
    /// Names the seed file.
    pub name: &'static str,
    /// The party under test.
    pub honest: fn() -> Party<'static>,
    /// The party whose messages are recorded as the seed script.
    pub peer: fn() -> Party<'static>,
}

fn items_party(job: Job, role: Role) -> Party<'static> {
    let items = if role == Role::Sender { sender_items() } else { receiver_items() };
    Party { job, role, input: Input::Items(items) }
}

/// Both directions of one pairing: `a` honest against `b`'s recorded messages, and `b`
/// honest against `a`'s.
macro_rules! both {
    ($a_name:literal, $a:expr, $b_name:literal, $b:expr) => {
        [Case { name: $a_name, honest: || $a, peer: || $b }, Case { name: $b_name, honest: || $b, peer: || $a }]
    };
}

fn job(p: Protocol, op: Operation) -> Job {
    Job::new(p, op)
}

/// The mqRPMT membership tests: cwPRF with either last move, pOPRF.
const BLOOM: MqrpmtParams = MqrpmtParams { construction: Construction::Cwprf, last_move: LastMove::Bloom };
const SHUFFLE: MqrpmtParams = MqrpmtParams { construction: Construction::Cwprf, last_move: LastMove::Shuffle };
const POPRF: MqrpmtParams = MqrpmtParams { construction: Construction::Poprf, last_move: LastMove::Shuffle };

fn mqrpmt(op: Operation, params: MqrpmtParams) -> Job {
    job(Protocol::Mqrpmt, op).with_params(ProtocolParams::Mqrpmt(params))
}

fn mqrpmt_party(op: Operation, params: MqrpmtParams, role: Role) -> Party<'static> {
    match (op, role) {
        (Operation::Sum, Role::Sender) => Party {
            job: mqrpmt(op, params),
            role,
            input: Input::Values { items: sender_items(), values: values(), bound: 1 << 20 },
        },
        _ => items_party(mqrpmt(op, params), role),
    }
}

fn db_party(labelled: bool) -> Party<'static> {
    Party {
        job: job(Protocol::Unbalanced, Operation::Intersection),
        role: Role::Sender,
        input: Input::Database(database(labelled)),
    }
}

fn judge_party() -> Party<'static> {
    Party { job: job(Protocol::Authorized, Operation::Authorize), role: Role::Judge, input: judge_input() }
}

fn intersect_job(mode: Mode) -> Job {
    Job::authorized(mode.protocol(), CLIENT, *judge_key().public())
}

fn client_party(mode: Mode) -> Party<'static> {
    let input = Input::Credentials { items: receiver_items(), credentials: credentials(mode) };
    Party { job: intersect_job(mode), role: Role::Receiver, input }
}

/// The cases of a session target's family: every role of every operation, each as the
/// honest party once.
pub fn cases(family: &str) -> Vec<Case> {
    use Operation::*;
    use Role::{Receiver as R, Sender as S};
    let pairs: Vec<[Case; 2]> = match family {
        "ecdh" => vec![
            both!(
                "sender",
                items_party(job(Protocol::Ecdh, Intersection), S),
                "receiver",
                items_party(job(Protocol::Ecdh, Intersection), R)
            ),
            both!(
                "sender-cardinality",
                items_party(job(Protocol::Ecdh, Cardinality), S),
                "receiver-cardinality",
                items_party(job(Protocol::Ecdh, Cardinality), R)
            ),
            // The sender parses the receiver's revealed result.
            both!(
                "sender-reveal",
                items_party(job(Protocol::Ecdh, Intersection).with_reveal(Reveal::Both), S),
                "receiver-reveal",
                items_party(job(Protocol::Ecdh, Intersection).with_reveal(Reveal::Both), R)
            ),
        ],
        "compact" => vec![both!(
            "sender",
            items_party(job(Protocol::Compact, Intersection), S),
            "receiver",
            items_party(job(Protocol::Compact, Intersection), R)
        )],
        "vole" => vec![
            both!(
                "sender",
                items_party(job(Protocol::Vole, Intersection), S),
                "receiver",
                items_party(job(Protocol::Vole, Intersection), R)
            ),
            both!(
                "sender-reveal",
                items_party(job(Protocol::Vole, Intersection).with_reveal(Reveal::Both), S),
                "receiver-reveal",
                items_party(job(Protocol::Vole, Intersection).with_reveal(Reveal::Both), R)
            ),
            both!(
                "sender-malicious",
                items_party(job(Protocol::Vole, Intersection).with_security(Security::Malicious), S),
                "receiver-malicious",
                items_party(job(Protocol::Vole, Intersection).with_security(Security::Malicious), R)
            ),
        ],
        "mqrpmt" => vec![
            both!(
                "sender-intersection",
                mqrpmt_party(Intersection, BLOOM, S),
                "receiver-intersection",
                mqrpmt_party(Intersection, BLOOM, R)
            ),
            both!(
                "sender-shuffle",
                mqrpmt_party(Intersection, SHUFFLE, S),
                "receiver-shuffle",
                mqrpmt_party(Intersection, SHUFFLE, R)
            ),
            both!(
                "sender-cardinality",
                mqrpmt_party(Cardinality, BLOOM, S),
                "receiver-cardinality",
                mqrpmt_party(Cardinality, BLOOM, R)
            ),
            both!("sender-sum", mqrpmt_party(Sum, BLOOM, S), "receiver-sum", mqrpmt_party(Sum, BLOOM, R)),
            both!("sender-shares", mqrpmt_party(Shares, BLOOM, S), "receiver-shares", mqrpmt_party(Shares, BLOOM, R)),
            both!("sender-union", mqrpmt_party(Union, BLOOM, S), "receiver-union", mqrpmt_party(Union, BLOOM, R)),
            both!(
                "sender-private-id",
                mqrpmt_party(PrivateId, BLOOM, S),
                "receiver-private-id",
                mqrpmt_party(PrivateId, BLOOM, R)
            ),
            // Last, so that the committed seeds of the cases above keep their selector.
            both!(
                "sender-poprf",
                mqrpmt_party(Intersection, POPRF, S),
                "receiver-poprf",
                mqrpmt_party(Intersection, POPRF, R)
            ),
        ],
        "fhe" => vec![both!(
            "sender",
            items_party(job(Protocol::Fhe, Intersection), S),
            "receiver",
            items_party(job(Protocol::Fhe, Intersection), R)
        )],
        "unbalanced" => vec![
            both!("sender", db_party(false), "receiver", items_party(job(Protocol::Unbalanced, Intersection), R)),
            both!(
                "sender-labelled",
                db_party(true),
                "receiver-labelled",
                items_party(job(Protocol::Unbalanced, Intersection), R)
            ),
        ],
        "authorized" => vec![
            both!(
                "judge-full",
                judge_party(),
                "client-authorize-full",
                items_party(Job::authorize(Mode::Full, CLIENT), R)
            ),
            both!(
                "judge-partial",
                judge_party(),
                "client-authorize-partial",
                items_party(Job::authorize(Mode::Partial, CLIENT), R)
            ),
            both!("server-full", items_party(intersect_job(Mode::Full), S), "client-full", client_party(Mode::Full)),
            both!(
                "server-partial",
                items_party(intersect_job(Mode::Partial), S),
                "client-partial",
                client_party(Mode::Partial)
            ),
        ],
        other => panic!("no session family {other}"),
    };
    pairs.concat()
}

/// The session families, one fuzz target each (`session_<family>`).
pub const FAMILIES: [&str; 7] = ["ecdh", "compact", "mqrpmt", "fhe", "unbalanced", "authorized", "vole"];

/// Runs the honest party `data[0]` selects against the peer script `data[1..]`.
pub fn session(cases: &[Case], data: &[u8]) {
    let Some((&select, script)) = data.split_first() else { return };
    let party = (cases[select as usize % cases.len()].honest)();
    let mut ch = ScriptedChannel::new(script, MAX_FRAME);
    let _ = session::run(&mut ch, &party.job, party.role, party.input);
}

/// The fixtures every `session` call would otherwise build on first use: built before
/// fuzzing so that the first inputs do not time out.
pub fn warm_up(family: &str) -> Vec<Case> {
    match family {
        "unbalanced" => {
            database(false);
            database(true);
        }
        "authorized" => {
            credentials(Mode::Full);
            credentials(Mode::Partial);
        }
        _ => {}
    }
    cases(family)
}

/// A reader over a frame stream: the `frame` target.
pub fn frames(data: &[u8]) {
    let mut r = data;
    while let Ok(f) = read_frame(&mut r, 1 << 16) {
        assert!(f.len() <= 1 << 16);
    }
}

/// The `hello` target: a hello decodes, or is refused; a decoded one re-encodes to the
/// same bytes (the encoding is canonical).
pub fn hello(data: &[u8]) {
    if let Ok(h) = Hello::decode(data) {
        assert_eq!(h.encode(), data, "a hello decodes from its one encoding only");
    }
}

fn he_context(unbalanced: bool) -> &'static HeContext {
    static FHE: OnceLock<HeContext> = OnceLock::new();
    static UNBALANCED: OnceLock<HeContext> = OnceLock::new();
    if unbalanced {
        UNBALANCED.get_or_init(|| HeContext::new(&unbalanced_params().he()).expect("context"))
    } else {
        FHE.get_or_init(|| {
            let p = FheParams::choose(receiver_items().len(), sender_items().len()).expect("fhe parameters");
            HeContext::new(&p.he).expect("context")
        })
    }
}

/// Agreed sizes the `messages` target decodes against.
const N: usize = 64;
/// Bytes per masked OT message the `messages` target expects (a chosen 16-byte pair).
const OT_PER: usize = 32;

/// Decodes one message body (the frame without its tag) against fixed agreed sizes.
type Decode = fn(&[u8]) -> setwise::Result<()>;

/// The decoder of every message tag, keyed by the tag read off each declaration. Checked
/// against `setwise::message_tags::all()` when first built: a listed tag without a
/// decoder (or a decoder for an unlisted tag) stops the target at once.
pub fn decoders() -> &'static BTreeMap<u8, Decode> {
    use setwise::vole::messages as vm;
    static D: OnceLock<BTreeMap<u8, Decode>> = OnceLock::new();
    D.get_or_init(|| {
        let table: Vec<(u8, Decode)> = vec![
            (hello_tag(), |b| Hello::decode(&[&[hello_tag()][..], b].concat()).map(drop)),
            (TAG_ABORT, |b| match abort_error(b) {
                setwise::Error::PeerAborted(_) => Ok(()),
                e => Err(e),
            }),
            (ecdh::messages::RECEIVER_BLINDED.tag, |b| chunk32(ecdh::messages::RECEIVER_BLINDED, b)),
            (ecdh::messages::SENDER_BLINDED.tag, |b| chunk32(ecdh::messages::SENDER_BLINDED, b)),
            (ecdh::messages::DOUBLE_BLINDED.tag, |b| chunk32(ecdh::messages::DOUBLE_BLINDED, b)),
            (ecdh::messages::Request::TAG, |b| ecdh::messages::Request::decode(b, ()).map(drop)),
            (ecdh::messages::Response::TAG, |b| ecdh::messages::Response::decode(b, N).map(drop)),
            (fhe::messages::Key::TAG, |b| fhe::messages::Key::decode(b, (he_context(false), 0, 0)).map(drop)),
            (fhe::messages::Query::TAG, |b| fhe::messages::Query::decode(b, (he_context(false), 0)).map(drop)),
            (fhe::messages::Result::TAG, |b| {
                fhe::messages::Result::decode(b, (he_context(false), he_context(false).last_level())).map(drop)
            }),
            (ub::Params::TAG, |b| ub::Params::decode(b, ()).map(drop)),
            (ub::OPRF_REQUEST.tag, |b| chunk32(ub::OPRF_REQUEST, b)),
            (ub::OPRF_RESPONSE.tag, |b| chunk32(ub::OPRF_RESPONSE, b)),
            (ub::Key::TAG, |b| ub::Key::decode(b, (he_context(true), 0, 0)).map(drop)),
            (ub::Query::TAG, |b| ub::Query::decode(b, (he_context(true), 0)).map(drop)),
            (ub::ResultHeader::TAG, |b| ub::ResultHeader::decode(b, (4, 2)).map(drop)),
            (ub::ResultPart::TAG, |b| ub::ResultPart::decode(b, (4, 2)).map(drop)),
            (auth::JudgeKeyMessage::TAG, |b| auth::JudgeKeyMessage::decode(b, ()).map(drop)),
            (auth::ITEMS.tag, |b| {
                auth::ITEMS.decode_chunk(b, N, |r| Ok(r.bytes("AuthItems.item", MAX_ITEM).map(drop)?)).map(drop)
            }),
            (auth::COMMITMENTS.tag, |b| auth::COMMITMENTS.decode_chunk(b, N).map(drop).map_err(Into::into)),
            (auth::Challenge::TAG, |b| auth::Challenge::decode(b, N).map(drop)),
            (auth::Opening::TAG, |b| auth::Opening::decode(b, &[0, 3, 5, 9]).map(drop)),
            (auth::SIGNATURES.tag, |b| {
                let mut index = 0;
                auth::SIGNATURES
                    .decode_chunk(b, N, |r| {
                        index += 1;
                        auth::read_signature(r, index - 1).map(drop)
                    })
                    .map(drop)
            }),
            (auth::ServerKey::TAG, |b| auth::ServerKey::decode(b, ()).map(drop)),
            (auth::DIGESTS.tag, |b| auth::DIGESTS.decode_chunk(b, N).map(drop).map_err(Into::into)),
            (auth::OPRF_REQUEST.tag, |b| auth::OPRF_REQUEST.decode_chunk(b, N).map(drop).map_err(Into::into)),
            (auth::OPRF_RESPONSE.tag, |b| auth::OPRF_RESPONSE.decode_chunk(b, N).map(drop).map_err(Into::into)),
            (auth::AuthHeader::TAG, |b| auth::AuthHeader::decode(b, ()).map(drop)),
            (compact::messages::SenderKey::TAG, |b| compact::messages::SenderKey::decode(b, ()).map(drop)),
            (compact::messages::Polynomial::TAG, |b| compact::messages::Polynomial::decode(b, N).map(drop)),
            (compact::messages::TAGS.tag, |b| chunk32(compact::messages::TAGS, b)),
            (ot::messages::BaseSenderPoint::TAG, |b| ot::messages::BaseSenderPoint::decode(b, ()).map(drop)),
            (ot::messages::BaseReceiverPoints::TAG, |b| ot::messages::BaseReceiverPoints::decode(b, 128).map(drop)),
            (ot::messages::CorrectionChunk::TAG, |b| ot::messages::CorrectionChunk::decode(b, N).map(drop)),
            (ot::messages::masked(OT_PER).tag, |b| {
                let read = |r: &mut Reader<'_>| Ok(r.take(OT_PER, "OtMessages").map(drop)?);
                ot::messages::masked(OT_PER).decode_chunk(b, N, read).map(drop)
            }),
            (ot::messages::KosCheck::TAG, |b| ot::messages::KosCheck::decode(b, ()).map(drop)),
            (mq::SERVER_ITEMS.tag, |b| chunk32(mq::SERVER_ITEMS, b)),
            (mq::SHUFFLED.tag, |b| chunk32(mq::SHUFFLED, b)),
            (mq::FilterPart::TAG, |b| mq::FilterPart::decode(b, 4096).map(drop)),
            (mq::CLIENT_ITEMS.tag, |b| chunk32(mq::CLIENT_ITEMS, b)),
            (mq::Width::TAG, |b| mq::Width::decode(b, Operation::Sum).map(drop)),
            (mq::MaskedSum::TAG, |b| mq::MaskedSum::decode(b, (N, 8)).map(drop)),
            (mq::UNION_IDS.tag, |b| chunk32(mq::UNION_IDS, b)),
            (mq::UnionCount::TAG, |b| mq::UnionCount::decode(b, (N, N)).map(drop)),
            // Query tags of 9 bytes, which straddle records, then the padding.
            (mq::QUERY_TAGS.tag, |b| {
                let records = mq::QUERY_TAGS.decode_chunk(b, tags::records(N, 9))?;
                Ok(TagReader::new(mq::QUERY_TAGS.name, 9, N).add(records.as_flattened(), |_| ())?)
            }),
            (Revealed::TAG, |b| Revealed::decode(b, (N, N)).map(drop)),
            (REVEALED_DIGESTS.tag, |b| chunk32(REVEALED_DIGESTS, b)),
            (vm::NOISY_CORRECTIONS.tag, |b| chunk16(vm::NOISY_CORRECTIONS, b)),
            (vm::PPRF_LEVEL_SUMS.tag, |b| chunk16(vm::PPRF_LEVEL_SUMS, b)),
            (vm::PPRF_LEAF_SUMS.tag, |b| chunk16(vm::PPRF_LEAF_SUMS, b)),
            (vole_psi::StoreSeed::TAG, |b| vole_psi::StoreSeed::decode(b, ()).map(drop)),
            (vole_psi::STORE.tag, |b| chunk16(vole_psi::STORE, b)),
            (vole_psi::TAGS.tag, |b| chunk16(vole_psi::TAGS, b)),
            (vole_psi::MaskCommitment::TAG, |b| vole_psi::MaskCommitment::decode(b, ()).map(drop)),
            (vole_psi::MaskShare::TAG, |b| vole_psi::MaskShare::decode(b, ()).map(drop)),
            (vm::NoisyCheck::TAG, |b| vm::NoisyCheck::decode(b, ()).map(drop)),
            (vm::SparseChallenge::TAG, |b| vm::SparseChallenge::decode(b, ()).map(drop)),
            (vm::SparseAnswer::TAG, |b| vm::SparseAnswer::decode(b, ()).map(drop)),
        ];
        let mut map = BTreeMap::new();
        for (tag, decode) in table {
            assert!(map.insert(tag, decode).is_none(), "two decoders for {tag:#04x}");
        }
        let listed: BTreeMap<u8, &str> = message_tags::all().into_iter().map(|t| (t.tag, t.name)).collect();
        for (tag, name) in &listed {
            assert!(map.contains_key(tag), "the messages target has no decoder for {tag:#04x} ({name})");
        }
        for tag in map.keys() {
            assert!(listed.contains_key(tag), "the messages target decodes {tag:#04x}, which is not a message tag");
        }
        map
    })
}

/// The hello's tag, read off a hello's encoding (the constant is the session's own).
fn hello_tag() -> u8 {
    Hello::new("", "", String::new(), Role::Sender, 0).encode()[0]
}

fn chunk32(s: Stream<32>, body: &[u8]) -> setwise::Result<()> {
    Ok(s.decode_chunk(body, N).map(drop)?)
}

fn chunk16(s: Stream<16>, body: &[u8]) -> setwise::Result<()> {
    Ok(s.decode_chunk(body, N).map(drop)?)
}

/// The `messages` target: a frame (tag, then body) decoded as the message its tag
/// names, against fixed agreed sizes; chunks of record streams as well. Every tag of
/// `setwise::message_tags` has its decoder.
pub fn messages(data: &[u8]) {
    let decoders = decoders();
    let Some((tag, body)) = data.split_first() else { return };
    if let Some(decode) = decoders.get(tag) {
        let _ = decode(body);
    }
}

/// The `he_wire` target: a relinearisation key or a ciphertext at some level of either
/// context, decoded field by field. The first byte selects: bit 0 the context
/// (unbalanced or fhe), bit 1 a ciphertext rather than a key, bits 2..=6 the level (of
/// the ciphertext, or of the ciphertexts the key is for), bit 7 a key over every modulus
/// (a special modulus) rather than over its level's.
pub fn he_wire(data: &[u8]) {
    let Some((&select, bytes)) = data.split_first() else { return };
    let ctx = he_context(select & 1 == 1);
    let level = ((select & 0x7f) as usize >> 2) % (ctx.last_level() + 1);
    if select & 2 == 0 {
        let over = if select & 0x80 != 0 { 0 } else { level };
        let _ = ctx.relin_key_from_wire(bytes, level, over);
    } else {
        let _ = ctx.ciphertext_from_wire(bytes, level, "fuzz");
    }
}

/// The `he_wire` selector byte of a level-0 key or a ciphertext at `level` in either
/// context.
pub fn he_select(unbalanced: bool, ciphertext_level: Option<usize>) -> u8 {
    let ctx = unbalanced as u8;
    match ciphertext_level {
        None => ctx,
        Some(level) => ctx | 2 | (level as u8) << 2,
    }
}

/// The fhe and unbalanced contexts' last levels (for seeds).
pub fn last_levels() -> (usize, usize) {
    (he_context(false).last_level(), he_context(true).last_level())
}

/// The `bloom` target: a filter for `n` items at 2^-λ read from the wire.
pub fn bloom(data: &[u8]) {
    let Some((&select, bytes)) = data.split_first() else { return };
    let domain = Domain::new("setwise/fuzz/bloom", SessionId([0; 32]));
    let n = 1 + (select as usize & 0x3f);
    let mut r = Reader::new(bytes);
    if let Ok(f) = BloomFilter::read(&mut r, &domain, n, 40) {
        let _ = f.contains(b"x");
        assert_eq!(&f.to_bytes()[..], &bytes[..f.to_bytes().len()], "a filter re-encodes as read");
    }
}

/// The `manifest` target: a database manifest body, given its magic and a valid
/// checksum (else every input would stop at the checksum).
pub fn manifest(body: &[u8]) {
    let bytes = with_checksum([&b"SETWISDB"[..], body].concat());
    let _ = SenderDb::decode_manifest(&bytes, Path::new("fuzz.db"));
}

/// `bytes` with their blake3 checksum appended, as the file formats end.
fn with_checksum(mut bytes: Vec<u8>) -> Vec<u8> {
    let sum = *blake3::hash(&bytes).as_bytes();
    bytes.extend_from_slice(&sum);
    bytes
}

/// The `db_files` target: a saved database directory with one of its files (selected by
/// the first byte's low 7 bits: the manifest, the key file, the encoded copy or a
/// segment) replaced by the input, opened to serve: with no plaintext in memory (so from
/// the encoded copy), or with the first byte's high bit, all of them. A replaced segment
/// goes with the copy (a load that finds a valid copy reads no segment).
pub fn db_files(data: &[u8]) {
    let Some((&select, bytes)) = data.split_first() else { return };
    static SAVED: OnceLock<tempfile::TempDir> = OnceLock::new();
    let saved = SAVED.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut db = SenderDb::build(sender_items(), unbalanced_params(), "fuzz").expect("database");
        db.save(&dir.path().join("db")).expect("save");
        // Writes the encoded copy (ROWS-…) beside the segments.
        SenderDb::open(&dir.path().join("db"), Open::ServeWithin(0), None).expect("load writing the encoded copy");
        dir
    });
    let work = tempfile::tempdir().expect("temporary directory");
    let db = work.path().join("db");
    std::fs::create_dir(&db).expect("create");
    let mut files: Vec<_> =
        std::fs::read_dir(saved.path().join("db")).expect("list").map(|e| e.expect("entry").path()).collect();
    files.sort();
    for f in &files {
        std::fs::copy(f, db.join(f.file_name().expect("name"))).expect("copy");
    }
    let target = files[(select & 0x7f) as usize % files.len()].file_name().expect("name");
    std::fs::write(db.join(target), bytes).expect("write");
    if target.to_string_lossy().starts_with("seg-") {
        for f in &files {
            let name = f.file_name().expect("name");
            if name.to_string_lossy().starts_with("ROWS-") {
                std::fs::remove_file(db.join(name)).expect("remove the encoded copy");
            }
        }
    }
    let how = if select & 0x80 == 0 { Open::ServeWithin(0) } else { Open::Serve };
    let _ = SenderDb::open(&db, how, None);
}

/// The files of an unfinished labelled build (journal, key, OPRF results, the segments
/// written, the lock), captured by the build's observer when its first bundle was written:
/// what a kill at that moment leaves.
pub fn unfinished_build() -> &'static Path {
    static DIR: OnceLock<(tempfile::TempDir, std::path::PathBuf)> = OnceLock::new();
    &DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (db, copy) = (dir.path().join("db"), dir.path().join("unfinished"));
        std::fs::create_dir(&copy).expect("create");
        let taken = Arc::new(AtomicBool::new(false));
        let (from, to) = (db.clone(), copy.clone());
        let observer: PhaseObserver = Arc::new(move |p| {
            if let Progress::Work(w) = p
                && w.unit == "bundles"
                && !taken.swap(true, Ordering::SeqCst)
            {
                for e in std::fs::read_dir(&from).expect("list") {
                    let f = e.expect("entry").path();
                    std::fs::copy(&f, to.join(f.file_name().expect("name"))).expect("copy");
                }
            }
        });
        let to = BuildInto { dir: &db, resume: false, key_columns: 1, key_file: None };
        SenderDb::build_into(
            to,
            sender_items(),
            Some((build_labels(), vec!["l".into()])),
            unbalanced_params(),
            "fuzz",
            Some(observer),
        )
        .expect("build");
        let path = dir.path().join("unfinished");
        (dir, path)
    })
    .1
}

/// Labels of [`sender_items`] for [`unfinished_build`].
fn build_labels() -> &'static [Vec<u8>] {
    static L: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    L.get_or_init(|| sender_items().iter().map(|i| [&b"label of "[..], i].concat()).collect())
}

/// The `build_resume` target: an unfinished build ([`unfinished_build`]) with one of its
/// files (the first byte selects which) replaced, resumed with its input. A resumed
/// build that succeeds must leave a database that opens.
pub fn build_resume(data: &[u8]) {
    let Some((&select, bytes)) = data.split_first() else { return };
    let unfinished = unfinished_build();
    let work = tempfile::tempdir().expect("temporary directory");
    let db = work.path().join("db");
    std::fs::create_dir(&db).expect("create");
    let mut files: Vec<_> = std::fs::read_dir(unfinished).expect("list").map(|e| e.expect("entry").path()).collect();
    files.sort();
    for f in &files {
        std::fs::copy(f, db.join(f.file_name().expect("name"))).expect("copy");
    }
    let target = files[select as usize % files.len()].file_name().expect("name");
    std::fs::write(db.join(target), bytes).expect("write");
    let to = BuildInto { dir: &db, resume: true, key_columns: 1, key_file: None };
    let labels = Some((build_labels(), vec!["l".into()]));
    if SenderDb::build_into(to, sender_items(), labels, unbalanced_params(), "fuzz", None).is_ok() {
        SenderDb::open(&db, Open::Inspect, None).expect("a resumed build's database opens");
    }
}

/// The `credentials` target: a credentials file body with its magic and a valid checksum.
pub fn credentials_file(body: &[u8]) {
    let bytes = with_checksum([&b"SETWCRED"[..], body].concat());
    let _ = Credentials::decode(&bytes, Path::new("fuzz.creds"));
}

/// The `params_json` target: unbalanced parameters from JSON text, and what they imply.
pub fn params_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(p) = UnbalancedParams::from_json(text) {
        let _ = (p.receiver_max(), p.plan(), p.false_match_log2(1, 1), p.fingerprint());
        let again = UnbalancedParams::from_json(&p.to_json()).expect("parameters re-read as written");
        assert_eq!(again.fingerprint(), p.fingerprint());
    }
}

/// The `csv` target: an input file in the format the first byte selects, keyed by the
/// first column or by name.
pub fn csv(data: &[u8]) {
    let Some((&select, bytes)) = data.split_first() else { return };
    let format = match select % 3 {
        0 => Format::Text,
        1 => Format::Csv { header: true },
        _ => Format::Csv { header: false },
    };
    let key: Vec<String> = match (select / 3) % 3 {
        0 => vec![],
        1 => vec!["id".into()],
        _ => vec!["2".into(), "1".into()],
    };
    if let Format::Csv { header } = format {
        assert!(setwise::testing::csv_paths_agree(bytes, header, &key), "the fast CSV path differs from the csv crate");
    }
    // Read a block at a time (module `streamed`), in blocks as small as a byte.
    let mut file = tempfile::Builder::new().suffix(".csv").tempfile().expect("a temporary file");
    std::io::Write::write_all(&mut file, bytes).expect("writing the temporary file");
    let block = 1 + usize::from(select / 9) % 16;
    assert!(
        setwise::testing::blocks_read_as_whole(file.path(), bytes, format, &key, block),
        "a file read in blocks of {block} bytes differs from the file read whole"
    );
    if let Ok(set) = ItemSet::parse(bytes, Path::new("fuzz.csv"), format, &key) {
        let mut out = Vec::new();
        let all: Vec<usize> = (0..set.len()).collect();
        let written = set.write_rows(&all, &mut out).expect("writing to memory");
        // Rows are written as they were read: reading them back gives the same items.
        if let Format::Csv { .. } = format {
            let again = ItemSet::parse(&out[..], Path::new("fuzz.csv"), format, &key).expect("written rows read back");
            assert_eq!(again.items(), set.items(), "items read back from the written rows");
            assert_eq!(again.stats().rows, written);
        }
    }
}

/// The `ecdh_state` target: a receiver state stored between the steps of the sans-I/O
/// API; what loads must store back to the same bytes.
pub fn ecdh_state(data: &[u8]) {
    if let Ok(state) = ReceiverState::from_bytes(data) {
        assert_eq!(&state.to_bytes()[..], data, "a state stores as it was loaded");
    }
}

/// The exchange key and run id of the `staged_files` target (its seeds are sealed under
/// them: `fuzz/corpus/staged_files/`).
pub const STAGED_FUZZ_KEY: [u8; 32] = [0x5a; 32];
/// The run id of the `staged_files` target.
pub const STAGED_FUZZ_RUN: &str = "run-42";

/// Peer text as shown must hold no control character (escaped by `printable`).
fn shown_safely(text: &str) {
    assert!(!text.chars().any(char::is_control), "raw control characters in {text:?}");
}

/// The `staged_files` target: what a staged run reads from the shared exchange. The first
/// byte's two low bits pick what the rest is: a part file (a receiver's stage-1 message
/// of up to 2^16 points, the count due from the next two bytes), a stage marker as the
/// reader opens it (MAC, then fields; also unauthenticated, as `stage status` without a
/// key does), a marker re-sealed under the target's key first (so the checks after the
/// MAC are reached), or an abort note (as is and re-sealed); bits 2–3 give the stage and
/// bit 4 the role. Nothing may panic or allocate beyond what is due, a part that decodes
/// holds exactly the count due, and every error and shown reason is free of control
/// characters.
pub fn staged_files(data: &[u8]) {
    use setwise::staged::auth::ExchangeKey;
    use setwise::staged::message;
    use setwise::staged::store::AbortNote;
    use setwise::staged::store::{Marker, shown};
    let Some((&which, rest)) = data.split_first() else { return };
    let (stage, role) = ((which >> 2) & 3, if which & 16 == 0 { Role::Sender } else { Role::Receiver });
    let key = ExchangeKey::from_bytes(STAGED_FUZZ_KEY);
    let path = "fuzz.json";
    let check = |r: setwise::Result<Marker>| match r {
        Ok(m) => {
            let _ = (m.content_digest(), m.total_items());
            shown_safely(&shown(&m.run));
            shown_safely(&shown(&m.attempt));
        }
        Err(e) => shown_safely(&e.to_string()),
    };
    match which & 3 {
        0 => {
            let [a, b, body @ ..] = rest else { return };
            let due = usize::from(u16::from_le_bytes([*a, *b]));
            if let Ok(points) = message::decode_part(ecdh::messages::RECEIVER_BLINDED, body, due) {
                assert_eq!(points.len(), due);
            }
            // The same bytes as a replayed run's part: its frames.
            if let Ok(frames) = setwise::staged::replay::decode_frames(body, due as u64) {
                assert_eq!(frames.len(), due);
                assert_eq!(setwise::staged::replay::encode_frames(&frames), body);
            }
        }
        1 => {
            check(Marker::open(rest, stage, role, path, &key, STAGED_FUZZ_RUN));
            check(Marker::parse(rest, stage, role, path));
        }
        2 => {
            let Ok(mut m) = serde_json::from_slice::<Marker>(rest) else { return };
            if m.seal(&key, STAGED_FUZZ_RUN).is_err() {
                return; // not a role: nothing a party would seal
            }
            let sealed = serde_json::to_vec(&m).expect("a marker serialises");
            let opened = Marker::open(&sealed, m.stage, role, path, &key, STAGED_FUZZ_RUN);
            if m.role == role.name() && m.format == setwise::staged::store::FORMAT {
                assert!(opened.is_ok(), "a sealed marker of its own stage and role opens");
            }
            check(opened);
        }
        _ => {
            match AbortNote::open(rest, role, path, &key, STAGED_FUZZ_RUN) {
                Ok(why) => shown_safely(&why),
                Err(e) => shown_safely(&e.to_string()),
            }
            if let Some(sealed) = resealed(rest, &key, role) {
                let why = AbortNote::open(&sealed, role, path, &key, STAGED_FUZZ_RUN);
                shown_safely(&why.expect("a sealed note of its own role opens"));
            }
            shown_safely(&AbortNote::shown_unverified(rest));
        }
    }
}

/// The `report` target: a report file's text as `setwise report` reads it; a report that
/// parses renders as a page (alone and beside itself as the peer's) with every string
/// escaped, and its shareable copy (`--share`) reads back as a report without results.
pub fn report(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(r) = report_page::RunReport::parse(text) else { return };
    let page = report_page::render(&r, None, "fuzz").expect("one report always renders");
    assert!(!page.contains("<script") && !page.contains("<img"), "markup from the report reached the page");
    let _ = report_page::render(&r, Some(&r), "fuzz");
    let shared = report_page::shareable(text).expect("a report that parses can be shared");
    let again = report_page::RunReport::parse(&shared).expect("the shareable copy is a report");
    assert!(again.private_results().is_empty(), "the shareable copy holds no result");
}

/// The `label` target: a serialised label (the unbalanced sender's, decrypted by the
/// receiver) split into as many columns as the first byte says; a label that splits
/// re-encodes to the same bytes.
pub fn label(data: &[u8]) {
    let Some((&columns, bytes)) = data.split_first() else { return };
    if let Some(fields) = decode_label(bytes, usize::from(columns)) {
        assert_eq!(fields.len(), usize::from(columns));
        assert_eq!(encode_label(&fields), bytes, "a label re-encodes as it was read");
    }
}

/// The `judge_key` target: a judge's public key as hex text (the `judge.pub` a client
/// is given); a key that parses has one encoding, the one it was read from.
pub fn judge_key_hex(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(pk) = public_key_from_hex(text) {
        let hex = public_key_hex(&pk);
        assert_eq!(hex, text.trim().to_ascii_lowercase(), "a judge key has one hex encoding");
        assert_eq!(public_key_from_hex(&hex).expect("a written key reads back"), pk);
    }
}

/// An abort note's bytes sealed under `key` as `role`'s, if they are a note.
fn resealed(bytes: &[u8], key: &setwise::staged::auth::ExchangeKey, role: Role) -> Option<Vec<u8>> {
    use setwise::staged::store::AbortNote;
    let n = serde_json::from_slice::<AbortNote>(bytes).ok()?;
    Some(serde_json::to_vec(&AbortNote::sealed(key, STAGED_FUZZ_RUN, role, &n.error)).expect("a note serialises"))
}

/// The `x509_identity` target: a certificate (DER) as a TLS peer presents it; its
/// identity, if it names one, is non-empty, free of control characters and at most 256
/// characters and an ellipsis, as it goes to logs and is compared with client IDs.
pub fn x509_identity(data: &[u8]) {
    if let Some(id) = setwise::net::certificate_identity(data) {
        assert!(!id.is_empty(), "an identity is never empty");
        assert!(!id.chars().any(char::is_control), "control characters in {id:?}");
        assert!(id.chars().count() <= 257, "an identity is bounded");
    }
}
