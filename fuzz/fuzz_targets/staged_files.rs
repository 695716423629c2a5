//! Reading a staged run's part files (points, or a replayed run's frames) and stage markers from the exchange.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::staged_files(data));
