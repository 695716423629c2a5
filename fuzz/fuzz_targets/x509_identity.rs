//! The identity in a peer's TLS certificate (DER), as a listener logs it and authorised
//! PSI binds credentials to it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| setwise_fuzz::x509_identity(data));
