//! Hash-based data structures: cuckoo hashing for batching items into bins ([`cuckoo`]),
//! the order-hiding Bloom filter of mqRPMT ([`bloom`]), and grouping by bucket with a
//! counting sort ([`buckets`]).

pub mod bloom;
pub mod buckets;
pub mod cuckoo;
