//! VOLE's pieces on their own: the noisy VOLE and the punctured PRF, checked against the
//! relations they must satisfy, and refusing damaged messages.

use setwise::crypto::dst::SessionId;
use setwise::crypto::security::Security::{Malicious, SemiHonest};
use setwise::error::{Deviation, Error};
use setwise::math::gf128::Gf128;
use setwise::net::{Channel, MemoryChannel};
use setwise::testing::Tampering;
use setwise::testing::two_sides as pair;
use setwise::vole::{noisy, pprf};

const SID: SessionId = SessionId([3; 32]);

fn elements(n: usize, seed: u8) -> Vec<Gf128> {
    (0..n)
        .map(|i| {
            let h = blake3::hash(&[seed, i as u8, (i >> 8) as u8, (i >> 16) as u8]);
            Gf128::from_bytes(h.as_bytes()[..16].try_into().unwrap())
        })
        .collect()
}

#[test]
fn noisy_vole_gives_the_relation_on_every_output() {
    for t in [1, 5, 128, 300] {
        let delta = elements(1, 1)[0];
        let ys = elements(t, 2);
        for security in [SemiHonest, Malicious] {
            let (zs_sender, zs) = pair(
                |ch| noisy::noisy_send(ch, SID, delta, t, security).unwrap(),
                |ch| noisy::noisy_receive(ch, SID, &ys, security).unwrap(),
            );
            assert_eq!((zs_sender.len(), zs.len()), (t, t));
            for j in 0..t {
                assert_eq!(zs_sender[j], zs[j] + ys[j] * delta, "t = {t}, j = {j}");
            }
            // The receiver's outputs do not depend on Δ in any visible way: all distinct.
            assert_eq!(zs.iter().collect::<std::collections::HashSet<_>>().len(), t);
        }
    }
}

fn failed_check(e: &Error) -> bool {
    matches!(e, Error::PeerMisbehaved(Deviation::FailedCheck { .. }))
}

/// The malicious sender refuses corrections damaged on the way (one bit: the challenges
/// come from the corrections, so both sides' differ) whatever Δ is, and damaged check
/// values.
#[test]
fn the_malicious_noisy_vole_refuses_damaged_corrections_or_checks() {
    let ys = elements(20, 6);
    for (tag, delta) in [(0x90, Gf128(u128::MAX)), (0x90, Gf128(0)), (0x98, Gf128(7))] {
        let (sent, _) = pair(
            |ch| noisy::noisy_send(ch, SID, delta, 20, Malicious),
            |ch| noisy::noisy_receive(&mut Tampering::new(ch, tag, 0), SID, &ys, Malicious),
        );
        let e = sent.unwrap_err();
        assert!(failed_check(&e), "{e}");
        assert!(e.to_string().contains("the noisy VOLE failed its consistency check"), "{e}");
    }
}

/// A receiver that keeps to the protocol's messages but uses another y for one bit k of
/// Δ in the first entry (the attack the check is for): the corrections it sends, its
/// check values from its honest ys.
fn noisy_receive_cheating(ch: &mut MemoryChannel, ys: &[Gf128], k: usize) -> setwise::Result<()> {
    use setwise::crypto::dst::{self, Domain};
    use setwise::crypto::prg::Prg;
    use setwise::vole::messages::{NOISY_CORRECTIONS, NoisyCheck};
    use setwise::wire::msg::Message;
    let seeds = setwise::ot::base_send(ch, SID, 128, Malicious)?;
    let mut u = Vec::new();
    let mut zs = vec![Gf128::ZERO; ys.len()];
    for (bit, [q0, q1]) in seeds.iter().enumerate() {
        let (g0, g1) = (Prg::new(*q0).blocks(0, ys.len()), Prg::new(*q1).blocks(0, ys.len()));
        for j in 0..ys.len() {
            let y = if bit == k && j == 0 { ys[j] + Gf128::ONE } else { ys[j] };
            u.push((g0[j] ^ g1[j] ^ (y * Gf128(1 << bit)).0).to_le_bytes());
            zs[j] += Gf128(g0[j]);
        }
    }
    NOISY_CORRECTIONS.send(ch, &u, "cheating")?;
    let mut h = Domain::new(dst::VOLE_NOISY_CHALLENGE, SID).hasher();
    h.update(u.as_flattened());
    let chi = Prg::from_transcript(&h);
    let (y, z) = (chi.combine(ys.len(), |j| ys[j]), chi.combine(ys.len(), |j| zs[j]));
    NoisyCheck(Gf128::pair_to_bytes([y, z])).send(ch, "cheating")
}

/// The cheat above is caught exactly when bit k of Δ is 1; when it is 0 the corrections
/// of bit k go unused and the sender's outputs are unchanged (the 1 bit for probability
/// 1/2 leakage docs/protocols/vole.md states).
#[test]
fn the_malicious_noisy_vole_catches_a_receiver_with_another_y_for_one_bit() {
    let ys = elements(21, 8); // 20 entries and the check's mask
    for k in [0, 77, 127] {
        for bit_set in [true, false] {
            let delta = Gf128(if bit_set { 1u128 << k } else { !(1u128 << k) });
            let (sent, cheat) =
                pair(|ch| noisy::noisy_send(ch, SID, delta, 20, Malicious), |ch| noisy_receive_cheating(ch, &ys, k));
            match sent {
                Err(e) => assert!(bit_set && failed_check(&e), "k = {k}, bit set: {bit_set}: {e}"),
                Ok(_) => {
                    assert!(!bit_set, "k = {k}: the cheat passed with the bit set");
                    cheat.unwrap();
                }
            }
        }
    }
}

