//! Automatic parameters: search N, table size, bin degree and source powers for the
//! cheapest feasible set under a cost model calibrated on this machine.
//!
//! Cost of one query (seconds): sender time on 2 cores + receiver work + reads from disk +
//! bytes over the [`Link`] (1 Gbit/s unless named), where, per candidate,
//! - bundles per index as [`expected_bundles_per_index`](UnbalancedParams::expected_bundles_per_index)
//!   says (the fullest bin's load over B, and a bundle for felt clashes), results =
//!   indices · bundles · (1 + label parts);
//! - sender = derive + evaluate, where
//!   - derive = indices · products · (t(ct×ct) + t(relin)) at the query level (level 0,
//!     or 1 with a special modulus), plus, below it, per index a switch of each power
//!     used, over 2 cores;
//!   - evaluate = the rounds (`evaluation_rounds`) in which 2 cores take the indices ·
//!     bundles bundles, times (1 + label parts) results a bundle, times a result's
//!     share · (t(sum) + B · t(ct×pt)) \+ \[direct at the query level, products > 0\] ·
//!     t(relin) + t(mod-switch) + t(trim); with Paterson–Stockmeyer of low degree L, plus B/(L+1)
//!     blocks after the first, each a sum of its own (in the share term) and a ct×ct,
//!     and one relinearisation, both at the evaluation level;
//!   - share is the [evaluation level](UnbalancedParams::eval_level)'s fraction of the
//!     query level's moduli, t(sum) a sum's fixed part (its reduction and constant
//!     term), t(ct×pt) one more term of a long sum, timed over plaintexts that come from
//!     memory with both cores summing at once, and t(ct×ct) and t(relin) timed at each
//!     level with both cores at work ([`calibrate`]);
//! - receiver = indices · sources · t(encrypt) + its keys' generation (t(key) for the
//!   query level's, each key at its share of that one's bytes) + results · t(decrypt);
//! - bytes = indices · sources · |fresh ct| + a relinearisation key per
//!   key level of [`query_levels`](UnbalancedParams::query_levels) (a part per modulus
//!   there, each over the bits of the moduli it is over: a share of the query level's) +
//!   results ·
//!   |trimmed result|;
//! - where the plaintexts served encoded would not fit in the [`Serving`] memory (less
//!   what the database holds besides them, `db::resident_bytes`: each item's digest,
//!   label record and bin ids; and less the queries' share, `db::plaintext_budget`),
//!   the database serves the rest from its
//!   encoded copy on disk, each query reading it at [`DISK_READ_BYTES_PER_SEC`] (added to
//!   the time, not spread over the cores), or, where its coefficients fit and that is
//!   cheaper, in compact mode, the sender encoding each result's B + 1 plaintexts per
//!   query ((B + 1) · t(encode) more a result, in the rounds above). Disk serving needs
//!   disk, not memory, so no set is refused for memory.

use super::LabelLayout;
use super::params::UnbalancedParams;
use crate::error::{Error, Result};
use crate::he::{Evaluator, HeContext, HeParams, PowerPlan, SecretKey};
use crate::net::NetProfile;
use std::time::Instant;

/// Bytes a second a query gets through of a database's encoded copy on disk, for the
/// cost model: read cold, hashed and checked, in wall time. Measured on the 2-core
/// machine of docs/benchmarks.md (2026-11-27, after the reads into reused buffers):
/// labelled 2^22 × 1024 with 3.20 GB of its plaintexts read from the copy took 5.78 s
/// (median of 5) against 2.07 s all in memory, 0.86 GB/s (the disk alone reads
/// 1.5 GB/s; the rest is the kernel's copy, the hash and the check).
pub const DISK_READ_BYTES_PER_SEC: f64 = 0.86e9;

/// The link a query's bytes cross: the cost model charges them at its bandwidth, so a
/// slow link favours parameters that send less (larger bins, Paterson–Stockmeyer) over
/// ones that compute less.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Link {
    bits_per_second: f64,
}

impl From<NetProfile> for Link {
    fn from(p: NetProfile) -> Self {
        Link { bits_per_second: p.bits_per_second }
    }
}

impl Link {
    /// 1 Gbit/s: the default, a data-centre link between two organisations.
    pub const GIGABIT: Link = Link { bits_per_second: 1e9 };

    /// A link of `bits_per_second`, which must be positive and finite.
    pub fn new(bits_per_second: f64) -> Result<Link> {
        if bits_per_second.is_finite() && bits_per_second > 0.0 {
            Ok(Link { bits_per_second })
        } else {
            Err(Error::usage("link", format!("a link of {bits_per_second} bit/s: must be positive and finite")))
        }
    }

    /// Its bandwidth in bits per second.
    pub fn bits_per_second(self) -> f64 {
        self.bits_per_second
    }

    /// `lan` and `wan` as the benchmarks shape them ([`NetProfile`]), or a bandwidth in
    /// Mbit/s (`50`, `50mbit`).
    pub fn parse(s: &str) -> Result<Link> {
        if let Some(Some(p)) = NetProfile::by_name(s) {
            return Ok(p.into());
        }
        match s.trim_end_matches("mbit").parse::<f64>() {
            Ok(m) if m.is_finite() && m > 0.0 => Ok(Link { bits_per_second: m * 1e6 }),
            _ => Err(Error::usage("link", format!("link '{s}' is not lan, wan or a bandwidth in Mbit/s (e.g. 50)"))),
        }
    }

