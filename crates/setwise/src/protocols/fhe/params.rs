//! FHE-PSI parameters, chosen from the two set sizes by a cost model.

use crate::he::{HeParams, PowerPlan};

/// Target false-match probability per run: 2^-40.
pub const FALSE_MATCH_LOG2: f64 = -40.0;
/// Least number of hash bits per item.
pub const MIN_ITEM_BITS: f64 = 80.0;

/// One BFV preset with the power depth its noise budget allows before the final
/// plaintext product, measured with `tests/suite/fhe.rs::noise_budget_at_the_deepest_chunk`
/// (≥ 10 bits of budget left at that depth). N=4096 keeps only 10–11 bits after one
/// product level, too close to call safe, so it runs at depth 0 (the receiver sends
/// every power; no relinearisation key).
#[derive(Debug, Clone, Copy)]
struct Preset {
    degree: usize,
    moduli: &'static [usize],
    plain_bits: u32,
    max_depth: u32,
    /// Measured here (ms): ct×ct with relinearisation, ct×pt, plaintext encoding,
    /// encryption, modulus switch to the last level, decryption.
    cost_ms: [f64; 6],
    /// Bytes: a fresh (seeded) ciphertext, a last-level ciphertext, a relinearisation key.
    bytes: [usize; 3],
}

const PRESETS: &[Preset] = &[
    Preset {
        degree: 4096,
        moduli: &[36, 36, 37],
        plain_bits: 21,
        max_depth: 0,
        cost_ms: [7.0, 0.1, 0.32, 1.15, 1.3, 0.5],
        bytes: [55_857, 36_896, 167_507],
    },
    Preset {
        degree: 8192,
        moduli: &[43, 43, 44, 44, 44],
        plain_bits: 21,
        max_depth: 3,
        cost_ms: [25.0, 0.3, 1.0, 4.2, 9.0, 1.1],
        bytes: [223_281, 88_096, 1_116_273],
    },
];

/// Bytes per second at which the cost model trades traffic against compute (1 Gbit/s).
const BYTES_PER_SECOND: f64 = 125e6;
/// Largest chunk degree considered.
const MAX_DEGREE: usize = 64;

/// Everything both sides derive from the two set sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct FheParams {
    /// BFV parameters.
    pub he: HeParams,
    /// Field elements (slots) per item.
    pub felts: usize,
    /// Sender items per chunk: the degree of each chunk's polynomial.
    pub degree: usize,
    /// Powers the receiver encrypts; the sender derives the rest.
    pub sources: Vec<u32>,
    /// Receiver items per ciphertext.
    pub items_per_ct: usize,
    /// Copies of the receiver's items per ciphertext, each matched against another chunk.
    pub replicas: usize,
    /// Receiver ciphertexts (per source power).
    pub receiver_cts: usize,
    /// Chunk groups: one result ciphertext per receiver ciphertext and group.
    pub groups: usize,
    /// Predicted false-match probability per run, log2.
    pub false_match_log2: f64,
    /// Predicted compute seconds (both parties) and bytes, from the cost model.
    pub predicted: (f64, usize),
}

