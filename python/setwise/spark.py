"""Staged ecdh runs on PySpark: each organisation runs its own Spark job, and the two
meet only through files in a shared exchange location (docs/scale-out.md).

:func:`run` runs this party's stages in order, waiting for the peer's markers between
them. The per-bucket work runs in the executors through the native module
(``StagedPlan``: the crypto, the message format and the digests are Rust's, the same as
``setwise stage``); the messages are Parquet files with binary columns (``part``,
``chunk``, ``payload``: one stream frame per row) that Spark itself writes, so any
storage Spark can write works. The driver reads and writes the small files (hellos,
markers, the seed, the journal) through the Hadoop FileSystem API, or, on a local path,
through the native module as ``setwise stage`` does (no links followed, bounded reads).
Markers and abort notes are sealed and checked under the exchange key both operators
hold (``exchange_key=``; :func:`new_exchange_key` or ``setwise stage keygen`` makes one).

pyspark is imported only inside :func:`run`, so the package works without it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import signal
import time
from typing import TYPE_CHECKING, Any, Callable

from ._setwise import (
    STAGED_DEFAULT_PROTOCOL,
    Error,
    InputError,
    NetworkError,
    PeerError,
    StagedPlan,
    __version__,
    protocol_spec,
    staged_abort_note,
    staged_count_matches,
    staged_exchange_key_fingerprint,
    staged_fingerprint,
    staged_fingerprint_combine,
    staged_hello,
    staged_new_exchange_key,
    staged_new_seed,
    staged_part_digest,
    staged_read_abort,
    staged_read_local,
    staged_read_marker,
    staged_seal_marker,
    staged_shown,
    staged_split_values,
    staged_write_local,
)
from ._spark_rounds import PrivateIdResult, SumResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["PrivateIdResult", "SumResult", "new_exchange_key", "run"]

log = logging.getLogger("setwise.spark")

FORMAT = "setwise-staged/v2"
STAGES = {"receiver": (0, 1, 3), "sender": (0, 1, 2)}
NAMES = {0: "hello", 1: "blind", 2: "re-blind", 3: "finish"}
MESSAGE_SCHEMA = "chunk int, payload binary, part int"
# The column the items are computed into (dropped from the result).
ITEM = "__setwise_item"
# Testing only: the stage after whose data this driver kills itself (SIGKILL), before
# the stage's marker, to test resumption. Never set it in production.
KILL_HOOK = "SETWISE_SPARK_TEST_KILL_IN_STAGE"
MAX_SMALL_FILE = 1 << 24
HOW_TO_MAKE = (
    "make one with setwise.spark.new_exchange_key() or `setwise stage keygen FILE` "
    "(32 random bytes, 64 hexadecimal digits) and give both operators the same key over a "
    "channel they trust"
)


def new_exchange_key() -> str:
    """A new exchange key (64 hexadecimal digits) for the two operators of a run to share:
    every marker and abort note each party writes is authenticated under it."""
    return staged_new_exchange_key()


ERROR_LINE = re.compile(
    r"(?:setwise\._setwise\.)?(PeerError|InputError|NetworkError|Error): (stage \d.*)"
)


def _peer(role: str) -> str:
    return "sender" if role == "receiver" else "receiver"


def _head(stage: int, role: str) -> str:
    return f"stage {stage} ({role}: {NAMES[stage]})"


class _Storage:
    """Small files through the Hadoop FileSystem API (file:, hdfs:, s3a:, gs: alike)."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = getattr(spark, "_jvm", None)
        if jvm is None:
            raise InputError(
                "setwise.spark needs a classic SparkSession (Spark Connect sessions have no "
                "JVM to reach the storage through)"
            )
        self.jvm = jvm
        self.conf = spark._jsc.hadoopConfiguration()

    def _path(self, p: str) -> tuple[Any, Any]:
        jp = self.jvm.org.apache.hadoop.fs.Path(p)
        return jp.getFileSystem(self.conf), jp

    def _local(self, p: str, root: str) -> tuple[str, str] | None:
        """`p` and `root` as local paths when `p` is on the local filesystem, else None."""
        fs, jp = self._path(p)
        if str(fs.getScheme()) != "file":
            return None
        local = str(jp.toUri().getPath())
        base = str(self.jvm.org.apache.hadoop.fs.Path(root).toUri().getPath())
        return local, base

    def exists(self, p: str) -> bool:
        fs, jp = self._path(p)
        return bool(fs.exists(jp))

    def read(self, p: str, root: str, limit: int = MAX_SMALL_FILE) -> bytes | None:
        """`p` (below `root`, the exchange or the workdir) whole, at most `limit` bytes;
        None if absent. A local file is read as `setwise stage` reads it (a regular file,
        no link followed below `root`, a FIFO never waited on); elsewhere (object stores,
        HDFS: no links, no FIFOs) the file's status must say a file of at most `limit`
        bytes, and no more than that is read."""
        local = self._local(p, root)
        if local is not None:
            return staged_read_local(local[1], local[0], limit)
        fs, jp = self._path(p)
        if not fs.exists(jp):
            return None
        status = fs.getFileStatus(jp)
        if not status.isFile():
            raise PeerError(f"{p}: not a regular file")
        size = int(status.getLen())
        if size > limit:
            raise PeerError(f"{p}: {size} bytes, more than the {limit} it can hold")
        stream = fs.open(jp)
        try:
            # Exactly the size the status gave: a file that grew since is not read further.
            return bytes(self.jvm.org.apache.commons.io.IOUtils.toByteArray(stream, size))
        finally:
            stream.close()

    def write(self, p: str, data: bytes, root: str) -> None:
        """Writes `p` (below `root`) whole: on a local path as `setwise stage` does (no
        link followed below `root`), elsewhere to a temporary name, then renamed."""
        local = self._local(p, root)
        if local is not None:
            staged_write_local(local[1], local[0], data)
            return
        fs, jp = self._path(p)
        tmp = self.jvm.org.apache.hadoop.fs.Path(f"{p}.{secrets.token_hex(6)}.tmp")
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        if fs.exists(jp):
            fs.delete(jp, False)
        if not fs.rename(tmp, jp):
            fs.delete(tmp, False)
            raise InputError(f"{p}: could not be written (rename refused)")

    def create_private(self, p: str, data: bytes) -> bool:
        """Creates `p` exclusively with permission 0600 set before its bytes are written;
        False if it exists."""
        fs, jp = self._path(p)
        perm = self.jvm.org.apache.hadoop.fs.permission.FsPermission.createImmutable
        parent = jp.getParent()
        fs.mkdirs(parent, perm(0o700))
        fs.setPermission(parent, perm(0o700))
        if fs.exists(jp):
            return False
        try:
            out = fs.create(jp, False)
        except Exception as e:
            if "AlreadyExists" in str(e) or fs.exists(jp):
                return False
            raise
        try:
            fs.setPermission(jp, perm(0o600))
            out.write(bytearray(data))
        finally:
            out.close()
        return True

    def mode(self, p: str) -> int:
        fs, jp = self._path(p)
        return int(fs.getFileStatus(jp).getPermission().toShort())

    def delete(self, p: str) -> None:
        fs, jp = self._path(p)
        fs.delete(jp, True)


