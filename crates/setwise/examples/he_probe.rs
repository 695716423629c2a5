#![allow(unsafe_code, missing_docs)]
use fhe::bfv::*;
use fhe_traits::*;
use rand_chacha09::ChaCha20Rng;
use rand_chacha09::rand_core::SeedableRng;
use std::time::Instant;

fn main() {
    let mut rng = ChaCha20Rng::from_seed([1; 32]);
    for (n, sizes, tbits) in [(4096usize, vec![36usize, 36, 37], 18u32), (4096, vec![36, 36, 37], 20), (8192, vec![43, 43, 44, 44, 44], 20), (8192, vec![43, 43, 44, 44, 44], 24), (8192, vec![54, 54, 55, 55], 20), (8192, vec![60,60,49,49], 20)] {
        // t: a prime ≡ 1 mod 2n just below 2^tbits
        let m = 2 * n as u64;
        let mut t = ((1u64 << tbits) / m) * m + 1;
        while !is_prime(t) { t -= m; }
        let par = BfvParametersBuilder::new().set_degree(n).set_plaintext_modulus(t).set_moduli_sizes(&sizes).build_arc().unwrap();
        let sk = SecretKey::random(&par, &mut rng);
        let rk = RelinearizationKey::new(&sk, &mut rng).unwrap();
        let v: Vec<u64> = (0..n as u64).map(|i| i % t).collect();
        let pt = Plaintext::try_encode(&v, Encoding::simd(), &par).unwrap();
        let ct: Ciphertext = sk.try_encrypt(&pt, &mut rng).unwrap();
        let logq: usize = sizes.iter().sum();
        let noise = |c: &Ciphertext| unsafe { sk.measure_noise(c).unwrap() };
        println!("N={n} q={sizes:?} ({logq} bits) t={t} ({tbits} bits): fresh noise {} ct bytes {} rk bytes {}", noise(&ct), ct.to_bytes().len(), rk.to_bytes().len());
        let mut powers = vec![ct.clone()];
        let t0 = Instant::now();
        let mut muls = 0;
        for d in 1..6 {
            let prev = powers.last().unwrap();
            let mut sq = prev * prev;
            rk.relinearizes(&mut sq).unwrap();
            muls += 1;
            let dec = Vec::<u64>::try_decode(&sk.try_decrypt(&sq).unwrap(), Encoding::simd()).unwrap();
            let ok = dec.iter().zip(&v).all(|(a, b)| *a == pow(*b, 1 << d, t));
            println!("  depth {d}: noise {} correct {ok}", noise(&sq));
            powers.push(sq);
            if !ok { break; }
        }
        println!("  ct×ct+relin {:.2} ms", t0.elapsed().as_secs_f64() * 1e3 / muls as f64);
        // ct×pt after depth 2 with random plaintext
        let r: Vec<u64> = (0..n as u64).map(|i| (i * 7919 + 1) % t).collect();
        let prt = Plaintext::try_encode(&r, Encoding::simd(), &par).unwrap();
        for d in 0..powers.len().min(5) {
            let x = &powers[d] * &prt;
            let dec = Vec::<u64>::try_decode(&sk.try_decrypt(&x).unwrap(), Encoding::simd()).unwrap();
            let ok = dec.iter().zip(&v).zip(&r).all(|((a, b), c)| *a == (pow(*b, 1 << d, t) as u128 * *c as u128 % t as u128) as u64);
            println!("  depth {d} then ×pt: noise {} correct {ok}", noise(&x));
        }
        let t0 = Instant::now();
        for _ in 0..50 { let _ = &powers[0] * &prt; }
        let ctpt = t0.elapsed().as_secs_f64() * 1e3 / 50.0;
        let t0 = Instant::now();
        for _ in 0..50 { let _ = &powers[0] + &prt; }
        let ctadd = t0.elapsed().as_secs_f64() * 1e3 / 50.0;
        let t0 = Instant::now();
        for _ in 0..20 { let _ = Plaintext::try_encode(&r, Encoding::simd(), &par).unwrap(); }
        let enc = t0.elapsed().as_secs_f64() * 1e3 / 20.0;
        let t0 = Instant::now();
        for _ in 0..20 { let _c: Ciphertext = sk.try_encrypt(&prt, &mut rng).unwrap(); }
        let encr = t0.elapsed().as_secs_f64() * 1e3 / 20.0;
        let mut last = &powers[0] * &prt;
        let t0 = Instant::now();
        last.switch_to_level(last.max_switchable_level()).unwrap();
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let t0 = Instant::now();
        for _ in 0..20 { let _ = sk.try_decrypt(&last).unwrap(); }
        let dec = t0.elapsed().as_secs_f64() * 1e3 / 20.0;
        println!("  ct×pt {ctpt:.3} ms, ct+pt {ctadd:.3} ms, encode {enc:.3} ms, encrypt {encr:.3} ms, modswitch {ms:.3} ms, decrypt(last) {dec:.3} ms, last-level bytes {}, noise after switch {}", last.to_bytes().len(), noise(&last));
    }
}
fn pow(b: u64, e: u64, t: u64) -> u64 { let mut r = 1u128; for _ in 0..e { r = r * b as u128 % t as u128; } r as u64 }
fn is_prime(n: u64) -> bool { if n < 2 { return false; } let mut i = 2; while i * i <= n { if n % i == 0 { return false; } i += 1; } true }
