"""One organisation's Spark driver for the tests and scripts/bench-spark.sh: reads its
rows from a Parquet file, runs `setwise.spark.run` in local[2] (or on the standalone
cluster SETWISE_SPARK_MASTER names, with SETWISE_SPARK_CORES of its cores, passing its AWS_*
variables to the executors for an s3:// exchange; with SETWISE_SPARK_DYNAMIC=1 its executors
go back to the cluster when idle) and writes the receiver's matching rows
to a Parquet file.

    python spark_party.py ROLE INPUT.parquet EXCHANGE WORKDIR [OUTPUT.parquet|-] [BUCKETS] \
        [OP] [PROTOCOL] [VALUE_COLUMN]

For cardinality (and sum) the receiver prints `setwise-spark result: N`, the sender of sum
`setwise-spark result: N SUM` (with SETWISE_SPARK_SUM_TO=receiver the receiver prints
that and the sender nothing). For private-id each party writes its rows with their IDs
to OUTPUT and the union's IDs to OUTPUT-union. The exchange key is read
from the file named by SETWISE_EXCHANGE_KEY_FILE (made by `setwise stage keygen`, or
written from setwise.spark.new_exchange_key()). SETWISE_SPARK_LINGER and
SETWISE_SPARK_LIVE_MEMORY set `linger` and `live_memory`.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from pyspark.sql import SparkSession

import setwise.spark


def session(app: str) -> SparkSession:
    """The Spark session of one organisation's driver: local[2], or on the standalone
    cluster SETWISE_SPARK_MASTER names (also python/bench/spark_floor.py's)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # A standalone cluster's master (spark://…) or, by default, local mode.
    master = os.environ.get("SETWISE_SPARK_MASTER", "local[2]")
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", os.environ.get("SETWISE_SPARK_DRIVER_MEMORY", "1g"))
    )
    if master.startswith("spark://"):
        # Each organisation's share of the cluster: both drivers hold their executors at
        # once (each waits for the other's stages), so neither may take every core.
        cores = os.environ.get("SETWISE_SPARK_CORES", "2")
        builder = (
            builder.config("spark.cores.max", cores)
            .config("spark.executor.cores", "1")
            .config("spark.executor.memory", os.environ.get("SETWISE_SPARK_EXECUTOR_MEMORY", "1g"))
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.pyspark.python", sys.executable)
        )
        if os.environ.get("SETWISE_SPARK_DYNAMIC") == "1":
            # Executors go back to the cluster a moment after their last task, cached
            # blocks and shuffle files or not (they are recomputed if needed): an
            # organisation that waits for its peer then holds none.
            for name, setting in {
                "enabled": "true",
                "shuffleTracking.enabled": "true",
                "shuffleTracking.timeout": "1s",
                "executorIdleTimeout": "1s",
                "cachedExecutorIdleTimeout": "1s",
                "minExecutors": "0",
                "schedulerBacklogTimeout": "1s",
            }.items():
                builder = builder.config(f"spark.dynamicAllocation.{name}", setting)
        # An s3:// exchange is reached by the executors themselves: they need the AWS
        # settings this driver has (Spark redacts the secret in its UI and logs).
        for name, setting in os.environ.items():
            if name.startswith("AWS_"):
                builder = builder.config(f"spark.executorEnv.{name}", setting)
    return builder.getOrCreate()


def main(argv: list[str]) -> int:
    role, data, exchange, workdir = argv[1:5]
    output = argv[5] if len(argv) > 5 and argv[5] != "-" else None
    buckets = argv[6] if len(argv) > 6 else "16"
    operation = argv[7] if len(argv) > 7 else "intersection"
    protocol = argv[8] if len(argv) > 8 else "ecdh"
    # The sender of sum: the column of its values.
    value = argv[9] if len(argv) > 9 else None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark = session(f"setwise-{role}")
    sc = spark.sparkContext
    print(f"setwise-spark {role}: master {sc.master}, application {sc.applicationId}", flush=True)
    spark.sparkContext.setLogLevel("WARN")
    t = time.monotonic()
    with open(os.environ["SETWISE_EXCHANGE_KEY_FILE"], encoding="ascii") as f:
        exchange_key = f.read()
    df = spark.read.parquet(data)
    got = setwise.spark.run(
        spark,
        df,
        key="email",
        role=role,
        protocol=protocol,
        exchange=exchange,
        workdir=workdir,
        buckets=buckets,
        operation=operation,
        exchange_key=exchange_key,
        timeout=float(os.environ.get("SETWISE_SPARK_TIMEOUT", "600")),
        poll=0.5,
        linger=float(os.environ.get("SETWISE_SPARK_LINGER", "60")),
        live_memory=int(os.environ["SETWISE_SPARK_LIVE_MEMORY"])
        if "SETWISE_SPARK_LIVE_MEMORY" in os.environ
        else None,
        value=value,
        sum_to=os.environ.get("SETWISE_SPARK_SUM_TO", "sender"),
    )
    if isinstance(got, setwise.spark.SumResult):
        print(f"setwise-spark result: {got.cardinality} {got.sum}", flush=True)
    elif isinstance(got, setwise.spark.PrivateIdResult):
        if output:
            got.ids.write.mode("overwrite").parquet(output)
            got.union_ids.write.mode("overwrite").parquet(output + "-union")
    elif isinstance(got, int):
        print(f"setwise-spark result: {got}", flush=True)
    elif got is not None and output:
        got.write.mode("overwrite").parquet(output)
    print(f"setwise-spark {role}: done in {time.monotonic() - t:.1f} s", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
