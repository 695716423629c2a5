#![allow(unsafe_code)]
use fhe::bfv::{self, BfvParametersBuilder, Encoding};
use fhe_traits::{FheDecoder, FheDecrypter, FheEncoder, FheEncrypter, Serialize};
use rand_chacha09::ChaCha20Rng;
use rand_chacha09::rand_core::SeedableRng;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let t: u64 = args[1].parse().unwrap();
    let moduli: Vec<usize> = args[2].split(',').map(|s| s.parse().unwrap()).collect();
    let degree: usize = args[3].parse().unwrap();
    let lvl: usize = args[4].parse().unwrap(); // ciphertext level (1 = special prime)
    let n = 4096;
    let par = BfvParametersBuilder::new()
        .set_degree(n)
        .set_plaintext_modulus(t)
        .set_moduli_sizes(&moduli)
        .build_arc()
        .unwrap();
    let mut rng = ChaCha20Rng::from_seed([7; 32]);
    let sk = bfv::SecretKey::random(&par, &mut rng);
    let rk = bfv::RelinearizationKey::new_leveled(&sk, lvl, 0, &mut rng).unwrap();
    println!("relin key bytes {}", rk.to_bytes().len());
    let x: Vec<u64> = (0..n as u64).map(|i| (i * 7919 + 3) % t).collect();
    let pw = |e: u64| -> Vec<u64> {
        x.iter()
            .map(|&v| {
                let mut r = 1u128;
                for _ in 0..e {
                    r = r * v as u128 % t as u128;
                }
                r as u64
            })
            .collect()
    };
    let enc = |v: &[u64], rng: &mut ChaCha20Rng| -> bfv::Ciphertext {
        let pt = bfv::Plaintext::try_encode(v, Encoding::simd_at_level(lvl), &par).unwrap();
        sk.try_encrypt(&pt, rng).unwrap()
    };
    let a = enc(&pw(90), &mut rng);
    let b = enc(&pw(90), &mut rng);
    println!("fresh bytes {}", a.to_bytes().len());
    println!("fresh noise {}", unsafe { sk.measure_noise(&a).unwrap() });
    let depth: usize = args[5].parse().unwrap();
    let mut c = a.clone();
    let mut e = 90u64;
    if depth >= 1 {
        let _ = &a * &b;
        let t0 = Instant::now();
        c = &a * &b;
        rk.relinearizes(&mut c).unwrap();
        println!("mul+relin {:?}", t0.elapsed());
        println!("product noise {}", unsafe { sk.measure_noise(&c).unwrap() });
        e = 180;
    }
    if depth >= 2 {
        let mut d = &c * &c;
        rk.relinearizes(&mut d).unwrap();
        c = d;
        e = 360;
        println!("depth-2 noise {}", unsafe { sk.measure_noise(&c).unwrap() });
    }
    // dot with `degree` random plaintexts
    let cts: Vec<bfv::Ciphertext> = (0..degree).map(|_| c.clone()).collect();
    let pts: Vec<bfv::Plaintext> = (0..degree)
        .map(|j| {
            let v: Vec<u64> = (0..n as u64).map(|i| (i * 31 + j as u64 * 977 + 11) % t).collect();
            bfv::Plaintext::try_encode(&v, Encoding::simd_at_level(lvl), &par).unwrap()
        })
        .collect();
    let t0 = Instant::now();
    let mut r = bfv::dot_product_scalar(cts.iter(), pts.iter()).unwrap();
    println!("dot {:?}", t0.elapsed());
    println!("dot noise {}", unsafe { sk.measure_noise(&r).unwrap() });
    let want: Vec<u64> = {
        let p180 = pw(e);
        (0..n)
            .map(|i| {
                let mut s = 0u128;
                for j in 0..degree {
                    s += p180[i] as u128 * ((i as u64 * 31 + j as u64 * 977 + 11) % t) as u128;
                }
                (s % t as u128) as u64
            })
            .collect()
    };
    let lvl_last = r.max_switchable_level();
    r.switch_to_level(lvl_last).unwrap();
    println!("last-level bytes {} noise {}", r.to_bytes().len(), unsafe { sk.measure_noise(&r).unwrap() });
    let got = Vec::<u64>::try_decode(&sk.try_decrypt(&r).unwrap(), Encoding::simd()).unwrap();
    println!("correct {}", got == want);
}
