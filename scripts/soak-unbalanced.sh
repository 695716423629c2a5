#!/usr/bin/env bash
# Soak test of an unbalanced sender under hostile load: a database of 2^LOG items served
# with --max-concurrent 8 and a 5 s frame deadline, CONNECTIONS connections from PROCS
# client processes at once (examples/soak_clients.rs): one in three an honest receiver
# whose answer is checked against the plain set computation, the others garbage, a
# truncated frame, a byte a second, silence, a frame claiming 4 GiB, or a
# crafted relinearisation key. Checks that every honest query was answered right, that
# the server logged each hostile client once and is still serving, and prints the
# server's peak RSS and the wall time.
#   scripts/soak-unbalanced.sh [LOG=16] [CONNECTIONS=200] [PROCS=4]
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-16}; connections=${2:-200}; procs=${3:-4}
n=$((1 << log))
source scripts/bench-common.sh
cargo build --release -q -p setwise --features testing --example soak-clients
clients=$PWD/target/release/examples/soak-clients
dir=$(mktemp -d)
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

awk -v n="$n" 'BEGIN { print "email"; for (i = 0; i < n; i++) printf "user%07d@example.org\n", i }' > "$dir/s.csv"
# Parameters whose sender derives powers, so every receiver sends a relinearisation key
# (the crafted-key clients need one to replace).
cat > "$dir/params.json" <<'EOF'
{"table_params":{"hash_func_count":3,"table_size":2048,"max_items_per_bin":15},
 "item_params":{"felts_per_item":4},
 "query_params":{"ps_low_degree":3,"query_powers":[1,2,4]},
 "seal_params":{"poly_modulus_degree":8192,"coeff_modulus_bits":[43,43,44,44,44],"plain_modulus":1785857}}
EOF
"$bin" db build --input "$dir/s.csv" --params "$dir/params.json" --out "$dir/s.db" 2>&1 | grep -E "bundles|error" || true

port=$((20000 + RANDOM % 20000))
"$bin" sender --protocol unbalanced --db "$dir/s.db" --listen "127.0.0.1:$port" --sessions 0 \
  --max-concurrent 8 --timeout 5 --session-timeout 120 2> "$dir/sender.log" &
server=$!
for _ in $(seq 100); do grep -q "listening" "$dir/sender.log" 2>/dev/null && break; sleep 0.1; done

start=$(date +%s.%N)
pids=()
per=$(((connections + procs - 1) / procs))
for p in $(seq "$procs"); do
  # Bounded: the whole load must be through within 2 minutes.
  timeout 120 "$clients" "127.0.0.1:$port" "$n" "$per" "$p" 8 > "$dir/clients$p.out" 2> "$dir/clients$p.err" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
wall=$(echo "$(date +%s.%N) - $start" | bc)

# Still serving: one more honest receiver after all that.
printf 'email\nuser%07d@example.org\nnobody@example.net\n' 7 > "$dir/q.csv"
"$bin" receiver --protocol unbalanced --input "$dir/q.csv" --connect "127.0.0.1:$port" --output "$dir/out.csv" 2>/dev/null
grep -q "user0000007@example.org" "$dir/out.csv" && ! grep -q nobody "$dir/out.csv" || { echo "the server stopped answering right" >&2; status=1; }
sleep 0.5
peak=$(awk '/VmHWM/ {print $2}' "/proc/$server/status")

cat "$dir"/clients*.out
honest=$(cat "$dir"/clients*.out | awk '{s += $2} END {print s}')
hostile=$(cat "$dir"/clients*.out | awk '{s += $NF} END {print s}')
errors=$(grep -c ": error:" "$dir/sender.log" || true)
distinct=$(grep ": error:" "$dir/sender.log" | grep -oE '^session [0-9]+' | sort -u | wc -l)
echo "connections $((honest + hostile + 1)) in ${wall%??????} s: $honest honest answered right (+1 after), $hostile hostile;" \
  "server logged $errors errors ($distinct sessions), peak RSS $((peak / 1024)) MiB"
if [ "$errors" -ne "$hostile" ] || [ "$distinct" -ne "$errors" ]; then
  echo "each hostile client should be logged exactly once" >&2
  status=1
fi
cat "$dir"/clients*.err >&2
grep -E "panicked" "$dir/sender.log" >&2 && status=1
grep ": error:" "$dir/sender.log" | sed -E 's/^session [0-9]+ \([^)]*\): //' | sort | uniq -c | sort -rn | head -12
exit $status
