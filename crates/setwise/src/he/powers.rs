//! Power plans: from the powers the receiver sends (the *sources*, e.g. a
//! postage-stamp basis), derive every power `x^1 … x^max` with ciphertext products of
//! minimal depth. Computed once per parameter set and reused for every query.

use super::{Ciphertext, Evaluator, HeError};

/// How to derive each power from the sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerPlan {
    sources: Vec<u32>,
    max: u32,
    /// `(target, a, b)`: `x^target = x^a · x^b`, in an order where `a` and `b` exist.
    steps: Vec<(u32, u32, u32)>,
    /// Multiplicative depth of each power, index = exponent (0 unused).
    depth: Vec<u32>,
}

impl PowerPlan {
    /// A plan deriving `1..=max` from `sources`: each power gets the least depth
    /// possible (a source has depth 0; `a + b` has `max(depth a, depth b) + 1`).
    pub fn new(sources: &[u32], max: u32) -> Result<Self, HeError> {
        let mut src: Vec<u32> = sources.to_vec();
        src.sort_unstable();
        src.dedup();
        if src.is_empty() || src[0] == 0 || *src.last().expect("non-empty") > max {
            return Err(HeError::Params(format!(
                "source powers {sources:?} must be within 1..={max}"
            )));
        }
        const NONE: u32 = u32::MAX;
        let m = max as usize;
        let mut depth = vec![NONE; m + 1];
        let mut how = vec![(0u32, 0u32); m + 1];
        for &s in &src {
            depth[s as usize] = 0;
        }
        // Depths only grow with fewer sources, and any power is a sum of smaller ones,
        // so one pass in increasing order finds the optimum (a + b = e with a, b < e).
        for e in 1..=m {
            if depth[e] == 0 {
                continue;
            }
            for a in 1..=e / 2 {
                let b = e - a;
                if depth[a] == NONE || depth[b] == NONE {
                    continue;
                }
                let d = depth[a].max(depth[b]) + 1;
                if d < depth[e] {
                    depth[e] = d;
                    how[e] = (a as u32, b as u32);
                }
            }
            if depth[e] == NONE {
                return Err(HeError::Params(format!(
                    "power {e} cannot be derived from sources {src:?}"
                )));
            }
        }
        let steps = (1..=m)
            .filter(|&e| depth[e] > 0)
            .map(|e| (e as u32, how[e].0, how[e].1))
            .collect();
        Ok(Self {
            sources: src,
            max,
            steps,
            depth,
        })
    }

    /// The source powers, ascending.
    pub fn sources(&self) -> &[u32] {
        &self.sources
    }

    /// Highest power derived.
    pub fn max_power(&self) -> u32 {
        self.max
    }

    /// The depth of the deepest power.
    pub fn depth(&self) -> u32 {
        self.depth[1..].iter().copied().max().unwrap_or(0)
    }

    /// Number of ciphertext products.
    pub fn products(&self) -> usize {
        self.steps.len()
    }

    /// Checks the plan: every power is a source or the product of two earlier ones,
    /// with the depth recorded. Used by tests.
    pub fn verify(&self) -> bool {
        let mut have = vec![false; self.max as usize + 1];
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
        have[1..].iter().all(|&h| h)
    }

    /// Derives all powers from the source ciphertexts (in the order of
    /// [`sources`](Self::sources)); returns `x^1 … x^max` (index 0 is `x^1`).
    pub fn evaluate(
        &self,
        ev: &Evaluator<'_>,
        sources: Vec<Ciphertext>,
    ) -> Result<Vec<Ciphertext>, HeError> {
        if sources.len() != self.sources.len() {
            return Err(HeError::Op(format!(
                "{} source ciphertexts for {} sources",
                sources.len(),
                self.sources.len()
            )));
        }
        let mut all: Vec<Option<Ciphertext>> = vec![None; self.max as usize + 1];
        for (&e, c) in self.sources.iter().zip(sources) {
            all[e as usize] = Some(c);
        }
        for &(t, a, b) in &self.steps {
            let (ca, cb) = (all[a as usize].as_ref(), all[b as usize].as_ref());
            let c = ev.mul(ca.expect("plan order"), cb.expect("plan order"))?;
            all[t as usize] = Some(c);
        }
        Ok(all
            .into_iter()
            .skip(1)
            .map(|c| c.expect("plan covers every power"))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_sources_give_log_depth() {
        for max in [1u32, 2, 3, 4, 7, 8, 9, 16, 33] {
            let p = PowerPlan::new(&[1], max).unwrap();
            assert!(p.verify());
            assert_eq!(
                p.depth(),
                32 - (max - 1).leading_zeros().min(32),
                "max {max}"
            );
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
        assert!(
            PowerPlan::new(&[2], 4).is_err(),
            "odd powers are unreachable"
        );
        assert!(PowerPlan::new(&[0, 1], 4).is_err());
        assert!(PowerPlan::new(&[9], 4).is_err());
    }
}
