//! What each protocol leaks, in plain words, for pages people read (the report page, the
//! browser demo). The wording follows the "Security" and "What leaks" sections of
//! docs/protocols/*.md, which remain the reference.

/// What a run of `protocol` leaks beyond its output, and the page documenting it; `None`
/// for a name setwise does not know (a damaged or foreign report).
pub fn leakage(protocol: &str) -> Option<Leakage> {
    let (model, text, doc) = match protocol {
        "ecdh" => (
            "semi-honest",
            "Both parties learn how many items the other holds. With intersection the receiver \
             learns which of its own items the sender also holds; with cardinality only how many. \
             The sender learns nothing about the receiver's items beyond their number. A party \
             that cheats can make the result wrong; the protocol assumes both follow it.",
            "docs/protocols/ecdh.md",
        ),
        "mqrpmt" => (
            "semi-honest",
            "Both parties learn how many items the other holds. The receiver learns which of the \
             sender's (shuffled) items are in its set without knowing which item each is, and so \
             always learns the size of the intersection, even when the operation's output is \
             only a sum, secret shares, a union or private IDs. With the Bloom-filter last move a \
             false match has probability at most 2^-40 per item.",
            "docs/protocols/mqrpmt.md",
        ),
        "fhe" => (
            "semi-honest",
            "Both parties learn how many items the other holds, and so the parameters chosen. The \
             receiver learns which of its items match, and, rarely, that some unknown sender item \
             shares a few bits of hash with one of its own. There is no circuit privacy: the noise \
             in the encrypted results depends on the sender's data, which a receiver studying it \
             could in principle exploit.",
            "docs/protocols/fhe.md",
        ),
        "unbalanced" => (
            "semi-honest sender, malicious receiver (no circuit privacy)",
            "The sender learns how many items the receiver queried and nothing about them. The \
             receiver learns which of its items are in the sender's database, the database's size \
             and its shape (bundles per index), and, rarely, that an unknown sender item shares a \
             few bits of a keyed hash with one of its own. As with fhe, there is no circuit privacy.",
            "docs/protocols/unbalanced.md",
        ),
        "compact" => (
            "malicious",
            "Both parties learn how many items the other holds. The receiver learns which of its \
             items the sender also holds. A cheating receiver can test at most as many items of \
             its choice as it announced; a cheating sender cannot make the receiver output an item \
             the sender does not hold, nor learn anything about the receiver's items.",
            "docs/protocols/compact.md",
        ),
        "authorized" => (
            "malicious client",
            "The judge learns the client's identity, how many items it asked to have signed, and \
             the items themselves. The client learns the intersection of its signed items with the \
             server's set and the server's set size. The server learns how many signed items the \
             client queried, nothing else.",
            "docs/protocols/authorized.md",
        ),
        "partial" => (
            "input-malicious client (it chooses its input, follows the protocol)",
            "The judge learns the client's identity, how many items it asked to have signed, and \
             the fraction of them it opened. The client \
             learns the intersection of its signed items with the server's set and the server's \
             set size. The server learns how many signed items the client queried, nothing else.",
            "docs/protocols/authorized.md",
        ),
        "vole" => (
            "semi-honest, or malicious with --security malicious",
            "Each party learns the other's set size. The receiver learns the intersection; the \
             sender learns nothing. The sender shuffles its tags, so their order tells the \
             receiver nothing about where the matches sit in the sender's list. Under \
             --security malicious, checks refuse a peer that deviates; a cheating receiver can \
             test up to the store's size (about 1.15 times its announced items) of its choice.",
            "docs/protocols/vole.md",
        ),
        _ => return None,
    };
    Some(Leakage { model, text, doc })
}

/// What a protocol leaks.
#[derive(Debug, Clone, Copy)]
pub struct Leakage {
    /// The security model, e.g. "semi-honest".
    pub model: &'static str,
    /// What a run reveals beyond its output, in plain words.
    pub text: &'static str,
    /// The protocol's page in the repository.
    pub doc: &'static str,
}

/// The sentence added when both parties learn the result (`--reveal both`).
pub const REVEAL_BOTH: &str = "Both parties learn the result: the receiver tells the sender, \
    which checks that every claimed row is its own but otherwise trusts the receiver's report \
    (docs/protocols/reveal.md).";