class _Run:
    """One party's side of a staged run: paths, settings, the stages."""

    def __init__(
        self,
        *,
        spark: SparkSession,
        df: DataFrame,
        key: str,
        role: str,
        protocol: str,
        exchange: str,
        workdir: str,
        operation: str,
        run_id: str,
        buckets: str,
        bucket_key: str | None,
        exchange_key: bytes,
        timeout: float,
        poll: float,
        sum_to: str = "sender",
    ) -> None:
        self.spark, self.df, self.key, self.role = spark, df, key, role
        self.protocol = protocol
        self.peer = _peer(role)
        self.ex, self.wd = exchange.rstrip("/"), workdir.rstrip("/")
        self.op, self.run_id, self.buckets, self.bucket_key = operation, run_id, buckets, bucket_key
        self.sum_to = sum_to
        self.timeout, self.poll = timeout, poll
        self.xkey = exchange_key
        self.fs = _Storage(spark)
        self.attempt = secrets.token_hex(8)
        self._seed: bytes | None = None
        self._plan: StagedPlan | None = None

    # --- paths --------------------------------------------------------------------

    def marker_path(self, stage: int, role: str) -> str:
        return f"{self.ex}/stage-{stage}/{role}.done.json"

    def data_path(self, stage: int, role: str) -> str:
        return f"{self.ex}/stage-{stage}/{role}"

    # --- items --------------------------------------------------------------------

    def items(self) -> DataFrame:
        """The distinct non-empty keys as binary, as the CLI takes CSV fields: as they
        are, no trimming or case folding."""
        from pyspark.sql import functions as F

        if self.key not in self.df.columns:
            raise InputError(f"key column '{self.key}' is not in the DataFrame ({self.df.columns})")
        item = F.col(self.key).cast("string").cast("binary")
        return (
            self.df.select(item.alias("item"))
            .where(F.col("item").isNotNull() & (F.length("item") > 0))
            .distinct()
        )

    def with_item(self) -> DataFrame:
        from pyspark.sql import functions as F

        return self.df.withColumn(ITEM, F.col(self.key).cast("string").cast("binary"))

    def fingerprint(self, items: DataFrame) -> tuple[int, str]:
        import pyarrow as pa

        def batch(batches: Any) -> Any:
            for rb in batches:
                n, s = staged_fingerprint(rb.column(0))
                yield pa.RecordBatch.from_arrays(
                    [pa.array([n], pa.int64()), pa.array([s], pa.binary())], names=["n", "s"]
                )

        rows = items.mapInArrow(batch, "n long, s binary").collect()
        parts = [(int(r["n"]), bytes(r["s"])) for r in rows]
        return sum(n for n, _ in parts), staged_fingerprint_combine(1, parts)

    # --- workdir state ------------------------------------------------------------

    def read_json(self, name: str) -> Any:
        data = self.fs.read(f"{self.wd}/{name}", self.wd)
        if data is None:
            return None
        try:
            return json.loads(data)
        except ValueError as e:
            raise InputError(f"{self.wd}/{name}: damaged ({e})") from e

    def seed(self) -> bytes:
        if self._seed is None:
            path = f"{self.wd}/seed.bin"
            if self.fs.exists(path) and self.fs.mode(path) & 0o077:
                raise InputError(f"{path}: the run seed must be readable by its owner only (0600)")
            data = self.fs.read(path, self.wd, 32)
            if data is None or len(data) != 32:
                raise InputError(
                    f"{path}: the run seed is lost or damaged, and with it the run: start a new "
                    "run with a new run id and exchange"
                )
            self._seed = data
        return self._seed

    def consume(self, stage: int, key: str, digest: str, what: str) -> None:
        journal: dict[str, str] = self.read_json("journal.json") or {}
        if key in journal:
            if journal[key] != digest:
                raise PeerError(
                    f"{_head(stage, self.role)}, {what}: changed since this side consumed it; "
                    "continuing would reuse secrets on other messages: start a new run"
                )
            return
        journal[key] = digest
        self.fs.write(f"{self.wd}/journal.json", json.dumps(journal, indent=2).encode(), self.wd)

    # --- markers ------------------------------------------------------------------

    def read_marker(self, stage: int, role: str) -> tuple[dict[str, Any], str] | None:
        """`role`'s marker of `stage`, authenticated (its MAC checked before its fields)."""
        path = self.marker_path(stage, role)
        data = self.fs.read(path, self.ex)
        if data is None:
            return None
        text, digest = staged_read_marker(data, stage, role, path, self.run_id, self.xkey)
        marker: dict[str, Any] = json.loads(text)
        return marker, digest

    def write_marker(self, stage: int, session: str, parts: list[tuple[int, int, str]]) -> None:
        marker = {
            "format": FORMAT,
            "run": self.run_id,
            "protocol": self.protocol,
            "operation": self.op,
            "stage": stage,
            "role": self.role,
            "session": session,
            "parts": [{"items": i, "bytes": b, "digest": d} for i, b, d in parts],
            "attempt": self.attempt,
            "setwise": __version__,
        }
        sealed = staged_seal_marker(json.dumps(marker), self.run_id, self.xkey)
        self.fs.write(self.marker_path(stage, self.role), sealed.encode(), self.ex)

    def abort(self, error: str) -> None:
        note = staged_abort_note(self.run_id, self.role, error, self.xkey)
        try:
            self.fs.write(f"{self.ex}/abort-{self.role}.json", note, self.ex)
        except Exception:  # the error itself matters more than this note
            log.warning("setwise %s: could not write the abort note", self.run_id)

    def peer_abort(self) -> str | None:
        """Why the peer stopped the run, if it did: its note authenticated (a forged one is
        refused by name), the reason escaped and bounded."""
        path = f"{self.ex}/abort-{self.peer}.json"
        data = self.fs.read(path, self.ex, 1 << 20)
        if data is None:
            return None
        return staged_read_abort(data, self.peer, path, self.run_id, self.xkey)

    # --- waiting ------------------------------------------------------------------

    def needs(self, stage: int) -> list[tuple[int, str]]:
        if stage == 0:
            return []
        if stage == 1:
            return [(0, self.peer)]
        if stage == 2:
            return [(1, "receiver")]
        return [(1, "sender"), (2, "sender")]

    def wait(self, stage: int) -> None:
        started = time.monotonic()
        told = started
        pause = min(self.poll, 0.2)
        for s, r in self.needs(stage):
            path = self.marker_path(s, r)
            first = True
            while True:
                why = self.peer_abort()
                if why is not None:
                    raise PeerError(
                        f"{_head(stage, self.role)}: the {self.peer} stopped the run: {why}"
                    )
                if self.fs.exists(path):
                    break
                waited = time.monotonic() - started
                if first:
                    log.info(
                        "setwise %s: %s stage %d (%s) waits for %s",
                        self.run_id,
                        self.role,
                        stage,
                        NAMES[stage],
                        path,
                    )
                    first = False
                if waited >= self.timeout:
                    raise NetworkError(
                        f"{_head(stage, self.role)}: gave up after {self.timeout:.0f} s waiting "
                        f"for {path} (the run resumes with the same call)"
                    )
                if time.monotonic() - told >= 60:
                    log.info(
                        "setwise %s: still waiting for %s, %d min of %d min",
                        self.run_id,
                        path,
                        waited // 60,
                        self.timeout // 60,
                    )
                    told = time.monotonic()
                time.sleep(pause)
                pause = min(pause * 2, self.poll)

    # --- the plan -----------------------------------------------------------------

    def settings(self) -> tuple[str, str, int, str, str | None]:
        return (self.run_id, self.op, 1, self.buckets, self.bucket_key)

    def plan(self, stage: int, size: int) -> StagedPlan:
        if self._plan is None:
            ours = staged_hello(*self.settings(), self.role, size, self.seed())
            got = self.read_marker(0, self.peer)
            what = f"the {self.peer}'s hello (stage 0)"
            if got is None:
                raise PeerError(f"{_head(stage, self.role)}, {what}: its marker is not there")
            marker, digest = got
            parts = marker["parts"]
            if len(parts) != 1:
                raise PeerError(
                    f"{_head(stage, self.role)}, {what}: the marker must list one hello"
                )
            hello = self.fs.read(f"{self.ex}/stage-0/{self.peer}.hello", self.ex, 1 << 16)
            if hello is None:
                raise PeerError(f"{_head(stage, self.role)}, {what}: message missing")
            check = staged_part_digest("", 0, self.peer, 0, hello)
            if len(hello) != parts[0]["bytes"] or check != parts[0]["digest"]:
                raise PeerError(
                    f"{_head(stage, self.role)}, {what}: digest mismatch (damaged or replaced)"
                )
            self.consume(stage, f"stage-0/{self.peer}", digest, what)
            try:
                self._plan = StagedPlan(*self.settings(), ours, hello)
            except Error as e:
                raise type(e)(f"{_head(stage, self.role)}: {e}") from None
        return self._plan

    def peer_parts(
        self, stage: int, plan: StagedPlan, peer_stage: int, total: int
    ) -> dict[int, tuple[int, int, str]]:
        """The peer's marker of `peer_stage`, checked (run, session, B parts, their total),
        journaled; its entries by part. Parts the marker lists but the exchange lacks are
        an error naming the bucket."""
        what = f"the {self.peer}'s stage {peer_stage} message"
        head = f"{_head(stage, self.role)}, {what}"
        got = self.read_marker(peer_stage, self.peer)
        if got is None:
            raise PeerError(f"{head}: its marker is not there")
        m, digest = got
        if m["run"] != self.run_id or m["session"] != plan.session:
            run, session = staged_shown(str(m["run"])), staged_shown(str(m["session"]))
            raise PeerError(
                f"{head}: the marker is for run {run} session {session}, not this run's"
            )
        parts = m["parts"]
        if len(parts) != plan.buckets:
            raise PeerError(
                f"{head}: the marker lists {len(parts)} parts, not the {plan.buckets} agreed"
            )
        got_total = sum(int(p["items"]) for p in parts)
        if got_total != total:
            raise PeerError(f"{head}: {got_total} items, the hello announced {total}")
        self.consume(stage, f"stage-{peer_stage}/{self.peer}", digest, what)
        infos = {
            i: (int(p["items"]), int(p["bytes"]), str(p["digest"])) for i, p in enumerate(parts)
        }
        base = self.data_path(peer_stage, self.peer)
        for i, (items, _, _) in infos.items():
            if items > 0 and not self.fs.exists(f"{base}/part={i}"):
                raise PeerError(
                    f"{head}, bucket {i}: message missing "
                    f"({base}/part={i} is listed in the marker but absent)"
                )
        return infos

    # --- Spark jobs ---------------------------------------------------------------

    def job(self, stage: int, action: Callable[[], Any], peer_stage: int | None = None) -> Any:
        """Runs a Spark action; an executor's setwise error comes back as that error,
        and a peer message Spark cannot read names its bucket."""
        try:
            return action()
        except Error:
            raise
        except Exception as e:
            text = str(e)
            found = ERROR_LINE.findall(text)
            if found:
                kind, msg = found[-1]
                cls = {
                    "PeerError": PeerError,
                    "InputError": InputError,
                    "NetworkError": NetworkError,
                }
                raise cls.get(kind, Error)(msg.strip()) from None
            part = re.search(r"part=(\d+)", text)
            if peer_stage is not None and part:
                first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
                raise PeerError(
                    f"{_head(stage, self.role)}, the {self.peer}'s stage {peer_stage} message, "
                    f"bucket {part.group(1)}: unreadable ({first[:300]})"
                ) from None
            raise

    def write_message(self, stage: int, msg: DataFrame, peer_stage: int | None = None) -> None:
        out = self.data_path(stage, self.role)
        self.job(
            stage,
            lambda: (
                msg.write.mode("overwrite")
                .option("compression", "none")
                .option("parquet.enable.dictionary", "false")
                .partitionBy("part")
                .parquet(out)
            ),
            peer_stage,
        )
        kill = os.environ.get(KILL_HOOK)
        if kill is not None and kill == str(stage):
            log.warning("setwise: %s set: killing this driver inside stage %d", KILL_HOOK, stage)
            os.kill(os.getpid(), signal.SIGKILL)

    def summarize(self, stage: int, plan: StagedPlan) -> list[tuple[int, int, str]]:
        """This party's marker entries, read back from what Spark wrote."""
        import pyarrow as pa

        def one(key: Any, t: Any) -> Any:
            part = key[0].as_py()
            t = t.sort_by("chunk")
            items, nbytes, digest = plan.summarize(stage, part, t.column("payload").to_pylist())
            return pa.table(
                {
                    "part": pa.array([part], pa.int32()),
                    "items": pa.array([items], pa.int64()),
                    "bytes": pa.array([nbytes], pa.int64()),
                    "digest": pa.array([digest], pa.string()),
                }
            )

        back = self.spark.read.schema(MESSAGE_SCHEMA).parquet(self.data_path(stage, self.role))
        rows = self.job(
            stage,
            lambda: (
                back.groupBy("part")
                .applyInArrow(one, "part int, items long, bytes long, digest string")
                .collect()
            ),
        )
        got = {int(r["part"]): (int(r["items"]), int(r["bytes"]), str(r["digest"])) for r in rows}
        for p in range(plan.buckets):
            got.setdefault(p, (0, 0, staged_part_digest(plan.session, stage, self.role, p, b"")))
        return [got[p] for p in range(plan.buckets)]

    def bucketed(self, items: DataFrame, plan: StagedPlan) -> DataFrame:
        import pyarrow as pa

        def add(batches: Any) -> Any:
            for rb in batches:
                col = rb.column(0)
                buf = pa.py_buffer(plan.bucket_of(col))
                b = pa.Array.from_buffers(pa.int32(), len(col), [None, buf])
                yield pa.RecordBatch.from_arrays([col, b], names=["item", "part"])

        return items.mapInArrow(add, "item binary, part int")

    # --- stages -------------------------------------------------------------------

    def hello(self, size: int, fingerprint: str) -> None:
        seed_path = f"{self.wd}/seed.bin"
        if not self.fs.exists(seed_path) or self.fs.read(seed_path, self.wd, 32) == b"":
            if self.fs.exists(seed_path):  # an empty seed left by a crash before any hello
                self.fs.delete(seed_path)
            self.fs.create_private(seed_path, staged_new_seed())
        record = self.record(size, fingerprint)
        self.fs.write(f"{self.wd}/run.json", json.dumps(record, indent=2).encode(), self.wd)
        hello = staged_hello(*self.settings(), self.role, size, self.seed())
        self.fs.write(f"{self.ex}/stage-0/{self.role}.hello", hello, self.ex)
        digest = staged_part_digest("", 0, self.role, 0, hello)
        self.write_marker(0, "", [(1, len(hello), digest)])

    def record(self, size: int, fingerprint: str) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "run": self.run_id,
            "role": self.role,
            "protocol": self.protocol,
            "operation": self.op,
            "key_columns": 1,
            "buckets": self.buckets,
            "bucket_key": "operators" if self.bucket_key else "session",
            "exchange_key": staged_exchange_key_fingerprint(self.xkey),
            "items": size,
            "input": fingerprint,
        }

    def blind(self, items: DataFrame, size: int) -> None:
        import pyarrow.compute as pc

        plan, seed = self.plan(1, size), self.seed()

        def one(key: Any, t: Any) -> Any:
            part = key[0].as_py()
            col = t.column("item").combine_chunks()
            col = pc.take(col, pc.sort_indices(col))  # the receiver's order, again in its finish
            frames = plan.blind(seed, part, col)
            return _frames_table(part, frames)

        def raw(key: Any, t: Any) -> Any:
            part = key[0].as_py()
            return _pieces_table(
                part, plan.mix_split(plan.raw(seed, part, items=t.column("item").combine_chunks()))
            )

        grouped = self.bucketed(items, plan).groupBy("part")
        if self.op == "cardinality" and self.role == "sender":
            msg = self.mixed(grouped.applyInArrow(raw, PIECES), plan, 1)
        else:
            msg = grouped.applyInArrow(one, "part int, chunk int, payload binary")
        self.write_message(1, msg)
        self.write_marker(1, plan.session, self.summarize(1, plan))

    def reblind(self, size: int) -> None:
        from pyspark.sql import functions as F

        plan, seed = self.plan(2, size), self.seed()
        infos = self.peer_parts(2, plan, 1, plan.receiver_size)
        head = f"{_head(2, self.role)}, the receiver's stage 1 message"

        def one(key: Any, t: Any) -> Any:
            part = key[0].as_py()
            chunks = t.sort_by("chunk").column("payload").to_pylist()
            if part not in infos:
                raise PeerError(f"{head}, bucket {part}: not one of the {plan.buckets} agreed")
            return _frames_table(part, plan.reblind(seed, part, chunks, infos[part]))

        peer = self.spark.read.schema(MESSAGE_SCHEMA).parquet(self.data_path(1, "receiver"))
        peer = peer.where(F.col("part").isNotNull())

        def raw(key: Any, t: Any) -> Any:
            part = key[0].as_py()
            if part not in infos:
                raise PeerError(f"{head}, bucket {part}: not one of the {plan.buckets} agreed")
            chunks = t.sort_by("chunk").column("payload").to_pylist()
            points = plan.raw(seed, part, chunks=chunks, info=infos[part])
            return _pieces_table(part, plan.mix_split(points))

        if self.op == "cardinality":
            msg = self.mixed(peer.groupBy("part").applyInArrow(raw, PIECES), plan, 2)
        else:
            msg = peer.groupBy("part").applyInArrow(one, "part int, chunk int, payload binary")
        self.write_message(2, msg, peer_stage=1)
        self.write_marker(2, plan.session, self.summarize(2, plan))

    def mixed(self, pieces: DataFrame, plan: StagedPlan, stage: int) -> DataFrame:
        """Cardinality, sender: the message of each mixed part from its pieces."""

        def one(key: Any, t: Any) -> Any:
            part = key[0].as_py()
            return _frames_table(part, plan.frame_sorted(stage, t.column("points").to_pylist()))

        return pieces.groupBy("part").applyInArrow(one, "part int, chunk int, payload binary")

    def count(self, size: int) -> None:
        """Cardinality, the receiver's finish: b·(a·H(x)) meets a·b·H(y) by value, in
        groups by the values' first byte; only the count comes back."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        plan, seed = self.plan(3, size), self.seed()
        infos = {
            1: self.peer_parts(3, plan, 1, plan.sender_size),
            2: self.peer_parts(3, plan, 2, plan.receiver_size),
        }
        head = f"{_head(3, self.role)}, the sender's messages"
        groups = max(1, min(256, 2 * plan.buckets))

        def open_parts(key: Any, t: Any) -> Any:
            part = key[0].as_py()
            if part not in infos[1]:
                raise PeerError(f"{head}, part {part}: not one of the {plan.buckets} agreed")
            t = t.sort_by("chunk")
            g, m, v = [], [], []
            for stage in (1, 2):
                chunks = [
                    p
                    for k, p in zip(t.column("msg").to_pylist(), t.column("payload").to_pylist())
                    if k == stage
                ]
                values = plan.open_part(seed, stage, part, chunks, infos[stage][part])
                for group, piece in staged_split_values(values, groups):
                    g.append(group)
                    m.append(stage)
                    v.append(piece)
            return pa.table(
                {
                    "g": pa.array(g, pa.int32()),
                    "msg": pa.array(m, pa.int32()),
                    "v": pa.array(v, pa.binary()),
                }
            )

        def matches(key: Any, t: Any) -> Any:
            msg, v = t.column("msg").to_pylist(), t.column("v").to_pylist()
            sender = [p for k, p in zip(msg, v) if k == 1]
            own = [p for k, p in zip(msg, v) if k == 2]
            return pa.table({"n": pa.array([staged_count_matches(sender, own)], pa.int64())})

        read = self.spark.read.schema(MESSAGE_SCHEMA)
        peer = read.parquet(self.data_path(1, "sender")).withColumn("msg", F.lit(1))
        peer = peer.unionByName(
            read.parquet(self.data_path(2, "sender")).withColumn("msg", F.lit(2))
        )
        peer = peer.where(F.col("part").isNotNull())
        values = peer.groupBy("part").applyInArrow(open_parts, "g int, msg int, v binary")
        counts = values.groupBy("g").applyInArrow(matches, "n long")
        rows = self.job(3, lambda: counts.agg(F.sum("n").alias("n")).collect(), 2)
        n = int(rows[0]["n"] or 0)
        self.fs.write(
            f"{self.wd}/result.json",
            json.dumps({"operation": self.op, "size": n}).encode(),
            self.wd,
        )
        self.write_marker(3, plan.session, [])

    def finish(self, items: DataFrame, size: int) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        plan, seed = self.plan(3, size), self.seed()
        s1 = self.peer_parts(3, plan, 1, plan.sender_size)
        s2 = self.peer_parts(3, plan, 2, plan.receiver_size)
        head = f"{_head(3, self.role)}, the sender's messages"

        def one(key: Any, own: Any, peer: Any) -> Any:
            part = key[0].as_py()
            col = own.column("item").combine_chunks()
            col = pc.take(col, pc.sort_indices(col))  # the order of its stage-1 message
            peer = peer.sort_by("chunk")
            msg = peer.column("msg").to_pylist()
            payload = peer.column("payload").to_pylist()
            c1 = [p for m, p in zip(msg, payload) if m == 1]
            c2 = [p for m, p in zip(msg, payload) if m == 2]
            if part not in s1 or part not in s2:
                raise PeerError(f"{head}, bucket {part}: not one of the {plan.buckets} agreed")
            hits = plan.finish(seed, part, len(col), c1, s1[part], c2, s2[part])
            return pa.table({"item": pc.take(col, pa.array(hits, pa.uint32()))})

        read = self.spark.read.schema(MESSAGE_SCHEMA)
        peer = read.parquet(self.data_path(1, "sender")).withColumn("msg", F.lit(1))
        peer = peer.unionByName(
            read.parquet(self.data_path(2, "sender")).withColumn("msg", F.lit(2))
        )
        peer = peer.where(F.col("part").isNotNull())
        own = self.bucketed(items, plan)
        hits = own.groupBy("part").cogroup(peer.groupBy("part")).applyInArrow(one, "item binary")
        out = f"{self.wd}/result"
        self.job(
            3, lambda: hits.write.mode("overwrite").option("compression", "none").parquet(out), 2
        )
        matched = self.spark.read.schema("item binary").parquet(out).count()
        result = {"operation": self.op, "size": matched}
        self.fs.write(f"{self.wd}/result.json", json.dumps(result).encode(), self.wd)
        kill = os.environ.get(KILL_HOOK)
        if kill is not None and kill == "3":
            os.kill(os.getpid(), signal.SIGKILL)
        self.write_marker(3, plan.session, [])

    def result(self) -> DataFrame | int:
        if self.op == "cardinality":
            got = self.read_json("result.json")
            if not isinstance(got, dict) or not isinstance(got.get("size"), int):
                raise InputError(f"{self.wd}/result.json: missing or damaged")
            return int(got["size"])
        matched = self.spark.read.schema("item binary").parquet(f"{self.wd}/result")
        rows = self.with_item()
        return rows.join(matched.withColumnRenamed("item", ITEM), ITEM, "left_semi").drop(ITEM)

    # --- the whole run ------------------------------------------------------------

    def go(self) -> DataFrame | int | None:
        # Each stage reads the distinct items again: keep them (the input is read once).
        items = self.items().persist()
        try:
            return self.stages(items)
        finally:
            items.unpersist()

    def stages(self, items: DataFrame) -> DataFrame | int | None:
        size, fingerprint = self.fingerprint(items)
        old = self.read_json("run.json")
        new = self.record(size, fingerprint)
        if old is not None and old != new:
            changed = [k for k in new if old.get(k) != new[k]]
            raise InputError(
                f"the input or settings changed since stage 0 of run {self.run_id} "
                f"({', '.join(changed)}): a run must use the input it started with "
                "(start a new run for a new input)"
            )
        started = time.monotonic()
        for stage in STAGES[self.role]:
            if self.read_marker(stage, self.role) is not None:
                log.info(
                    "setwise %s: %s stage %d (%s) already done",
                    self.run_id,
                    self.role,
                    stage,
                    NAMES[stage],
                )
                continue
            t = time.monotonic()
            try:
                # Inside the try: a refusal of the peer's marker or note while waiting is
                # told to the peer too.
                self.wait(stage)
                t = time.monotonic()
                if stage == 0:
                    self.hello(size, fingerprint)
                elif stage == 1:
                    self.blind(items, size)
                elif stage == 2:
                    self.reblind(size)
                elif self.op == "cardinality":
                    self.count(size)
                else:
                    self.finish(items, size)
            except PeerError as e:
                if "stopped the run" not in str(e):
                    self.abort(str(e))
                raise
            log.info(
                "setwise %s: %s stage %d (%s) done in %.1f s",
                self.run_id,
                self.role,
                stage,
                NAMES[stage],
                time.monotonic() - t,
            )
        log.info(
            "setwise %s: %s finished (%.1f s this call)",
            self.run_id,
            self.role,
            time.monotonic() - started,
        )
        return self.result() if self.role == "receiver" else None


PIECES = "part int, src int, points binary"


def _pieces_table(src: int, pieces: list[tuple[int, bytes]]) -> Any:
    """Cardinality, sender: bucket `src`'s points as pieces by the part they go to."""
    import pyarrow as pa

    return pa.table(
        {
            "part": pa.array([p for p, _ in pieces], pa.int32()),
            "src": pa.array([src] * len(pieces), pa.int32()),
            "points": pa.array([b for _, b in pieces], pa.binary()),
        }
    )


