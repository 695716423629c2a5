//! Hash-based data structures: cuckoo hashing for batching items into bins ([`cuckoo`])
//! and the order-hiding Bloom filter of mqRPMT ([`bloom`]).

pub mod bloom;
pub mod cuckoo;
