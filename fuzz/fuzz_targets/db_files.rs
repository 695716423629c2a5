//! Decoding a database directory with one file replaced.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::db_files(data));
