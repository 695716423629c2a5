#!/usr/bin/env bash
# Labelled unbalanced PSI at 2^LOG sender items with LABEL-byte labels, as real processes
# over loopback TCP: database build (auto parameters), queries of 1 and 256 items, an
# insert of 1 % of the rows (against the build time), 16 concurrent receivers of 256
# items (queries per second), and the same query served in compact mode.
# Usage: scripts/bench-labelled.sh [LOG] [LABEL]
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-20}; label=${2:-32}
n=$((1 << log))
source scripts/bench-common.sh
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
awk -v n="$n" -v l="$label" 'BEGIN { print "email,label"; for (i = 0; i < n; i++) { s = sprintf("%08d", i); v = ""; while (length(v) < l) v = v s; printf "user%07d@example.org,%s\n", i, substr(v, 1, l) } }' > "$dir/s.csv"
for r in 1 256; do
  awk -v r="$r" -v n="$n" 'BEGIN { print "email"; for (i = 0; i < r; i++) if (i % 2 == 0) printf "user%07d@example.org\n", (i * 7919) % n; else printf "member%07d@example.net\n", i }' > "$dir/q$r.csv"
done
for k in $(seq 1 16); do
  awk -v k="$k" -v n="$n" 'BEGIN { print "email"; for (i = 0; i < 256; i++) if (i % 2 == 0) printf "user%07d@example.org\n", (i * 7919 + k * 104729) % n; else printf "other%02d-%07d@example.net\n", k, i }' > "$dir/c$k.csv"
done
awk -v n="$n" -v l="$label" 'BEGIN { print "email,label"; for (i = 0; i < n / 100; i++) { v = ""; while (length(v) < l) v = v "new"; printf "added%07d@example.org,%s\n", i, substr(v, 1, l) } }' > "$dir/add.csv"

echo "== build: 2^$log items, $label-byte labels, auto parameters"
/usr/bin/time -f "db build: wall %e s, peak RSS %M KiB" "$bin" db build --input "$dir/s.csv" --key email --label label --out "$dir/s.db" 2>&1 \
  | grep -E "wall|auto parameters|bundles|labels|memory"
port=$((20000 + RANDOM % 20000))
/usr/bin/time -f "sender (2 queries): peak RSS %M KiB" "$bin" sender --protocol unbalanced --db "$dir/s.db" --listen "127.0.0.1:$port" --sessions 2 2> "$dir/s1.log" &
for r in 1 256; do
  "$bin" receiver --protocol unbalanced --input "$dir/q$r.csv" --connect "127.0.0.1:$port" --output "$dir/o$r.csv" 2>&1 | sed "s/^/query of $r: /"
done
wait; grep -E "RSS|error" "$dir/s1.log"

echo "== 16 concurrent receivers of 256 items"
port=$((20000 + RANDOM % 20000))
"$bin" sender --protocol unbalanced --db "$dir/s.db" --listen "127.0.0.1:$port" --sessions 16 2> "$dir/s16.log" &
# Start the clock once the database is loaded and the sender listens.
until grep -q "listening" "$dir/s16.log" 2>/dev/null; do sleep 0.1; done
start=$(date +%s.%N)
for k in $(seq 1 16); do
  "$bin" receiver --protocol unbalanced --input "$dir/c$k.csv" --connect "127.0.0.1:$port" --output "$dir/c$k.out" 2> "$dir/c$k.log" &
done
wait
end=$(date +%s.%N)
ok=$(grep -l "matches with labels" "$dir"/c*.log | wc -l)
echo "16 receivers: $ok answered, $(echo "$end - $start" | bc) s in all, $(echo "scale=2; 16 / ($end - $start)" | bc) queries/s"

echo "== compact mode, one query of 256"
port=$((20000 + RANDOM % 20000))
/usr/bin/time -f "sender --compact: peak RSS %M KiB" "$bin" sender --protocol unbalanced --db "$dir/s.db" --compact --listen "127.0.0.1:$port" 2> "$dir/sc.log" &
"$bin" receiver --protocol unbalanced --input "$dir/q256.csv" --connect "127.0.0.1:$port" --output "$dir/oc.csv" 2>&1 | sed "s/^/compact query of 256: /"
wait; grep -E "RSS|error" "$dir/sc.log"

echo "== insert 1 % ($((n / 100)) rows)"
"$bin" db insert --db "$dir/s.db" --input "$dir/add.csv" --key email --label label 2>&1
