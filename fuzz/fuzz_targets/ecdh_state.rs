//! Decoding a stored ecdh receiver state.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::ecdh_state(data));
