//! Power plans: from the powers the receiver sends (the *sources*, e.g. a
//! postage-stamp basis), derive the powers a polynomial evaluation needs with
//! ciphertext products of minimal depth. Computed once per parameter set and reused for
//! every query.

use super::{Ciphertext, Evaluator, HeError};
use rayon::prelude::*;

/// How to derive each needed power from the sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerPlan {
    sources: Vec<u32>,
    targets: Vec<u32>,
    /// `(target, a, b)`: `x^target = x^a · x^b`, in an order where `a` and `b` exist.
    steps: Vec<(u32, u32, u32)>,
    /// Least multiplicative depth of each exponent up to the largest target (index =
    /// exponent; index 0 unused).
    depth: Vec<u32>,
}

/// Derived powers, indexed by exponent.
#[derive(Debug, Clone)]
pub struct Powers(Vec<Option<Ciphertext>>);

impl Powers {
    /// `x^e`, if the plan derived it.
    pub fn get(&self, e: u32) -> Option<&Ciphertext> {
        self.0.get(e as usize).and_then(|c| c.as_ref())
    }

    /// Relinearises every power left in 3 parts, in parallel: for an evaluation that
    /// uses each power in many products (Paterson–Stockmeyer), once here instead of at
    /// every use; and before a switch below the level they were derived at, with that
    /// level's key, while the powers are still there.
    pub fn relinearize_all(&mut self, ev: &Evaluator<'_>) -> Result<(), HeError> {
        self.0.par_iter_mut().flatten().try_for_each(|c| ev.relinearize(c))
    }

    /// Switches every power to `level`, in parallel, for products at that level.
    pub fn switch_all_to(&mut self, level: usize) -> Result<(), HeError> {
        self.0.par_iter_mut().flatten().try_for_each(|c| c.switch_to_level(level))
    }
}

const NONE: u32 = u32::MAX;

impl PowerPlan {
    /// A plan deriving every power `1..=max` from `sources`.
    pub fn new(sources: &[u32], max: u32) -> Result<Self, HeError> {
        Self::for_targets(sources, &(1..=max).collect::<Vec<_>>())
    }

    /// A plan deriving `targets` from `sources`, each at the least depth possible (a
    /// source has depth 0; `a + b` has `max(depth a, depth b) + 1`), with only the
    /// intermediate powers the targets need.
    pub fn for_targets(sources: &[u32], targets: &[u32]) -> Result<Self, HeError> {
        let mut src: Vec<u32> = sources.to_vec();
        src.sort_unstable();
        src.dedup();
        let max = targets.iter().chain(&src).copied().max().unwrap_or(0);
        if src.is_empty() || src[0] == 0 || targets.contains(&0) {
            return Err(HeError::Params(format!("source powers {sources:?} must be non-empty and positive")));
        }
        let m = max as usize;
        let mut depth = vec![NONE; m + 1];
        let mut how = vec![(0u32, 0u32); m + 1];
        for &s in &src {
            depth[s as usize] = 0;
        }
        // Any power is a sum of two smaller ones, so one pass in increasing order finds
        // each exponent's least depth.
        for e in 2..=m {
            if depth[e] == 0 {
                continue;
            }
            for a in 1..=e / 2 {
                let b = e - a;
                if depth[a] != NONE && depth[b] != NONE {
                    let d = depth[a].max(depth[b]) + 1;
                    if d < depth[e] {
                        depth[e] = d;
                        how[e] = (a as u32, b as u32);
                    }
                }
            }
        }
        if let Some(&e) = targets.iter().find(|&&e| depth[e as usize] == NONE) {
            return Err(HeError::Params(format!("power {e} cannot be derived from sources {src:?}")));
        }
        // Keep only the steps the targets depend on, in increasing exponent order.
        let mut need = vec![false; m + 1];
        let mut stack: Vec<u32> = targets.to_vec();
        while let Some(e) = stack.pop() {
            if std::mem::replace(&mut need[e as usize], true) || depth[e as usize] == 0 {
                continue;
            }
            let (a, b) = how[e as usize];
            stack.extend([a, b]);
        }
        let steps = (1..=m).filter(|&e| need[e] && depth[e] > 0).map(|e| (e as u32, how[e].0, how[e].1)).collect();
        let mut targets = targets.to_vec();
        targets.sort_unstable();
        targets.dedup();
        Ok(Self { sources: src, targets, steps, depth })
    }

