//! Items as fixed-width OT messages: a little-endian length prefix, the item, zero
//! padding. All-zero bytes decode to "no item" (items are never empty), which is what a
//! non-member row of `shares` recombines to.

use crate::error::{Error, Result};
use crate::wire::WireError;

/// Longest item `union` and `shares` carry: 65 535 bytes.
pub const MAX_ITEM_LEN: usize = u16::MAX as usize;

/// The fixed-width encoding of a set's items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemCodec {
    width: usize,
}

impl ItemCodec {
    /// The narrowest encoding that holds every item of `items` (empty items are not
    /// items: [`crate::io::ItemSet`] skips them).
    pub fn for_items<I: AsRef<[u8]>>(items: &[I]) -> Result<Self> {
        let longest = items.iter().map(|i| i.as_ref().len()).max().unwrap_or(1).max(1);
        if longest > MAX_ITEM_LEN {
            return Err(Error::params(
                "item_length",
                format!("an item of {longest} bytes is longer than the {MAX_ITEM_LEN} bytes union and shares carry"),
            ));
        }
        Ok(Self { width: prefix_len(longest) + longest })
    }

    /// The encoding a peer announced, checked.
    pub fn from_width(width: usize) -> Result<Self> {
        let ok = (2..=2 + MAX_ITEM_LEN).contains(&width) && width != 257;
        if ok {
            Ok(Self { width })
        } else {
            Err(WireError::Invalid { what: "MqrpmtWidth", why: "not the width of any item encoding" }.into())
        }
    }

    /// Bytes per encoded item.
    pub fn width(self) -> usize {
        self.width
    }

    fn prefix(self) -> usize {
        if self.width <= 256 { 1 } else { 2 }
    }

    /// Writes `item` into `out` (exactly [`width`](Self::width) bytes).
    pub fn encode_into(self, item: &[u8], out: &mut [u8]) {
        let p = self.prefix();
        debug_assert!(!item.is_empty() && item.len() <= self.width - p && out.len() == self.width);
        out[..p].copy_from_slice(&(item.len() as u16).to_le_bytes()[..p]);
        out[p..p + item.len()].copy_from_slice(item);
        out[p + item.len()..].fill(0);
    }

    /// The item in `encoded`, `Ok(None)` for the all-zero "no item"; an error if the
    /// bytes are not an encoding (bad length, non-zero padding).
    pub fn decode(self, encoded: &[u8]) -> std::result::Result<Option<&[u8]>, WireError> {
        let bad = WireError::Invalid { what: "MqrpmtItem", why: "not a length-prefixed, zero-padded item" };
        let p = self.prefix();
        if encoded.len() != self.width {
            return Err(bad);
        }
        let mut len = [0u8; 2];
        len[..p].copy_from_slice(&encoded[..p]);
        let len = u16::from_le_bytes(len) as usize;
        if len > self.width - p || encoded[p + len..].iter().any(|&b| b != 0) {
            return Err(bad);
        }
        Ok((len > 0).then(|| &encoded[p..p + len]))
    }
}

/// Length-prefix bytes for items up to `longest` bytes.
fn prefix_len(longest: usize) -> usize {
    if longest <= 255 { 1 } else { 2 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_widths() {
        for longest in [1usize, 2, 254, 255, 256, 1000, MAX_ITEM_LEN] {
            let items = [vec![7u8; longest], vec![1u8]];
            let c = ItemCodec::for_items(&items).unwrap();
            assert_eq!(ItemCodec::from_width(c.width()).unwrap(), c, "longest {longest}");
            for item in &items {
                let mut buf = vec![0xAA; c.width()];
                c.encode_into(item, &mut buf);
                assert_eq!(c.decode(&buf).unwrap(), Some(&item[..]));
            }
            assert_eq!(c.decode(&vec![0; c.width()]).unwrap(), None);
        }
        assert!(ItemCodec::for_items(&[vec![0u8; MAX_ITEM_LEN + 1]]).is_err());
    }

    #[test]
    fn bad_widths_and_encodings_are_refused() {
        for w in [0usize, 1, 257, 2 + MAX_ITEM_LEN + 1, usize::MAX] {
            assert!(ItemCodec::from_width(w).is_err(), "width {w}");
        }
        let c = ItemCodec::from_width(9).unwrap();
        assert!(c.decode(&[9, 0, 0, 0, 0, 0, 0, 0, 0]).is_err(), "length beyond the width");
        assert!(c.decode(&[1, 5, 0, 0, 0, 0, 0, 0, 1]).is_err(), "non-zero padding");
        assert!(c.decode(&[1, 5]).is_err(), "short");
    }
}
