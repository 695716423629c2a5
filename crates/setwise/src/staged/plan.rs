//! What both parties of a staged run agree on: the run, the job, the number of buckets
//! B and the bucket key, announced in each party's hello and settled from the two hellos
//! alone, so each side (and each of its tasks) computes the same [`Plan`] without
//! talking to the other.
//!
//! The hello is the session layer's frame ([`Hello`]): its parameter string carries
//! `key_columns`, `staged=v1`, `run`, `buckets` (`auto` or a number) and `bucket_key`
//! (`session`, or the fingerprint of a key the operators share). Every field must be
//! equal on both sides; a difference is refused naming the field and both values.
//!
//! B: the operators' number when both give the same one, else the rule
//! [`choose_buckets`] both compute from the two announced set sizes.

use super::seed::RunSeed;
use crate::crypto::dst::{self, Domain, SessionId, fingerprint, session_id};
use crate::crypto::ristretto::Encoded;
use crate::error::{Error, Result, UnknownName};
use crate::io::from_hex;
use crate::protocols::params::ProtocolParams;
use crate::protocols::{MAX_SET_SIZE, Operation, Protocol, Role, SumTo};
use crate::session::auto::{Choice, choose_staged};
use crate::session::{Hello, Job};
use crate::wire::text::{MAX_SHOWN, printable};
use std::fmt;
use std::str::FromStr;
use zeroize::Zeroizing;

/// Items per bucket that the automatic rule aims at: 2^20, whose ecdh messages (32 MiB
/// each way) fit one task's memory with room to spare.
pub const TARGET_BUCKET_ITEMS: u64 = 1 << 20;
/// Most buckets a run may have: 2^16 (a marker lists every bucket).
pub const MAX_BUCKETS: u32 = 1 << 16;
/// Longest run id: it names directories and appears in every marker.
pub const MAX_RUN_ID: usize = 64;

/// How many buckets a party asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buckets {
    /// B from both set sizes ([`choose_buckets`]).
    Auto,
    /// Exactly this many (1..=[`MAX_BUCKETS`]).
    Fixed(u32),
}

impl fmt::Display for Buckets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Buckets::Auto => f.write_str("auto"),
            Buckets::Fixed(n) => write!(f, "{n}"),
        }
    }
}

impl FromStr for Buckets {
    type Err = UnknownName;
    fn from_str(s: &str) -> std::result::Result<Self, UnknownName> {
        if s == "auto" {
            return Ok(Buckets::Auto);
        }
        match s.parse::<u32>() {
            Ok(n) if (1..=MAX_BUCKETS).contains(&n) => Ok(Buckets::Fixed(n)),
            _ => Err(UnknownName::new("bucket count", s, format!("auto or a number from 1 to {MAX_BUCKETS}"))),
        }
    }
}

/// The automatic B: the smallest power of two that keeps the larger set's buckets at
/// about [`TARGET_BUCKET_ITEMS`] items, `next_pow2(⌈max(|X|, |Y|) / 2^20⌉)`, at least 1
/// and at most [`MAX_BUCKETS`]. Both parties compute it from the two hellos.
pub fn choose_buckets(sender_size: u64, receiver_size: u64) -> u32 {
    let need = sender_size.max(receiver_size).div_ceil(TARGET_BUCKET_ITEMS).max(1);
    need.next_power_of_two().min(MAX_BUCKETS as u64) as u32
}

/// A bucket key both operators were given (instead of one derived from the session), so
/// that the same item falls in the same bucket in every run. Redacted in `Debug`.
#[derive(Clone)]
pub struct BucketKey(Zeroizing<[u8; 32]>);

impl fmt::Debug for BucketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BucketKey({})", self.fingerprint())
    }
}

impl BucketKey {
    /// The key from its 32 bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(Zeroizing::new(bytes))
    }

    /// The key from 64 hexadecimal digits (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<Self> {
        let bad = || Error::params("bucket_key", "bucket key: 32 bytes (64 hexadecimal digits) expected".into());
        let bytes: [u8; 32] = from_hex(text.trim()).ok_or_else(bad)?.try_into().map_err(|_| bad())?;
        Ok(Self::from_bytes(bytes))
    }

    /// The key's public fingerprint, which the hello carries so both sides see that they
    /// hold the same key.
    pub fn fingerprint(&self) -> String {
        fingerprint(dst::STAGED_BUCKET_KEY_CHECK, &self.0[..])
    }
}

