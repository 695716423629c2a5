//! Decoding HE relinearisation keys and ciphertexts.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::he_wire(data));
