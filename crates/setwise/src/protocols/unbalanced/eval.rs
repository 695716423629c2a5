//! Evaluating one bundle's matching polynomials on the derived powers.

use crate::he::{Ciphertext, Evaluator, HeContext, HeError, Plains, PowerPlan, Powers};

/// A bundle index's powers from the receiver's `sources` by `plan`, as [`evaluate`]
/// takes them for low degree `low` at `level` (the set's
/// [`eval_level`](super::UnbalancedParams::eval_level)): with Paterson–Stockmeyer, which
/// uses each power in many products, all relinearised here once, as APSI does; below
/// the sources' level (the query's) all relinearised (with that level's key, while their
/// third parts are still there) and switched to `level`, as APSI's sender switches its
/// powers before the products.
pub fn derive_powers(
    ev: &Evaluator<'_>,
    plan: &PowerPlan,
    sources: Vec<Ciphertext>,
    low: usize,
    level: usize,
) -> Result<Powers, HeError> {
    // The powers are derived where the query arrived (its level).
    let below = sources.first().is_some_and(|c| level > c.level());
    let mut powers = plan.evaluate(ev, sources)?;
    if low > 0 || below {
        powers.relinearize_all(ev)?;
    }
    if below {
        powers.switch_all_to(level)?;
    }
    Ok(powers)
}

/// `Σ_i a_i·x^i` over the bundle's coefficient plaintexts `a_0..a_B`: directly (`low` =
/// 0) as one dot product, or by Paterson–Stockmeyer with low degree `low`: for each
/// `j`, the inner sum `Σ_{i<low+1} a_{j(low+1)+i} x^i` times the high power
/// `x^{j(low+1)}`, so only `low + B/(low+1)` powers are needed. The blocks' products
/// are summed unrelinearised and relinearised once (at the powers' level, with that
/// level's key), as APSI's `eval_patstock` does. With
/// the powers already relinearised (the sender does that once per bundle index,
/// [`Powers::relinearize_all`]), that is the result's only key switch: none in the inner
/// sums, none in the products.
pub fn evaluate(
    ev: &Evaluator<'_>,
    ctx: &HeContext,
    powers: &Powers,
    coeffs: Plains<'_>,
    low: usize,
) -> Result<Ciphertext, HeError> {
    let degree = coeffs.len().checked_sub(1).ok_or_else(|| HeError::Op("no coefficients".into()))?;
    let power = |e: usize| powers.get(e as u32).ok_or_else(|| HeError::Op(format!("power {e} was not derived")));
    if low == 0 {
        let cts: Vec<&Ciphertext> = (1..=degree).map(power).collect::<Result<_, _>>()?;
        return ev.dot_rows(ctx, &cts, coeffs.slice(1..degree + 1), Some(coeffs.slice(0..1)));
    }
    let step = low + 1;
    let low_cts: Vec<&Ciphertext> = (1..=low).map(power).collect::<Result<_, _>>()?;
    // Two accumulators: 2-part terms (block 0, constant-only blocks) and 3-part products.
    let (mut two, mut three): (Option<Ciphertext>, Option<Ciphertext>) = (None, None);
    let add = |acc: &mut Option<Ciphertext>, term: Ciphertext| -> Result<(), HeError> {
        *acc = Some(match acc.take() {
            None => term,
            Some(a) => ev.add(&a, &term)?,
        });
        Ok(())
    };
    for (j, block) in coeffs.chunks(step).enumerate() {
        if block.len() == 1 {
            // Only a constant is left: a_{j·step} · x^{j·step}.
            add(&mut two, ev.dot_rows(ctx, &[power(j * step)?], block, None)?)?;
            continue;
        }
        let inner =
            ev.dot_rows(ctx, &low_cts[..block.len() - 1], block.slice(1..block.len()), Some(block.slice(0..1)))?;
        if j == 0 {
            add(&mut two, inner)?;
        } else {
            add(&mut three, ev.mul_lazy(&inner, power(j * step)?)?)?;
        }
    }
    if let Some(mut products) = three {
        ev.relinearize(&mut products)?;
        add(&mut two, products)?;
    }
    two.ok_or_else(|| HeError::Op("empty polynomial".into()))
}
