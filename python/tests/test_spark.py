"""setwise.spark: two organisations as two Spark drivers (local[2], and at the end on a
standalone cluster, spark_cluster.py, with an S3 server, s3_server.py) on one machine,
meeting only through an exchange directory (or bucket). One 10^5 × 10^5 run, with the sender killed
inside its stage 2 and started again, is shared by the assertions; the damaged and
missing messages and the forged marker are re-runs of the receiver's finish on copies of
its exchange."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from conftest import cli, free_port

pytest.importorskip("pyspark", reason="pyspark is not installed (scripts/test-python installs it)")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Spark needs Java (17), which is not installed", allow_module_level=True)

import setwise  # noqa: E402
import setwise.spark  # noqa: E402
from setwise._setwise import staged_exchange_read  # noqa: E402

ROWS = 100_000
BUCKETS = 16
PARTY = Path(__file__).with_name("spark_party.py")
KILL = "SETWISE_SPARK_TEST_KILL_IN_STAGE"
# The exchange key both test organisations hold.
EXCHANGE_KEY = setwise.spark.new_exchange_key()


def key(i: int) -> str:
    """An awkward key: quotes, commas, unicode, spaces, line breaks, or plain."""
    return [
        f"user{i}@example.org",
        f'"quoted" {i}@x',
        f"comma,{i}@x",
        f"ünïcødé-{i}@例え.jp",
        f" spaced {i} ",
        f"line\nbreak{i}",
        f"plain{i}",
    ][i % 7]


def rows(name: str, start: int, count: int = ROWS) -> list[tuple[str, str]]:
    """(id, email) for keys start..start+count, every 50th row repeating an earlier key and
    every 97th row's key empty."""
    out = []
    for n in range(count):
        if n % 97 == 13:
            k = ""
        elif n % 50 == 49:
            k = key(start + n // 2)
        else:
            k = key(start + n)
        out.append((f"{name}{n}", k))
    return out


def write_inputs(d: Path, name: str, data: list[tuple[str, str]]) -> tuple[Path, Path]:
    table = pa.table({"id": [r[0] for r in data], "email": [r[1] for r in data]})
    pq.write_table(table, d / f"{name}.parquet")
    with open(d / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "email"])
        w.writerows(data)
    return d / f"{name}.parquet", d / f"{name}.csv"


def env(key_file: Path, **extra: str) -> dict[str, str]:
    e = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        SETWISE_SPARK_TIMEOUT="900",
        SETWISE_EXCHANGE_KEY_FILE=str(key_file),
        **extra,
    )
    e.pop(KILL, None)
    e.update(extra)
    return e


def party(
    role: str,
    data: Path,
    paths: tuple[str, str, str],
    log: Path,
    op: str = "intersection",
    *,
    protocol: str = "ecdh",
    **extra: str,
) -> Any:
    ex, work, out = paths
    cmd = [sys.executable, str(PARTY), role, str(data), ex, work, out, str(BUCKETS), op, protocol]
    if "value" in extra:
        cmd.append(extra.pop("value"))
    key_file = log.parent / "exchange.key"
    if not key_file.exists():
        key_file.write_text(EXCHANGE_KEY)
        key_file.chmod(0o600)
    return subprocess.Popen(
        cmd, env=env(key_file, **extra), stdout=open(log, "w"), stderr=subprocess.STDOUT
    )


def uri(p: Path) -> str:
    return f"file://{p}"


def wait_all(procs: dict[str, Any], logs: Path) -> None:
    """Waits for each party; if one fails, stops the others and shows its log."""
    try:
        for name, p in procs.items():
            rc = p.wait(timeout=600)
            assert rc == 0, (logs / f"{name}.log").read_text(errors="replace")[-3000:]
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def markers(ex: Path) -> dict[str, bytes]:
    return {str(p.relative_to(ex)): p.read_bytes() for p in sorted(ex.glob("stage-*/*.done.json"))}


def ids(path: Path) -> set[str]:
    return set(pq.read_table(path).column("id").to_pylist())


