"""Every protocol and operation from Python, compared with the plain set computation."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import setwise
from conftest import free_port, pair

X = [f"user{i}@example.com" for i in range(300)]
Y = [f"user{i}@example.com" for i in range(200, 420)]
COMMON = set(X) & set(Y)


def plain_rows(mine: list[str], theirs: list[str]) -> list[int]:
    t = set(theirs)
    return [i for i, v in enumerate(mine) if v in t]


@pytest.mark.parametrize(
    ("protocol", "op"),
    [
        ("ecdh", "intersection"),
        ("mqrpmt", "intersection"),
        ("fhe", "intersection"),
        ("compact", "intersection"),
        ("vole", "intersection"),
    ],
)
def test_intersection(protocol: str, op: str) -> None:
    s, r = pair(
        lambda a: setwise.sender(X, protocol, op, listen=a),
        lambda a: setwise.receiver(Y, protocol, op, connect=a),
    )
    assert r.indices == plain_rows(Y, X)
    assert r.cardinality == len(COMMON)
    assert s.items is None and s.cardinality is None  # the sender learns nothing
    assert r.report["peer_set_size"] == len(X)
    assert any(p["name"] == "hello" for p in r.report["phases"])
    # The report is the shareable one: what the receiver learned is not in it.
    assert "private" not in r.report and "results" not in r.report
    assert "intersection_size" not in json.dumps(r.report)


@pytest.mark.parametrize("protocol", ["ecdh", "mqrpmt"])
def test_cardinality_and_reveal_both(protocol: str) -> None:
    s, r = pair(
        lambda a: setwise.sender(X, protocol, "cardinality", listen=a, reveal="both"),
        lambda a: setwise.receiver(Y, protocol, "cardinality", connect=a, reveal="both"),
    )
    assert (s.cardinality, r.cardinality) == (len(COMMON), len(COMMON))
    assert r.items is None
    s, r = pair(
        lambda a: setwise.sender(X, protocol, listen=a, reveal="both"),
        lambda a: setwise.receiver(Y, protocol, connect=a, reveal="both"),
    )
    assert s.indices == plain_rows(X, Y) and r.indices == plain_rows(Y, X)


def test_auto_picks_a_protocol_and_says_which() -> None:
    s, r = pair(
        lambda a: setwise.sender(X, "auto", listen=a),
        lambda a: setwise.receiver(Y, "auto", connect=a),
    )
    assert r.indices == plain_rows(Y, X)
    assert (s.report["protocol"], r.report["protocol"]) == ("ecdh", "ecdh")  # small sets
    assert "chosen by auto" in r.report["details"]["protocol"]


@pytest.mark.parametrize(("protocol", "runs"), [("auto", "compact"), ("vole", "vole")])
def test_malicious_security(protocol: str, runs: str) -> None:
    # Small sets: auto runs compact; vole runs its malicious variant.
    _, r = pair(
        lambda a: setwise.sender(X, protocol, listen=a, security="malicious"),
        lambda a: setwise.receiver(Y, protocol, connect=a, security="malicious"),
    )
    assert r.indices == plain_rows(Y, X)
    assert r.report["protocol"] == runs


def test_malicious_security_refuses_a_semi_honest_protocol() -> None:
    with pytest.raises(setwise.Error, match="semi-honest peers only"):
        setwise.receiver(Y, "ecdh", connect="127.0.0.1:9", security="malicious")


def test_a_peer_above_the_cap_is_refused() -> None:
    with pytest.raises(setwise.Error, match="exceeds the limit"):
        pair(
            lambda a: setwise.sender(X, "vole", listen=a, max_peer_items=len(Y) - 1),
            lambda a: setwise.receiver(Y, "vole", connect=a),
        )


def test_vole_reveal_both() -> None:
    s, r = pair(
        lambda a: setwise.sender(X, "vole", listen=a, reveal="both"),
        lambda a: setwise.receiver(Y, "vole", connect=a, reveal="both"),
    )
    assert s.indices == plain_rows(X, Y) and r.indices == plain_rows(Y, X)


def test_sum() -> None:
    values = list(range(len(X)))
    s, r = pair(
        lambda a: setwise.sender(X, "mqrpmt", "sum", listen=a, values=values, value_bound=1000),
        lambda a: setwise.receiver(Y, "mqrpmt", "sum", connect=a),
    )
    assert s.sum == sum(values[i] for i in plain_rows(X, Y))
    assert s.cardinality == r.cardinality == len(COMMON)


def test_sum_to_the_receiver_ad_conversions() -> None:
    # Reverse PSI-card-sum: the advertiser (sender) holds purchase amounts, the ad
    # platform (receiver; auto runs mqrpmt) learns their total over the users it
    # showed the ad to, and the advertiser learns nothing.
    values = [(i * 37) % 1000 for i in range(len(X))]
    s, r = pair(
        lambda a: setwise.sender(
            X, "auto", "sum", listen=a, values=values, value_bound=1000, sum_to="receiver"
        ),
        lambda a: setwise.receiver(Y, "auto", "sum", connect=a, sum_to="receiver"),
    )
    assert r.sum == sum(values[i] for i in plain_rows(X, Y))
    assert r.cardinality == len(COMMON)
    assert s.sum is None and s.cardinality is None
    with pytest.raises(setwise.Error, match="not cardinality"):
        setwise.receiver(Y, "mqrpmt", "cardinality", connect="127.0.0.1:1", sum_to="receiver")


def test_shares_recombine_to_the_intersection() -> None:
    s, r = pair(
        lambda a: setwise.sender(X, "mqrpmt", "shares", listen=a),
        lambda a: setwise.receiver(Y, "mqrpmt", "shares", connect=a),
    )
    assert r.members is not None and s.shares is not None and r.shares is not None
    assert sum(r.members) == len(COMMON)
    # Recombined member rows are the sender's items behind them (codec: length-prefixed).
    assert s.share_items is not None
    for row, member in enumerate(r.members):
        joined = bytes(a ^ b for a, b in zip(s.shares[row], r.shares[row]))
        if member:
            assert X[s.share_items[row]].encode() in joined


def test_union() -> None:
    _, r = pair(
        lambda a: setwise.sender(X, "mqrpmt", "union", listen=a),
        lambda a: setwise.receiver(Y, "mqrpmt", "union", connect=a),
    )
    assert sorted(v.decode() for v in r.union) == sorted(set(X) | set(Y))


@pytest.mark.parametrize("op", ["intersection", "cardinality", "sum", "shares", "union"])
def test_mqrpmt_poprf(op: str) -> None:
    # The sender holds the larger set: where the permuted-OPRF membership test is cheaper.
    values = list(range(len(X)))
    vals = values if op == "sum" else None
    s, r = pair(
        lambda a: setwise.sender(
            X, "mqrpmt", op, listen=a, rpmt="poprf", values=vals, value_bound=1000
        ),
        lambda a: setwise.receiver(Y, "mqrpmt", op, connect=a, rpmt="poprf"),
    )
    assert "rpmt=poprf;last_move=shuffle" in r.report["params"]
    if op == "intersection":
        assert r.indices == plain_rows(Y, X)
    elif op == "union":
        assert sorted(v.decode() for v in r.union) == sorted(set(X) | set(Y))
    elif op == "shares":
        assert r.members is not None and sum(r.members) == len(COMMON)
    else:
        assert r.cardinality == len(COMMON)
    if op == "sum":
        assert s.sum == sum(values[i] for i in plain_rows(X, Y))


def test_mqrpmt_poprf_has_no_bloom_filter() -> None:
    with pytest.raises(setwise.InputError, match="no Bloom-filter last move") as refused:
        setwise.receiver(Y, "mqrpmt", connect="127.0.0.1:1", rpmt="poprf", last_move="bloom")
    assert refused.value.field == "last_move"
    assert setwise.InputError("other input").field is None
    # A request the library does not run names what is at fault too.
    with pytest.raises(setwise.InputError, match="no protocol reveals union") as refused:
        setwise.receiver(Y, "mqrpmt", "union", connect="127.0.0.1:1", reveal="both")
    assert refused.value.field == "reveal"
    with pytest.raises(setwise.InputError, match="unknown mqRPMT construction 'oprf'"):
        setwise.receiver(Y, "mqrpmt", connect="127.0.0.1:1", rpmt="oprf")


def test_private_id() -> None:
    s, r = pair(
        lambda a: setwise.sender(X, "mqrpmt", "private-id", listen=a),
        lambda a: setwise.receiver(Y, "mqrpmt", "private-id", connect=a),
    )
    assert s.ids is not None and r.ids is not None
    assert s.union_ids == r.union_ids and len(r.union_ids or []) == len(set(X) | set(Y))
    sid = dict(zip(X, s.ids))
    rid = dict(zip(Y, r.ids))
    assert all(sid[k] == rid[k] for k in COMMON)
    assert not {sid[k] for k in set(X) - COMMON} & set(rid.values())


def test_two_processes_over_tcp(tmp_path: Path) -> None:
    addr = free_port()
    code = textwrap.dedent(
        f"""
        import setwise
        r = setwise.sender({X!r}, listen={addr!r}, reveal="both")
        print(len(r.indices))
        """
    )
    # Run from elsewhere than the source tree, so the installed package is imported.
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    r = setwise.receiver(Y, connect=addr, reveal="both")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert int(out) == len(COMMON) == len(r.indices)