    fn seconds(self, bytes: usize) -> f64 {
        bytes as f64 * 8.0 / self.bits_per_second
    }
}

/// Where a database will serve, as the cost model sees it: the link its queries cross
/// and the memory its sender may hold. Plaintexts served encoded that do not fit in
/// that memory are read per query from the database's encoded copy on disk, or the
/// database serves in compact mode and each query encodes what it uses; the search
/// charges either.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Serving {
    /// The link queries cross.
    pub link: Link,
    /// Bytes the serving sender may hold; `None`: no limit known.
    pub memory: Option<usize>,
}

impl Serving {
    /// Over `link`, on a machine like this one: the memory it has available now
    /// (Linux's `MemAvailable`, within a container the cgroup's room), the figure the
    /// database's load budgets its plaintexts from.
    pub fn here(link: Link) -> Serving {
        Serving { link, memory: super::db::available_memory() }
    }

    /// Over `link` with no memory limit: every database is assumed served encoded.
    pub fn unbounded(link: Link) -> Serving {
        Serving { link, memory: None }
    }
}

/// Measured costs of one BFV configuration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OpCosts {
    /// ct×ct left unrelinearised (the sender sums products before relinearising), ms, by
    /// level (index 0 is level 0; levels above the query level repeat its cost, nothing
    /// runs there). Measured at each level a product can run at, not level 0's cost
    /// scaled by the share of the moduli, which misses by up to 15 % either way on this
    /// machine (`fhe` extends each operand's basis). A level past the last entry is
    /// priced by [`mul_at`](Self::mul_at).
    pub mul_ms: Vec<f64>,
    /// One relinearisation at each level, ms, as `mul_ms`: one per product deriving the
    /// powers, one per result of a direct sum of derived powers, one per result's block
    /// products with Paterson–Stockmeyer. With a special modulus only the query level is
    /// measured (nothing relinearises below it).
    pub relin_ms: Vec<f64>,
    /// One more ct×pt term of a long dot product, ms, with the plaintexts coming from
    /// memory as a database's do (not from a cache that holds them all), both of the
    /// model's cores summing their own at once.
    pub mul_plain_ms: f64,
    /// A dot product's fixed part (reducing the sum, adding the constant term), ms: a
    /// result's sum of B products costs `result_ms + B · mul_plain_ms`.
    pub result_ms: f64,
    /// Mod-switch from the query level to the last level, ms (charged for every switch:
    /// an upper bound for a switch to a level above the last).
    pub mod_switch_ms: f64,
    /// A last-level result trimmed to the bytes it is sent as, ms (once per result).
    pub trim_ms: f64,
    /// Encoding one plaintext at level 0 (per query in compact mode), ms: an upper bound
    /// for a plaintext encoded at a lower level.
    pub encode_ms: f64,
    /// Secret-key encryption, ms.
    pub encrypt_ms: f64,
    /// The receiver's generation of the query level's relinearisation key, ms (each
    /// key a query sends is charged its share of the key's bytes of this).
    pub key_ms: f64,
    /// Decryption of a last-level ciphertext, ms.
    pub decrypt_ms: f64,
    /// Bytes of a fresh seeded ciphertext, a trimmed last-level result and a relinearisation key.
    pub bytes: [usize; 3],
    /// The level the query is encrypted at (1 with a special modulus,
    /// [`SealParams::special_modulus`](super::params::SealParams::special_modulus)): the
    /// products, the fresh ciphertext and the key above are measured there, with the
    /// key over every modulus.
    pub query_level: usize,
}

impl OpCosts {
    /// A ct×ct at `level` of a chain of `moduli` moduli, ms: measured there, else the
    /// deepest measured level's cost scaled by the share of moduli left.
    pub fn mul_at(&self, level: usize, moduli: usize) -> f64 {
        at_level(&self.mul_ms, level, moduli, 1)
    }

    /// A relinearisation at `level`, ms: measured there, else the deepest measured
    /// level's scaled by the share squared (a part per modulus, each over the level's
    /// moduli: keys over every modulus, as with a special modulus, scale less).
    pub fn relin_at(&self, level: usize, moduli: usize) -> f64 {
        at_level(&self.relin_ms, level, moduli, 2)
    }
}

fn at_level(by_level: &[f64], level: usize, moduli: usize, power: i32) -> f64 {
    match by_level.get(level) {
        Some(&ms) => ms,
        None => {
            let deepest = by_level.len().saturating_sub(1);
            let left = |l: usize| moduli.saturating_sub(l).max(1) as f64;
            by_level.last().copied().unwrap_or(0.0) * (left(level) / left(deepest)).powi(power)
        }
    }
}

