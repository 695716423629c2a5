//! Resuming an unfinished database build with one of its files replaced.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::build_resume(data));