    /// The source powers, ascending.
    pub fn sources(&self) -> &[u32] {
        &self.sources
    }

    /// The powers the plan provides (ascending).
    pub fn targets(&self) -> &[u32] {
        &self.targets
    }

    /// The depth of the deepest target.
    pub fn depth(&self) -> u32 {
        self.targets.iter().map(|&e| self.depth[e as usize]).max().unwrap_or(0)
    }

    /// The least depth at which power `e` can be derived (0 for a source).
    pub fn depth_of(&self, e: u32) -> u32 {
        self.depth[e as usize]
    }

    /// Number of ciphertext products.
    pub fn products(&self) -> usize {
        self.steps.len()
    }

    /// The levels its products need relinearisation keys for, with the query at level 0:
    /// level 0, where the powers are derived, if it has any (`unbalanced` moves it to its
    /// query level).
    pub fn key_levels(&self) -> &'static [usize] {
        if self.products() > 0 { &[0] } else { &[] }
    }

    /// Checks the plan: every step multiplies two powers already present, at the
    /// recorded depth, and every target ends up present. Used by tests.
    pub fn verify(&self) -> bool {
        let mut have = vec![false; self.depth.len()];
        for &s in &self.sources {
            have[s as usize] = true;
        }
        for &(t, a, b) in &self.steps {
            if !have[a as usize] || !have[b as usize] || a + b != t {
                return false;
            }
            if self.depth[t as usize] != self.depth[a as usize].max(self.depth[b as usize]) + 1 {
                return false;
            }
            have[t as usize] = true;
        }
        self.targets.iter().all(|&e| have[e as usize])
    }

    /// Derives the targets from the source ciphertexts (in the order of
    /// [`sources`](Self::sources)).
    pub fn evaluate(&self, ev: &Evaluator<'_>, sources: Vec<Ciphertext>) -> Result<Powers, HeError> {
        if sources.len() != self.sources.len() {
            return Err(HeError::Op(format!(
                "{} source ciphertexts for {} sources",
                sources.len(),
                self.sources.len()
            )));
        }
        let mut all: Vec<Option<Ciphertext>> = vec![None; self.depth.len()];
        for (&e, c) in self.sources.iter().zip(sources) {
            all[e as usize] = Some(c);
        }
        // Layer by layer (a step's operands are shallower), each layer's products in
        // parallel. Products stay unrelinearised (3 parts) until they are an operand or
        // summed in a dot product, so each carries the key-switching noise at most once.
        for d in 1..=self.depth() {
            let layer: Vec<(u32, u32, u32)> =
                self.steps.iter().copied().filter(|&(t, _, _)| self.depth[t as usize] == d).collect();
            let mut operands: Vec<u32> = layer.iter().flat_map(|&(_, a, b)| [a, b]).collect();
            operands.sort_unstable();
            operands.dedup();
            operands.retain(|&e| all[e as usize].as_ref().is_some_and(|c| c.parts() == 3));
            let relinearised: Vec<(u32, Ciphertext)> = operands
                .par_iter()
                .map(|&e| {
                    let mut c = all[e as usize].clone().expect("plan order");
                    ev.relinearize(&mut c).map(|()| (e, c))
                })
                .collect::<Result<_, _>>()?;
            for (e, c) in relinearised {
                all[e as usize] = Some(c);
            }
            let products: Vec<(u32, Ciphertext)> = layer
                .par_iter()
                .map(|&(t, a, b)| {
                    let (ca, cb) = (all[a as usize].as_ref(), all[b as usize].as_ref());
                    ev.mul_lazy(ca.expect("plan order"), cb.expect("plan order")).map(|c| (t, c))
                })
                .collect::<Result<_, _>>()?;
            for (t, c) in products {
                all[t as usize] = Some(c);
            }
        }
        Ok(Powers(all))
    }
}

