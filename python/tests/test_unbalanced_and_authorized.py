"""Unbalanced PSI's SenderDb and authorised PSI from Python, against the plain sets."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

import setwise
from conftest import free_port, pair

SENDER = pd.DataFrame(
    {
        "email": [f"user{i}@example.com" for i in range(600)] + ['zoë, "q"@x.org', None],
        "name": [f"Name {i}" for i in range(600)] + ['Zoë, the "quoted"', "no key"],
        "tier": [i % 3 for i in range(600)] + [7, 8],
    }
)
RECEIVER = pd.DataFrame(
    {
        "email": [
            "user5@example.com",
            "nobody@x.org",
            'zoë, "q"@x.org',
            "user599@example.com",
            "user5@example.com",
        ],
        "note": ["a", "b", "c", "d", "e"],
    }
)


def labels_of(email: str) -> list[str]:
    row = SENDER[SENDER.email == email].iloc[0]
    return [row["name"], str(row["tier"])]


def expected_rows() -> list[int]:
    theirs = set(SENDER.email.dropna())
    return [i for i, e in enumerate(RECEIVER.email) if e in theirs]


@pytest.fixture(scope="module")
def db() -> setwise.SenderDb:
    return setwise.SenderDb.build(SENDER, key="email", labels=["name", "tier"], params="64K-256")


def serve_in_thread(
    db: setwise.SenderDb, sessions: int
) -> tuple[str, threading.Thread, dict[str, Any]]:
    addr = free_port()
    out: dict[str, Any] = {"lines": []}

    def run() -> None:
        out["stats"] = db.serve(listen=addr, sessions=sessions, log=out["lines"].append)

    t = threading.Thread(target=run)
    t.start()
    return addr, t, out


def test_labelled_queries_from_a_served_database(db: setwise.SenderDb) -> None:
    addr, t, out = serve_in_thread(db, sessions=2)
    for _ in range(2):
        r = setwise.receiver(
            RECEIVER, "unbalanced", key="email", connect=addr, fingerprint=db.fingerprint
        )
        assert r.indices == expected_rows()
        assert r.label_columns == ["name", "tier"]
        m = r.matches(RECEIVER)
        assert list(m.index) == expected_rows()
        assert list(m.columns) == ["email", "note", "name", "tier"]
        for _, row in m.iterrows():
            assert [row["name"], row["tier"]] == labels_of(row["email"])
        distinct = r.matches()
        assert sorted(distinct.key) == sorted(set(RECEIVER.email[expected_rows()]))
    t.join(timeout=60)
    assert out["stats"] == setwise.ServeStats(completed=2, failed=0, panicked=0)
    assert len(out["lines"]) == 2 and all("answered 4 items" in line for line in out["lines"])


def test_save_load_insert_remove(tmp_path: Path, db: setwise.SenderDb) -> None:
    db.save(tmp_path / "db")
    loaded = setwise.SenderDb.load(tmp_path / "db")
    assert len(loaded) == len(db) == 601
    assert loaded.label_columns == ["name", "tier"] and loaded.fingerprint == db.fingerprint
    added = pd.DataFrame(
        {"email": ["nobody@x.org", "user5@example.com"], "name": ["New", "Renamed"], "tier": [9, 9]}
    )
    stats = loaded.insert(added, key="email")
    assert (stats["added"], stats["relabelled"]) == (1, 1)
    stats = loaded.remove(pa.table({"email": ["user599@example.com"]}), key="email")
    assert stats["removed"] == 1
    loaded.save(tmp_path / "db")
    # Nothing held in memory: every bundle is read per query from the encoded copy the
    # load writes beside the segments.
    again = setwise.SenderDb.load(tmp_path / "db", memory=0)
    assert any(p.name.startswith("ROWS-") for p in (tmp_path / "db").iterdir())
    with pytest.raises(ValueError, match="not both"):
        setwise.SenderDb.load(tmp_path / "db", compact=True, memory=0)
    _, r = pair(
        lambda a: setwise.sender(again, "unbalanced", listen=a),
        lambda a: setwise.receiver(RECEIVER, "unbalanced", key="email", connect=a),
    )
    assert r.indices == [0, 1, 2, 4]
    got = dict(zip(r.matches().key, r.matches().name))
    assert got == {
        "user5@example.com": "Renamed",
        "nobody@x.org": "New",
        'zoë, "q"@x.org': 'Zoë, the "quoted"',
    }


def test_a_build_into_its_directory_and_an_unfinished_one(tmp_path: Path) -> None:
    out = tmp_path / "db"
    built = setwise.SenderDb.build(
        SENDER, key="email", labels=["name", "tier"], params="64K-256", out=out
    )
    assert len(built) == 601 and not any(p.name.startswith("BUILD") for p in out.iterdir())
    served = setwise.SenderDb.load(out)
    _, r = pair(
        lambda a: setwise.sender(served, "unbalanced", listen=a),
        lambda a: setwise.receiver(RECEIVER, "unbalanced", key="email", connect=a),
    )
    assert r.indices == expected_rows()
    for key, name in zip(r.matches().key, r.matches().name):
        assert name == labels_of(key)[0]
    # A directory holding an unfinished build (its journal) is refused, naming resume;
    # resuming one whose journal does not read builds from the start.
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "BUILD").write_bytes(b"not a journal")
    with pytest.raises(setwise.InputError, match="--resume"):
        setwise.SenderDb.build(list(SENDER.email), params="64K-256", out=unfinished)
    with pytest.raises(setwise.InputError, match="--resume"):
        setwise.SenderDb.load(unfinished)
    resumed = setwise.SenderDb.build(
        list(SENDER.email), params="64K-256", out=unfinished, resume=True
    )
    assert len(resumed) == 601 and not (unfinished / "BUILD").exists()


def test_unlabelled_database_and_its_errors(tmp_path: Path) -> None:
    plain = setwise.SenderDb.build(list(SENDER.email), params="64K-256")
    assert plain.label_columns == [] and len(plain) == 601
    _, r = pair(
        lambda a: setwise.sender(plain, "unbalanced", listen=a),
        lambda a: setwise.receiver(RECEIVER, "unbalanced", key="email", connect=a),
    )
    assert r.indices == expected_rows() and r.labels is None
    # A receiver insisting on other parameters is refused before any query.
    with pytest.raises(setwise.PeerError):
        pair(
            lambda a: setwise.sender(plain, "unbalanced", listen=a),
            lambda a: setwise.receiver(
                RECEIVER, "unbalanced", key="email", connect=a, fingerprint="0" * 16
            ),
        )
    with pytest.raises(setwise.InputError, match="MANIFEST"):
        setwise.SenderDb.load(tmp_path)
    with pytest.raises(setwise.InputError, match="label column"):
        setwise.SenderDb.build(SENDER, key="email", labels=["missing"], params="64K-256")
    with pytest.raises(setwise.InputError, match="SenderDb"):
        setwise.sender(list(SENDER.email), "unbalanced", listen=free_port())
    # auto's parameters for a stated link answer as well; a link it cannot read is
    # refused by name.
    slow = setwise.SenderDb.build(list(SENDER.email), link="wan")
    _, r = pair(
        lambda a: setwise.sender(slow, "unbalanced", listen=a),
        lambda a: setwise.receiver(RECEIVER, "unbalanced", key="email", connect=a),
    )
    assert r.indices == expected_rows()
    with pytest.raises(setwise.InputError, match="link") as e:
        setwise.SenderDb.build(list(SENDER.email), link="fast")
    assert e.value.field == "link"


def test_a_served_database_is_updated_live() -> None:
    live = setwise.SenderDb.build(list(SENDER.email), params="64K-256")
    addr, t, out = serve_in_thread(live, sessions=2)
    try:
        before = setwise.receiver(RECEIVER, "unbalanced", key="email", connect=addr)
        live.remove(["user5@example.com"])
        after = setwise.receiver(RECEIVER, "unbalanced", key="email", connect=addr)
    finally:
        t.join(timeout=60)
    assert before.indices == expected_rows()
    assert after.indices == [i for i in expected_rows() if RECEIVER.email[i] != "user5@example.com"]
    assert out["stats"].completed == 2


def test_a_server_keeps_serving_after_a_bad_client() -> None:
    addr = free_port()
    out: dict[str, Any] = {}
    sender_items = [f"k{i}" for i in range(50)]
    t = threading.Thread(
        target=lambda: out.setdefault(
            "stats", setwise.serve(sender_items, listen=addr, sessions=1, timeout=5)
        )
    )
    t.start()
    host, port = addr.split(":")
    for _ in range(100):
        try:
            junk = socket.create_connection((host, int(port)), timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    junk.sendall(b"\xff\xff\xff\x7fnot setwise")
    junk.close()
    r = setwise.receiver(["k1", "k7", "x"], connect=addr)
    t.join(timeout=60)
    assert r.indices == [0, 1]
    # The junk never became a session: refused before its hello.
    stats = out["stats"]
    assert (stats.completed, stats.failed, stats.refused) == (1, 0, 1)


@pytest.mark.parametrize("partial", [False, True])
def test_authorized_psi_from_judge_to_intersection(
    tmp_path: Path, partial: bool, setwise_cli: Path
) -> None:
    allow = pd.DataFrame({"item": [f"gene{i}" for i in range(0, 40)], "client": ["lab"] * 40})
    judge = setwise.Judge(
        allow, key="item", client_column="client", secret_key=tmp_path / "judge.key"
    )
    judge.write_public_key(tmp_path / "judge.pub")
    # An allow-list that names clients is served under mutual TLS only: the client's
    # identity is its certificate's.
    pki = tmp_path / "pki"
    subprocess.run([str(setwise_cli), "tls", "init", str(pki), "--names", "judge,lab"], check=True)
    with pytest.raises(setwise.InputError, match="needs mutual TLS"):
        judge.serve(listen=free_port(), sessions=1, insecure_no_tls=True)
    judge_tls = setwise.Tls(cert=pki / "judge.pem", key=pki / "judge.key", ca=pki / "ca.pem")
    lab_tls = setwise.Tls(
        cert=pki / "lab.pem", key=pki / "lab.key", ca=pki / "ca.pem", server_name="judge"
    )
    # Partial: the judge signs all or nothing from a random sample, so every item is
    # allowed here (a refusal is tested below with every commitment opened).
    client_items = [f"gene{i}" for i in (range(10, 30) if partial else range(30, 50))]
    judge_addr = free_port()
    out: dict[str, Any] = {}
    t = threading.Thread(
        target=lambda: out.setdefault(
            "stats", judge.serve(listen=judge_addr, sessions=1, tls=judge_tls)
        )
    )
    t.start()
    auth = setwise.authorize(
        client_items, connect=judge_addr, client_id="lab", partial=partial, tls=lab_tls
    )
    t.join(timeout=60)
    assert auth.credentials is not None
    if partial:
        assert auth.refused == []  # partial: every commitment is signed
    else:
        assert len(auth.credentials) == 10 and auth.refused_rows == list(range(10, 20))
    auth.credentials.save(tmp_path / "creds")
    assert setwise.Credentials.load(tmp_path / "creds").client_id == "lab"
    server_items = [f"gene{i}" for i in range(25, 45)]
    protocol = "partial" if partial else "authorized"
    _, r = pair(
        lambda a: setwise.sender(
            server_items, protocol, listen=a, judge_key=tmp_path / "judge.pub", client_id="lab"
        ),
        lambda a: setwise.receiver(
            client_items, protocol, connect=a, credentials=tmp_path / "creds"
        ),
    )
    signed = set(client_items) if partial else set(client_items) & set(allow.item)
    assert r.indices == [
        i for i, v in enumerate(client_items) if v in signed and v in set(server_items)
    ]
    # Credentials issued to another client are refused by the server.
    with pytest.raises(setwise.PeerError):
        pair(
            lambda a: setwise.sender(
                server_items, protocol, listen=a, judge_key=judge.public_key, client_id="other"
            ),
            lambda a: setwise.receiver(
                client_items, protocol, connect=a, credentials=auth.credentials
            ),
        )


@pytest.mark.parametrize("partial", [False, True])
def test_a_judge_refusing_everything_is_a_peer_error(tmp_path: Path, partial: bool) -> None:
    # fraction=1: partial mode opens every commitment, so one refused item refuses all.
    with pytest.raises(setwise.InputError, match="fraction"):
        setwise.Judge(["a"], secret_key=tmp_path / "judge.key", fraction=0.0)
    judge = setwise.Judge(["a", "b"], secret_key=tmp_path / "judge.key", fraction=1.0)
    addr = free_port()
    t = threading.Thread(target=lambda: judge.serve(listen=addr, sessions=1))
    t.start()
    with pytest.raises(setwise.PeerError, match="refused every item"):
        setwise.authorize(
            ["b", "c"] if partial else ["c"], connect=addr, client_id="lab", partial=partial
        )
    t.join(timeout=60)


def test_a_python_database_served_by_the_cli(tmp_path: Path, setwise_cli: Path) -> None:
    """The saved database is the CLI's format: the CLI serves it, Python queries it."""
    db = setwise.SenderDb.build(SENDER, key="email", labels=["name"], params="64K-256")
    db.save(tmp_path / "db")
    addr = free_port()
    sender = subprocess.Popen(
        [
            *(str(setwise_cli), "sender", "--protocol", "unbalanced"),
            "--db",
            str(tmp_path / "db"),
            "--listen",
            addr,
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    r = setwise.receiver(RECEIVER, "unbalanced", key="email", connect=addr)
    _, err = sender.communicate(timeout=60)
    assert sender.returncode == 0, err
    assert r.indices == expected_rows()
    assert list(r.matches(RECEIVER).name) == [
        labels_of(e)[0] for e in RECEIVER.email[expected_rows()]
    ]


@pytest.mark.parametrize("server", ["database", "judge"])
def test_a_served_database_or_judge_refuses_a_peer_above_the_cap(
    tmp_path: Path, server: str
) -> None:
    db = setwise.SenderDb.build(list(SENDER.email), params="64K-256")
    judge = setwise.Judge(["a", "b", "c"], secret_key=tmp_path / "judge.key")

    def serve(addr: str) -> setwise.ServeStats:
        if server == "database":
            return db.serve(listen=addr, sessions=1, max_peer_items=2)
        return judge.serve(listen=addr, sessions=1, max_peer_items=2)

    def ask(addr: str, items: list[str]) -> Any:
        if server == "database":
            return setwise.receiver(items, "unbalanced", connect=addr)
        return setwise.authorize(items, connect=addr, client_id="lab")

    addr = free_port()
    out: dict[str, Any] = {}
    t = threading.Thread(target=lambda: out.setdefault("stats", serve(addr)))
    t.start()
    with pytest.raises(setwise.PeerError, match="exceeds the limit"):
        ask(addr, ["a", "b", "c"])
    ask(addr, ["a", "b"])  # within the cap: answered, and the one session ends the server
    t.join(timeout=60)
    assert out["stats"].completed == 1 and out["stats"].failed == 1
