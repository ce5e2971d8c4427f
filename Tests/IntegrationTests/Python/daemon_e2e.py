"""pagesyncd end to end: a real broker, real daemons, driven only through the `pagesync` command line, their
SQLite files read with the `sqlite3` command line.

Usage: daemon_e2e.py BIN_DIR SCENARIO|all

BIN_DIR holds the built pagesync-broker, pagesyncd and pagesync. Each scenario runs in a temporary directory of
its own with a broker on 127.0.0.1 (port 0, learnt from its `broker.address=` log line) and one daemon per device
(A and B in workspace w1, C in workspace w2). Prints one "OK ..." line per check (waits say how long they took)
and "ALL OK" at the end when every check of every scenario passed. A failing check prints "FAIL", what was
expected and what was found, then the logs of every process of the scenario, and the script exits 1.
PAGESYNC_E2E_LOG=debug sets the processes' log level.

Every process a scenario starts is stopped at its end, whatever happened. Waiting for something asynchronous is a
poll with a deadline (every 50 ms), never a bare sleep. Set PAGESYNC_E2E_KEEP=1 to keep the temporary directories.
"""
import base64
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else ""
# The TLS scenarios' certificates, made by the Swift test with the openssl command (TestCertificates): ca.pem, and
# NAME.pem (chain) + NAME.key for server (DNS:localhost, IP:127.0.0.1), renewed (the same names, a new key) and
# other (DNS:other.example only).
TLS_DIR = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else ""
BROKER_PROGRAM = os.path.join(BIN, "pagesync-broker")
DAEMON_PROGRAM = os.path.join(BIN, "pagesyncd")
CLI_PROGRAM = os.path.join(BIN, "pagesync")

# user -> (token, workspaces), as the broker's [[auth.tokens]].
USERS = {
    "alice": ("alice-token-0123456789", ["w1"]),
    "carol": ("carol-token-0123456789", ["w2"]),
}

# The daemons' and the broker's [log] level: PAGESYNC_E2E_LOG=debug to see more when a scenario fails.
LOG_LEVEL = os.environ.get("PAGESYNC_E2E_LOG", "info")
POLL_SECONDS = 0.05
WAIT_SECONDS = 15.0


class CheckFailed(Exception):
    """A check that did not hold: the message says what was expected and what was found."""


def ok(message):
    print("OK " + message, flush=True)


def note(message):
    print("   " + message, flush=True)


def check(condition, what, expected=None, found=None):
    if not condition:
        detail = "" if expected is None and found is None else f"\n  expected: {expected!r}\n  found:    {found!r}"
        raise CheckFailed(what + detail)
    ok(what)


def check_equal(found, expected, what):
    check(found == expected, what, expected, found)


def set_difference(found, expected):
    """Says what is missing from and what is extra in `found`, for sets of rows."""
    missing = sorted(expected - found, key=repr)
    extra = sorted(found - expected, key=repr)
    return f"missing {missing}, unexpected {extra}"


def wait_until(what, probe, timeout=WAIT_SECONDS, expected=None):
    """Calls `probe` every 50 ms until it returns (True, found), at most `timeout` seconds; returns the seconds it
    took. A probe may raise CheckFailed while the state is not there yet (a command that still fails): that counts
    as not yet. On timeout, fails with `expected` and the last thing found."""
    started = time.monotonic()
    found = None
    while True:
        try:
            done, found = probe()
        except CheckFailed as error:
            done, found = False, f"(probe failed: {error})"
        elapsed = time.monotonic() - started
        if done:
            ok(f"{what} (after {elapsed * 1000:.0f} ms)")
            return elapsed
        if elapsed > timeout:
            raise CheckFailed(f"{what}: not within {timeout:.0f} s\n  expected: {expected!r}\n  found:    {found!r}")
        time.sleep(POLL_SECONDS)


def sqlite_rows(path, query):
    """Rows of `query` on the SQLite file at `path`, read with the sqlite3 command line, as dicts."""
    run = subprocess.run(["sqlite3", "-json", "-cmd", ".timeout 5000", path, query],
                         capture_output=True, text=True, timeout=30)
    if run.returncode != 0:
        raise CheckFailed(f"sqlite3 {path} {query!r} exited {run.returncode}: {run.stderr.strip()}")
    return json.loads(run.stdout) if run.stdout.strip() else []


class Scenario:
    """One scenario's temporary directory and processes. As a context manager it stops every process at the end
    and, when the scenario failed, prints every log."""

    def __init__(self, name):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"pagesync-e2e-{name}-")
        self.processes = []  # (label, Popen)
        self.logs = []  # paths
        self.proxies = []
        self.servers = []  # servers started outside `processes` (a PostgreSQL): each `close()`d at the end

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        for proxy in self.proxies:
            proxy.close()
        for server in self.servers:
            server.close()
        for _, process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for label, process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                print(f"   {label} did not stop within 10 s of SIGTERM: killed", flush=True)
                process.kill()
                process.wait()
        if kind is not None:
            if issubclass(kind, CheckFailed):
                print(f"FAIL {self.name}: {error}", flush=True)
            else:
                print(f"FAIL {self.name}: the harness raised\n{''.join(traceback.format_exception(error))}",
                      flush=True)
            for path in self.logs:
                print(f"----- {os.path.basename(path)} (last 150 lines) -----", flush=True)
                try:
                    with open(path, errors="replace") as log:
                        print("".join(log.readlines()[-150:]), flush=True)
                except OSError as failure:
                    print(f"(cannot read: {failure})")
        if os.environ.get("PAGESYNC_E2E_KEEP"):
            print(f"   kept {self.dir}", flush=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def start(self, label, argv, log_path, env=None):
        """Starts `argv` with its output in `log_path`; `env`: variables added to this process's environment."""
        log = open(log_path, "w")
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   cwd=self.dir, env={**os.environ, **env} if env else None)
        log.close()
        self.processes.append((label, process))
        self.logs.append(log_path)
        return process

    def broker(self, tls=None, env=None, name="broker", store=None, bus=None):
        broker = Broker(self, name, store)
        broker.tls = tls
        broker.bus = bus
        broker.start(env)
        return broker

    def redis(self):
        redis = Redis(self)
        redis.start()
        return redis

    def postgres(self):
        postgres = Postgres(self)
        self.servers.append(postgres)
        postgres.start()
        return postgres

    def device(self, name, broker_url, user="alice", workspace="w1", wait_connected=True, **config):
        device = Device(self, name, broker_url, user, workspace, config)
        device.start(wait_connected=wait_connected)
        return device


class Broker:
    """`pagesync-broker` on 127.0.0.1 with a store in the scenario's directory. Its first start takes port 0 and
    learns the port from the log; later starts reuse that port, so devices find it again."""

    def __init__(self, scenario, name="broker", store=None):
        self.scenario = scenario
        self.name = name  # its config and log files' names: two brokers may share a store (`store`), not those
        self.port = 0
        self.starts = 0
        self.process = None
        self.store = store or os.path.join(scenario.dir, "broker.sqlite")
        self.config = os.path.join(scenario.dir, f"{name}.toml")
        self.users = dict(USERS)  # what write_config grants; a scenario may change it and reload()
        self.tls = None  # (certificate chain, key): [server.tls], and the URL is https://localhost:PORT
        self.bus = None  # a Redis (below): [bus] url, the bus between brokers sharing the store

    @property
    def url(self):
        if self.tls:
            return f"https://localhost:{self.port}"
        return f"http://127.0.0.1:{self.port}"

    def write_config(self):
        tokens = "".join(
            f'[[auth.tokens]]\ntoken = "{token}"\nuser = "{user}"\nworkspaces = {json.dumps(workspaces)}\n'
            for user, (token, workspaces) in self.users.items())
        with open(self.config, "w") as config:
            tls = f'[server.tls]\ncert = "{self.tls[0]}"\nkey = "{self.tls[1]}"\n' if self.tls else ""
            # Short bus retries: Redis killed and started again by a test is back within a few hundred ms.
            bus = (f'[bus]\nurl = "{self.bus.url}"\nbackoff_base_ms = 50\nbackoff_cap_ms = 400\n'
                   if self.bus else "")
            # A Postgres (below) as `store`: [store] url, the store brokers share; else a SQLite file's path.
            store = (f'url = "{self.store.url}"\n' if isinstance(self.store, Postgres)
                     else f'path = "{self.store}"\nsynchronous = "normal"\n')
            config.write(f'[server]\nlisten = "127.0.0.1:{self.port}"\n{tls}[store]\n{store}'
                         f'[log]\nlevel = "{LOG_LEVEL}"\n{bus}{tokens}')

    def reload(self):
        """Rewrites the configuration from `users` and sends SIGHUP; waits for `configuration reloaded`."""
        log_path = os.path.join(self.scenario.dir, f"{self.name}.{self.starts}.log")

        def count():
            with open(log_path, errors="replace") as log:
                return log.read().count("configuration reloaded")

        before = count()
        self.write_config()
        self.process.send_signal(signal.SIGHUP)
        wait_until("the broker reloaded its configuration", lambda: (count() > before, count()))

    def start(self, env=None):
        self.write_config()
        self.starts += 1
        log_path = os.path.join(self.scenario.dir, f"{self.name}.{self.starts}.log")
        self.log_path = log_path
        self.process = self.scenario.start(f"{self.name} (start {self.starts})",
                                           [BROKER_PROGRAM, "--config", self.config], log_path, env)
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            with open(log_path, errors="replace") as log:
                text = log.read()
            marker = text.find("broker.address=")
            if marker >= 0:
                rest = text[marker + len("broker.address="):]
                end = min((i for i in (rest.find(" "), rest.find("\n")) if i >= 0), default=-1)
                if end > 0:
                    address = rest[:end]
                    self.port = int(address.rsplit(":", 1)[1])
                    note(f"broker listening on {address} (start {self.starts})")
                    return
            if self.process.poll() is not None:
                raise CheckFailed(f"the broker exited with {self.process.returncode} before listening")
            if time.monotonic() > deadline:
                raise CheckFailed("the broker did not log broker.address= within 15 s")
            time.sleep(POLL_SECONDS)

    def stop(self, sig=signal.SIGTERM):
        self.process.send_signal(sig)
        code = self.process.wait(timeout=15)
        note(f"{self.name} stopped by signal {sig} (exit {code})")
        return code

    def rows(self, query):
        return self.store.rows(query) if isinstance(self.store, Postgres) else sqlite_rows(self.store, query)

    def metric(self, name):
        """The broker's counter or gauge `pagesync_broker_NAME` from GET /metrics (0 if absent)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=20) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("pagesync_broker_" + name + " "):
                    return float(line.split()[1])
        return 0.0

    def wait_bus_live(self):
        """Waits until this broker's bus is live (pagesync_broker_bus_connected 1)."""
        wait_until(f"{self.name}'s bus is live", lambda: (self.metric("bus_connected") == 1, "not connected"))


class Postgres:
    """Debian's PostgreSQL as a process of its own: a cluster made by `initdb` in a new directory under /tmp, started
    with `pg_ctl` on a unix socket in that directory only (`listen_addresses = ''`), database `pagesync` of user
    `pagesync`. PostgreSQL refuses to run as root: as root, its programs run as the postgres user (`runuser`), which
    owns the directory. fsync off: the cluster lives as long as the scenario, and its faults kill processes, not the
    machine (a commit PostgreSQL acknowledged is in its WAL in the kernel's cache). Never skipped. `stop` is an
    immediate shutdown (no checkpoint: crash recovery on the next `start`); `close` stops it by pid, at the end."""

    def __init__(self, scenario):
        self.scenario = scenario
        versions = sorted((d for d in os.listdir("/usr/lib/postgresql") if d.isdigit()), key=int) \
            if os.path.isdir("/usr/lib/postgresql") else []
        if not versions:
            raise CheckFailed("PostgreSQL is not installed (apt-get install postgresql): this test never skips")
        self.bin = f"/usr/lib/postgresql/{versions[-1]}/bin"
        self.dir = tempfile.mkdtemp(prefix="pagesync-pg-")
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.dir, "postgres", "postgres")
        os.chmod(self.dir, 0o700)
        self.starts = 0
        self.up = False
        self.pid = None

    @property
    def url(self):
        return f"postgres://pagesync@/pagesync?host={self.dir}"

    def program(self, name, *args, timeout=120):
        run = subprocess.run(self.as_user + [os.path.join(self.bin, name), *args], capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL)
        if run.returncode != 0:
            raise CheckFailed(f"{name} {' '.join(args)} exited {run.returncode}: {(run.stderr + run.stdout).strip()}")
        return run.stdout

    def start(self):
        if self.starts == 0:
            self.program("initdb", "-D", self.dir + "/data", "-A", "trust", "-U", "pagesync", "-E", "UTF8",
                         "--locale=C", "--no-sync")
        self.starts += 1
        options = f"-k {self.dir} -c listen_addresses='' -c fsync=off -c max_connections=200"
        self.program("pg_ctl", "start", "-w", "-t", "60", "-D", self.dir + "/data", "-l",
                     f"{self.dir}/log.{self.starts}", "-o", options)
        with open(self.dir + "/data/postmaster.pid") as pid_file:
            self.pid = int(pid_file.readline())
        self.up = True
        if self.starts == 1:
            self.program("createdb", "-h", self.dir, "-U", "pagesync", "pagesync")
        note(f"postgres (pid {self.pid}) answers on its socket (start {self.starts})")

    def stop(self):
        """Immediate shutdown (SIGQUIT to the postmaster, as pg_ctl -m immediate): every backend dies at once, no
        checkpoint; the next start recovers from the WAL."""
        self.program("pg_ctl", "stop", "-w", "-m", "immediate", "-D", self.dir + "/data")
        self.up = False
        self.pid = None
        note(f"postgres stopped (immediate) after start {self.starts}")

    def rows(self, query):
        """Rows of `query` through `psql`, as dicts (json_agg of the rows: numbers stay numbers)."""
        wrapped = f"SELECT coalesce(json_agg(t), '[]'::json) FROM ({query}) t"
        run = subprocess.run(["psql", "-h", self.dir, "-U", "pagesync", "-d", "pagesync", "-X", "-A", "-t", "-q",
                              "-v", "ON_ERROR_STOP=1", "-c", wrapped], capture_output=True, text=True, timeout=30)
        if run.returncode != 0:
            raise CheckFailed(f"psql {query!r} exited {run.returncode}: {run.stderr.strip()}")
        return json.loads(run.stdout)

    def check(self, what):
        """pg_amcheck (heap and every B-tree index of database pagesync; the amcheck extension installed on first
        use): raises naming `what` and what it found."""
        run = subprocess.run([os.path.join(self.bin, "pg_amcheck"), "-h", self.dir, "-U", "pagesync", "-d",
                              "pagesync", "--install-missing", "--heapallindexed"], capture_output=True, text=True,
                             timeout=120)
        if run.returncode != 0:
            raise CheckFailed(f"pg_amcheck of {what} exited {run.returncode}: {(run.stdout + run.stderr).strip()}")

    def log(self):
        if getattr(self, "closed_log", None) is not None:
            return self.closed_log
        text = ""
        for n in range(1, self.starts + 1):
            try:
                with open(f"{self.dir}/log.{n}", errors="replace") as log:
                    text += f"----- postgres log.{n} -----\n" + "".join(log.readlines()[-60:])
            except OSError:
                pass
        return text

    def close(self):
        """Stops the server by its pid (SIGQUIT: immediate) and removes its directory."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGQUIT)
                for _ in range(200):
                    os.kill(self.pid, 0)
                    time.sleep(0.05)
            except ProcessLookupError:
                pass
        self.closed_log = self.log()  # for a failure's report, printed after the scenario ended
        if os.environ.get("PAGESYNC_E2E_KEEP"):
            print(f"   kept {self.dir}", flush=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


class Redis:
    """Debian's `redis-server` on a free loopback port, no persistence, in the scenario's directory: the bus between
    brokers (`[bus] url`). Never skipped: without redis-server the scenario fails. Stopped by pid with the
    scenario's other processes; `kill` is SIGKILL, and `start` again takes the same port."""

    def __init__(self, scenario):
        self.scenario = scenario
        self.port = free_port()
        self.starts = 0
        self.process = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    @property
    def up(self):
        return self.process is not None and self.process.poll() is None

    def start(self):
        if shutil.which("redis-server") is None:
            raise CheckFailed("redis-server is not installed (apt-get install redis-server): this test never skips")
        self.starts += 1
        log_path = os.path.join(self.scenario.dir, f"redis.{self.starts}.log")
        self.process = self.scenario.start(
            f"redis-server (start {self.starts})",
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.scenario.dir], log_path)
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            try:
                if self.command("PING") == b"+PONG\r\n":
                    note(f"redis-server answers on port {self.port} (start {self.starts})")
                    return
            except OSError:
                pass
            if self.process.poll() is not None:
                raise CheckFailed(f"redis-server exited with {self.process.returncode} before answering")
            if time.monotonic() > deadline:
                raise CheckFailed(f"redis-server did not answer PING on port {self.port} within 15 s")
            time.sleep(POLL_SECONDS)

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        code = self.process.wait(timeout=15)
        note(f"redis-server killed by SIGKILL (exit {code})")

    def command(self, *parts):
        """One RESP command; the raw reply."""
        data = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p)
                                                  for p in (x.encode() for x in parts))
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as connection:
            connection.sendall(data)
            return connection.recv(65536)


