"""Staged runs of the replayed protocols (vole, mqrpmt, compact) on PySpark.

The driver is the library's own runner (``StagedDriver``, the same as ``setwise stage``):
it checks the peer's markers under the exchange key, keeps the journal and decides each
bucket's round. The buckets are in the executors: one Spark job, with a task per group
of buckets (buckets ≡ j mod T, T at most the cluster's cores, so every group runs at
once), serves the rounds the driver posts in the party's workdir (``StagedWorker``), its
roles kept alive between stages while the peer keeps pace. When no round comes for
``linger`` seconds the tasks end and give their executors back; the next stage starts
the job again, and its roles replay the run from the seed and the exchange
(docs/scale-out.md). The workdir must be on a filesystem every executor mounts at the
same path; the exchange may be such a path or an S3 prefix, which the executors' workers
read and write themselves.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from ._setwise import (
    Error,
    InputError,
    NetworkError,
    StagedDriver,
    StagedWorker,
    staged_exchange_read,
    staged_read_ids,
    staged_read_rows,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .spark import _Run

log = logging.getLogger("setwise.spark")


def task_keys(spark: SparkSession, groups: int) -> list[int]:
    """For each task j, a key that Spark's hash partitioning into `groups` parts sends to
    part j (`pmod(hash(key), groups)`, as `repartition` computes it), so that each task's
    buckets have a partition of their own and all run at once."""
    from pyspark.sql import functions as F

    probe = spark.range(0, 64 * groups).select("id", F.expr(f"pmod(hash(id), {groups})").alias("p"))
    first: dict[int, int] = {}
    for r in probe.collect():
        first.setdefault(int(r["p"]), int(r["id"]))
    if len(first) < groups:
        raise Error(f"no keys found for {groups} Spark partitions")
    return [first[j] for j in range(groups)]


class SumResult(NamedTuple):
    """`sum`, for the value holder: |X ∩ Y| and the sum of its values over X ∩ Y."""

    cardinality: int
    sum: int


class PrivateIdResult(NamedTuple):
    """`private-id`, for each party: its rows, each with the ID of its key (a 32-byte
    binary column ``private_id``; rows with a null or empty key take no part and are left
    out), and the IDs of X ∪ Y (one ``private_id`` column), the same on both sides; a key
    both parties hold has one ID."""

    ids: DataFrame
    union_ids: DataFrame


def _served_input(valued: bool) -> Any:
    import pyarrow as pa

    cols = [("item", pa.binary()), ("part", pa.int32())]
    return pa.schema(cols + ([("value", pa.int64())] if valued else []))


# Testing hook (as spark.py's for the driver): the stage in which one executor of this
# party is SIGKILLed, once a part of its first task is written, to show that Spark's
# retry of the task (on another executor) writes the same parts and the run stays exact.
EXECUTOR_KILL_HOOK = "SETWISE_SPARK_TEST_KILL_EXECUTOR"


def _kill_executor_once(exchange: str, part: str, flag: str) -> None:
    """The testing hook in an executor's Python worker: once `part` is in the exchange,
    kills the executor JVM above this process, unless `flag` says an earlier attempt did."""

    def watch() -> None:
        # Each look opens the exchange afresh (an S3 client for a bucket): every 50 ms.
        while True:
            try:
                if staged_exchange_read(exchange, part, 1 << 30) is not None:
                    break
            except Error as e:
                log.warning("setwise test hook: %s", e)
            time.sleep(0.05)
        try:
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return
        pid = os.getppid()
        while pid > 1:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"CoarseGrainedExecutorBackend" in f.read():
                    os.kill(pid, signal.SIGKILL)
                    return
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])

    threading.Thread(target=watch, name="setwise-test-kill", daemon=True).start()


def _path(p: str) -> str:
    """A ``file:`` URI or path as the path the native module and executors use."""
    for prefix in ("file://", "file:"):
        if p.startswith(prefix):
            return p[len(prefix) :]
    return p


class _Job(threading.Thread):
    """The Spark job whose tasks serve the buckets' rounds (a driver thread)."""

    def __init__(self, action: Callable[[], Any], group: str, sc: Any) -> None:
        super().__init__(name="setwise-rounds", daemon=True)
        self.action, self.group, self.sc = action, group, sc
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.sc.setJobGroup(self.group, "setwise staged rounds", interruptOnCancel=True)
            self.action()
        except BaseException as e:  # reported by the driver's loop
            self.error = e


