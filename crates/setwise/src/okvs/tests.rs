use super::*;
use rand::RngExt;

fn random_pairs(n: usize) -> (Vec<u128>, Vec<Gf128>) {
    let mut rng = rand::rng();
    ((0..n).map(|_| rng.random()).collect(), (0..n).map(|_| Gf128(rng.random())).collect())
}

fn zip(keys: &[u128], values: &[Gf128]) -> Vec<(u128, Gf128)> {
    keys.iter().copied().zip(values.iter().copied()).collect()
}

#[test]
fn every_key_decodes_to_its_value() {
    for n in [1, 2, 10, 1000, 20_000, 3 * BIN_ITEMS + 5] {
        let (keys, values) = random_pairs(n);
        let params = OkvsParams::for_items(n);
        let okvs = Okvs::encode(params, &zip(&keys, &values)).unwrap();
        assert_eq!(okvs.columns().len(), params.columns);
        assert_eq!(okvs.decode_many(&keys), values, "n = {n}");
        assert_eq!(okvs.decode(keys[0]), values[0]);
    }
}

#[test]
fn free_columns_are_random_and_conflicts_are_refused() {
    let (keys, values) = random_pairs(100);
    let params = OkvsParams::for_items(100);
    let (a, b) =
        (Okvs::encode(params, &zip(&keys, &values)).unwrap(), Okvs::encode(params, &zip(&keys, &values)).unwrap());
    assert_ne!(a.columns(), b.columns(), "fresh seeds and random free columns");
    // One key with two values has no solution under any seed.
    let mut dup_keys = keys.clone();
    dup_keys.push(keys[3]);
    let mut dup_values = values.clone();
    dup_values.push(values[3] + Gf128::ONE);
    assert_eq!(Okvs::encode(params, &zip(&dup_keys, &dup_values)), Err(Unsolvable));
}

#[test]
fn a_store_from_parts_must_have_its_agreed_shape() {
    let (keys, values) = random_pairs(50);
    let params = OkvsParams::for_items(50);
    let okvs = Okvs::encode(params, &zip(&keys, &values)).unwrap();
    let again = Okvs::from_parts(*okvs.seed(), params, okvs.columns().to_vec()).unwrap();
    assert_eq!(again.decode_many(&keys), values);
    let short = okvs.columns()[..params.columns - 1].to_vec();
    assert!(Okvs::from_parts(*okvs.seed(), params, short).is_err());
    let wide = OkvsParams { band: MAX_BAND + 1, ..params };
    assert!(Okvs::from_parts(*okvs.seed(), wide, okvs.columns().to_vec()).is_err());
    for bins in [0, 7, params.columns] {
        let odd = OkvsParams { bins, ..params };
        assert!(Okvs::from_parts(*okvs.seed(), odd, okvs.columns().to_vec()).is_err(), "{bins} bins");
    }
}

/// Failures of `tries` encodings of the same `n` keys with `w`-bit bands (ε = 0.1).
fn failures(n: usize, w: usize, tries: usize) -> usize {
    let (keys, values) = random_pairs(n);
    let params = OkvsParams { columns: (n as f64 * 1.1).ceil() as usize, band: w, bins: 1 };
    (0..tries)
        .filter(|&t| {
            let mut seed = [9u8; 16];
            seed[..8].copy_from_slice(&(t as u64).to_le_bytes());
            encode_with(params, &seed, &zip(&keys, &values)).is_err()
        })
        .count()
}

#[test]
fn narrow_bands_fail_at_most_as_often_as_the_papers_fit_says() {
    // RB-OKVS's fit at n = 2^16, ε = 0.1: failure 2^-(0.2740·w − 11.61); a smaller store
    // fails less often. Measured here at n = 2^12 (400 tries): w = 45 about 2^-4.5,
    // w = 65 about 2^-8.6, against the fit's 2^-0.7 and 2^-6.2.
    let fit = |w: f64| 2f64.powf(-(0.2740 * w - 11.61));
    let (narrow, wide) = (failures(1 << 12, 45, 400), failures(1 << 12, 65, 400));
    assert!(narrow > 0, "a 45-bit band must fail sometimes: the check for conflicts works");
    assert!(narrow as f64 / 400.0 <= fit(45.0), "{narrow}/400");
    assert!(wide as f64 / 400.0 <= 2.0 * fit(65.0), "{wide}/400");
    assert!(wide < narrow);
}

#[test]
fn bins_split_a_large_store_and_decode_like_one_key_at_a_time() {
    let n = 5 * BIN_ITEMS;
    let (keys, values) = random_pairs(n);
    let params = OkvsParams::for_items(n);
    assert_eq!((params.bins, params.columns % params.bins), (5, 0));
    assert!(params.columns < n * 13 / 10, "{} columns for {n} keys", params.columns);
    let okvs = Okvs::encode(params, &zip(&keys, &values)).unwrap();
    let many = okvs.decode_many(&keys);
    assert_eq!(many, values);
    assert!(keys.iter().zip(&values).step_by(97).all(|(k, v)| okvs.decode(*k) == *v));
    // Keys not encoded decode to values unrelated to the encoded ones.
    let (others, _) = random_pairs(1000);
    let stray = okvs.decode_many(&others);
    assert!(stray.iter().all(|v| !values.contains(v)));
}

#[test]
fn values_given_a_group_at_a_time_encode_and_decode_as_pairs_do() {
    // A value that is a function of its key, computed per group, as the VOLE OPRF does.
    let value = |k: u128| Gf128(k.rotate_left(17) ^ 0x5555);
    for n in [1, 1000, 3 * BIN_ITEMS + 5] {
        let (keys, _) = random_pairs(n);
        let params = OkvsParams::for_items(n);
        let groups = std::sync::atomic::AtomicUsize::new(0);
        let okvs = Okvs::encode_by(
            params,
            n,
            |i| keys[i],
            |group, ks, out| {
                groups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                for ((o, &i), &k) in out.iter_mut().zip(group).zip(ks) {
                    assert_eq!(keys[i as usize], k, "a group's keys are those of its indices");
                    *o = value(k);
                }
            },
        )
        .unwrap();
        // One group a bin (more if a seed failed, with probability 2^-40).
        assert!(groups.into_inner() >= params.bins);
        let want: Vec<Gf128> = keys.iter().map(|&k| value(k)).collect();
        assert_eq!(okvs.decode_many(&keys), want, "n = {n}");
        let (got, order) = okvs.decode_groups(
            n,
            |i| keys[i],
            |group, ks, values, out: &mut [(u32, Gf128)]| {
                for (((o, &i), &k), &v) in out.iter_mut().zip(group).zip(ks).zip(values) {
                    assert_eq!(keys[i as usize], k);
                    *o = (i, v);
                }
            },
            |_| {},
        );
        assert!(got.iter().zip(&order).all(|(&(i, v), &j)| i == j && v == want[i as usize]));
    }
}
