//! A bundle's coefficients: interpolated anew from its bins, or edited point by point
//! (O(B) per point and polynomial) when only a few items changed.

use super::super::Digest;
use super::super::labels::record_to_felts_into;
use super::super::locate;
use super::super::params::UnbalancedParams;
use super::Edit;
use super::Labels;
use crate::math::poly::{add_point, from_roots, interpolate_over, remove_point};
use crate::math::zp::Zp;

/// Interpolates a bundle anew: each slot's matching polynomial ∏(x − y_f), and for a
/// labelled database its label polynomials through (y_f, label felt); `None` if two
/// items of a bin share a field element (placement rules it out).
pub(super) fn interpolate_bundle(
    p: &UnbalancedParams,
    parts: usize,
    bins: &[Vec<u32>],
    items: &[Digest],
    labels: &Option<Labels>,
) -> Option<Vec<u32>> {
    let (n, k, b, t) = (
        p.seal_params.poly_modulus_degree,
        p.item_params.felts_per_item,
        p.table_params.max_items_per_bin,
        p.seal_params.plain_modulus,
    );
    let fb = p.felt_bits();
    let zp = Zp::new(t);
    let mut coeffs = vec![0u32; (1 + parts) * (b + 1) * n];
    let (mut bins_buf, mut felts, mut lf) = (Vec::new(), Vec::new(), vec![0; parts * k]);
    let mut roots: Vec<Vec<u64>> = vec![Vec::with_capacity(b); k];
    // values[f][part][j]: felt f of part `part` of the label of the bin's j-th item.
    let mut values: Vec<Vec<Vec<u64>>> = vec![vec![Vec::with_capacity(b); parts]; k];
    for (lb, ids) in bins.iter().enumerate() {
        roots.iter_mut().for_each(Vec::clear);
        values.iter_mut().flatten().for_each(Vec::clear);
        for &id in ids {
            locate(p, &items[id as usize], &mut bins_buf, &mut felts);
            for f in 0..k {
                roots[f].push(felts[f]);
            }
            if let Some(l) = labels {
                record_to_felts_into(l.record(id), fb, &mut lf);
                for (part, chunk) in lf.chunks(k).enumerate() {
                    for f in 0..k {
                        values[f][part].push(chunk[f]);
                    }
                }
            }
        }
        for (f, r) in roots.iter().enumerate() {
            let slot = lb * k + f;
            let m = from_roots(zp, r);
            for (i, &c) in m.iter().enumerate() {
                coeffs[i * n + slot] = c as u32;
            }
            if parts > 0 {
                let ys: Vec<&[u64]> = values[f].iter().map(Vec::as_slice).collect();
                // Distinct points: a bundle bin never holds two equal felts (see `place`,
                // and the manifest check on load).
                let polys = interpolate_over(zp, r, &m, &ys).ok()?;
                for (part, poly) in polys.iter().enumerate() {
                    for (i, &c) in poly.iter().enumerate() {
                        coeffs[((1 + part) * (b + 1) + i) * n + slot] = c as u32;
                    }
                }
            }
        }
    }
    Some(coeffs)
}

/// Applies a bundle's edits to its coefficients point by point, grouped by bin (in
/// order within a bin). `None` if an edit does not fit the points the coefficients hold
/// (then the bundle is interpolated anew).
pub(super) fn apply_edits(p: &UnbalancedParams, parts: usize, edits: &[Edit], coeffs: &mut [u32]) -> Option<()> {
    let (n, k, rows, t) = (
        p.seal_params.poly_modulus_degree,
        p.item_params.felts_per_item,
        p.table_params.max_items_per_bin + 1,
        p.seal_params.plain_modulus,
    );
    let zp = Zp::new(t);
    let mut order: Vec<usize> = (0..edits.len()).collect();
    order.sort_by_key(|&i| edits[i].bin);
    let (mut cols, mut ys, mut scratch) = (vec![0u64; (1 + parts) * rows], Vec::new(), Vec::new());
    for group in order.chunk_by(|&a, &b| edits[a].bin == edits[b].bin) {
        for f in 0..k {
            let slot = edits[group[0]].bin as usize * k + f;
            for (j, c) in cols.iter_mut().enumerate() {
                *c = coeffs[j * n + slot] as u64;
            }
            let (roots, rest) = cols.split_at_mut(rows);
            let mut polys: Vec<&mut [u64]> = rest.chunks_mut(rows).collect();
            for e in group.iter().map(|&i| &edits[i]) {
                if e.add {
                    ys.clear();
                    ys.extend((0..parts).map(|part| e.values[part * k + f]));
                    add_point(zp, roots, &mut polys, e.felts[f], &ys, &mut scratch)?;
                } else {
                    remove_point(zp, roots, &mut polys, e.felts[f], &mut scratch)?;
                }
            }
            for (j, &c) in cols.iter().enumerate() {
                coeffs[j * n + slot] = c as u32;
            }
        }
    }
    Some(())
}
