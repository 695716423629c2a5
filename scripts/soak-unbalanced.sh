#!/usr/bin/env bash
# Soak test of an unbalanced sender under hostile load: a database of 2^LOG items served
# with --max-concurrent 8 and a 5 s frame deadline, CONNECTIONS connections from PROCS
# client processes at once (examples/soak_clients.rs): one in three an honest receiver
# whose answer is checked against the plain set computation, the others garbage, a
# truncated frame, a byte a second, silence, a frame claiming 4 GiB, or a
# crafted relinearisation key; and, all the while, IDLE connections that say nothing
# (one in four sends one byte), eight from each of the addresses 127.0.0.2, .3, …, each
# reopened as soon as the server drops it. (Clients that share an address with a flood
# share its --max-pending-per-address places: a flood from the honest clients' own address
# that reopens every dropped connection at once pushes them out too.) Checks that
# every honest query was answered right, that the server logged each hostile client once
# (a session error, or a refusal before its hello) and is still serving, and prints the
# server's peak RSS and the wall time. TLS=1 serves under mutual TLS.
#   [TLS=1] scripts/soak-unbalanced.sh [LOG=16] [CONNECTIONS=200] [PROCS=4] [IDLE=48]
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-16}; connections=${2:-200}; procs=${3:-4}; idle=${4:-48}
n=$((1 << log))
source scripts/bench-common.sh
cargo build --release -q -p setwise --features testing --example soak-clients
clients=$PWD/target/release/examples/soak-clients
dir=$(mktemp -d)
server=
pests=
cleanup() {
  [ -n "$pests" ] && kill "$pests" 2>/dev/null || true
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
server_tls=(--insecure-no-tls)
client_tls=()
if [ "${TLS:-0}" = 1 ]; then
  "$bin" tls init "$dir/pki" --names alice,bob > /dev/null
  server_tls=(--tls-cert "$dir/pki/alice.pem" --tls-key "$dir/pki/alice.key" --tls-ca "$dir/pki/ca.pem")
  client_tls=(--tls-cert "$dir/pki/bob.pem" --tls-key "$dir/pki/bob.key" --tls-ca "$dir/pki/ca.pem" --tls-server-name alice)
fi
"$bin" sender --protocol unbalanced --db "$dir/s.db" --listen "127.0.0.1:$port" --sessions 0 \
  --max-concurrent 8 --timeout 5 --session-timeout 120 "${server_tls[@]}" 2> "$dir/sender.log" &
server=$!
for _ in $(seq 100); do grep -q "listening" "$dir/sender.log" 2>/dev/null && break; sleep 0.1; done

# Idle connections held open for the whole run: reopened when the server drops them.
python3 - "$port" "$idle" <<'PY' &
import selectors, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
sel = selectors.DefaultSelector()
def open_one(i: int) -> None:
    try:
        # Eight from each of 127.0.0.2, .3, …: each source at its pending cap, none over it.
        s = socket.create_connection(("127.0.0.1", port), source_address=(f"127.0.0.{2 + i // 8}", 0))
    except OSError:
        time.sleep(0.1)
        return
    if i % 4 == 0:
        s.sendall(b"\x01")
    sel.register(s, selectors.EVENT_READ, i)
for i in range(n):
    open_one(i)
while True:
    for key, _ in sel.select(timeout=1):
        s = key.fileobj
        try:
            closed = not s.recv(1 << 16)
        except OSError:
            closed = True
        if closed:
            sel.unregister(s)
            s.close()
            open_one(key.data)
PY
pests=$!
sleep 1

start=$(date +%s.%N)
pids=()
per=$(((connections + procs - 1) / procs))
for p in $(seq "$procs"); do
  # Bounded: the whole load must be through within 2 minutes.
  SOAK_TLS=${client_tls:+$dir/pki} timeout 120 "$clients" "127.0.0.1:$port" "$n" "$per" "$p" 8 > "$dir/clients$p.out" 2> "$dir/clients$p.err" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
wall=$(echo "$(date +%s.%N) - $start" | bc)

# Still serving: one more honest receiver after all that.
printf 'email\nuser%07d@example.org\nnobody@example.net\n' 7 > "$dir/q.csv"
"$bin" receiver --protocol unbalanced --input "$dir/q.csv" --connect "127.0.0.1:$port" --output "$dir/out.csv" "${client_tls[@]}" 2>/dev/null
grep -q "user0000007@example.org" "$dir/out.csv" && ! grep -q nobody "$dir/out.csv" || { echo "the server stopped answering right" >&2; status=1; }
sleep 0.5
peak=$(awk '/VmHWM/ {print $2}' "/proc/$server/status")

cat "$dir"/clients*.out
honest=$(cat "$dir"/clients*.out | awk '{s += $2} END {print s}')
hostile=$(cat "$dir"/clients*.out | awk '{s += $NF} END {print s}')
kill "$pests" 2>/dev/null || true
wait "$pests" 2>/dev/null || true
pests=
sleep 0.5
errors=$(grep -c ": error:" "$dir/sender.log" || true)
distinct=$(grep ": error:" "$dir/sender.log" | grep -oE '^session [0-9]+' | sort -u | wc -l)
refused=$(grep -c "refused before its hello" "$dir/sender.log" || true)
echo "connections $((honest + hostile + 1)) in ${wall%??????} s beside $idle idle ones: $honest honest answered right (+1 after), $hostile hostile;" \
  "server logged $errors session errors ($distinct sessions) and $refused refusals before a hello, peak RSS $((peak / 1024)) MiB"
# A hostile client is a session error if its hello was well-formed, else a refusal; the
# idle connections add refusals of their own (at least one each as the hello deadline passes).
if [ "$distinct" -ne "$errors" ] || [ "$errors" -gt "$hostile" ] || [ "$((errors + refused))" -lt "$((hostile + idle))" ]; then
  echo "each hostile client should be logged exactly once, and each idle connection refused" >&2
  status=1
fi
cat "$dir"/clients*.err >&2
grep -E "panicked" "$dir/sender.log" >&2 && status=1
grep ": error:" "$dir/sender.log" | sed -E 's/^session [0-9]+ \([^)]*\): //' | sort | uniq -c | sort -rn | head -12
exit $status
