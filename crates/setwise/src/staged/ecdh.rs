//! Staged DH-PSI, one bucket at a time: pure functions from a party's seed, the agreed
//! [`Plan`] and bytes or items to values, for a runner that moves the messages itself
//! (the CLI's [`runner`](super::runner), or Spark tasks through the Python binding).
//! Each is DH-PSI's own step ([`steps`](crate::protocols::ecdh::steps)) with a key
//! derived from the seed; only the mixing of `cardinality` across buckets is staged's.
//!
//! Keys: the receiver has one exponent b for the run, the sender one exponent a_i per
//! bucket i, all derived from the party's [`RunSeed`] and the session, so a retried task
//! computes the same values. H is ecdh's own hash to ristretto255 in the run's session
//! ([`item_hasher`](crate::protocols::ecdh::item_hasher)), so the points are those of a
//! single-machine run.
//!
//! | stage | who | computes | message |
//! |---|---|---|---|
//! | 1 | receiver | b·H(y) for bucket i's items, in input order | [`RECEIVER_BLINDED`], part i |
//! | 1 | sender | a_i·H(x) for bucket i's items, sorted | [`SENDER_BLINDED`], part i (mixed for cardinality) |
//! | 2 | sender | a_i·(b·H(y)) in the receiver's order | [`DOUBLE_BLINDED`], part i (mixed for cardinality) |
//! | 3 | receiver | b·(a_i·H(x)), then matches a·b·H(y) | (the result, in its own workdir) |
//!
//! Sorting by value is the shuffle: the sorted order of pseudorandom points is a fixed
//! function of the set, whatever the input order was. For `cardinality` the sender
//! spreads both of its messages over B parts by a keyed hash of each value
//! ([`mix`]), so the receiver never learns which bucket a value, or a match, came from:
//! it learns |X ∩ Y|, not a count per bucket.
//!
//! [`RECEIVER_BLINDED`]: crate::protocols::ecdh::messages::RECEIVER_BLINDED
//! [`SENDER_BLINDED`]: crate::protocols::ecdh::messages::SENDER_BLINDED
//! [`DOUBLE_BLINDED`]: crate::protocols::ecdh::messages::DOUBLE_BLINDED

use super::plan::Plan;
use super::seed::RunSeed;
use crate::crypto::dst;
use crate::crypto::ristretto::{Encoded, SecretScalar};
use crate::error::{Deviation, Error, Result};
use crate::protocols::Role;
use crate::protocols::ecdh::steps::{ReceiverState, SenderState};
use rayon::prelude::*;
use std::collections::HashSet;

/// The exponent of `role` for `bucket` (the receiver's is one for all buckets).
fn exponent(seed: &RunSeed, plan: &Plan, role: Role, bucket: u32) -> Result<SecretScalar> {
    let mut input = Vec::with_capacity(32 + 10 + 4);
    input.extend_from_slice(&plan.session.0);
    input.extend_from_slice(role.name().as_bytes());
    input.extend_from_slice(&bucket.to_le_bytes());
    SecretScalar::from_wide(&seed.derive(dst::STAGED_ECDH_SCALAR, &input)).ok_or_else(|| {
        Error::usage("run_seed", "the run seed gives a zero exponent (probability 2^-252): start a new run")
    })
}

fn check_bucket(plan: &Plan, bucket: u32) -> Result<()> {
    if bucket >= plan.buckets {
        return Err(Error::usage("bucket", format!("bucket {bucket} of {}", plan.buckets)));
    }
    Ok(())
}

/// The receiver's state: its one key for the run.
fn receiver(seed: &RunSeed, plan: &Plan) -> Result<ReceiverState> {
    ReceiverState::with_key(plan.session, plan.operation, 0, exponent(seed, plan, Role::Receiver, 0)?)
}

/// The sender's state in bucket `bucket`: its key a_i.
fn sender(seed: &RunSeed, plan: &Plan, bucket: u32) -> Result<SenderState> {
    check_bucket(plan, bucket)?;
    SenderState::with_key(plan.session, plan.operation, exponent(seed, plan, Role::Sender, bucket)?)
}

/// Receiver, stage 1, one bucket: b·H(y) for the bucket's items, in their order.
pub fn receiver_blind<I: AsRef<[u8]> + Sync>(seed: &RunSeed, plan: &Plan, items: &[I]) -> Result<Vec<Encoded>> {
    Ok(receiver(seed, plan)?.blind(items))
}

/// Sender, stage 1, bucket `bucket`: a_i·H(x) for the bucket's items, sorted.
pub fn sender_blind<I: AsRef<[u8]> + Sync>(
    seed: &RunSeed,
    plan: &Plan,
    bucket: u32,
    items: &[I],
) -> Result<Vec<Encoded>> {
    Ok(sender(seed, plan, bucket)?.blind_own(items))
}

/// Sender, stage 2, bucket `bucket`: a_i·P for each of the receiver's points P of that
/// bucket, in its order (sorted for cardinality, then [`mix`]ed). Fails with the index of
/// the first point that is not a canonical encoding of a group element other than the
/// identity.
pub fn sender_reblind(seed: &RunSeed, plan: &Plan, bucket: u32, points: &[Encoded]) -> Result<Vec<Encoded>> {
    sender(seed, plan, bucket)?.reblind(points)
}

/// Receiver, stage 3: b·P for each of the sender's stage-1 points P (one part), so
/// b·a_i·H(x) can meet a_i·b·H(y). Fails with the index of the first invalid point.
pub fn receiver_reblind(seed: &RunSeed, plan: &Plan, points: &[Encoded]) -> Result<Vec<Encoded>> {
    receiver(seed, plan)?.reblind_sender(0, points)
}