/// A small set of sources from which every power `1..=max` is a source or a product
/// of two sources (depth 1): randomised greedy restarts (a fixed seed, so the result is
/// reproducible), keeping the smallest set found. Each step covers the smallest
/// uncovered exponent with the candidate `u - s` that covers the most new exponents.
pub fn depth_one_sources(max: u32, restarts: u32) -> Vec<u32> {
    let n = max as usize;
    let mut best: Vec<u32> = (1..=max).collect();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..restarts.max(1) {
        let mut set: Vec<usize> = vec![1];
        let mut covered = vec![false; 2 * n + 2];
        covered[1] = true;
        covered[2] = true;
        while let Some(u) = (1..=n).find(|&e| !covered[e]) {
            let gain = |x: usize, set: &[usize], covered: &[bool]| {
                std::iter::once(2 * x)
                    .chain(std::iter::once(x))
                    .chain(set.iter().map(|&s| x + s))
                    .filter(|&e| e <= n && !covered[e])
                    .count()
            };
            let mut cands: Vec<(usize, usize)> = set
                .iter()
                .map(|&s| u - s)
                .chain(std::iter::once(u))
                .filter(|&x| x >= 2)
                .map(|x| (gain(x, &set, &covered) * 4 + (next() % 8) as usize, x))
                .collect();
            cands.sort_unstable_by(|a, b| b.cmp(a));
            let pick = if next() % 2 == 0 { 0 } else { (next() % 3) as usize % cands.len() };
            let x = cands[pick].1;
            for e in std::iter::once(2 * x).chain(std::iter::once(x)).chain(set.iter().map(|&s| x + s)) {
                covered[e.min(2 * n + 1)] = true;
            }
            set.push(x);
            if set.len() >= best.len() {
                break;
            }
        }
        if set.len() < best.len() && (1..=n).all(|e| covered[e]) {
            set.sort_unstable();
            best = set.into_iter().map(|x| x as u32).collect();
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_one_sources_cover_every_power_at_depth_one() {
        for max in [1u32, 2, 16, 64, 180] {
            let s = depth_one_sources(max, 200);
            let p = PowerPlan::new(&s, max).unwrap();
            assert!(p.verify() && p.depth() <= 1, "max {max}: {s:?}");
            // Far below sending every power.
            assert!(max < 16 || s.len() * 5 < max as usize * 2, "max {max}: {} sources", s.len());
        }
    }

    #[test]
    fn binary_sources_give_log_depth() {
        for max in [1u32, 2, 3, 4, 7, 8, 9, 16, 33] {
            let p = PowerPlan::new(&[1], max).unwrap();
            assert!(p.verify());
            assert_eq!(p.depth(), 32 - (max - 1).leading_zeros().min(32), "max {max}");
            assert_eq!(p.products(), max as usize - 1);
        }
    }

    #[test]
    fn postage_stamp_bases() {
        // APSI-style: sources {1, 3, 11, 15, 32} reach 1..=70 at depth 2.
        let p = PowerPlan::new(&[1, 3, 11, 15, 32], 70).unwrap();
        assert!(p.verify());
        assert!(p.depth() <= 2, "depth {}", p.depth());
        let all = PowerPlan::new(&(1..=20).collect::<Vec<_>>(), 20).unwrap();
        assert_eq!((all.depth(), all.products()), (0, 0));
        let p = PowerPlan::new(&[1, 2, 3, 4], 16).unwrap();
        assert!(p.verify());
        assert_eq!(p.depth(), 2);
        assert!(PowerPlan::new(&[2], 4).is_err(), "odd powers are unreachable");
        assert!(PowerPlan::new(&[0, 1], 4).is_err());
    }

    #[test]
    fn subsets_of_targets_derive_only_what_they_need() {
        // Paterson–Stockmeyer with low degree 7: low powers 1..7, high 8, 16, .., 64.
        let targets: Vec<u32> = (1..=7).chain((1..=8).map(|j| 8 * j)).collect();
        let p = PowerPlan::for_targets(&[1, 2, 5, 8], &targets).unwrap();
        assert!(p.verify());
        assert!(p.products() < 64 - 4, "{} products", p.products());
        assert_eq!(p.targets(), &targets[..]);
    }
}
