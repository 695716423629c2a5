//! Decoding a Bloom filter from the wire.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::bloom(data));
