//! Serving a database: the coefficients encoded as plaintexts at level 0 once (their NTT
//! form makes the per-query products cheap), or kept as they are in compact mode and
//! encoded per query (4 bytes a slot instead of L·8).

use super::SenderDb;
use crate::error::{Error, Result};
use crate::he::{HeContext, HeError, PlainRows};
use rayon::prelude::*;
use std::borrow::Cow;

/// Encodes coefficient rows of N as plaintexts at level 0.
pub(super) fn encode_coefficients(ctx: &HeContext, coeffs: &[u32]) -> Result<PlainRows, HeError> {
    ctx.encode_rows(coeffs, 0)
}

impl SenderDb {
    /// Encodes every bundle's coefficients as plaintexts at level 0 (their NTT form is
    /// what makes the per-query products cheap).
    pub(super) fn encode(&mut self) -> Result<()> {
        let ctx = &self.ctx;
        self.indices.par_iter_mut().flatten().filter(|b| b.plaintexts.is_empty()).try_for_each(|bundle| {
            let coeffs = bundle.coeffs.as_ref().expect("coefficients before encoding");
            bundle.plaintexts =
                encode_coefficients(ctx, coeffs).map_err(|e| Error::params("he_params", e.to_string()))?;
            Ok(())
        })
    }

    /// The plaintexts of bundle `b` at bundle index `bi`: the matching polynomial's
    /// `B + 1`, then each label part's `B + 1`. Encoded now in compact mode.
    pub(crate) fn bundle_plaintexts(&self, bi: usize, b: usize) -> Result<Cow<'_, PlainRows>, HeError> {
        let bundle = &self.indices[bi][b];
        if !bundle.plaintexts.is_empty() {
            return Ok(Cow::Borrowed(&bundle.plaintexts));
        }
        Ok(Cow::Owned(encode_coefficients(&self.ctx, bundle.coeffs.as_deref().unwrap_or_default())?))
    }

    /// Makes a built or edited database ready to serve fast: encodes the plaintexts and
    /// drops the coefficient copies (it can then be saved only where it was saved
    /// before). Without it, each query encodes the plaintexts it uses, as in compact mode.
    pub fn prepare(&mut self) -> Result<()> {
        self.encode()?;
        self.drop_coefficients();
        self.refresh_info();
        Ok(())
    }
}
