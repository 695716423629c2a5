//! A hostile or broken peer: every case ends with an error on the honest side, never a
//! panic or a hang.

use setwise::he::HeError;
use setwise::net::{Channel, MemoryChannel, NetError, TcpChannel, TcpConfig, read_frame};
use setwise::protocols::Role;
use setwise::protocols::fhe::FheParams;
use setwise::session::{self, Hello, Input, handshake};
use setwise::wire::WireError;
use setwise::{Error, Job, Operation, Protocol};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

fn items(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("item{i}").into_bytes()).collect()
}

fn job() -> Job {
    Job::new(Protocol::Ecdh, Operation::Intersection)
}

fn config() -> TcpConfig {
    TcpConfig { max_frame: 1 << 20, io_timeout: Some(Duration::from_secs(20)), ..Default::default() }
}

/// Runs an honest `role` over TCP against `peer`, which gets the raw stream after the
/// honest side's hello has been read (so closing never resets unread data).
fn against_raw_peer(role: Role, peer: impl FnOnce(&mut TcpStream) + Send) -> Error {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            read_frame(&mut stream, 1 << 20).unwrap();
            peer(&mut stream);
            let _ = stream.shutdown(std::net::Shutdown::Write);
            let _ = std::io::copy(&mut stream, &mut std::io::sink());
        });
        let mut ch = TcpChannel::accept(&listener, config()).unwrap();
        session::run(&mut ch, &job(), role, Input::Items(&items(10))).unwrap_err()
    })
}

/// Runs an honest `role` against a peer that speaks frames through a channel end.
fn against_peer(role: Role, peer: impl FnOnce(&mut MemoryChannel) + Send) -> Error {
    let (a, b) = MemoryChannel::pair(1 << 20);
    let (mut a, mut b) = (a.with_timeout(Duration::from_secs(20)), b.with_timeout(Duration::from_secs(20)));
    std::thread::scope(|s| {
        s.spawn(move || peer(&mut b));
        session::run(&mut a, &job(), role, Input::Items(&items(10))).unwrap_err()
    })
}

fn peer_hello(ch: &mut MemoryChannel, role: Role, size: usize) {
    let hello = Hello::new("ecdh", "intersection", job().hello_params(), role, size);
    handshake(ch, &hello, u64::MAX).unwrap();
}