/// The BFV configurations the search considers: N, moduli, the plain modulus bits, and
/// whether the last modulus is a special modulus. A large t suits depth 0 (all powers
/// sent); the smallest t for N=4096 leaves room for one product level (a few sources,
/// powers derived by the sender). N = 8192 with APSI's chain for its 16M files (56, 56,
/// 56, 50 bits, t of 22 bits) holds the depth 4 of Paterson–Stockmeyer over depth-2
/// bases; the same depth fits with the query at level 1 over four data moduli (49, 49,
/// 48, 48 bits) and keys over a 24-bit special modulus (`tests/suite/unbalanced_noise.rs`
/// measures 148–150 bits of the 171 there, the model 159; over APSI's chain the model
/// leaves no margin at level 1): a smaller query and one key of 4 parts instead of APSI's
/// chain's two (4 + 3 parts), for the slow links. N = 16384 doubles
/// the bins per bundle for the largest databases. Every chain is within the 128-bit bound
/// for its N ([`SECURITY_128`](crate::he::SECURITY_128)).
const CONFIGS: &[(usize, &[usize], u32, bool)] = &[
    (4096, &[42, 32], 21, false),
    (4096, &[47, 47], 16, false),
    (8192, &[43, 43, 44, 44, 44], 21, false),
    (8192, &[56, 56, 56, 50], 22, false),
    (8192, &[49, 49, 48, 48, 24], 22, true),
    (16384, &[56, 56, 56, 56, 50], 22, false),
];

/// `OpCosts` for each configuration, measured once per process (2–3 s in all) and
/// reused: a process that builds several databases (the Python package, a test run)
/// does not pay it per build.
pub fn calibrated() -> &'static [(HeParams, OpCosts)] {
    static COSTS: std::sync::OnceLock<Vec<(HeParams, OpCosts)>> = std::sync::OnceLock::new();
    COSTS.get_or_init(calibrate)
}

/// Measures `OpCosts` for each configuration now, on threads of its own: as many as the
/// model gives the sender (two) whatever pool calls it, and a caller's
/// rayon worker waits for them without taking on other work meanwhile (which could be
/// another calibration, and would slow this one).
pub fn calibrate() -> Vec<(HeParams, OpCosts)> {
    match rayon::ThreadPoolBuilder::new().num_threads(SENDER_CORES).build() {
        Ok(pool) => std::thread::scope(|s| {
            s.spawn(|| pool.install(calibrate_here)).join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        }),
        // No threads to be had: measured on the caller's.
        Err(_) => calibrate_here(),
    }
}

fn calibrate_here() -> Vec<(HeParams, OpCosts)> {
    // Plaintext words the long sums are timed over, shared by every configuration:
    // small values, below every modulus of every chain.
    let streamed: Vec<u64> =
        (0..streamed_bytes() / 8).map(|i| (i as u64).wrapping_mul(0x9e37_79b9) & 0xf_ffff).collect();
    CONFIGS
        .iter()
        .map(|&(n, moduli, bits, special)| {
            let he =
                HeParams { degree: n, plain_modulus: HeParams::batching_prime(n, bits), moduli_bits: moduli.to_vec() };
            let ctx = HeContext::new(&he).expect("built-in configuration");
            let mut sk = SecretKey::generate(&ctx);
            // Measured where the query arrives: at level 1 with a special modulus.
            let query = usize::from(special);
            // Products run from the query level down to the last level with two moduli
            // (a relinearisation needs them), each with its level's key over the
            // level's own moduli; with a special modulus only at the query level (its
            // Paterson–Stockmeyer multiplies there, and its direct sums relinearise
            // nothing below it).
            let deepest = if special { query } else { moduli.len().saturating_sub(2) };
            let key_ms = time(3, &mut || drop(sk.relin_key_over(query, 0).expect("relin key")));
            let keys: Vec<_> = (query..=deepest)
                .map(|l| sk.relin_key_over(l, if special { 0 } else { l }).expect("relin key"))
                .collect();
            let ev = Evaluator::new(&keys);
            let v: Vec<u64> = (0..n as u64).collect();
            let c = sk.encrypt_at(&v, query).expect("encrypt");
            // A second operand: a product of two ciphertexts, not a square.
            let d = sk.encrypt_at(&v, query).expect("encrypt");
            let fresh = c.to_bytes().len();
            let encrypt_ms = time(5, &mut || drop(sk.encrypt_at(&v, query)));
            let pts = ctx.encode_rows(&v.repeat(2), query).expect("encode");
            let encode_ms = time(3, &mut || drop(ctx.encode_rows(&v.repeat(8), 0))) / 8.0;
            let (mut mul_ms, mut relin_ms) = (vec![0.0; query], vec![0.0; query]);
            for level in query..=deepest {
                let (mut a, mut b) = (c.clone(), d.clone());
                a.switch_to_level(level).expect("switch");
                b.switch_to_level(level).expect("switch");
                mul_ms.push(time_busy(5, &|| drop(ev.mul_lazy(&a, &b))));
                let product = ev.mul_lazy(&a, &b).expect("product");
                relin_ms.push(time_busy(5, &|| {
                    let mut p = product.clone();
                    ev.relinearize(&mut p).expect("relinearise");
                }));
            }
            // Levels above the query's: nothing runs there.
            let (mul_q, relin_q) = (mul_ms[query], relin_ms[query]);
            mul_ms[..query].fill(mul_q);
            relin_ms[..query].fill(relin_q);
            let (mul_plain_ms, result_ms) = sum_costs(&ctx, &ev, &c, &pts, &streamed, query);
            let mut last = c.clone();
            let mod_switch_ms = time(3, &mut || {
                last = c.clone();
                last.mod_switch_to_last().expect("switch");
            });
            let trim_ms = time(5, &mut || drop(last.to_trimmed_bytes(&ctx, ctx.result_trim())));
            let decrypt_ms = time(5, &mut || drop(sk.decrypt(&last)));
            let costs = OpCosts {
                mul_ms,
                relin_ms,
                mul_plain_ms,
                result_ms,
                mod_switch_ms,
                trim_ms,
                encode_ms,
                encrypt_ms,
                key_ms,
                decrypt_ms,
                bytes: [fresh, ctx.trimmed_bytes(ctx.result_trim()), keys[0].to_bytes().len()],
                query_level: query,
            };
            (he, costs)
        })
        .collect()
}

