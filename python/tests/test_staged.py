"""The staged ecdh steps of the native module (what setwise.spark runs in its
executors), without Spark: the per-bucket flow gives the plain intersection and count,
plans and workers pickle, and damaged parts are refused naming the stage and the bucket; markers and
abort notes are sealed under the exchange key and forgeries refused by name; the peer's
text is escaped and bounded; local small files are read without following links."""

from __future__ import annotations

import json
import os
import pickle
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from setwise import InputError, PeerError, _setwise

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
        _setwise.staged_read_marker(b"{", 1, "sender", "m.json", "run-7", KEY)


def test_mismatched_settings_are_refused_naming_the_field() -> None:
    seed = _setwise.staged_new_seed()
    a = _setwise.staged_hello("r", "intersection", 1, "16", None, "sender", 1, seed)
    b = _setwise.staged_hello("r", "intersection", 1, "8", None, "receiver", 1, seed)
    with pytest.raises(PeerError, match="buckets"):
        _setwise.StagedPlan("r", "intersection", 1, "16", None, a, b)


def test_setwise_spark_imports_without_starting_spark() -> None:
    import setwise.spark

    assert callable(setwise.spark.run)


KEY = bytes.fromhex(_setwise.staged_new_exchange_key())
HOSTILE = "\x1b[2J\x1b]0;pwned\x07" + "A" * 1_000_000


def marker(stage: int, role: str) -> str:
    return json.dumps(
        {
            "format": "setwise-staged/v2",
            "run": "run-7",
            "protocol": "ecdh",
            "operation": "intersection",
            "stage": stage,
            "role": role,
            "session": "ab" * 32,
            "parts": [{"items": 3, "bytes": 100, "digest": "cd" * 32}],
            "attempt": "0011",
            "setwise": "0",
        }
    )


