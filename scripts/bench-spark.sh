#!/usr/bin/env bash
# A staged intersection on PySpark against the single-machine CLI, on the same generated
# data in the same run: 2^LOG × 2^LOG rows (half common), both organisations as two
# Spark drivers on this machine (in local[2] mode, or submitted to one standalone
# cluster), meeting through an exchange directory (or an S3 bucket). Prints each stage's
# time, each driver's wall time, the CLI's (the same protocol over loopback TCP), and the
# ratio.
#
# Usage: scripts/bench-spark.sh [LOG] [BUCKETS] [PROTOCOL]   (defaults: 22, auto, ecdh)
# FLOOR=1 runs python/bench/spark_floor.py instead of the protocol: the same Spark passes
# with no protocol (Spark's own share of the time).
# CLUSTER=1 starts a standalone master and two workers (python/tests/spark_cluster.py,
# SETWISE_SPARK_WORKER_MEMORY each, default 8g) and submits both drivers to it, with
# SETWISE_SPARK_CORES cores each (default 2) and SETWISE_SPARK_EXECUTOR_MEMORY a
# one-core executor (default 3g).
# S3=1 puts the exchange in a bucket of a SeaweedFS server on loopback
# (python/tests/s3_server.py; replayed protocols only).
# SETWISE_SPARK_LIVE_MEMORY=BYTES: each task's live_memory (default: setwise.spark's).
# CONNECTED=0 skips the CLI's run (at sizes whose connected run does not fit memory).
# Needs Java 17 and a virtual environment with pyspark, pyarrow and setwise installed
# (SETWISE_VENV, default target/python-venv, as scripts/test-python makes it).
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-22}; buckets=${2:-auto}; protocol=${3:-ecdh}
n=$((1 << log))
venv=${SETWISE_VENV:-$PWD/target/python-venv}
py=$venv/bin/python
"$py" -c "import pyspark, setwise.spark" || { echo "need pyspark and setwise in $venv (scripts/test-python)"; exit 2; }
source scripts/bench-common.sh
dir=$(mktemp -d)
helpers=()
cleanup() {
  local p
  for p in "${helpers[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${helpers[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
# Runs `python FILE DIR ARGS…` in the background until the script ends, and waits until
# it has printed (to $dir/NAME.out) what it prints when ready.
helper() {
  local name=$1; shift
  "$py" "$@" > "$dir/$name.out" 2> "$dir/$name.err" &
  helpers+=($!)
  until [ -s "$dir/$name.out" ]; do
    kill -0 "${helpers[-1]}" 2>/dev/null || { tail -40 "$dir/$name.err"; exit 1; }
    sleep 0.5
  done
}
awk -v n="$n" 'BEGIN { print "email,id"; for (i = 0; i < n; i++) printf "user%07d@example.org,%d\n", i, i }' > "$dir/s.csv"
awk -v n="$n" 'BEGIN { print "id,email"; for (i = 0; i < n; i++) if (i < n / 2) printf "%d,user%07d@example.org\n", i, i; else printf "%d,member%07d@example.net\n", i, i }' > "$dir/r.csv"
"$py" - "$dir" <<'PY'
import sys
import pyarrow.csv as pc, pyarrow.parquet as pq
d = sys.argv[1]
for name in ("s", "r"):
    t = pc.read_csv(f"{d}/{name}.csv", convert_options=pc.ConvertOptions(column_types={"email": "string", "id": "string"}))
    pq.write_table(t, f"{d}/{name}.parquet", compression="none")
PY
party=python/tests/spark_party.py
[ -n "${FLOOR:-}" ] && party=python/bench/spark_floor.py
# The exchange key both organisations hold (setwise.spark.run requires one).
"$py" -c "import setwise.spark; print(setwise.spark.new_exchange_key())" > "$dir/exchange.key"
chmod 600 "$dir/exchange.key"
export PYSPARK_PYTHON=$py SETWISE_SPARK_DRIVER_MEMORY=${SETWISE_SPARK_DRIVER_MEMORY:-3g} \
  SETWISE_EXCHANGE_KEY_FILE=$dir/exchange.key
ex=file://$dir/bench-spark-$log
mode="local[2] per organisation"
if [ -n "${CLUSTER:-}" ]; then
  helper cluster python/tests/spark_cluster.py "$dir/cluster" "${SETWISE_SPARK_WORKER_MEMORY:-8g}"
  SETWISE_SPARK_MASTER=$(head -1 "$dir/cluster.out")
  export SETWISE_SPARK_MASTER SETWISE_SPARK_EXECUTOR_MEMORY=${SETWISE_SPARK_EXECUTOR_MEMORY:-3g}
  mode="standalone cluster, 2 workers, ${SETWISE_SPARK_CORES:-2} cores per organisation"
  # Each executor's peak memory: its JVM's RSS and its Python workers', summed over the
  # process tree, sampled every second (the largest executor's is printed).
  (
    peak=0
    while :; do
      now=$(ps -eo pid=,ppid=,rss=,args= | awk '
        { ppid[$1] = $2; rss[$1] = $3; if ($0 ~ /CoarseGrainedExecutorBackend/) exe[$1] = 1 }
        END {
          for (p in rss) { q = p; while (q > 1 && !(q in exe)) q = ppid[q]; if (q in exe) sum[q] += rss[p] }
          m = 0; for (e in sum) if (sum[e] > m) m = sum[e]; print m
        }')
      [ "$now" -gt "$peak" ] && peak=$now && echo "$peak" > "$dir/executor-peak"
      sleep 1
    done
  ) &
  helpers+=($!)
fi
if [ -n "${S3:-}" ]; then
  helper s3 python/tests/s3_server.py "$dir/s3"
  while IFS='=' read -r name value; do
    [ -n "$name" ] && export "$name=$value"
  done < "$dir/s3.out"
  ex=s3://exchange/bench-spark-$log
  mode="$mode, exchange in an S3 bucket on loopback"
fi
start=$(date +%s.%N)
/usr/bin/time -f "spark sender   wall %e s, peak RSS %M KiB (its largest process)" \
  "$py" "$party" sender "$dir/s.parquet" "$ex" "file://$dir/s-work" - "$buckets" intersection "$protocol" \
  > "$dir/s.log" 2>&1 &
spid=$!
/usr/bin/time -f "spark receiver wall %e s, peak RSS %M KiB (its largest process)" \
  "$py" "$party" receiver "$dir/r.parquet" "$ex" "file://$dir/r-work" "file://$dir/out" "$buckets" intersection \
  "$protocol" > "$dir/r.log" 2>&1 \
  || { tail -40 "$dir/r.log"; exit 1; }
wait "$spid" || { tail -40 "$dir/s.log"; exit 1; }
spark_s=$(echo "$(date +%s.%N) - $start" | bc)
matched=$("$py" -c "import pyarrow.parquet as pq, sys; print(pq.read_table(sys.argv[1]).num_rows)" "$dir/out")
echo "2^$log × 2^$log $protocol intersection, staged on Spark ($mode, buckets $buckets):"
grep -h -E "setwise.spark: .*(done in|waits for|finished)|setwise-spark|spark-floor|wall" "$dir/s.log" "$dir/r.log" | sed 's/^[0-9-]* [0-9:,]* //'
echo "rows matched: $matched; both organisations, start to finish: ${spark_s} s"
[ -s "$dir/executor-peak" ] && echo "largest executor's peak RSS (its JVM and Python workers): $(cat "$dir/executor-peak") KiB"
[ -n "${S3:-}" ] && echo "exchange: the S3 server's files $(du -sh "$dir/s3" | cut -f1)"
echo "workdirs: $(du -shc "$dir/s-work" "$dir/r-work" | tail -1 | cut -f1)"
[ "${CONNECTED:-1}" = 0 ] && exit 0
port=$((20000 + RANDOM % 20000))
start=$(date +%s.%N)
/usr/bin/time -f "cli sender   wall %e s, peak RSS %M KiB" "$bin" sender --protocol "$protocol" --insecure-no-tls \
  --input "$dir/s.csv" --key email --listen "127.0.0.1:$port" 2> "$dir/cs.err" &
clipid=$!
sleep 0.2
/usr/bin/time -f "cli receiver wall %e s, peak RSS %M KiB" "$bin" receiver --protocol "$protocol" --insecure-no-tls \
  --input "$dir/r.csv" --key email --connect "127.0.0.1:$port" --output "$dir/cli.csv" 2> "$dir/cr.err"
wait "$clipid"
cli_s=$(echo "$(date +%s.%N) - $start" | bc)
echo "single-machine CLI over loopback TCP, same data:"
grep -h -E "wall|intersection size" "$dir/cs.err" "$dir/cr.err"
echo "rows written: $(($(wc -l < "$dir/cli.csv") - 1)); start to finish: ${cli_s} s"
echo "staged on Spark / CLI: $(echo "scale=2; $spark_s / $cli_s" | bc)×"
