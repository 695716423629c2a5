#!/usr/bin/env bash
# Memory of an unbalanced sender database in both modes, measured: builds a database of
# 2^LOG items (LABEL-byte labels if given), prints `db info`'s computed figures, then the
# peak RSS of a sender serving one query of 256 items encoded (default) and --compact.
# Usage: [MODES="encoded compact"] scripts/bench-memory.sh [LOG] [LABEL] [PARAMS]
# (MODES=compact skips serving encoded, e.g. for a database whose plaintexts exceed RAM.)
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-20}; label=${2:-0}; params=${3:-auto}
n=$((1 << log))
source scripts/bench-common.sh
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
if [ "$label" -gt 0 ]; then
  awk -v n="$n" -v l="$label" 'BEGIN { print "email,label"; for (i = 0; i < n; i++) { s = sprintf("%08d", i); v = ""; while (length(v) < l) v = v s; printf "user%08d@example.org,%s\n", i, substr(v, 1, l) } }' > "$dir/s.csv"
  labels=(--label label)
else
  awk -v n="$n" 'BEGIN { print "email"; for (i = 0; i < n; i++) printf "user%08d@example.org\n", i }' > "$dir/s.csv"
  labels=()
fi
awk -v n="$n" 'BEGIN { print "email"; for (i = 0; i < 256; i++) if (i % 2 == 0) printf "user%08d@example.org\n", (i * 7919) % n; else printf "member%07d@example.net\n", i }' > "$dir/q.csv"
echo "== build: 2^$log items, label $label bytes, params $params"
/usr/bin/time -f "db build: wall %e s, peak RSS %M KiB" "$bin" db build --input "$dir/s.csv" --key email "${labels[@]}" --params "$params" --out "$dir/s.db" 2>&1 \
  | grep -E "wall|built|bundles:|memory"
du -sh "$dir/s.db"
for mode in ${MODES:-encoded compact}; do
  flag=(); [ "$mode" = compact ] && flag=(--compact)
  port=$((20000 + RANDOM % 20000))
  /usr/bin/time -f "sender ($mode): peak RSS %M KiB" "$bin" sender --protocol unbalanced --db "$dir/s.db" "${flag[@]}" --listen "127.0.0.1:$port" 2> "$dir/s.log" &
  until grep -q "listening" "$dir/s.log" 2>/dev/null; do sleep 0.5; done
  grep -E "loaded|listening" "$dir/s.log" | head -2
  "$bin" receiver --protocol unbalanced --input "$dir/q.csv" --connect "127.0.0.1:$port" --output "$dir/o.csv" 2>&1 | sed "s/^/$mode query of 256: /"
  wait; grep -E "RSS|error" "$dir/s.log"
done
