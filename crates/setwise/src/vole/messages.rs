//! The messages of VOLE: streams of GF(2^128) elements, 16 bytes each.

use crate::wire::stream::Stream;

/// Noisy VOLE, receiver → sender: the 128 × t corrections `u_k[j]`.
pub const NOISY_CORRECTIONS: Stream<16> = Stream::new(0x90, "VoleNoisyCorrections");
/// PPRF, sender → receiver: per tree and level, the two masked sums of the children.
pub const PPRF_LEVEL_SUMS: Stream<16> = Stream::new(0x91, "PprfLevelSums");
/// PPRF, sender → receiver: per tree, the chosen value plus the sum of all leaves.
pub const PPRF_LEAF_SUMS: Stream<16> = Stream::new(0x92, "PprfLeafSums");
/// Malicious noisy VOLE, receiver → sender: ŷ and ẑ, the check's combinations.
pub const NOISY_CHECK: Stream<16> = Stream::new(0x98, "VoleNoisyCheck");
/// Malicious silent VOLE, receiver → sender: the seed of the sparse check's challenges
/// and x′ = Σ χ_i·e_i + y′.
pub const SPARSE_CHALLENGE: Stream<16> = Stream::new(0x99, "VoleSparseChallenge");
/// Malicious silent VOLE, sender → receiver: the 32-byte hash of its side of the check.
pub const SPARSE_ANSWER: Stream<16> = Stream::new(0x9a, "VoleSparseAnswer");
