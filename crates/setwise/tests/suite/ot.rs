//! Oblivious transfer on its own: base OT, IKNP extension, chosen-message and one-sided
//! OT, checked against the relations they must satisfy.

use setwise::crypto::dst::SessionId;
use setwise::crypto::security::Security::{self, Malicious, SemiHonest};
use setwise::error::{Deviation, Error};
use setwise::net::MemoryChannel;
use setwise::ot::{self, Block};
use setwise::testing::{Tampering, two_sides as pair};

fn bits(n: usize, seed: u8) -> Vec<bool> {
    (0..n).map(|i| blake3::hash(&[seed, (i % 251) as u8, (i / 251) as u8]).as_bytes()[0] & 1 == 1).collect()
}

const SID: SessionId = SessionId([7; 32]);

/// The receiver's output is the sender's message of its choice and never the other one.
fn check_relation(pairs: &[[Block; 2]], got: &[Block], choices: &[bool]) {
    assert_eq!((pairs.len(), got.len()), (choices.len(), choices.len()));
    for (j, ((p, g), &c)) in pairs.iter().zip(got).zip(choices).enumerate() {
        assert_eq!(*g, p[usize::from(c)], "OT {j}");
        assert_ne!(*g, p[usize::from(!c)], "OT {j}");
    }
}

const BOTH: [Security; 2] = [SemiHonest, Malicious];

#[test]
fn base_ot_delivers_the_chosen_key() {
    for security in BOTH {
        let choices = bits(128, 1);
        let (pairs, got) = pair(
            |ch| ot::base_send(ch, SID, 128, security).unwrap(),
            |ch| ot::base_receive(ch, SID, &choices, security).unwrap(),
        );
        check_relation(&pairs, &got, &choices);
    }
}

#[test]
fn extension_at_many_sizes() {
    for security in BOTH {
        for n in [0usize, 1, 127, 128, 129, 1000, (1 << 14) + 5, 50_000] {
            let choices = bits(n, n as u8);
            let (pairs, got) = pair(
                |ch| ot::extend_send(ch, SID, n, security).unwrap(),
                |ch| ot::extend_receive(ch, SID, &choices, security).unwrap(),
            );
            check_relation(&pairs, &got, &choices);
            // Outputs look independent: no repeated messages.
            let distinct: std::collections::HashSet<Block> = pairs.iter().flatten().copied().collect();
            assert_eq!(distinct.len(), 2 * n, "n = {n}, {security:?}");
        }
    }
}

#[test]
fn all_zero_and_all_one_choices() {
    for security in BOTH {
        for c in [false, true] {
            let choices = vec![c; 300];
            let (pairs, got) = pair(
                |ch| ot::extend_send(ch, SID, 300, security).unwrap(),
                |ch| ot::extend_receive(ch, SID, &choices, security).unwrap(),
            );
            check_relation(&pairs, &got, &choices);
        }
    }
}

fn failed_check(e: &Error) -> bool {
    matches!(e, Error::PeerMisbehaved(Deviation::FailedCheck { .. }))
}

/// The malicious sender refuses a matrix damaged on the way (one bit of a row: the
/// challenges come from the transcript, so both sides' differ and the check cannot pass)
/// and damaged check values.
#[test]
fn the_malicious_extension_refuses_a_damaged_matrix_or_check() {
    let choices = bits(1000, 3);
    for tag in [0x62, 0x65] {
        let (sent, _) = pair(
            |ch| ot::extend_send(ch, SID, 1000, Malicious),
            |ch| ot::extend_receive(&mut Tampering::new(ch, tag, 0), SID, &choices, Malicious),
        );
        let e = sent.unwrap_err();
        assert!(failed_check(&e), "{e}");
        assert!(e.to_string().contains("OT extension matrix (KOS) failed its consistency check"), "{e}");
    }
}