/// Milliseconds a run of `f` takes: the median of `reps` runs, so one run slowed by
/// another process does not move the model.
fn time(reps: usize, f: &mut dyn FnMut()) -> f64 {
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

/// Milliseconds a run of `f` takes with every thread of the pool (the sender's cores,
/// see [`calibrate`]) running it at once, as a query's sender work runs: the median of
/// `reps` runs on each.
fn time_busy(reps: usize, f: &(dyn Fn() + Sync)) -> f64 {
    use rayon::prelude::*;
    let runs = (0..rayon::current_num_threads().max(1))
        .into_par_iter()
        .flat_map_iter(|_| {
            (0..reps).map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
        })
        .collect();
    median(runs)
}

fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs.get(runs.len() / 2).copied().unwrap_or(0.0)
}

/// A dot product's cost per term and its fixed part, ms, at `level`. The terms' plaintexts
/// are `streamed`'s words (up to 2048 plaintexts a thread), more than the caches hold,
/// summed by every thread of the pool at once over its own share, as a query's bundles
/// are: each term's plaintext comes from memory, shared with the other cores, as a
/// served database's do. The fixed part is timed on one term.
fn sum_costs(
    ctx: &HeContext,
    ev: &Evaluator<'_>,
    c: &crate::he::Ciphertext,
    pts: &crate::he::PlainRows,
    streamed: &[u64],
    level: usize,
) -> (f64, f64) {
    let width = ctx.params().degree * (ctx.params().moduli_bits.len() - level);
    let available = streamed.len() / width;
    // `streamed_bytes`' floor of 64 MiB holds 102 plaintexts of the largest configuration.
    assert!(available >= 2, "{available} plaintexts to time a sum over");
    // Two terms a core at least where there are cores enough; a few thousand are plenty.
    let cores = rayon::current_num_threads().clamp(1, (available / 2).max(1));
    let per_core = (available / cores).clamp(1, 2048);
    let words = &streamed[..per_core * cores * width];
    let plains = crate::he::Plains::from_words(ctx, level, words).expect("small words are below every modulus");
    // The powers a query's sums read: as many as make 16 MiB in memory (8–128; two parts
    // of `width` words each), more than the private caches hold, as a bundle's B are.
    let copies = ((16usize << 20) / (2 * width * 8)).clamp(8, 128);
    let copies: Vec<_> = (0..copies).map(|_| c.clone()).collect();
    let cts: Vec<_> = (0..per_core).map(|k| &copies[k % copies.len()]).collect();
    let constant = Some(pts.all().slice(1..2));
    let long = time(3, &mut || {
        use rayon::prelude::*;
        (0..cores).into_par_iter().for_each(|k| {
            let mine = plains.slice(k * per_core..(k + 1) * per_core);
            drop(ev.dot_rows(ctx, &cts, mine, constant));
        })
    });
    let one = time(20, &mut || drop(ev.dot_rows(ctx, &cts[..1], pts.all().slice(0..1), constant)));
    // Each core did `per_core` terms in `long`, so a term of CPU time is `long / per_core`.
    let term = if per_core > 1 { ((long - one) / (per_core - 1) as f64).max(1e-4) } else { one };
    (term, (one - term).max(0.0))
}

/// Bytes of plaintexts a long sum is timed over: four times the last-level cache (Linux's
/// sysfs; 32 MiB where it is not known), within 64–512 MiB.
fn streamed_bytes() -> usize {
    last_level_cache_bytes().unwrap_or(32 << 20).saturating_mul(4).clamp(64 << 20, 512 << 20)
}

/// The largest cache of CPU 0, from sysfs (`…/cache/index*/size`, as `32768K`).
fn last_level_cache_bytes() -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("size")).ok())
        .filter_map(|s| {
            let s = s.trim();
            let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
            let scale = match unit {
                "" => 1,
                "K" => 1 << 10,
                "M" => 1 << 20,
                "G" => 1 << 30,
                _ => return None,
            };
            digits.parse::<usize>().ok()?.checked_mul(scale)
        })
        .max()
}

/// A chosen parameter set with its predicted cost per query.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Choice {
    /// The parameters.
    pub params: UnbalancedParams,
    /// Predicted query seconds (sender on 2 cores + receiver).
    pub seconds: f64,
    /// Predicted bytes both ways.
    pub bytes: usize,
    /// Predicted bundles per bundle index.
    pub bundles_per_index: usize,
    /// Predicted to serve in compact mode: its plaintexts encoded would not fit in the
    /// [`Serving`] memory, and re-encoding them per query is cheaper than reading them.
    pub compact: bool,
    /// Predicted bytes each query reads from the encoded copy on disk: the plaintexts
    /// that do not fit in the [`Serving`] memory (0 when they all do, or compact).
    pub on_disk_bytes: usize,
    /// Predicted bytes the serving sender holds for the database, in that mode.
    pub memory_bytes: usize,
}