/// What a party runs and asks for; both parties' must agree (the role excepted).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The run id, shared by both operators: letters, digits, `.`, `_`, `-`.
    pub run_id: String,
    /// The protocol: one whose spec lists staged operations.
    pub protocol: Protocol,
    /// The operation: one of the protocol's staged ones.
    pub operation: Operation,
    /// Key columns joined into each item (both sides the same).
    pub key_columns: usize,
    /// The number of buckets asked for.
    pub buckets: Buckets,
    /// The operators' bucket key, if any (else one is derived from the session).
    pub bucket_key: Option<BucketKey>,
    /// Who learns the sum of `sum` ([`SumTo::Receiver`]: the receiver adds up the
    /// buckets' sums, the sender learns nothing).
    pub sum_to: SumTo,
}

impl Settings {
    /// Settings for `operation` of `protocol` in run `run_id`, one key column, automatic
    /// B, a session-derived bucket key.
    pub fn new(run_id: &str, protocol: Protocol, operation: Operation) -> Self {
        Self {
            run_id: run_id.into(),
            protocol,
            operation,
            key_columns: 1,
            buckets: Buckets::Auto,
            bucket_key: None,
            sum_to: SumTo::Sender,
        }
    }

    /// Checks what can be checked alone: a stageable protocol and operation, a run id.
    pub fn validate(&self) -> Result<()> {
        let staged = self.protocol.spec().staged;
        if !staged.contains(&self.operation) {
            let able: Vec<String> = crate::protocols::registry::ALL
                .iter()
                .filter(|s| !s.staged.is_empty())
                .map(|s| format!("{} ({})", s.name, s.staged.iter().map(|o| o.name()).collect::<Vec<_>>().join(", ")))
                .collect();
            return Err(Error::params(
                "protocol",
                format!(
                    "protocol {} {}: not a staged run; staged runs take {} (docs/scale-out.md)",
                    self.protocol,
                    self.operation,
                    able.join("; ")
                ),
            ));
        }
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if self.run_id.is_empty() || self.run_id.len() > MAX_RUN_ID || !self.run_id.chars().all(ok) {
            return Err(Error::params(
                "run_id",
                format!(
                    "run id '{}': 1 to {MAX_RUN_ID} letters, digits, '.', '_' or '-'",
                    printable(&self.run_id, MAX_SHOWN)
                ),
            ));
        }
        if self.key_columns == 0 {
            return Err(Error::params("key_columns", "key_columns: at least one key column".into()));
        }
        self.sum_to.check(self.operation)
    }

    /// The hello's parameter string (canonical: fixed field order; `sum_to` only when it
    /// is not the default, so hellos from before it stay as they were).
    pub fn hello_params(&self) -> String {
        let key = match &self.bucket_key {
            Some(k) => k.fingerprint(),
            None => "session".into(),
        };
        let to = match self.sum_to {
            SumTo::Sender => String::new(),
            SumTo::Receiver => format!(";sum_to={}", self.sum_to),
        };
        format!(
            "key_columns={};staged=v1;run={};buckets={};bucket_key={key}{to}",
            self.key_columns, self.run_id, self.buckets
        )
    }

    /// This party's hello for `set_size` distinct items; its nonce comes from the seed,
    /// so the hello stage writes the same bytes each time it runs.
    pub fn hello(&self, role: Role, set_size: usize, seed: &RunSeed) -> Hello {
        Hello {
            protocol: self.protocol.name().into(),
            operation: self.operation.name().into(),
            params: self.hello_params(),
            role,
            set_size: set_size as u64,
            nonce: seed.hello_nonce(&self.run_id),
        }
    }
}