class _Rounds:
    """One party's replayed staged run on Spark, driven by the native runner."""

    def __init__(
        self,
        base: _Run,
        protocol: str,
        linger: float,
        value: tuple[str, int] | None = None,
        live_memory: int | None = None,
    ) -> None:
        self.base, self.protocol, self.linger = base, protocol, linger
        # The bytes each task's live roles may hold (None: the task's default).
        self.live_memory = live_memory
        # `sum`, the value holder: the value column and the bound of every value.
        self.value = value
        self.ex, self.wd = _path(base.ex), _path(base.wd)
        self.job: _Job | None = None
        self.items: DataFrame | None = None
        self.size = 0
        self.group = f"setwise-{base.run_id}-{base.role}-{base.attempt}"

    # --- what the native runner asks of the cluster ---------------------------------

    def settings(self) -> tuple[str, str, str, int, str, str | None, str]:
        """The run's settings as the native driver and workers take them."""
        b = self.base
        return (b.run_id, self.protocol, b.op, 1, b.buckets, b.bucket_key, b.role)

    def worker(self, session: str, attempt: str = "") -> StagedWorker:
        return StagedWorker(
            *self.settings(),
            self.size,
            self.ex,
            self.wd,
            session,
            attempt,
            self.base.sum_to,
        )

    def bucketed(self, session: str, tasks: list[int] | None = None) -> DataFrame:
        """The items with their bucket (`part`) and, given each task's key, the key of
        the task that serves the bucket (`task`: bucket b is served by task b mod T)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        spec = self.worker(session)
        keys = pa.array(tasks or [0], pa.int64())
        valued = self.value is not None
        schema = "item binary, part int" + (", value long" if valued else "")
        schema += ", task long" if tasks else ""

        def add(batches: Any) -> Any:
            for rb in batches:
                col = rb.column(0)
                buf = pa.py_buffer(spec.bucket_of(col))
                b = pa.Array.from_buffers(pa.int32(), len(col), [None, buf])
                cols, names = [col, b], ["item", "part"]
                if valued:
                    cols.append(rb.column(1))
                    names.append("value")
                if tasks:
                    cols.append(pc.take(keys, pa.array(b.to_numpy() % len(keys))))
                    names.append("task")
                yield pa.RecordBatch.from_arrays(cols, names=names)

        assert self.items is not None
        return self.items.mapInArrow(add, schema)

    def task_keys(self, groups: int) -> list[int]:
        return task_keys(self.base.spark, groups)

    def bucket_sizes(self, session: str) -> list[int]:
        """Stage 1: this party's item count in each bucket."""
        rows = self.base.job(1, lambda: self.bucketed(session).groupBy("part").count().collect())
        got = {int(r["part"]): int(r["count"]) for r in rows}
        return [got.get(p, 0) for p in range(self.buckets(session))]

    def buckets(self, session: str) -> int:
        return int(self.worker(session).buckets())

    def run(self, stage: int, session: str, attempt: str, ready: Callable[[], bool]) -> None:
        """Stage `stage`: keeps the executors serving until every bucket's round is done."""
        pause, starts = 0.005, 0
        while not ready():
            job = self.job
            if job is None or not job.is_alive():
                if job is not None and job.error is not None and not ready():
                    raise self.failure(stage, job.error)
                if starts == 3:
                    raise Error(
                        f"stage {stage}: the executors ran {starts} times without doing its "
                        f"rounds; do they see {self.wd} at the driver's path, and reach {self.ex}?"
                    )
                self.start(session, attempt, stage)
                starts += 1
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def failure(self, stage: int, e: BaseException) -> BaseException:
        """The job's failure as the setwise error an executor raised, if one did."""
        if isinstance(e, Error):
            return e

        def again() -> None:
            raise e

        try:
            self.base.job(stage, again)
        except BaseException as got:
            return got
        return e

    def start(self, session: str, attempt: str, stage: int) -> None:
        """Starts the job: the items shuffled once into a partition per task (the buckets
        b ≡ j mod T in partition j), each task serving its buckets' rounds from `stage`."""
        import pyarrow as pa

        spec = self.worker(session, attempt)
        sc = self.base.spark.sparkContext
        n = int(spec.buckets())
        groups = max(1, min(n, int(sc.defaultParallelism)))
        linger = self.linger
        keys = self.task_keys(groups)
        bound = None if self.value is None else self.value[1]
        valued = bound is not None
        kill_in = os.environ.get(EXECUTOR_KILL_HOOK)
        ex, wd, role, live_memory = self.ex, self.wd, self.base.role, self.live_memory

        def serve(batches: Any) -> Any:
            from pyspark import TaskContext

            # Partition j holds the items of task j's buckets (task_keys) and one row
            # of bucket -1, so that a task whose buckets have no items of this party
            # still runs and serves their rounds.
            context = TaskContext.get()
            assert context is not None
            task = context.partitionId()
            if kill_in is not None and task == 0:
                part = f"stage-{kill_in}/{role}/part-00000.bin"
                _kill_executor_once(ex, part, f"{wd}/test-executor-killed-{kill_in}")
            t = pa.Table.from_batches(list(batches), schema=_served_input(valued))
            # One contiguous copy of each column; the row of bucket -1 stays, the
            # worker skips it (filtering would copy every item once more), and the
            # batches go, so the task holds its items once while it serves.
            items = t.column("item").combine_chunks()
            parts = t.column("part").combine_chunks()
            values = t.column("value").combine_chunks() if valued else None
            del t
            outcome = spec.serve(
                items, parts, task, groups, linger, stage, values, bound, live_memory
            )
            yield pa.RecordBatch.from_arrays([pa.array([outcome])], names=["served"])

        spark = self.base.spark
        cols = ["item", "part"] + (["value"] if valued else [])
        present = spark.createDataFrame(
            [(b"", -1, *([0] if valued else []), k) for k in keys],
            ", ".join(f"{c} {t}" for c, t in zip(cols, ["binary", "int", "long"])) + ", task long",
        )
        shuffled = self.bucketed(session, keys).unionByName(present).repartition(groups, "task")
        served = shuffled.select(*cols).mapInArrow(serve, "served string")
        self.job = _Job(served.collect, self.group, sc)
        self.job.start()
        log.info(
            "setwise %s: %s serves %d buckets in %d tasks",
            self.base.run_id,
            self.base.role,
            n,
            groups,
        )

    # --- the run ----------------------------------------------------------------------

    def own_items(self) -> DataFrame:
        """The distinct items and, for the value holder of `sum`, each one's value (the
        rows of one key add up, as the CLI adds them), checked against the bound."""
        b = self.base
        if self.value is None:
            return b.items()
        from pyspark.sql import functions as F

        column, bound = self.value
        if column not in b.df.columns:
            raise InputError(f"value column '{column}' is not in the DataFrame ({b.df.columns})")
        item = F.col(b.key).cast("string").cast("binary")
        rows = b.df.select(item.alias("item"), F.col(column).cast("long").alias("value"))
        rows = rows.where(F.col("item").isNotNull() & (F.length("item") > 0))
        bad = rows.where(F.col("value").isNull() | (F.col("value") < 0)).limit(1).collect()
        if bad:
            raise InputError(
                f"value column '{column}': a row whose value is not a non-negative integer"
            )
        summed = rows.groupBy("item").agg(F.sum("value").alias("value"))
        over = summed.where(F.col("value") > bound).limit(1).collect()
        if over:
            raise InputError(
                f"item {bytes(over[0]['item']).decode(errors='replace')!r} has the value "
                f"{over[0]['value']}, above value_bound {bound}"
            )
        return summed

    def fingerprint(self, items: DataFrame) -> tuple[int, str]:
        """The size and fingerprint of the items (and their values, so a run resumed on
        other values is refused at once)."""
        if self.value is None:
            return self.base.fingerprint(items)
        from pyspark.sql import functions as F

        with_value = F.concat(
            F.col("item"), F.lit(bytearray(b"\0")), F.col("value").cast("string").cast("binary")
        )
        return self.base.fingerprint(items.select(with_value.alias("item")))

    def go(self) -> DataFrame | int | SumResult | PrivateIdResult | None:
        b = self.base
        items = self.own_items().persist()
        self.items = items
        try:
            self.size, fingerprint = self.fingerprint(items)
            driver = StagedDriver(
                *self.settings(),
                self.ex,
                self.wd,
                b.xkey,
                self.size,
                fingerprint,
                self,
                self.base.sum_to,
            )
            self.steps(driver)
            return self.result(driver) if driver.learns else None
        finally:
            if self.job is not None and self.job.is_alive():
                b.spark.sparkContext.cancelJobGroup(self.group)
            items.unpersist()

    def steps(self, driver: StagedDriver) -> None:
        b = self.base
        started = time.monotonic()
        waiting_since: float | None = None
        pause = min(b.poll, 0.02)
        kill = os.environ.get("SETWISE_SPARK_TEST_KILL_IN_STAGE")
        while True:
            t = time.monotonic()
            kind, stage, marker = driver.step()
            if kind == "finished":
                break
            if kind == "ran":
                log.info(
                    "setwise %s: %s stage %d (%s) done in %.1f s",
                    b.run_id,
                    b.role,
                    stage,
                    driver.stage_label(stage),
                    time.monotonic() - t,
                )
                if stage == 1:
                    # For a side that said auto (None for one that named its protocol).
                    agreed = driver.protocol_agreed()
                    if agreed is not None:
                        log.info("setwise %s: auto runs %s in every bucket: %s", b.run_id, *agreed)
                waiting_since, pause = None, min(b.poll, 0.02)
                if kill is not None and kill == str(stage):
                    log.warning("setwise: killing this driver after stage %d (test hook)", stage)
                    os.kill(os.getpid(), signal.SIGKILL)
                continue
            now = time.monotonic()
            if waiting_since is None:
                waiting_since = now
                log.info("setwise %s: %s stage %d waits for %s", b.run_id, b.role, stage, marker)
            if now - waiting_since >= b.timeout:
                raise NetworkError(
                    f"stage {stage} ({b.role}: {driver.stage_label(stage)}): gave up after "
                    f"{b.timeout:.0f} s waiting for {marker} (the run resumes with the same call)"
                )
            time.sleep(pause)
            pause = min(pause * 2, b.poll)
        log.info(
            "setwise %s: %s finished (%.1f s this call)",
            b.run_id,
            b.role,
            time.monotonic() - started,
        )

    def result(self, driver: StagedDriver) -> DataFrame | int | SumResult | PrivateIdResult:
        size = driver.result_size()
        if size is None:
            raise Error(f"{self.wd}/result.json: missing after the run finished")
        total = driver.result_sum()
        if total is not None:
            return SumResult(int(size), int(total))
        if self.base.op in ("cardinality", "sum"):
            return int(size)
        if self.base.op == "private-id":
            return self.private_ids()
        matched = self.kept_rows()
        if self.base.op == "union":
            from pyspark.sql import functions as F

            # The own distinct keys and the sender's others (each checked by its
            # worker to be of its bucket, so none repeats an own key).
            assert self.items is not None
            both = self.items.select("item").unionByName(matched)
            return both.select(F.col("item").cast("string").alias(self.base.key))
        from .spark import ITEM

        rows = self.base.with_item()
        return rows.join(matched.withColumnRenamed("item", ITEM), ITEM, "left_semi").drop(ITEM)

    def private_ids(self) -> PrivateIdResult:
        """Each bucket's IDs, paired with the own items its executor kept beside them."""
        import pyarrow as pa

        from .spark import ITEM

        wd = self.wd

        def own(batches: Any) -> Any:
            for rb in batches:
                for bucket in rb.column(0).to_pylist():
                    items, ids, _ = staged_read_ids(wd, int(bucket))
                    arrays = [pa.array(items, pa.binary()), pa.array(ids, pa.binary())]
                    yield pa.RecordBatch.from_arrays(arrays, names=[ITEM, "private_id"])

        def union(batches: Any) -> Any:
            for rb in batches:
                for bucket in rb.column(0).to_pylist():
                    _, _, ids = staged_read_ids(wd, int(bucket))
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(ids, pa.binary())], names=["private_id"]
                    )

        pairs = self.per_bucket("ids", own, f"{ITEM} binary, private_id binary")
        rows = self.base.with_item().join(pairs, ITEM, "inner").drop(ITEM)
        return PrivateIdResult(rows, self.per_bucket("ids", union, "private_id binary"))

    def kept_rows(self) -> DataFrame:
        """The rows the buckets kept (intersection: the own items matched; union: the
        sender's items outside the own set), read by the executors."""
        import pyarrow as pa

        wd = self.wd

        def read(batches: Any) -> Any:
            for rb in batches:
                for bucket in rb.column(0).to_pylist():
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(staged_read_rows(wd, int(bucket)), pa.binary())],
                        names=["item"],
                    )

        return self.per_bucket("rows", read, "item binary")

    def per_bucket(self, kept: str, read: Callable[[Any], Any], schema: str) -> DataFrame:
        """What `read` makes of each bucket that kept something in rounds/`kept`, read by
        the executors."""
        folder = os.path.join(self.wd, "rounds", kept)
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        found = [int(n[len("bucket-") : -len(".bin")]) for n in names if n.startswith("bucket-")]
        spark = self.base.spark
        if not found:
            return spark.createDataFrame([], schema)
        n = max(1, min(len(found), spark.sparkContext.defaultParallelism))
        buckets = spark.createDataFrame([(b,) for b in found], "bucket long").repartition(n)
        return buckets.mapInArrow(read, schema)
