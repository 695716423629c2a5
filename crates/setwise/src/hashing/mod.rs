//! Hash tables for batching items into bins: cuckoo hashing (one bin per item).

pub mod cuckoo;
