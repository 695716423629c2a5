//! The unbalanced noise model against measured noise: for every preset, a bundle of full
//! degree evaluated on real source powers stays below the model's noise at level 0 and
//! at the last level, and its trimmed result decrypts exactly.

use setwise::he::{Evaluator, HeContext, SecretKey};
use setwise::math::zp::Zp;
use setwise::protocols::unbalanced::UnbalancedParams;
use setwise::protocols::unbalanced::params::PRESETS;

#[test]
fn the_noise_model_bounds_measured_noise_for_every_preset() {
    for (name, json) in PRESETS {
        let p = UnbalancedParams::from_json(json).unwrap();
        let (model, model_last) = p.noise_bits().unwrap();
        let ctx = HeContext::new(&p.he()).unwrap();
        let t = ctx.plain_modulus();
        let n = ctx.slots();
        let mut sk = SecretKey::generate(&ctx);
        let rk = sk.relin_key().unwrap();
        let ev = Evaluator::new(Some(&rk));
        let plan = p.plan().unwrap();
        let x: Vec<u64> = (0..n as u64).map(|i| (i * 7919 + 13) % t).collect();
        let sources = plan
            .sources()
            .iter()
            .map(|&e| sk.encrypt(&x.iter().map(|&v| Zp::new(t).pow(v, e as u64)).collect::<Vec<_>>()).unwrap())
            .collect();
        let powers = plan.evaluate(&ev, sources).unwrap();
        // A degree-B polynomial with coefficients spread over F_t in every slot.
        let b = p.table_params.max_items_per_bin;
        let coeffs: Vec<Vec<u64>> =
            (0..=b as u64).map(|j| (0..n as u64).map(|i| (i * 31 + j * 977 + 11) % t).collect()).collect();
        let pts: Vec<_> = coeffs.iter().map(|c| ctx.encode(c, 0).unwrap()).collect();
        let cts: Vec<_> = (1..=b as u32).map(|e| powers.get(e).unwrap()).collect();
        let mut r = ev.dot_plain(&cts, &pts[1..], Some(&pts[0])).unwrap();
        let measured = sk.noise_bits(&r).unwrap() as f64;
        r.mod_switch_to_last().unwrap();
        let measured_last = sk.noise_bits(&r).unwrap() as f64;
        eprintln!("{name}: noise {measured} (model {model:.1}), last level {measured_last} (model {model_last:.1})");
        assert!(measured <= model && measured_last <= model_last, "{name}: the model underestimates the noise");
        let trim = ctx.result_trim();
        let back = ctx.trimmed_from_wire(&r.to_trimmed_bytes(&ctx, trim).unwrap(), trim, "result").unwrap();
        let got = sk.decrypt(&back).unwrap();
        for i in (0..n).step_by(97) {
            let want = (0..=b).rev().fold(0u128, |acc, j| (acc * x[i] as u128 + coeffs[j][i] as u128) % t as u128);
            assert_eq!(got[i] as u128, want, "{name}: slot {i}");
        }
    }
}
