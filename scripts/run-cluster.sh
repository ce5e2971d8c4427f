#!/usr/bin/env bash
# `make run-cluster`: pagesync past one machine, on this one. PostgreSQL and Redis from Debian's packages run as
# processes of their own in a new directory under ./var (no system service is touched), two brokers share them
# (`[store] url`, `[bus] url`), and one device daemon runs against each broker, with the other broker as its
# failover. Ctrl-C stops everything by pid.
#
# `scripts/run-cluster.sh --check` (what `make test` runs) does the same in a temporary directory, makes an edit
# through the daemon on broker 1, waits for the daemon on broker 2 to get it by push, and prints one line (or the
# programs' logs when it fails).
set -euo pipefail
cd "$(dirname "$0")/.."
check=""
if [ "${1:-}" = "--check" ]; then
  check=1
  work=$(mktemp -d)
  chmod 755 "$work" # PostgreSQL's own user must reach its directory inside
  started=$(date +%s%3N)
  if CLUSTER_DIR="$work/cluster" CLUSTER_CHECK=1 "$0" > "$work/transcript" 2>&1; then
    echo "run-cluster: passed in $(($(date +%s%3N) - started)) ms"
    rm -rf "$work"
    exit 0
  fi
  cat "$work/transcript"
  for log in "$work"/cluster/*.log; do [ -f "$log" ] && { echo "--- $log (last 20 lines)"; tail -n 20 "$log"; }; done
  rm -rf "$work"
  exit 1
fi
check=${CLUSTER_CHECK:-}

bin=$(swift build --show-bin-path)
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pgbin" ] || [ ! -x "$pgbin/initdb" ]; then
  echo "run-cluster: PostgreSQL's server is not installed (Debian: apt-get install postgresql)" >&2
  exit 1
fi
command -v redis-server >/dev/null || { echo "run-cluster: redis-server is not installed (apt-get install redis-server)" >&2; exit 1; }

if [ -n "${CLUSTER_DIR:-}" ]; then
  dir=$CLUSTER_DIR
  mkdir -p "$dir"
else
  mkdir -p var
  dir=$(mktemp -d "$PWD/var/cluster.XXXXXX")
fi
dir=$(cd "$dir" && pwd)
chmod 755 "$dir"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
pg_port=$(free_port)
redis_port=$(free_port)
broker_ports=("$(free_port)" "$(free_port)")

pids=()
broker_pids=()
pg_started=""
stop() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  # PostgreSQL's postmaster is not our child when it runs as the postgres user: stop it by the pid it wrote.
  if [ -n "$pg_started" ] && [ -f "$dir/pg/postmaster.pid" ]; then
    kill -TERM "$(head -n 1 "$dir/pg/postmaster.pid")" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  for _ in $(seq 100); do [ -f "$dir/pg/postmaster.pid" ] || break; sleep 0.05; done
}
trap stop EXIT INT TERM
# wait_for WHAT COMMAND...: up to 10 s.
wait_for() {
  local what=$1
  shift
  for _ in $(seq 200); do "$@" >/dev/null 2>&1 && return; sleep 0.05; done
  echo "run-cluster: $what did not start: see the logs in $dir" >&2
  exit 1
}

# PostgreSQL refuses to run as root: as root, it runs as the postgres user that Debian's package made.
as_pg=()
if [ "$(id -u)" = 0 ]; then
  as_pg=(runuser -u postgres --)
  mkdir -p "$dir/pg"
  chown postgres "$dir/pg"
  chmod 700 "$dir/pg"
fi
"${as_pg[@]}" "$pgbin/initdb" -D "$dir/pg" -U pagesync -A trust --no-sync >"$dir/postgres.log" 2>&1
"${as_pg[@]}" "$pgbin/postgres" -D "$dir/pg" -p "$pg_port" -c listen_addresses=127.0.0.1 \
  -c unix_socket_directories="$dir/pg" >>"$dir/postgres.log" 2>&1 &
pids+=($!)
pg_started=1
wait_for PostgreSQL "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pg_port"
"$pgbin/createdb" -h 127.0.0.1 -p "$pg_port" -U pagesync pagesync
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
pids+=($!)
wait_for Redis redis-cli -p "$redis_port" ping

for n in 1 2; do
  cat >"$dir/broker$n.toml" <<TOML
[server]
listen = "127.0.0.1:${broker_ports[$((n - 1))]}"
[store]
url = "postgres://pagesync@127.0.0.1:$pg_port/pagesync"
[bus]
url = "redis://127.0.0.1:$redis_port"
TOML
  "$bin/pagesync-broker" --config "$dir/broker$n.toml" 2>>"$dir/broker$n.log" &
  pids+=($!)
  broker_pids+=($!)
  wait_for "broker $n" curl -fsS "http://127.0.0.1:${broker_ports[$((n - 1))]}/healthz"
done
for n in 1 2; do
  own=${broker_ports[$((n - 1))]}
  other=${broker_ports[$((2 - n))]}
  cat >"$dir/daemon$n.toml" <<TOML
[broker]
# Its own broker first; the other one if that one is lost.
url = ["http://127.0.0.1:$own", "http://127.0.0.1:$other"]
[store]
path = "$dir/daemon$n.sqlite"
[api]
socket = "$dir/daemon$n.sock"
[sync]
backoff_base_ms = 100
backoff_cap_ms = 2000
TOML
  "$bin/pagesyncd" --config "$dir/daemon$n.toml" 2>>"$dir/daemon$n.log" &
  pids+=($!)
  wait_for "daemon $n" test -S "$dir/daemon$n.sock"
done

device() {
  local n=$1
  shift
  "$bin/pagesync" --socket "$dir/daemon$n.sock" "$@"
}
json() { python3 -c "import json, sys; print(eval(sys.argv[1], {'j': json.load(sys.stdin)}))" "$1"; }

if [ -n "$check" ]; then
  device 1 create page --id cluster-check --title "Made on broker 1"
  device 1 sync >/dev/null
  device 2 offline add cluster-check
  device 2 sync >/dev/null
  device 1 edit cluster-check --title "Edited through broker 1" >/dev/null
  start=$(date +%s%3N)
  until [ "$(device 2 --json show cluster-check | json 'j["title"]')" = "Edited through broker 1" ]; do
    if [ $(($(date +%s%3N) - start)) -gt 10000 ]; then
      echo "run-cluster: the edit through broker 1 did not reach the daemon on broker 2 in 10 s" >&2
      exit 1
    fi
    sleep 0.05
  done
  echo "the daemon on broker 2 got the edit made through broker 1 after $(($(date +%s%3N) - start)) ms"
  exit 0
fi

cat <<USAGE

pagesync is running as a cluster, everything under $dir:
  PostgreSQL  postgres://pagesync@127.0.0.1:$pg_port/pagesync   (psql -h 127.0.0.1 -p $pg_port -U pagesync pagesync)
  Redis       redis://127.0.0.1:$redis_port                        (redis-cli -p $redis_port monitor)
  broker 1    http://127.0.0.1:${broker_ports[0]} (pid ${broker_pids[0]})   daemon 1 on $dir/daemon1.sock
  broker 2    http://127.0.0.1:${broker_ports[1]} (pid ${broker_pids[1]})   daemon 2 on $dir/daemon2.sock

Watch an edit cross brokers, in another terminal, from this directory:

  export PATH="$bin:\$PATH"
  pagesync --socket $dir/daemon1.sock create page --id home --title Home
  pagesync --socket $dir/daemon2.sock offline add home
  pagesync --socket $dir/daemon2.sock watch &
  pagesync --socket $dir/daemon1.sock edit home --title "Edited on broker 1"
  pagesync --socket $dir/daemon2.sock show home

The edit is committed in PostgreSQL by broker 1, published on Redis, and pushed by broker 2 to daemon 2, which
fetches it. Stop broker 1 (kill -9 ${broker_pids[0]}) and daemon 1 moves to broker 2; \`pagesync status\` names
the broker. Each program's log is in that directory.

Ctrl-C stops everything.
USAGE
wait
