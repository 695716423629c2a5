//! Inputs shared by the protocol tests (each test crate uses its own subset).
#![allow(dead_code)]

use proptest::prelude::*;

/// A pair of (sender, receiver) item lists.
pub type SetPair = (Vec<Vec<u8>>, Vec<Vec<u8>>);

/// `prefix` followed by each number of `range`.
pub fn items(prefix: &str, range: std::ops::Range<usize>) -> Vec<Vec<u8>> {
    range.map(|i| format!("{prefix}{i}").into_bytes()).collect()
}

/// The cases every two-party protocol must get right: empty sides, one item each (equal
/// and different), no overlap, full overlap.
pub fn edge_cases() -> Vec<SetPair> {
    vec![
        (vec![], vec![]),
        (items("a", 0..5), vec![]),
        (vec![], items("a", 0..5)),
        (items("a", 0..1), items("a", 0..1)),
        (items("a", 0..1), items("b", 0..1)),
        (items("a", 0..100), items("b", 0..100)),
        (items("a", 0..100), items("a", 0..100)),
    ]
}

/// `count` items of `len` bytes and `count` short binary items (with 0x00 and 0xff),
/// overlapping in part.
pub fn binary_and_long(count: u8, len: usize) -> SetPair {
    let long: Vec<Vec<u8>> = (0..count).map(|i| vec![i; len]).collect();
    let bin: Vec<Vec<u8>> = (0..count).map(|i| vec![0, i, 0xff]).collect();
    let half = usize::from(count / 2);
    ([long.clone(), bin[..half].to_vec()].concat(), [long[10.min(long.len())..].to_vec(), bin].concat())
}

/// Two sets of short lowercase strings around a shared part (up to 80 items each).
pub fn overlapping_sets() -> impl Strategy<Value = SetPair> {
    let set = |max| prop::collection::btree_set("[a-z]{1,6}", 0..max);
    (set(20), set(60), set(60)).prop_map(|(shared, xs, ys)| {
        let bytes = |s: &std::collections::BTreeSet<String>| -> Vec<Vec<u8>> {
            shared.union(s).map(|v| v.clone().into_bytes()).collect()
        };
        (bytes(&xs), bytes(&ys))
    })
}

/// The protobuf layout of `fhe` 0.1's keys and polynomials, to craft hostile ones.
pub mod fhe_proto {
    /// A polynomial (fhe-math `Rq`): representation 1 power basis, 2 NTT, 3 NTT-Shoup.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Rq {
        #[prost(int32, tag = "1")]
        pub representation: i32,
        #[prost(uint32, tag = "2")]
        pub degree: u32,
        #[prost(bytes = "vec", tag = "3")]
        pub coefficients: Vec<u8>,
        #[prost(bool, tag = "4")]
        pub allow_variable_time: bool,
    }

    /// A key-switching key.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeySwitchingKey {
        #[prost(bytes = "vec", repeated, tag = "1")]
        pub c0: Vec<Vec<u8>>,
        #[prost(bytes = "vec", repeated, tag = "2")]
        pub c1: Vec<Vec<u8>>,
        #[prost(bytes = "vec", tag = "3")]
        pub seed: Vec<u8>,
        #[prost(uint32, tag = "4")]
        pub ciphertext_level: u32,
        #[prost(uint32, tag = "5")]
        pub ksk_level: u32,
        #[prost(uint32, tag = "6")]
        pub log_base: u32,
    }

    /// A relinearisation key.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RelinearizationKey {
        #[prost(message, optional, tag = "1")]
        pub ksk: Option<KeySwitchingKey>,
    }

    /// `key` (a serialised relinearisation key) with `edit` applied to its protobuf.
    pub fn edit_key(key: &[u8], edit: impl FnOnce(&mut KeySwitchingKey)) -> Vec<u8> {
        use prost::Message;
        let mut rk = RelinearizationKey::decode(key).unwrap();
        edit(rk.ksk.as_mut().unwrap());
        rk.encode_to_vec()
    }

    /// A c0 polynomial of `ksk` re-marked with another representation.
    pub fn remark(ksk: &mut KeySwitchingKey, index: usize, representation: i32) {
        use prost::Message;
        let mut rq = Rq::decode(&ksk.c0[index][..]).unwrap();
        rq.representation = representation;
        ksk.c0[index] = rq.encode_to_vec();
    }
}