/// An extension receiver that keeps to the messages but, for one column, uses choice 1
/// in row `row` of the matrix and 0 in the others (how it would probe bit `row` of the
/// sender's secret s); its check values follow its honest choices and rows.
fn extend_receive_cheating(ch: &mut MemoryChannel, n: usize, row: usize) -> setwise::Result<()> {
    use setwise::crypto::dst::{self, Domain};
    use setwise::crypto::prg::Prg;
    use setwise::math::gf128::Gf128;
    use setwise::ot::messages::{CorrectionChunk, KosCheck};
    use setwise::wire::msg::Message;
    let total = n + 256; // the sacrificed OTs, with choice 0 here: the cheat needs no hiding
    assert!(total <= 1 << 14, "one chunk");
    let blocks = total.div_ceil(128);
    let keys = ot::base_send(ch, SID, 128, Malicious)?;
    let mut t_rows = Vec::new();
    let mut u = Vec::new();
    for (i, [k0, k1]) in keys.iter().enumerate() {
        let (t, g1) = (Prg::new(*k0).blocks(0, blocks), Prg::new(*k1).blocks(0, blocks));
        for b in 0..blocks {
            let cheat = if i == row && b == 0 { 1 } else { 0 }; // column 0 says 1 in this row only
            u.push((t[b] ^ g1[b] ^ cheat).to_le_bytes());
        }
        t_rows.push(t);
    }
    let chunk = CorrectionChunk(u);
    chunk.send(ch, "cheating")?;
    // Column j of t: bit i is row i's bit j.
    let column = |j: usize| (0..128).fold(0u128, |acc, i| acc | (((t_rows[i][j / 128] >> (j % 128)) & 1) << i));
    let mut transcript = Domain::new(dst::OT_KOS_CHALLENGE, SID).hasher();
    transcript.update(chunk.0.as_flattened());
    let t = Prg::from_transcript(&transcript).combine(total, |j| Gf128(column(j)));
    KosCheck(Gf128::pair_to_bytes([Gf128::ZERO, t])).send(ch, "cheating")
}

/// The cheat above passes exactly when bit `row` of s is 0 (1 bit for probability 1/2,
/// as KOS allows): over 32 runs with random s, the sender catches some and not all.
#[test]
fn the_malicious_extension_catches_a_receiver_with_inconsistent_rows() {
    let mut caught = 0;
    for run in 0..32 {
        let (sent, cheat) =
            pair(|ch| ot::extend_send(ch, SID, 100, Malicious), |ch| extend_receive_cheating(ch, 100, run % 128));
        cheat.unwrap();
        if let Err(e) = sent {
            assert!(failed_check(&e), "{e}");
            caught += 1;
        }
    }
    assert!((1..32).contains(&caught), "caught {caught} of 32");
}

/// A malicious base-OT receiver's point pair must hold two valid points: the last one
/// of 2·128 damaged is named by its index.
#[test]
fn the_malicious_base_ot_refuses_an_invalid_point() {
    let choices = bits(128, 5);
    let (sent, _) = pair(
        |ch| ot::base_send(ch, SID, 128, Malicious),
        |ch| ot::base_receive(&mut Tampering::new(ch, 0x61, 0), SID, &choices, Malicious),
    );
    let e = sent.unwrap_err();
    assert!(matches!(e, Error::InvalidPoint { what: "BaseOtPoints", index: 255 }), "{e}");
}

#[test]
fn chosen_and_one_sided_messages() {
    let n = 3000;
    let len = 37;
    let choices = bits(n, 9);
    let messages: Vec<u8> = (0..n * 2 * len).map(|i| (i * 7 % 256) as u8).collect();
    let (_, got) = pair(
        |ch| {
            let pairs = ot::extend_send(ch, SID, n, SemiHonest).unwrap();
            ot::send_chosen(ch, SID, &pairs, &messages, len).unwrap();
            ot::send_one_sided(ch, SID, &pairs, &messages[..n * len], len).unwrap();
        },
        |ch| {
            let keys = ot::extend_receive(ch, SID, &choices, SemiHonest).unwrap();
            let chosen = ot::receive_chosen(ch, SID, &keys, &choices, len).unwrap();
            let one = ot::receive_one_sided(ch, SID, &keys, &choices, len).unwrap();
            (chosen, one)
        },
    );
    let (chosen, one) = got;
    for (j, &c) in choices.iter().enumerate() {
        let want = &messages[(2 * j + usize::from(c)) * len..][..len];
        assert_eq!(&chosen[j * len..(j + 1) * len], want, "OT {j}");
    }
    let expected: Vec<(usize, Vec<u8>)> = choices
        .iter()
        .enumerate()
        .filter(|(_, c)| **c)
        .map(|(j, _)| (j, messages[j * len..(j + 1) * len].to_vec()))
        .collect();
    assert_eq!(one, expected);
}