/// One shape of evaluation the search tries: the bin degree B, the Paterson–Stockmeyer
/// low degree (0: none) and the powers the receiver sends, with their plan built once
/// and how many powers the evaluation uses.
struct Shape {
    degree: usize,
    ps_low_degree: usize,
    sources: Vec<u32>,
    plan: PowerPlan,
    used: usize,
}

/// Extremal postage-stamp bases for sums of at most 4 (so every exponent up to the range
/// is derived at depth ≤ 2; a unit test checks it), with their range, the largest for
/// their size: {1, 3, 11, 15, 32} → 70 is in APSI 0.12's README ("Query Powers"),
/// {1, 3, 11, 18} → 44 in its 16M-1024.json (with ps_low_degree 44); the two smaller
/// ones are from an exhaustive search over admissible bases. They serve as
/// Paterson–Stockmeyer low bases, the range being the low degree L.
const LOW_BASES: &[(&[u32], usize)] =
    &[(&[1, 3], 10), (&[1, 5, 8], 26), (&[1, 3, 11, 18], 44), (&[1, 3, 11, 15, 32], 70)];

/// High sources as multiples of L + 1: {1} (the high powers by repeated products) or
/// {1, 5}, whose sums of at most 8 reach 28 (APSI's recipe: high powers (L+1)·{1, 5},
/// so B ≤ 29(L+1) − 1).
const HIGH_BASES: &[&[u32]] = &[&[1], &[1, 5]];

/// Blocks of a Paterson–Stockmeyer evaluation the search tries: B = blocks·(L+1) − 1.
const PS_BLOCKS: &[usize] = &[2, 4, 6, 8, 12, 16, 20, 24, 29];

/// The shapes the search tries: every degree of a direct evaluation with every power
/// sent (depth 0) or a depth-one basis, and the Paterson–Stockmeyer shapes from the
/// extremal bases above.
fn shapes() -> Vec<Shape> {
    const DEGREES: [usize; 14] = [4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256];
    let mut out = Vec::new();
    let mut push = |degree: usize, ps_low_degree: usize, mut sources: Vec<u32>| {
        sources.sort_unstable();
        sources.dedup();
        // The set's own plan, as `UnbalancedParams::plan` builds it (`validate_with` needs it).
        let targets = super::params::needed_powers(degree, ps_low_degree);
        if let Ok(plan) = PowerPlan::for_targets(&sources, &targets) {
            out.push(Shape { degree, ps_low_degree, sources, plan, used: targets.len() });
        }
    };
    for d in DEGREES {
        push(d, 0, (1..=d as u32).collect());
        push(d, 0, crate::he::depth_one_sources(d as u32, 300));
    }
    for &(low, l) in LOW_BASES {
        for high in HIGH_BASES {
            for &blocks in PS_BLOCKS {
                let degree = blocks * (l + 1) - 1;
                let step = (l + 1) as u32;
                let highs = high.iter().map(|&h| h * step).filter(|&e| e as usize <= degree);
                push(degree, l, low.iter().copied().chain(highs).collect());
            }
        }
    }
    out
}

/// The cheapest feasible parameters for `sender` items, up to `receiver_max` receiver
/// items per query and labels of `label_bytes`, under `costs` (from [`calibrate`]), for a
/// database served as `serving` says.
pub fn choose(
    sender: usize,
    receiver_max: usize,
    label_bytes: usize,
    costs: &[(HeParams, OpCosts)],
    serving: Serving,
) -> Result<Choice> {
    let shapes = shapes();
    let mut best: Option<(f64, Choice)> = None;
    for (he, c) in costs {
        let n = he.degree;
        let felt_bits = 63 - he.plain_modulus.leading_zeros() as usize;
        let min_felts = 80usize.div_ceil(felt_bits);
        // Large bins need more felts for the false-match bound: up to two more.
        for (felts, shape) in (min_felts..=min_felts + 2).flat_map(|f| shapes.iter().map(move |s| (f, s))) {
            let bpb = n / felts;
            let degree = shape.degree;
            // One hash function serves single-item queries: each sender item is stored once.
            for h in if receiver_max <= 1 { vec![1, 3] } else { vec![3] } {
                let mut table = bpb;
                while crate::hashing::cuckoo::failure_log2(receiver_max.max(1), table, h)
                    > super::params::MAX_CUCKOO_FAILURE_LOG2
                {
                    table += bpb;
                }
                for table in [table, 2 * table] {
                    let p = UnbalancedParams {
                        table_params: super::params::TableParams {
                            hash_func_count: h,
                            table_size: table,
                            max_items_per_bin: degree,
                        },
                        item_params: super::params::ItemParams { felts_per_item: felts },
                        query_params: super::params::QueryParams {
                            ps_low_degree: shape.ps_low_degree,
                            query_powers: shape.sources.clone(),
                        },
                        seal_params: super::params::SealParams {
                            poly_modulus_degree: n,
                            coeff_modulus_bits: he.moduli_bits.clone(),
                            plain_modulus: he.plain_modulus,
                            special_modulus: c.query_level > 0,
                        },
                    };
                    let bundles = p.expected_bundles_per_index(sender);
                    // The built database is checked at the table's receiver maximum and
                    // its real bundle count, which can exceed the estimate (an unlucky
                    // fullest bin, a clash) by a few.
                    let margin = bundles + bundles.div_ceil(16) + 1;
                    if p.false_match_log2(p.receiver_max(), margin) > super::params::MAX_FALSE_MATCH_LOG2 {
                        continue;
                    }
                    let (cost, choice) = predict(p, &shape.plan, shape.used, sender, label_bytes, c, serving);
                    // Validated last, and only when it would win: the noise check is the
                    // costliest part of a candidate.
                    if best.as_ref().is_some_and(|(b, _)| cost >= *b)
                        || choice.params.validate_with(Some(&shape.plan)).is_err()
                    {
                        continue;
                    }
                    best = Some((cost, choice));
                }
            }
        }
    }
    best.map(|(_, c)| c).ok_or_else(|| {
        Error::params(
            "sizes",
            format!("no feasible parameters for {sender} sender items and {receiver_max} receiver items"),
        )
    })
}

