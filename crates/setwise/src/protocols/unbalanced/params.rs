//! Unbalanced-PSI parameters as readable JSON, in APSI's four groups, checked on load.

use crate::crypto::dst::{self, fingerprint};
use crate::error::{Error, Result};
use crate::hashing::cuckoo;
use crate::he::{HeParams, PowerPlan, QueryLevels};
use serde::{Deserialize, Serialize};

/// Per-query false-match probability setwise requires: 2^-40.
pub const MAX_FALSE_MATCH_LOG2: f64 = -40.0;
/// Cuckoo failure probability setwise requires: 2^-40.
pub const MAX_CUCKOO_FAILURE_LOG2: f64 = -40.0;
/// Largest table accepted (2^20 bins; APSI's largest presets use ~2^14). Parameters
/// also come from the peer, and the receiver's work and memory grow with the table.
pub const MAX_TABLE_SIZE: usize = 1 << 20;

/// Noise budget (bits) that must remain, by the noise model, after a bundle's
/// evaluation: a margin for the model's error.
pub const NOISE_MARGIN_BITS: f64 = 10.0;

/// Hash table shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableParams {
    /// Hash functions (candidate bins per item): 3 or 4, or 1 for single-item queries
    /// (the sender then stores each item once).
    pub hash_func_count: usize,
    /// Bins in the table; a multiple of the bins one ciphertext holds (⌊N / felts⌋).
    pub table_size: usize,
    /// Sender items per bin and bundle: the degree of each matching polynomial.
    pub max_items_per_bin: usize,
}

/// Item representation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItemParams {
    /// Field elements (batching slots) per item; a ciphertext holds ⌊N / felts⌋ bins.
    pub felts_per_item: usize,
}

/// What the receiver sends and how the sender evaluates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryParams {
    /// Paterson–Stockmeyer low degree; 0 evaluates `Σ a_i x^i` directly.
    pub ps_low_degree: usize,
    /// Source powers the receiver encrypts (a postage-stamp basis); must contain 1.
    pub query_powers: Vec<u32>,
}

/// BFV parameters (the `seal_params` of APSI's files). A file gives the plaintext
/// modulus itself (`plain_modulus`) or, as APSI's files may, its size
/// (`plain_modulus_bits`: the largest batching prime of that many bits, as SEAL picks
/// it); the parameters keep the modulus, so both forms of one set have one fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "SealParamsFile")]
pub struct SealParams {
    /// Ring degree N.
    pub poly_modulus_degree: usize,
    /// Ciphertext moduli bit sizes.
    pub coeff_modulus_bits: Vec<usize>,
    /// Plaintext modulus t (prime, ≡ 1 mod 2N).
    pub plain_modulus: u64,
    /// The last modulus is kept for key switching, as SEAL's special modulus (setwise's
    /// own field; absent, false): the receiver encrypts its query at level 1, over every
    /// modulus but the last, and its relinearisation keys are over every modulus, so
    /// each relinearisation's noise is divided by the last modulus, and the query and
    /// keys are smaller (a key has a part per modulus at level 1). Needs 3 moduli or more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub special_modulus: bool,
}

/// `seal_params` as a file writes them: APSI's schema, with the plaintext modulus or
/// its size.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SealParamsFile {
    poly_modulus_degree: usize,
    coeff_modulus_bits: Vec<usize>,
    plain_modulus: Option<u64>,
    plain_modulus_bits: Option<u32>,
    #[serde(default)]
    special_modulus: bool,
}

impl TryFrom<SealParamsFile> for SealParams {
    type Error = String;

    fn try_from(f: SealParamsFile) -> std::result::Result<Self, String> {
        let n = f.poly_modulus_degree;
        let plain_modulus = match (f.plain_modulus, f.plain_modulus_bits) {
            (Some(t), None) => t,
            (None, Some(bits)) => HeParams::find_batching_prime(n, bits).ok_or_else(|| {
                format!(
                    "seal_params.plain_modulus_bits = {bits}: there is no prime of {bits} bits ≡ 1 mod 2·{n} \
                     (give 2..=60 bits and a power-of-two poly_modulus_degree)"
                )
            })?,
            (Some(_), Some(_)) => return Err("seal_params: give plain_modulus or plain_modulus_bits, not both".into()),
            (None, None) => return Err("seal_params: missing plain_modulus (or APSI's plain_modulus_bits)".into()),
        };
        Ok(Self {
            poly_modulus_degree: n,
            coeff_modulus_bits: f.coeff_modulus_bits,
            plain_modulus,
            special_modulus: f.special_modulus,
        })
    }
}

/// All parameters of an unbalanced-PSI database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnbalancedParams {
    /// Hash table.
    pub table_params: TableParams,
    /// Items.
    pub item_params: ItemParams,
    /// Query.
    pub query_params: QueryParams,
    /// BFV.
    pub seal_params: SealParams,
}

/// Shipped presets: (name, JSON).
pub const PRESETS: &[(&str, &str)] = &[
    ("64K-1", include_str!("../../../../../params/64K-1.json")),
    ("64K-256", include_str!("../../../../../params/64K-256.json")),
    ("64K-4096", include_str!("../../../../../params/64K-4096.json")),
    ("1M-1", include_str!("../../../../../params/1M-1.json")),
    ("1M-256", include_str!("../../../../../params/1M-256.json")),
    ("1M-4096", include_str!("../../../../../params/1M-4096.json")),
    ("16M-256", include_str!("../../../../../params/16M-256.json")),
    ("16M-4096", include_str!("../../../../../params/16M-4096.json")),
];

