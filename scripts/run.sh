#!/usr/bin/env bash
# `make run`: a broker and a device daemon on loopback with the sample configs (the embedded defaults), their
# SQLite files under ./var. Ctrl-C stops both (SIGTERM each, then wait).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(swift build --show-bin-path)
mkdir -p var
"$bin/pagesync-broker" --config config/pagesync-broker.toml &
broker=$!
daemon=""
stop() {
  trap - INT TERM EXIT
  [ -n "$daemon" ] && kill -TERM "$daemon" 2>/dev/null || true
  kill -TERM "$broker" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT
for _ in $(seq 100); do
  curl -fsS http://127.0.0.1:7700/healthz >/dev/null 2>&1 && break
  kill -0 "$broker" 2>/dev/null || { echo "the broker did not start (is port 7700 taken?)" >&2; exit 1; }
  sleep 0.1
done
"$bin/pagesyncd" --config config/pagesyncd.toml &
daemon=$!
for _ in $(seq 100); do [ -S var/pagesyncd.sock ] && break; sleep 0.1; done
cat <<USAGE

pagesync is running: broker on http://127.0.0.1:7700 (store var/broker.sqlite), daemon on var/pagesyncd.sock
(store var/pagesyncd.sqlite). In another terminal, from this directory:

  export PATH="$bin:\$PATH"
  pagesync status
  pagesync create page --id home --title Home
  pagesync offline add home
  pagesync block add home --id b1 --text "hello"
  pagesync show home
  pagesync offline list
  pagesync --help

Ctrl-C stops both.
USAGE
wait