fn frame(len_prefix: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = len_prefix.to_le_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

#[test]
fn truncated_frame() {
    let e = against_raw_peer(Role::Receiver, |s| {
        s.write_all(&frame(100, b"only a few bytes")).unwrap();
    });
    assert!(matches!(e, Error::Net { source: NetError::Truncated { got: 16, expected: 100 }, .. }), "{e}");
}

#[test]
fn length_prefix_above_the_maximum() {
    let e = against_raw_peer(Role::Sender, |s| {
        let hello = Hello::new("ecdh", "intersection", job().hello_params(), Role::Receiver, 10).encode();
        s.write_all(&frame(hello.len() as u32, &hello)).unwrap();
        s.write_all(&frame(u32::MAX, b"")).unwrap();
    });
    assert!(matches!(e, Error::Net { source: NetError::FrameTooLarge { max: 1048576, .. }, .. }), "{e}");
}

#[test]
fn garbage_instead_of_a_hello() {
    let e = against_raw_peer(Role::Sender, |s| {
        s.write_all(&frame(12, b"GET / HTTP/1")).unwrap();
    });
    assert!(e.to_string().contains("not a setwise peer"), "{e}");
}

#[test]
fn invalid_point_is_named_and_the_peer_is_told() {
    let told = std::sync::Mutex::new(None);
    let e = against_peer(Role::Sender, |ch| {
        peer_hello(ch, Role::Receiver, 3);
        let mut chunk = vec![0x10, 3, 0, 0, 0];
        chunk.extend_from_slice(
            &setwise::crypto::ristretto::SecretScalar::random()
                .hash_and_mul(
                    &setwise::crypto::ristretto::ItemHasher::new(&setwise::crypto::dst::Domain::new(
                        "t",
                        Default::default(),
                    )),
                    &[b"a", b"b"],
                )
                .concat(),
        );
        chunk.extend_from_slice(&[0xffu8; 32]); // not a canonical encoding
        ch.send(&chunk).unwrap();
        // The sender streams its own items while it re-blinds ours, then aborts and says why.
        let err = loop {
            if let Err(e) = setwise::wire::msg::recv_message(ch, 0x11, "SenderBlinded", "test") {
                break e;
            }
        };
        *told.lock().unwrap() = Some(err.to_string());
    });
    assert!(matches!(e, Error::InvalidPoint { what: "ReceiverBlinded", index: 2 }), "{e}");
    let told = told.into_inner().unwrap().unwrap();
    assert!(told.contains("aborted") && told.contains("item 2"), "{told}");
}

#[test]
fn chunk_longer_than_announced() {
    let e = against_peer(Role::Sender, |ch| {
        peer_hello(ch, Role::Receiver, 1);
        let mut chunk = vec![0x10, 2, 0, 0, 0];
        chunk.extend_from_slice(&[0u8; 64]);
        ch.send(&chunk).unwrap();
        let _ = ch.recv();
    });
    assert!(matches!(e, Error::Malformed(_)) && e.to_string().contains("outside the agreed bound 1"), "{e}");
}

#[test]
fn chunk_with_fewer_bytes_than_its_count() {
    let e = against_peer(Role::Sender, |ch| {
        peer_hello(ch, Role::Receiver, 5);
        let mut chunk = vec![0x10, 5, 0, 0, 0];
        chunk.extend_from_slice(&[0u8; 40]);
        ch.send(&chunk).unwrap();
        let _ = ch.recv();
    });
    assert!(e.to_string().contains("ends early"), "{e}");
}

#[test]
fn wrong_message_type() {
    let e = against_peer(Role::Receiver, |ch| {
        peer_hello(ch, Role::Sender, 10);
        let _ = ch.recv(); // receiver's first chunk
        ch.send(&[0x12, 1, 0, 0, 0]).unwrap();
    });
    assert!(e.to_string().contains("expected message SenderBlinded"), "{e}");
}

#[test]
fn wrong_protocol_in_hello_fails_both_sides() {
    let (mut a, mut b) = MemoryChannel::pair(1 << 20);
    let theirs = std::thread::scope(|s| {
        let t = s.spawn(move || {
            handshake(&mut b, &Hello::new("fhe", "intersection", job().hello_params(), Role::Receiver, 1), u64::MAX)
        });
        let ours = session::run(&mut a, &job(), Role::Sender, Input::Items(&items(3))).unwrap_err();
        assert!(ours.to_string().contains("protocol: this side has ecdh, the peer has fhe"), "{ours}");
        t.join().unwrap().unwrap_err()
    });
    assert!(theirs.to_string().contains("this side has fhe, the peer has ecdh"), "{theirs}");
}

#[test]
fn peer_closing_mid_run() {
    let e = against_peer(Role::Receiver, |ch| {
        peer_hello(ch, Role::Sender, 10);
        let _ = ch.recv();
    });
    assert!(matches!(e, Error::Net { source: NetError::Closed, .. }), "{e}");
    let e = against_raw_peer(Role::Sender, |_| {});
    assert!(matches!(e, Error::Net { source: NetError::Closed, .. }), "{e}");
}

#[test]
fn announced_size_beyond_the_limit() {
    let e = against_peer(Role::Sender, |ch| {
        let hello = Hello::new("ecdh", "intersection", job().hello_params(), Role::Receiver, 0);
        let mut bytes = hello.encode();
        let at = bytes.len() - 16 - 8;
        bytes[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        ch.send(&bytes).unwrap();
        let _ = ch.recv();
    });
    assert!(e.to_string().contains("exceeds the limit"), "{e}");
}

#[test]
fn fhe_sender_refuses_garbage_ciphertexts_and_keys() {
    let fhe = Job::new(Protocol::Fhe, Operation::Intersection);
    // 10 × 10 items: the sender's first message due is the relinearisation key (tag 0x20)
    // if it derives powers, else a query ciphertext (0x21).
    let p = FheParams::choose(10, 10).unwrap();
    let key_first = p.plan().products() > 0;
    type Pin = Box<dyn Fn(&Error) -> bool>;
    let refused = |what: &'static str| -> Pin {
        Box::new(move |e| matches!(e, Error::He(HeError::Malformed { what: w, .. }) if *w == what))
    };
    let wrong_tag = |expected: &'static str, got: u8| -> Pin {
        Box::new(
            move |e| matches!(e, Error::Malformed(WireError::UnexpectedMessage { expected: x, got: g }) if *x == expected && *g == got),
        )
    };
    let cases: Vec<(Vec<u8>, Pin)> = if key_first {
        vec![
            (vec![0x20], refused("relinearisation key")),
            (vec![0x20, 9, 9, 9], refused("relinearisation key")),
            (vec![0x20; 30 << 20], refused("relinearisation key")),
            (vec![0x21, 1, 2, 3], wrong_tag("RelinKey", 0x21)),
        ]
    } else {
        vec![
            (vec![0x21], refused("Ciphertext")),
            (vec![0x21, 1, 2, 3], refused("Ciphertext")),
            (vec![0x21; 300_000], refused("Ciphertext")),
            (vec![0x20, 9, 9, 9], wrong_tag("Ciphertext", 0x20)),
        ]
    };
    for (garbage, pinned) in cases {
        let (a, b) = MemoryChannel::pair(64 << 20);
        let e = std::thread::scope(|s| {
            let mut b = b.with_timeout(Duration::from_secs(20));
            let params = fhe.hello_params();
            let g = garbage.clone();
            s.spawn(move || {
                let hello = Hello::new("fhe", "intersection", params, Role::Receiver, 10);
                handshake(&mut b, &hello, u64::MAX).unwrap();
                let _ = b.send(&g);
                let _ = b.recv();
            });
            let mut a = a.with_timeout(Duration::from_secs(20));
            session::run(&mut a, &fhe, Role::Sender, Input::Items(&items(10))).unwrap_err()
        });
        assert!(pinned(&e), "{:?}: {e}", &garbage[..garbage.len().min(4)]);
    }
}