/// What both parties agreed, computed by each from the two hellos.
#[derive(Clone)]
pub struct Plan {
    /// The session id, from both hellos' nonces (it separates every hash of the run).
    pub session: SessionId,
    /// This party's role.
    pub role: Role,
    /// The operation.
    pub operation: Operation,
    /// The protocol every bucket runs: the one both named, the one a side named when the
    /// other said `auto`, or `auto`'s pick ([`choose_staged`]).
    pub protocol: Protocol,
    /// Its parameters.
    pub params: ProtocolParams,
    /// Why `auto` picked it, for the log; `None` when a side named it.
    pub why: Option<&'static str>,
    /// Who learns the sum of `sum`.
    pub sum_to: SumTo,
    /// The number of buckets B.
    pub buckets: u32,
    /// The sender's announced number of distinct items.
    pub sender_size: u64,
    /// The receiver's announced number of distinct items.
    pub receiver_size: u64,
    bucket_hash: Zeroizing<[u8; 32]>,
    mix_hash: [u8; 32],
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("role", &self.role)
            .field("operation", &self.operation)
            .field("protocol", &self.protocol)
            .field("params", &self.params)
            .field("sum_to", &self.sum_to)
            .field("buckets", &self.buckets)
            .field("sender_size", &self.sender_size)
            .field("receiver_size", &self.receiver_size)
            .finish_non_exhaustive()
    }
}

/// The `key=value` fields of a hello's parameter string, in order.
fn fields(params: &str) -> Vec<(&str, &str)> {
    params.split(';').filter(|f| !f.is_empty()).map(|f| f.split_once('=').unwrap_or((f, ""))).collect()
}

impl Plan {
    /// Settles the run from this side's `settings` and both hellos (`ours` must be the
    /// one `settings` makes). Refuses, naming the field and both values, when the
    /// hellos disagree on anything but the role, when both claim one role, or when the
    /// peer announces more than [`MAX_SET_SIZE`] items.
    pub fn agree(settings: &Settings, ours: &Hello, theirs: &Hello) -> Result<Plan> {
        settings.validate()?;
        let mismatch = |field: &'static str, a: &str, b: &str| Error::Mismatch {
            field,
            ours: printable(a, MAX_SHOWN),
            theirs: printable(b, MAX_SHOWN),
        };
        if ours.params != settings.hello_params() {
            return Err(Error::usage("settings", "this side's hello was made with other settings"));
        }
        if ours.operation != theirs.operation {
            return Err(mismatch("operation", &ours.operation, &theirs.operation));
        }
        let (a, b) = (fields(&ours.params), fields(&theirs.params));
        for (name, field) in [
            ("key_columns", "key_columns"),
            ("staged", "staged"),
            ("run", "run id"),
            ("buckets", "buckets"),
            ("bucket_key", "bucket key"),
        ] {
            let get = |f: &[(&str, &str)]| f.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
            let (x, y) = (get(&a).unwrap_or_default(), get(&b).unwrap_or_else(|| "(none)".into()));
            if x != y {
                return Err(mismatch(field, &x, &y));
            }
        }
        // Only named when it is not the default.
        fn sum_to<'a>(f: &[(&'a str, &'a str)]) -> &'a str {
            f.iter().find(|(k, _)| *k == "sum_to").map_or("sender", |(_, v)| v)
        }
        if sum_to(&a) != sum_to(&b) {
            return Err(mismatch("sum_to", sum_to(&a), sum_to(&b)));
        }
        if a.len() != b.len() {
            return Err(mismatch("parameters", &ours.params, &theirs.params));
        }
        if ours.role == theirs.role || !matches!(theirs.role, Role::Sender | Role::Receiver) {
            return Err(Error::Mismatch {
                field: "role",
                ours: ours.role.to_string(),
                theirs: format!("{} (one side must be the sender, the other the receiver)", theirs.role),
            });
        }
        if theirs.set_size > MAX_SET_SIZE {
            return Err(crate::error::Deviation::SetTooLarge { announced: theirs.set_size, limit: MAX_SET_SIZE }.into());
        }
        let (sender, receiver) = if ours.role == Role::Sender { (ours, theirs) } else { (theirs, ours) };
        let choice = resolve(settings.operation, &ours.protocol, &theirs.protocol, sender.set_size, receiver.set_size)?;
        let session = session_id(&sender.nonce, &receiver.nonce, None);
        let buckets = match settings.buckets {
            Buckets::Fixed(n) => n,
            Buckets::Auto => choose_buckets(sender.set_size, receiver.set_size),
        };
        let bucket_session = match &settings.bucket_key {
            Some(k) => SessionId(*k.0),
            None => session,
        };
        Ok(Plan {
            session,
            role: ours.role,
            operation: settings.operation,
            protocol: choice.protocol,
            params: choice.params,
            why: (!choice.why.is_empty()).then_some(choice.why),
            sum_to: settings.sum_to,
            buckets,
            sender_size: sender.set_size,
            receiver_size: receiver.set_size,
            bucket_hash: Zeroizing::new(Domain::new(dst::STAGED_BUCKET, bucket_session).key()),
            mix_hash: Domain::new(dst::STAGED_MIX, session).key(),
        })
    }

    /// The job each bucket's role runs: the agreed protocol and parameters, with this
    /// party's `key_columns`.
    pub fn job(&self, key_columns: usize) -> Job {
        let mut job = Job::new(self.protocol, self.operation).with_params(self.params.clone()).with_sum_to(self.sum_to);
        job.key_columns = key_columns;
        job
    }

    /// What identifies this plan to a party's executors: the session id and everything
    /// both hellos settled (protocol, parameters, B, both sizes). An executor rebuilds the
    /// plan from the hellos in the exchange and compares this, so a peer hello replaced
    /// since the runner read it (the same nonce with another size, say) is refused, not
    /// run under another plan than the runner's.
    pub fn id(&self) -> String {
        format!(
            "{}/{}/{:?}/{}/{}/{}/{}",
            crate::io::hex(&self.session.0),
            self.protocol,
            self.params,
            self.sum_to,
            self.buckets,
            self.sender_size,
            self.receiver_size
        )
    }

    /// The peer's announced number of items.
    pub fn peer_size(&self) -> u64 {
        if self.role == Role::Sender { self.receiver_size } else { self.sender_size }
    }

    /// This party's announced number of items.
    pub fn own_size(&self) -> u64 {
        if self.role == Role::Sender { self.sender_size } else { self.receiver_size }
    }

    /// The bucket of `item`: its keyed BLAKE3 hash, reduced to `0..B`.
    pub fn bucket_of(&self, item: &[u8]) -> u32 {
        reduce(blake3::keyed_hash(&self.bucket_hash, item).as_bytes(), self.buckets)
    }

    /// The mixed part of an output value (cardinality): a keyed hash of the value reduced
    /// to `0..B`, unrelated to the bucket the value came from.
    pub fn mix_part_of(&self, value: &Encoded) -> u32 {
        reduce(blake3::keyed_hash(&self.mix_hash, value).as_bytes(), self.buckets)
    }
}