/// The sender size each preset is meant for, by name prefix.
fn preset_sender_size(name: &str) -> usize {
    match name.split('-').next() {
        Some("64K") => 1 << 16,
        Some("1M") => 1 << 20,
        _ => 1 << 24,
    }
}

impl UnbalancedParams {
    /// Parses and validates JSON; errors name the field.
    pub fn from_json(json: &str) -> Result<Self> {
        let p: Self =
            serde_json::from_str(json).map_err(|e| Error::params("params_file", format!("parameter file: {e}")))?;
        p.validate()?;
        Ok(p)
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("parameters serialise")
    }

    /// A short fingerprint of the canonical JSON (16 hex digits).
    pub fn fingerprint(&self) -> String {
        let json = serde_json::to_string(self).expect("parameters serialise");
        fingerprint(dst::FINGERPRINT_UNBALANCED_PARAMS, json.as_bytes())
    }

    /// The smallest preset covering `sender` items and `receiver_max` receiver items.
    pub fn preset_for(sender: usize, receiver_max: usize) -> Result<(&'static str, Self)> {
        for (name, json) in PRESETS {
            let p = Self::from_json(json).map_err(|e| e.in_params_of(format_args!("preset {name}")))?;
            if sender <= preset_sender_size(name) && receiver_max <= p.receiver_max() {
                return Ok((name, p));
            }
        }
        Err(Error::params(
            "preset",
            format!("no preset covers {sender} sender items with up to {receiver_max} receiver items; give --params"),
        ))
    }

    /// The BFV parameters.
    pub fn he(&self) -> HeParams {
        HeParams {
            degree: self.seal_params.poly_modulus_degree,
            plain_modulus: self.seal_params.plain_modulus,
            moduli_bits: self.seal_params.coeff_modulus_bits.clone(),
        }
    }

    /// Bins per ciphertext: ⌊N / felts⌋ (the last N mod felts slots stay unused).
    pub fn bins_per_bundle(&self) -> usize {
        self.seal_params.poly_modulus_degree / self.item_params.felts_per_item
    }

    /// Bundle indices: table_size / bins per bundle.
    pub fn bundle_indices(&self) -> usize {
        self.table_params.table_size / self.bins_per_bundle()
    }

    /// Bits of each field element of an item: ⌊log2 t⌋.
    pub fn felt_bits(&self) -> u32 {
        63 - self.seal_params.plain_modulus.leading_zeros()
    }

    /// Bits of the item (after the OPRF) that matching compares.
    pub fn item_bits(&self) -> u32 {
        self.felt_bits() * self.item_params.felts_per_item as u32
    }