/// A sender that breaks one GGM level sum (its last right sum, damaged in transit: the
/// PPRF has no transcript hash, so this is a consistent cheat) spoils the receiver's
/// leaves only when the receiver's path needs that sum, when bit d−1 of its last point is
/// 0: the sparse check catches it then, and a run that passes is a correct VOLE (the
/// selective failure that leaks 1 bit of a noise position with probability 1/2, as
/// Ferret allows).
#[test]
fn the_malicious_silent_vole_catches_a_broken_tree_when_it_matters() {
    use setwise::vole::{silent_receive_told, silent_send_told, untold};
    let mut caught = 0;
    for _ in 0..24 {
        let (s, r) = pair(
            |ch| silent_send_told(&mut Tampering::new(ch, 0x91, 0), SID, 1000, Malicious, &untold),
            |ch| silent_receive_told(ch, SID, 1000, Malicious, &untold),
        );
        match r {
            Err(e) => {
                assert!(failed_check(&e) && e.to_string().contains("sparse VOLE"), "{e}");
                caught += 1;
            }
            Ok(r) => {
                let (s, (a, c)) = (s.unwrap(), r.split());
                (0..1000).for_each(|i| assert_eq!(c[i], s.b[i] + a[i] * s.delta, "output {i}"));
            }
        }
    }
    assert!((1..24).contains(&caught), "caught {caught} of 24");
}

/// The malicious silent VOLE gives the relation, and each side's checks catch a peer
/// that damages the message they cover: the sender's PPRF leaf sums or its check answer
/// (the receiver refuses), the receiver's noisy check (the sender refuses).
#[test]
fn the_malicious_silent_vole_gives_the_relation_and_catches_damage() {
    use setwise::vole::{silent_receive_told, silent_send_told, untold};
    for k in [1, 1000, 70_000] {
        let (s, r) = pair(
            |ch| silent_send_told(ch, SID, k, Malicious, &untold).unwrap(),
            |ch| silent_receive_told(ch, SID, k, Malicious, &untold).unwrap(),
        );
        let (a, c) = r.split();
        for i in 0..k {
            assert_eq!(c[i], s.b[i] + a[i] * s.delta, "k = {k}, output {i}");
        }
    }
    for (tag, what) in [(0x92, "the sparse VOLE"), (0x9a, "the sparse VOLE")] {
        let (_, got) = pair(
            |ch| silent_send_told(&mut Tampering::new(ch, tag, 0), SID, 1000, Malicious, &untold).map(|_| ()),
            |ch| silent_receive_told(ch, SID, 1000, Malicious, &untold).map(|_| ()),
        );
        let e = got.unwrap_err();
        assert!(failed_check(&e) && e.to_string().contains(what), "tag {tag:#x}: {e}");
    }
    let (sent, _) = pair(
        |ch| silent_send_told(ch, SID, 1000, Malicious, &untold).map(|_| ()),
        |ch| silent_receive_told(&mut Tampering::new(ch, 0x98, 0), SID, 1000, Malicious, &untold).map(|_| ()),
    );
    let e = sent.unwrap_err();
    assert!(failed_check(&e) && e.to_string().contains("noisy VOLE"), "{e}");
}

#[test]
fn the_pprf_receiver_knows_every_leaf_but_the_punctured_one() {
    for (depth, t) in [(1, 3), (2, 1), (5, 8), (10, 16)] {
        let values = elements(t, 4);
        let points: Vec<usize> = (0..t).map(|j| (j * 7919 + 3) % (1 << depth)).collect();
        let (sender, receiver) = pair(
            |ch| pprf::pprf_send(ch, SID, depth, &values).unwrap(),
            |ch| pprf::pprf_receive(ch, SID, depth, &points).unwrap(),
        );
        let leaves = 1 << depth;
        assert_eq!((sender.len(), receiver.len()), (t * leaves, t * leaves));
        for j in 0..t {
            for i in 0..leaves {
                let (s, r) = (sender[j * leaves + i], receiver[j * leaves + i]);
                if i == points[j] {
                    assert_eq!(r, s + values[j], "depth {depth}, tree {j}: the punctured leaf");
                } else {
                    assert_eq!(r, s, "depth {depth}, tree {j}, leaf {i}");
                }
            }
        }
        // Leaves look random: no repeats within the sender's trees.
        let distinct = sender.iter().collect::<std::collections::HashSet<_>>().len();
        assert_eq!(distinct, t * leaves);
    }
}

