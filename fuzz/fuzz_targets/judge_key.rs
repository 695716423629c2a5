//! A judge public key from hex text (`judge.pub`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::judge_key_hex(data));
