//! Labels: the sender's label columns serialised, encrypted per item under a key only a
//! receiver holding the item can derive (from its OPRF output), and cut into field
//! elements for the label polynomials.

use super::params::UnbalancedParams;
use crate::crypto::dst;
use crate::crypto::rng::fill_os;
use crate::wire::Reader;
use zeroize::{Zeroize, Zeroizing};

/// Longest label accepted (bytes, after serialising its columns).
pub const MAX_LABEL_BYTES: usize = 1024;
/// Serialises label fields: each as a u16 length and its bytes.
pub fn encode_label<S: AsRef<str>>(fields: &[S]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fields {
        let b = f.as_ref().as_bytes();
        out.extend_from_slice(&(b.len().min(u16::MAX as usize) as u16).to_le_bytes());
        out.extend_from_slice(&b[..b.len().min(u16::MAX as usize)]);
    }
    out
}

/// Splits a serialised label into `columns` fields; `None` if it does not parse.
pub fn decode_label(bytes: &[u8], columns: usize) -> Option<Vec<String>> {
    let mut r = Reader::new(bytes);
    let fields = (0..columns)
        .map(|_| {
            let n = r.u16("label field").ok()? as usize;
            String::from_utf8(r.take(n, "label field").ok()?.to_vec()).ok()
        })
        .collect::<Option<Vec<_>>>()?;
    r.finish("label").ok()?;
    Some(fields)
}

/// Nonce bytes in front of each encrypted label.
pub const LABEL_NONCE: usize = 16;

/// Label layout of a database: record size and the number of polynomial parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelLayout {
    /// Sender column names of the label fields.
    pub columns: Vec<String>,
    /// Bytes of each encrypted record: nonce, u16 length, label padded to the longest.
    pub record_bytes: usize,
    /// Label polynomials per bundle slot: ⌈record bits / (felts · felt bits)⌉.
    pub parts: usize,
}

impl LabelLayout {
    /// The layout for labels of at most `max_label` bytes under `p`.
    pub fn new(p: &UnbalancedParams, columns: Vec<String>, max_label: usize) -> Self {
        let record_bytes = LABEL_NONCE + 2 + max_label;
        let per_part = p.felt_bits() as usize * p.item_params.felts_per_item;
        Self { columns, record_bytes, parts: (record_bytes * 8).div_ceil(per_part) }
    }
}

/// Fills `out` with the keystream of the label key derived from `output`, under `nonce`.
fn label_keystream(output: &[u8; 32], nonce: &[u8], out: &mut [u8]) {
    let mut key = Zeroizing::new(blake3::derive_key(dst::UNBALANCED_LABEL_KEY, output));
    let mut h = blake3::Hasher::new_keyed(&key);
    key.zeroize();
    h.update(nonce);
    // The reader holds the keyed state too: wipe both.
    let mut reader = h.finalize_xof();
    reader.fill(out);
    reader.zeroize();
    h.zeroize();
}

/// Encrypts a label under a key derived from the item's OPRF output, with a fresh nonce:
/// `nonce ‖ (len ‖ label ‖ padding) ⊕ keystream`. Only a receiver holding the item can
/// derive the key; a label's bytes reveal nothing to anyone else.
pub(crate) fn seal_label(output: &[u8; 32], label: &[u8], layout: &LabelLayout) -> Vec<u8> {
    let (mut record, mut nonce) = (vec![0u8; layout.record_bytes], [0u8; LABEL_NONCE]);
    fill_os(&mut nonce);
    seal_label_into(output, label, &nonce, &mut record);
    record
}

/// [`seal_label`] into `record` (a layout's `record_bytes`) with `nonce`, which must be
/// fresh for every sealing under one output (a build draws them from one stream).
pub(crate) fn seal_label_into(output: &[u8; 32], label: &[u8], nonce: &[u8; LABEL_NONCE], record: &mut [u8]) {
    let (head, body) = record.split_at_mut(LABEL_NONCE);
    assert!(2 + label.len() <= body.len(), "the layout holds the label");
    head.copy_from_slice(nonce);
    label_keystream(output, nonce, body);
    let len = (label.len() as u16).to_le_bytes();
    body.iter_mut().zip(len.iter().chain(label)).for_each(|(b, x)| *b ^= x);
}

