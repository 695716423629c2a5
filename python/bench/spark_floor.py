"""Spark's own share of a staged run on Spark: one organisation's driver doing the data
work `setwise.spark.run` does for a replayed protocol (vole), with no protocol at all.

    FLOOR=1 scripts/bench-spark.sh LOG BUCKETS PROTOCOL

runs it in place of tests/spark_party.py, with the same arguments, on the same data and
in the same sitting as the CLI. The passes are those of python/setwise/_spark_rounds.py:
read the Parquet file, keep the distinct non-empty keys (persisted), a pass over them
that computes the input's fingerprint (the native `staged_fingerprint`, as the run
does), the bucket sizes (with Spark's own hash, where the run computes its keyed bucket
natively), one shuffle into a partition per task (the same task keys, so each task gets
its own partition) whose tasks sort their items (as `StagedWorker.serve` does before its
rounds), and for the receiver the semi-join of its rows with the matches and the Parquet
write. The matches are the keys the generated data share (`user…`), as the protocol
would find them.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from setwise._spark_rounds import task_keys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from spark_party import session  # the tests' driver settings, cluster or local

TARGET_BUCKET_ITEMS = 1 << 20


def buckets_for(arg: str, size: int) -> int:
    """The bucket count setwise uses: `auto` is next_pow2(⌈size / 2^20⌉)."""
    if arg != "auto":
        return int(arg)
    need = max(1, -(-size // TARGET_BUCKET_ITEMS))
    return 1 << (need - 1).bit_length()


def timed(what: str, action: Any) -> Any:
    t = time.monotonic()
    out = action()
    print(f"spark-floor: {what} {time.monotonic() - t:.1f} s", flush=True)
    return out


def main(argv: list[str]) -> int:
    role, data = argv[1], argv[2]
    output = argv[5] if len(argv) > 5 and argv[5] != "-" else None
    bucket_arg = argv[6] if len(argv) > 6 else "16"
    spark = session(f"setwise-floor-{role}")
    spark.sparkContext.setLogLevel("WARN")
    start = time.monotonic()
    df = spark.read.parquet(data)
    item = F.col("email").cast("string").cast("binary")
    items: DataFrame = (
        df.select(item.alias("item"))
        .where(F.col("item").isNotNull() & (F.length("item") > 0))
        .distinct()
    ).persist()

    def fingerprint(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from setwise._setwise import staged_fingerprint

        for rb in batches:
            n, digest = staged_fingerprint(rb.column(0))
            yield pa.RecordBatch.from_arrays(
                [pa.array([n], pa.int64()), pa.array([digest], pa.binary())], names=["n", "s"]
            )

    rows = timed(
        "distinct keys and a pass over them",
        lambda: items.mapInArrow(fingerprint, "n long, s binary").collect(),
    )
    size = sum(int(r["n"]) for r in rows)
    b = buckets_for(bucket_arg, size)
    bucketed = items.withColumn("part", F.expr(f"pmod(hash(item), {b})"))
    timed("bucket sizes", lambda: bucketed.groupBy("part").count().collect())
    groups = max(1, min(b, int(spark.sparkContext.defaultParallelism)))

    def serve(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        t = pa.Table.from_batches(
            list(batches), schema=pa.schema([("item", pa.binary()), ("part", pa.int32())])
        )
        t = t.sort_by([("part", "ascending"), ("item", "ascending")])
        yield pa.RecordBatch.from_arrays([pa.array([t.num_rows])], names=["served"])

    keys = F.array(*[F.lit(k) for k in task_keys(spark, groups)])
    shuffled = bucketed.withColumn(
        "task", F.element_at(keys, F.col("part") % groups + 1)
    ).repartition(groups, "task")
    timed(
        "shuffle into tasks that sort their items",
        lambda: shuffled.select("item", "part").mapInArrow(serve, "served long").collect(),
    )
    if role == "receiver" and output is not None:
        matched = items.where(F.col("item").startswith(F.lit(b"user")))
        rows_with = df.withColumn("_item", item)
        result = rows_with.join(
            matched.withColumnRenamed("item", "_item"), "_item", "left_semi"
        ).drop("_item")
        timed("semi-join and Parquet write", lambda: result.write.mode("overwrite").parquet(output))
    print(f"spark-floor: {role} finished in {time.monotonic() - start:.1f} s", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
