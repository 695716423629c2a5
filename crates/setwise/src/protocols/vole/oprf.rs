//! The OPRF of VOLE-PSI (RR22 Fig. 10), on which PSI and Private-ID are built: the key
//! holder ends with a store K and Δ and can evaluate F on any item, the evaluator with
//! F on its own items only (its set is fixed when it encodes the store).
//!
//! F(x) = H_o(k(x), Decode(K, k(x)) + h(k(x))·Δ), where k is the item hash, h the value
//! hash and H_o the output hash of a [`Hashes`]. The evaluator holds C with
//! K = C + P·Δ and Decode(P, k(y)) = h(k(y)), so F(y) = H_o(k(y), Decode(C, k(y))) for
//! its items y.

use super::messages::{STORE, StoreSeed};
use super::{Hashed, HashedItem, Hashes, ValueHash, store_params};
use crate::crypto::dst::SessionId;
use crate::crypto::rng;
use crate::crypto::security::Security;
use crate::error::{Deviation, Error, Result};
use crate::math::gf128::Gf128;
use crate::net::Channel;
use crate::okvs::BATCH;
use crate::okvs::Okvs;
use crate::protocols::{Meter, Report};
use crate::vole::{silent_receive_told, silent_send_told};
use crate::wire::msg::Message;
use crate::wire::stream::CHUNK;
use rayon::prelude::*;
use zeroize::Zeroize;

/// The key holder's key: the store K = B + A·Δ and Δ, wiped when dropped, and the
/// session's value hash.
pub(crate) struct OprfKey {
    k: Okvs,
    delta: Gf128,
    value: ValueHash,
}

impl Drop for OprfKey {
    fn drop(&mut self) {
        self.k.zeroize();
        self.delta.zeroize();
    }
}

impl OprfKey {
    /// `f(i, item, Decode(K, k) + h(k)·Δ)` for each hashed item i with key k, in no
    /// particular order (H_o of the last two arguments is F).
    pub(crate) fn eval_with<T: Default + Clone + Send>(
        &self,
        hashed: &Hashed,
        meter: &Meter,
        f: impl Fn(usize, HashedItem, Gf128) -> T + Sync,
    ) -> Vec<T> {
        let keys = hashed.keys();
        let each = |group: &[u32], keys: &[u128], decoded: &[Gf128], out: &mut [T]| {
            // The keys' values h, one AES call's worth at a time (on the stack).
            let mut values = [Gf128::ZERO; BATCH];
            let batches = group.chunks(BATCH).zip(keys.chunks(BATCH)).zip(decoded.chunks(BATCH));
            for (((group, keys), decoded), out) in batches.zip(out.chunks_mut(BATCH)) {
                let values = &mut values[..keys.len()];
                self.value.of_many(keys, values);
                for (((o, &i), &d), &h) in out.iter_mut().zip(group).zip(decoded).zip(values.iter()) {
                    *o = f(i as usize, hashed.item(i as usize), d + h * self.delta);
                }
            }
        };
        self.k.decode_groups(keys.len(), |i| keys[i], each, |n| meter.add(n)).0
    }
}

/// The evaluator's outputs: its items' hashes and the store C they decode in (its OPRF
/// values; wiped when dropped).
pub(crate) struct Evaluated {
    /// The evaluator's items hashed, in item order.
    hashed: Hashed,
    c: Okvs,
}

impl Drop for Evaluated {
    fn drop(&mut self) {
        self.c.zeroize();
    }
}

impl Evaluated {
    /// `f(i, item, Decode(C, k))` for each own item i with key k, in no particular order.
    pub(crate) fn eval_with<T: Default + Clone + Send>(
        &self,
        meter: &Meter,
        f: impl Fn(usize, HashedItem, Gf128) -> T + Sync,
    ) -> Vec<T> {
        self.eval_ordered(meter, f).0
    }

    /// [`eval_with`](Self::eval_with) with the order of its results: result j is item
    /// `order[j]`'s.
    pub(crate) fn eval_ordered<T: Default + Clone + Send>(
        &self,
        meter: &Meter,
        f: impl Fn(usize, HashedItem, Gf128) -> T + Sync,
    ) -> (Vec<T>, Vec<u32>) {
        self.c.decode_ordered(self.hashed.keys(), |&k| k, |i, _, v| f(i, self.hashed.item(i), v), |n| meter.add(n))
    }
}

/// Runs `work` on a thread pool of its own, as many threads as the global one. Work done
/// alongside the VOLE must not share the VOLE's pool: rayon's workers finish their own
/// queued jobs before they take newly injected ones, so each of the VOLE's many short
/// parallel rounds would wait for the whole of the hashing (2 s of a 12 s VOLE at 2^24).
/// Two pools leave the sharing of the cores to the OS. Without a pool (no threads to
/// be had), the work runs on the global one.
fn on_own_pool<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    match rayon::ThreadPoolBuilder::new().num_threads(rayon::current_num_threads()).build() {
        Ok(pool) => pool.install(work),
        Err(_) => work(),
    }
}

