"""DH-PSI message by message, and each failure as the right exception type."""

from __future__ import annotations

import pickle
import socket
import subprocess
import threading
from pathlib import Path

import pytest

import setwise
from conftest import free_port, pair

X = [f"x{i}" for i in range(100)]
Y = [f"x{i}" for i in range(50, 170)]


def test_steps_in_one_process_with_a_pickled_state() -> None:
    for op, want in [("intersection", list(range(50))), ("cardinality", 50)]:
        state, request = setwise.EcdhReceiver.request(setwise.keys(Y), op)
        state = pickle.loads(pickle.dumps(state))  # e.g. to another process
        response = setwise.ecdh_respond(setwise.keys(X), request, op)
        assert state.finish(response) == want
        with pytest.raises(setwise.InputError, match="already finished"):
            state.finish(response)


def test_steps_refuse_damaged_or_mismatched_messages() -> None:
    state, request = setwise.EcdhReceiver.request(setwise.keys(Y))
    with pytest.raises(setwise.Error, match="operation"):
        setwise.ecdh_respond(setwise.keys(X), request, "cardinality")
    with pytest.raises(setwise.PeerError):
        setwise.ecdh_respond(setwise.keys(X), request[:-3])
    response = setwise.ecdh_respond(setwise.keys(X), request)
    with pytest.raises(setwise.PeerError):
        state.finish(response[:40])
    assert state.finish(response) == list(range(50)), "a damaged response leaves the state usable"
    with pytest.raises(setwise.PeerError):
        setwise.EcdhReceiver.from_bytes(b"\x01\x01")


def test_errors_have_their_types() -> None:
    with pytest.raises(setwise.InputError, match="unknown protocol"):
        setwise.receiver(Y, "nope", connect="127.0.0.1:1")
    with pytest.raises(setwise.InputError, match="not a loopback address"):
        setwise.receiver(Y, connect="192.0.2.1:7000")
    with pytest.raises(setwise.InputError, match="has no operation sum"):
        setwise.receiver(Y, "ecdh", "sum", connect="127.0.0.1:1")
    with pytest.raises(setwise.NetworkError, match="connecting"):
        setwise.receiver(Y, connect=free_port(), connect_timeout=0.3)
    # Both parties see the mismatch.
    with pytest.raises(setwise.PeerError, match="operation"):
        pair(
            lambda a: setwise.sender(X, listen=a),
            lambda a: setwise.receiver(Y, op="cardinality", connect=a),
        )


def test_a_hostile_peer_is_a_peer_error() -> None:
    # A listener that answers the hello with a frame claiming 1 GiB. (A hostile peer
    # that connects to a listener without a hello is refused there and the listener
    # waits on: test_a_server_keeps_serving_after_a_bad_client.)
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def hostile() -> None:
        conn, _ = server.accept()
        conn.recv(1 << 16)
        conn.sendall((1 << 30).to_bytes(4, "little") + b"junk")  # a 1 GiB frame
        conn.close()

    t = threading.Thread(target=hostile)
    t.start()
    with pytest.raises((setwise.PeerError, setwise.NetworkError), match="frame"):
        setwise.receiver(Y, connect=f"127.0.0.1:{port}", timeout=10)
    t.join(timeout=30)
    server.close()


def test_mutual_tls(tmp_path: Path, setwise_cli: Path) -> None:
    pki = tmp_path / "pki"
    subprocess.run([str(setwise_cli), "tls", "init", str(pki), "--names", "alice,bob"], check=True)
    alice = setwise.Tls(
        cert=pki / "alice.pem", key=pki / "alice.key", ca=pki / "ca.pem", peer_name="bob"
    )
    bob = setwise.Tls(
        cert=pki / "bob.pem", key=pki / "bob.key", ca=pki / "ca.pem", server_name="alice"
    )
    s, r = pair(
        lambda a: setwise.sender(X, listen=a, tls=alice),
        lambda a: setwise.receiver(Y, connect=a, tls=bob),
    )
    assert r.indices == list(range(50))
    assert r.report["peer_identity"] == "alice" and s.report["peer_identity"] == "bob"
    # A receiver without the CA's trust fails on both sides as a network (TLS) error.
    with pytest.raises(setwise.InputError, match="needs the CA"):
        setwise.receiver(
            Y, connect="127.0.0.1:1", tls=setwise.Tls(cert=pki / "bob.pem", key=pki / "bob.key")
        )


def test_ctrl_c_interrupts_a_waiting_run(tmp_path: Path) -> None:
    """SIGINT while a sender waits for its peer raises KeyboardInterrupt at once."""
    import signal
    import sys
    import time

    # A shell without job control starts background jobs with SIGINT ignored, and a child
    # inherits that; the child restores Python's own handler, as an interactive one has.
    code = (
        "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "import setwise\nprint('ready', flush=True)\nsetwise.sender(['a'], listen='127.0.0.1:0')\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    # Without the interrupt the sender would wait for ever: communicate() would time out.
    _, err = proc.communicate(timeout=20)
    assert "KeyboardInterrupt" in err, err
