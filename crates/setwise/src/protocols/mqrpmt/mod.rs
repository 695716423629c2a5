//! The mqRPMT framework (Chen–Zhang–Wang–Yu, *Private Set Operations from Multi-query
//! Reverse Private Membership Test*, PKC 2024): the core membership test. Operations
//! (cardinality, sum, secret shares, union, private-ID) and `--protocol mqrpmt` build on
//! it; see issue #3 for what remains.
//!
//! Roles: the *server* P1 holds Y and learns, for each of the client's items in the
//! client's order, a bit e_i = [x_i ∈ Y]; the *client* P2 holds X and learns nothing. In
//! the hello the server is the receiver (it learns the output) and the client the sender.

mod rpmt;

pub use rpmt::{LastMove, client, server};

/// Server → client: a chunk of F_k1(H(y)).
pub(crate) const TAG_SERVER_ITEMS: u8 = 0x70;
/// Client → server: a chunk of F_k2(F_k1(H(y))), shuffled (explicit-shuffle last move).
pub(crate) const TAG_SHUFFLED: u8 = 0x71;
/// Client → server: the Bloom filter of F_k2(F_k1(H(y))) (Bloom last move).
pub(crate) const TAG_FILTER: u8 = 0x72;
/// Client → server: a chunk of F_k2(H(x)), in the client's order.
pub(crate) const TAG_CLIENT_ITEMS: u8 = 0x73;