    /// The most receiver items whose cuckoo insertion fails with probability ≤ 2^-40.
    pub fn receiver_max(&self) -> usize {
        let t = &self.table_params;
        let (mut lo, mut hi) = (0usize, t.table_size);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if cuckoo::failure_log2(mid, t.table_size, t.hash_func_count) <= MAX_CUCKOO_FAILURE_LOG2 {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// `log2` of the per-query false-match probability for `receiver` items against a
    /// database with at most `bundles_per_index` bundles at any bundle index: an item
    /// falsely matches a bundle when each of its felts meets one of the bin's ≤ B roots
    /// (probability ≤ B / 2^felt_bits each).
    pub fn false_match_log2(&self, receiver: usize, bundles_per_index: usize) -> f64 {
        let b = self.table_params.max_items_per_bin as f64;
        (receiver.max(1) as f64).log2()
            + (bundles_per_index.max(1) as f64).log2()
            + self.item_params.felts_per_item as f64 * (b.log2() - self.felt_bits() as f64)
    }

    /// The fewest bundles that some bundle index holds for a database of `sender` items:
    /// each item takes at least one bin position, and a bundle index's bundle holds at
    /// most `max_items_per_bin` items in each of its bins.
    pub fn min_bundles_per_index(&self, sender: usize) -> usize {
        let t = &self.table_params;
        sender.div_ceil(t.table_size.saturating_mul(t.max_items_per_bin).max(1))
    }

    /// The fewest bundles the fullest bundle index all but surely needs for `sender`
    /// items, known before any work: each item fills its distinct candidate bins (h, fewer
    /// where two of its hashes meet: table · (1 − (1 − 1/table)^h) expected), which its
    /// OPRF output picks uniformly, so some bin holds at least the mean load, and a bundle
    /// holds at most `max_items_per_bin` of a bin's items. 99 % of the expected count
    /// leaves room for fewer distinct bins than expected: only items whose hashes meet
    /// have fewer (about h(h−1)/2 · n/table of them), and h·n/100 more of those than that
    /// is out of reach but for a handful of items, where the count rounds up to one
    /// bundle anyway. At least
    /// [`min_bundles_per_index`](Self::min_bundles_per_index). A set this breaks the
    /// false-match bound for is refused before its OPRF, not after it.
    pub fn likely_bundles_per_index(&self, sender: usize) -> usize {
        let t = &self.table_params;
        let table = t.table_size.max(1) as f64;
        let distinct = table * (1.0 - (1.0 - 1.0 / table).powi(t.hash_func_count as i32));
        let mean_load = 0.99 * sender as f64 * distinct / table;
        let likely = (mean_load / t.max_items_per_bin.max(1) as f64).ceil() as usize;
        likely.max(self.min_bundles_per_index(sender))
    }

    /// The bundles the fullest bundle index is expected to hold for `sender` items, for
    /// the cost model (not a bound). Two effects:
    /// - the fullest bin's load: the mean λ plus √(2 ln T) standard deviations (√λ) for
    ///   T bins, the usual estimate of the largest of T near-normal loads, over
    ///   `max_items_per_bin` (B), rounded up;
    /// - one more where an item is likely to clash somewhere: a bin whose last bundle
    ///   holds m items turns an item away with probability about k·m/2^b at each placing
    ///   (k felts of b bits, equal at one position), and that item opens a bundle of its
    ///   own. Summed over the bins whose last bundle is the top one, m items each
    ///   (k·m²/2^(b+1) expected clashes a bin), half a clash expected adds the bundle.
    ///
    /// Against placements of 2^22 items in 1638 bins at N = 8192: B = 1135 filled 9
    /// bundles (the fullest bin held 8012, one clash opened the ninth; the estimate is
    /// 8), B = 851 filled 11 (1305 bins in the tenth, 11 clashes; the estimate is 11).
    pub fn expected_bundles_per_index(&self, sender: usize) -> usize {
        let t = &self.table_params;
        let table = t.table_size.max(1) as f64;
        let distinct = table * (1.0 - (1.0 - 1.0 / table).powi(t.hash_func_count as i32));
        let mean = sender as f64 * distinct / table;
        let sd = mean.sqrt().max(1e-9);
        let fullest = mean + (2.0 * table.ln()).max(0.0).sqrt() * sd;
        let b = t.max_items_per_bin.max(1) as f64;
        let filled = (fullest / b).ceil().max(1.0) as usize;
        // Bins whose load is base + m, m = 1..: a normal density of T bins.
        let base = (filled - 1) as f64 * b;
        let per_clash = self.item_params.felts_per_item as f64 / 2f64.powi(self.felt_bits() as i32 + 1);
        let clashes: f64 = (1..=(fullest - base).max(0.0) as usize)
            .map(|m| {
                let (m, z) = (m as f64, (base + m as f64 - mean) / sd);
                table * (-z * z / 2.0).exp() / (sd * (2.0 * std::f64::consts::PI).sqrt()) * per_clash * m * m
            })
            .sum();
        (filled + usize::from(clashes >= 0.5)).max(self.min_bundles_per_index(sender))
    }

    /// Refuses the parameters when a query at the receiver maximum against a database
    /// with `bundles_per_index` bundles at a bundle index (`shown` says how that count is
    /// known) could falsely match with probability above 2^-40.
    pub fn check_false_matches(&self, bundles_per_index: usize, shown: &str) -> Result<()> {
        let receiver_max = self.receiver_max();
        let fm = self.false_match_log2(receiver_max, bundles_per_index);
        if fm > MAX_FALSE_MATCH_LOG2 {
            return Err(Error::params(
                "max_items_per_bin",
                format!(
                    "with {shown}{bundles_per_index} bundle{} at a bundle index, a query of {receiver_max} items would \
                     falsely match with probability 2^{fm:.1} (> 2^-40): use a smaller max_items_per_bin or more \
                     felts_per_item",
                    if bundles_per_index == 1 { "" } else { "s" }
                ),
            ));
        }
        Ok(())
    }

    /// Bytes a database of `polys` polynomials (bundles · (1 + label parts) · (B + 1))
    /// holds while it serves, its plaintexts encoded at `level` (its
    /// [`eval_level`](Self::eval_level)): `(encoded, compact)`. Encoded, a plaintext is
    /// its NTT form over the level's moduli ([`PlainRows`](crate::he::PlainRows));
    /// compact keeps 4 bytes a slot.
    pub fn serving_bytes(&self, polys: usize, level: usize) -> (usize, usize) {
        let n = self.seal_params.poly_modulus_degree;
        let per_plaintext = self.moduli_at(level) * n * 8;
        (polys.saturating_mul(per_plaintext), polys.saturating_mul(n * 4))
    }

    /// Moduli at `level`: all of them at 0, one fewer a level below (at least one).
    pub fn moduli_at(&self, level: usize) -> usize {
        let moduli = self.seal_params.coeff_modulus_bits.len();
        debug_assert!(level < moduli.max(1), "level {level} of {moduli} moduli");
        moduli.saturating_sub(level).max(1)
    }

    /// The powers the sender needs: 1..=B without Paterson–Stockmeyer; with low degree
    /// L, the low powers 1..=L and the high powers (L+1)·j up to B.
    pub fn needed_powers(&self) -> Vec<u32> {
        needed_powers(self.table_params.max_items_per_bin, self.query_params.ps_low_degree)
    }

    /// The power plan from the query powers to the needed powers.
    pub fn plan(&self) -> Result<PowerPlan> {
        PowerPlan::for_targets(&self.query_params.query_powers, &self.needed_powers())
            .map_err(|e| Error::params("query_powers", format!("query_params.query_powers: {e}")))
    }

    /// Multiplicative depth of a bundle's evaluation: the deepest power used, then the
    /// plaintext product (direct), or the low-power sum times a high power (PS).
    pub fn depth(&self) -> Result<(u32, bool)> {
        Ok(self.depth_in(&self.plan()?))
    }

    /// [`depth`](Self::depth) with this set's `plan` already built.
    fn depth_in(&self, plan: &PowerPlan) -> (u32, bool) {
        let l = self.query_params.ps_low_degree as u32;
        let d = |e: u32| plan.depth_of(e);
        if l == 0 {
            return (d_max(&self.needed_powers(), d), false);
        }
        let low = d_max(&(1..=l).collect::<Vec<_>>(), d);
        let high = d_max(&self.needed_powers().into_iter().filter(|&e| e > l).collect::<Vec<_>>(), d);
        (low.max(high) + 1, true)
    }

    /// The level a bundle's plaintext products are computed at, and its plaintexts
    /// encoded at: the lowest (fewest moduli) whose noise budget still holds them, as
    /// APSI's sender does (`sender.cpp`, after the powers are computed: "modulus switch
    /// down"), so each plaintext product and each plaintext a sender holds costs that
    /// level's moduli, not all of them. The powers are derived at the
    /// [`query_level`](Self::query_level), where their depth needs every modulus there,
    /// then relinearised and switched down. Paterson–Stockmeyer's block products there are
    /// relinearised with a key for that level, which the receiver sends beside the query
    /// level's ([`query_levels`](Self::query_levels)).
    pub fn eval_level(&self) -> Result<usize> {
        Ok(self.eval_level_in(&self.plan()?))
    }

    /// [`eval_level`](Self::eval_level) with this set's `plan` already built.
    pub(crate) fn eval_level_in(&self, plan: &PowerPlan) -> usize {
        let moduli = self.seal_params.coeff_modulus_bits.len();
        // Block products are relinearised at the level, which needs two moduli there.
        let lowest = if self.query_params.ps_low_degree > 0 { 2 } else { 1 };
        let last = moduli.saturating_sub(lowest);
        let query = self.query_level();
        // With a special modulus Paterson–Stockmeyer multiplies its blocks where the
        // query arrives, with the query's one key, which is what that mode is for: a
        // second key for level 2 (over every modulus) would add three quarters of the
        // first's bytes.
        if self.seal_params.special_modulus && self.query_params.ps_low_degree > 0 {
            return query;
        }
        (query + 1..=last).rev().find(|&level| self.budget_left_at(plan, level) >= NOISE_MARGIN_BITS).unwrap_or(query)
    }

    /// The level the receiver encrypts its query at: 1 with a
    /// [`special_modulus`](SealParams::special_modulus), else 0.
    pub fn query_level(&self) -> usize {
        usize::from(self.seal_params.special_modulus)
    }

    /// Where the query travels: the [`query_level`](Self::query_level) its ciphertexts
    /// are at, and the levels the receiver sends relinearisation keys for, in order: the
    /// query level when the sender derives powers (or multiplies Paterson–Stockmeyer
    /// blocks there), and the [`eval_level`](Self::eval_level) when Paterson–Stockmeyer
    /// multiplies its blocks below it; the keys are over every modulus with a
    /// [`special_modulus`](SealParams::special_modulus). Both sides compute it from the
    /// agreed parameters.
    pub fn query_levels(&self) -> Result<QueryLevels> {
        Ok(self.query_levels_in(&self.plan()?))
    }

    /// [`query_levels`](Self::query_levels) with this set's `plan` already built.
    pub(crate) fn query_levels_in(&self, plan: &PowerPlan) -> QueryLevels {
        self.query_levels_at(plan, self.eval_level_in(plan))
    }

    /// [`query_levels`](Self::query_levels) with the plan built and the evaluation
    /// `level` known.
    pub(crate) fn query_levels_at(&self, plan: &PowerPlan, level: usize) -> QueryLevels {
        let query = self.query_level();
        // The plan's products run where the query arrives.
        let mut keys: Vec<usize> = plan.key_levels().iter().map(|_| query).collect();
        // Paterson–Stockmeyer multiplies a block only if one after the first has more
        // than its constant (B ≥ L + 2; a file can give B = L + 1).
        let low = self.query_params.ps_low_degree;
        if low > 0 && self.table_params.max_items_per_bin >= low + 2 && !keys.contains(&level) {
            keys.push(level);
        }
        QueryLevels { query, keys, keys_over_every_modulus: self.seal_params.special_modulus }
    }

    /// Bytes of a relinearisation key for ciphertexts at `level` as a share of the key
    /// for the query level's: a part per modulus of the level, each over the bits of
    /// the moduli the key is over.
    pub(crate) fn key_bytes_share(&self, level: usize) -> f64 {
        let over = |l: usize| if self.seal_params.special_modulus { 0 } else { l };
        let bytes = |l: usize| self.moduli_at(l) as f64 * self.log_q_at(over(l));
        bytes(level) / bytes(self.query_level())
    }

    /// Noise (log2 of the largest noise coefficient) of a bundle's result at its
    /// [`eval_level`](Self::eval_level) and after the switch to the last level, by the
    /// empirical model of the `fhe` crate's BFV that `tests/suite/unbalanced_noise.rs`
    /// checks against measurements: fresh 4 bits; a product of two sources adds
    /// `log2 t + 14`; a further product level takes the larger of its operand's noise and
    /// the relinearisation noise (largest modulus plus 10 bits) and adds `log2 t + 14`; a
    /// sum of k plaintext products adds `log2 t + 10 + log2 k`; products are relinearised
    /// once, after the sum; a switch down divides by the dropped moduli and adds up to 10
    /// bits of rounding noise. Fitted at N = 4096; each doubling of N adds half a bit to
    /// every product and a bit to the rounding (both grow with N), which the test also
    /// checks with Paterson–Stockmeyer at N = 8192 and 16384. With Paterson–Stockmeyer
    /// every power is relinearised before use, and below the query level every power is
    /// relinearised, then switched down before the plaintext products (and
    /// Paterson–Stockmeyer's block products, relinearised there with that level's key).
    /// With a [`special_modulus`](SealParams::special_modulus) the query is at level 1
    /// and a relinearisation's noise is divided by the moduli its key has beyond the
    /// ciphertext's, plus the switch's rounding.
    pub fn noise_bits(&self) -> Result<(f64, f64)> {
        let plan = self.plan()?;
        Ok(self.noise_bits_at(&plan, self.eval_level_in(&plan)))
    }

    /// [`noise_bits`](Self::noise_bits) with the products at `level`.
    fn noise_bits_at(&self, plan: &PowerPlan, level: usize) -> (f64, f64) {
        let (depth, ps) = self.depth_in(plan);
        let lt = (self.seal_params.plain_modulus as f64).log2();
        let bits = &self.seal_params.coeff_modulus_bits;
        let log_q = |level: usize| self.log_q_at(level);
        let wider = 0.5 * (self.seal_params.poly_modulus_degree as f64 / 4096.0).log2().max(0.0);
        let lt = lt + wider;
        let rounding = 10.0 + 2.0 * wider;
        // Relinearisation noise at a level: its largest modulus plus 10 bits; a key over
        // every modulus divides it by the moduli beyond the level's (then rounds). A
        // special set's keys are all over every modulus, and it relinearises only at its
        // query level (`eval_level_in` keeps Paterson–Stockmeyer there).
        let query = self.query_level();
        let relin_at = |level: usize| {
            let own = *bits[..self.moduli_at(level)].iter().max().unwrap_or(&0) as f64 + 10.0;
            if self.seal_params.special_modulus { (own - (log_q(0) - log_q(level))).max(rounding) + 1.0 } else { own }
        };
        let relin = relin_at(query);
        // Noise of a power at depth d, relinearised when `relinearised`.
        let power = |d: u32, relinearised: bool| {
            let mut n = 4.0;
            for level in 1..=d {
                n = if level == 1 { n + lt + 14.0 } else { n.max(relin) + 1.0 + lt + 14.0 };
            }
            if relinearised && d > 0 { n.max(relin) + 1.0 } else { n }
        };
        let relin_sum = |n: f64| if plan.products() > 0 { n.max(relin) + 1.0 } else { n };
        // A power relinearised at the query level, then switched to `level`: its noise
        // scaled down by the dropped moduli, plus the switch's rounding.
        let at_level = |n: f64| {
            if level == query {
                return n;
            }
            let scaled = n - (log_q(query) - log_q(level));
            scaled.max(rounding) + (1.0 + (-(scaled - rounding).abs()).exp2()).log2()
        };
        let b = self.table_params.max_items_per_bin as f64;
        let noise = if ps {
            let l = self.query_params.ps_low_degree as f64;
            let low_d = d_max(&(1..=l as u32).collect::<Vec<_>>(), |e| plan.depth_of(e));
            // The sender relinearises every power before the blocks (`relinearize_all`)
            // and switches it to the level, so the inner sums are of relinearised powers
            // and need no key switch.
            let low = at_level(power(low_d, true)) + lt + 10.0 + (l + 1.0).log2();
            let high = at_level(power(depth - 1, true));
            // The blocks' products are summed, then relinearised once at the level
            // (`eval::evaluate`).
            let blocks = (b / (l + 1.0)).ceil() + 1.0;
            (low.max(high) + lt + 14.0 + blocks.log2()).max(relin_at(level)) + 1.0
        } else if level == query {
            relin_sum(power(depth, false) + lt + 10.0 + (b + 1.0).log2())
        } else {
            // Relinearised at the query level, switched down, then summed with no key switch.
            at_level(power(depth, true)) + lt + 10.0 + (b + 1.0).log2()
        };
        let dropped = log_q(level) - bits[0] as f64;
        (noise, (noise - dropped).max(rounding))
    }

    /// Noise budget (bits) left after a bundle's evaluation, at its
    /// [`eval_level`](Self::eval_level) and at the last level the result travels at:
    /// `log2(q / 2t)` minus the noise of [`noise_bits`](Self::noise_bits).
    pub fn noise_budget_left(&self) -> Result<f64> {
        let plan = self.plan()?;
        Ok(self.budget_left_at(&plan, self.eval_level_in(&plan)))
    }

    /// [`noise_budget_left`](Self::noise_budget_left) with the products at `level`.
    fn budget_left_at(&self, plan: &PowerPlan, level: usize) -> f64 {
        let (noise, last) = self.noise_bits_at(plan, level);
        let lt = (self.seal_params.plain_modulus as f64).log2();
        let first = self.seal_params.coeff_modulus_bits[0] as f64;
        (self.log_q_at(level) - lt - 1.0 - noise).min(first - lt - 1.0 - last)
    }

    /// Bits of the ciphertext modulus at `level`: every modulus but the last `level`.
    fn log_q_at(&self, level: usize) -> f64 {
        let bits = &self.seal_params.coeff_modulus_bits;
        bits[..self.moduli_at(level)].iter().sum::<usize>() as f64
    }

    /// Checks every constraint; the error names the field and why.
    pub fn validate(&self) -> Result<()> {
        self.validate_with(None)
    }

    /// [`validate`](Self::validate), with the power plan already built when `plan` is
    /// given (it must be this set's [`plan`](Self::plan)): a search that tries many sets
    /// of one shape builds it once.
    pub(crate) fn validate_with(&self, plan: Option<&PowerPlan>) -> Result<()> {
        self.he().validate().map_err(|e| Error::params("seal_params", format!("seal_params: {e}")))?;
        if self.seal_params.plain_modulus > u32::MAX as u64 {
            return Err(Error::params(
                "plain_modulus",
                format!(
                    "seal_params.plain_modulus = {}: must be below 2^32 (the database stores coefficients in 32 bits)",
                    self.seal_params.plain_modulus
                ),
            ));
        }
        if self.seal_params.special_modulus && self.seal_params.coeff_modulus_bits.len() < 3 {
            return Err(Error::params(
                "special_modulus",
                format!(
                    "seal_params.special_modulus needs 3 moduli or more (the query and its keys at level 1 keep two), not {}",
                    self.seal_params.coeff_modulus_bits.len()
                ),
            ));
        }
        let n = self.seal_params.poly_modulus_degree;
        let felts = self.item_params.felts_per_item;
        if felts == 0 || felts > n {
            return Err(Error::params(
                "felts_per_item",
                format!("item_params.felts_per_item = {felts}: must be 1..=poly_modulus_degree ({n})"),
            ));
        }
        if self.item_bits() < 80 {
            return Err(Error::params(
                "felts_per_item",
                format!(
                    "item_params.felts_per_item = {felts}: items get {} bits ({} per felt), at least 80 are needed",
                    self.item_bits(),
                    self.felt_bits()
                ),
            ));
        }
        let t = &self.table_params;
        if !(1..=8).contains(&t.hash_func_count) {
            return Err(Error::params(
                "hash_func_count",
                format!("table_params.hash_func_count = {}: must be 1..=8", t.hash_func_count),
            ));
        }
        let bpb = self.bins_per_bundle();
        if t.table_size == 0 || !t.table_size.is_multiple_of(bpb) {
            return Err(Error::params(
                "table_size",
                format!(
                    "table_params.table_size = {}: must be a positive multiple of ⌊poly_modulus_degree / felts_per_item⌋ = {bpb}",
                    t.table_size
                ),
            ));
        }
        if t.table_size > MAX_TABLE_SIZE {
            return Err(Error::params(
                "table_size",
                format!("table_params.table_size = {}: at most {MAX_TABLE_SIZE}", t.table_size),
            ));
        }
        if t.max_items_per_bin == 0 || t.max_items_per_bin > 4096 {
            return Err(Error::params(
                "max_items_per_bin",
                format!("table_params.max_items_per_bin = {}: must be 1..=4096", t.max_items_per_bin),
            ));
        }
        let q = &self.query_params;
        if !q.query_powers.contains(&1) {
            return Err(Error::params("query_powers", "query_params.query_powers must contain 1".into()));
        }
        // Checked before any power plan is built: its tables are sized by the largest power.
        if let Some(&p) = q.query_powers.iter().find(|&&p| p == 0 || p as usize > t.max_items_per_bin) {
            return Err(Error::params(
                "query_powers",
                format!("query_params.query_powers: {p} is outside 1..={}", t.max_items_per_bin),
            ));
        }
        if q.ps_low_degree >= t.max_items_per_bin {
            return Err(Error::params(
                "ps_low_degree",
                format!(
                    "query_params.ps_low_degree = {} must be below max_items_per_bin = {}",
                    q.ps_low_degree, t.max_items_per_bin
                ),
            ));
        }
        let built;
        let plan = match plan {
            Some(p) => p,
            None => {
                built = self.plan()?;
                &built
            }
        };
        let budget = self.budget_left_at(plan, self.eval_level_in(plan));
        if budget < NOISE_MARGIN_BITS {
            let (depth, ps) = self.depth_in(plan);
            return Err(Error::params(
                "noise_budget",
                format!(
                    "infeasible: the evaluation has depth {depth}{} and would leave {budget:.0} bits of noise budget (≥ {NOISE_MARGIN_BITS} needed); use more query_powers, a smaller max_items_per_bin, or larger coeff_modulus_bits",
                    if ps { " (with Paterson–Stockmeyer)" } else { "" }
                ),
            ));
        }
        if self.receiver_max() == 0 {
            return Err(Error::params(
                "table_size",
                format!("table_params.table_size = {} is too small for any receiver item", t.table_size),
            ));
        }
        Ok(())
    }
}

/// The powers a bin of degree `b` needs with Paterson–Stockmeyer low degree `l` (0:
/// none): [`UnbalancedParams::needed_powers`], for a search that has no set yet.
pub(crate) fn needed_powers(b: usize, l: usize) -> Vec<u32> {
    let (b, l) = (b as u32, l as u32);
    if l == 0 {
        return (1..=b).collect();
    }
    let mut v: Vec<u32> = (1..=l.min(b)).collect();
    v.extend((1..).map(|j| j * (l + 1)).take_while(|&e| e <= b));
    v
}

fn d_max(exps: &[u32], d: impl Fn(u32) -> u32) -> u32 {
    exps.iter().map(|&e| d(e)).max().unwrap_or(0)
}

/// Small parameters for fast tests (`testing::small_unbalanced_params`; here so that the
/// module's own unit tests share them without importing a layer above).
#[cfg(any(test, feature = "testing"))]
pub(crate) fn small_test_params() -> UnbalancedParams {
    UnbalancedParams::from_json(
        r#"{"table_params":{"hash_func_count":3,"table_size":1024,"max_items_per_bin":8},
            "item_params":{"felts_per_item":4},
            "query_params":{"ps_low_degree":0,"query_powers":[1,2,3,4,5,6,7,8]},
            "seal_params":{"poly_modulus_degree":4096,"coeff_modulus_bits":[42,36,31],"plain_modulus":2056193}}"#,
    )
    .expect("valid parameters")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_sets_are_evaluated_at_the_lowest_level_their_noise_allows() {
        // Three moduli, every power sent: the products need two (level 1), not one.
        let small = small_test_params();
        assert_eq!(small.eval_level().unwrap(), 1);
        let (noise, _) = small.noise_bits().unwrap();
        assert!(small.noise_budget_left().unwrap() >= NOISE_MARGIN_BITS, "{noise}");
        let mut two = small.clone();
        two.seal_params.coeff_modulus_bits.truncate(2);
        // Two moduli: one left is too few for the sum, so level 0.
        assert_eq!(two.eval_level().unwrap(), 0);
        // Paterson–Stockmeyer goes down too, to a level of at least two moduli, where a
        // second key relinearises its block products.
        let apsi = UnbalancedParams::from_json(APSI_16M_1024).unwrap();
        assert_eq!(apsi.eval_level().unwrap(), 1);
        assert_eq!(apsi.query_levels().unwrap(), QueryLevels::at_level_zero(&[0, 1]));
        let mut sent = apsi.clone();
        sent.query_params.query_powers = needed_powers(1304, 44);
        assert_eq!(sent.query_levels().unwrap().keys, [1], "every power sent: no products at level 0");
        // A last block of its constant only, and no other after the first: no block
        // product, so no key for the level (only a file gives B = L + 1).
        let mut constant = sent.clone();
        constant.table_params.max_items_per_bin = 45;
        constant.query_params.query_powers = needed_powers(45, 44);
        assert_eq!(constant.query_levels().unwrap().keys, Vec::<usize>::new());
        let mut three = apsi.clone();
        three.seal_params.coeff_modulus_bits = vec![56, 56, 56];
        assert!(three.eval_level().unwrap() <= 1, "never a level of one modulus");
        // The same chain evaluated directly at depth 1 goes down to two of its four moduli.
        let mut direct = apsi.clone();
        direct.table_params.max_items_per_bin = 192;
        direct.query_params = QueryParams { ps_low_degree: 0, query_powers: crate::he::depth_one_sources(192, 300) };
        assert_eq!(direct.eval_level().unwrap(), 2);
        assert_eq!(direct.moduli_at(2), 2);
        // Each level down is a modulus fewer in every plaintext a sender holds.
        assert_eq!(direct.serving_bytes(10, 2).0 * 2, direct.serving_bytes(10, 0).0);
    }

    #[test]
    fn a_special_modulus_puts_the_query_and_its_keys_at_level_one() {
        let mut p = UnbalancedParams::from_json(APSI_16M_1024).unwrap();
        p.seal_params.coeff_modulus_bits = vec![62, 62, 62, 32];
        p.seal_params.plain_modulus = HeParams::batching_prime(8192, 20);
        // 19 bits a felt: five make an item.
        p.item_params.felts_per_item = 5;
        p.table_params.table_size = 1638;
        let plain = p.clone();
        p.seal_params.special_modulus = true;
        assert_eq!(p.query_level(), 1);
        // Powers derived and blocks multiplied at level 1, with one key over every modulus.
        assert_eq!(p.eval_level().unwrap(), 1);
        let levels = p.query_levels().unwrap();
        assert_eq!(levels, QueryLevels { query: 1, keys: vec![1], keys_over_every_modulus: true });
        assert_eq!(levels.over(1), 0);
        // The key has three parts over four moduli, against level 0's four parts and level 1's own three over three.
        assert_eq!(p.key_bytes_share(1), 1.0);
        assert!((plain.key_bytes_share(1) - 3.0 * 186.0 / (4.0 * 218.0)).abs() < 1e-9);
        // The division of every relinearisation's noise is what lets the product chain run in 186 bits.
        assert!(p.noise_budget_left().unwrap() >= NOISE_MARGIN_BITS);
        // Without it the same chain derives at level 0 and needs a second key below.
        let levels = plain.query_levels().unwrap();
        assert_eq!((levels.query, levels.keys.len(), levels.over(2)), (0, 2, 2));
        // The field is written only when set, so other sets keep their fingerprints.
        assert!(!plain.to_json().contains("special_modulus"));
        let back = UnbalancedParams::from_json(&p.to_json()).unwrap();
        assert!(back.seal_params.special_modulus && back.fingerprint() != plain.fingerprint());
        // Two moduli leave none for the keys at level 1.
        let mut two = p.clone();
        two.seal_params.coeff_modulus_bits = vec![60, 60];
        let e = two.validate().unwrap_err().to_string();
        assert!(e.contains("special_modulus needs 3 moduli"), "{e}");
    }

    /// APSI's `parameters/16M-1024.json` before 0.12 (commit a104124), its plaintext
    /// modulus given in bits.
    const APSI_16M_1024: &str = r#"{
        "table_params": { "hash_func_count": 3, "table_size": 2048, "max_items_per_bin": 1304 },
        "item_params": { "felts_per_item": 4 },
        "query_params": { "ps_low_degree": 44, "query_powers": [ 1, 3, 11, 18, 45, 225 ] },
        "seal_params": { "plain_modulus_bits": 21, "poly_modulus_degree": 8192, "coeff_modulus_bits": [ 56, 56, 56, 50 ] }
    }"#;

