//! FHE-PSI against the plain intersection, and the noise budget at the deepest chunk.

use crate::common::items;
use setwise::he::{Evaluator, HeContext, SecretKey};
use setwise::math::poly::from_roots;
use setwise::math::zp::Zp;
use setwise::protocols::fhe::{FheParams, sender::evaluate_group};
use setwise::{Job, Operation, Protocol};

fn check(sender: &[Vec<u8>], receiver: &[Vec<u8>]) {
    crate::common::check_intersection(&Job::new(Protocol::Fhe, Operation::Intersection), sender, receiver);
}

#[test]
fn edge_cases() {
    for (x, y) in crate::common::edge_cases() {
        check(&x, &y);
    }
    check(&items("a", 0..1), &items("a", 0..300));
    check(&items("a", 0..300), &items("a", 299..300));
}

#[test]
fn random_overlaps_and_unequal_sizes() {
    check(&items("x", 0..250), &items("x", 200..300));
    check(&items("x", 0..37), &items("x", 30..530));
}

#[test]
fn items_longer_than_the_hash() {
    let long: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 3_000]).collect();
    check(&long[..30], &long[10..]);
}

#[test]
fn more_receiver_items_than_one_ciphertext_holds() {
    let p = FheParams::choose(2100, 30).unwrap();
    assert!(p.receiver_cts >= 2, "{}", p.describe());
    check(&items("m", 2000..2030), &items("m", 0..2100));
}

/// At each preset's deepest allowed power (sources {1}), and at the widest chunk of
/// depth 0 (all 64 powers sent), a full chunk's result still decrypts correctly with at
/// least 10 bits of noise budget to spare.
#[test]
fn noise_budget_at_the_deepest_chunk() {
    let cases = FheParams::presets().into_iter().flat_map(|(he, max_depth)| {
        [(he.clone(), 1usize << max_depth, vec![1u32], max_depth), (he, 64, (1..=64).collect(), 0)]
    });
    for (he, degree, sources, max_depth) in cases {
        let p = FheParams::build(he.clone(), 4, degree, sources.clone(), 1, degree).unwrap();
        assert_eq!(p.plan().depth(), max_depth);
        let ctx = HeContext::new(&he).unwrap();
        let t = ctx.plain_modulus();
        let mut sk = SecretKey::generate(&ctx);
        let rk = sk.relin_key().unwrap();
        // One receiver item (4 felts), matching the chunk's last root in felt 0..3.
        let roots: Vec<Vec<u64>> =
            (0..4).map(|f| (0..degree as u64).map(|j| (j * 7919 + f * 13 + 5) % t).collect()).collect();
        let item: Vec<u64> = roots.iter().map(|r| r[degree - 1]).collect();
        let mut slots = vec![0u64; ctx.slots()];
        for k in 0..p.replicas {
            for (f, v) in item.iter().enumerate() {
                slots[(k * p.items_per_ct) * p.felts + f] = *v;
            }
        }
        let query = sources
            .iter()
            .map(|&e| {
                let v: Vec<u64> = slots.iter().map(|&x| Zp::new(t).pow(x, e as u64)).collect();
                sk.encrypt(&v).unwrap()
            })
            .collect();
        let ev = Evaluator::new(std::slice::from_ref(&rk));
        let powers = p.plan().evaluate(&ev, query).unwrap();
        let polys = vec![roots.iter().map(|r| from_roots(Zp::new(t), r)).collect::<Vec<_>>()];
        let result = evaluate_group(&ev, &ctx, &p, &polys, 0, &powers).unwrap();
        let noise = sk.noise_bits(&result).unwrap() as f64;
        let log_q: usize = he.moduli_bits.iter().sum();
        let budget = log_q as f64 - (t as f64).log2() - noise - 1.0;
        assert!(budget >= 10.0, "{}: budget {budget:.0} bits at depth {max_depth}", he.describe());
        let got = sk.decrypt(&result).unwrap();
        assert!(got[..4].iter().all(|&v| v == 0), "the matching item decrypts to zeros");
        // Every slot without a chunk holds the constant 1 times a fresh non-zero r: never zero.
        assert_eq!(p.replicas * p.items_per_ct, 1, "one item, one chunk: only slots 0..4 hold a polynomial");
        assert!(got[4..].iter().all(|&v| v != 0), "slots without a chunk decrypt to non-zero values");
        eprintln!("{}: depth {max_depth}, noise budget left {budget:.0} bits", he.describe());
    }
}