/// The predicted cost of a query (time plus bytes over the link, the search's measure)
/// and the [`Choice`] for `p`, with its power `plan` and `used` powers, for `sender`
/// items and labels of `label_bytes`, under `c`, served as `serving` says.
fn predict(
    p: UnbalancedParams,
    plan: &PowerPlan,
    used: usize,
    sender: usize,
    label_bytes: usize,
    c: &OpCosts,
    serving: Serving,
) -> (f64, Choice) {
    let (indices, bundles) = (p.bundle_indices(), p.expected_bundles_per_index(sender));
    let (h, degree, low) =
        (p.table_params.hash_func_count, p.table_params.max_items_per_bin, p.query_params.ps_low_degree);
    let (bpb, s) = (p.bins_per_bundle(), p.query_params.query_powers.len());
    let layout = (label_bytes > 0).then(|| LabelLayout::new(&p, Vec::new(), label_bytes));
    let (parts, record_bytes) = layout.map_or((0, 0), |l| (l.parts, l.record_bytes));
    let products = plan.products();
    let results = (indices * bundles * (1 + parts)) as f64;
    // Sums with plaintexts at the evaluation level cost its share of the moduli: each
    // modulus is its own row of N products.
    let level = p.eval_level_in(plan);
    let query = p.query_level();
    let share = p.moduli_at(level) as f64 / p.moduli_at(query) as f64;
    // `bundles` is the fullest index's: every index at it bounds the total.
    let (encoded, coefficients) = p.serving_bytes(indices * bundles * (1 + parts) * (degree + 1), level);
    // What does not fit is read from the encoded copy on disk, unless
    // compact mode fits and encoding per query is cheaper.
    // The memory left once the database's digests, records and bins are
    // read, which is what its load budgets the plaintexts from.
    let resident = super::db::resident_bytes(sender, h, record_bytes, indices * bundles * bpb);
    let memory = serving.memory.map(|m| m.saturating_sub(resident));
    let bundle = p.serving_bytes((1 + parts) * (degree + 1), level).0;
    let fit = |bytes| super::db::fits(bytes, memory, bundle);
    let on_disk = if fit(encoded) {
        0
    } else {
        encoded.saturating_sub(super::db::plaintext_budget(memory, bundle).unwrap_or(usize::MAX))
    };
    let read_s = on_disk as f64 / DISK_READ_BYTES_PER_SEC;
    // Compact: every result's B + 1 plaintexts encoded per query, in the rounds below.
    let rounds = evaluation_rounds(indices * bundles) as f64 * (1 + parts) as f64;
    let compact = on_disk > 0 && fit(coefficients) && rounds * (degree + 1) as f64 * c.encode_ms / 1e3 < read_s;
    let (encode_ms, read_s, on_disk) =
        if compact { ((degree + 1) as f64 * c.encode_ms, 0.0, 0) } else { (0.0, read_s, on_disk) };
    // Direct at level 0: one relinearisation of the sum per result when
    // powers are derived. Below level 0: every power switched down once
    // per index instead (its relinearisation, one per product, is in the
    // products' term).
    // Paterson–Stockmeyer: the powers are relinearised once per index (the
    // products' term), then a product per block after the first, summed
    // and relinearised once per result, at the level, each as measured
    // there.
    let m = p.seal_params.coeff_modulus_bits.len();
    let relin = if products > 0 && low == 0 && level == query { c.relin_at(query, m) } else { 0.0 };
    let switch_powers_ms = if level > query { (used * indices) as f64 * c.mod_switch_ms } else { 0.0 };
    let ps_blocks = if low > 0 { degree / (low + 1) } else { 0 };
    let ps_ms = ps_blocks as f64 * c.mul_at(level, m) + if ps_blocks > 0 { c.relin_at(level, m) } else { 0.0 };
    let derive_ms = (indices * products) as f64 * (c.mul_at(query, m) + c.relin_at(query, m)) + switch_powers_ms;
    let result_ms = ((ps_blocks + 1) as f64 * c.result_ms + degree as f64 * c.mul_plain_ms) * share
        + ps_ms
        + relin
        + c.mod_switch_ms
        + c.trim_ms
        + encode_ms;
    let evaluate_ms = rounds * result_ms;
    // The keys the query sends, each as a share of the query level's key's bytes.
    let key_shares: Vec<f64> = p.query_levels_at(plan, level).keys.iter().map(|&l| p.key_bytes_share(l)).collect();
    let receiver_ms =
        (indices * s) as f64 * c.encrypt_ms + key_shares.iter().sum::<f64>() * c.key_ms + results * c.decrypt_ms;
    let key: usize = key_shares.iter().map(|share| (c.bytes[2] as f64 * share) as usize).sum();
    let bytes = indices * s * c.bytes[0] + key + results as usize * c.bytes[1];
    let seconds = derive_ms / (SENDER_CORES as f64 * 1e3) + evaluate_ms / 1e3 + receiver_ms / 1e3 + read_s;
    let cost = seconds + serving.link.seconds(bytes);
    let memory_bytes = if compact { coefficients } else { encoded - on_disk };
    let choice =
        Choice { params: p, seconds, bytes, bundles_per_index: bundles, compact, on_disk_bytes: on_disk, memory_bytes };
    (cost, choice)
}