/// A peer that sends a frame one byte at a time, each byte well within the timeout:
/// the whole frame must still arrive within it (a per-read timeout never fires).
#[test]
fn a_trickling_peer_hits_the_frame_deadline() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let trickle = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let _ = s.write_all(&frame(1000, &[]));
        for _ in 0..40 {
            std::thread::sleep(Duration::from_millis(150));
            if s.write_all(&[0]).is_err() {
                break;
            }
        }
    });
    let config = TcpConfig { io_timeout: Some(Duration::from_secs(1)), ..Default::default() };
    let mut ch = TcpChannel::accept(&listener, config).unwrap();
    let started = std::time::Instant::now();
    let e = ch.recv().unwrap_err();
    assert!(matches!(e, NetError::Timeout(_)), "{e}");
    assert!(started.elapsed() < Duration::from_secs(3), "ended after {:?}", started.elapsed());
    drop(ch);
    trickle.join().unwrap();
}

/// A hello is a few hundred bytes: a first frame announced larger is refused before
/// anything is read, whatever the channel's frame limit.
#[test]
fn an_oversized_hello_is_refused_at_once() {
    let e = against_raw_peer(Role::Sender, |s| {
        s.write_all(&frame(1 << 20, &[1; 64])).unwrap();
    });
    assert!(matches!(e, Error::Net { source: NetError::FrameTooLarge { max: 16384, .. }, .. }), "{e}");
}

/// Text a peer chooses (abort reasons, hello fields) reaches logs and terminals: control
/// and reordering characters arrive escaped and the text is cut to a bounded length.
#[test]
fn peer_text_is_escaped_and_bounded() {
    let nasty = format!("\x1b[2J\x1b]0;owned\x07\r\n\u{202e}{}", "x".repeat(10_000));
    let shown_safely = |e: &Error| {
        let s = e.to_string();
        assert!(!s.chars().any(|c| c.is_control() || c == '\u{202e}'), "{s:?}");
        assert!(s.len() < 1024, "{} bytes", s.len());
        assert!(s.contains("\\u{1b}[2J"), "{s:?}");
    };
    let e = against_peer(Role::Sender, |ch| {
        peer_hello(ch, Role::Receiver, 10);
        setwise::wire::msg::send_abort(ch, &nasty);
    });
    assert!(matches!(e, Error::PeerAborted(_)), "{e}");
    shown_safely(&e);
    let e = against_peer(Role::Sender, |ch| {
        let _ = handshake(ch, &Hello::new(&nasty[..200], "intersection", job().hello_params(), Role::Receiver, 1), 9);
    });
    assert!(matches!(e, Error::Mismatch { field: "protocol", .. }), "{e}");
    shown_safely(&e);
}