/// Decrypts a label record; `None` if the length field is impossible (not this item's).
pub(crate) fn open_label(output: &[u8; 32], record: &[u8]) -> Option<Vec<u8>> {
    let (nonce, body) = record.split_at(LABEL_NONCE);
    let mut plain = vec![0u8; body.len()];
    label_keystream(output, nonce, &mut plain);
    plain.iter_mut().zip(body).for_each(|(p, b)| *p ^= b);
    let len = u16::from_le_bytes([plain[0], plain[1]]) as usize;
    (len <= plain.len() - 2).then(|| plain[2..2 + len].to_vec())
}

/// A record's bits as `parts · felts` field elements of `felt_bits` bits (little-endian).
pub(crate) fn record_to_felts(record: &[u8], count: usize, felt_bits: u32) -> Vec<u64> {
    let mut out = vec![0; count];
    record_to_felts_into(record, felt_bits, &mut out);
    out
}

/// [`record_to_felts`] into `out` (one felt per element): each felt is a shift and a mask
/// of a 16-byte window, since a build calls this for every item of every bundle.
pub(crate) fn record_to_felts_into(record: &[u8], felt_bits: u32, out: &mut [u64]) {
    debug_assert!(felt_bits < 64);
    let mask = (1u128 << felt_bits) - 1;
    for (i, o) in out.iter_mut().enumerate() {
        let bit = i * felt_bits as usize;
        let (byte, off) = (bit / 8, bit % 8);
        let mut window = [0u8; 16];
        let rest = record.get(byte..).unwrap_or_default();
        let len = rest.len().min(16);
        window[..len].copy_from_slice(&rest[..len]);
        *o = ((u128::from_le_bytes(window) >> off) & mask) as u64;
    }
}

/// The inverse of [`record_to_felts`]: `record_bytes` bytes from the field elements.
pub(crate) fn felts_to_record(felts: &[u64], record_bytes: usize, felt_bits: u32) -> Vec<u8> {
    let mut out = vec![0u8; record_bytes];
    for (i, &v) in felts.iter().enumerate() {
        for b in 0..felt_bits as usize {
            let bit = i * felt_bits as usize + b;
            if bit / 8 < record_bytes && v >> b & 1 == 1 {
                out[bit / 8] |= 1 << (bit % 8);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip_and_other_keys_see_noise() {
        let p = UnbalancedParams::preset_for(1000, 10).unwrap().1;
        let layout = LabelLayout::new(&p, vec!["city".into()], 40);
        let (mine, other) = ([7u8; 32], [8u8; 32]);
        for label in [&b""[..], b"x", "Zürich ✓".as_bytes(), &[0xab; 40]] {
            let rec = seal_label(&mine, label, &layout);
            assert_eq!(rec.len(), layout.record_bytes);
            let felts = record_to_felts(&rec, layout.parts * p.item_params.felts_per_item, p.felt_bits());
            assert!(felts.iter().all(|&f| f < p.seal_params.plain_modulus));
            let back = felts_to_record(&felts, layout.record_bytes, p.felt_bits());
            assert_eq!(back, rec);
            assert_eq!(open_label(&mine, &back).unwrap(), label);
            assert_ne!(open_label(&other, &back), Some(label.to_vec()));
        }
    }

    /// The windowed reading against reading bit by bit, for every felt width and a
    /// record whose last felt runs past its end.
    #[test]
    fn felts_are_the_records_bits() {
        let record: Vec<u8> = (0..37u32).map(|i| (i * 97 + 13) as u8).collect();
        for bits in 1..64u32 {
            let count = (record.len() * 8).div_ceil(bits as usize) + 1;
            let bit = |i: usize| record.get(i / 8).is_some_and(|b| b >> (i % 8) & 1 == 1);
            let want: Vec<u64> = (0..count)
                .map(|f| (0..bits as usize).filter(|&b| bit(f * bits as usize + b)).map(|b| 1u64 << b).sum())
                .collect();
            assert_eq!(record_to_felts(&record, count, bits), want, "{bits} bits");
        }
    }
}