/// The predicted cost of a query for parameters `p` (a preset or a file) over `sender`
/// items with labels of `label_bytes`, under the `costs` of its BFV configuration (see
/// [`check_measured`]).
pub fn predict_for(
    p: &UnbalancedParams,
    sender: usize,
    label_bytes: usize,
    costs: &[(HeParams, OpCosts)],
    serving: Serving,
) -> Result<Choice> {
    let sp = &p.seal_params;
    let c = costs
        .iter()
        .find(|(he, c)| {
            he.degree == sp.poly_modulus_degree
                && he.moduli_bits == sp.coeff_modulus_bits
                && (c.query_level > 0) == sp.special_modulus
        })
        .map(|(_, c)| c)
        .ok_or_else(|| unmeasured(p))?;
    let plan = p.plan()?;
    Ok(predict(p.clone(), &plan, p.needed_powers().len(), sender, label_bytes, c, serving).1)
}

/// Refuses parameters whose BFV configuration [`calibrate`] does not measure: N, the
/// moduli and whether the last is a special modulus must be one `auto` searches (the
/// plain modulus may differ). Cheap: for a refusal before the calibration's seconds.
pub fn check_measured(p: &UnbalancedParams) -> Result<()> {
    let sp = &p.seal_params;
    match CONFIGS.iter().any(|&(n, moduli, _, special)| {
        n == sp.poly_modulus_degree && moduli == sp.coeff_modulus_bits && special == sp.special_modulus
    }) {
        true => Ok(()),
        false => Err(unmeasured(p)),
    }
}

fn unmeasured(p: &UnbalancedParams) -> Error {
    let sp = &p.seal_params;
    Error::params(
        "seal_params",
        format!(
            "no costs measured for N = {} over moduli of {:?} bits{}: the model knows only the configurations `auto` searches",
            sp.poly_modulus_degree,
            sp.coeff_modulus_bits,
            if sp.special_modulus { " with a special modulus" } else { "" }
        ),
    )
}

/// The cores the model gives the sender: this machine's two.
const SENDER_CORES: usize = 2;

/// The rounds in which the sender evaluates `jobs` bundles: [`BATCH`](super::sender::BATCH)
/// at a time, each bundle (its matching and label polynomials) on one core, so a batch
/// takes as long as its busiest core's share. With few bundles that is well above their
/// work spread over the cores: 9 bundles take 5 rounds on 2 cores, not 4.5.
fn evaluation_rounds(jobs: usize) -> usize {
    let batch = super::sender::BATCH;
    jobs / batch * batch.div_ceil(SENDER_CORES) + (jobs % batch).div_ceil(SENDER_CORES)
}

/// Parameters resolved from what a user names: `auto`, a preset or a JSON file.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Where they came from: `auto`, the preset's name, or the file's path.
    pub name: String,
    /// The parameters.
    pub params: UnbalancedParams,
    /// `auto`: the predicted cost of a query.
    pub predicted: Option<Choice>,
    /// A JSON file allowing fewer receiver items per query than asked for: how many.
    pub receiver_max_below: Option<usize>,
}