    /// The same file in APSI 0.12.0 (5 felts of 21 bits, a table of 1638 bins).
    const APSI_0_12_16M_1024: &str = r#"{
        "table_params": { "hash_func_count": 3, "table_size": 1638, "max_items_per_bin": 1304 },
        "item_params": { "felts_per_item": 5 },
        "query_params": { "ps_low_degree": 44, "query_powers": [ 1, 3, 11, 18, 45, 225 ] },
        "seal_params": { "plain_modulus_bits": 22, "poly_modulus_degree": 8192, "coeff_modulus_bits": [ 56, 56, 56, 50 ] }
    }"#;

    /// The largest prime ≡ 1 mod 2N below 2^bits, by trial division: a second computation.
    fn slow_batching_prime(n: u64, bits: u32) -> u64 {
        let prime = |t: u64| t > 1 && (2..).take_while(|d| d * d <= t).all(|d| !t.is_multiple_of(d));
        (1..1u64 << bits).rev().find(|&t| t % (2 * n) == 1 && prime(t)).unwrap()
    }

    #[test]
    fn apsi_files_that_give_the_plain_modulus_in_bits_are_read_as_seal_picks_it() {
        let p = UnbalancedParams::from_json(APSI_16M_1024).unwrap();
        let t = slow_batching_prime(8192, 21);
        assert_eq!(p.seal_params.plain_modulus, t);
        assert_eq!(t >> 20, 1, "a 21-bit prime");
        // The same set with the modulus written out is the same parameters.
        let written = APSI_16M_1024.replace("\"plain_modulus_bits\": 21", &format!("\"plain_modulus\": {t}"));
        assert_eq!(UnbalancedParams::from_json(&written).unwrap().fingerprint(), p.fingerprint());
        let refused = |json: String| UnbalancedParams::from_json(&json).unwrap_err().to_string();
        let both = APSI_16M_1024
            .replace("\"plain_modulus_bits\": 21", &format!("\"plain_modulus\": {t}, \"plain_modulus_bits\": 21"));
        assert!(refused(both).contains("not both"));
        assert!(refused(APSI_16M_1024.replace("\"plain_modulus_bits\": 21,", "")).contains("missing plain_modulus"));
        // APSI 0.12's file reads too; the item count alone does not condemn it at 2^22
        // (the built database's real bundle count decides).
        let v12 = UnbalancedParams::from_json(APSI_0_12_16M_1024).unwrap();
        assert_eq!(v12.seal_params.plain_modulus, slow_batching_prime(8192, 22));
        v12.check_false_matches(v12.min_bundles_per_index(1 << 22), "at least ").unwrap();
        // The older file breaks the bound at one bundle: refused before any work.
        assert!(p.check_false_matches(p.min_bundles_per_index(1), "at least ").is_err());
        // At 2^24 the fullest index of APSI 0.12's file fills at least 24 bundles (a
        // build here filled 25: 2^-38.5), so it is refused before the OPRF, which the
        // item count alone (8 bundles) did not do.
        assert_eq!(v12.min_bundles_per_index(1 << 24), 8);
        assert_eq!(v12.likely_bundles_per_index(1 << 24), 24);
        let e = v12.check_false_matches(v12.likely_bundles_per_index(1 << 24), "at least ").unwrap_err();
        assert!(e.to_string().contains("at least 24 bundles"), "{e}");
        v12.check_false_matches(v12.likely_bundles_per_index(1 << 22), "at least ").unwrap();
        // No prime of 14 bits is ≡ 1 mod 16384, and 70 bits is no SEAL size.
        for bits in [0, 14, 70] {
            let e = refused(
                APSI_16M_1024.replace("\"plain_modulus_bits\": 21", &format!("\"plain_modulus_bits\": {bits}")),
            );
            assert!(e.contains("plain_modulus_bits") && e.contains("no prime"), "{e}");
        }
    }

    #[test]
    fn the_false_match_bound_refuses_a_database_too_large_for_the_parameters_before_any_work() {
        // B = 64, 4 felts of 20 bits: one bundle at an index gives 2^-46.6 at the receiver
        // maximum, 100 bundles 2^-40.
        let powers: Vec<String> = (1..=64).map(|i| i.to_string()).collect();
        let p = UnbalancedParams::from_json(&format!(
            r#"{{"table_params":{{"hash_func_count":3,"table_size":1024,"max_items_per_bin":64}},
                "item_params":{{"felts_per_item":4}},
                "query_params":{{"ps_low_degree":0,"query_powers":[{}]}},
                "seal_params":{{"poly_modulus_degree":4096,"coeff_modulus_bits":[42,36,31],"plain_modulus":2056193}}}}"#,
            powers.join(",")
        ))
        .unwrap();
        assert_eq!(p.min_bundles_per_index(1 << 16), 1);
        assert_eq!(p.min_bundles_per_index(1 << 26), 1024);
        p.check_false_matches(p.min_bundles_per_index(1 << 16), "at least ").unwrap();
        let e = p.check_false_matches(p.min_bundles_per_index(1 << 26), "at least ").unwrap_err();
        assert!(e.to_string().contains("at least 1024 bundles") && e.to_string().contains("> 2^-40"), "{e}");
        assert_eq!(e.field(), Some("max_items_per_bin"));
    }
}
