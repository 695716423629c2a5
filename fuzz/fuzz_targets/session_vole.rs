//! An honest vole party (selected by the first byte) against a scripted hostile peer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static CASES: OnceLock<Vec<setwise_fuzz::Case>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let cases = CASES.get_or_init(|| setwise_fuzz::warm_up("vole"));
    setwise_fuzz::session(cases, data);
});