#[test]
fn bad_parameters_and_truncated_messages_are_errors() {
    let (mut a, _b) = MemoryChannel::pair(1 << 20);
    assert!(pprf::pprf_receive(&mut a, SID, 3, &[8]).is_err(), "a point outside the tree");
    assert!(pprf::pprf_send(&mut a, SID, 0, &[Gf128::ONE]).is_err(), "depth 0");
    // A sender that stops after the OTs: the receiver gets an error, not a hang or panic.
    let (_, got) = pair(
        |ch| {
            let _ = setwise::ot::extend_send(ch, SID, 4, SemiHonest);
            ch.send(&[0x91, 1, 0, 0, 0]).unwrap(); // a level-sums chunk claiming one record, without it
        },
        |ch| pprf::pprf_receive(ch, SID, 2, &[1, 2]),
    );
    assert!(got.is_err(), "{got:?}");
}

#[test]
fn silent_vole_gives_the_relation_on_every_output() {
    for k in [1, 190, 1000, 70_000] {
        let (s, r) = pair(
            |ch| setwise::vole::silent_send(ch, SID, k).unwrap(),
            |ch| setwise::vole::silent_receive(ch, SID, k).unwrap(),
        );
        let (a, c) = r.split();
        assert_eq!((s.b.len(), a.len(), c.len()), (k, k, k));
        for i in 0..k {
            assert_eq!(c[i], s.b[i] + a[i] * s.delta, "k = {k}, output {i}");
        }
    }
}

/// Ones among the bits of `v`, overall and the worst per bit position.
fn bit_balance(v: &[Gf128]) -> (f64, f64) {
    let n = v.len() as f64;
    let mut per = [0u32; 128];
    for x in v {
        for (b, c) in per.iter_mut().enumerate() {
            *c += ((x.0 >> b) & 1) as u32;
        }
    }
    let total = per.iter().map(|&c| c as f64).sum::<f64>() / (128.0 * n);
    let worst = per.iter().map(|&c| (c as f64 / n - 0.5).abs()).fold(0.0, f64::max);
    (total, worst)
}

#[test]
fn silent_vole_outputs_look_uniform() {
    // A (the receiver's input, from the sparse noise through the code) and B (the
    // sender's) must look uniform: half their bits set, in every bit position, and no
    // repeated element. Bounds are about 6 standard deviations.
    let k = 1 << 16;
    let (s, r) = pair(
        |ch| setwise::vole::silent_send(ch, SID, k).unwrap(),
        |ch| setwise::vole::silent_receive(ch, SID, k).unwrap(),
    );
    let (a, c) = r.split();
    for (name, v) in [("A", &a), ("B", &s.b), ("C", &c)] {
        let (total, worst) = bit_balance(v);
        let sd = 0.5 / (k as f64).sqrt();
        assert!((total - 0.5).abs() < 6.0 * sd / (128f64).sqrt(), "{name}: {total} of bits set");
        assert!(worst < 6.0 * sd, "{name}: a bit position is set {worst} away from half");
        assert_eq!(v.iter().collect::<std::collections::HashSet<_>>().len(), k, "{name} repeats an element");
    }
    // Two runs give unrelated A: the noise is fresh.
    let again = pair(
        |ch| setwise::vole::silent_send(ch, SID, k).unwrap(),
        |ch| setwise::vole::silent_receive(ch, SID, k).unwrap(),
    );
    let (again_a, _) = again.1.split();
    assert_eq!(a.iter().zip(&again_a).filter(|(x, y)| x == y).count(), 0);
}

#[test]
fn a_told_silent_vole_counts_its_trees_rows_and_outputs_to_the_end() {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    let k = 70_000;
    let p = setwise::vole::SilentParams::for_outputs(k).unwrap();
    // The highest count and the total told, per unit, for each side.
    type Seen = Mutex<BTreeMap<&'static str, (u64, u64)>>;
    fn record(seen: &Seen) -> impl Fn(&'static str, u64, u64) + Sync + '_ {
        move |unit: &'static str, done: u64, total: u64| {
            let mut seen = seen.lock().unwrap();
            let e = seen.entry(unit).or_insert((0, total));
            assert_eq!(e.1, total, "{unit}: the total changed");
            assert!(done <= total, "{unit}: {done} of {total}");
            e.0 = e.0.max(done);
        }
    }
    let (sent, received) = (Seen::default(), Seen::default());
    let (tell_s, tell_r) = (record(&sent), record(&received));
    let (s, r) = pair(
        |ch| setwise::vole::silent_send_told(ch, SID, k, SemiHonest, &tell_s).unwrap(),
        |ch| setwise::vole::silent_receive_told(ch, SID, k, SemiHonest, &tell_r).unwrap(),
    );
    let (a, c) = r.split();
    for i in 0..k {
        assert_eq!(c[i], s.b[i] + a[i] * s.delta, "output {i}");
    }
    let rows = 2 * (p.positions() - k) as u64;
    let want = BTreeMap::from([
        ("GGM trees", (p.trees as u64, p.trees as u64)),
        ("code rows", (rows, rows)),
        ("outputs", (k as u64, k as u64)),
    ]);
    assert_eq!(*sent.lock().unwrap(), want);
    assert_eq!(*received.lock().unwrap(), want);
}
