#!/usr/bin/env bash
# Labelled unbalanced PSI at 2^LOG sender items with LABEL-byte labels, as real processes
# over loopback TCP: database build (auto parameters for queries of up to RECEIVERS
# items), queries of 1 and RECEIVERS items, CONCURRENT receivers of RECEIVERS items at
# once against the one loaded database (queries per second, the sender's peak RSS),
# the same query served in compact mode, and an insert of 1 % of the rows (against the
# build time). With MEMORY=<size> (e.g. 3GiB) it also serves the database holding at
# most that much of its plaintexts in memory and the rest from its encoded copy on disk:
# the load that writes the copy, one that reuses it, two queries each; COLD=1 drops the
# page cache before each of those queries (root only), so the copy is read from disk.
# Usage: [MEMORY=3GiB [COLD=1]] scripts/bench-labelled.sh [LOG] [LABEL] [RECEIVERS] [CONCURRENT]
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-20}; label=${2:-32}; receivers=${3:-256}; concurrent=${4:-16}
n=$((1 << log))
source scripts/bench-common.sh
# Waits until the sender logging to $1 (process $2) listens: a large database takes a
# while to load. Fails with its log if it exits first.
wait_listening() {
  until grep -q "^listening on" "$1" 2>/dev/null; do
    kill -0 "$2" 2>/dev/null || { cat "$1"; return 1; }
    sleep 0.5
  done
}
# Waits for the sender (process $1, GNU time around it) to finish its sessions; a failed
# session does not count, so after 30 s it is stopped (its peak RSS is still printed).
finish_sender() {
  for _ in $(seq 60); do kill -0 "$1" 2>/dev/null || break; sleep 0.5; done
  pkill -TERM -P "$1" 2>/dev/null || true
  wait "$1" || true
}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
awk -v n="$n" -v l="$label" 'BEGIN { print "email,label"; for (i = 0; i < n; i++) { s = sprintf("%08d", i); v = ""; while (length(v) < l) v = v s; printf "user%07d@example.org,%s\n", i, substr(v, 1, l) } }' > "$dir/s.csv"
for r in 1 "$receivers"; do
  awk -v r="$r" -v n="$n" 'BEGIN { print "email"; for (i = 0; i < r; i++) if (i % 2 == 0) printf "user%07d@example.org\n", (i * 7919) % n; else printf "member%07d@example.net\n", i }' > "$dir/q$r.csv"
done
for k in $(seq 1 "$concurrent"); do
  awk -v k="$k" -v n="$n" -v r="$receivers" 'BEGIN { print "email"; for (i = 0; i < r; i++) if (i % 2 == 0) printf "user%07d@example.org\n", (i * 7919 + k * 104729) % n; else printf "other%02d-%07d@example.net\n", k, i }' > "$dir/c$k.csv"
done
awk -v n="$n" -v l="$label" 'BEGIN { print "email,label"; for (i = 0; i < n / 100; i++) { v = ""; while (length(v) < l) v = v "new"; printf "added%07d@example.org,%s\n", i, substr(v, 1, l) } }' > "$dir/add.csv"

echo "== build: 2^$log items, $label-byte labels, auto parameters"
/usr/bin/time -f "db build: wall %e s, peak RSS %M KiB" "$bin" db build --input "$dir/s.csv" --key email --label label --receiver-max "$receivers" --out "$dir/s.db" 2>&1 \
  | grep -E "wall|auto parameters|bundles|labels|memory"
port=$((20000 + RANDOM % 20000))
/usr/bin/time -f "sender (load + 2 queries): wall %e s, peak RSS %M KiB" "$bin" sender --protocol unbalanced --db "$dir/s.db" --listen "127.0.0.1:$port" --sessions 2 2> "$dir/s1.log" &
sender=$!
wait_listening "$dir/s1.log" $sender
for r in 1 "$receivers"; do
  "$bin" receiver --protocol unbalanced --input "$dir/q$r.csv" --connect "127.0.0.1:$port" --output "$dir/o$r.csv" 2>&1 | sed "s/^/query of $r: /"
done
finish_sender $sender; grep -E "RSS|error" "$dir/s1.log"

echo "== $concurrent concurrent receivers of $receivers items"
port=$((20000 + RANDOM % 20000))
/usr/bin/time -f "sender (load + $concurrent concurrent queries): peak RSS %M KiB" "$bin" sender --protocol unbalanced --db "$dir/s.db" \
  --listen "127.0.0.1:$port" --sessions "$concurrent" --max-concurrent "$concurrent" 2> "$dir/s16.log" &
sender=$!
# Start the clock once the database is loaded and the sender listens.
wait_listening "$dir/s16.log" $sender
start=$(date +%s.%N)
pids=()
for k in $(seq 1 "$concurrent"); do
  "$bin" receiver --protocol unbalanced --input "$dir/c$k.csv" --connect "127.0.0.1:$port" --output "$dir/c$k.out" 2> "$dir/c$k.log" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
end=$(date +%s.%N)
finish_sender $sender
ok=$({ grep -l "matches with labels" "$dir"/c*.log || true; } | wc -l)
echo "$concurrent receivers: $ok answered, $(echo "$end - $start" | bc) s in all, $(echo "scale=2; $concurrent / ($end - $start)" | bc) queries/s"
grep -E "RSS|error" "$dir/s16.log"

echo "== compact mode, one query of $receivers"
port=$((20000 + RANDOM % 20000))
/usr/bin/time -f "sender --compact: peak RSS %M KiB" "$bin" sender --protocol unbalanced --db "$dir/s.db" --compact --listen "127.0.0.1:$port" 2> "$dir/sc.log" &
sender=$!
wait_listening "$dir/sc.log" $sender
"$bin" receiver --protocol unbalanced --input "$dir/q$receivers.csv" --connect "127.0.0.1:$port" --output "$dir/oc.csv" 2>&1 | sed "s/^/compact query of $receivers: /"
finish_sender $sender; grep -E "RSS|error" "$dir/sc.log"

if [ -n "${MEMORY:-}" ]; then
  for run in 1 2; do
    echo "== at most $MEMORY of plaintexts in memory, the rest from disk: load $run (the first writes the copy, the second reuses it); two queries of $receivers"
    port=$((20000 + RANDOM % 20000))
    t0=$(date +%s.%N)
    /usr/bin/time -f "sender --memory $MEMORY: peak RSS %M KiB" "$bin" sender --protocol unbalanced --db "$dir/s.db" --memory "$MEMORY" \
      --listen "127.0.0.1:$port" --sessions 2 2> "$dir/sm.log" &
    sender=$!
    wait_listening "$dir/sm.log" $sender
    echo "load: $(echo "$(date +%s.%N) - $t0" | bc) s"; grep -E "^plaintexts|^encoded copy" "$dir/sm.log" || true
    for k in 1 2; do
      if [ "${COLD:-}" = 1 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
      "$bin" receiver --protocol unbalanced --input "$dir/q$receivers.csv" --connect "127.0.0.1:$port" --output "$dir/om.csv" 2>&1 \
        | sed "s/^/query $k of $receivers${COLD:+ (cold page cache)}: /"
    done
    finish_sender $sender; grep -E "RSS|error" "$dir/sm.log"
  done
fi

echo "== insert 1 % ($((n / 100)) rows)"
"$bin" db insert --db "$dir/s.db" --input "$dir/add.csv" --key email --label label 2>&1
