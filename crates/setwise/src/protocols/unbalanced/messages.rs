//! The messages of unbalanced PSI.

use super::MAX_BUNDLES_PER_INDEX;
use super::labels::{LABEL_NONCE, LabelLayout, MAX_LABEL_BYTES};
use super::params::UnbalancedParams;
use crate::error::{Deviation, Result};
use crate::he::{Ciphertext, HeContext, Trim};
use crate::protocols::he_query::{CiphertextMessage, KeyMessage};
use crate::wire::msg::Message;
use crate::wire::stream::Stream;
use crate::wire::text::{MAX_SHOWN, printable};
use crate::wire::{Reader, WireError, Writer};

/// Longest parameter JSON accepted from the sender.
const MAX_PARAMS_JSON: usize = 1 << 16;
/// Most label columns accepted from the sender.
const MAX_LABEL_COLUMNS: usize = 256;
/// Longest label column name accepted from the sender.
const MAX_COLUMN_NAME: usize = 4096;

/// Receiver → sender: the blinded items of the OPRF.
pub const OPRF_REQUEST: Stream<32> = Stream::new(0x31, "OprfRequest");
/// Sender → receiver: the evaluated blinded items.
pub const OPRF_RESPONSE: Stream<32> = Stream::new(0x32, "OprfResponse");
/// Tag of [`Key`].
pub const KEY: u8 = 0x33;
/// Tag of [`Query`].
pub const QUERY: u8 = 0x34;
/// Receiver → sender: a relinearisation key, one frame per
/// key level of [`query_levels`](super::UnbalancedParams::query_levels).
pub type Key = KeyMessage<KEY>;
/// Receiver → sender: one query ciphertext (bundle index-major, then source power).
pub type Query = CiphertextMessage<QUERY>;

/// Sender → receiver, right after the hello: the database's parameters (JSON) and label
/// layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// The parameters, checked as any parameter file.
    pub params: UnbalancedParams,
    /// The label layout of a labelled database.
    pub labels: Option<LabelLayout>,
}

impl Message for Params {
    const TAG: u8 = 0x30;
    const NAME: &'static str = "UnbalancedParams";
    type Agreed<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.bytes(self.params.to_json().as_bytes());
        match &self.labels {
            None => w.u32(0).u32(0),
            Some(l) => {
                w.u32(l.record_bytes as u32).u32(l.columns.len() as u32);
                l.columns.iter().for_each(|c| {
                    w.bytes(c.as_bytes());
                });
                w
            }
        };
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self> {
        let json = r.str("UnbalancedParams.json", MAX_PARAMS_JSON)?;
        let params = UnbalancedParams::from_json(json).map_err(|e| Deviation::UnusableParams {
            why: printable(&e.to_string().replace("invalid parameters: ", ""), MAX_SHOWN),
        })?;
        let record_bytes = r.u32("UnbalancedParams.label_record_bytes")? as usize;
        let ncols = r.count("UnbalancedParams.label_columns", MAX_LABEL_COLUMNS)?;
        let columns = (0..ncols)
            .map(|_| r.str("UnbalancedParams.label_column", MAX_COLUMN_NAME).map(|c| printable(c, MAX_SHOWN)))
            .collect::<Result<Vec<_>, _>>()?;
        let max_record = LABEL_NONCE + 2 + MAX_LABEL_BYTES;
        let labels = match record_bytes {
            0 => None,
            b if (LABEL_NONCE + 2..=max_record).contains(&b) => {
                Some(LabelLayout::new(&params, columns, b - LABEL_NONCE - 2))
            }
            b => {
                let what = "UnbalancedParams.label_record_bytes";
                return Err(WireError::Count { what, got: b as u64, bound: max_record as u64 }.into());
            }
        };
        Ok(Self { params, labels })
    }
}

/// Sender → receiver: the number of bundles at each bundle index (the results follow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultHeader(pub Vec<usize>);

impl Message for ResultHeader {
    const TAG: u8 = 0x35;
    const NAME: &'static str = "ResultHeader";
    /// The bundle indices of the parameters, and the most bundles in all (each sender
    /// item sits in at most `hash_func_count` bundles).
    type Agreed<'a> = (usize, usize);

    fn write(&self, w: &mut Writer) {
        w.u32(self.0.len() as u32);
        self.0.iter().for_each(|&c| {
            w.u32(c as u32);
        });
    }

    fn read(r: &mut Reader<'_>, (indices, max_total): (usize, usize)) -> Result<Self> {
        let n = r.u32("ResultHeader.indices")? as usize;
        if n != indices {
            return Err(WireError::Count { what: "ResultHeader.indices", got: n as u64, bound: indices as u64 }.into());
        }
        let counts: Vec<usize> =
            (0..n).map(|_| r.count("ResultHeader.bundles", MAX_BUNDLES_PER_INDEX)).collect::<Result<_, _>>()?;
        let total: usize = counts.iter().sum();
        if total > max_total.max(n) {
            let max = max_total.max(n) as u128;
            return Err(Deviation::OutOfRange { what: "result bundles", value: total as u128, min: 0, max }.into());
        }
        Ok(Self(counts))
    }
}

/// Sender → receiver: one polynomial's result for one bundle (part 0 the matching
/// polynomial, then each label part), a trimmed last-level ciphertext.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultPart {
    /// The bundle index.
    pub bundle_index: usize,
    /// 0 for the matching polynomial, then 1.. for label parts.
    pub part: usize,
    /// The trimmed ciphertext, of exactly the agreed length; [`ciphertext`](Self::ciphertext)
    /// decodes it (the receiver skips label parts of bundles where nothing matched).
    pub bytes: Vec<u8>,
}

impl Message for ResultPart {
    const TAG: u8 = 0x36;
    const NAME: &'static str = "Result";
    /// The bundle indices and the bytes of a trimmed result.
    type Agreed<'a> = (usize, usize);

    fn write(&self, w: &mut Writer) {
        w.u32(self.bundle_index as u32).u16(self.part as u16).raw(&self.bytes);
    }

    fn size_hint(&self) -> usize {
        6 + self.bytes.len()
    }

    fn read(r: &mut Reader<'_>, (indices, result_bytes): (usize, usize)) -> Result<Self> {
        let bundle_index = r.u32("Result.bundle_index")? as usize;
        if bundle_index >= indices {
            return Err(WireError::Invalid { what: "Result.bundle_index", why: "beyond the bundle indices" }.into());
        }
        let part = r.u16("Result.part")? as usize;
        if r.remaining() != result_bytes {
            return Err(
                WireError::Invalid { what: "Result.ciphertext", why: "not the length of a trimmed result" }.into()
            );
        }
        Ok(Self { bundle_index, part, bytes: r.take(result_bytes, "Result.ciphertext")?.to_vec() })
    }
}

impl ResultPart {
    /// The ciphertext, every coefficient checked against the parameters.
    pub fn ciphertext(&self, he: &HeContext, trim: Trim) -> Result<Ciphertext> {
        Ok(he.trimmed_from_wire(&self.bytes, trim, Self::NAME)?)
    }
}
