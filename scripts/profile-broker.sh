#!/usr/bin/env bash
# The broker's hot paths, counted by valgrind's callgrind (instruction counts: repeatable on a shared machine,
# where times are not). Runs a release broker under callgrind on loopback, drives it with pagesync-load (W1: a
# fixed number of batches of 10 mutations; then B1: fan-out of a fixed number of batches to subscribers), stops
# it, and prints the functions with the most instructions, inclusive and exclusive, and instructions per batch.
#
#   scripts/profile-broker.sh [BIN_DIR]        (default .build/release; needs valgrind)
#
# The raw profile stays in var/profile/callgrind.out (open it with kcachegrind or callgrind_annotate).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-.build/release}
out=var/profile
rm -rf "$out" && mkdir -p "$out"
cat > "$out/broker.toml" <<TOML
[server]
listen = "127.0.0.1:0"
[store]
path = "$out/broker.sqlite"
TOML
# Valgrind 3.19 cannot read the DWARF 5 that Swift's compiler writes: profile a copy without it (the symbol table,
# so function names, stays).
objcopy --strip-debug "$bin/pagesync-broker" "$out/pagesync-broker"
valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" --separate-threads=no \
  "$out/pagesync-broker" --config "$out/broker.toml" > "$out/broker.log" 2>&1 &
broker=$!
for _ in $(seq 600); do grep -q "broker.address=" "$out/broker.log" 2>/dev/null && break; sleep 0.1; done
address=$(grep -o 'broker.address=[^ ]*' "$out/broker.log" | head -1 | cut -d= -f2)
[ -n "$address" ] || { echo "the broker did not start under valgrind:" >&2; cat "$out/broker.log" >&2; exit 1; }
# Slow rates: under callgrind the broker runs some 50 times slower, and an open-loop writer must not outrun it.
"$bin/pagesync-load" run W1 --broker "http://$address" --rate 20 --seconds 10 --writers 2 --quiet --json \
  > "$out/w1.json"
"$bin/pagesync-load" run B1 --broker "http://$address" --rate 10 --seconds 10 --subscribers 50 --writers 1 \
  --quiet --json > "$out/b1.json"
kill -TERM "$broker"
wait "$broker" || true
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
w1, b1 = json.load(open(f"{out}/w1.json")), json.load(open(f"{out}/b1.json"))
print(f"W1: {w1['batches']['acked']} batches of {w1['batch_size']} acked; "
      f"B1: {b1['batches']['acked']} batches to {b1['subscribers']} subscribers, "
      f"{b1['delivery']['frames']} frames")
PY
callgrind_annotate --inclusive=yes "$out/callgrind.out" > "$out/inclusive.txt" 2>/dev/null
callgrind_annotate "$out/callgrind.out" > "$out/exclusive.txt" 2>/dev/null
echo "--- inclusive"; sed -n 1,60p "$out/inclusive.txt"
echo "--- exclusive"; sed -n 1,45p "$out/exclusive.txt"