/// Resolves `spec` for a database of `sender` items serving up to `receiver_max` items
/// per query with labels of `label_bytes`: `auto` (a search under a cost model
/// calibrated on this machine, for a database served as `serving` says), a shipped
/// preset name (see [`PRESETS`](super::params::PRESETS)), or the path of an APSI-style
/// JSON file. The one rule for the CLI and the Python package.
pub fn resolve(
    spec: &str,
    sender: usize,
    receiver_max: usize,
    label_bytes: usize,
    serving: Serving,
) -> Result<Resolved> {
    if spec == "auto" {
        let choice = choose(sender, receiver_max, label_bytes, calibrated(), serving)?;
        let params = choice.params.clone();
        return Ok(Resolved { name: "auto".into(), params, predicted: Some(choice), receiver_max_below: None });
    }
    if let Some((name, json)) = super::params::PRESETS.iter().find(|(n, _)| *n == spec) {
        let params = UnbalancedParams::from_json(json)?;
        return Ok(Resolved { name: name.to_string(), params, predicted: None, receiver_max_below: None });
    }
    let path = std::path::Path::new(spec);
    // A missing bare name (no directory, not .json) is more likely a misspelt preset.
    let bare = path.components().count() == 1 && path.extension().is_none_or(|e| e != "json");
    let json = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound if bare => {
            let presets: Vec<&str> = super::params::PRESETS.iter().map(|(n, _)| *n).collect();
            let why = format!("{spec:?} is not auto, a preset ({}) or a parameter file", presets.join(", "));
            Error::params("params", why)
        }
        _ => Error::file(path, e),
    })?;
    let params = UnbalancedParams::from_json(&json).map_err(|e| e.in_params_of(path.display()))?;
    let below = (receiver_max > params.receiver_max()).then(|| params.receiver_max());
    Ok(Resolved { name: path.display().to_string(), params, predicted: None, receiver_max_below: below })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_low_bases_reach_their_range_at_depth_two() {
        for &(basis, range) in LOW_BASES {
            let plan = PowerPlan::new(basis, range as u32).unwrap();
            assert!(plan.depth() <= 2, "{basis:?} reaches {range} at depth {}", plan.depth());
            let beyond = PowerPlan::new(basis, range as u32 + 1).unwrap();
            assert!(beyond.depth() > 2, "{basis:?}: the range is more than {range}");
        }
    }

    #[test]
    fn bundles_are_evaluated_in_rounds_of_a_batch_over_two_cores() {
        // 9 bundles: 5 on one core; 16 (a batch): 8; 17: a full batch, then 1.
        let rounds: Vec<usize> = [0, 1, 2, 9, 16, 17, 40].into_iter().map(evaluation_rounds).collect();
        assert_eq!(rounds, [0, 1, 1, 5, 8, 9, 20]);
    }

    #[test]
    fn a_level_not_measured_is_priced_from_the_deepest_measured_one() {
        let c = OpCosts {
            mul_ms: vec![10.0, 8.0],
            relin_ms: vec![4.0, 3.0],
            mul_plain_ms: 0.1,
            result_ms: 0.5,
            mod_switch_ms: 1.0,
            trim_ms: 0.1,
            encode_ms: 0.2,
            encrypt_ms: 1.0,
            key_ms: 2.0,
            decrypt_ms: 0.5,
            bytes: [1, 1, 1],
            query_level: 0,
        };
        // Measured levels as measured; level 2 of 4 moduli: level 1's by 2/3 of its
        // moduli, squared for a relinearisation.
        assert_eq!((c.mul_at(1, 4), c.relin_at(0, 4)), (8.0, 4.0));
        assert!((c.mul_at(2, 4) - 8.0 * 2.0 / 3.0).abs() < 1e-9);
        assert!((c.relin_at(2, 4) - 3.0 * 4.0 / 9.0).abs() < 1e-9);
    }

    /// A set `auto` chose, predicted again as a file, costs what the search said; one
    /// whose chain it never measures is refused by name, before any costs are needed.
    #[test]
    fn a_given_set_is_predicted_as_the_search_priced_it() {
        let costs = calibrate();
        let serving = Serving::unbounded(Link::GIGABIT);
        for (sender, receiver, label) in [(1 << 16, 256, 0), (1 << 22, 1024, 0), (1 << 20, 256, 34)] {
            let chosen = choose(sender, receiver, label, &costs, serving).unwrap();
            check_measured(&chosen.params).unwrap();
            let again = predict_for(&chosen.params, sender, label, &costs, serving).unwrap();
            assert_eq!((again.seconds, again.bytes), (chosen.seconds, chosen.bytes), "{sender}×{receiver}×{label}");
            assert_eq!(again.bundles_per_index, chosen.bundles_per_index);
        }
        let other = super::super::params::small_test_params();
        for e in [check_measured(&other).unwrap_err(), predict_for(&other, 1 << 16, 0, &costs, serving).unwrap_err()] {
            assert_eq!(e.field(), Some("seal_params"));
            assert!(e.to_string().contains("[42, 36, 31]"), "{e}");
        }
    }

    #[test]
    fn links_are_named_or_given_in_mbit_per_second() {
        assert_eq!(Link::parse("wan").unwrap().bits_per_second(), 50e6);
        assert_eq!(Link::parse("lan").unwrap().bits_per_second(), 10e9);
        assert_eq!(Link::parse("50").unwrap().bits_per_second(), 50e6);
        assert_eq!(Link::parse("2.5mbit").unwrap().bits_per_second(), 2.5e6);
        assert!(Link::new(f64::NAN).is_err() && Link::new(0.0).is_err());
        for bad in ["fast", "0", "-1", "NaN", "inf", "none", ""] {
            let e = Link::parse(bad).unwrap_err();
            assert_eq!(e.field(), Some("link"), "{bad}");
        }
        assert_eq!(Link::GIGABIT.seconds(125_000_000), 1.0);
    }

    #[test]
    fn ps_shapes_are_tried_with_sources_within_their_degree() {
        let shapes = shapes();
        assert!(
            shapes.iter().any(|s| s.ps_low_degree == 44 && s.degree == 1304 && s.sources == [1, 3, 11, 18, 45, 225])
        );
        for s in &shapes {
            assert!(s.sources.iter().all(|&e| e as usize <= s.degree), "{:?} beyond {}", s.sources, s.degree);
        }
    }
}
