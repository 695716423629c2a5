//! Decoding a stream of length-prefixed frames.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::frames(data));
