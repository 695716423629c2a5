//! Interpolation and multipoint evaluation over GF(2^128 − 159) (compact PSI's field), the
//! quadratic code against the O(n log² n) one:
//! `cargo run --release -p setwise --example interpolation-speed -- 10 12 14 16 20`
//! interpolates two value lists over 2^k random points and evaluates two polynomials of
//! degree 2^k at 2^k points (Horner on every thread, as the compact sender did), for each
//! k, and prints the median of three runs (the quadratic code only up to 2^14, where it
//! already takes seconds).

use rayon::prelude::*;
use setwise::math::fastpoly;
use setwise::math::fp128::{F128, Fp128};
use setwise::math::poly;
use std::time::Instant;

fn random(n: usize) -> Vec<F128> {
    let mut bytes = vec![0u8; n * 16];
    setwise::crypto::rng::fill_os(&mut bytes);
    bytes.chunks_exact(16).map(|c| F128::reduce(u128::from_le_bytes(c.try_into().expect("16 bytes")))).collect()
}

fn median(mut f: impl FnMut() -> f64) -> f64 {
    let mut t: Vec<f64> = (0..3).map(|_| f()).collect();
    t.sort_by(f64::total_cmp);
    t[1]
}

fn timed<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let t = Instant::now();
    let out = f();
    (t.elapsed().as_secs_f64(), out)
}

fn main() {
    println!("log2 n | quadratic interpolate | fast interpolate | quadratic evaluate | fast evaluate");
    for k in std::env::args().skip(1).map(|a| a.parse::<u32>().expect("a log2 size")) {
        let n = 1usize << k;
        let (xs, a, b) = (random(n), random(n), random(n));
        let slow = k <= 14;
        let cell = |s: f64| if slow { format!("{s:.3} s") } else { "—".into() };
        let qi = if slow { median(|| timed(|| poly::interpolate(Fp128, &xs, &[&a, &b])).0) } else { 0.0 };
        let fi = median(|| {
            let (t, got) = timed(|| fastpoly::interpolate(&xs, &[&a, &b]).expect("distinct points"));
            assert!(!slow || got == poly::interpolate(Fp128, &xs, &[&a, &b]).expect("distinct points"));
            t
        });
        let qe = if slow {
            median(|| {
                timed(|| {
                    xs.par_iter().map(|&x| (poly::eval(Fp128, &a, x), poly::eval(Fp128, &b, x))).collect::<Vec<_>>()
                })
                .0
            })
        } else {
            0.0
        };
        let fe = median(|| timed(|| fastpoly::evaluate(&[&a, &b], &xs)).0);
        println!("{k} | {} | {fi:.3} s | {} | {fe:.3} s", cell(qi), cell(qe));
    }
}
