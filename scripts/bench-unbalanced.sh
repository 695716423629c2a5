#!/usr/bin/env bash
# The workloads of Microsoft APSI's benchmark, as real processes over loopback TCP:
# build a sender database of 2^LOG items (GNU time: wall, peak RSS), serve queries of
# 1 and RECEIVERS items from it (sender peak RSS over the whole serving process), and
# print each receiver's online time and bytes. Usage: scripts/bench-unbalanced.sh [LOG] [RECEIVERS]
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-20}; receivers=${2:-256}
n=$((1 << log))
source scripts/bench-common.sh
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
awk -v n="$n" 'BEGIN { print "email"; for (i = 0; i < n; i++) printf "user%07d@example.org\n", i }' > "$dir/s.csv"
for r in 1 "$receivers"; do
  awk -v r="$r" -v n="$n" 'BEGIN { print "email"; for (i = 0; i < r; i++) if (i % 2 == 0) printf "user%07d@example.org\n", (i * 7919) % n; else printf "member%07d@example.net\n", i }' > "$dir/q$r.csv"
done
echo "== database build, 2^$log items"
/usr/bin/time -f "db build: wall %e s, peak RSS %M KiB" "$bin" db build --input "$dir/s.csv" --receiver-max "$receivers" ${PARAMS:+--params "$PARAMS"} --out "$dir/s.db" 2>&1 | grep -E "wall|plaintexts|parameters|bundles"
port=$((20000 + RANDOM % 20000))
/usr/bin/time -f "sender (load + 2 queries): wall %e s, peak RSS %M KiB" "$bin" sender --protocol unbalanced --db "$dir/s.db" \
  --listen "127.0.0.1:$port" --sessions 2 2> "$dir/sender.log" &
for r in 1 "$receivers"; do
  "$bin" receiver --protocol unbalanced --input "$dir/q$r.csv" --connect "127.0.0.1:$port" --output "$dir/out$r.csv" --report "$dir/r$r.json" 2>&1 \
    | sed "s/^/query of $r: /"
done
wait
grep -E "wall|error" "$dir/sender.log"