def _frames_table(part: int, frames: list[bytes]) -> Any:
    import pyarrow as pa

    n = len(frames)
    return pa.table(
        {
            "part": pa.array([part] * n, pa.int32()),
            "chunk": pa.array(range(n), pa.int32()),
            "payload": pa.array(frames, pa.binary()),
        }
    )


def _check_sum(operation: str, role: str, value: str | None, sum_to: str) -> None:
    """Refuses a `sum` without its values, values or `sum_to` where no sum is."""
    holder = operation == "sum" and role == "sender"
    if holder and value is None:
        raise InputError("the sender of sum holds the values: give value=COLUMN")
    if value is not None and not holder:
        raise InputError(f"value= is for the sender of sum, not the {role} of {operation}")
    if sum_to not in ("sender", "receiver"):
        raise InputError(f"sum_to={sum_to!r}: sender or receiver")
    if sum_to != "sender" and operation != "sum":
        raise InputError(f"sum_to={sum_to!r} is for the sum operation, not {operation}")


def run(
    spark: SparkSession,
    df: DataFrame,
    *,
    key: str,
    role: str,
    protocol: str = STAGED_DEFAULT_PROTOCOL,
    exchange: str,
    workdir: str,
    operation: str = "intersection",
    run_id: str | None = None,
    buckets: int | str = "auto",
    bucket_key: str | None = None,
    exchange_key: str | bytes | None = None,
    timeout: float = 86_400.0,
    poll: float = 2.0,
    linger: float = 60.0,
    live_memory: int | None = None,
    value: str | None = None,
    value_bound: int = 2**32 - 1,
    sum_to: str = "sender",
) -> DataFrame | int | SumResult | PrivateIdResult | None:
    """Runs this organisation's side of a staged run. Returns, for the receiver, its
    matching rows of `df` as a DataFrame (`intersection`), their number as an int
    (`cardinality`, and `sum`), or X ∪ Y as a DataFrame of one column named `key`
    (`union`: the own distinct keys and the sender's others); for the sender of `sum`
    a :class:`SumResult` (the cardinality and the sum of its values over X ∩ Y), or for
    its receiver with ``sum_to="receiver"``; for both parties of `private-id` a
    :class:`PrivateIdResult` (its rows with their IDs, and the IDs of X ∪ Y); None for
    the sender of the others.

    - `key`: the key column (taken as text, as the CLI takes a CSV field: no trimming;
      null and empty keys take no part).
    - `role`: ``"receiver"`` (learns the matching rows) or ``"sender"``.
    - `protocol`: ``"auto"`` (the default: ``"vole"`` for intersection, ``"mqrpmt"`` for
      the others, picked from both set sizes once the peer's hello is in; a peer that
      names a replayed protocol is followed), ``"ecdh"`` (its own stages: the exchange may
      be on any storage Spark writes), or one the runner replays (``"vole"``:
      intersection; ``"mqrpmt"``: intersection, cardinality, sum, union, private-id;
      ``"compact"``: intersection), as ``setwise stage`` runs them. The replayed ones
      (``"auto"`` too) run in one Spark job whose tasks keep each bucket's role alive
      between stages; the workdir must then be a path every executor mounts at the same
      place, and the exchange such a path or ``s3://bucket/prefix``.
    - `exchange`: the location both organisations read and write (one per run). For
      ecdh any path Spark writes (``file:``, ``hdfs:``, ``s3a:``, ``gs:``, through
      Hadoop's FileSystem); for the replayed protocols a shared path or
      ``s3://bucket/prefix`` (``s3a://`` alike), which the driver and the executors
      reach with setwise's own S3 client, configured from the AWS variables in their
      environment (docs/scale-out.md).
    - `workdir`: this organisation's private location for the run (seed, journal, result).
    - `operation`: ``"intersection"``, ``"cardinality"`` (with ecdh the sender mixes its
      messages across parts, so the receiver learns only the total; replayed, the
      receiver learns each bucket's count), ``"sum"``, ``"union"`` or ``"private-id"``
      (mqrpmt).
    - `value` (the sender of ``"sum"``): the column of each row's value, a non-negative
      integer (rows of one key add up); `value_bound`: the bound of every item's value
      (it fixes each bucket's sum modulus).
    - `sum_to` (``"sum"``, both sides the same): ``"sender"`` (the value holder learns
      the sum, the receiver the count) or ``"receiver"`` (reverse PSI-card-sum: the
      receiver gets the :class:`SumResult`, the sender nothing).
    - `run_id`: the id both operators agreed (default: the exchange's last path element).
    - `buckets`: ``"auto"`` or a number, the same on both sides.
    - `exchange_key` (required): the key both operators hold, 64 hexadecimal digits (a
      ``str``, or the bytes of a key file) or 32 raw bytes. Every marker and abort note
      this party writes is authenticated under it and the peer's are checked, so no one
      without it can forge them; :func:`new_exchange_key` or ``setwise stage keygen FILE``
      makes one. It stays on the driver.
    - `timeout`: seconds to wait for the peer's markers between stages; `poll`: the
      longest pause between looks.
    - `linger` (replayed protocols): seconds the executors wait for the next stage
      before they give their slots back (the next stage then starts them again, and
      they replay the run so far).
    - `live_memory` (replayed protocols): the bytes each task's live roles may hold
      together, counted as ``setwise stage run --memory`` counts them; the roles that do
      not fit replay their rounds at each stage instead. Default: the executor host's
      available memory ÷ its cores or, if less, half the address space left under the
      Python worker's limit (``spark.executor.pyspark.memory``), an eighth left over.

    Finished stages (those with their marker in the exchange) are skipped, so calling it
    again after a failure resumes the run. Progress goes to the ``setwise.spark`` logger.
    Errors: :class:`setwise.InputError` (this side), :class:`setwise.PeerError` (a
    damaged or missing peer message, naming the stage and the bucket; a mismatch; an
    abort), :class:`setwise.NetworkError` (the wait timed out).
    """
    if role not in STAGES:
        raise InputError(f"role '{role}': receiver or sender")
    spec = protocol_spec(protocol)
    if operation not in spec["staged"]:
        can = ", ".join(spec["staged"]) or "none"
        raise InputError(f"operation {operation}: staged {protocol} runs these: {can}")
    if operation == "private-id" and "private_id" in df.columns:
        raise InputError("private-id adds a column private_id to the rows: df already has one")
    _check_sum(operation, role, value, sum_to)
    if not exchange or not workdir:
        raise InputError("exchange= and workdir= are both needed (and must differ)")
    if exchange.rstrip("/") == workdir.rstrip("/"):
        raise InputError("the exchange and the workdir must be different locations")
    if exchange_key is None:
        raise InputError(
            "exchange_key= is needed: the key both operators hold, under which each party's "
            "markers are authenticated (without it anyone who can write the exchange could "
            f"forge them); {HOW_TO_MAKE}"
        )
    xkey = (
        exchange_key.encode("ascii", "replace") if isinstance(exchange_key, str) else exchange_key
    )
    staged_exchange_key_fingerprint(xkey)  # refuses a malformed key before anything runs
    rid = run_id or exchange.rstrip("/").rsplit("/", 1)[-1]
    base = _Run(
        spark=spark,
        df=df,
        key=key,
        role=role,
        protocol=protocol,
        exchange=exchange,
        workdir=workdir,
        operation=operation,
        run_id=rid,
        buckets=str(buckets),
        bucket_key=bucket_key,
        exchange_key=bytes(xkey),
        timeout=timeout,
        poll=poll,
        sum_to=sum_to,
    )
    if live_memory is not None and (
        not isinstance(live_memory, int)
        or isinstance(live_memory, bool)
        or not 0 <= live_memory < 2**64
    ):
        raise InputError(f"live_memory={live_memory!r}: a whole number of bytes, 0 to 2^64 - 1")
    if spec["own_stages"]:
        if live_memory is not None:
            raise InputError(
                f"live_memory= is for the replayed protocols: {protocol} keeps no role alive"
            )
        return base.go()
    from ._spark_rounds import _Rounds

    valued = None if value is None else (value, value_bound)
    return _Rounds(base, protocol, linger, valued, live_memory).go()
