#!/usr/bin/env bash
# A staged run from the CLI (`setwise stage run`, both parties on this machine meeting
# through an exchange directory) against the same protocol over loopback TCP, on the
# same generated data in the same sitting: 2^LOG × 2^LOG rows, half common. Prints each
# party's stages, wall times and peak memory, and the ratio staged / connected.
#
# Usage: scripts/bench-staged.sh [LOG] [PROTOCOL] [BUCKETS]   (defaults: 20, vole, auto)
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-20}; protocol=${2:-vole}; buckets=${3:-auto}
n=$((1 << log))
source scripts/bench-common.sh
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "user%07d@example.org\n", i }' > "$dir/s.txt"
awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) if (i < n / 2) printf "user%07d@example.org\n", i; else printf "member%07d@example.net\n", i }' > "$dir/r.txt"
"$bin" stage keygen "$dir/exchange.key" 2>/dev/null
common=(--protocol "$protocol" --exchange "$dir/exchange" --run-id bench --buckets "$buckets" --exchange-key "$dir/exchange.key")
start=$(date +%s.%N)
/usr/bin/time -f "staged sender   wall %e s, peak RSS %M KiB" "$bin" stage run --role sender "${common[@]}" \
  --input "$dir/s.txt" --workdir "$dir/s-work" 2> "$dir/s.err" &
spid=$!
/usr/bin/time -f "staged receiver wall %e s, peak RSS %M KiB" "$bin" stage run --role receiver "${common[@]}" \
  --input "$dir/r.txt" --workdir "$dir/r-work" --output "$dir/staged.txt" 2> "$dir/r.err" || { cat "$dir/r.err"; exit 1; }
wait "$spid" || { cat "$dir/s.err"; exit 1; }
staged_s=$(echo "$(date +%s.%N) - $start" | bc)
echo "2^$log × 2^$log $protocol intersection, staged (buckets $buckets):"
cat "$dir/s.err" "$dir/r.err" | grep -E "done in [0-9]*[1-9]\.|done in 0\.[1-9]|wall|intersection size"
echo "exchange: $(du -sh "$dir/exchange" | cut -f1); start to finish: ${staged_s} s"
port=$((20000 + RANDOM % 20000))
start=$(date +%s.%N)
/usr/bin/time -f "cli sender   wall %e s, peak RSS %M KiB" "$bin" sender --protocol "$protocol" --insecure-no-tls \
  --input "$dir/s.txt" --listen "127.0.0.1:$port" 2> "$dir/cs.err" &
sleep 0.2
/usr/bin/time -f "cli receiver wall %e s, peak RSS %M KiB" "$bin" receiver --protocol "$protocol" --insecure-no-tls \
  --input "$dir/r.txt" --connect "127.0.0.1:$port" --output "$dir/cli.txt" 2> "$dir/cr.err"
wait
cli_s=$(echo "$(date +%s.%N) - $start" | bc)
echo "connected over loopback TCP, same data:"
grep -h -E "wall|intersection size" "$dir/cs.err" "$dir/cr.err"
cmp -s <(sort "$dir/staged.txt") <(sort "$dir/cli.txt") && echo "the same rows both ways" || { echo "ROWS DIFFER"; exit 1; }
echo "start to finish: ${cli_s} s; staged / connected: $(echo "scale=2; $staged_s / $cli_s" | bc)×"
