//! Hash-based data structures: cuckoo hashing for batching items into bins ([`cuckoo`]),
//! the order-hiding Bloom filter of mqRPMT ([`bloom`]), grouping by bucket with a
//! counting sort ([`buckets`]), and matching own tags against a peer's ([`join`]).

pub mod bloom;
pub mod buckets;
pub mod cuckoo;
pub mod join;