/// The protocol of the run from both hellos' names: the one both name; `auto`'s pick
/// ([`choose_staged`]) from the two set sizes when both say `auto`; the other's when one
/// says `auto` and the other names a protocol the runner replays for the operation, with
/// its default parameters (those a named staged run takes). Anything else is a mismatch
/// naming both protocols. Both sides compute the same from the same two hellos.
fn resolve(op: Operation, ours: &str, theirs: &str, sender: u64, receiver: u64) -> Result<Choice> {
    let auto = Protocol::Auto.name();
    let mismatch = |why: &str| Error::Mismatch {
        field: "protocol",
        ours: printable(ours, MAX_SHOWN),
        theirs: format!("{}{why}", printable(theirs, MAX_SHOWN)),
    };
    if ours == auto && theirs == auto {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        return choose_staged(op, size(sender), size(receiver));
    }
    let named = |protocol: Protocol| Choice { protocol, params: protocol.spec().default_params(), why: "" };
    if ours != auto && theirs != auto {
        // This side's settings were validated: its protocol stages the operation.
        return match ours == theirs {
            true => ours.parse().map(named).map_err(|_| mismatch("")),
            false => Err(mismatch("")),
        };
    }
    let other = if ours == auto { theirs } else { ours };
    match replayed_for(op).find(|p| p.name() == other) {
        Some(protocol) => Ok(named(protocol)),
        None => {
            let able: Vec<&str> = replayed_for(op).map(|p| p.name()).collect();
            Err(mismatch(&format!(
                " (auto stages {op} only with a protocol the runner replays, {}: name the same protocol on both \
                 sides)",
                able.join(", ")
            )))
        }
    }
}

/// The protocols the runner replays that stage `op` (those an `auto` side can follow).
fn replayed_for(op: Operation) -> impl Iterator<Item = Protocol> {
    crate::protocols::registry::ALL
        .iter()
        .filter(move |s| !s.own_stages && s.staged.contains(&op) && s.protocol() != Protocol::Auto)
        .map(|s| s.protocol())
}