/// Cardinality: `values` spread over B parts by [`Plan::mix_part_of`], each part sorted.
pub fn mix(plan: &Plan, values: Vec<Encoded>) -> Vec<Vec<Encoded>> {
    let mut keyed: Vec<(u32, Encoded)> = values.into_par_iter().map(|v| (plan.mix_part_of(&v), v)).collect();
    keyed.par_sort_unstable();
    let mut parts = vec![Vec::new(); plan.buckets as usize];
    for (p, v) in keyed {
        parts[p as usize].push(v);
    }
    parts
}

/// Receiver, stage 3: the sender's re-keyed values as a set to match against, refusing a
/// repeated value (distinct items give distinct points but with negligible probability).
pub fn sender_set(values: Vec<Encoded>) -> Result<HashSet<Encoded>> {
    let n = values.len();
    let set: HashSet<Encoded> = values.into_iter().collect();
    if set.len() != n {
        return Err(Deviation::Repeated { what: "SenderBlinded" }.into());
    }
    Ok(set)
}

/// Receiver, stage 3: the positions of `own` (a·b·H(y) from the sender's stage 2) whose
/// value is in `sender` (b·a·H(x)), ascending.
pub fn matches(sender: &HashSet<Encoded>, own: &[Encoded]) -> Vec<usize> {
    own.par_iter().enumerate().filter(|(_, v)| sender.contains(*v)).map(|(i, _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::{Operation, Protocol};
    use crate::session::Hello;
    use crate::staged::bucket::{assign, select};
    use crate::staged::plan::{Buckets, Settings};
    use std::collections::BTreeSet;

    fn plans(op: Operation, b: u32) -> (Plan, Plan, RunSeed, RunSeed) {
        let s = Settings { buckets: Buckets::Fixed(b), ..Settings::new("t", Protocol::Ecdh, op) };
        let (ss, rs) = (RunSeed::from_bytes([1; 32]), RunSeed::from_bytes([2; 32]));
        let (hs, hr): (Hello, Hello) = (s.hello(Role::Sender, 300, &ss), s.hello(Role::Receiver, 200, &rs));
        (Plan::agree(&s, &hs, &hr).unwrap(), Plan::agree(&s, &hr, &hs).unwrap(), ss, rs)
    }

    #[test]
    fn per_bucket_steps_give_the_plain_intersection_and_the_same_bytes_again() {
        let x: Vec<String> = (0..300).map(|i| format!("x{i}")).collect();
        let y: Vec<String> = (200..400).map(|i| format!("x{i}")).collect();
        let want: BTreeSet<usize> = (0..100).collect();
        let (ps, pr, ss, rs) = plans(Operation::Intersection, 8);
        let (bx, by) = (assign(&ps, &x), assign(&pr, &y));
        let mut got = BTreeSet::new();
        for b in 0..8u32 {
            let yi = select(&y, &by[b as usize]);
            let req = receiver_blind(&rs, &pr, &yi).unwrap();
            assert_eq!(req, receiver_blind(&rs, &pr, &yi).unwrap(), "same seed, same bytes");
            let own = sender_blind(&ss, &ps, b, &select(&x, &bx[b as usize])).unwrap();
            assert!(own.windows(2).all(|w| w[0] < w[1]), "sorted");
            let dbl = sender_reblind(&ss, &ps, b, &req).unwrap();
            assert_eq!(dbl, sender_reblind(&ss, &ps, b, &req).unwrap());
            let set = sender_set(receiver_reblind(&rs, &pr, &own).unwrap()).unwrap();
            got.extend(matches(&set, &dbl).into_iter().map(|p| by[b as usize][p] as usize));
        }
        assert_eq!(got, want);
    }

    #[test]
    fn cardinality_by_mixed_parts_counts_right() {
        let x: Vec<String> = (0..300).map(|i| format!("x{i}")).collect();
        let y: Vec<String> = (250..450).map(|i| format!("x{i}")).collect();
        let (ps, pr, ss, rs) = plans(Operation::Cardinality, 4);
        let (bx, by) = (assign(&ps, &x), assign(&pr, &y));
        let mut s1 = Vec::new();
        let mut s2 = Vec::new();
        for b in 0..4u32 {
            s1.extend(sender_blind(&ss, &ps, b, &select(&x, &bx[b as usize])).unwrap());
            let req = receiver_blind(&rs, &pr, &select(&y, &by[b as usize])).unwrap();
            s2.extend(sender_reblind(&ss, &ps, b, &req).unwrap());
        }
        let (m1, m2) = (mix(&ps, s1), mix(&ps, s2));
        assert_eq!(m1.len(), 4);
        assert!(m2.iter().enumerate().all(|(p, part)| part.iter().all(|v| pr.mix_part_of(v) == p as u32)));
        let set = sender_set(receiver_reblind(&rs, &pr, &m1.concat()).unwrap()).unwrap();
        assert_eq!(matches(&set, &m2.concat()).len(), 50);
    }

    #[test]
    fn bad_points_and_buckets_are_refused() {
        let (ps, pr, ss, rs) = plans(Operation::Intersection, 2);
        let e = sender_reblind(&ss, &ps, 0, &[[0; 32]]).unwrap_err();
        assert!(matches!(e, Error::InvalidPoint { index: 0, .. }), "the identity");
        let e = receiver_reblind(&rs, &pr, &[receiver_blind(&rs, &pr, &["a"]).unwrap()[0], [0xff; 32]]).unwrap_err();
        assert!(matches!(e, Error::InvalidPoint { index: 1, .. }), "{e}");
        assert!(sender_blind(&ss, &ps, 2, &["a"]).is_err());
        assert!(sender_set(vec![[1; 32], [1; 32]]).is_err());
    }
}
