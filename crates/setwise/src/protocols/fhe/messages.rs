//! The messages of FHE-PSI: the HE query of [`he_query`](crate::protocols::he_query)
//! under this protocol's tags, and the results.

use crate::protocols::he_query::{CiphertextMessage, KeyMessage};

/// Tag of [`Key`].
pub const KEY: u8 = 0x20;
/// Tag of [`Query`].
pub const QUERY: u8 = 0x21;
/// Tag of [`Result`].
pub const RESULT: u8 = 0x22;

/// Receiver → sender: the relinearisation key (only when the sender derives powers).
pub type Key = KeyMessage<KEY>;
/// Receiver → sender: one query ciphertext at level 0 (receiver ciphertext-major, then
/// source power).
pub type Query = CiphertextMessage<QUERY>;
/// Sender → receiver: one result ciphertext at the last level (receiver
/// ciphertext-major, then group).
pub type Result = CiphertextMessage<RESULT>;