/// The first 8 bytes of a hash as a number in `0..n` (multiply-shift: bias ≤ n/2^64).
fn reduce(hash: &[u8; 32], n: u32) -> u32 {
    let x = u64::from_le_bytes(hash[..8].try_into().expect("8 bytes"));
    ((x as u128 * n as u128) >> 64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(a: &Settings, b: &Settings, sizes: (usize, usize)) -> (Result<Plan>, Result<Plan>) {
        let (sa, sb) = (RunSeed::from_bytes([1; 32]), RunSeed::from_bytes([2; 32]));
        let ha = a.hello(Role::Sender, sizes.0, &sa);
        let hb = b.hello(Role::Receiver, sizes.1, &sb);
        let hb = Hello::decode(&hb.encode()).unwrap();
        (Plan::agree(a, &ha, &hb), Plan::agree(b, &hb, &ha))
    }

    #[test]
    fn both_sides_settle_the_same_plan() {
        let s = Settings::new("run-1", Protocol::Ecdh, Operation::Intersection);
        let (p, q) = pair(&s, &s, (3 << 20, 5));
        let (p, q) = (p.unwrap(), q.unwrap());
        assert_eq!(p.session, q.session);
        assert_eq!((p.buckets, q.buckets), (4, 4));
        assert_eq!((p.sender_size, p.receiver_size, p.peer_size(), q.peer_size()), (3 << 20, 5, 5, 3 << 20));
        for item in [&b"a"[..], b"", "ü,\"x\"".as_bytes()] {
            assert_eq!(p.bucket_of(item), q.bucket_of(item));
        }
        let fixed = Settings { buckets: Buckets::Fixed(16), ..s.clone() };
        assert_eq!(pair(&fixed, &fixed, (1, 1)).0.unwrap().buckets, 16);
    }

    #[test]
    fn a_plans_id_changes_with_whatever_the_hellos_settled() {
        let s = Settings::new("r", Protocol::Auto, Operation::Union);
        let (a, b) = (pair(&s, &s, (2000, 1000)).0.unwrap(), pair(&s, &s, (1000, 1000)).0.unwrap());
        assert_eq!(a.session, b.session, "the same nonces");
        assert_ne!(a.id(), b.id(), "another size, and with it another mqrpmt test");
        let fixed = Settings { buckets: Buckets::Fixed(8), ..s.clone() };
        assert_ne!(pair(&fixed, &fixed, (1000, 1000)).0.unwrap().id(), b.id());
        assert_eq!(pair(&s, &s, (1000, 1000)).0.unwrap().id(), b.id());
    }

    #[test]
    fn choose_buckets_follows_the_rule() {
        assert_eq!(choose_buckets(0, 0), 1);
        assert_eq!(choose_buckets(1 << 20, 7), 1);
        assert_eq!(choose_buckets(7, (1 << 20) + 1), 2);
        assert_eq!(choose_buckets(5 << 20, 0), 8);
        assert_eq!(choose_buckets(MAX_SET_SIZE, MAX_SET_SIZE), 4096);
        assert_eq!(choose_buckets(u64::MAX, 0), MAX_BUCKETS);
        assert_eq!("16".parse::<Buckets>(), Ok(Buckets::Fixed(16)));
        assert!("0".parse::<Buckets>().is_err() && "65537".parse::<Buckets>().is_err());
        let refused = "0".parse::<Buckets>().unwrap_err().to_string();
        assert_eq!(refused, "unknown bucket count '0' (expected auto or a number from 1 to 65536)");
    }

    #[test]
    fn disagreements_name_the_field_and_both_values() {
        let s = Settings::new("run-1", Protocol::Ecdh, Operation::Intersection);
        let b16 = Settings { buckets: Buckets::Fixed(16), ..s.clone() };
        let b8 = Settings { buckets: Buckets::Fixed(8), ..s.clone() };
        let (e1, e2) = pair(&b16, &b8, (1, 1));
        let (e1, e2) = (e1.unwrap_err().to_string(), e2.unwrap_err().to_string());
        assert!(e1.contains("buckets") && e1.contains("16") && e1.contains('8'), "{e1}");
        assert!(e2.contains("this side has 8, the peer has 16"), "{e2}");
        let auto_vs_fixed = pair(&s, &b16, (1, 1)).0.unwrap_err().to_string();
        assert!(auto_vs_fixed.contains("auto") && auto_vs_fixed.contains("16"), "{auto_vs_fixed}");
        let other_run = Settings::new("run-2", Protocol::Ecdh, Operation::Intersection);
        assert!(pair(&s, &other_run, (1, 1)).0.unwrap_err().to_string().contains("run id"));
        let card = Settings::new("run-1", Protocol::Ecdh, Operation::Cardinality);
        assert!(pair(&s, &card, (1, 1)).0.unwrap_err().to_string().contains("operation"));
        let keyed = Settings { bucket_key: Some(BucketKey::from_bytes([9; 32])), ..s.clone() };
        assert!(pair(&s, &keyed, (1, 1)).0.unwrap_err().to_string().contains("bucket key"));
        // Who learns a sum: named in the hello only when it is the receiver.
        let sum = Settings::new("run-1", Protocol::Mqrpmt, Operation::Sum);
        let reverse = Settings { sum_to: SumTo::Receiver, ..sum.clone() };
        assert!(reverse.hello_params().ends_with(";bucket_key=session;sum_to=receiver"));
        assert!(!sum.hello_params().contains("sum_to"));
        for (a, b) in [(&sum, &reverse), (&reverse, &sum)] {
            let e = pair(a, b, (1, 1)).0.unwrap_err().to_string();
            assert!(e.contains("sum_to") && e.contains("receiver") && e.contains("sender"), "{e}");
        }
        let plan = pair(&reverse, &reverse, (1, 1)).0.unwrap();
        assert_eq!((plan.sum_to, plan.job(1).sum_to), (SumTo::Receiver, SumTo::Receiver));
        assert_ne!(plan.id(), pair(&sum, &sum, (1, 1)).0.unwrap().id());
        let union = Settings { sum_to: SumTo::Receiver, ..Settings::new("run-1", Protocol::Mqrpmt, Operation::Union) };
        assert!(union.validate().unwrap_err().to_string().contains("not union"));
        let sa = RunSeed::from_bytes([1; 32]);
        let h = s.hello(Role::Sender, 1, &sa);
        assert!(Plan::agree(&s, &h, &h).unwrap_err().to_string().contains("role"));
        let mut big = s.hello(Role::Receiver, 1, &sa);
        big.set_size = MAX_SET_SIZE + 1;
        assert!(Plan::agree(&s, &h, &big).is_err());
        assert!(Settings::new("a/b", Protocol::Ecdh, Operation::Intersection).validate().is_err());
        assert!(Settings::new("a", Protocol::Vole, Operation::Intersection).validate().is_ok());
        let e = Settings::new("a", Protocol::Vole, Operation::Cardinality).validate().unwrap_err().to_string();
        assert!(e.contains("vole (intersection)") && e.contains("ecdh (intersection, cardinality)"), "{e}");
        assert!(Settings::new("a", Protocol::Unbalanced, Operation::Intersection).validate().is_err());
        assert!(Settings::new("a", Protocol::Auto, Operation::Intersection).validate().is_ok());
        assert!(Settings::new("a", Protocol::Auto, Operation::Shares).validate().is_err());
    }

    #[test]
    fn auto_picks_a_replayed_protocol_from_both_sizes_or_follows_a_named_one() {
        use crate::protocols::mqrpmt::{Construction, MqrpmtParams};
        let s = |p, op| Settings::new("r", p, op);
        let both = |a: &Settings, b: &Settings, sizes| {
            let (p, q) = pair(a, b, sizes);
            let (p, q) = (p.unwrap(), q.unwrap());
            assert_eq!((p.protocol, &p.params), (q.protocol, &q.params), "both sides pick alike");
            p
        };
        let auto = |op| s(Protocol::Auto, op);
        let p = both(&auto(Operation::Intersection), &auto(Operation::Intersection), (5, 1 << 20));
        assert_eq!(p.protocol, Protocol::Vole);
        assert!(p.why.is_some_and(|w| w.contains("vole")), "{:?}", p.why);
        assert_eq!(p.job(2).params, Protocol::Vole.spec().default_params());
        assert_eq!(p.job(2).key_columns, 2);
        let mq = |c| ProtocolParams::Mqrpmt(MqrpmtParams::of(c));
        for op in [Operation::Cardinality, Operation::Sum, Operation::Union, Operation::PrivateId] {
            let balanced = both(&auto(op), &auto(op), (1000, 1000));
            assert_eq!((balanced.protocol, balanced.params), (Protocol::Mqrpmt, mq(Construction::Cwprf)), "{op}");
            let larger_sender = both(&auto(op), &auto(op), (2000, 1000));
            assert_eq!(larger_sender.params, mq(Construction::Poprf), "{op}");
            assert_eq!(larger_sender.job(1).params, mq(Construction::Poprf), "{op}");
        }
        // A named replayed protocol is followed with its defaults, from either side.
        let named = s(Protocol::Mqrpmt, Operation::Intersection);
        for (a, b) in [(&auto(Operation::Intersection), &named), (&named, &auto(Operation::Intersection))] {
            let p = both(a, b, (2000, 1000));
            assert_eq!((p.protocol, p.params, p.why), (Protocol::Mqrpmt, mq(Construction::Cwprf), None));
        }
        let vole = s(Protocol::Vole, Operation::Intersection);
        assert_eq!(both(&vole, &vole, (3, 3)).protocol, Protocol::Vole);
        let ecdh = s(Protocol::Ecdh, Operation::Intersection);
        assert_eq!(both(&ecdh, &ecdh, (3, 3)).protocol, Protocol::Ecdh);
        // ecdh runs stages of its own, which an auto side (replaying) cannot follow: both
        // refuse, naming the protocols auto can follow.
        let (e1, e2) = pair(&auto(Operation::Intersection), &ecdh, (3, 3));
        for e in [e1.unwrap_err().to_string(), e2.unwrap_err().to_string()] {
            assert!(e.contains("protocol") && e.contains("ecdh") && e.contains("auto"), "{e}");
            assert!(e.contains("compact, mqrpmt, vole"), "{e}");
        }
        let e = pair(&vole, &s(Protocol::Compact, Operation::Intersection), (3, 3)).0.unwrap_err().to_string();
        assert!(e.contains("this side has vole, the peer has compact"), "{e}");
        // A peer naming a replayed protocol that does not stage the operation is refused.
        let card = auto(Operation::Cardinality);
        let (ours, mut theirs) = (card.hello(Role::Sender, 1, &RunSeed::from_bytes([1; 32])), {
            card.hello(Role::Receiver, 1, &RunSeed::from_bytes([2; 32]))
        });
        theirs.protocol = "vole".into();
        let e = Plan::agree(&card, &ours, &theirs).unwrap_err().to_string();
        assert!(e.contains("auto stages cardinality only with a protocol the runner replays, mqrpmt"), "{e}");
        // A hostile peer's protocol name is refused, escaped.
        let sa = RunSeed::from_bytes([1; 32]);
        let a = auto(Operation::Union);
        let ours = a.hello(Role::Sender, 1, &sa);
        let mut theirs = a.hello(Role::Receiver, 1, &RunSeed::from_bytes([2; 32]));
        theirs.protocol = "\u{1b}[2Jecdh".into();
        let e = Plan::agree(&a, &ours, &theirs).unwrap_err().to_string();
        assert!(e.contains("protocol") && !e.contains('\u{1b}'), "{e}");
    }

    #[test]
    fn an_operator_bucket_key_fixes_buckets_across_runs() {
        let key = BucketKey::from_hex(&"ab".repeat(32)).unwrap();
        let s = Settings {
            bucket_key: Some(key),
            buckets: Buckets::Fixed(64),
            ..Settings::new("r", Protocol::Ecdh, Operation::Intersection)
        };
        let p = pair(&s, &s, (10, 10)).0.unwrap();
        let mut other = s.clone();
        other.run_id = "r2".into();
        let q = pair(&other, &other, (10, 10)).0.unwrap();
        assert_ne!(p.session, q.session);
        let items: Vec<String> = (0..200).map(|i| i.to_string()).collect();
        assert!(items.iter().all(|i| p.bucket_of(i.as_bytes()) == q.bucket_of(i.as_bytes())));
        let u = Settings { buckets: Buckets::Fixed(64), ..Settings::new("r", Protocol::Ecdh, Operation::Intersection) };
        let (u1, u2) = (pair(&u, &u, (10, 10)).0.unwrap(), {
            let mut o = u.clone();
            o.run_id = "r2".into();
            pair(&o, &o, (10, 10)).0.unwrap()
        });
        assert!(
            items.iter().any(|i| u1.bucket_of(i.as_bytes()) != u2.bucket_of(i.as_bytes())),
            "session keys differ per run"
        );
        assert!(BucketKey::from_hex("abcd").is_err());
    }
}