def cut_note(stall, data):
    cut = max(1, min(stall["bytes"], len(data) - 1))
    return (f"{cut} of {len(data)} bytes forwarded, the rest held {stall['ms']} ms, then "
            + ("a reset" if stall["reset"] else "resumed"))


class Proxy:
    """A TCP relay between one device and the broker that the test can cut (every connection closed, new ones
    refused) and restore: a network partition of that device alone."""

    def __init__(self, scenario, target_port):
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.up = True
        self.closed = False
        self.holding = False  # while True, what the broker sends waits in the proxy (an answer that is late)
        # A stall to play once: {"from_broker", "bytes", "ms", "reset"}: the next chunk read in that direction
        # (of more than one byte) is forwarded only in part, `bytes` of it (half a frame or an answer); the rest
        # waits `ms`, then follows (a stall that resumes) or both ends get a reset (RST) instead.
        self.stall = None
        self.stalls = []  # what each played stall did: (from_broker, forwarded, held, ms, reset)
        self.lock = threading.Lock()
        self.sockets = []
        scenario.proxies.append(self)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            client.settimeout(None)
            if not self.up:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source, destination, from_broker):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                while from_broker and self.holding and not self.closed:
                    time.sleep(0.01)
                stall = self.stall
                if stall is not None and (stall["from_broker"] != from_broker or len(data) < 2):
                    stall = None  # not for this direction, or nothing to split
                if stall is not None:
                    with self.lock:
                        if self.stall is stall:
                            self.stall = None
                        else:
                            stall = None  # another connection took it
                if stall is not None:
                    note(f"relay stalls {'from' if from_broker else 'towards'} the broker: {cut_note(stall, data)}")
                    cut = max(1, min(stall["bytes"], len(data) - 1))
                    destination.sendall(data[:cut])
                    self.stalls.append((from_broker, cut, len(data) - cut, stall["ms"], stall["reset"]))
                    deadline = time.monotonic() + stall["ms"] / 1000
                    while time.monotonic() < deadline and not self.closed:
                        time.sleep(0.01)
                    if stall["reset"]:
                        self._reset(source, destination)
                        return
                    data = data[cut:]
                destination.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, destination):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @staticmethod
    def _reset(*ends):
        """Closes `ends` with a reset (SO_LINGER 0): the peers see ECONNRESET, not an orderly end. SHUT_RD first
        wakes the other direction's thread out of its recv."""
        for end in ends:
            try:
                end.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                end.shutdown(socket.SHUT_RD)
            except OSError:
                pass
        for end in ends:
            end.close()

    def cut(self, quiet=False):
        self.up = False
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for end in sockets:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if not quiet:
            note("proxy cut: the device is partitioned from the broker")

    def restore(self):
        self.up = True
        note("proxy restored")

    def close(self):
        self.closed = True
        self.cut(quiet=True)
        self.listener.close()


