#!/usr/bin/env bash
# A staged run from the CLI (`setwise stage run`, both parties on this machine meeting
# through an exchange directory or an S3 bucket) against the same protocol over loopback
# TCP, on the same generated data in the same sitting: 2^LOG × 2^LOG rows, half common.
# Prints each party's stages, wall times and peak memory, the exchange's and workdirs'
# bytes, and the ratio staged / connected.
#
# Usage: scripts/bench-staged.sh [LOG] [PROTOCOL] [BUCKETS]   (defaults: 20, vole, auto)
#   S3=1          the exchange in a bucket of a SeaweedFS server on loopback
#                 (python/tests/s3_server.py: needs setwise in $SETWISE_VENV, default
#                 target/python-venv, as scripts/test-python makes it)
#   MEMORY=SIZE   each party's `--memory` (both run on this machine: give each at most
#                 half of it)
#   CONNECTED=0   no connected run (at sizes whose connected run does not fit memory)
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-20}; protocol=${2:-vole}; buckets=${3:-auto}
n=$((1 << log))
source scripts/bench-common.sh
dir=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "user%07d@example.org\n", i }' > "$dir/s.txt"
awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) if (i < n / 2) printf "user%07d@example.org\n", i; else printf "member%07d@example.net\n", i }' > "$dir/r.txt"
"$bin" stage keygen "$dir/exchange.key" 2>/dev/null
exchange=$dir/exchange
if [ "${S3:-0}" = 1 ]; then
  py=${SETWISE_VENV:-$PWD/target/python-venv}/bin/python
  "$py" python/tests/s3_server.py "$dir/s3" > "$dir/s3.out" 2> "$dir/s3.err" &
  server=$!
  until [ -s "$dir/s3.out" ]; do
    kill -0 "$server" 2>/dev/null || { tail -40 "$dir/s3.err"; exit 1; }
    sleep 0.5
  done
  while IFS='=' read -r name value; do
    [ -n "$name" ] && export "$name=$value"
  done < "$dir/s3.out"
  exchange=s3://exchange/bench-$log
fi
common=(--protocol "$protocol" --exchange "$exchange" --run-id bench --buckets "$buckets" --exchange-key "$dir/exchange.key")
[ -n "${MEMORY:-}" ] && common+=(--memory "$MEMORY")
start=$(date +%s.%N)
/usr/bin/time -f "staged sender   wall %e s, peak RSS %M KiB" "$bin" stage run --role sender "${common[@]}" \
  --input "$dir/s.txt" --workdir "$dir/s-work" 2> "$dir/s.err" &
spid=$!
/usr/bin/time -f "staged receiver wall %e s, peak RSS %M KiB" "$bin" stage run --role receiver "${common[@]}" \
  --input "$dir/r.txt" --workdir "$dir/r-work" --output "$dir/staged.txt" 2> "$dir/r.err" || { cat "$dir/r.err"; exit 1; }
wait "$spid" || { cat "$dir/s.err"; exit 1; }
staged_s=$(echo "$(date +%s.%N) - $start" | bc)
echo "2^$log × 2^$log $protocol intersection, staged (buckets $buckets${MEMORY:+, --memory $MEMORY each}$([ "${S3:-0}" = 1 ] && echo ", exchange in an S3 bucket")):"
cat "$dir/s.err" "$dir/r.err" | grep -E "done in [0-9]*[1-9]\.|done in 0\.[1-9]|wall|intersection size"
if [ "${S3:-0}" = 1 ]; then
  echo "exchange: the S3 server's files $(du -sh "$dir/s3" | cut -f1); workdirs $(du -shc "$dir/s-work" "$dir/r-work" | tail -1 | cut -f1)"
else
  echo "exchange: $(du -sh "$dir/exchange" | cut -f1); workdirs $(du -shc "$dir/s-work" "$dir/r-work" | tail -1 | cut -f1)"
fi
echo "start to finish: ${staged_s} s"
[ "$(wc -l < "$dir/staged.txt")" -eq $((n / 2)) ] || { echo "STAGED ROWS: $(wc -l < "$dir/staged.txt"), not $((n / 2))"; exit 1; }
[ "${CONNECTED:-1}" = 0 ] && exit 0
port=$((20000 + RANDOM % 20000))
start=$(date +%s.%N)
/usr/bin/time -f "cli sender   wall %e s, peak RSS %M KiB" "$bin" sender --protocol "$protocol" --insecure-no-tls \
  --input "$dir/s.txt" --listen "127.0.0.1:$port" 2> "$dir/cs.err" &
spid=$!
sleep 0.2
/usr/bin/time -f "cli receiver wall %e s, peak RSS %M KiB" "$bin" receiver --protocol "$protocol" --insecure-no-tls \
  --input "$dir/r.txt" --connect "127.0.0.1:$port" --output "$dir/cli.txt" 2> "$dir/cr.err"
wait "$spid"
cli_s=$(echo "$(date +%s.%N) - $start" | bc)
echo "connected over loopback TCP, same data:"
grep -h -E "wall|intersection size" "$dir/cs.err" "$dir/cr.err"
cmp -s <(sort "$dir/staged.txt") <(sort "$dir/cli.txt") && echo "the same rows both ways" || { echo "ROWS DIFFER"; exit 1; }
echo "start to finish: ${cli_s} s; staged / connected: $(echo "scale=2; $staged_s / $cli_s" | bc)×"
