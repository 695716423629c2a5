//! Encode and decode speed of the OKVS (a building block of `vole`):
//! `cargo run --release -p setwise --example okvs-speed -- 20 3` encodes 2^20 random
//! keys three times and prints the medians.

use setwise::math::gf128::Gf128;
use setwise::okvs::{Okvs, OkvsParams};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let log_n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let reps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let n = 1usize << log_n;
    let mut bytes = vec![0u8; n * 32];
    setwise::crypto::rng::fill_os(&mut bytes);
    let keys: Vec<u128> =
        bytes[..n * 16].chunks_exact(16).map(|c| u128::from_le_bytes(c.try_into().unwrap())).collect();
    let values: Vec<Gf128> =
        bytes[n * 16..].chunks_exact(16).map(|c| Gf128::from_bytes(c.try_into().unwrap())).collect();
    let params = OkvsParams::for_items(n);
    let pairs: Vec<(u128, Gf128)> = keys.iter().copied().zip(values.iter().copied()).collect();
    let (mut enc, mut dec) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        let okvs = Okvs::encode(params, &pairs).expect("encodes");
        enc.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let got = okvs.decode_many(&keys);
        dec.push(t.elapsed().as_secs_f64());
        assert!(got == values, "every key decodes to its value");
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "okvs 2^{log_n}: {} columns (ε = 0.1), band {} bits, {} threads; encode {:.3} s, decode {:.3} s (medians of {reps})",
        params.columns,
        params.band,
        rayon::current_num_threads(),
        median(&mut enc),
        median(&mut dec)
    );
}