class Device:
    """A `pagesyncd` with its own directory, store, socket and log, driven through `pagesync --socket ... --json`."""

    def __init__(self, scenario, name, broker_url, user, workspace, config):
        self.scenario = scenario
        self.name = name
        self.broker_url = broker_url
        self.token = USERS[user][0]
        # Instead of `token`: `[broker] token_command`, an argv list (the "tokens" scenario).
        self.token_command = None
        self.workspace = workspace
        self.config_overrides = config
        self.dir = os.path.join(scenario.dir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.store = os.path.join(self.dir, "pagesyncd.sqlite")
        self.socket = os.path.join(self.dir, "api.sock")
        self.config = os.path.join(self.dir, "pagesyncd.toml")
        self.starts = 0
        self.process = None

    def write_config(self):
        offline = {"database_row_limit": 50, "recent_limit": 20}
        sync = {"heartbeat_interval": 5, "backoff_base_ms": 50, "backoff_cap_ms": 500}
        broker = {}
        for key, value in self.config_overrides.items():
            (broker if key == "ca_file" else offline if key in offline else sync)[key] = value
        lines = [
            # One URL, or a list of them (failover): a JSON string or array is a TOML one here.
            "[broker]", f"url = {json.dumps(self.broker_url)}",
            (f"token_command = {json.dumps(self.token_command)}" if self.token_command else f'token = "{self.token}"'),
            f'workspace = "{self.workspace}"',
            *(f'{key} = "{value}"' for key, value in broker.items()),
            "[store]", f'path = "{self.store}"',
            "[api]", f'socket = "{self.socket}"',
            "[offline]", *(f"{key} = {value}" for key, value in offline.items()),
            "[sync]", *(f"{key} = {value}" for key, value in sync.items()),
            "[log]", f'level = "{LOG_LEVEL}"',
        ]
        with open(self.config, "w") as config:
            config.write("\n".join(lines) + "\n")

    def start(self, wait_connected=True, env=None):
        self.write_config()
        self.starts += 1
        if os.path.exists(self.socket):
            os.unlink(self.socket)  # a killed daemon leaves its socket file: wait for the new one
        log_path = os.path.join(self.scenario.dir, f"{self.name}.{self.starts}.log")
        self.log_path = log_path
        self.process = self.scenario.start(f"device {self.name} (start {self.starts})",
                                           [DAEMON_PROGRAM, "--config", self.config], log_path, env)
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            if self.process.poll() is not None:
                raise CheckFailed(f"{self.name}: pagesyncd exited with {self.process.returncode} before serving")
            if os.path.exists(self.socket) and self.run("status").returncode == 0:
                break
            if time.monotonic() > deadline:
                raise CheckFailed(f"{self.name}: the local API did not answer within 15 s")
            time.sleep(POLL_SECONDS)
        note(f"device {self.name} serving on its socket (start {self.starts})")
        if wait_connected:
            self.wait_connected()

    def stop(self, sig=signal.SIGTERM):
        self.process.send_signal(sig)
        code = self.process.wait(timeout=15)
        note(f"device {self.name} stopped by signal {sig} (exit {code})")
        return code

    def reload(self, outcome):
        """Rewrites the configuration from the device's settings, sends SIGHUP (as `systemctl reload` does) and
        waits until the daemon logged one more `outcome` ("configuration reloaded" or "reload refused")."""
        log_path = os.path.join(self.scenario.dir, f"{self.name}.{self.starts}.log")

        def count():
            with open(log_path, errors="replace") as log:
                return log.read().count(outcome)

        before = count()
        self.write_config()
        self.process.send_signal(signal.SIGHUP)
        wait_until(f"{self.name}: SIGHUP logs '{outcome}'", lambda: (count() > before, count()))
        with open(log_path, errors="replace") as log:
            return log.read()

    # The command line.

    def run(self, *args, timeout=150):
        """Runs `pagesync ARGS --socket S --json` and returns the completed process."""
        return subprocess.run([CLI_PROGRAM, *args, "--socket", self.socket, "--json"],
                              capture_output=True, text=True, timeout=timeout)

    def cli(self, *args, quiet=False):
        """Runs a command that must succeed; returns its JSON answer."""
        started = time.monotonic()
        run = self.run(*args)
        elapsed = (time.monotonic() - started) * 1000
        if run.returncode != 0:
            raise CheckFailed(f"{self.name}: pagesync {' '.join(args)} exited {run.returncode}\n"
                              f"  stderr: {run.stderr.strip()}\n  stdout: {run.stdout.strip()}")
        if not quiet:
            note(f"[{self.name}] pagesync {' '.join(args)} ({elapsed:.0f} ms)")
        try:
            return json.loads(run.stdout)
        except ValueError:
            raise CheckFailed(f"{self.name}: pagesync {' '.join(args)} --json printed no JSON: {run.stdout!r}")

    def cli_fails(self, args, what, message_parts=()):
        """Runs a command that must fail: non-zero exit, empty stdout, and a message naming each of
        `message_parts`. Returns the message."""
        run = self.run(*args)
        message = run.stderr.strip()
        check(run.returncode != 0 and run.stdout == "" and message.startswith("pagesync: ")
              and all(part in message for part in message_parts),
              f"{self.name}: {what}: pagesync {' '.join(args)} is refused",
              f"non-zero exit, empty stdout, a 'pagesync: ' message naming {list(message_parts)}",
              f"exit {run.returncode}, stdout {run.stdout!r}, stderr {message!r}")
        note(f"[{self.name}] refused as expected: {message}")
        return message

    def status(self):
        return self.cli("status", quiet=True)

    def sync(self):
        return self.cli("sync")

    def show(self, page):
        return self.cli("show", page, quiet=True)

    def wait_connected(self, connected=True):
        wait_until(f"{self.name} is {'connected' if connected else 'disconnected'}",
                   lambda: (lambda s: (s["connected"] == connected, s))(self.status()),
                   expected={"connected": connected})

    # The store, read with the sqlite3 command line.

    def rows(self, query):
        return sqlite_rows(self.store, query)

    def actions(self):
        return {(r["origin_page_id"], r["from_page_id"], r["impacted_page_id"], r["type"]) for r in
                self.rows("SELECT origin_page_id, from_page_id, impacted_page_id, type FROM offline_action")}

    def offline_pages(self):
        return {r["page_id"]: r for r in
                self.rows("SELECT page_id, last_downloaded_timestamp, complete, recent_rank FROM offline_page")}

    def local_pages(self, ids):
        listed = ",".join(f"'{i}'" for i in ids)
        return {r["id"] for r in self.rows(f"SELECT id FROM local_page WHERE id IN ({listed})")}

    def queue(self):
        return self.rows("SELECT id, type, page_id, status FROM mutation_queue ORDER BY id")

    def wait_forest(self, expected, what, timeout=WAIT_SECONDS):
        """Waits until offline_action holds exactly `expected` (origin, from, impacted, type) rows, offline_page
        exactly their impacted pages, and each of those is complete."""
        pages = {row[2] for row in expected}

        def probe():
            actions, offline = self.actions(), self.offline_pages()
            incomplete = sorted(p for p, row in offline.items() if not row["complete"])
            done = actions == expected and set(offline) == pages and not incomplete
            return done, (f"offline_action: {set_difference(actions, expected)}; offline_page: "
                          f"{set_difference(set(offline), pages)}; incomplete: {incomplete}")

        return wait_until(f"{self.name}: {what}", probe, timeout,
                          expected=f"{len(expected)} offline_action rows, {len(pages)} complete offline pages")


def tree(origin, kind, *edges):
    """The offline_action rows of one tree: the origin's own row, then (from, impacted) edges."""
    return {(origin, None, origin, kind)} | {(origin, source, page, kind) for source, page in edges}


def why(device, page):
    return sorted((r["origin"], r["from"], r["type"]) for r in device.cli("why", page, quiet=True))


# The scenarios.


def scenario_seed(s):
    """The seed's example: a database D with rows X and Y, toggled offline on B; X favorited; D toggled off, X
    stays. Y also holds an inline database E with rows, so the tree goes one level deeper."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url)
    a.cli("create", "database", "--id", "D", "--title", "Tasks")
    a.cli("create", "row", "--database", "D", "--id", "X", "--title", "Row X")
    a.cli("create", "row", "--database", "D", "--id", "Y", "--title", "Row Y")
    a.cli("create", "database", "--id", "E", "--parent", "Y", "--title", "Inline in Y")
    a.cli("create", "row", "--database", "E", "--id", "E1", "--title", "E one")
    a.cli("create", "row", "--database", "E", "--id", "E2", "--title", "E two")
    answer = a.sync()
    check_equal(answer["pendingMutations"], 0, "A pushed everything it made")

    b.cli("offline", "add", "D")
    b.sync()
    d_tree = tree("D", "toggled", ("D", "X"), ("D", "Y"), ("Y", "E"), ("E", "E1"), ("E", "E2"))
    b.wait_forest(d_tree, "toggling D offline writes one offline_action row per page of its tree")
    check_equal(why(b, "Y"), [("D", "D", "toggled")], "why Y: origin D, from D (its database), toggled")
    check_equal(why(b, "E1"), [("D", "E", "toggled")], "why E1: origin D, from E (its database), toggled")
    check_equal(why(b, "D"), [("D", None, "toggled")], "why D: the origin's own row has from null")
    listed = b.cli("offline", "list")
    check_equal([(e["id"], e["complete"]) for e in listed],
                [(p, True) for p in ["D", "E", "E1", "E2", "X", "Y"]], "offline list: the tree, by id, complete")
    check_equal(b.show("D")["rows"], ["X", "Y"], "B shows D's rows in view")

    b.cli("favorite", "add", "X")
    b.wait_forest(d_tree | tree("X", "favorite"), "favoriting X adds a second reason for X")
    check_equal(why(b, "X"), [("D", "D", "toggled"), ("X", None, "favorite")], "why X: toggled by D and favorite")

    b.cli("offline", "remove", "D")
    b.wait_forest(tree("X", "favorite"), "toggling D off deletes D's rows; X stays for its favorite row")
    check_equal(b.local_pages(["D", "Y", "E", "E1", "E2"]), set(), "the pages that left have no local copy")
    shown = b.show("X")
    check_equal((shown["title"], shown.get("source")), ("Row X", "local"), "B still shows X from its own store")
    b.cli_fails(["offline", "remove", "D"], "a reason that is not there cannot be removed", ["D"])


def scenario_row_limit(s):
    """A database of 60 rows taken offline keeps itself and its first 50 rows in view: 51 pages."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url)
    a.cli("create", "database", "--id", "L", "--title", "Sixty rows")
    rows = [f"L{i:02d}" for i in range(60)]
    for row in rows:
        a.cli("create", "row", "--database", "L", "--id", row, "--title", f"Row {row}", quiet=True)
    note("[A] created 60 rows")
    a.sync()

    b.cli("offline", "add", "L")
    answer = b.sync()
    offline = b.offline_pages()
    check_equal(set(offline), {"L", *rows[:50]}, "after sync: offline_page is L and its first 50 rows in view")
    check_equal(len(offline), 51, "51 offline_page rows")
    check_equal(sorted(p for p, row in offline.items() if not row["complete"]), [],
                "every offline page is complete once sync returned")
    check_equal(b.actions(), tree("L", "toggled", *(("L", r) for r in rows[:50])),
                "offline_action: L's own row and one (L, L, row) row per row kept")
    check_equal(b.status()["offlinePages"], 51, "status counts 51 offline pages")
    shown = b.show("L")
    check_equal((shown["rows"], shown.get("source")), (rows, "local"),
                "L shown from the local store lists all 60 rows in view, in creation order")
    note(f"sync answered {answer}")

    # A row in view deleted on A lets the 51st row in; B follows by push.
    a.cli("delete", "L10")
    kept = [r for r in rows if r != "L10"][:50]
    b.wait_forest(tree("L", "toggled", *(("L", r) for r in kept)),
                  "L10 deleted on A: it leaves B's offline set and L50 enters (by push)")
    check_equal(b.local_pages(["L10"]), set(), "the deleted row has no local copy on B")


def scenario_view_prune(s):
    """A view change on A moves rows in and out of B's first 50: B's offline set follows, rows that left are
    dropped, new ones fetched."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url)
    a.cli("create", "database", "--id", "V", "--title", "Ranked")
    rows = [f"V{i:02d}" for i in range(60)]
    for i, row in enumerate(rows):
        a.cli("create", "row", "--database", "V", "--id", row, "--title", f"Row {i}", "--set", f"Rank={i}",
              "--set", "Status=" + ("Done" if i % 3 == 0 else "Todo"), quiet=True)
    note("[A] created 60 rows with Rank and Status")
    a.sync()
    b.cli("offline", "add", "V")
    b.sync()
    b.wait_forest(tree("V", "toggled", *(("V", r) for r in rows[:50])), "B keeps V and its first 50 rows")

    # By push alone: B does not run sync.
    a.cli("view", "set", "V", "--sort", "Rank:desc")
    a.sync()
    by_rank = list(reversed(rows))[:50]
    b.wait_forest(tree("V", "toggled", *(("V", r) for r in by_rank)),
                  "sorted by Rank descending: V00-V09 left B's offline set, V50-V59 entered (by push)")
    check_equal(b.local_pages(rows[:10]), set(), "rows that left the view have no local copy on B")
    check_equal(b.show("V")["rows"][:50], by_rank, "B shows V's rows in the new view order")

    a.cli("view", "set", "V", "--filter", "Status=Done")
    a.sync()
    b.sync()
    done = [r for i, r in enumerate(rows) if i % 3 == 0]
    b.wait_forest(tree("V", "toggled", *(("V", r) for r in done)),
                  "filtered on Status=Done: only the 20 Done rows stay offline")
    check_equal(b.local_pages([r for r in rows if r not in done]), set(), "the rows filtered out are dropped")

    # A row's own edit moves it out of the filter: the database's rows in view change, B follows by push.
    a.cli("edit", "V03", "--set", "Status=Todo")
    b.wait_forest(tree("V", "toggled", *(("V", r) for r in done if r != "V03")),
                  "V03 set to Todo on A leaves B's offline set (by push)")


def scenario_inline(s):
    """A page with an inline database taken offline brings the database, its rows, and their own inline
    databases; an inline database added later joins, one deleted leaves."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url)
    a.cli("create", "page", "--id", "H", "--title", "Home")
    a.cli("block", "add", "H", "--id", "hb1", "--text", "hello")
    a.cli("create", "database", "--id", "T", "--parent", "H", "--title", "Tasks in Home")
    a.cli("create", "row", "--database", "T", "--id", "T1", "--title", "Task 1")
    a.cli("create", "row", "--database", "T", "--id", "T2", "--title", "Task 2")
    a.cli("create", "database", "--id", "U", "--parent", "T1", "--title", "Subtasks of Task 1")
    a.cli("create", "row", "--database", "U", "--id", "U1", "--title", "Sub 1")
    a.cli("create", "row", "--database", "U", "--id", "U2", "--title", "Sub 2")
    a.sync()

    b.cli("offline", "add", "H")
    b.sync()
    h_tree = tree("H", "toggled", ("H", "T"), ("T", "T1"), ("T", "T2"), ("T1", "U"), ("U", "U1"), ("U", "U2"))
    b.wait_forest(h_tree, "toggling page H brings its inline database T, T's rows, T1's inline database U and its rows")
    shown = b.show("H")
    check_equal((shown.get("source"), shown.get("databases"), [(x["id"], x["text"]) for x in shown["blocks"]
                 if x["type"] != "child_database"]),
                ("local", ["T"], [("hb1", "hello")]), "B shows H from its store with its block and inline database")

    a.cli("create", "database", "--id", "W", "--parent", "H", "--title", "Second inline")
    a.cli("create", "row", "--database", "W", "--id", "W1", "--title", "W one")
    a.sync()
    b.wait_forest(h_tree | {("H", "H", "W", "toggled"), ("H", "W", "W1", "toggled")},
                  "a new inline database of H and its row join H's tree (by push)")
    a.cli("delete", "W")
    a.sync()
    b.wait_forest(h_tree, "the deleted inline database and its row leave H's tree (by push)")
    check_equal(b.local_pages(["W", "W1"]), set(), "their local copies are dropped")


def scenario_recent(s):
    """With recent_limit = 3, four visits keep the three most recent pages offline, ranked by recency."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url, recent_limit=3)
    for page in ["R1", "R2", "R3", "R4"]:
        a.cli("create", "page", "--id", page, "--title", f"Page {page}")
    a.sync()
    for page in ["R1", "R2", "R3", "R4"]:
        b.cli("visit", page)
    b.wait_forest(tree("R2", "recent") | tree("R3", "recent") | tree("R4", "recent"),
                  "four visits with recent_limit 3: R2, R3, R4 are offline as recent, R1 is not")
    ranks = {p: row["recent_rank"] for p, row in b.offline_pages().items()}
    check_equal(ranks, {"R4": 0, "R3": 1, "R2": 2}, "recent_rank: the most recent visit first")
    b.cli("visit", "R2")
    ranks = {p: row["recent_rank"] for p, row in b.offline_pages().items()}
    check_equal(ranks, {"R2": 0, "R4": 1, "R3": 2}, "visiting R2 again makes it the most recent")
    check_equal(b.stop(), 0, "B stops on SIGTERM with status 0")
    b.start()
    ranks = {p: row["recent_rank"] for p, row in b.offline_pages().items()}
    check_equal(ranks, {"R2": 0, "R4": 1, "R3": 2}, "the recent order survives a restart")
    b.cli("visit", "R1")
    b.wait_forest(tree("R1", "recent") | tree("R2", "recent") | tree("R4", "recent"),
                  "visiting R1 after the restart pushes the oldest (R3) out")
    check_equal(b.local_pages(["R3"]), set(), "R3's local copy is dropped")


def scenario_reload(s):
    """SIGHUP reloads the daemon without a restart: a bad file changes nothing, a lower recent_limit drops the
    oldest visits at once, a key that needs a restart is reported and kept, a new token reconnects with it."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url, recent_limit=3)
    for page in ["R1", "R2", "R3"]:
        a.cli("create", "page", "--id", page, "--title", f"Page {page}")
    a.sync()
    for page in ["R1", "R2", "R3"]:
        b.cli("visit", page)
    b.wait_forest(tree("R1", "recent") | tree("R2", "recent") | tree("R3", "recent"), "three visits, all offline")
    pid = b.process.pid

    b.config_overrides["recent_limit"] = -1
    log = b.reload("reload refused")
    refused = [line for line in log.splitlines() if "reload refused" in line]
    check("offline.recent_limit" in refused[-1], "the refusal names the bad key", found=refused[-1])
    check(b.process.poll() is None and b.status()["connected"], "B runs on, still connected")
    check_equal(set(b.offline_pages()), {"R1", "R2", "R3"}, "a refused reload changes nothing")

    b.config_overrides["recent_limit"] = 1
    b.broker_url = "http://127.0.0.1:1"
    log = b.reload("configuration reloaded")
    b.wait_forest(tree("R3", "recent"), "recent_limit 1: only the latest visit stays offline, at once")
    check_equal(b.local_pages(["R1", "R2"]), set(), "the dropped visits' local copies are gone")
    restart = [line for line in log.splitlines() if "need a restart" in line]
    check(restart and "broker.url" in restart[-1], "the broker URL is reported as needing a restart", found=restart)
    check(b.status()["connected"] and b.status()["broker"] == broker.url, "B keeps its running broker URL")
    b.broker_url = broker.url

    b.token = "not-a-token-of-this-broker"
    b.reload("configuration reloaded")
    wait_until("B, with a token the broker refuses, disconnects and says why",
               lambda: (lambda st: (not st["connected"] and "401" in (st.get("lastError") or ""), st))(b.status()))
    b.token = USERS["alice"][0]
    b.reload("configuration reloaded")
    b.wait_connected()
    a.cli("edit", "R3", "--title", "renamed while B reloaded")
    a.sync()
    wait_until("B, back on its token, is notified of R3's change",
               lambda: (lambda t: (t == "renamed while B reloaded", t))(b.show("R3").get("title")))
    check(b.process.pid == pid and b.process.poll() is None, "all without a restart: the same process")


def scenario_drain(s):
    """SIGTERM while a push is in flight: the daemon waits for the answer, records it, closes its store and exits
    0; the edit is neither lost nor left to send again."""
    broker = s.broker()
    proxy = Proxy(s, broker.port)
    b = s.device("B", proxy.url)
    client = b.status()["clientId"]
    proxy.holding = True
    note("proxy holding the broker's answers")
    b.cli("create", "page", "--id", "D1", "--title", "typed just before shutdown")
    wait_until("the broker applied B's batch (its answer held in the proxy)",
               lambda: (lambda r: (r == [{"last_mutation_id": 1}], r))(
                   broker.rows(f"SELECT last_mutation_id FROM client WHERE id = '{client}'")))
    b.process.send_signal(signal.SIGTERM)
    log_path = os.path.join(s.dir, f"B.{b.starts}.log")
    wait_until("B, told to stop, waits for the push in flight",
               lambda: (lambda t: ("waiting for the push in flight" in t, t[-300:]))(open(log_path).read()))
    check(b.process.poll() is None, "B is still running while the answer is late")
    proxy.holding = False
    check_equal(b.process.wait(timeout=15), 0, "B exits 0 once the answer came")
    check("the push in flight was answered" in open(log_path).read(), "B recorded the answer before stopping")
    check_equal(b.queue(), [], "the store closed with the edit acknowledged: nothing left to push")
    check_equal(b.rows("PRAGMA integrity_check"), [{"integrity_check": "ok"}], "B's store is intact")


def scenario_revoke(s):
    """A token's workspace revoked on the broker by a reload: the device's stream stays, and the pages of that
    workspace leave the device (their local copies purged, shown nowhere), while its other pages stay."""
    broker = s.broker()
    broker.users["alice"] = (USERS["alice"][0], ["w1", "w2"])
    broker.reload()
    a = s.device("A", broker.url)
    a.cli("create", "page", "--id", "Mine", "--title", "w1 page")
    writer = s.device("W", broker.url, workspace="w2")
    writer.cli("create", "page", "--id", "Shared", "--title", "w2 page")
    writer.sync()
    a.cli("offline", "add", "Mine")
    a.cli("offline", "add", "Shared")
    a.sync()
    a.wait_forest(tree("Mine", "toggled") | tree("Shared", "toggled"), "both pages offline on A")

    broker.users["alice"] = (USERS["alice"][0], ["w1"])
    broker.reload()
    wait_until("A's copy of the w2 page is purged", lambda: (a.local_pages(["Shared"]) == set(),
                                                             a.local_pages(["Shared"])))
    check_equal(a.offline_pages()["Shared"]["complete"], 0, "the w2 page is no longer complete on A")
    check_equal(a.local_pages(["Mine"]), {"Mine"}, "the w1 page stays")
    check(a.status()["connected"], "A's stream was not dropped")
    a.stop()
    a.start(wait_connected=True)
    a.cli_fails(["show", "Shared"], "a revoked page is not shown after a restart", ["Shared"])
    check_equal(a.show("Mine")["title"], "w1 page", "the w1 page is still shown")


def scenario_favorite(s):
    """A favorite row survives toggling its database on and off; the database's other rows leave."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url)
    a.cli("create", "database", "--id", "F", "--title", "Favorites test")
    for row in ["F1", "F2", "F3"]:
        a.cli("create", "row", "--database", "F", "--id", row, "--title", f"Row {row}")
    a.sync()
    b.cli("favorite", "add", "F2")
    b.wait_forest(tree("F2", "favorite"), "favoriting row F2 makes it offline on its own")
    b.cli("offline", "add", "F")
    b.wait_forest(tree("F", "toggled", ("F", "F1"), ("F", "F2"), ("F", "F3")) | tree("F2", "favorite"),
                  "toggling F adds its tree; F2 has two reasons")
    # An unsent edit keeps F1's local copy when F1 leaves the offline set.
    broker.stop()
    b.wait_connected(False)
    b.cli("edit", "F1", "--title", "edited on B, unsent")
    b.cli("offline", "remove", "F")
    b.wait_forest(tree("F2", "favorite"), "toggling F off leaves only F2, kept by its favorite row")
    check_equal(b.local_pages(["F", "F1", "F2", "F3"]), {"F1", "F2"},
                "F2 keeps its local copy, and so does F1 for its unsent edit; F and F3 are dropped")
    shown = b.show("F1")
    check_equal((shown["title"], shown.get("syncStatus")), ("edited on B, unsent", "pending"),
                "B still shows F1 with its unsent edit while the broker is down")
    check_equal(why(b, "F2"), [("F2", None, "favorite")], "why F2: favorite")
    broker.start()
    wait_until("B pushed the edit of F1 once the broker is back", lambda: (b.queue() == [], b.queue()),
               expected=[])
    wait_until("A sees it", lambda: (a.show("F1")["title"] == "edited on B, unsent", a.show("F1")["title"]),
               expected="edited on B, unsent")
    check_equal(b.actions(), tree("F2", "favorite"), "the offline set is still F2 alone")
    b.cli("favorite", "remove", "F2")
    b.wait_forest(set(), "removing the favorite empties the offline set")
    b.cli_fails(["favorite", "remove", "F2"], "a favorite that is not there cannot be removed", ["F2"])


def scenario_push(s):
    """B keeps P offline; A edits P; B shows the new title without running sync: a push, not a poll (B's
    heartbeat is 60 s, longer than the whole wait)."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url, heartbeat_interval=60)
    a.cli("create", "page", "--id", "P", "--title", "first")
    a.sync()
    b.cli("offline", "add", "P")
    b.sync()
    b.wait_forest(tree("P", "toggled"), "P is offline on B")
    fetched_before = b.status()["fetchedPages"]
    latencies = []
    for n in range(1, 6):
        title = f"edit {n} from A"
        a.cli("edit", "P", "--title", title)
        edited = time.monotonic()

        def probe():
            shown = b.show("P")
            return shown["title"] == title and shown.get("source") == "local", (shown["title"], shown.get("source"))

        wait_until(f"B shows A's edit {n} from its local store, without sync", probe, timeout=10,
                   expected=(title, "local"))
        latencies.append((time.monotonic() - edited) * 1000)
    # An upper bound: the first `show` that sees the edit includes a whole pagesync run (about 20 ms here).
    note("push latency, A's edit command returned -> B's show returned the edit (ms): "
         f"min {min(latencies):.0f}, median {statistics.median(latencies):.0f}, max {max(latencies):.0f}")
    print(f"PUSH_LATENCY_MS min={min(latencies):.0f} median={statistics.median(latencies):.0f} "
          f"max={max(latencies):.0f}", flush=True)
    fetched = b.status()["fetchedPages"] - fetched_before
    check(fetched >= 5, "B fetched P once per edit at least", ">= 5", fetched)
    note(f"B made {fetched} page downloads for 5 edits")


def scenario_catchup(s):
    """B has 30 pages offline; while its daemon is stopped A edits 3; restarted, B downloads those 3 only."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url)
    pages = [f"C{i:02d}" for i in range(30)]
    for page in pages:
        a.cli("create", "page", "--id", page, "--title", f"Page {page}", quiet=True)
    a.sync()
    for page in pages:
        b.cli("offline", "add", page, quiet=True)
    b.sync()
    b.wait_forest(set().union(*(tree(p, "toggled") for p in pages)), "30 pages offline on B")
    before = {p: row["last_downloaded_timestamp"] for p, row in b.offline_pages().items()}
    check_equal(b.stop(), 0, "B's daemon stops on SIGTERM with status 0")

    changed = ["C03", "C14", "C25"]
    for page in changed:
        a.cli("edit", page, "--title", f"changed {page}")
    a.sync()

    b.start()
    answer = b.sync()
    status = b.status()
    check_equal(status["fetchedPages"], len(changed), "after restart and sync B downloaded exactly the 3 changed pages")
    note(f"sync answered {answer}; status {status}")
    # The activity figures count since the daemon started: one fetch request for the 3 pages (fetch_batch 100),
    # a catch-up per connection and one more for sync's check, nothing pushed, no reconnect.
    check_equal(status["fetchRequests"], 1, "status: one fetch request brought the 3 pages")
    check(1 <= status["catchUpRequests"] <= 2, "status: the connection's catch-up (and sync's check)",
          "1 or 2", status["catchUpRequests"])
    check_equal((status["batchesPushed"], status["mutationsPushed"], status["reconnects"]), (0, 0, 0),
                "status: nothing pushed, no reconnect")
    check(status["bytesReceived"] > 500 and status["bytesSent"] > 100, "status: bytes to and from the broker",
          "> 500 in, > 100 out", (status["bytesReceived"], status["bytesSent"]))
    human = subprocess.run([CLI_PROGRAM, "status", "--socket", b.socket], capture_output=True, text=True,
                           timeout=30).stdout
    for label in ("fetch requests:", "catch-ups:", "batches pushed:", "reconnects:", "bytes received:"):
        check(any(line.startswith(label) for line in human.splitlines()), f"pagesync status shows {label!r}",
              label, human)
    after = {p: row["last_downloaded_timestamp"] for p, row in b.offline_pages().items()}
    moved = sorted(p for p in pages if after[p] != before[p])
    check_equal(moved, changed, "last_downloaded_timestamp advanced for the changed pages only")
    for page in changed:
        shown = b.show(page)
        check_equal((shown["title"], shown.get("source")), (f"changed {page}", "local"),
                    f"B has A's edit of {page} locally")
    # The restarted daemon subscribed its offline set again: an edit now arrives by push, without sync.
    a.cli("edit", "C00", "--title", "after the restart")
    wait_until("an edit after the restart reaches B by push",
               lambda: (b.show("C00")["title"] == "after the restart", b.show("C00")["title"]),
               expected="after the restart")


def scenario_offline_edits(s):
    """The broker goes down; B edits at once, the edit queued; an incomplete offline page is refused; the broker
    comes back on the same port; B pushes; A sees the edit."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url)
    a.cli("create", "page", "--id", "P", "--title", "before")
    a.cli("create", "page", "--id", "Q", "--title", "never downloaded by B")
    a.sync()
    b.cli("offline", "add", "P")
    b.sync()
    b.wait_forest(tree("P", "toggled"), "P is offline on B")

    broker.stop()
    b.wait_connected(False)
    started = time.monotonic()
    answer = b.cli("edit", "P", "--title", "edited offline")
    took = (time.monotonic() - started) * 1000
    check(took < 2000 and len(answer["mutationIds"]) == 1, "the offline edit returns at once with its mutation id",
          "< 2000 ms, one mutation id", f"{took:.0f} ms, {answer}")
    queue = b.queue()
    check_equal([(m["type"], m["page_id"], m["status"]) for m in queue], [("set_title", "P", "pending")],
                "mutation_queue holds the edit")
    check_equal(b.status()["pendingMutations"], 1, "status counts 1 pending mutation")
    shown = b.show("P")
    check_equal((shown["title"], shown.get("source")), ("edited offline", "local"), "B shows its offline edit")
    b.cli_fails(["sync"], "sync without a broker", [])

    b.cli("offline", "add", "Q")
    check_equal({p: row["complete"] for p, row in b.offline_pages().items()}, {"P": 1, "Q": 0},
                "Q is offline on B but not complete (never downloaded)")
    b.cli_fails(["show", "Q"], "an incomplete offline page while the broker is down", ["Q", "complete"])
    b.cli_fails(["show", "NotHere"], "a page that is not offline while the broker is down", ["NotHere"])

    broker.start()
    wait_until("B pushed its queued edit once the broker is back", lambda: (b.queue() == [], b.queue()),
               expected=[])
    wait_until("A sees B's offline edit", lambda: (a.show("P")["title"] == "edited offline", a.show("P")["title"]),
               expected="edited offline")
    b.wait_forest(tree("P", "toggled") | tree("Q", "toggled"), "Q is downloaded once the broker is back")
    check_equal(b.show("Q")["title"], "never downloaded by B", "B shows Q")
    check_equal(b.cli("conflicts"), [], "no conflicts")


def scenario_lww(s):
    """B, partitioned, edits P's title first; A edits it later; B comes back and pushes its older edit: A's
    newer title wins on both devices and the broker."""
    broker = s.broker()
    proxy = Proxy(s, broker.port)
    a = s.device("A", broker.url)
    b = s.device("B", proxy.url)
    a.cli("create", "page", "--id", "P", "--title", "original")
    a.sync()
    b.cli("offline", "add", "P")
    b.sync()
    b.wait_forest(tree("P", "toggled"), "P is offline on B")

    proxy.cut()
    b.wait_connected(False)
    b.cli("edit", "P", "--title", "from B, older")
    check_equal([(m["type"], m["page_id"]) for m in b.queue()], [("set_title", "P")], "B's edit is queued")
    # HLC times are wall-clock milliseconds first: make sure A's edit is at least a millisecond later.
    edited = time.time()
    while time.time() - edited < 0.005:
        pass
    a.cli("edit", "P", "--title", "from A, newer")
    a.sync()
    check_equal(broker.rows("SELECT title FROM page WHERE id = 'P'"), [{"title": "from A, newer"}],
                "the broker has A's title")

    proxy.restore()
    wait_until("B pushed its older edit after reconnecting", lambda: (b.queue() == [], b.queue()), expected=[])
    wait_until("B ends with A's newer title", lambda: (b.show("P")["title"] == "from A, newer", b.show("P")),
               expected="from A, newer")
    check_equal(a.show("P")["title"], "from A, newer", "A still shows its own title")
    check_equal(broker.rows("SELECT title FROM page WHERE id = 'P'"), [{"title": "from A, newer"}],
                "the broker kept A's title: the older edit lost although it arrived later")
    check_equal(b.cli("conflicts"), [], "losing to a newer write is not a conflict")
    check_equal(b.status()["failedMutations"], 0, "no failed mutations")


def scenario_rejected(s):
    """B, partitioned, edits a page that A deletes meanwhile: the broker rejects B's edits (page_deleted), B keeps
    them in conflicts, and its local copy is the broker's page again, not B's rejected edits shown as synced."""
    broker = s.broker()
    proxy = Proxy(s, broker.port)
    a = s.device("A", broker.url)
    b = s.device("B", proxy.url)
    a.cli("create", "page", "--id", "P", "--title", "original")
    a.cli("block", "add", "P", "--id", "b1", "--text", "original text")
    a.sync()
    b.cli("offline", "add", "P")
    b.sync()
    b.wait_forest(tree("P", "toggled"), "P is offline on B")

    proxy.cut()
    b.wait_connected(False)
    a.cli("delete", "P")
    a.sync()
    edit = b.cli("edit", "P", "--title", "edited on B")
    block = b.cli("block", "edit", "b1", "--text", "edited on B")
    proxy.restore()
    wait_until("B pushed its two edits", lambda: (b.status()["pendingMutations"] == 0, b.status()),
               expected={"pendingMutations": 0})
    conflicts = b.cli("conflicts")
    check_equal(sorted((x["mutationId"], x["page"], x["type"], x["reason"]) for x in conflicts),
                [(edit["mutationIds"][0], "P", "set_title", "page_deleted"),
                 (block["mutationIds"][0], "P", "splice_text", "page_deleted")],
                "both edits are rejected as page_deleted and kept in conflicts")
    check_equal(b.status()["failedMutations"], 2, "status counts 2 failed mutations")
    status = b.status()
    check_equal((status["mutationsPushed"], status["mutationsRejected"]), (2, 2),
                "status: 2 mutations pushed, both rejected")
    check(1 <= status["batchesPushed"] <= 2, "status: in one or two batches", "1 or 2", status["batchesPushed"])
    check(status["reconnects"] >= 1, "status: the cut stream was reconnected", ">= 1", status["reconnects"])
    check_equal(broker.rows("SELECT title, deleted FROM page WHERE id = 'P'"), [{"title": "original", "deleted": 1}],
                "the broker's page is A's: deleted, title unchanged")

    def probe():
        shown = b.show("P")
        found = (shown["title"], shown["deleted"], [(x["id"], x["text"]) for x in shown["blocks"]])
        return found == ("original", True, [("b1", "original text")]), (found, shown.get("syncStatus"))

    wait_until("B's local copy is the broker's page, without its rejected edits", probe,
               expected=("original", True, [("b1", "original text")]))


def scenario_clock_ahead(s):
    """A device whose queued edit was stamped three days ahead, its clock stored so (as one Pagesync-Clock far
    ahead left it before the daemon bounded what it merges): the broker rejects the edit clock_ahead, and the
    daemon sends it again with a fresh time instead of keeping it as a conflict; its clock is the wall clock's
    again and its next edits pass."""
    broker = s.broker()
    a = s.device("A", broker.url)
    a.cli("create", "page", "--id", "P", "--title", "before")
    a.cli("offline", "add", "P")
    a.sync()
    a.wait_forest(tree("P", "toggled"), "P is offline on A")
    broker.stop()
    a.wait_connected(False)
    a.cli("edit", "P", "--title", "stamped ahead")
    check_equal(a.stop(), 0, "A stops cleanly with its edit queued")
    ahead = f"{int(time.time() * 1000) + 3 * 86_400_000}:0"
    a.rows(f"UPDATE mutation_queue SET data = json_set(data, '$.time', '{ahead}');"
           f"UPDATE sync_meta SET value = '{ahead}' WHERE key = 'hlc'")
    check_equal([json.loads(r["data"])["time"] for r in a.rows("SELECT data FROM mutation_queue")], [ahead],
                "the queued edit is stamped three days ahead")
    broker.start()
    a.start()
    wait_until("A's edit reached the broker", lambda: (
        (lambda r: (r == [{"title": "stamped ahead"}], r))(broker.rows("SELECT title FROM page WHERE id = 'P'"))))
    wait_until("A's queue is empty", lambda: (a.queue() == [], a.queue()), expected=[])
    check_equal(a.cli("conflicts"), [], "no conflict: the clock_ahead rejection was sent again, not parked")
    with open(a.log_path, errors="replace") as log:
        text = log.read()
    check("sent again with a fresh time" in text, "A says it sent the edit again with a fresh time", "the warning",
          text[-2000:])
    a.cli("edit", "P", "--title", "after")
    wait_until("A's next edit reaches the broker", lambda: (
        (lambda r: (r == [{"title": "after"}], r))(broker.rows("SELECT title FROM page WHERE id = 'P'"))))
    clock = int(a.rows("SELECT value FROM sync_meta WHERE key = 'hlc'")[0]["value"].split(":")[0])
    check(clock < time.time() * 1000 + 60_000, "A's clock is the wall clock's again", "within a minute",
          clock - time.time() * 1000)
    check_equal(a.cli("conflicts"), [], "still no conflict")


def scenario_kill9(s):
    """Edits queued while the broker is down survive kill -9 of the daemon, keep their mutation ids, and reach
    the broker exactly once when it is back; B's queue ends empty."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url)
    a.cli("create", "page", "--id", "K", "--title", "K")
    a.sync()
    b.cli("offline", "add", "K")
    b.sync()
    b.wait_forest(tree("K", "toggled"), "K is offline on B")
    client = b.status()["clientId"]

    broker.stop()
    b.wait_connected(False)
    b.cli("edit", "K", "--title", "K edited offline")
    b.cli("block", "add", "K", "--id", "k1", "--text", "one")
    b.cli("block", "add", "K", "--id", "k2", "--text", "two", "--after", "k1")
    b.cli("block", "add", "K", "--id", "k3", "--text", "three", "--after", "k2")
    b.cli("edit", "K", "--set", "Count=3")
    b.cli("create", "page", "--id", "Bnew", "--title", "made offline")
    queued = b.queue()
    check_equal(len(queued), 6, "six mutations queued")

    check_equal(b.stop(signal.SIGKILL), -signal.SIGKILL, "B's daemon killed with SIGKILL")
    b.start(wait_connected=False)
    check_equal(b.queue(), queued, "after kill -9 the queue is intact, same ids")
    check_equal(b.status()["pendingMutations"], 6, "status counts the 6 pending mutations")
    shown = b.show("K")
    check_equal((shown["title"], [x["id"] for x in shown["blocks"]]), ("K edited offline", ["k1", "k2", "k3"]),
                "B's local copy kept its offline edits")
    answer = b.cli("edit", "K", "--set", "After=1")
    check_equal(answer["mutationIds"], [queued[-1]["id"] + 1], "the next mutation id continues after the queue")

    # Once more, so that nothing is edited after B's last start: the queue it finds is pushed on its own.
    check_equal(b.stop(signal.SIGKILL), -signal.SIGKILL, "B's daemon killed with SIGKILL again")
    b.start(wait_connected=False)
    broker.start()
    wait_until("B pushed all 7 mutations, prompted by nothing but its start", lambda: (b.queue() == [], b.queue()),
               expected=[])
    last = broker.rows(f"SELECT last_mutation_id FROM client WHERE id = '{client}'")
    check_equal(last, [{"last_mutation_id": queued[-1]["id"] + 1}], "the broker applied B's mutations up to the last id")
    check_equal(broker.rows("SELECT id, text FROM block WHERE page_id = 'K' AND deleted = 0 ORDER BY position"),
                [{"id": "k1", "text": "one"}, {"id": "k2", "text": "two"}, {"id": "k3", "text": "three"}],
                "the broker has each block once, in order")
    check_equal(broker.rows("SELECT name, value FROM property WHERE page_id = 'K' ORDER BY name"),
                [{"name": "After", "value": "1"}, {"name": "Count", "value": "3"}], "the broker has both properties")
    check_equal(broker.rows("SELECT title FROM page WHERE id IN ('K', 'Bnew') ORDER BY id"),
                [{"title": "made offline"}, {"title": "K edited offline"}], "the broker has the title and the new page")
    check_equal(b.cli("conflicts"), [], "no mutation was rejected (a re-applied create or block add would be)")
    check_equal(b.status()["failedMutations"], 0, "no failed mutations")
    a.wait_connected()  # A lost the broker too; reading K goes through it
    shown = a.show("K")
    check_equal((shown["title"], [(x["id"], x["text"]) for x in shown["blocks"]], shown["properties"]),
                ("K edited offline", [("k1", "one"), ("k2", "two"), ("k3", "three")], {"After": 1, "Count": 3}),
                "A sees every edit B made offline")


def scenario_workspace(s):
    """A device whose token is for w2 cannot read, keep offline, or write w1's pages."""
    broker = s.broker()
    a = s.device("A", broker.url)
    c = s.device("C", broker.url, user="carol", workspace="w2")
    a.cli("create", "page", "--id", "P", "--title", "w1 secret")
    a.sync()

    c.cli_fails(["show", "P"], "reading another workspace's page through the broker", ["P"])
    c.cli_fails(["offline", "add", "P"], "keeping another workspace's page offline", ["page P not found"])
    check_equal(c.rows("SELECT page_id FROM offline_page"), [], "nothing is offline on C")
    check_equal(c.rows("SELECT id FROM local_page WHERE id = 'P'"), [], "nothing of P is stored on C")
    c.cli_fails(["show", "P"], "showing it", ["P"])

    answer = c.cli("edit", "P", "--title", "hacked")
    c.sync()
    conflicts = c.cli("conflicts")
    check_equal([(x["mutationId"], x["page"], x["reason"]) for x in conflicts],
                [(answer["mutationIds"][0], "P", "unknown_page")],
                "C's edit of a w1 page is rejected by the broker and kept in conflicts")
    check_equal(c.status()["failedMutations"], 1, "status counts 1 failed mutation")
    check_equal(a.show("P")["title"], "w1 secret", "A's page is unchanged")
    check_equal(broker.rows("SELECT title FROM page WHERE id = 'P'"), [{"title": "w1 secret"}],
                "the broker's page is unchanged")

    c.cli("create", "page", "--id", "Cpage", "--title", "w2 page")
    c.sync()
    check_equal(broker.rows("SELECT workspace_id FROM page WHERE id = 'Cpage'"), [{"workspace_id": "w2"}],
                "C's own page lands in w2")
    a.cli_fails(["show", "Cpage"], "A reading w2's page", ["Cpage"])


def scenario_missing(s):
    """offline add, favorite add and visit of a page the broker does not have: refused while it is reachable,
    nothing recorded; taken while it is not, then listed missing and counted once it says so; found when made."""
    broker = s.broker()
    proxy = Proxy(s, broker.port)
    a = s.device("A", proxy.url)
    b = s.device("B", broker.url)
    b.cli("create", "page", "--id", "P", "--title", "exists")
    b.sync()

    for args in (["offline", "add", "NOPE"], ["favorite", "add", "NOPE"], ["visit", "NOPE"]):
        run = a.run(*args)
        check_equal((run.returncode, run.stdout, run.stderr.strip()),
                    (1, "", "pagesync: page NOPE not found (HTTP 404)"), f"A: pagesync {' '.join(args)} is refused")
    check_equal(a.rows("SELECT (SELECT count(*) FROM offline_page) AS pages, "
                       "(SELECT count(*) FROM offline_action) AS reasons, "
                       "(SELECT count(*) FROM missing_page) AS missing"),
                [{"pages": 0, "reasons": 0, "missing": 0}], "nothing recorded in A's store")

    proxy.cut()
    a.wait_connected(False)
    a.cli("offline", "add", "NOPE")
    a.cli("favorite", "add", "LATER")
    a.cli("visit", "P")
    listed = {e["id"]: (e["complete"], e["missing"]) for e in a.cli("offline", "list")}
    check_equal(listed, {"NOPE": (False, False), "LATER": (False, False), "P": (False, False)},
                "taken while the broker is unreachable, none known missing yet")

    proxy.restore()
    a.wait_connected()
    a.sync()
    wait_until("A lists NOPE and LATER missing, P complete",
               lambda: (lambda l: (l == {"NOPE": (False, True), "LATER": (False, True), "P": (True, False)}, l))(
                   {e["id"]: (e["complete"], e["missing"]) for e in a.cli("offline", "list", quiet=True)}),
               expected="NOPE and LATER missing")
    status = a.status()
    check_equal((status["offlinePages"], status["missingPages"]), (3, 2), "status counts 2 missing of 3 offline")
    check_equal(a.rows("SELECT page_id FROM missing_page ORDER BY page_id"),
                [{"page_id": "LATER"}, {"page_id": "NOPE"}], "missing_page holds them (sqlite3)")
    human = subprocess.run([CLI_PROGRAM, "offline", "list", "--socket", a.socket], capture_output=True, text=True)
    check("NOPE   toggled:NOPE" in human.stdout and "missing: the broker says" in human.stdout,
          "offline list says missing and what becomes of it", "a missing row and its note", human.stdout)

    # Made later on another device: A is subscribed to it, is notified, downloads it; it is missing no more.
    b.cli("create", "page", "--id", "LATER", "--title", "made after all")
    b.sync()
    wait_until("A has LATER complete and not missing",
               lambda: (lambda l: (l.get("LATER") == (True, False), l))(
                   {e["id"]: (e["complete"], e["missing"]) for e in a.cli("offline", "list", quiet=True)}),
               expected="LATER complete")
    # What stays missing goes when the user removes its reason.
    a.cli("offline", "remove", "NOPE")
    check_equal(a.status()["missingPages"], 0, "nothing missing once NOPE's toggle is removed")
    check_equal(sorted(e["id"] for e in a.cli("offline", "list")), ["LATER", "P"], "A keeps LATER and P")


def scenario_append(s):
    """block add without --after appends, on a page this device stores and on one it does not."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url)
    a.cli("create", "page", "--id", "P", "--title", "not kept on A")
    for block in ("b1", "b2"):
        a.cli("block", "add", "P", "--id", block, "--text", block)
        a.sync()  # acknowledged: A drops its copy (P is not offline there)
    check_equal(a.rows("SELECT id FROM local_page"), [], "A stores no copy of P")
    b.cli("offline", "add", "P")
    b.sync()
    b.cli("block", "add", "P", "--id", "b3", "--text", "b3")
    a.cli("block", "add", "P", "--id", "b4", "--text", "b4")
    a.cli("block", "add", "P", "--id", "b0", "--text", "b0", "--first")
    b.sync()
    a.sync()
    check_equal(broker.rows("SELECT id FROM block WHERE page_id = 'P' ORDER BY position, id"),
                [{"id": i} for i in ("b0", "b1", "b2", "b3", "b4")], "the broker's order: each appended, b0 first")
    wait_until("B shows the same order",
               lambda: (lambda o: (o == ["b0", "b1", "b2", "b3", "b4"], o))([x["id"] for x in b.show("P")["blocks"]]),
               expected=["b0", "b1", "b2", "b3", "b4"])


# The number JSONDecoder trapped on (SIGILL) in an integer field: one answer carrying it stopped the daemon.
TRAP_NUMBER = b"9007199254740993" + b"9" * 300 + b"e-300"


# Integers the strict reader takes into a UInt64 but no broker keeps (its store's integers are signed): a batch
# answer's mutation id 2^63 and a fetched page's time 2^64-1 each trapped the daemon storing them, at every start.
HUGE_MUTATION_ID = 9223372036854775808
HUGE_TIME = 18446744073709551615


class HostileBroker:
    """A fake broker on 127.0.0.1 (port 0) that speaks just enough of the protocol for a daemon to connect: the
    stream's WebSocket handshake, `subscribed` answers, then a `changed` frame whose time is TRAP_NUMBER; and a
    catch-up answer whose `sequence` is TRAP_NUMBER. Counts what it sent.

    With `numbers`, its answers are well-formed but carry integers above 2^63-1 instead: the catch-up says each
    page changed, the fetch answers each page with `lastUpdatedTime` HUGE_TIME, a batch is answered `applied`
    with mutation id HUGE_MUTATION_ID, and `changed` frames carry HUGE_TIME."""

    def __init__(self, scenario, numbers=False):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.numbers = numbers
        self.lock = threading.Lock()
        self.catch_ups = 0
        self.fetches = 0
        self.batches = 0
        self.trap_frames = 0
        self.closed = False
        scenario.proxies.append(self)  # closed with the scenario
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def counts(self):
        with self.lock:
            return {"catchUps": self.catch_ups, "fetches": self.fetches, "batches": self.batches,
                    "trapFrames": self.trap_frames}

    def _answer(self, method, target, body):
        """The status and JSON body answering one request."""
        if method != "POST" or not any(target.endswith(path) for path in ("/v1/catchup", "/v1/fetch", "/v1/batch")):
            return b"404 Not Found", b'{"error":404,"message":"not here"}'
        request = json.loads(body) if body else {}
        if target.endswith("/v1/catchup"):
            with self.lock:
                self.catch_ups += 1
            if not self.numbers:
                return b"200 OK", (b'{"epoch":"e","epochChanged":false,"sequence":' + TRAP_NUMBER
                                   + b',"changed":{},"gone":[]}')
            changed = {page: 7 for page in request.get("pages", {})}
            return b"200 OK", json.dumps({"epoch": "e", "epochChanged": False, "sequence": 7, "changed": changed,
                                          "gone": []}).encode()
        if target.endswith("/v1/fetch"):
            with self.lock:
                self.fetches += 1
            deltas = [{"id": page, "since": 0, "lastUpdatedTime": HUGE_TIME, "full": True, "properties": {},
                       "blocks": [],
                       "page": {"id": page, "workspace": "w1", "kind": "page", "title": "from a hostile broker",
                                "deleted": False, "properties": {}, "blocks": [], "databases": [],
                                "lastUpdatedTime": HUGE_TIME}}
                      for page in sorted(request.get("pages", {}))]
            return b"200 OK", json.dumps({"epoch": "e", "deltas": deltas, "gone": []}).encode()
        with self.lock:
            self.batches += 1
        results = [{"mutationId": HUGE_MUTATION_ID, "page": m["page"], "status": "applied"}
                   for m in request.get("mutations", [])]
        return b"200 OK", json.dumps({"epoch": "e", "lastMutationId": HUGE_MUTATION_ID, "pages": {},
                                      "results": results}).encode()

    def close(self):
        self.closed = True
        try:
            self.listener.close()
        except OSError:
            pass

    def _accept(self):
        while not self.closed:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    @staticmethod
    def _read_exactly(connection, count, buffer):
        while len(buffer) < count:
            chunk = connection.recv(65536)
            if not chunk:
                raise EOFError
            buffer += chunk
        return buffer[:count], buffer[count:]

    def _serve(self, connection):
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = connection.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, target = lines[0].split(" ")[:2]
                headers = {line.split(":", 1)[0].strip().lower(): line.split(":", 1)[1].strip()
                           for line in lines[1:] if ":" in line}
                body, buffer = self._read_exactly(connection, int(headers.get("content-length", "0")), buffer)
                if headers.get("upgrade", "").lower() == "websocket":
                    accept = base64.b64encode(hashlib.sha1(
                        (headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
                    connection.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                       b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
                    self._stream(connection, buffer)
                    return
                status, body = self._answer(method, target, body)
                # The largest clock a header can carry: merged unbounded, it poisoned the device's clock for good.
                clock = b"Pagesync-Clock: 18446744073709551615:4294967295\r\n" if self.numbers else b""
                connection.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n" + clock
                                   + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        except (OSError, EOFError, ValueError, KeyError):
            pass
        finally:
            connection.close()

    def _stream(self, connection, buffer):
        def send(opcode, payload):
            length = len(payload)
            header = bytes([0x80 | opcode]) + (bytes([length]) if length < 126
                                                  else bytes([126]) + struct.pack("!H", length))
            connection.sendall(header + payload)

        while True:
            header, buffer = self._read_exactly(connection, 2, buffer)
            opcode, length = header[0] & 0x0F, header[1] & 0x7F
            if length == 126:
                extended, buffer = self._read_exactly(connection, 2, buffer)
                length = struct.unpack("!H", extended)[0]
            elif length == 127:
                extended, buffer = self._read_exactly(connection, 8, buffer)
                length = struct.unpack("!Q", extended)[0]
            mask, buffer = self._read_exactly(connection, 4, buffer) if header[1] & 0x80 else (b"\0" * 4, buffer)
            payload, buffer = self._read_exactly(connection, length, buffer)
            payload = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
            if opcode == 0x8:
                send(0x8, payload[:2])
                return
            if opcode == 0x9:
                send(0xA, payload)
            elif opcode == 0x1 and json.loads(payload).get("op") == "subscribe":
                time_text = str(HUGE_TIME).encode() if self.numbers else TRAP_NUMBER
                send(0x1, b'{"op":"changed","pages":{"home":' + time_text + b'}}')
                send(0x1, b'{"op":"subscribed","added":0,"total":0,"denied":[]}')
                with self.lock:
                    self.trap_frames += 1


def scenario_hostile_broker(s):
    """A broker whose answers carry the number JSONDecoder traps on (in a stream frame and in a catch-up
    answer), or integers above 2^63-1 (a fetched page's time, a batch's mutation id): the daemon refuses them as
    unreadable or not understood, keeps its queued edit, keeps retrying and serving, and never crashes, across a
    restart too; and the clock it sends far ahead is not merged."""
    broker = HostileBroker(s)
    device = Device(s, "D", broker.url, "alice", "w1", {})
    device.start(wait_connected=False)
    wait_until("the daemon read a trap frame and retried catch-up twice",
               lambda: (lambda c: (c["trapFrames"] >= 2 and c["catchUps"] >= 3, c))(broker.counts()))
    check(device.process.poll() is None, "the daemon runs on", "running", f"exit {device.process.returncode}")
    # Polled: between a reconnect and its failed catch-up the status has no error yet.
    seen = {}

    def says_not_understood():
        seen["error"] = device.status().get("lastError") or ""
        return "not understood" in seen["error"] and "exactly a whole number" in seen["error"], seen["error"]

    wait_until("the status says the catch-up answer was not understood, and why", says_not_understood,
               expected="invalidAnswer")
    ok(f"lastError: {seen['error'][:160]}")
    with open(device.log_path, errors="replace") as log:
        text = log.read()
    check("an unreadable stream message" in text, "the trap frame is logged as unreadable and dropped", "the warning",
          text[-2000:])
    device.cli_fails(["sync"], "a sync against that broker", ["not understood"])
    check(device.process.poll() is None, "the daemon still runs after a sync", "running",
          f"exit {device.process.returncode}")

    # Well-formed answers with integers above 2^63-1: a fetched page at time 2^64-1, a batch acknowledged with
    # mutation id 2^63. Storing either trapped the daemon, and the same fetch and push at every start again.
    numbers = HostileBroker(s, numbers=True)
    before = numbers.counts()
    other = Device(s, "E", numbers.url, "alice", "w1", {})
    other.start(wait_connected=False)
    other.cli("create", "page", "--id", "P", "--title", "mine")
    other.cli("offline", "add", "P")
    for start in (1, 2):
        wait_until(f"start {start}: the daemon fetched P and pushed its edit against that broker",
                   lambda: (lambda c: (c["fetches"] > before["fetches"] and c["batches"] > before["batches"], c))(
                       numbers.counts()))
        check(other.process.poll() is None, f"start {start}: the daemon runs on", "running",
              f"exit {other.process.returncode}")
        seen = {}

        def says_out_of_range():
            seen["error"] = other.status().get("lastError") or ""
            return "above the largest the daemon accepts" in seen["error"], seen["error"]

        wait_until(f"start {start}: the status names the number out of range", says_out_of_range)
        ok(f"lastError: {seen['error'][:160]}")
        check_equal([(m["type"], m["page_id"], m["status"]) for m in other.queue()],
                    [("create_page", "P", "pending")], f"start {start}: the edit is still queued, not dropped")
        check_equal(other.show("P")["title"], "mine", f"start {start}: P shows the local copy, not the broker's")
        if start == 2:
            # Its answers carried Pagesync-Clock 2^64-1:2^32-1: not merged, so an edit now is stamped now.
            other.cli("edit", "P", "--title", "after the hostile clock")
            stamped = [int(json.loads(r["data"])["time"].split(":")[0])
                       for r in other.rows("SELECT data FROM mutation_queue ORDER BY id")]
            check(stamped[-1] < time.time() * 1000 + 60_000, "an edit after the hostile clock is stamped now",
                  "within a minute of the wall clock", stamped)
        if start == 1:
            check_equal(other.stop(), 0, "the daemon stops cleanly")
            before = numbers.counts()
            other.start(wait_connected=False)


def scenario_text_merge(s):
    """A and B, partitioned, edit one block's text (whole-text edits, a splice, marks); reconnected in either
    order, both devices and the broker end with both words and every mark: text merges, never last writer."""
    broker = s.broker()
    proxy_a = Proxy(s, broker.port)
    proxy_b = Proxy(s, broker.port)
    a = s.device("A", proxy_a.url)
    b = s.device("B", proxy_b.url)
    a.cli("create", "page", "--id", "P", "--title", "Fox")
    a.cli("offline", "add", "P")
    a.cli("block", "add", "P", "--id", "b1", "--text", "The quick fox jumps.")
    a.cli("block", "add", "P", "--id", "b2", "--text", "Second")
    a.sync()
    b.cli("offline", "add", "P")
    b.sync()
    b.wait_forest(tree("P", "toggled"), "P is offline on B")
    check_equal([blk["id"] for blk in b.show("P")["blocks"]], ["b1", "b2"], "a block added without --after goes last")

    proxy_a.cut()
    proxy_b.cut()
    a.wait_connected(False)
    b.wait_connected(False)
    a.cli("block", "edit", "b1", "--text", "The quick brown fox jumps.")
    a.cli("block", "mark", "b1", "--from", "4", "--to", "9", "--type", "bold")
    b.cli("block", "edit", "b1", "--text", "The quick fox jumps high.")
    b.cli("block", "splice", "b2", "--at", "0", "--delete", "1", "--insert", "s")
    b.cli("block", "mark", "b1", "--from", "10", "--to", "13", "--type", "link", "--value", "https://fox.example")
    check_equal([m["type"] for m in a.queue()], ["splice_text", "mark_text"], "A queued a splice and a mark")
    check_equal(b.show("P")["blocks"][0]["text"], "The quick fox jumps high.", "B shows its own edit at once")

    # B first, then A: A's push arrives second and must not overwrite B's word.
    proxy_b.restore()
    wait_until("B pushed", lambda: (b.queue() == [], b.queue()), expected=[])
    proxy_a.restore()
    wait_until("A pushed", lambda: (a.queue() == [], a.queue()), expected=[])
    merged = "The quick brown fox jumps high."
    marks = [{"type": "bold", "start": 4, "end": 9}, {"type": "link", "start": 16, "end": 19,
                                                          "value": "https://fox.example"}]
    for device in (a, b):
        wait_until(f"{device.name} shows both words", lambda: (device.show("P")["blocks"][0]["text"] == merged,
                                                              device.show("P")["blocks"][0]["text"]),
                   expected=merged)
        blocks = device.show("P")["blocks"]
        check_equal(blocks[0]["marks"], marks, f"{device.name} shows both marks, each on its own word")
        check_equal(blocks[1]["text"], "second", f"{device.name} shows B's splice of b2")
    row = broker.rows("SELECT text, marks FROM block WHERE id = 'b1'")[0]
    check_equal((row["text"], json.loads(row["marks"])), (merged, marks), "the broker holds the merged text and marks")
    for device in (a, b):
        check_equal(device.cli("conflicts"), [], f"no conflicts on {device.name}")


def scenario_text_three(s):
    """Three devices edit one block offline at random (inserts of their own words, deletions of the first text)
    and reconnect in a random order: all three and the broker end with the same text, holding every word."""
    seed = int(os.environ.get("PAGESYNC_E2E_SEED") or time.time_ns() % 1_000_000)
    note(f"seed {seed} (PAGESYNC_E2E_SEED={seed} replays it)")
    rng = random.Random(seed)
    broker = s.broker()
    base = "alpha beta gamma delta epsilon zeta eta theta"
    names = ["A", "B", "C"]
    proxies = {name: Proxy(s, broker.port) for name in names}
    devices = {name: s.device(name, proxies[name].url) for name in names}
    first = devices["A"]
    first.cli("create", "page", "--id", "P", "--title", "Three")
    first.cli("block", "add", "P", "--id", "b1", "--text", base)
    first.sync()
    for device in devices.values():
        device.cli("offline", "add", "P")
        device.sync()
    for name in names:
        proxies[name].cut()
    for device in devices.values():
        device.wait_connected(False)
    words = {}
    for name, device in devices.items():
        words[name] = []
        for step in range(4):
            text = device.show("P")["blocks"][0]["text"]
            length = len(text)
            if step % 2 == 1 and length > 8:
                # Delete a short stretch anywhere it can see (never another device's words: it cannot see them).
                at = rng.randrange(0, length - 3)
                device.cli("block", "splice", "b1", "--at", str(at), "--delete", str(rng.randrange(1, 4)))
            else:
                word = f"<{name}{step}>"
                words[name].append(word)
                device.cli("block", "splice", "b1", "--at", str(rng.randrange(0, length + 1)), "--insert", word)
        # Its own words survive its own deletions only if it did not delete inside them: re-read what it shows.
        shown = device.show("P")["blocks"][0]["text"]
        words[name] = [w for w in words[name] if w in shown]
    order = names[:]
    rng.shuffle(order)
    note(f"reconnecting in the order {order}")
    for name in order:
        proxies[name].restore()
        wait_until(f"{name} pushed", lambda: (devices[name].queue() == [], devices[name].queue()), expected=[])
    final = broker.rows("SELECT text FROM block WHERE id = 'b1'")[0]["text"]
    for name, device in devices.items():
        wait_until(f"{name} converges on the broker's text",
                   lambda: (device.show("P")["blocks"][0]["text"] == final, device.show("P")["blocks"][0]["text"]),
                   expected=final)
    missing = [w for ws in words.values() for w in ws if w not in final]
    check(not missing, "every word typed on any device is in the merged text, whole", [], missing)
# Made by the previous release's programs (Tests/Fixtures/previous-release/README.md says how).
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Fixtures", "previous-release")

# The fixtures' block texts before the device's queued edits (the broker's), and after them (the device's).
OLD_TEXTS = {
    "b1": "Hello, world",
    "b2": "Grüße aus Köln — naïve café ☕",
    "b3": "日本語のテキスト 🎉 emoji",
    "b4": "Cafe\u0301 cre\u0300me (decomposed: NFD)",
    "b5": "",
    "b6": "deleted before the upgrade",
    "c1": "plain ASCII line",
    "c2": "two lines\r\nand a\ttab",
    "d1": "untouched: ½ ⅓ ¼ — Ω≈ç√",
}
EDITED_TEXTS = {
    **OLD_TEXTS,
    "b1": "Hello, brave new world",
    "b2": "Grüße aus Zürich — naïve café ☕☕",
    "b3": "日本語の新しいテキスト 🎉🎊 emoji!",
    "c3": "added offline, then edited: ünïcödé",
}


STORE_FILES = ("pagesyncd.sqlite", "pagesyncd.sqlite-wal", "pagesyncd.sqlite-shm")


def copy_store(source_dir, target_dir):
    """Copies a stopped daemon's store (the file and its -wal and -shm if there are) from one directory to another,
    replacing what is there: a backup taken, or restored, or a device image cloned."""
    os.makedirs(target_dir, exist_ok=True)
    for name in STORE_FILES:
        target = os.path.join(target_dir, name)
        if os.path.exists(target):
            os.unlink(target)
        if os.path.exists(os.path.join(source_dir, name)):
            shutil.copyfile(os.path.join(source_dir, name), target)


def broker_page(broker, page):
    """A page as the broker's store holds it: title, properties (name -> JSON value) and live block texts."""
    rows = broker.rows(f"SELECT title FROM page WHERE id = '{page}'")
    if not rows:
        return None
    properties = {r["name"]: json.loads(r["value"]) for r in
                  broker.rows(f"SELECT name, value FROM property WHERE page_id = '{page}' AND value IS NOT NULL")}
    blocks = [r["text"] for r in broker.rows(f"SELECT text FROM block WHERE page_id = '{page}' AND deleted = 0 "
                                             "ORDER BY position")]
    return {"title": rows[0]["title"], "properties": properties, "blocks": blocks}


def scenario_restored_device(s):
    """A's store is copied while it is stopped; A pushes edits; the copy is restored and A, offline, makes more
    edits than the copy missed (ids both at and past the broker's last for A); reconnected, the broker answers
    id_reused for the ids the copy reused, A takes a new client id and sends them again: every edit of both lives
    arrives, text typed in both included, no conflict, and another device sees it all."""
    broker = s.broker()
    proxy = Proxy(s, broker.port)
    a = s.device("A", proxy.url)
    b = s.device("B", broker.url)
    a.cli("create", "page", "--id", "P", "--title", "before the copy")
    a.cli("block", "add", "P", "--id", "b1", "--text", "base")
    a.cli("offline", "add", "P")
    a.sync()
    a.wait_forest(tree("P", "toggled"), "P is offline on A")
    b.cli("offline", "add", "P")
    b.sync()
    client = a.status()["clientId"]

    check_equal(a.stop(), 0, "A stops")
    backup = os.path.join(s.dir, "A-backup")
    copy_store(a.dir, backup)
    next_id = int(sqlite_rows(os.path.join(backup, "pagesyncd.sqlite"),
                              "SELECT value FROM sync_meta WHERE key = 'next_mutation_id'")[0]["value"])
    note(f"backup taken: next_mutation_id {next_id}")
    a.start()
    a.cli("edit", "P", "--title", "after the copy")
    a.cli("edit", "P", "--set", "copy=1")
    a.cli("block", "splice", "b1", "--at", "4", "--insert", " one more time")
    a.cli("create", "page", "--id", "Q", "--title", "made after the copy")
    a.sync()
    last = broker.rows(f"SELECT last_mutation_id FROM client WHERE id = '{client}'")[0]["last_mutation_id"]
    check_equal(last, next_id + 3, "the broker's last id for A covers the four edits made after the copy")
    check_equal(a.stop(), 0, "A stops")

    copy_store(backup, a.dir)
    proxy.cut()
    a.start(wait_connected=False)
    check_equal(a.status()["clientId"], client, "the restored store has A's client id")
    a.cli("edit", "P", "--title", "after the restore")
    a.cli("edit", "P", "--set", "restored=1")
    a.cli("block", "splice", "b1", "--at", "0", "--insert", "two ")
    a.cli("create", "page", "--id", "R", "--title", "made after the restore")
    a.cli("edit", "R", "--title", "made after the restore, then edited")
    a.cli("create", "page", "--id", "S", "--title", "one more")
    ids = [m["id"] for m in a.queue()]
    check(ids == list(range(next_id, next_id + 6)) and ids[0] <= last < ids[-1],
          "the restored store numbers its six new edits from the copy's next id, at and past the broker's last",
          f"{next_id}..{next_id + 5} around {last}", ids)

    proxy.restore()
    wait_until("A pushed everything", lambda: (a.queue() == [], a.queue()), expected=[])
    expected = {"title": "after the restore", "properties": {"copy": 1, "restored": 1},
                "blocks": ["two base one more time"]}
    wait_until("the broker has every edit of P from both lives of A",
               lambda: (lambda p: (p == expected, p))(broker_page(broker, "P")), expected=expected)
    for page, title in (("Q", "made after the copy"), ("R", "made after the restore, then edited"),
                        ("S", "one more")):
        check_equal(broker.rows(f"SELECT title FROM page WHERE id = '{page}'"), [{"title": title}],
                    f"the broker has page {page}")
    status = a.status()
    check(status["clientId"] != client, "A sends under a new client id", f"not {client}", status["clientId"])
    check_equal((a.cli("conflicts"), status["failedMutations"]), ([], 0), "A has no conflict")
    with open(a.log_path, errors="replace") as log:
        text = log.read()
    check("another copy of this device's store used the same mutation ids" in text,
          "A says why it took a new client id", "the warning", text[-2000:])
    wait_until("A's own copy of P is the broker's again",
               lambda: (lambda p: (p == ("after the restore", ["two base one more time"]), p))(
                   (lambda shown: (shown["title"], [x["text"] for x in shown["blocks"]]))(a.show("P"))))
    wait_until("B sees P with both lives' edits",
               lambda: (lambda p: (p == ("after the restore", ["two base one more time"]), p))(
                   (lambda shown: (shown["title"], [x["text"] for x in shown["blocks"]]))(b.show("P"))))
    a.cli("edit", "P", "--title", "and on")
    wait_until("A's next edit arrives", lambda: (
        (lambda r: (r == [{"title": "and on"}], r))(broker.rows("SELECT title FROM page WHERE id = 'P'"))))


def scenario_cloned_devices(s):
    """A device image cloned: A and C start from the same store (one client id), both online, and edit the same
    page and block at once: whichever pushes second under an id the other used gets id_reused and goes on under
    a new client id. Every edit of both arrives, no conflict, and the two end with different client ids."""
    broker = s.broker()
    a = s.device("A", broker.url)
    a.cli("create", "page", "--id", "P", "--title", "the image")
    a.cli("block", "add", "P", "--id", "b1", "--text", "base")
    a.cli("offline", "add", "P")
    a.sync()
    a.wait_forest(tree("P", "toggled"), "P is offline on A")
    check_equal(a.stop(), 0, "A stops")
    c = Device(s, "C", broker.url, "alice", "w1", {})
    copy_store(a.dir, c.dir)
    a.start()
    c.start()
    check_equal(a.status()["clientId"], c.status()["clientId"], "A and C start with one client id")
    for round_ in range(3):
        a.cli("edit", "P", "--set", f"a{round_}=1")
        c.cli("edit", "P", "--set", f"c{round_}=1")
    # C first, at the end of "base" (A's insert at the start may reach C before C types, moving the end).
    c.cli("block", "splice", "b1", "--at", "4", "--insert", " C")
    a.cli("block", "splice", "b1", "--at", "0", "--insert", "A ")
    a.cli("create", "page", "--id", "QA", "--title", "from A")
    c.cli("create", "page", "--id", "QC", "--title", "from C")
    wait_until("both pushed everything", lambda: (a.queue() == [] and c.queue() == [], (a.queue(), c.queue())))
    expected = {"title": "the image", "properties": {f"{d}{n}": 1 for d in "ac" for n in range(3)},
                "blocks": ["A base C"]}
    wait_until("the broker has every edit of both clones",
               lambda: (lambda p: (p == expected, p))(broker_page(broker, "P")), expected=expected)
    for page, title in (("QA", "from A"), ("QC", "from C")):
        check_equal(broker.rows(f"SELECT title FROM page WHERE id = '{page}'"), [{"title": title}],
                    f"the broker has page {page}")
    check_equal((a.cli("conflicts"), c.cli("conflicts")), ([], []), "no conflict on either")
    check(a.status()["clientId"] != c.status()["clientId"], "A and C end with different client ids",
          "different", (a.status()["clientId"], c.status()["clientId"]))
    for device in (a, c):
        wait_until(f"{device.name} shows P as the broker has it",
                   lambda: (lambda shown: (sorted(shown["properties"]) == sorted(expected["properties"])
                                           and [x["text"] for x in shown["blocks"]] == ["A base C"], shown))(
                       device.show("P")))


def scenario_upgrade(s):
    """Store files of the previous release (block text a plain string): the new broker and daemon open them, the
    device's queued old-style edit_block texts are pushed and applied once, every text is kept byte for byte,
    a splice of a migrated block reaches the broker, and a block added after the upgrade can be marked."""
    broker = Broker(s)
    shutil.copyfile(os.path.join(FIXTURES, "broker.sqlite"), broker.store)
    check_equal({r["id"]: r["text"] for r in broker.rows("SELECT id, text FROM block")}, OLD_TEXTS,
                "the broker's old file holds the old texts")
    # The device's URL is set at its start, once the broker has its port.
    b = Device(s, "B", None, "alice", "w1", {})
    shutil.copyfile(os.path.join(FIXTURES, "pagesyncd.sqlite"), b.store)
    client = b.rows("SELECT value FROM sync_meta WHERE key = 'client_id'")[0]["value"]
    queued = b.rows("SELECT id, type, page_id FROM mutation_queue WHERE status = 'pending' ORDER BY id")
    check_equal([(m["id"], m["type"]) for m in queued],
                [(1, "edit_block"), (2, "edit_block"), (3, "edit_block"), (4, "edit_block"), (5, "set_title"),
                 (6, "set_title"), (7, "add_block"), (8, "edit_block")],
                "the device's old file queues eight old-style mutations")
    check_equal(broker.rows(f"SELECT count(*) AS n FROM client WHERE id = '{client}'"), [{"n": 0}],
                "the old broker never saw the device's client")
    old_sequence = int(broker.rows("SELECT value FROM meta WHERE key = 'sequence'")[0]["value"])

    broker.start()
    check_equal(broker.rows("PRAGMA user_version"), [{"user_version": 6}], "the broker migrated its file to v6")
    check_equal(broker.rows("SELECT id FROM page WHERE stored_bytes IS NULL"), [], "every broker page has its size")
    check_equal(broker.rows("PRAGMA integrity_check"), [{"integrity_check": "ok"}], "the broker's file is intact")
    check_equal(broker.rows("SELECT count(*) AS n FROM page WHERE height < 0"), [{"n": 0}],
                "every broker page has its height (v5)")
    check_equal(broker.rows("SELECT id FROM block WHERE crdt IS NULL"), [], "every broker block has a CRDT state")
    b.broker_url = broker.url
    b.start()
    check_equal(b.rows("PRAGMA user_version"), [{"user_version": 4}], "the daemon migrated its file to v4")
    status = b.status()
    check_equal(status["clientId"], client, "the daemon kept the client id of its old file")
    with open(b.log_path, errors="replace") as log:
        started = log.read()
    check("mutations=8 [Daemon] mutations queued by the last run will be pushed" in started,
          "the daemon found the eight queued mutations at its start", "the log line", started[-2000:])
    b.sync()
    wait_until("B's queue is empty", lambda: (b.queue() == [], b.queue()), expected=[])

    check_equal(broker.rows(f"SELECT last_mutation_id FROM client WHERE id = '{client}'"),
                [{"last_mutation_id": 8}], "the broker applied B's mutations up to id 8")
    check_equal(broker.rows("SELECT client_id, mutation_id FROM rejection"), [], "none was rejected")
    check_equal(b.cli("conflicts"), [], "no conflicts on B (a re-applied add_block would be already_exists)")
    status = b.status()
    check_equal((status["mutationsPushed"], status["mutationsRejected"], status["failedMutations"]), (8, 0, 0),
                "B pushed 8 mutations, once each")
    check_equal({r["id"]: r["text"] for r in broker.rows("SELECT id, text FROM block")}, EDITED_TEXTS,
                "the broker's texts are B's queued edits, every other text kept byte for byte")
    titles = ["Upgrade notes (edited offline)", "Second page, edited offline", "No blocks here",
              "Kept offline, never edited offline"]
    check_equal([r["title"] for r in broker.rows("SELECT title FROM page ORDER BY id")], titles,
                "the broker has B's offline titles")
    check_equal(broker.rows("SELECT id FROM block WHERE crdt IS NULL"), [], "every broker block still has a state")
    # The queued edits changed each of b1, b2, b3 and c3 in the batch that carried them: one seq per block.
    changed = broker.rows(f"SELECT field, count(DISTINCT seq) AS n FROM change_log WHERE seq > {old_sequence} "
                          "AND field LIKE 'block:%' GROUP BY field ORDER BY field")
    check_equal({r["field"]: r["n"] for r in changed}, {"block:b1": 1, "block:b2": 1, "block:b3": 1, "block:c3": 1},
                "only the edited blocks changed, each in one batch")

    def shown_texts():
        texts = {}
        for page in ("P1", "P2", "P4"):
            texts.update({x["id"]: x["text"] for x in b.show(page)["blocks"]})
        return texts

    live = {k: v for k, v in EDITED_TEXTS.items() if k != "b6"}
    wait_until("B shows the broker's texts: its edits, once each", lambda: (shown_texts() == live, shown_texts()),
               expected=live)
    check_equal([b.show(p)["title"] for p in ("P1", "P2", "P3", "P4")], titles, "B's titles")

    def local_state():
        rows = b.rows("SELECT id, text, crdt IS NOT NULL AS state, legacy_text FROM local_block ORDER BY id")
        return {r["id"]: (r["text"], r["state"], r["legacy_text"]) for r in rows}

    # P4's block too: B never edited it, its page was downloaded whole once because the migration asked.
    merged = {k: (v, 1, 0) for k, v in live.items()}
    wait_until("B's local blocks hold the broker's CRDT states and their texts, none legacy any more",
               lambda: (local_state() == merged, local_state()), expected=merged)
    pages = b.offline_pages()
    updated = {r["id"]: r["last_updated"] for r in broker.rows("SELECT id, last_updated FROM page")}
    check_equal({p: (row["last_downloaded_timestamp"], row["complete"]) for p, row in pages.items()},
                {p: (updated[p], 1) for p in ("P1", "P2", "P3", "P4")},
                "B downloaded every page up to the broker's time")

    # A splice of a block migrated untouched (NFD accents, never edited) merges and reaches the broker.
    answer = b.cli("block", "splice", "b4", "--at", "0", "--insert", "★ ")
    check_equal(answer["mutationIds"], [9], "the splice is one mutation, id 9, after the old queue's")
    b.sync()
    check_equal(b.rows("SELECT type FROM sent_mutation WHERE id = 9"), [{"type": "splice_text"}],
                "it was sent as splice_text (the block has its state: no old-style edit_block)")
    wait_until("B's splice reached the broker",
               lambda: (lambda r: (r == [{"text": "★ " + OLD_TEXTS["b4"]}], r))(
                   broker.rows("SELECT text FROM block WHERE id = 'b4'")),
               expected="★ " + OLD_TEXTS["b4"])
    check_equal(broker.rows(f"SELECT last_mutation_id FROM client WHERE id = '{client}'"),
                [{"last_mutation_id": 9}], "the broker applied it as mutation 9")
    check_equal(b.show("P1")["blocks"][3]["text"], "★ " + OLD_TEXTS["b4"], "B shows its splice")

    # A device that never ran the old release reads the same page from the broker.
    a = s.device("A", broker.url)
    a.cli("offline", "add", "P1")
    a.sync()
    a.wait_forest(tree("P1", "toggled"), "P1 is offline on A")
    check_equal([(x["id"], x["text"]) for x in a.show("P1")["blocks"]],
                [(k, "★ " + v if k == "b4" else v) for k, v in live.items() if k.startswith("b")],
                "a new device shows every text of the upgraded page")

    # P3 had no blocks at the migration, so B kept its download time: a block A adds there now reaches B in a
    # partial delta, with its whole state, so B can mark it.
    a.cli("offline", "add", "P3")
    a.cli("block", "add", "P3", "--id", "e1", "--text", "added after the upgrade")
    a.sync()
    wait_until("B has A's new block of P3 with its state",
               lambda: (lambda r: (r == [{"text": "added after the upgrade", "state": 1}], r))(
                   b.rows("SELECT text, crdt IS NOT NULL AS state FROM local_block WHERE id = 'e1'")),
               expected={"text": "added after the upgrade", "state": 1})
    b.cli("block", "mark", "e1", "--from", "0", "--to", "5", "--type", "bold")
    b.sync()
    wait_until("B's mark of it reached the broker",
               lambda: (lambda r: (len(r) == 1 and '"bold"' in r[0]["marks"], r))(
                   broker.rows("SELECT marks FROM block WHERE id = 'e1'")),
               expected="a bold mark over 'added'")
    check_equal(b.cli("conflicts"), [], "still no conflicts")


class EventWatcher:
    """`curl -sN --unix-socket SOCK http://localhost/v1/events` in the background: the daemon's change stream as
    Server-Sent Events, read by a program nobody here wrote. Events are parsed from curl's output as the HTML
    standard says (fields up to a blank line)."""

    def __init__(self, scenario, device, last_event_id=None):
        argv = ["curl", "-sSN", "--unix-socket", device.socket, "http://localhost/v1/events"]
        if last_event_id is not None:
            argv[1:1] = ["-H", f"Last-Event-ID: {last_event_id}"]
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True)
        scenario.processes.append((f"curl events of {device.name}", self.process))
        self.events = []  # (id or None, type, data as parsed JSON)
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        fields = {}
        for line in self.process.stdout:
            line = line.rstrip("\n")
            if line == "":
                if "data" in fields:
                    with self.lock:
                        self.events.append((fields.get("id"), fields.get("event"), json.loads(fields["data"])))
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value

    def seen(self):
        with self.lock:
            return list(self.events)

    def wait_for(self, what, match):
        """The first event `match(type, data)` accepts, waiting for it."""
        def probe():
            found = [event for event in self.seen() if match(event[1], event[2])]
            return bool(found), found[0] if found else None
        wait_until(what, probe)
        return [event for event in self.seen() if match(event[1], event[2])][0]

    def close(self):
        self.process.terminate()
        self.process.wait(timeout=10)


