use setwise::group::{ItemHasher, SecretScalar};
use setwise::hash::Domain;
use std::time::Instant;
fn main() {
    let items: Vec<[u8; 16]> = (0..1u32 << 16)
        .map(|i| {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&i.to_le_bytes());
            b
        })
        .collect();
    let k = SecretScalar::random();
    let h = ItemHasher::new(&Domain::new("probe", Default::default()));
    let t = Instant::now();
    let out = k.hash_and_mul(&h, &items);
    println!("hash_and_mul 2^16: {:?} ({} µs/item/core)", t.elapsed(), t.elapsed().as_micros() as f64 * 2.0 / 65536.0);
    let t = Instant::now();
    let _ = k.mul_encoded(&out).unwrap();
    println!("mul_encoded 2^16: {:?}", t.elapsed());
}
#[allow(dead_code)]
fn unused() {}