/// Phase names for the report: the VOLE, and the store's transfer.
pub(crate) type Phases = [&'static str; 2];

/// The key holder of session `sid`: a silent VOLE withstanding `security`, sized by the
/// evaluator's `peer_items`, while `own` is hashed on a second thread, then the store.
/// Returns the key and `own` hashed.
#[allow(clippy::too_many_arguments)] // the session, both sets, and where progress goes
pub(crate) fn hold_key<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    sid: SessionId,
    security: Security,
    hashes: &Hashes,
    peer_items: usize,
    own: &[I],
    report: &mut Report,
    phases: Phases,
) -> Result<(OprfKey, Hashed)> {
    let params = store_params(peer_items);
    let (vole, hashed) = std::thread::scope(|s| {
        let hashed = s.spawn(|| on_own_pool(|| hashes.items(own)));
        let tell = report.tell();
        let vole = report.phase(phases[0], ch, |ch| silent_send_told(ch, sid, params.columns, security, &tell));
        (vole, hashed.join().expect("hashing panicked"))
    });
    let mut vole = vole?;
    let delta = vole.delta;
    let k = report.phase(phases[1], ch, |ch| {
        let StoreSeed(seed) = StoreSeed::recv(ch, "receiving the store", ())?;
        if hashes.value().is_keyed_by(&seed) {
            return Err(Deviation::FailedCheck {
                what: "the store's seed",
                meaning: "it is the value hash's AES key, which would tie each key's row to its value",
            }
            .into());
        }
        // K = B + A·Δ, column by column as the chunks come.
        let mut k = std::mem::take(&mut vole.b);
        STORE.recv(ch, params.columns, "receiving the store", |at, chunk| {
            k[at..at + chunk.len()].par_iter_mut().zip(chunk).for_each(|(k, a)| *k += Gf128::from_bytes(*a) * delta);
            Ok(())
        })?;
        Okvs::from_parts(seed, params, k)
    })?;
    Ok((OprfKey { k, delta, value: hashes.value().clone() }, hashed))
}

/// The evaluator of session `sid` on its `items`: hashes them and encodes the store on a
/// second thread while the silent VOLE (withstanding `security`) runs, then sends the
/// store masked by the VOLE.
pub(crate) fn evaluate<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    sid: SessionId,
    security: Security,
    hashes: &Hashes,
    items: &[I],
    report: &mut Report,
    phases: Phases,
) -> Result<Evaluated> {
    let params = store_params(items.len());
    // The store's seed is drawn on the other thread: from a fork of this thread's
    // randomness, so that a seeded (replayed) run draws it again.
    let forked = rng::fork();
    let (vole, prepared) = std::thread::scope(|s| {
        let prepare = s.spawn(|| {
            on_own_pool(|| {
                rng::within(forked.as_ref(), || {
                    let t = std::time::Instant::now();
                    let hashed = hashes.items(items);
                    let (keys, value) = (hashed.keys(), hashes.value());
                    let store =
                        Okvs::encode_by(params, keys.len(), |i| keys[i], |_, keys, out| value.of_many(keys, out));
                    (hashed, store, t.elapsed())
                })
            })
        });
        let tell = report.tell();
        let vole = report.phase(phases[0], ch, |ch| silent_receive_told(ch, sid, params.columns, security, &tell));
        (vole, prepare.join().expect("the store encoding panicked"))
    });
    let (vole, (hashed, store, took)) = (vole?, prepared);
    report.detail("hash items and encode the store", format!("{:.3} s", took.as_secs_f64()));
    let store = store.map_err(|_| {
        Error::params("items", "the store could not be encoded with 8 seeds (probability ≤ 2^-320)".into())
    })?;
    let (seed, mut p) = store.into_parts();
    report.phase(phases[1], ch, |ch| {
        StoreSeed(seed).send(ch, "sending the store")?;
        // P + A in place, chunk by chunk as it is sent: no second store-sized buffer.
        let total = p.len();
        for (i, (p, ac)) in p.chunks_mut(CHUNK).zip(vole.pairs().chunks(CHUNK)).enumerate() {
            p.par_iter_mut().zip(ac).for_each(|(p, [a, _])| *p += *a);
            let masked: Vec<[u8; 16]> = p.iter().map(|p| p.to_bytes()).collect();
            STORE.send_chunk(ch, &masked, (i * CHUNK, total), "sending the store")?;
        }
        Ok::<_, Error>(())
    })?;
    // The store is sent: its buffer takes C.
    p.par_iter_mut().zip(vole.pairs()).for_each(|(p, [_, c])| *p = *c);
    drop(vole);
    let c = Okvs::from_parts(seed, params, p)?;
    Ok(Evaluated { hashed, c })
}