def scenario_events(s):
    """B's change stream, read by curl: A's edit arrives by push as a `remote` page event, B's own edit as a `local`
    one after its commit, offline changes and the sync state as events; a reconnect with Last-Event-ID gets what it
    missed and nothing twice."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url, heartbeat_interval=60)
    a.cli("create", "page", "--id", "P", "--title", "first")
    a.sync()
    watch = EventWatcher(s, b)
    first = watch.wait_for("the sync state first", lambda kind, data: kind == "sync")
    check(first[0] is not None and first[2]["connected"] is True,
          "the stream starts with the sync state, numbered with its position", "connected, an id", first)
    b.cli("offline", "add", "P")
    watch.wait_for("P entering the offline set", lambda kind, data: kind == "offline" and data["id"] == "P"
                   and data["available"] is True)
    downloaded = watch.wait_for("P downloaded", lambda kind, data: kind == "page" and data["id"] == "P"
                                and data["source"] == "remote")
    a.cli("edit", "P", "--title", "second")
    watch.wait_for("A's edit reaching B by push",
                   lambda kind, data: kind == "page" and data["id"] == "P" and data["source"] == "remote"
                   and data["lastDownloadedTimestamp"] > downloaded[2]["lastDownloadedTimestamp"])
    shown = b.show("P")
    check(shown["title"] == "second", "the event came after B stored the edit", "second", shown["title"])
    b.cli("edit", "P", "--title", "third")
    local = watch.wait_for("B's own edit", lambda kind, data: kind == "page" and data["source"] == "local")
    check(local[2]["id"] == "P" and local[0] is not None, "a local page event names P and has an id", "P", local)
    after = watch.seen().index(local)
    watch.wait_for("the queue's length", lambda kind, data: kind == "sync" and data["pendingMutations"] >= 1)

    def emptied():
        tail = watch.seen()[after:]
        return any(kind == "sync" and data["pendingMutations"] == 0 for _, kind, data in tail), len(tail)
    wait_until("the queue emptied after B's edit was pushed", emptied)
    ids = [int(event[0]) for event in watch.seen() if event[0] is not None]
    check(ids == sorted(ids) and len(set(ids)) == len(ids), "event ids strictly increase", "increasing", ids)
    last = ids[-1]
    watch.close()

    # Missed while no one read: a new page taken offline, a title. Resumed, curl gets those (P's newest event only:
    # its local edit or the download after the push, whichever is newer) and nothing before.
    a.cli("create", "page", "--id", "Q", "--title", "queued")
    a.sync()
    b.cli("offline", "add", "Q")
    b.cli("edit", "P", "--title", "fourth")
    resumed = EventWatcher(s, b, last_event_id=last)
    resumed.wait_for("Q entering the offline set", lambda kind, data: kind == "offline" and data["id"] == "Q")
    event = resumed.wait_for("the missed edit", lambda kind, data: kind == "page" and data["id"] == "P")
    check(int(event[0]) > last, "the resumed stream starts after the last id seen", f"> {last}", event[0])
    check(all(event[0] is None or int(event[0]) > last for event in resumed.seen()),
          "nothing seen before is sent again", f"ids > {last}", resumed.seen())
    check(not any(kind == "reset" for _, kind, _ in resumed.seen()), "no reset within the window", "none",
          resumed.seen())
    resumed.close()

    # An id from no run of this daemon: curl is told to re-read.
    stranger = EventWatcher(s, b, last_event_id=5)
    stranger.wait_for("a reset", lambda kind, data: kind == "reset" and "not from this run" in data["reason"])
    stranger.close()
    ok("B's change stream told curl of every change, in order, after its commit, and resumed without loss")


def scenario_watch(s):
    """`pagesync watch --json` (PagesyncClient's event stream) against a real daemon: a line per event as it happens,
    the contract's fields; a daemon restart is a `reset` line and the stream goes on by itself."""
    broker = s.broker()
    a = s.device("A", broker.url)
    b = s.device("B", broker.url, heartbeat_interval=60)
    a.cli("create", "page", "--id", "W", "--title", "first")
    a.sync()
    process = subprocess.Popen([CLI_PROGRAM, "watch", "--json", "--socket", b.socket], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    s.processes.append(("pagesync watch of B", process))
    lines = []
    lock = threading.Lock()

    def read():
        for line in process.stdout:
            with lock:
                lines.append(json.loads(line))
    threading.Thread(target=read, daemon=True).start()

    def wait_line(what, match):
        def probe():
            with lock:
                found = [line for line in lines if match(line)]
            return bool(found), found[:1]
        wait_until(what, probe)
        with lock:
            return [line for line in lines if match(line)][0]

    wait_line("the sync state", lambda line: line["type"] == "sync" and line["connected"] is True)
    b.cli("offline", "add", "W")
    wait_line("W entering the offline set", lambda line: line == {"type": "offline", "id": "W", "available": True})
    a.cli("edit", "W", "--title", "second")
    remote = wait_line("A's edit on B, by push", lambda line: line["type"] == "page" and line["id"] == "W"
                       and line["source"] == "remote" and b.show("W")["title"] == "second")
    check(isinstance(remote["lastDownloadedTimestamp"], int), "lastDownloadedTimestamp is a number", "int", remote)
    b.cli("edit", "W", "--title", "third")
    wait_line("B's own edit", lambda line: line["type"] == "page" and line["source"] == "local")

    # The daemon restarts: watch keeps running, says events may have been lost, and goes on.
    b.stop()
    b.start()
    wait_line("a reset after the restart", lambda line: line["type"] == "reset")
    with lock:
        seen = len(lines)  # before the edit: its event may be in before the edit command returns
    a.cli("edit", "W", "--title", "fourth")
    def after_restart():
        with lock:
            tail = lines[seen:]
        return any(line["type"] == "page" and line["id"] == "W" for line in tail), tail
    wait_until("an edit after the restart reaching watch", after_restart)
    check(process.poll() is None, "watch is still running", "running", process.returncode)
    process.send_signal(signal.SIGINT)
    code = process.wait(timeout=10)
    check(code == 0, "watch ends cleanly on Ctrl-C", 0, (code, process.stderr.read()))
    ok("pagesync watch followed B's changes across a restart of its daemon")


def tls_pair(name):
    if not TLS_DIR:
        raise CheckFailed("the TLS scenarios need TLS_DIR (the third argument)")
    return os.path.join(TLS_DIR, name + ".pem"), os.path.join(TLS_DIR, name + ".key")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def edit_reaches(a, b, page, title):
    """A edits `page`'s title; B, which keeps it offline, shows the edit without running sync (a push)."""
    a.cli("edit", page, "--title", title)

    def probe():
        shown = b.show(page)
        return shown["title"] == title and shown.get("source") == "local", (shown["title"], shown.get("source"))

    wait_until(f"B shows A's edit '{title}' from its local store, without sync", probe, timeout=10,
               expected=(title, "local"))


def two_devices_sync(s, url, **config):
    a = s.device("A", url, **config)
    b = s.device("B", url, heartbeat_interval=60, **config)
    a.cli("create", "page", "--id", "P", "--title", "first")
    a.sync()
    b.cli("offline", "add", "P")
    b.sync()
    b.wait_forest(tree("P", "toggled"), "P is offline on B")
    edit_reaches(a, b, "P", "edited over TLS")
    return a, b


def scenario_tls_push(s):
    """Over native TLS: a broker with [server.tls], devices at https://localhost with ca_file; an edit on A is
    pushed to B."""
    broker = s.broker(tls=tls_pair("server"))
    check(broker.url.startswith("https://localhost:"), "the devices use an https:// URL", "https://", broker.url)
    two_devices_sync(s, broker.url, ca_file=os.path.join(TLS_DIR, "ca.pem"))


def scenario_tls_wrong_host(s):
    """A broker whose certificate names another host: the device refuses it, says why in status, sends nothing,
    and keeps retrying."""
    broker = s.broker(tls=tls_pair("other"))
    url = f"https://127.0.0.1:{broker.port}"
    a = s.device("A", url, wait_connected=False, ca_file=os.path.join(TLS_DIR, "ca.pem"))
    wait_until("A's lastError names the broker and the host name mismatch",
               lambda: (lambda st: ("127.0.0.1" in (st["lastError"] or "")
                                    and "certificate verify failed: IP address mismatch" in (st["lastError"] or ""),
                                    st["lastError"]))(a.status()))
    check(not a.status()["connected"], "A is not connected", False, a.status()["connected"])
    # Retried with the backoff (50 to 500 ms here), and refused each time.
    wait_until("A retries the broker", lambda: (lambda st: (st["reconnects"] >= 3 and not st["connected"]
                                                           and "IP address mismatch" in (st["lastError"] or ""),
                                                           st))(a.status()))
    # The broker logs every stream it opens: none came through.
    with open(broker.log_path, errors="replace") as log:
        text = log.read()
    check("stream opened" not in text and "/v1/" not in text, "the broker saw no request", "", text[-500:])


def scenario_tls_failover(s):
    """Each URL of a list is verified against its own host: the first broker's certificate names another host, so
    the device refuses it (sending nothing) and connects to the second, whose certificate is right."""
    wrong = s.broker(tls=tls_pair("other"), name="broker1")
    right = s.broker(tls=tls_pair("server"), name="broker2", store=wrong.store)
    d = s.device("D", [wrong.url, right.url], ca_file=os.path.join(TLS_DIR, "ca.pem"))
    check_equal(d.status()["broker"], right.url, "D is on the second broker, over TLS")
    with open(d.log_path, errors="replace") as log:
        text = log.read()
    check(any("cannot connect to the broker" in line and wrong.url in line and "hostname mismatch" in line
              for line in text.splitlines()),
          "D's log names the first URL and its host name mismatch", wrong.url, text[-2000:])
    with open(wrong.log_path, errors="replace") as log:
        refused = log.read()
    check("stream opened" not in refused and "/v1/" not in refused, "the first broker saw no request", "",
          refused[-500:])
    d.cli("create", "page", "--id", "T", "--title", "over TLS to the second")
    d.sync()
    check_equal(right.rows("SELECT title FROM page WHERE id = 'T'"), [{"title": "over TLS to the second"}],
                "D's edit reached the store through the second broker")


class SServer:
    """`openssl s_server` as a fake broker on `port` with `pair`: it logs the client's TLS extensions (SNI) and
    prints whatever the client sends once the handshake completes."""

    def __init__(self, s, port, pair, label):
        self.log_path = os.path.join(s.dir, f"s_server-{label}.log")
        log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            ["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert", pair[0], "-key", pair[1],
             "-tlsextdebug", "-ign_eof"], stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, cwd=s.dir)
        log.close()
        s.processes.append((f"s_server {label}", self.process))
        s.logs.append(self.log_path)
        wait_until(f"s_server {label} accepts", lambda: (lambda t: ("ACCEPT" in t, t))(self.text()))

    def text(self):
        with open(self.log_path, errors="replace") as log:
            return log.read()

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


def scenario_tls_s_server(s):
    """openssl s_server as the broker: the daemon sends SNI, refuses a certificate for another name without
    sending a byte of HTTP, and talks HTTP once the certificate fits."""
    port = free_port()
    fake = SServer(s, port, tls_pair("other"), "wrong-name")
    a = s.device("A", f"https://localhost:{port}", wait_connected=False, ca_file=os.path.join(TLS_DIR, "ca.pem"))
    wait_until("A's lastError says the host name does not match",
               lambda: (lambda e: ("hostname mismatch" in e and "localhost" in e, e))(a.status()["lastError"] or ""))
    wait_until("s_server saw the client's server name extension",
               lambda: (lambda t: ('TLS client extension "server name"' in t, t[-300:]))(fake.text()))
    fake.stop()
    text = fake.text()
    check("localhost" in text.replace("\n", ""), "the SNI names localhost", "localhost", text[-800:])
    check("GET " not in text and "Bearer" not in text, "nothing of HTTP reached the server with the wrong name",
          "no GET", text[-800:])
    good = SServer(s, port, tls_pair("server"), "right-name")
    wait_until("with the right certificate the daemon's request arrives",
               lambda: (lambda t: ("GET /v1/" in t and "Bearer " in t, t[-300:]))(good.text()))
    good.stop()


def scenario_tls_nginx(s):
    """nginx terminates TLS in front of a plain-HTTP broker (the proxy set-up of docs/operations.md): devices at
    https:// through it sync and get pushes."""
    broker = s.broker()
    port = free_port()
    root = os.path.join(s.dir, "nginx")
    os.makedirs(root)
    cert, key = tls_pair("server")
    config = os.path.join(root, "nginx.conf")
    with open(config, "w") as file:
        file.write(f"""daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log info;
events {{ worker_connections 64; }}
http {{
  access_log {root}/access.log;
  client_body_temp_path {root}/body; proxy_temp_path {root}/proxy; fastcgi_temp_path {root}/fastcgi;
  uwsgi_temp_path {root}/uwsgi; scgi_temp_path {root}/scgi;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
  server {{
    listen 127.0.0.1:{port} ssl;
    server_name localhost;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    ssl_protocols TLSv1.2 TLSv1.3;
    location / {{
      proxy_pass http://127.0.0.1:{broker.port};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_set_header Host $host;
      proxy_read_timeout 1h;
      proxy_buffering off;
    }}
  }}
}}
""")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    s.start("nginx", [nginx, "-p", root, "-c", config, "-e", f"{root}/error.log"], os.path.join(s.dir, "nginx.log"))
    s.logs.append(f"{root}/error.log")

    def listening():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True, "open"
        except OSError as error:
            return False, str(error)

    wait_until("nginx listens", listening)
    a, b = two_devices_sync(s, f"https://localhost:{port}", ca_file=os.path.join(TLS_DIR, "ca.pem"))
    with open(f"{root}/access.log") as log:
        proxied = log.read()
    # A stream is logged when it ends; the requests as they are answered.
    check('"POST /v1/batch HTTP/1.1" 200' in proxied, "the devices' requests went through nginx", "/v1/batch",
          proxied[-500:])
    b.stop()
    with open(f"{root}/access.log") as log:
        proxied = log.read()
    check('"GET /v1/stream HTTP/1.1" 101' in proxied, "B's device stream went through nginx", "101",
          proxied[-500:])


def scenario_tls_broker(s):
    """The TLS broker against clients nobody here wrote: openssl s_client (TLS 1.3 and 1.2 with ALPN http/1.1,
    TLS 1.1 refused, resumption), curl --cacert, Python ssl + websockets over wss://, and SIGHUP reading a new
    certificate while an open stream goes on (a bad pair keeps the running one)."""
    import asyncio
    import ssl
    import urllib.request
    import websockets

    # Copies: the scenario renews them in place.
    server = tuple(shutil.copy(path, s.dir) for path in tls_pair("server"))
    # Without the system's openssl.cnf (Debian's sets MinProtocol = TLSv1.2 for every program): what is refused
    # is what the broker itself refuses.
    broker = s.broker(tls=server, env={"OPENSSL_CONF": "/dev/null"})
    ca = os.path.join(TLS_DIR, "ca.pem")
    address = f"127.0.0.1:{broker.port}"

    def s_client(*args):
        run = subprocess.run(["openssl", "s_client", "-connect", address, "-servername", "localhost", "-CAfile", ca,
                              "-verify_return_error", *args], input="", capture_output=True, text=True,
                             timeout=30)
        return run.returncode, run.stdout + run.stderr

    code, text = s_client("-alpn", "http/1.1")
    check(code == 0 and "New, TLSv1.3" in text and "ALPN protocol: http/1.1" in text
          and "Verify return code: 0 (ok)" in text, "s_client: TLS 1.3, ALPN http/1.1, verified", "TLSv1.3", text)
    code, text = s_client("-tls1_2", "-alpn", "http/1.1")
    check(code == 0 and "New, TLSv1.2" in text and "ALPN protocol: http/1.1" in text,
          "s_client: TLS 1.2 is served too", "TLSv1.2", text)
    code, text = s_client("-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0")
    check(code != 0 and "alert protocol version" in text, "s_client: TLS 1.1 is refused with protocol_version",
          "alert protocol version", text[-600:])
    code, text = s_client("-alpn", "h2")
    check(code != 0 and "no application protocol" in text, "s_client: ALPN without http/1.1 is refused",
          "no application protocol", text[-600:])
    session = os.path.join(s.dir, "session.pem")
    s_client("-tls1_2", "-sess_out", session)
    code, text = s_client("-tls1_2", "-sess_in", session)
    check(code == 0 and "Reused, TLSv1.2" in text, "s_client: a TLS 1.2 session resumes from its ticket", "Reused",
          text[-600:])

    run = subprocess.run(["curl", "--silent", "--show-error", "--noproxy", "*", "--max-time", "15", "--cacert", ca,
                          "-w", "|%{http_code}|%{http_version}", f"{broker.url}/healthz"],
                         capture_output=True, text=True, timeout=30)
    check(run.returncode == 0 and run.stdout.endswith("|200|1.1"), "curl --cacert GET /healthz over https: 200",
          "|200|1.1", (run.returncode, run.stdout, run.stderr))

    context = ssl.create_default_context(cafile=ca)

    def https_call(method, path, body, token):
        request = urllib.request.Request(broker.url + path, data=json.dumps(body).encode(), method=method,
                                         headers={"Authorization": "Bearer " + token,
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=20, context=context) as answer:
            return answer.status

    # TLS 1.3 resumption with Python's ssl: the ticket comes after the handshake, so read an answer first.
    first = socket.create_connection(("127.0.0.1", broker.port))
    # suppress_ragged_eofs=False: an end without close_notify (a possible truncation) would raise SSLEOFError.
    tls = context.wrap_socket(first, server_hostname="localhost", suppress_ragged_eofs=False)
    tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    try:
        while tls.recv(4096):
            pass
        check(True, "Connection: close ends with close_notify before FIN")
    except ssl.SSLEOFError as error:
        check(False, "Connection: close ends with close_notify before FIN", "close_notify", str(error))
    ticket = tls.session
    tls.close()
    again = context.wrap_socket(socket.create_connection(("127.0.0.1", broker.port)), server_hostname="localhost",
                                session=ticket)
    check(again.session_reused and again.version() == "TLSv1.3", "Python ssl: a TLS 1.3 session resumes",
          True, (again.session_reused, again.version()))
    again.close()

    token = USERS["alice"][0]
    batch = {"client": "tls-writer", "workspace": "w1",
             "mutations": [{"id": 1, "page": "T", "time": "1700000000001:0", "type": "create_page", "title": "t"}]}
    check(https_call("POST", "/v1/batch", batch, token) == 200, "a batch over https is applied")

    def leaf_of(pair):
        with open(pair[0]) as file:
            return file.read().split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"

    def served_leaf():
        return ssl.DER_cert_to_PEM_cert(
            context.wrap_socket(socket.create_connection(("127.0.0.1", broker.port)),
                                server_hostname="localhost").getpeercert(binary_form=True))

    def normalized(pem):
        return "".join(pem.split())

    async def streams():
        async with websockets.connect(f"wss://localhost:{broker.port}/v1/stream", ssl=context,
                                      additional_headers={"Authorization": "Bearer " + token}) as ws:
            await ws.send(json.dumps({"op": "subscribe", "pages": ["T"]}))
            answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
            check(answer["op"] == "subscribed", "wss://: the stream subscribes", "subscribed", answer)

            async def pushed(n):
                batch["mutations"] = [{"id": n, "page": "T", "time": f"{1700000000000 + n}:0", "type": "set_title",
                                       "title": f"t{n}"}]
                check(https_call("POST", "/v1/batch", batch, token) == 200, f"edit {n} applied over https")
                while True:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                    if message["op"] == "changed":
                        return sorted(message["pages"])

            pages = await pushed(2)
            check(pages == ["T"], "wss://: the stream is notified of the edit", ["T"], pages)
            check(normalized(served_leaf()) == normalized(leaf_of(server)), "the first certificate is served")
            # Renewal: the same file names get a new certificate; SIGHUP.
            renewed = tls_pair("renewed")
            shutil.copy(server[0], server[0] + ".old")
            shutil.copy(server[1], server[1] + ".old")
            shutil.copy(renewed[0], server[0])
            shutil.copy(renewed[1], server[1])
            broker.reload()
            check(normalized(served_leaf()) == normalized(leaf_of(renewed)),
                  "after SIGHUP new connections get the renewed certificate")
            check(await pushed(3) == ["T"], "the stream opened before the reload is still notified", ["T"])
            # A bad pair: the renewed certificate with the old key. Refused, naming the file; the renewed pair stays.
            shutil.copy(server[1] + ".old", server[1])
            with open(broker.log_path, errors="replace") as log:
                before = log.read().count("reload refused")
            broker.process.send_signal(signal.SIGHUP)

            def refused():
                with open(broker.log_path, errors="replace") as log:
                    text = log.read()
                return text.count("reload refused") > before, text[-600:]

            wait_until("SIGHUP with a mismatched pair is refused", refused)
            with open(broker.log_path, errors="replace") as log:
                text = log.read()
            check(f"the private key {server[1]} does not match the certificate {server[0]}" in text,
                  "the refusal names the files", server[1], text[-600:])
            check(normalized(served_leaf()) == normalized(leaf_of(renewed)), "the running pair stays in use")
            check(await pushed(4) == ["T"], "the stream is still notified after the refused reload", ["T"])

    asyncio.run(streams())


def scenario_tokens(s):
    """The daemon's token from token_command (the built pagesyncd running a real program): a wrong token is
    refused 401 and status says so while an edit waits in the queue; the right one printed, the edit goes out;
    the broker's reload replaces the token (1008 token revoked) and the command's next token resumes with a
    catch-up, not a download of every page; a token handed with PUT /v1/token (curl) that the broker refuses falls
    back to the command's; malformed PUT bodies are 400s."""
    broker = s.broker()
    b = Device(s, "B", broker.url, "alice", "w1", {})
    token_file = os.path.join(b.dir, "token")

    def print_token(token):
        with open(token_file, "w") as f:
            f.write(token + "\n")

    print_token("wrong-token-0123456789")
    b.token_command = ["/bin/cat", token_file]
    b.start(wait_connected=False)
    wait_until("B says the broker refused the command's token",
               lambda: (lambda st: ("401" in (st.get("lastError") or "") and "token_command" in (st.get("tokenProblem") or "")
                                    and not st["connected"], st))(b.status()))
    b.cli("create", "page", "--id", "T1", "--title", "made without a usable token")
    check_equal(b.status()["pendingMutations"], 1, "the edit waits in the queue")

    print_token(USERS["alice"][0])
    wait_until("B, given the right token, pushes the edit",
               lambda: (lambda st: (st["connected"] and st["pendingMutations"] == 0, st))(b.status()))
    check_equal((broker_page(broker, "T1") or {}).get("title"), "made without a usable token", "T1 on the broker")
    for page in ["T2", "T3", "T4"]:
        b.cli("create", "page", "--id", page)
    for page in ["T1", "T2", "T3", "T4"]:
        b.cli("offline", "add", page)
    b.sync()
    before = b.status()

    renewed = "alice-token-renewed-0123456789"
    print_token(renewed)
    broker.users["alice"] = (renewed, USERS["alice"][1])
    broker.reload()
    wait_until("B is back with the command's new token",
               lambda: (lambda st: (st["connected"] and st["tokenRefusals"] > before["tokenRefusals"]
                                    and st["streamsOpened"] > before["streamsOpened"], st))(b.status()))
    b.sync()
    after = b.status()
    check(after["catchUpRequests"] > before["catchUpRequests"], "B caught up after the revocation",
          f"> {before['catchUpRequests']}", after["catchUpRequests"])
    check_equal(after["fetchedPages"], before["fetchedPages"], "no page downloaded again: nothing changed")

    def put_token(body):
        run = subprocess.run(["curl", "-sS", "--unix-socket", b.socket, "-X", "PUT", "-H",
                              "Content-Type: application/json", "--data-binary", body, "-w", "\n%{http_code}",
                              "http://localhost/v1/token"], capture_output=True, text=True, timeout=30)
        text, _, code = run.stdout.rpartition("\n")
        return code, text

    for body, part in [('{"token": ""}', "the token is empty"), ('{"token": "a b"}', "not visible ASCII"),
                       ('{"tok": "x"}', "invalid JSON body"), ("nope", "invalid JSON body")]:
        code, text = put_token(body)
        check(code == "400" and part in text, f"PUT /v1/token {body} is 400 naming the problem", part, (code, text))
    code, text = put_token('{"token": "handed-but-unknown-0123456789"}')
    check(code == "200" and '"api"' in text, "a well-formed handed token is taken", "200 api", (code, text))
    wait_until("B, refused the handed token, is back on the command's",
               lambda: (lambda st: (st["connected"] and st["tokenSource"] == "token_command"
                                    and st["tokenRefusals"] > after["tokenRefusals"], st))(b.status()))
    with open(b.log_path, errors="replace") as log:
        check("handed-but-unknown" not in log.read(), "the handed token is not in the daemon's log")
    b.reload("configuration reloaded")
    b.wait_connected()
    check(b.process.poll() is None, "all in one process, no restart")


def scenario_failover(s):
    """Two brokers share ONE SQLite store file and a Redis bus, D lists both; D on broker1 sees by push an edit made
    through broker2; kill -9 of the one D is on: D moves to the other, catches up an edit made there meanwhile,
    pushes what it queued in between exactly once, and status names the new broker.

    The shared store is a SQLite file in WAL mode with a busy timeout (each broker's writer takes SQLite's write
    lock for its group, its readers never block): a stand-in until the PostgreSQL store lands, when this scenario
    runs on it too. The bus is Debian's redis-server on a free loopback port (never skipped). D's heartbeat is 60 s,
    longer than any wait here: what reaches D without a sync or a reconnect came by push."""
    redis = s.redis()
    first = s.broker(name="broker1", bus=redis)
    second = s.broker(name="broker2", store=first.store, bus=redis)
    # D reaches the second broker through a relay the test can cut: D is held between brokers (both unreachable)
    # long enough to queue edits, whatever its jittered delays draw.
    relay = Proxy(s, second.port)
    d = s.device("D", [first.url, relay.url], heartbeat_interval=60)
    w = s.device("W", second.url)
    check_equal(d.status()["broker"], first.url, "D is on the first broker of its list")
    w.cli("create", "page", "--id", "P", "--title", "before")
    w.sync()
    d.cli("offline", "add", "P")
    d.sync()
    d.wait_forest(tree("P", "toggled"), "P is offline on D (through broker1, from the shared store)")
    # Across brokers by push: W's edit commits through broker2, which publishes it on Redis; broker1 hears it and
    # pushes it to D, whose stream stays open (no reconnect, so no catch-up brought it).
    first.wait_bus_live()
    second.wait_bus_live()
    wait_until("both brokers subscribed w1's bus channel (D's stream on broker1, W's on broker2)",
               lambda: (b":2\r\n" in redis.command("PUBSUB", "NUMSUB", "pagesync:ws:w1"),
                        redis.command("PUBSUB", "NUMSUB", "pagesync:ws:w1")))
    opened = d.status()["streamsOpened"]
    for n in range(1, 4):
        edit_reaches(w, d, "P", f"edit {n} from W through broker2")
    check_equal((d.status()["broker"], d.status()["streamsOpened"]), (first.url, opened),
                "D stayed on broker1 with the same stream: those edits came by push across the bus")
    check(first.metric("bus_received_messages_total") >= 3 and second.metric("bus_published_messages_total") >= 3,
          "broker2 published W's edits on the bus and broker1 received them")
    d.cli("edit", "P", "--title", "from D on broker1")
    d.sync()
    check_equal(second.rows("SELECT title FROM page WHERE id = 'P'"), [{"title": "from D on broker1"}],
                "D's edit through broker1 is in the shared store")
    client = d.status()["clientId"]

    relay.cut()
    check_equal(first.stop(signal.SIGKILL), -signal.SIGKILL, "broker1 killed with SIGKILL")
    d.wait_connected(False)
    status = d.status()
    check(any(url in (status["lastError"] or "") for url in (first.url, relay.url)),
          "status: lastError names the broker that failed", f"{first.url} or {relay.url}", status["lastError"])
    note(f"D between brokers: broker {status['broker']}, lastError {status['lastError']}")
    # While D is between brokers: an edit through the surviving broker, and two edits D queues.
    w.cli("edit", "P", "--title", "from W on broker2 while broker1 was gone")
    d.cli("block", "add", "P", "--id", "d1", "--text", "queued between brokers")
    d.cli("edit", "P", "--set", "Count=1")
    queued = d.queue()
    check_equal([m["type"] for m in queued], ["add_block", "set_property"], "D queued its two edits")

    relay.restore()
    wait_until("D moved to broker2 (the second URL of its list)",
               lambda: (lambda st: (st["connected"] and st["broker"] == relay.url, st))(d.status()),
               expected={"connected": True, "broker": relay.url})
    wait_until("D pushed what it queued between brokers", lambda: (d.queue() == [], d.queue()), expected=[])
    wait_until("D caught up W's edit made on broker2 while it was between brokers",
               lambda: (lambda p: (p["title"] == "from W on broker2 while broker1 was gone"
                                   and p.get("source") == "local", p["title"]))(d.show("P")),
               expected="from W on broker2 while broker1 was gone")
    check_equal(second.rows("SELECT id, text FROM block WHERE page_id = 'P' AND deleted = 0"),
                [{"id": "d1", "text": "queued between brokers"}], "the broker has D's block once")
    check_equal(second.rows("SELECT name, value FROM property WHERE page_id = 'P'"),
                [{"name": "Count", "value": "1"}], "the broker has D's property")
    check_equal(second.rows(f"SELECT last_mutation_id FROM client WHERE id = '{client}'"),
                [{"last_mutation_id": queued[-1]["id"]}], "the broker applied D's mutations up to the last id")
    check_equal(d.cli("conflicts"), [], "nothing was rejected (a block added twice would be)")
    status = d.status()
    check_equal((status["broker"], status["lastError"], status["failedMutations"]), (relay.url, None, 0),
                "status names broker2 and no error")
    human = subprocess.run([CLI_PROGRAM, "status", "--socket", d.socket], capture_output=True, text=True,
                           timeout=30).stdout
    check(any(line.startswith("broker:") and relay.url in line for line in human.splitlines()),
          "pagesync status says which broker D is on", relay.url, human)
    # Now subscribed on broker2: W's edits reach D by push.
    edit_reaches(w, d, "P", "pushed by broker2")
    # broker1 back on its port: D stays where it is (no going back while broker2 holds).
    first.start()
    opened = d.status()["streamsOpened"]
    edit_reaches(w, d, "P", "still on broker2")
    status = d.status()
    check_equal((status["broker"], status["streamsOpened"]), (relay.url, opened),
                "D stays on broker2 after broker1 is back")
    # broker2 dies too: D goes on to the next URL of its list, back to broker1, and keeps syncing there.
    killed = time.monotonic()
    check_equal(second.stop(signal.SIGKILL), -signal.SIGKILL, "broker2 killed with SIGKILL")
    wait_until("D moved on to broker1 (the list wraps around)",
               lambda: (lambda st: (st["connected"] and st["broker"] == first.url, st))(d.status()),
               expected={"connected": True, "broker": first.url})
    moved_ms = (time.monotonic() - killed) * 1000
    note(f"kill -9 of D's broker -> D connected to the other, seen by status (ms): {moved_ms:.0f} "
         "(backoff_base_ms 50; status polled every 50 ms)")
    print(f"FAILOVER_MS {moved_ms:.0f}", flush=True)
    d.cli("edit", "P", "--title", "from D on broker1 again")
    d.sync()
    check_equal(first.rows("SELECT title FROM page WHERE id = 'P'"), [{"title": "from D on broker1 again"}],
                "D's edit after the second failover is in the store")


def scenario_failover_start(s):
    """D's first URL is down at start (nothing listens there): it connects to the second, and syncs."""
    broker = s.broker()
    dead = f"http://127.0.0.1:{free_port()}"
    d = s.device("D", [dead, broker.url])
    status = d.status()
    check_equal((status["connected"], status["broker"]), (True, broker.url), "D connected to the second URL")
    with open(d.log_path, errors="replace") as log:
        text = log.read()
    check(any("cannot connect to the broker" in line and dead in line for line in text.splitlines()),
          "D's log names the first URL it could not reach", dead, text[-2000:])
    d.cli("create", "page", "--id", "S", "--title", "through the second URL")
    d.sync()
    check_equal(broker.rows("SELECT title FROM page WHERE id = 'S'"), [{"title": "through the second URL"}],
                "D's edit reached the broker of the second URL")


SCENARIOS = {
    "seed": scenario_seed,
    "row_limit": scenario_row_limit,
    "view_prune": scenario_view_prune,
    "inline": scenario_inline,
    "recent": scenario_recent,
    "reload": scenario_reload,
    "drain": scenario_drain,
    "revoke": scenario_revoke,
    "favorite": scenario_favorite,
    "push": scenario_push,
    "catchup": scenario_catchup,
    "offline_edits": scenario_offline_edits,
    "lww": scenario_lww,
    "rejected": scenario_rejected,
    "clock_ahead": scenario_clock_ahead,
    "kill9": scenario_kill9,
    "workspace": scenario_workspace,
    "tls_push": scenario_tls_push,
    "tls_wrong_host": scenario_tls_wrong_host,
    "tls_s_server": scenario_tls_s_server,
    "tls_nginx": scenario_tls_nginx,
    "tls_broker": scenario_tls_broker,
    "missing": scenario_missing,
    "append": scenario_append,
    "hostile_broker": scenario_hostile_broker,
    "text_merge": scenario_text_merge,
    "text_three": scenario_text_three,
    "upgrade": scenario_upgrade,
    "restored_device": scenario_restored_device,
    "cloned_devices": scenario_cloned_devices,
    "events": scenario_events,
    "watch": scenario_watch,
    "tokens": scenario_tokens,
    "failover": scenario_failover,
    "failover_start": scenario_failover_start,
    "tls_failover": scenario_tls_failover,
}


def main():
    if len(sys.argv) not in (3, 4) or (sys.argv[2] != "all" and sys.argv[2] not in SCENARIOS):
        print(f"usage: daemon_e2e.py BIN_DIR {{all|{'|'.join(SCENARIOS)}}} [TLS_DIR]", file=sys.stderr)
        sys.exit(64)
    for program in (BROKER_PROGRAM, DAEMON_PROGRAM, CLI_PROGRAM):
        if not os.access(program, os.X_OK):
            print(f"FAIL {program} is not an executable: build first", flush=True)
            sys.exit(1)
    names = list(SCENARIOS) if sys.argv[2] == "all" else [sys.argv[2]]
    failed = []
    for name in names:
        print(f"=== {name}: {SCENARIOS[name].__doc__.split(chr(10))[0]}", flush=True)
        started = time.monotonic()
        try:
            with Scenario(name) as scenario:  # prints the failure and the logs on the way out
                SCENARIOS[name](scenario)
        except Exception:
            failed.append(name)
        print(f"=== {name}: {'FAILED' if name in failed else 'passed'} in {time.monotonic() - started:.1f} s",
              flush=True)
    if failed:
        print(f"FAILED: {', '.join(failed)}", flush=True)
        sys.exit(1)
    print("ALL OK", flush=True)


if __name__ == "__main__":
    main()