@pytest.fixture(scope="module")
def run42(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("spark")
    sx, rx = rows("s", 0), rows("r", ROWS // 2)
    s_pq, s_csv = write_inputs(d, "sender", sx)
    r_pq, r_csv = write_inputs(d, "receiver", rx)
    xs = {k for _, k in sx if k}
    want = {i for i, k in rx if k and k in xs}
    ex = d / "run-42"
    started = time.monotonic()
    # The sender kills itself inside stage 2 (its parts written, not its marker).
    r = party("receiver", r_pq, (uri(ex), uri(d / "r-work"), uri(d / "r-out")), d / "r.log")
    s = party("sender", s_pq, (uri(ex), uri(d / "s-work"), "-"), d / "s1.log", **{KILL: "2"})
    s_rc = s.wait(timeout=600)
    killed = {
        "rc": s_rc,
        "markers": markers(ex),
        "stage2_parts": sorted(p.name for p in (ex / "stage-2" / "sender").glob("part=*")),
        "log": (d / "s1.log").read_text(errors="replace")[-3000:],
    }
    s = party("sender", s_pq, (uri(ex), uri(d / "s-work"), "-"), d / "s2.log")
    wait_all({"s2": s, "r": r}, d)
    spark_seconds = time.monotonic() - started
    # The single-machine CLI on the same data.
    cli_rows: set[str] | None = None
    binary = cli()
    if binary is not None:
        addr = free_port()
        common = ["--protocol", "ecdh", "--key", "email"]
        sp = subprocess.Popen(
            [str(binary), "sender", "--listen", addr, "--input", str(s_csv), *common],
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.3)
        out = d / "cli.csv"
        receiver = [str(binary), "receiver", "--connect", addr, "--input", str(r_csv)]
        rp = subprocess.run(
            [*receiver, "--output", str(out), *common],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        sp.communicate(timeout=60)
        assert rp.returncode == 0 and sp.returncode == 0, rp.stderr
        with open(out, newline="", encoding="utf-8") as f:
            cli_rows = {row["id"] for row in csv.DictReader(f)}
    return {
        "dir": d,
        "ex": ex,
        "want": want,
        "got": ids(d / "r-out"),
        "cli": cli_rows,
        "killed": killed,
        "final": markers(ex),
        "seconds": spark_seconds,
        "receiver": r_pq,
    }


def test_the_result_is_the_plain_intersection_and_the_clis(run42: dict[str, Any]) -> None:
    assert len(run42["want"]) > 30_000
    assert run42["got"] == run42["want"]
    if run42["cli"] is None:
        pytest.skip("the setwise CLI is not built (set SETWISE_BIN)")
    assert run42["got"] == run42["cli"]
    sizes = [
        json.loads(run42["final"][f"stage-1/{r}.done.json"])["parts"]
        for r in ("sender", "receiver")
    ]
    assert all(len(p) == BUCKETS and all(e["items"] > 0 for e in p) for p in sizes), "16 buckets"


def test_a_killed_run_resumes_without_redoing_finished_stages(run42: dict[str, Any]) -> None:
    k, final = run42["killed"], run42["final"]
    assert k["rc"] == -signal.SIGKILL, k["log"]
    # Killed inside stage 2: its parts were written, its marker was not.
    assert "stage-2/sender.done.json" not in k["markers"]
    assert k["stage2_parts"], "stage 2 had written its parts"
    # The sender's finished stages are untouched, marker for marker (attempt ids included).
    for name in ("stage-0/sender.done.json", "stage-1/sender.done.json"):
        assert final[name] == k["markers"][name], name
    first = json.loads(final["stage-1/sender.done.json"])["attempt"]
    again = json.loads(final["stage-2/sender.done.json"])["attempt"]
    assert first != again, "stage 2 was run by the second invocation"
    # The receiver ran each of its stages once, in one invocation.
    attempts = {json.loads(final[f"stage-{s}/receiver.done.json"])["attempt"] for s in (0, 1, 3)}
    assert len(attempts) == 1


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    s = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    yield s
    s.stop()


def rerun_finish(spark: Any, run42: dict[str, Any], name: str, damage: Any) -> str:
    """The receiver's finish again, on a copy of the exchange and of its workdir with
    `damage` applied to the copy; the error it fails with."""
    d = run42["dir"] / name
    ex, work = d / "run-42", d / "r-work"
    shutil.copytree(run42["ex"], ex)
    shutil.copytree(run42["dir"] / "r-work", work)
    (ex / "stage-3" / "receiver.done.json").unlink()
    damage(ex)
    return refused_receiver(spark, run42["receiver"], ex, work, protocol="ecdh")


def refused_receiver(spark: Any, data: Path, ex: Path, work: Path, **extra: Any) -> str:
    """The receiver run again on `ex` and `work`, which must fail as the peer's doing
    and tell the sender; the error it fails with."""
    df = spark.read.parquet(str(data))
    with pytest.raises(setwise.PeerError) as e:
        setwise.spark.run(
            spark,
            df,
            key="email",
            role="receiver",
            exchange=f"file://{ex}",
            workdir=f"file://{work}",
            buckets=BUCKETS,
            exchange_key=EXCHANGE_KEY,
            timeout=5,
            **extra,
        )
    assert (ex / "abort-receiver.json").exists(), "the sender is told"
    return str(e.value)


def test_a_damaged_peer_message_fails_naming_the_stage_and_bucket(
    spark: Any, run42: dict[str, Any]
) -> None:
    def flip(ex: Path) -> None:
        part = ex / "stage-2" / "sender" / "part=3"
        f = max(part.glob("*.parquet"), key=lambda p: p.stat().st_size)
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0x01  # inside a payload: Parquet still reads it
        f.write_bytes(bytes(data))
        for crc in part.glob(".*.crc"):
            crc.unlink()

    e = rerun_finish(spark, run42, "damaged", flip)
    assert "stage 3 (receiver: finish), the sender's stage 2 message, bucket 3" in e, e
    assert "digest mismatch" in e, e


def test_a_missing_peer_message_fails_naming_the_stage_and_bucket(
    spark: Any, run42: dict[str, Any]
) -> None:
    e = rerun_finish(
        spark, run42, "missing", lambda ex: shutil.rmtree(ex / "stage-1" / "sender" / "part=5")
    )
    assert (
        "stage 3 (receiver: finish), the sender's stage 1 message, bucket 5: message missing" in e
    ), e


def test_a_forged_peer_marker_fails_naming_the_file(spark: Any, run42: dict[str, Any]) -> None:
    def forge(ex: Path) -> None:
        # Someone without the key edits the sender's stage 2 marker.
        path = ex / "stage-2" / "sender.done.json"
        m = json.loads(path.read_text())
        m["attempt"] = "forged"
        path.write_text(json.dumps(m))

    e = rerun_finish(spark, run42, "forged", forge)
    assert "stage-2/sender.done.json: its MAC does not verify under the exchange key" in e, e


def test_cardinality_counts_the_plain_intersection(tmp_path: Path) -> None:
    """Cardinality: the sender's messages are mixed across parts, the receiver gets an int."""
    sx, rx = rows("s", 0, 20_000), rows("r", 7_000, 20_000)
    s_pq, _ = write_inputs(tmp_path, "sender", sx)
    r_pq, _ = write_inputs(tmp_path, "receiver", rx)
    want = len({k for _, k in sx if k} & {k for _, k in rx if k})
    ex = tmp_path / "card-1"
    r = party(
        "receiver", r_pq, (uri(ex), uri(tmp_path / "rw"), "-"), tmp_path / "r.log", "cardinality"
    )
    s = party(
        "sender", s_pq, (uri(ex), uri(tmp_path / "sw"), "-"), tmp_path / "s.log", "cardinality"
    )
    wait_all({"s": s, "r": r}, tmp_path)
    log = (tmp_path / "r.log").read_text(errors="replace")
    assert f"setwise-spark result: {want}\n" in log, log[-2000:]
    assert want > 5_000
    m = json.loads((ex / "stage-2" / "sender.done.json").read_text())
    assert len(m["parts"]) == BUCKETS


def vole_sender(d: Path, s_pq: Path, s_csv: Path, ex: Path) -> Any:
    """The vole sender of run `ex`: the CLI's `setwise stage run` when it is built (the two
    front ends share one exchange format), else a Spark driver."""
    key_file = d / "exchange.key"
    key_file.write_text(EXCHANGE_KEY)
    key_file.chmod(0o600)
    binary = cli()
    if binary is None:
        return party(
            "sender", s_pq, (uri(ex), uri(d / "s-work"), "-"), d / "s.log", protocol="vole"
        )
    stage = [str(binary), "stage", "run", "--role", "sender", "--protocol", "vole"]
    where = ["--exchange", str(ex), "--workdir", str(d / "s-work"), "--run-id", ex.name]
    keyed = ["--buckets", str(BUCKETS), "--exchange-key", str(key_file), "--wait-timeout", "900"]
    return subprocess.Popen(
        [*stage, "--input", str(s_csv), "--key", "email", *where, *keyed],
        stdout=open(d / "s.log", "w"),
        stderr=subprocess.STDOUT,
    )


@pytest.fixture(scope="module")
def vole_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """vole on Spark, 20 000 × 20 000 awkward keys in 16 buckets; the receiver killed
    after its stage 4 and started again (its executors then replay the rounds so far),
    the second time with no memory for live roles (every stage replays); the sender as
    `vole_sender` runs it."""
    d = tmp_path_factory.mktemp("spark-vole")
    sx, rx = rows("s", 0, 20_000), rows("r", 9_000, 20_000)
    s_pq, s_csv = write_inputs(d, "sender", sx)
    r_pq, _ = write_inputs(d, "receiver", rx)
    xs = {k for _, k in sx if k}
    ex = d / "vole-1"
    paths = (uri(ex), uri(d / "r-work"), uri(d / "r-out"))
    s = vole_sender(d, s_pq, s_csv, ex)
    r = party("receiver", r_pq, paths, d / "r1.log", protocol="vole", **{KILL: "4"})
    killed = r.wait(timeout=600)
    after_kill = sorted(p.parent.name for p in ex.glob("stage-*/receiver.done.json"))
    r = party("receiver", r_pq, paths, d / "r2.log", protocol="vole", SETWISE_SPARK_LIVE_MEMORY="0")
    wait_all({"s": s, "r2": r}, d)
    return {
        "dir": d,
        "ex": ex,
        "want": {i for i, k in rx if k and k in xs},
        "got": ids(d / "r-out"),
        "killed": killed,
        "after_kill": after_kill,
        "receiver": r_pq,
        "log": (d / "r2.log").read_text(errors="replace"),
    }


def test_vole_on_spark_is_the_plain_intersection_and_resumes_after_a_kill(
    vole_run: dict[str, Any],
) -> None:
    assert vole_run["killed"] == -signal.SIGKILL
    # Killed after its stage 4's marker: stages 0 to 4 done, no more.
    assert vole_run["after_kill"] == [f"stage-{k}" for k in range(5)], vole_run["after_kill"]
    assert len(vole_run["want"]) > 5_000
    assert vole_run["got"] == vole_run["want"]
    assert "stage 4 (round 3) done" not in vole_run["log"], "finished stages are not run again"
    assert "stage 5 (round 4) done" in vole_run["log"], vole_run["log"][-2000:]


def test_vole_on_spark_keeps_roles_alive_only_within_live_memory(
    vole_run: dict[str, Any],
) -> None:
    """Each bucket's done file says whether its role replayed the run for the stage: none
    did in the first driver's stages 3 and 4 (roles alive, the default budget); with
    live_memory=0 every one that ran a round after the restart did (and the answer, in
    the test above, is still exact)."""
    rounds = vole_run["dir"] / "r-work" / "rounds"

    def ran(stage: int) -> list[bool]:
        """Whether each bucket that ran a round in `stage` replayed (waiting ones left out)."""
        posted = json.loads((rounds / f"stage-{stage}" / "tasks.json").read_text())["tasks"]
        done = [
            json.loads(
                (rounds / f"stage-{stage}" / f"bucket-{t['bucket']:05}.done.json").read_text()
            )
            for t in posted
            if not t["wait"]
        ]
        return [d["replayed"] for d in done]

    # The receiver runs rounds in even stages (it waits in odd ones).
    first = ran(3) + ran(4)
    assert first and not any(first), first
    later = [r for k in range(6, 11) if (rounds / f"stage-{k}").is_dir() for r in ran(k)]
    assert later and all(later), later


def test_vole_on_spark_refuses_a_damaged_peer_part_by_stage_and_bucket(
    spark: Any, vole_run: dict[str, Any]
) -> None:
    d = vole_run["dir"] / "damaged"
    ex, work = d / "vole-1", d / "r-work"
    shutil.copytree(vole_run["ex"], ex)
    shutil.copytree(vole_run["dir"] / "r-work", work)
    last = max(int(p.parent.name[len("stage-") :]) for p in ex.glob("stage-*/receiver.done.json"))
    (ex / f"stage-{last}" / "receiver.done.json").unlink()
    shutil.rmtree(work / "rounds" / f"stage-{last}")
    part = ex / f"stage-{last - 1}" / "sender" / "part-00003.bin"
    data = bytearray(part.read_bytes())
    data[-1] ^= 0x01
    part.write_bytes(bytes(data))
    e = refused_receiver(spark, vole_run["receiver"], ex, work, protocol="vole", linger=5)
    want = f"the sender's stage {last - 1} message, bucket 3"
    assert want in e and "digest mismatch" in e, e


def test_auto_cardinality_on_spark_runs_mqrpmt_and_counts_the_plain_intersection(
    tmp_path: Path,
) -> None:
    # The sender holds more than twice the receiver's keys: auto's mqrpmt takes the
    # permuted OPRF (the cluster test runs mqrpmt named, with its default test).
    sx, rx = rows("s", 0, 10_000), rows("r", 2_000, 4_000)
    s_pq, _ = write_inputs(tmp_path, "sender", sx)
    r_pq, _ = write_inputs(tmp_path, "receiver", rx)
    want = len({k for _, k in sx if k} & {k for _, k in rx if k})
    ex = tmp_path / "mq-1"
    paths = {
        "receiver": (uri(ex), uri(tmp_path / "rw"), "-"),
        "sender": (uri(ex), uri(tmp_path / "sw"), "-"),
    }
    r, s = (
        party(who, data, paths[who], tmp_path / f"{who}.log", "cardinality", protocol="auto")
        for who, data in (("receiver", r_pq), ("sender", s_pq))
    )
    wait_all({"s": s, "r": r}, tmp_path)
    log = (tmp_path / "receiver.log").read_text(errors="replace")
    assert f"setwise-spark result: {want}\n" in log, log[-2000:]
    assert want > 1_000
    for who in ("receiver", "sender"):
        log = (tmp_path / f"{who}.log").read_text(errors="replace")
        assert "auto runs mqrpmt in every bucket" in log and "permuted OPRF" in log, log[-2000:]


def test_mqrpmt_union_on_spark_is_the_plain_union(tmp_path: Path) -> None:
    sx, rx = rows("s", 0, 3_000), rows("r", 2_000, 3_000)
    s_pq, _ = write_inputs(tmp_path, "sender", sx)
    r_pq, _ = write_inputs(tmp_path, "receiver", rx)
    ex, out = tmp_path / "mq-u", tmp_path / "r-out"
    paths = {
        "receiver": (uri(ex), uri(tmp_path / "rw"), uri(out)),
        "sender": (uri(ex), uri(tmp_path / "sw"), "-"),
    }
    r, s = (
        party(who, data, paths[who], tmp_path / f"{who}.log", "union", protocol="mqrpmt")
        for who, data in (("receiver", r_pq), ("sender", s_pq))
    )
    wait_all({"s": s, "r": r}, tmp_path)
    got = pq.read_table(out).column("email").to_pylist()
    want = {k for _, k in sx if k} | {k for _, k in rx if k}
    assert len(got) == len(want) and set(got) == want


def test_mqrpmt_private_id_on_spark_gives_each_key_one_id_of_the_union(tmp_path: Path) -> None:
    sx, rx = rows("s", 0, 2_000), rows("r", 1_500, 2_000)
    s_pq, _ = write_inputs(tmp_path, "sender", sx)
    r_pq, _ = write_inputs(tmp_path, "receiver", rx)
    ex = tmp_path / "mq-pid"
    out = {who: tmp_path / f"{who}-ids" for who in ("receiver", "sender")}
    r, s = (
        party(
            who,
            data,
            (uri(ex), uri(tmp_path / f"{who}-w"), uri(out[who])),
            tmp_path / f"{who}.log",
            "private-id",
            protocol="mqrpmt",
        )
        for who, data in (("receiver", r_pq), ("sender", s_pq))
    )
    wait_all({"s": s, "r": r}, tmp_path)
    ids: dict[str, dict[str, bytes]] = {}
    for who, given in (("receiver", rx), ("sender", sx)):
        t = pq.read_table(out[who])
        keyed = list(zip(t.column("email").to_pylist(), t.column("private_id").to_pylist()))
        assert len(keyed) == sum(1 for _, k in given if k), f"{who}: one ID per row with a key"
        per_key = dict(keyed)
        assert all(per_key[k] == i for k, i in keyed), f"{who}: rows of one key share its ID"
        assert len(set(per_key.values())) == len(per_key), f"{who}: distinct keys, distinct IDs"
        ids[who] = per_key
    unions = [
        sorted(pq.read_table(str(out[who]) + "-union").column("private_id").to_pylist())
        for who in ("receiver", "sender")
    ]
    assert unions[0] == unions[1], "both hold the union's IDs"
    keys = set(ids["receiver"]) | set(ids["sender"])
    assert len(unions[0]) == len(keys), "one ID per key of X ∪ Y"
    common = set(ids["receiver"]) & set(ids["sender"])
    assert common and all(ids["receiver"][k] == ids["sender"][k] for k in common)
    mine = {i for who in ids for i in ids[who].values()}
    assert mine == set(unions[0])


@pytest.mark.parametrize("sum_to", ["sender", "receiver"])
def test_mqrpmt_sum_on_spark_is_the_plain_sum(tmp_path: Path, sum_to: str) -> None:
    sx, rx = rows("s", 0, 3_000), rows("r", 2_000, 3_000)
    amounts = [(n * 37) % 1000 for n in range(len(sx))]
    table = pa.table({"id": [r[0] for r in sx], "email": [r[1] for r in sx], "amount": amounts})
    s_pq = tmp_path / "sender.parquet"
    pq.write_table(table, s_pq)
    r_pq, _ = write_inputs(tmp_path, "receiver", rx)
    ys = {k for _, k in rx if k}
    per_key: dict[str, int] = {}
    for (_, k), v in zip(sx, amounts):
        if k:
            per_key[k] = per_key.get(k, 0) + v  # rows of one key add up
    common = [k for k in per_key if k in ys]
    ex = tmp_path / "mq-sum"
    paths = {
        "receiver": (uri(ex), uri(tmp_path / "rw"), "-"),
        "sender": (uri(ex), uri(tmp_path / "sw"), "-"),
    }
    to = {"SETWISE_SPARK_SUM_TO": sum_to}
    r_log_path, s_log_path = tmp_path / "r.log", tmp_path / "s.log"
    r = party("receiver", r_pq, paths["receiver"], r_log_path, "sum", protocol="mqrpmt", **to)
    s = party(
        "sender", s_pq, paths["sender"], s_log_path, "sum", protocol="mqrpmt", value="amount", **to
    )
    wait_all({"s": s, "r": r}, tmp_path)
    r_log = r_log_path.read_text(errors="replace")
    s_log = s_log_path.read_text(errors="replace")
    count = f"setwise-spark result: {len(common)}\n"
    both = f"setwise-spark result: {len(common)} {sum(per_key[k] for k in common)}\n"
    # The party that learns the sum prints it; with the reverse sum the sender learns nothing.
    learns = s_log if sum_to == "sender" else r_log
    assert both in learns, learns[-2000:]
    if sum_to == "sender":
        assert count in r_log, r_log[-2000:]
    else:
        assert "setwise-spark result" not in s_log and "done in" in s_log, s_log[-2000:]
    assert len(common) > 500


@pytest.mark.parametrize(
    ("exchange", "workdir"),
    [("gs://bucket/run-1", "file://{tmp}/w"), ("file://{tmp}/ex", "s3a://bucket/work")],
)
def test_a_replayed_protocol_needs_a_workdir_the_executors_share_and_a_known_exchange(
    spark: Any, tmp_path: Path, exchange: str, workdir: str
) -> None:
    df = spark.createDataFrame([("a",)], "email string")
    with pytest.raises(setwise.InputError, match="a filesystem every executor mounts"):
        setwise.spark.run(
            spark,
            df,
            key="email",
            role="receiver",
            protocol="vole",
            exchange=exchange.format(tmp=tmp_path),
            workdir=workdir.format(tmp=tmp_path),
            exchange_key=EXCHANGE_KEY,
        )


def refused_before_anything_runs(spark: Any, tmp_path: Path, match: str, **options: Any) -> None:
    """`setwise.spark.run` of a receiver with `options` is refused with `match`, and
    nothing of the run was written."""
    df = spark.createDataFrame([("a",)], "email string")
    with pytest.raises(setwise.InputError, match=match):
        setwise.spark.run(
            spark,
            df,
            key="email",
            role="receiver",
            exchange=uri(tmp_path / "ex"),
            workdir=uri(tmp_path / "w"),
            exchange_key=EXCHANGE_KEY,
            **options,
        )
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    ("protocol", "live_memory", "match"),
    [
        ("ecdh", 1 << 30, "for the replayed protocols: ecdh keeps no role alive"),
        ("vole", -1, "0 to 2\\^64 - 1"),
        ("auto", True, "a whole number of bytes"),
    ],
)
def test_live_memory_is_checked_and_refused_where_no_role_is_kept(
    spark: Any, tmp_path: Path, protocol: str, live_memory: Any, match: str
) -> None:
    refused_before_anything_runs(spark, tmp_path, match, protocol=protocol, live_memory=live_memory)


@pytest.mark.parametrize(
    ("operation", "sum_to", "match"),
    [
        ("cardinality", "receiver", "for the sum operation, not cardinality"),
        ("sum", "both", "sender or receiver"),
    ],
)
def test_sum_to_is_checked_before_anything_runs(
    spark: Any, tmp_path: Path, operation: str, sum_to: str, match: str
) -> None:
    refused_before_anything_runs(
        spark, tmp_path, match, protocol="mqrpmt", operation=operation, sum_to=sum_to
    )


def test_vole_on_spark_serves_buckets_without_items(tmp_path: Path) -> None:
    """Three receiver rows in 16 buckets: most buckets (and maybe a whole task) hold
    none of its items, and their rounds still run."""
    sx, rx = rows("s", 0, 2_000), rows("r", 100, 3)
    s_pq, s_csv = write_inputs(tmp_path, "sender", sx)
    r_pq, _ = write_inputs(tmp_path, "receiver", rx)
    ex = tmp_path / "vole-few"
    s = vole_sender(tmp_path, s_pq, s_csv, ex)
    out = tmp_path / "r-out"
    paths = (uri(ex), uri(tmp_path / "r-work"), uri(out))
    r = party("receiver", r_pq, paths, tmp_path / "r.log", protocol="vole")
    wait_all({"s": s, "r": r}, tmp_path)
    xs = {k for _, k in sx if k}
    assert ids(out) == {i for i, k in rx if k and k in xs}


# --- on a standalone cluster --------------------------------------------------------------


class Site(NamedTuple):
    """The cluster both organisations submit to, the S3 server of their exchanges, and
    the directory of both."""

    spark: Any  # spark_cluster.Cluster
    s3: Any  # s3_server.Server
    work: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """A Spark standalone master and two workers (2 cores each) on this machine, shared by
    both organisations' drivers, each of which takes 2 cores (spark_party.py), and an S3
    server (s3_server.py) for their exchanges. The AWS variables stay set while the
    module runs, so each driver has them and passes them to its executors."""
    from s3_server import serving
    from spark_cluster import standalone

    work = tmp_path_factory.mktemp("cluster")
    with serving(work / "s3") as s3, standalone(work) as spark:
        yield Site(spark, s3, work)


def bucket_exchange(name: str) -> str:
    """A fresh prefix in the test server's bucket for one run's exchange."""
    from s3_server import BUCKET

    return f"s3://{BUCKET}/{name}-{os.urandom(4).hex()}"


class ClusterRun(NamedTuple):
    """One run's inputs and places on the cluster: each party's Parquet input and paths
    (exchange, workdir, output), the ids of the plain intersection and the number of keys
    both hold."""

    inputs: dict[str, Path]
    paths: dict[str, tuple[str, str, str]]
    want: set[str]
    common: int


def cluster_inputs(d: Path, protocol: str, op: str) -> ClusterRun:
    sx, rx = rows("s", 0, 8_000), rows("r", 3_000, 8_000)
    s_pq, _ = write_inputs(d, "sender", sx)
    r_pq, _ = write_inputs(d, "receiver", rx)
    xs = {k for _, k in sx if k}
    ex, out = bucket_exchange(f"{protocol}-{op}"), d / "r-out"
    return ClusterRun(
        inputs={"sender": s_pq, "receiver": r_pq},
        paths={
            "receiver": (ex, uri(d / "rw"), uri(out) if op == "intersection" else "-"),
            "sender": (ex, uri(d / "sw"), "-"),
        },
        want={i for i, k in rx if k and k in xs},
        common=len(xs & {k for _, k in rx if k}),
    )


def on_cluster(
    site: Site, run: ClusterRun, who: str, log: Path, *, op: str, protocol: str, **extra: str
) -> Any:
    """`who`'s driver, submitted to the cluster (its log in `log`)."""
    extra = {"SETWISE_SPARK_MASTER": site.spark.url, **extra}
    return party(who, run.inputs[who], run.paths[who], log, op, protocol=protocol, **extra)


def check_on_cluster(site: Site, logs: dict[str, Path], before: set[Path]) -> None:
    """Each driver ran on the cluster, its executors in the workers' directories."""
    for who, log in logs.items():
        text = log.read_text(errors="replace")
        assert f"setwise-spark {who}: master {site.spark.url}," in text, text[-2000:]
    assert len(set(site.work.glob("worker-*/app-*")) - before) >= 2, "an app per organisation"


def cluster_run(
    site: Site, d: Path, protocol: str, op: str, **sender_extra: str
) -> tuple[set[str], ClusterRun, str]:
    """Both organisations' drivers on the cluster, exchanging through a bucket: the ids
    the receiver's output holds (intersection), the run, and the receiver's log."""
    run = cluster_inputs(d, protocol, op)
    before = set(site.work.glob("worker-*/app-*"))
    logs = {who: d / f"{who}.log" for who in ("receiver", "sender")}
    procs = {
        "receiver": on_cluster(site, run, "receiver", logs["receiver"], op=op, protocol=protocol),
        "sender": on_cluster(
            site, run, "sender", logs["sender"], op=op, protocol=protocol, **sender_extra
        ),
    }
    wait_all(procs, d)
    check_on_cluster(site, logs, before)
    got = ids(d / "r-out") if op == "intersection" else set()
    return got, run, logs["receiver"].read_text(errors="replace")


def test_on_a_standalone_cluster_through_a_bucket_mqrpmt_counts_the_plain_intersection(
    cluster: Site, tmp_path: Path
) -> None:
    """Both organisations' jobs submitted to one standalone cluster (executors in the
    workers' JVMs, Python workers from the package's environment), exchanging through an
    S3 bucket that the driver and the executors reach themselves; the plain computation's
    count. (vole's run on the cluster is `late_peer`'s; ecdh's cluster path is Hadoop's
    FileSystem, as in local mode.)"""
    _, run, log = cluster_run(cluster, tmp_path, "mqrpmt", "cardinality")
    assert f"setwise-spark result: {run.common}\n" in log, log[-2000:]


def test_on_a_standalone_cluster_a_killed_executor_is_replaced_and_the_result_is_exact(
    cluster: Site, tmp_path: Path
) -> None:
    """vole through a bucket, with one of the sender's executors SIGKILLed in its stage 2
    as soon as a part of its first task is in the bucket (the hook
    SETWISE_SPARK_TEST_KILL_EXECUTOR): Spark runs the task again on another executor,
    whose role replays the run and writes the same parts (each is created once: different
    bytes would fail the run), and the answer is the plain intersection."""
    before = set(cluster.work.glob("worker-*/app-*"))
    got, run, _ = cluster_run(
        cluster, tmp_path, "vole", "intersection", SETWISE_SPARK_TEST_KILL_EXECUTOR="2"
    )
    assert (tmp_path / "sw" / "test-executor-killed-2").exists(), "the hook killed an executor"
    assert got == run.want
    # The sender's application lost an executor and was given another: three executor
    # directories (ids 0, 1 and the replacement) under one application.
    apps = set(cluster.work.glob("worker-*/app-*")) - before
    executors: dict[str, int] = {}
    for app in apps:
        executors[app.name] = executors.get(app.name, 0) + sum(
            1 for e in app.iterdir() if e.is_dir()
        )
    assert max(executors.values()) >= 3, executors


@pytest.fixture(scope="module")
def late_peer(cluster: Site, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """vole through a bucket on the cluster, the sender's driver killed after its stage 4
    (the hook SETWISE_SPARK_TEST_KILL_IN_STAGE) and started again only once the receiver,
    waiting for the sender's stage 5, has held no executor for 5 s: the receiver's
    executors go back to the cluster when idle (dynamic allocation), its tasks end after
    `linger` (2 s) without a round."""
    d = tmp_path_factory.mktemp("late")
    run = cluster_inputs(d, "vole", "intersection")
    before = set(cluster.work.glob("worker-*/app-*"))
    logs = {"receiver": d / "receiver.log", "sender": d / "sender-1.log"}
    waits = {"SETWISE_SPARK_DYNAMIC": "1", "SETWISE_SPARK_LINGER": "2"}
    r = on_cluster(
        cluster, run, "receiver", logs["receiver"], op="intersection", protocol="vole", **waits
    )
    s = on_cluster(
        cluster, run, "sender", logs["sender"], op="intersection", protocol="vole", **{KILL: "4"}
    )
    app: str | None = None

    def receiver_cores() -> int | None:
        """The cores the receiver's application holds now (None before it is known)."""
        nonlocal app
        if app is None:
            found = re.search(r"application (\S+)", logs["receiver"].read_text(errors="replace"))
            app = found.group(1) if found else None
        if app is None:
            return None
        apps = [a for a in cluster.spark.applications() if a["id"] == app]
        assert len(apps) == 1, f"{app} is not running on the master: {apps}"
        return int(apps[0]["cores"])

    try:
        before_kill: list[int] = []
        deadline = time.monotonic() + 600
        while s.poll() is None and time.monotonic() < deadline:
            assert r.poll() is None, logs["receiver"].read_text(errors="replace")[-3000:]
            if (c := receiver_cores()) is not None:
                before_kill.append(c)
            time.sleep(0.5)
        killed = s.wait(timeout=1)
        # The receiver's cores on the cluster from then on, every 0.5 s, until it has
        # held none for 5 s (11 looks), or a minute has gone by.
        cores: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (len(cores) >= 11 and not any(cores[-11:])):
            cores.append(receiver_cores() or 0)
            time.sleep(0.5)
        waiting = r.poll() is None
        logs["sender-2"] = d / "sender-2.log"
        s = on_cluster(cluster, run, "sender", logs["sender-2"], op="intersection", protocol="vole")
        wait_all({"receiver": r, "sender-2": s}, d)
    finally:
        for p in (r, s):
            if p.poll() is None:
                p.kill()
                p.wait()
    check_on_cluster(cluster, {k: v for k, v in logs.items() if k != "sender-2"}, before)
    return {
        "dir": d,
        "run": run,
        "killed": killed,
        "cores_before": before_kill,
        "cores": cores,
        "waiting": waiting,
        "got": ids(d / "r-out"),
        "logs": {k: v.read_text(errors="replace") for k, v in logs.items()},
    }


def test_on_a_standalone_cluster_vole_through_a_bucket_is_the_plain_intersection(
    late_peer: dict[str, Any],
) -> None:
    assert len(late_peer["run"].want) > 2_000
    assert late_peer["got"] == late_peer["run"].want


def test_on_a_standalone_cluster_a_late_peer_holds_no_executor_and_a_killed_driver_resumes(
    late_peer: dict[str, Any],
) -> None:
    """While the sender's driver was dead, the receiver's driver waited and its
    application held no executor for 5 s (it had held some before); the sender's second
    driver resumed after its last finished stage."""
    assert late_peer["killed"] == -signal.SIGKILL
    assert max(late_peer["cores_before"], default=0) > 0, "it held executors while it ran"
    cores = late_peer["cores"]
    assert len(cores) >= 11 and not any(cores[-11:]), cores
    assert late_peer["waiting"], "the receiver kept waiting for the sender"
    assert "waits for" in late_peer["logs"]["receiver"]
    again = late_peer["logs"]["sender-2"]
    assert "stage 4 (round 3) done" not in again, "finished stages are not run again"
    assert "stage 5 (round 4) done" in again, again[-2000:]


def test_on_a_standalone_cluster_a_damaged_peer_part_in_the_bucket_is_named(
    cluster: Site, late_peer: dict[str, Any]
) -> None:
    """The receiver's last stage run again on the cluster (its marker removed from the
    bucket, its rounds from its workdir) after a byte of the sender's part of bucket 3
    before it was flipped in the bucket, through the storage's own API: an executor's
    worker refuses it, and the driver's error names the stage, the bucket and the
    object's address."""
    run, d = late_peer["run"], late_peer["dir"]
    ex = run.paths["receiver"][0]
    done = [
        k for k in range(32) if staged_exchange_read(ex, f"stage-{k}/receiver.done.json", 1 << 20)
    ]
    last = max(done)
    cluster.s3.delete(f"{ex}/stage-{last}/receiver.done.json")
    shutil.rmtree(d / "rw" / "rounds" / f"stage-{last}")
    name = f"stage-{last - 1}/sender/part-00003.bin"
    data = bytearray(staged_exchange_read(ex, name, 1 << 30) or b"")
    assert data, f"{name} is in the bucket"
    data[-1] ^= 0x01
    cluster.s3.replace(f"{ex}/{name}", bytes(data))
    log = d / "receiver-damaged.log"
    r = on_cluster(
        cluster, run, "receiver", log, op="intersection", protocol="vole", SETWISE_SPARK_LINGER="2"
    )
    assert r.wait(timeout=600) != 0, "the receiver refuses the damaged part"
    text = log.read_text(errors="replace")
    assert f"the sender's stage {last - 1} message, bucket 3" in text, text[-3000:]
    assert f"{ex}/{name}: digest mismatch" in text, text[-3000:]