def safe(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text, text[:200]
    assert len(text) < 2000, len(text)


def test_markers_are_sealed_and_a_forged_or_replayed_one_is_refused_by_name() -> None:
    sealed = _setwise.staged_seal_marker(marker(1, "sender"), "run-7", KEY)
    data = sealed.encode()
    text, digest = _setwise.staged_read_marker(data, 1, "sender", "m.json", "run-7", KEY)
    assert json.loads(text)["parts"][0]["items"] == 3 and len(digest) == 64
    assert _setwise.staged_read_marker(data, 1, "sender", "m.json", "run-7", KEY.hex().encode())
    forged = json.loads(sealed)
    forged["parts"][0]["items"] = 4
    refusal = "stage-1/sender.done.json: its MAC does not verify under the exchange key"
    for bad, stage, role, run, key in [
        (json.dumps(forged).encode(), 1, "sender", "run-7", KEY),  # edited
        (marker(1, "sender").encode(), 1, "sender", "run-7", KEY),  # never sealed
        (data, 1, "sender", "run-8", KEY),  # another run
        (data, 2, "sender", "run-7", KEY),  # another stage
        (data, 1, "receiver", "run-7", KEY),  # another role
        (data, 1, "sender", "run-7", bytes(32)),  # another key
    ]:
        with pytest.raises(PeerError, match=refusal):
            _setwise.staged_read_marker(bad, stage, role, "stage-1/sender.done.json", run, key)
    with pytest.raises(InputError, match="setwise stage keygen"):
        _setwise.staged_read_marker(data, 1, "sender", "m.json", "run-7", b"short")


def test_abort_notes_are_sealed_escaped_and_bounded() -> None:
    note = _setwise.staged_abort_note("run-7", "sender", HOSTILE, KEY)
    shown = _setwise.staged_read_abort(note, "sender", "abort-sender.json", "run-7", KEY)
    safe(shown)
    assert shown.startswith("\\u{1b}[2J"), shown[:40]
    forged = json.dumps({"format": "setwise-staged/v2", "role": "sender", "error": "stop"})
    with pytest.raises(PeerError, match=re.escape("abort-sender.json: its MAC does not verify")):
        _setwise.staged_read_abort(forged.encode(), "sender", "abort-sender.json", "run-7", KEY)
    with pytest.raises(PeerError) as e:
        _setwise.staged_read_abort(HOSTILE.encode(), "sender", "abort-sender.json", "run-7", KEY)
    safe(str(e.value))
    safe(_setwise.staged_shown(HOSTILE))


def within(f: Any) -> Any:
    """f()'s result or exception, or a failed test if it takes more than 10 s."""
    out: list[Any] = []

    def go() -> None:
        try:
            out.append(("ok", f()))
        except Exception as e:  # handed back to the test
            out.append(("err", e))

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(10)
    assert out, "no answer within 10 s: the read hangs"
    kind, value = out[0]
    if kind == "err":
        raise value
    return value


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and symbolic links")
def test_local_small_files_are_read_without_following_links_or_waiting_on_fifos(
    tmp_path: Path,
) -> None:
    ex = tmp_path / "ex"
    (ex / "stage-1").mkdir(parents=True)
    link = ex / "abort-sender.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(PeerError, match=re.escape("abort-sender.json: a symbolic link")):
        within(lambda: _setwise.staged_read_local(str(ex), str(link), 1 << 20))
    fifo = ex / "stage-1" / "sender.done.json"
    os.mkfifo(fifo)
    with pytest.raises(PeerError, match=re.escape("sender.done.json: not a regular file")):
        within(lambda: _setwise.staged_read_local(str(ex), str(fifo), 1 << 20))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ex / "stage-2").symlink_to(elsewhere)
    with pytest.raises(PeerError, match="stage-2: a symbolic link"):
        _setwise.staged_write_local(str(ex), str(ex / "stage-2" / "sender.done.json"), b"{}")
    assert not list(elsewhere.iterdir()), "nothing written through the link"
    big = ex / "big.json"
    big.write_bytes(b"x" * 101)
    with pytest.raises(PeerError, match="more than the 100 bytes"):
        _setwise.staged_read_local(str(ex), str(big), 100)
    _setwise.staged_write_local(str(ex), str(ex / "stage-3" / "ok.json"), b"{}")
    assert _setwise.staged_read_local(str(ex), str(ex / "stage-3" / "ok.json"), 100) == b"{}"
    assert _setwise.staged_read_local(str(ex), str(ex / "absent.json"), 100) is None


def test_a_spark_run_without_an_exchange_key_is_refused_saying_how_to_make_one() -> None:
    import setwise.spark

    with pytest.raises(InputError, match=r"exchange_key= is needed.*setwise stage keygen"):
        setwise.spark.run(
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            key="email",
            role="receiver",
            exchange="file:///tmp/nowhere/run-1",
            workdir="file:///tmp/nowhere/work",
        )
    with pytest.raises(InputError, match="64 hexadecimal digits"):
        setwise.spark.run(
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            key="email",
            role="receiver",
            exchange="file:///tmp/nowhere/run-1",
            workdir="file:///tmp/nowhere/work",
            exchange_key="abcd",
        )
    assert len(setwise.spark.new_exchange_key()) == 64


def test_a_worker_pickles_with_every_setting_and_refuses_a_sum_to_without_a_sum(
    tmp_path: Path,
) -> None:
    # What Spark ships to the executors: every argument, the sum's recipient too.
    args = ("run-7", "mqrpmt", "sum", 1, "4", None, "receiver", 300, str(tmp_path / "ex"))
    w = _setwise.StagedWorker(*args, str(tmp_path / "w"), "session", "attempt", "receiver")
    again = pickle.loads(pickle.dumps(w))
    want = (*args, str(tmp_path / "w"), "session", "attempt", "receiver")
    assert w.__reduce__()[1] == again.__reduce__()[1] == want
    with pytest.raises(InputError, match="not cardinality"):
        _setwise.StagedWorker(
            "run-7",
            "mqrpmt",
            "cardinality",
            1,
            "4",
            None,
            "receiver",
            300,
            "ex",
            "w",
            "",
            "",
            "receiver",
        )
