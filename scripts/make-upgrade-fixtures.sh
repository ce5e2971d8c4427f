#!/usr/bin/env bash
# Makes the store files of Tests/Fixtures/previous-release with the PREVIOUS release's programs (block text as a
# plain last-writer-wins string, before the CRDT): a broker store, and the store of a device that queued
# old-style `edit_block` text edits (and title edits, and a block added offline) while the broker was down.
# For humans, not CI: the upgrade tests read the committed files; run this only to make them again (then look
# at the diff of the README's table and the tests' expectations).
#
#   scripts/make-upgrade-fixtures.sh OLD_BIN_DIR [OUT_DIR]
#
# OLD_BIN_DIR holds pagesync-broker, pagesyncd and pagesync built at the release before the CRDT, c059485:
#   git worktree add --detach ../pagesync-prev c059485
#   cd ../pagesync-prev && swift build --product pagesync-broker && swift build --product pagesyncd \
#     && swift build --product pagesync
#   scripts/make-upgrade-fixtures.sh ../pagesync-prev/.build/debug
# OUT_DIR defaults to Tests/Fixtures/previous-release. Needs python3 (JSON, a free port) and sqlite3.
set -euo pipefail
[ $# -ge 1 ] || {
  sed -n '2,14p' "$0" >&2
  exit 64
}
old=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
out=${2:-Tests/Fixtures/previous-release}
for program in pagesync-broker pagesyncd pagesync; do
  [ -x "$old/$program" ] || {
    echo "$old/$program: not an executable" >&2
    exit 1
  }
done
work=$(mktemp -d /tmp/pagesync-fixtures-XXXXXX)
echo "working in $work"

# The e2e harness's users (Tests/IntegrationTests/Python/daemon_e2e.py, USERS): alice may write workspace w1.
token=alice-token-0123456789
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/broker.toml" <<TOML
[server]
listen = "127.0.0.1:$port"
[store]
path = "$work/broker.sqlite"
[[auth.tokens]]
token = "$token"
user = "alice"
workspaces = ["w1"]
TOML
for device in A B; do
  cat >"$work/$device.toml" <<TOML
[broker]
url = "http://127.0.0.1:$port"
token = "$token"
workspace = "w1"
[store]
path = "$work/$device.sqlite"
[api]
socket = "$work/$device.sock"
[sync]
heartbeat_interval = 5
backoff_base_ms = 50
backoff_cap_ms = 500
TOML
done

broker=""
daemons=()
cleanup() {
  for pid in "${daemons[@]}" $broker; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# Polls a command until it succeeds, at most 15 s.
wait_for() {
  local what=$1
  shift
  for _ in $(seq 300); do
    if "$@" >/dev/null 2>&1; then return; fi
    sleep 0.05
  done
  echo "timed out waiting for: $what (logs in $work)" >&2
  exit 1
}
connected() { [ "$("$old/pagesync" --socket "$work/$1.sock" --json status | json 'j["connected"]')" = "$2" ]; }
json() { python3 -c "import json, sys; print(eval(sys.argv[1], {'j': json.load(sys.stdin)}))" "$1"; }
A() { "$old/pagesync" --socket "$work/A.sock" --json "$@" >/dev/null; }
B() { "$old/pagesync" --socket "$work/B.sock" --json "$@" >/dev/null; }

"$old/pagesync-broker" --config "$work/broker.toml" >"$work/broker.log" 2>&1 &
broker=$!
wait_for "the broker" curl -fsS "http://127.0.0.1:$port/healthz"
for device in A B; do
  "$old/pagesyncd" --config "$work/$device.toml" >"$work/$device.log" 2>&1 &
  daemons+=($!)
done
for device in A B; do
  wait_for "device $device's API" "$old/pagesync" --socket "$work/$device.sock" status
  wait_for "device $device connected" connected "$device" True
done

# Device A writes; every text goes through the old broker as a plain string (b1 through an old edit_block too).
# A keeps its pages offline: a device drops the copy of a page it does not keep once its edits are acknowledged,
# and edits only pages it has a copy of.
A create page --id P1 --title "Upgrade notes"
A offline add P1
A block add P1 --id b1 --text "Hello world"
A block edit b1 --text "Hello, world"
A block add P1 --id b2 --text "Grüße aus Köln — naïve café ☕" --after b1
A block add P1 --id b3 --text "日本語のテキスト 🎉 emoji" --after b2
A block add P1 --id b4 --type heading --text $'Cafe\xcc\x81 cre\xcc\x80me (decomposed: NFD)' --after b3
A block add P1 --id b5 --text "" --after b4
A block add P1 --id b6 --text "deleted before the upgrade" --after b5
A block delete b6
A create page --id P2 --title "Second page"
A offline add P2
A block add P2 --id c1 --text "plain ASCII line"
A block add P2 --id c2 --text $'two lines\r\nand a\ttab' --after c1
A create page --id P3 --title "No blocks here"
A create page --id P4 --title "Kept offline, never edited offline"
A offline add P4
A block add P4 --id d1 --text "untouched: ½ ⅓ ¼ — Ω≈ç√"
A sync

# Device B takes the four pages offline and downloads them.
B offline add P1
B offline add P2
B offline add P3
B offline add P4
B sync
complete() {
  [ "$(sqlite3 "$work/B.sqlite" "SELECT count(*) FROM offline_page WHERE complete = 1")" = 4 ]
}
wait_for "B's four pages complete" complete

# The broker goes down; B edits offline: old-style whole-text edit_block mutations, titles, a block added.
kill -TERM "$broker"
wait "$broker" || true
broker=""
wait_for "B disconnected" connected B False
B block edit b1 --text "Hello, brave new world"
B block edit b2 --text "Grüße aus Köln — naïve café ☕☕"
B block edit b2 --text "Grüße aus Zürich — naïve café ☕☕"
B block edit b3 --text "日本語の新しいテキスト 🎉🎊 emoji!"
B edit P1 --title "Upgrade notes (edited offline)"
B edit P2 --title "Second page, edited offline"
B block add P2 --id c3 --text "added offline: ünïcödé" --after c2
B block edit c3 --text "added offline, then edited: ünïcödé"

for pid in "${daemons[@]}"; do
  kill -TERM "$pid"
  wait "$pid" || true
done
daemons=()

# One self-contained file each: the WAL checkpointed into the file and removed.
for file in broker B; do
  sqlite3 "$work/$file.sqlite" 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null
  rm -f "$work/$file.sqlite-wal" "$work/$file.sqlite-shm"
  [ "$(sqlite3 "$work/$file.sqlite" 'PRAGMA integrity_check;')" = ok ]
done
mkdir -p "$out"
cp "$work/broker.sqlite" "$out/broker.sqlite"
cp "$work/B.sqlite" "$out/pagesyncd.sqlite"
chmod 0644 "$out/broker.sqlite" "$out/pagesyncd.sqlite"
ls -l "$out"/*.sqlite
echo "queued on the device:"
sqlite3 "$out/pagesyncd.sqlite" "SELECT id, type, page_id, status FROM mutation_queue ORDER BY id"
rm -rf "$work"
