//! Report JSON as `setwise report` reads it, the page built from it and its shareable copy.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::report(data));
