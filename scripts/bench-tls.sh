#!/usr/bin/env bash
# What TLS costs: ecdh 2^LOG × 2^LOG and unbalanced 2^LOG × 256 (preset 1M-256 at
# LOG = 20) as two processes over loopback TCP, plain and mutual TLS alternating, REPS
# times each, in one run. Prints the receiver's wall time (process start to exit, so the
# TLS handshake is in it) and the run's own total from its report, with the medians.
#   scripts/bench-tls.sh [LOG=20] [REPS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-20}; reps=${2:-3}
n=$((1 << log))
source scripts/bench-common.sh
dir=$(mktemp -d)
servers=()
cleanup() {
  for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
"$bin" tls init "$dir/pki" --names alice,bob 2> /dev/null
server_tls=(--tls-cert "$dir/pki/alice.pem" --tls-key "$dir/pki/alice.key" --tls-ca "$dir/pki/ca.pem")
client_tls=(--tls-cert "$dir/pki/bob.pem" --tls-key "$dir/pki/bob.key" --tls-ca "$dir/pki/ca.pem" --tls-server-name alice)
awk -v n="$n" 'BEGIN { print "email"; for (i = 0; i < n; i++) printf "user%07d@example.org\n", i }' > "$dir/s.csv"
awk -v n="$n" 'BEGIN { print "email"; for (i = 0; i < n; i++) if (i < n / 2) printf "user%07d@example.org\n", i; else printf "member%07d@example.net\n", i }' > "$dir/r.csv"
awk -v n="$n" 'BEGIN { print "email"; for (i = 0; i < 256; i++) if (i % 2 == 0) printf "user%07d@example.org\n", (i * 7919) % n; else printf "member%07d@example.net\n", i }' > "$dir/q.csv"

# Times one receiver run: prints "wall_s total_s rows".
receive() {
  local start end
  start=$(date +%s.%N)
  "$bin" receiver "$@" --output "$dir/out.csv" --report "$dir/report.json" 2> "$dir/r.err" || { cat "$dir/r.err" >&2; exit 1; }
  end=$(date +%s.%N)
  python3 -c "import json,sys; r=json.load(open('$dir/report.json')); print(f'{$end-$start:.3f} {r[\"total_ms\"]/1e3:.3f}', sum(1 for _ in open('$dir/out.csv')) - 1)"
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

report() { # name, file of "mode wall total rows" lines
  for mode in plain tls; do
    printf '%-28s %-5s wall median %7.3f s  (runs: %s)  report total median %7.3f s\n' "$1" "$mode" \
      "$(awk -v m=$mode '$1 == m {print $2}' "$2" | median)" "$(awk -v m=$mode '$1 == m {printf "%s ", $2}' "$2")" \
      "$(awk -v m=$mode '$1 == m {print $3}' "$2" | median)"
  done
  awk '{r[$1] = $4} END {if (r["plain"] != r["tls"]) {print "rows differ: " r["plain"] " vs " r["tls"]; exit 1}}' "$2"
  python3 - "$2" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = lambda m, k: statistics.median(float(r[k]) for r in rows if r[0] == m)
print(f"{'':28} TLS costs {100 * (med('tls', 1) / med('plain', 1) - 1):+.1f} % of the wall time, "
      f"{100 * (med('tls', 2) / med('plain', 2) - 1):+.1f} % of the run's total")
EOF
}

echo "== ecdh 2^$log × 2^$log, $reps runs each, plain and mutual TLS alternating"
: > "$dir/ecdh.txt"
for _ in $(seq "$reps"); do
  for mode in plain tls; do
    port=$((20000 + RANDOM % 20000))
    extra=(); [ "$mode" = tls ] && extra=("${server_tls[@]}")
    "$bin" sender --input "$dir/s.csv" --listen "127.0.0.1:$port" "${extra[@]}" 2> /dev/null &
    extra=(); [ "$mode" = tls ] && extra=("${client_tls[@]}")
    echo "$mode $(receive --input "$dir/r.csv" --connect "127.0.0.1:$port" "${extra[@]}")" >> "$dir/ecdh.txt"
    wait
  done
done
report "ecdh intersection" "$dir/ecdh.txt"

echo "== unbalanced 2^$log × 256, $reps queries each to a plain and a mutual-TLS sender of one database"
params=(); [ "$log" = 20 ] && params=(--params 1M-256)
"$bin" db build --input "$dir/s.csv" --receiver-max 256 "${params[@]}" --out "$dir/s.db" > /dev/null 2>&1
plain_port=$((20000 + RANDOM % 10000)); tls_port=$((30000 + RANDOM % 10000))
"$bin" sender --protocol unbalanced --db "$dir/s.db" --listen "127.0.0.1:$plain_port" --sessions 0 2> /dev/null &
servers+=($!)
"$bin" sender --protocol unbalanced --db "$dir/s.db" --listen "127.0.0.1:$tls_port" --sessions 0 "${server_tls[@]}" 2> /dev/null &
servers+=($!)
: > "$dir/unbalanced.txt"
# A first query each loads nothing new but warms both servers; not counted.
receive --protocol unbalanced --input "$dir/q.csv" --connect "127.0.0.1:$plain_port" > /dev/null
receive --protocol unbalanced --input "$dir/q.csv" --connect "127.0.0.1:$tls_port" "${client_tls[@]}" > /dev/null
for _ in $(seq "$reps"); do
  echo "plain $(receive --protocol unbalanced --input "$dir/q.csv" --connect "127.0.0.1:$plain_port")" >> "$dir/unbalanced.txt"
  echo "tls $(receive --protocol unbalanced --input "$dir/q.csv" --connect "127.0.0.1:$tls_port" "${client_tls[@]}")" >> "$dir/unbalanced.txt"
done
report "unbalanced 256 queries" "$dir/unbalanced.txt"
