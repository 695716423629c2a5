//! Splitting a decrypted unbalanced label into its columns (`decode_label`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::label(data));
