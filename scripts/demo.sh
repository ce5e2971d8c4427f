#!/usr/bin/env bash
# `make demo`: the seed's story with two devices, laptop and phone, each a pagesyncd with its own store, against
# one broker — all on loopback, under var/demo (made fresh each run).
#   1. The laptop makes a database of 60 tasks; the phone takes it offline: 50 rows in view come with it.
#   2. The phone favorites one task, then toggles the database off: the favorite stays, the rest go.
#   3. An edit on the laptop reaches the phone by push, no polling.
#   4. The broker goes away; the phone edits offline; the broker returns; the edit arrives on the laptop, and the
#      phone's catch-up fetches only the pages that changed.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(swift build --show-bin-path)
demo=var/demo
rm -rf "$demo"
mkdir -p "$demo"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$demo/broker.toml" <<TOML
[server]
listen = "127.0.0.1:$port"
[store]
path = "$demo/broker.sqlite"
TOML
for device in laptop phone; do
  cat > "$demo/$device.toml" <<TOML
[broker]
url = "http://127.0.0.1:$port"
[store]
path = "$demo/$device.sqlite"
[api]
socket = "$demo/$device.sock"
[sync]
backoff_base_ms = 100
backoff_cap_ms = 1000
TOML
done

pids=()
broker=""
cleanup() {
  for pid in "${pids[@]}" $broker; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

start_broker() {
  "$bin/pagesync-broker" --config "$demo/broker.toml" 2>>"$demo/broker.log" &
  broker=$!
  for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return; sleep 0.05; done
  echo "the broker did not start: see $demo/broker.log" >&2
  exit 1
}
start_broker
for device in laptop phone; do
  "$bin/pagesyncd" --config "$demo/$device.toml" 2>>"$demo/$device.log" &
  pids+=($!)
done
for device in laptop phone; do
  for _ in $(seq 100); do [ -S "$demo/$device.sock" ] && break; sleep 0.05; done
done
laptop() { "$bin/pagesync" --socket "$demo/laptop.sock" "$@"; }
phone() { "$bin/pagesync" --socket "$demo/phone.sock" "$@"; }
json() { python3 -c "import json, sys; print(eval(sys.argv[1], {'j': json.load(sys.stdin)}))" "$1"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
now_ms() { date +%s%3N; }

say "1. The laptop makes a database of 60 tasks"
laptop create page --id home --title "Home"
laptop create database --id tasks --parent home --title "Tasks" >/dev/null
for i in $(seq -w 1 60); do
  laptop create row --database tasks --id "task-$i" --title "Task $i" --set Status=Todo >/dev/null
done
laptop sync
echo "laptop: 60 rows created and pushed"

say "The phone takes the database offline"
phone offline add tasks
phone sync >/dev/null
count=$(phone --json offline list | json 'len(j)')
complete=$(phone --json offline list | json 'sum(1 for e in j if e["complete"])')
echo "phone: $count pages offline (the database and its first 50 rows in view), $complete complete"
phone why task-07

say "2. The phone favorites task-07, then toggles the database off"
phone favorite add task-07
phone offline remove tasks
phone offline list
phone why task-07

say "3. An edit on the laptop reaches the phone by push"
start=$(now_ms)
laptop edit task-07 --title "Call the plumber" --set Status=Doing >/dev/null
until [ "$(phone --json show task-07 | json 'j["title"]')" = "Call the plumber" ]; do
  if [ $(($(now_ms) - start)) -gt 10000 ]; then echo "the edit did not arrive in 10 s" >&2; exit 1; fi
  sleep 0.02
done
echo "phone shows the laptop's edit after $(($(now_ms) - start)) ms (the phone never polled: it was poked)"
phone show task-07

say "The phone takes the database offline again"
phone offline add tasks >/dev/null
phone sync >/dev/null
echo "phone: $(phone --json offline list | json 'len(j)') pages offline"

say "4. The broker goes away"
kill -TERM "$broker"
wait "$broker" 2>/dev/null || true
broker=""
for _ in $(seq 100); do [ "$(phone --json status | json 'j["connected"]')" = "False" ] && break; sleep 0.05; done
phone status

say "Offline, both devices keep working"
phone edit task-03 --title "Buy milk (edited offline)"
phone block add task-03 --id note-1 --text "2 litres"
laptop edit task-12 --set Status=Done >/dev/null
laptop edit task-13 --set Status=Done >/dev/null
echo "phone: $(phone --json status | json 'j["pendingMutations"]') edits queued; laptop: $(laptop --json status | json 'j["pendingMutations"]')"
phone show task-03
before=$(phone --json status | json 'j["fetchedPages"]')

say "The broker returns"
start_broker
laptop sync
phone sync
after=$(phone --json status | json 'j["fetchedPages"]')
offline=$(phone --json offline list | json 'len(j)')
echo "phone reconnected: fetched $((after - before)) of its $offline offline pages (the ones that changed)"
laptop sync >/dev/null
echo "laptop sees the phone's offline edit: $(laptop --json show task-03 | json 'j["title"]')"
phone --json status | json '{k: j[k] for k in ("connected", "pendingMutations", "failedMutations", "offlinePages", "fetchedPages")}'
