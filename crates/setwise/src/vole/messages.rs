//! The messages of VOLE: streams of GF(2^128) elements, 16 bytes each.

use crate::wire::msg::fixed_message;
use crate::wire::stream::Stream;

/// Noisy VOLE, receiver → sender: the 128 × t corrections `u_k[j]`.
pub const NOISY_CORRECTIONS: Stream<16> = Stream::new(0x90, "VoleNoisyCorrections");
/// PPRF, sender → receiver: per tree and level, the two masked sums of the children.
pub const PPRF_LEVEL_SUMS: Stream<16> = Stream::new(0x91, "PprfLevelSums");
/// PPRF, sender → receiver: per tree, the chosen value plus the sum of all leaves.
pub const PPRF_LEAF_SUMS: Stream<16> = Stream::new(0x92, "PprfLeafSums");

fixed_message!(
    /// Malicious noisy VOLE, receiver → sender: ŷ then ẑ, the check's combinations.
    NoisyCheck,
    0x98,
    "VoleNoisyCheck",
    32
);

fixed_message!(
    /// Malicious silent VOLE, receiver → sender: the seed of the sparse check's
    /// challenges, then x′ = Σ χ_i·e_i + y′.
    SparseChallenge,
    0x99,
    "VoleSparseChallenge",
    32
);

fixed_message!(
    /// Malicious silent VOLE, sender → receiver: the hash of its side of the check.
    SparseAnswer,
    0x9a,
    "VoleSparseAnswer",
    32
);
