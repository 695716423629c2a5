#!/usr/bin/env bash
# Runs `setwise sender` and `setwise receiver` as two processes over loopback TCP on
# generated CSV files of 2^LOG items each (half common), and prints each process's wall
# time and peak resident memory (GNU time).
# Usage: scripts/bench-two-process.sh [LOG] [PROTOCOL] [OP] [FLAGS...], the flags given to
# both sides (e.g. --security malicious).
# FORMAT=parquet converts both files to Parquet first (with pyarrow, from $PYTHON or
# python3) and writes the matching rows as Parquet.
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:-20}; protocol=${2:-ecdh}; op=${3:-intersection}
flags=("${@:4}")
n=$((1 << log))
source scripts/bench-common.sh
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
awk -v n="$n" 'BEGIN { print "email,id"; for (i = 0; i < n; i++) printf "user%07d@example.org,%d\n", i, i }' > "$dir/s.csv"
awk -v n="$n" 'BEGIN { print "id,email"; for (i = 0; i < n; i++) if (i < n / 2) printf "%d,user%07d@example.org\n", i, i; else printf "%d,member%07d@example.net\n", i, i }' > "$dir/r.csv"
ext=csv
if [ "${FORMAT:-csv}" = parquet ]; then
  "${PYTHON:-python3}" -c 'import sys, pyarrow.csv as c, pyarrow.parquet as p
for f in sys.argv[1:]: p.write_table(c.read_csv(f), f[:-4] + ".parquet")' "$dir/s.csv" "$dir/r.csv"
  ext=parquet
fi
port=$((20000 + RANDOM % 20000))
/usr/bin/time -f "sender   wall %e s, peak RSS %M KiB" "$bin" sender --protocol "$protocol" --op "$op" "${flags[@]}" \
  --input "$dir/s.$ext" --key email --listen "127.0.0.1:$port" 2> "$dir/s.err" &
/usr/bin/time -f "receiver wall %e s, peak RSS %M KiB" "$bin" receiver --protocol "$protocol" --op "$op" "${flags[@]}" \
  --input "$dir/r.$ext" --key email --connect "127.0.0.1:$port" --output "$dir/out.$ext" 2> "$dir/r.err"
wait
echo "2^$log × 2^$log $protocol $op ${flags[*]} over loopback TCP, two processes:"
grep -h -E "wall|intersection size|done" "$dir/s.err" "$dir/r.err"
if [ "$ext" = csv ]; then
  echo "rows written: $(($(wc -l < "$dir/out.csv") - 1))"
else
  echo "rows written: $("${PYTHON:-python3}" -c 'import sys, pyarrow.parquet as p; print(p.read_metadata(sys.argv[1]).num_rows)' "$dir/out.parquet")"
fi