impl FheParams {
    /// The cheapest feasible parameters for `receiver` × `sender` items, or `None` if
    /// either set is empty (then nothing needs computing).
    pub fn choose(receiver: usize, sender: usize) -> Option<Self> {
        if receiver == 0 || sender == 0 {
            return None;
        }
        let mut best: Option<(f64, Self)> = None;
        for (p, (he, _)) in PRESETS.iter().zip(Self::presets()) {
            let log_t = (he.plain_modulus as f64).log2();
            for degree in 1..=MAX_DEGREE.min(sender) {
                let chunks = sender.div_ceil(degree);
                let Some(felts) = felts_for(receiver, chunks, degree, log_t) else {
                    continue;
                };
                let Some(layout) = Layout::new(p.degree, felts, receiver, chunks) else {
                    continue;
                };
                // Source counts: every small one, then powers of two, then all powers.
                let counts =
                    (1..=degree.min(8)).chain((4..7).map(|e| 1 << e).filter(|&c| c > 8 && c < degree)).chain([degree]);
                for s in counts {
                    let sources: Vec<u32> = (1..=s as u32).collect();
                    let Some(cand) = Self::build(he.clone(), felts, degree, sources, receiver, sender) else {
                        continue;
                    };
                    if cand.plan().depth() > p.max_depth {
                        continue;
                    }
                    let [mul, ctpt, enc, encrypt, ms, dec] = p.cost_ms;
                    let results = (layout.receiver_cts * layout.groups) as f64;
                    let products = (layout.receiver_cts * cand.plan().products()) as f64;
                    let sender_ms = products * mul + results * (degree as f64 * ctpt + (degree + 1) as f64 * enc + ms);
                    let receiver_ms = (layout.receiver_cts * s) as f64 * encrypt + results * dec;
                    let key = if products > 0.0 { p.bytes[2] } else { 0 };
                    let bytes = layout.receiver_cts * s * p.bytes[0] + key + results as usize * p.bytes[1];
                    let secs = (sender_ms + receiver_ms) / 1e3;
                    let cost = secs / 2.0 + bytes as f64 / BYTES_PER_SECOND;
                    let cand = Self { predicted: (secs, bytes), ..cand };
                    if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                        best = Some((cost, cand));
                    }
                }
            }
        }
        best.map(|(_, p)| p)
    }

    /// Parameters from explicit choices, with the slot layout and false-match
    /// probability derived for `receiver` × `sender` items; `None` if a receiver item
    /// does not fit the slots or the sources cannot reach `degree`.
    pub fn build(
        he: HeParams,
        felts: usize,
        degree: usize,
        sources: Vec<u32>,
        receiver: usize,
        sender: usize,
    ) -> Option<Self> {
        let chunks = sender.div_ceil(degree);
        let layout = Layout::new(he.degree, felts, receiver.max(1), chunks.max(1))?;
        PowerPlan::new(&sources, degree as u32).ok()?;
        let log_t = (he.plain_modulus as f64).log2();
        Some(Self {
            false_match_log2: false_match_log2(receiver.max(1), chunks.max(1), degree, log_t, felts),
            he,
            felts,
            degree,
            sources,
            items_per_ct: layout.items_per_ct,
            replicas: layout.replicas,
            receiver_cts: layout.receiver_cts,
            groups: layout.groups,
            predicted: (0.0, 0),
        })
    }

    /// Each preset's BFV parameters and the power depth allowed before the final
    /// plaintext product.
    pub fn presets() -> Vec<(HeParams, u32)> {
        PRESETS
            .iter()
            .map(|p| {
                let t = HeParams::batching_prime(p.degree, p.plain_bits);
                (HeParams { degree: p.degree, plain_modulus: t, moduli_bits: p.moduli.to_vec() }, p.max_depth)
            })
            .collect()
    }

    /// The power plan for these parameters.
    pub fn plan(&self) -> PowerPlan {
        PowerPlan::new(&self.sources, self.degree as u32).expect("chosen parameters have a valid plan")
    }

    /// A one-line description for reports.
    pub fn describe(&self) -> String {
        format!(
            "{} felts/item={} chunk degree={} sources=1..{} items/ct={} replicas={} receiver cts={} results={} false-match≤2^{:.0}",
            self.he.describe(),
            self.felts,
            self.degree,
            self.sources.len(),
            self.items_per_ct,
            self.replicas,
            self.receiver_cts,
            self.receiver_cts * self.groups,
            self.false_match_log2
        )
    }
}

/// Probability (log2) that some receiver item falsely matches some chunk: every one
/// of its `felts` slots must meet a zero of that chunk's polynomial, each with
/// probability ≤ degree/t, over receiver × chunks pairs.
pub fn false_match_log2(receiver: usize, chunks: usize, degree: usize, log_t: f64, felts: usize) -> f64 {
    (receiver as f64).log2() + (chunks as f64).log2() + felts as f64 * ((degree as f64).log2() - log_t)
}

/// Least felts per item giving ≥ 80 hash bits and a false-match probability ≤ 2^-40.
fn felts_for(receiver: usize, chunks: usize, degree: usize, log_t: f64) -> Option<usize> {
    (1..=8).find(|&k| {
        k as f64 * log_t >= MIN_ITEM_BITS && false_match_log2(receiver, chunks, degree, log_t, k) <= FALSE_MATCH_LOG2
    })
}

/// How receiver items fill the slots.
#[derive(Debug, Clone, Copy)]
struct Layout {
    items_per_ct: usize,
    replicas: usize,
    receiver_cts: usize,
    groups: usize,
}

impl Layout {
    fn new(slots: usize, felts: usize, receiver: usize, chunks: usize) -> Option<Self> {
        let capacity = slots / felts;
        if capacity == 0 {
            return None;
        }
        let items_per_ct = receiver.min(capacity);
        let replicas = (capacity / items_per_ct).clamp(1, chunks);
        Some(Self {
            items_per_ct,
            replicas,
            receiver_cts: receiver.div_ceil(items_per_ct),
            groups: chunks.div_ceil(replicas),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_are_feasible_across_sizes() {
        for r in [1usize, 7, 100, 1000, 5000, 20_000] {
            for s in [1usize, 50, 100, 800, 10_000] {
                let p = FheParams::choose(r, s).unwrap();
                p.he.validate().unwrap();
                assert!(p.false_match_log2 <= FALSE_MATCH_LOG2, "{r}×{s}: {}", p.describe());
                assert!(p.felts as f64 * (p.he.plain_modulus as f64).log2() >= MIN_ITEM_BITS);
                assert!(p.items_per_ct * p.felts * p.replicas <= p.he.degree);
                assert!(p.items_per_ct * p.receiver_cts >= r);
                assert!(p.degree * p.replicas * p.groups >= s);
                let depth_limit = PRESETS.iter().find(|q| q.degree == p.he.degree).unwrap().max_depth;
                assert!(p.plan().depth() <= depth_limit);
            }
        }
        assert!(FheParams::choose(0, 10).is_none());
        assert!(FheParams::choose(10, 0).is_none());
    }
}
