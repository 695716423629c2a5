//! Generated data for the demo and the benchmarks: e-mail-like keys with a chosen
//! overlap, and a value per item for `sum`.

use setwise::io::ItemSet;
use setwise::protocols::spec::Takes;
use setwise::session::Input;
use setwise::{Role, session::Job};

/// Bound of the generated values of `sum`: amounts in cents up to 1000.00.
pub const VALUE_BOUND: u64 = 100_000;

/// Generated addresses: the sender's `sender_size` and the receiver's `receiver_size`,
/// of which a fraction `overlap` of the smaller set is common.
pub fn sets(sender_size: usize, receiver_size: usize, overlap: f64) -> (ItemSet, ItemSet) {
    let common = ((sender_size.min(receiver_size) as f64) * overlap.clamp(0.0, 1.0)).round() as usize;
    let mut salt = [0u8; 4];
    setwise::crypto::rng::fill_os(&mut salt);
    let tag = u32::from_le_bytes(salt) % 100_000;
    let sender = (0..sender_size).map(|i| format!("user{i:07}.{tag}@example.org"));
    let receiver = (0..receiver_size).map(|i| {
        if i < common { format!("user{i:07}.{tag}@example.org") } else { format!("member{i:07}.{tag}@example.net") }
    });
    (ItemSet::from_keys(sender), ItemSet::from_keys(receiver))
}

/// A value per item for `sum` (think: purchase amounts in cents), derived from the item
/// so a check can recompute it.
pub fn values(items: &[&[u8]]) -> Vec<u64> {
    items
        .iter()
        .map(|i| u64::from_le_bytes(blake3::hash(i).as_bytes()[..8].try_into().expect("8 bytes")) % (VALUE_BOUND + 1))
        .collect()
}

/// The sender's input on generated data: its items, with values for `sum`, or its
/// database for `unbalanced`.
pub fn sender_input<'a>(
    job: &Job,
    items: &'a [&'a [u8]],
    values: &'a [u64],
    db: Option<&'a setwise::protocols::unbalanced::SenderDb>,
) -> Input<'a, &'a [u8]> {
    match (job.protocol.spec().takes(job.operation, Role::Sender), db) {
        (Takes::Database, Some(db)) => Input::Database(db),
        (Takes::Values, _) => Input::Values { items, values, bound: VALUE_BOUND },
        _ => Input::Items(items),
    }
}

/// The input of `role` on generated data (the receiver always brings its items).
pub fn input_for<'a>(
    job: &Job,
    role: Role,
    items: &'a [&'a [u8]],
    values: &'a [u64],
    db: Option<&'a setwise::protocols::unbalanced::SenderDb>,
) -> Input<'a, &'a [u8]> {
    match role {
        Role::Sender => sender_input(job, items, values, db),
        _ => Input::Items(items),
    }
}
