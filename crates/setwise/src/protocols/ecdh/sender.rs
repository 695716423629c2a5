//! The DH-PSI sender.

use super::{TAG_DOUBLE_BLINDED, TAG_RECEIVER_BLINDED, TAG_SENDER_BLINDED, item_hasher};
use crate::error::{Error, Result};
use crate::group::{Encoded, SecretScalar};
use crate::net::Channel;
use crate::protocols::Operation;
use crate::protocols::chunks::{recv_all, send_records};
use crate::rng::shuffle;
use crate::session::{Report, Session};

/// Runs the sender's side on its distinct `items`. The sender learns nothing.
pub fn sender<I: AsRef<[u8]> + Sync>(
    ch: &mut impl Channel,
    session: &Session,
    op: Operation,
    items: &[I],
    report: &mut Report,
) -> Result<()> {
    let key = SecretScalar::random();
    let hasher = item_hasher(session);
    let own = report.phase("blind own items", ch, |_| {
        let mut own = key.hash_and_mul(&hasher, items);
        shuffle(&mut own);
        own
    });
    let blinded: Vec<Encoded> = report.phase("receive receiver items", ch, |ch| {
        recv_all(ch, TAG_RECEIVER_BLINDED, "ReceiverBlinded", session.receiver_size(), "receiving receiver items")
    })?;
    report.phase("re-blind and send", ch, |ch| {
        std::thread::scope(|s| {
            // Re-blinding the receiver's items overlaps sending our own.
            let doubled = s.spawn(|| key.mul_encoded(&blinded));
            send_records(ch, TAG_SENDER_BLINDED, &own, "sending own items")?;
            let mut doubled = doubled
                .join()
                .expect("re-blinding does not panic")
                .map_err(|index| Error::InvalidPoint { what: "ReceiverBlinded", index })?;
            if op == Operation::Cardinality {
                shuffle(&mut doubled);
            }
            send_records(ch, TAG_DOUBLE_BLINDED, &doubled, "sending re-blinded receiver items")
        })
    })
}
