//! Homomorphic-encryption failures (the `he` block's vocabulary).

/// An HE failure: bad parameters, or a ciphertext that does not fit them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeError {
    /// A parameter is invalid; the message names the field.
    #[error("HE parameters: {0}")]
    Params(String),
    /// A ciphertext or key from the peer does not decode under the agreed parameters.
    #[error("{what} does not fit the agreed HE parameters: {why}")]
    Malformed {
        /// What was being decoded.
        what: &'static str,
        /// Why it was refused.
        why: String,
    },
    /// An operation failed inside the HE library.
    #[error("HE operation failed: {0}")]
    Op(String),
}
