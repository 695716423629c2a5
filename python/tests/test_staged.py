"""The staged ecdh steps of the native module (what setwise.spark runs in its
executors), without Spark: the per-bucket flow gives the plain intersection and count,
plans pickle, and damaged parts are refused naming the stage and the bucket."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from setwise import PeerError, _setwise

pa = pytest.importorskip("pyarrow")

B = 4


def plans(op: str) -> tuple[Any, Any, bytes, bytes]:
    s_seed, r_seed = _setwise.staged_new_seed(), _setwise.staged_new_seed()
    args = ("run-7", op, 1, str(B), None)
    hs = _setwise.staged_hello(*args, "sender", 300, s_seed)
    hr = _setwise.staged_hello(*args, "receiver", 200, r_seed)
    assert hs == _setwise.staged_hello(*args, "sender", 300, s_seed), (
        "the same seed, the same hello"
    )
    return _setwise.StagedPlan(*args, hs, hr), _setwise.StagedPlan(*args, hr, hs), s_seed, r_seed


def by_bucket(plan: Any, items: list[bytes]) -> dict[int, list[bytes]]:
    arr = pa.array(items, pa.binary())
    buckets = pa.Array.from_buffers(
        pa.int32(), len(items), [None, pa.py_buffer(plan.bucket_of(arr))]
    )
    out: dict[int, list[bytes]] = {b: [] for b in range(plan.buckets)}
    for item, b in zip(items, buckets.to_pylist()):
        out[b].append(item)
    return {b: sorted(v) for b, v in out.items()}


X = [f"x{i}".encode() for i in range(300)]
Y = [f"x{i}".encode() for i in range(200, 400)]


def test_the_per_bucket_steps_give_the_plain_intersection() -> None:
    sp, rp, ss, rs = plans("intersection")
    assert (
        sp.session == rp.session
        and sp.buckets == B
        and (sp.sender_size, sp.receiver_size) == (300, 200)
    )
    sp2 = pickle.loads(pickle.dumps(sp))
    assert sp2.session == sp.session, "a plan pickles (for Spark tasks)"
    bx, by = by_bucket(sp, X), by_bucket(rp, Y)
    got = set()
    for b in range(B):
        req = rp.blind(rs, b, pa.array(by[b], pa.binary()))
        r_info = rp.summarize(1, b, req)
        assert r_info[0] == len(by[b])
        s1 = sp.blind(ss, b, pa.array(bx[b], pa.binary()))
        s1_info = sp.summarize(1, b, s1)
        s2 = sp.reblind(ss, b, req, r_info)
        s2_info = sp.summarize(2, b, s2)
        hits = rp.finish(rs, b, len(by[b]), s1, s1_info, s2, s2_info)
        got |= {by[b][h] for h in hits}
    assert got == set(X) & set(Y)


def test_cardinality_mixes_and_counts() -> None:
    sp, rp, ss, rs = plans("cardinality")
    bx, by = by_bucket(sp, X), by_bucket(rp, Y)
    pieces: dict[int, dict[int, list[bytes]]] = {1: {}, 2: {}}
    for b in range(B):
        for part, piece in sp.mix_split(sp.raw(ss, b, items=pa.array(bx[b], pa.binary()))):
            pieces[1].setdefault(part, []).append(piece)
        req = rp.blind(rs, b, pa.array(by[b], pa.binary()))
        raw2 = sp.raw(ss, b, chunks=req, info=rp.summarize(1, b, req))
        for part, piece in sp.mix_split(raw2):
            pieces[2].setdefault(part, []).append(piece)
    sender: list[bytes] = []
    own: list[bytes] = []
    for p in range(B):
        for stage, out in ((1, sender), (2, own)):
            frames = sp.frame_sorted(stage, pieces[stage].get(p, []))
            out.append(rp.open_part(rs, stage, p, frames, sp.summarize(stage, p, frames)))
    assert _setwise.staged_count_matches(sender, own) == 100


def test_damaged_parts_name_the_stage_and_the_bucket() -> None:
    sp, rp, ss, rs = plans("intersection")
    by = by_bucket(rp, Y)
    req = rp.blind(rs, 2, pa.array(by[2], pa.binary()))
    info = rp.summarize(1, 2, req)
    bad = [bytearray(f) for f in req]
    bad[0][40] ^= 1
    with pytest.raises(
        PeerError,
        match=r"stage 2 \(sender: re-blind\), the receiver's stage 1 message, bucket 2: .*digest",
    ):
        sp.reblind(ss, 2, [bytes(f) for f in bad], info)
    with pytest.raises(PeerError, match=r"bucket 2: .*bytes, the marker says"):
        sp.reblind(ss, 2, req[:-1] if len(req) > 1 else [], info)
    with pytest.raises(PeerError, match="not a stage marker"):
        _setwise.staged_read_marker(b"{", 1, "sender")


def test_mismatched_settings_are_refused_naming_the_field() -> None:
    seed = _setwise.staged_new_seed()
    a = _setwise.staged_hello("r", "intersection", 1, "16", None, "sender", 1, seed)
    b = _setwise.staged_hello("r", "intersection", 1, "8", None, "receiver", 1, seed)
    with pytest.raises(PeerError, match="buckets"):
        _setwise.StagedPlan("r", "intersection", 1, "16", None, a, b)


def test_setwise_spark_imports_without_starting_spark() -> None:
    import setwise.spark

    assert callable(setwise.spark.run)
