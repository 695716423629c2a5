#!/usr/bin/env bash
# A staged intersection on PySpark against the single-machine CLI, on the same generated
# data in the same run: 2^LOG × 2^LOG rows (half common), both organisations as two
# Spark drivers in local[2] mode on this machine, meeting through an exchange directory.
# Prints each stage's time, each driver's wall time, the CLI's (the same protocol over
# loopback TCP), and the ratio.
#
# Usage: scripts/bench-spark.sh [LOG] [BUCKETS] [PROTOCOL]   (defaults: 22, auto, ecdh)
# FLOOR=1 runs python/bench/spark_floor.py instead of the protocol: the same Spark passes
# with no protocol (Spark's own share of the time).
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
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
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
echo "2^$log × 2^$log $protocol intersection, staged on Spark (local[2] per organisation, buckets $buckets):"
grep -h -E "setwise.spark: .*(done in|waits for|finished)|setwise-spark|spark-floor|wall" "$dir/s.log" "$dir/r.log" | sed 's/^[0-9-]* [0-9:,]* //'
echo "rows matched: $matched; both organisations, start to finish: ${spark_s} s"
port=$((20000 + RANDOM % 20000))
start=$(date +%s.%N)
/usr/bin/time -f "cli sender   wall %e s, peak RSS %M KiB" "$bin" sender --protocol "$protocol" --insecure-no-tls \
  --input "$dir/s.csv" --key email --listen "127.0.0.1:$port" 2> "$dir/cs.err" &
sleep 0.2
/usr/bin/time -f "cli receiver wall %e s, peak RSS %M KiB" "$bin" receiver --protocol "$protocol" --insecure-no-tls \
  --input "$dir/r.csv" --key email --connect "127.0.0.1:$port" --output "$dir/cli.csv" 2> "$dir/cr.err"
wait
cli_s=$(echo "$(date +%s.%N) - $start" | bc)
echo "single-machine CLI over loopback TCP, same data:"
grep -h -E "wall|intersection size" "$dir/cs.err" "$dir/cr.err"
echo "rows written: $(($(wc -l < "$dir/cli.csv") - 1)); start to finish: ${cli_s} s"
echo "staged on Spark / CLI: $(echo "scale=2; $spark_s / $cli_s" | bc)×"
