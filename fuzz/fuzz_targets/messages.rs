//! Decoding every protocol message, decoded by its tag.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::messages(data));
