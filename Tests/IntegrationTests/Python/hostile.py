"""The hostile-client suite (issue #16): attacks by real client processes on a real broker, each measured and held
to a bound. For every attack the suite starts a broker of its own (port 0, the [limits] below) and lets it settle;
then, while the attack runs, it samples the broker's memory (VmRSS every 10 ms and VmHWM from /proc/PID/status,
the peak reset through /proc/PID/clear_refs first) and open sockets (/proc/PID/fd), and a probe process (from
an address of its own, on a keep-alive connection) times `GET /metrics` every 5 ms: the broker's loop latency.
An attack fails when

- the broker's RSS grows past the attack's bound (derived from the limits and the number of attackers, and
  explained at the attack), or is still past it once the attackers left;
- it holds more sockets than the limits allow;
- the probe waited longer than LATENCY_BOUND_MS for an answer, or got an error (the writer probe of the attacks
  that load the SQLite writer: WRITER_LATENCY_BOUND_MS for another workspace's one-mutation batch);
- what the attack is about did not hold (a close code, a 408, a whole answer, a rejected cycle, ...);
- the broker died, or does not answer /healthz at the end.

Usage: hostile.py BIN_DIR [--short] [--only NAME,...] [--omit-limits KEY,...] [--omit-new-limits]

BIN_DIR holds the built pagesync-broker (`make hostile` passes the debug build's). --short (CI's run): shorter runs
where the length changes nothing an attack shows. --omit-limits leaves these keys out of the broker's
configuration, for a broker that predates them: the attacks then wait as long as the key's default (DEFAULTS),
build what showed the defect where such a broker has no bound at all, and keep the bounds and checks of the
configured values; --omit-new-limits omits every key issue #16 adds. Prints "OK ..." or "FAIL ..." per check, a
table of the figures (markdown, for docs/threat-model.md) with one line per attack of what happened, and "ALL OK"
when every attack held. Every attack runs even when an earlier one failed. PAGESYNC_E2E_KEEP=1 keeps the brokers'
directories.
"""
import http.client
import json
import os
import random
import resource
import select
import socket
import struct
import subprocess
import sys
import threading
import time

import daemon_e2e as e2e
from bad_inputs import ws_frame
from checks import metric_reader

MiB = 1 << 20
KiB = 1 << 10

# The broker's [limits] for the suite: small, so that each attack reaches the bound it tests within seconds.
LIMITS = {
    "connections": 1200,
    "connections_per_peer": 300,
    "frame_bytes": 256 * KiB,
    "pending_bytes_per_connection": 64 * KiB,
    # Issue #16's keys.
    "queued_bytes_per_connection": 256 * KiB,
    "frame_seconds": 2,
    "request_seconds": 2,
    "tree_depth": 100,
    "page_bytes": 4 * MiB,
    "answer_bytes": 1 * MiB,
}
NEW_LIMITS = ["queued_bytes_per_connection", "frame_seconds", "request_seconds", "tree_depth", "page_bytes",
              "answer_bytes"]
# What a broker does without the key: the key's documented default, or None where a broker that predates the key
# has no bound at all (the attack then uses the size that showed the defect).
DEFAULTS = {
    "queued_bytes_per_connection": 4 * MiB,
    "frame_seconds": 30,
    "request_seconds": 10,
    "tree_depth": None,
    "page_bytes": None,
    "answer_bytes": None,
}

# The probe's worst wait for one `GET /metrics`. Generous for a debug build on a shared 2-core machine (a healthy
# broker answers in well under 10 ms; a busy machine's scheduler adds tens), and far below the seconds a loop
# blocked by an attack costs every client.
LATENCY_BOUND_MS = 500
# The worst wait of another workspace's one-mutation batch while an attack keeps the writer busy: a commit, its
# queueing behind one batch of the attacker's (bounded by tree_depth and the work per batch), and the same
# scheduling noise.
WRITER_LATENCY_BOUND_MS = 1000
# RSS a broker may add in any attack beyond what its bound counts: SQLite's page caches, malloc's arenas and
# fragmentation, thread stacks, the debug build's larger frames. Measured idle brokers vary by a few MB.
SLACK_MB = 24
# How long the suite waits, once the attackers left, for RSS to fall back to within 4 MB of the baseline. Then it
# must at least be within the attack's bound: malloc may keep some freed memory, never the attack's.
SETTLE_SECONDS = 4.0

ALICE = e2e.USERS["alice"][0]  # workspace w1
CAROL = e2e.USERS["carol"][0]  # workspace w2
# Attackers connect from these loopback addresses (the whole of 127.0.0.0/8 is loopback on Linux), so that the
# per-address limit applies to them and not to the probe.
ATTACKERS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
PROBE_ADDRESS = "127.0.0.9"


# ---------------------------------------------------------------------------------------------------------------
# Options

class Options:
    """The command line after BIN_DIR."""

    def __init__(self, argv):
        self.short = False
        self.only = None
        self.omitted = set()
        rest = list(argv)
        while rest:
            arg = rest.pop(0)
            if arg == "--short":
                self.short = True
            elif arg == "--only":
                self.only = rest.pop(0).split(",")
            elif arg == "--omit-limits":
                self.omitted |= {key for key in rest.pop(0).split(",") if key}
            elif arg == "--omit-new-limits":
                self.omitted |= set(NEW_LIMITS)
            else:
                raise SystemExit(f"hostile.py: unknown argument {arg!r}")
        unknown = self.omitted - set(LIMITS)
        if unknown:
            raise SystemExit(f"hostile.py: --omit-limits names keys the suite does not set: {sorted(unknown)}")

    def limit(self, key):
        """The value in force: the configured one, or, for an omitted key, what the broker does without it."""
        return DEFAULTS.get(key) if key in self.omitted else LIMITS[key]


OPTIONS = None


# ---------------------------------------------------------------------------------------------------------------
# The broker under attack, its memory, and the probes

class Broker(e2e.Broker):
    """daemon_e2e's broker (port 0, tokens of alice and carol), with the suite's [limits]."""

    def write_config(self):
        super().write_config()
        with open(self.config, "a") as config:
            config.write("[limits]\n" + "".join(f"{key} = {value}\n" for key, value in LIMITS.items()
                                                if key not in OPTIONS.omitted))


class Memory:
    """The broker's memory and sockets, from /proc/PID. `start()` resets the peak and samples VmRSS every
    10 ms (and the open sockets every 50 ms) in a thread until `stop()`, which returns the higher of the RSS
    samples and VmHWM."""

    def __init__(self, pid):
        self.pid = pid
        self.samples_peak = 0
        self.fds_peak = 0
        self._stop = threading.Event()
        self._thread = None

    def status(self):
        fields = {}
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    fields[name] = int(value.split()[0])
        return fields

    def rss_kb(self):
        return self.status()["VmRSS"]

    def fds(self):
        """Open sockets: connections, accepted or lingering, and listeners (files, pipes and the like are not
        counted: a reader thread's SQLite connection is not a client's)."""
        directory = f"/proc/{self.pid}/fd"
        count = 0
        for name in os.listdir(directory):
            try:
                count += os.readlink(f"{directory}/{name}").startswith("socket:")
            except OSError:
                pass  # closed meanwhile
        return count

    def start(self):
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as clear:
                clear.write("5")  # resets VmHWM to the current RSS
        except OSError:
            pass
        self.samples_peak = self.rss_kb()
        self.fds_peak = self.fds()
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        count = 0
        while not self._stop.wait(0.01):
            count += 1
            try:
                self.samples_peak = max(self.samples_peak, self.rss_kb())
                if count % 5 == 0:
                    self.fds_peak = max(self.fds_peak, self.fds())
            except (OSError, KeyError):
                return  # the broker is gone: the attack's checks say so

    def stop(self):
        self._stop.set()
        self._thread.join()
        try:
            return max(self.samples_peak, self.status()["VmHWM"])
        except (OSError, KeyError):
            return self.samples_peak

    def settle(self, seconds=SETTLE_SECONDS, target_kb=None):
        """Waits up to `seconds` for RSS to stop falling (or to reach `target_kb`); returns it."""
        deadline = time.monotonic() + seconds
        last = self.rss_kb()
        while time.monotonic() < deadline:
            time.sleep(0.25)
            now = self.rss_kb()
            if (target_kb is not None and now <= target_kb) or (target_kb is None and now >= last):
                return now
            last = now
        return last


class Probe:
    """A process of its own (this script with --probe) timing requests to the broker on one keep-alive
    connection from PROBE_ADDRESS: `GET /metrics` every 5 ms (the loop), or with `writer=True` a one-mutation
    batch of carol's (workspace w2) every 50 ms (the SQLite writer). A process, so that the attackers' Python
    threads cannot delay its clock."""

    def __init__(self, port, writer=False):
        mode = "writer" if writer else "loop"
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), e2e.BIN, "--probe", mode, str(port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            raise e2e.CheckFailed(f"the {mode} probe did not start: {line!r}")

    def stop(self):
        """Stops it; returns its figures: count, max_ms, p99_ms, p50_ms, errors (the first few)."""
        self.process.stdin.close()
        output = self.process.stdout.read()
        self.process.wait(timeout=120)
        return json.loads(output)


def probe_main(mode, port):
    """The probe process: requests until stdin closes, then one JSON line of figures."""
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    latencies, errors = [], []
    connection = None
    page_time = [0]

    def connect():
        return http.client.HTTPConnection("127.0.0.1", port, timeout=120, source_address=(PROBE_ADDRESS, 0))

    def batch_body(mutation_id):
        page_time[0] += 1
        return json.dumps({"client": "carol-probe", "workspace": "w2", "mutations": [
            {"id": mutation_id, "page": "probe", "time": f"{1700000000000 + page_time[0]}:0", "type": "set_title",
             "title": f"t{mutation_id}"}]})

    def request(connection, mutation_id):
        if mode == "loop":
            connection.request("GET", "/metrics")
        else:
            connection.request("POST", "/v1/batch", body=batch_body(mutation_id),
                               headers={"Authorization": "Bearer " + CAROL, "Content-Type": "application/json"})
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"{response.status} {body[:200]!r}")

    interval = 0.005 if mode == "loop" else 0.05
    mutation_id = 1
    connection = connect()
    if mode == "writer":
        connection.request("POST", "/v1/batch", body=json.dumps({
            "client": "carol-probe", "workspace": "w2", "mutations": [
                {"id": 1, "page": "probe", "time": "1700000000000:0", "type": "create_page", "parent": None,
                 "title": "probe"}]}), headers={"Authorization": "Bearer " + CAROL})
        answer = connection.getresponse()
        answer.read()
        mutation_id = 2
    request(connection, mutation_id)  # a first answer before "ready": connected and served
    mutation_id += 1
    print("ready", flush=True)
    while not stop.is_set():
        started = time.monotonic()
        try:
            request(connection, mutation_id)
            latencies.append(time.monotonic() - started)
        except Exception as error:  # noqa: BLE001 - every failure is a figure
            latencies.append(time.monotonic() - started)
            if len(errors) < 5:
                errors.append(f"{type(error).__name__}: {error}")
            else:
                errors.append("…")
            connection.close()
            try:
                connection = connect()
            except OSError:
                time.sleep(0.1)
        mutation_id += 1
        time.sleep(max(0.0, interval - (time.monotonic() - started)))
    latencies.sort()

    def percentile(p):
        return round(1000 * latencies[min(len(latencies) - 1, int(p * len(latencies)))], 1) if latencies else None

    print(json.dumps({"count": len(latencies), "max_ms": percentile(1.0), "p99_ms": percentile(0.99),
                      "p50_ms": percentile(0.5), "errors": len(errors), "first_errors": errors[:6]}), flush=True)


# ---------------------------------------------------------------------------------------------------------------
# Raw clients

def connect_from(port, source, rcvbuf=None, timeout=10):
    """A TCP connection to the broker from `source`; `rcvbuf`: SO_RCVBUF set before connecting (a small
    receive window, as a client that reads slowly or not at all)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def open_stream(port, source, rcvbuf=None, token=ALICE):
    """A raw WebSocket on /v1/stream after its 101; returns (socket, bytes read past the handshake)."""
    sock = connect_from(port, source, rcvbuf)
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    sock.sendall((f"GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\nAuthorization: Bearer {token}\r\n\r\n")
                 .encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed during the upgrade: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(f"upgrade refused: {head[:200]!r}")
    return sock, rest


def parse_frames(data):
    """The complete server frames at the start of `data`: ([(opcode, payload)], rest)."""
    frames = []
    while len(data) >= 2:
        opcode, size, offset = data[0] & 0x0F, data[1] & 0x7F, 2
        if size == 126:
            if len(data) < 4:
                break
            size, offset = struct.unpack(">H", data[2:4])[0], 4
        elif size == 127:
            if len(data) < 10:
                break
            size, offset = struct.unpack(">Q", data[2:10])[0], 10
        if len(data) < offset + size:
            break
        frames.append((opcode, data[offset:offset + size]))
        data = data[offset + size:]
    return frames, data


def close_code(payload):
    return struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None


def read_http_answer(sock, read_seconds=None, deadline=60):
    """One HTTP answer from `sock`: (status, headers, body bytes received, bytes the Content-Length promised).
    With `read_seconds`, read the body at a rate that takes about that long (at least 256 KB/s): a slow reader."""
    sock.settimeout(deadline)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return 0, {}, data, None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {line.partition(":")[0].strip().lower(): line.partition(":")[2].strip() for line in lines[1:]}
    expected = int(headers.get("content-length", "-1"))
    body = bytearray(body)
    started = time.monotonic()
    bytes_per_second = None if read_seconds is None else max(256 * KiB, expected // read_seconds)
    chunk_size = 65536 if bytes_per_second is None else max(4096, bytes_per_second // 20)
    while len(body) < expected:
        try:
            chunk = sock.recv(min(chunk_size, expected - len(body)))
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        body += chunk
        if bytes_per_second:
            ahead = len(body) / bytes_per_second - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    return status, headers, bytes(body), expected


def http_get(port, path, token=ALICE, source="127.0.0.1", close=False, read_seconds=None, rcvbuf=None):
    sock = connect_from(port, source, rcvbuf=rcvbuf, timeout=60)
    try:
        headers = f"Authorization: Bearer {token}\r\n" + ("Connection: close\r\n" if close else "")
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
        return read_http_answer(sock, read_seconds)
    finally:
        sock.close()


def call(port, method, path, body=None, token=ALICE, timeout=600):
    """A JSON call on a connection of its own: (status, decoded body, body size)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    connection.request(method, path, body=data,
                       headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    try:
        decoded = json.loads(payload or b"null")
    except ValueError:
        decoded = None
    return response.status, decoded, len(payload)


class Client:
    """One device's mutation ids, for batches."""

    def __init__(self, port, name, workspace="w1", token=ALICE):
        self.port, self.name, self.workspace, self.token = port, name, workspace, token
        self.next_id = 1
        self.clock = 1700000000000

    def mutation(self, page, type_, **fields):
        self.clock += 1
        mutation = {"id": self.next_id, "page": page, "time": f"{self.clock}:0", "type": type_, **fields}
        self.next_id += 1
        return mutation

    def push(self, mutations, timeout=600):
        """Pushes `mutations` and returns their results. A broker whose work budget per batch ran out answers the
        first ones only: the rest are sent again, as a device does, until every one is answered."""
        results = []
        for _ in range(len(mutations)):
            rest = mutations[len(results):]
            status, answer, _ = call(self.port, "POST", "/v1/batch", {
                "client": self.name, "workspace": self.workspace, "mutations": rest}, self.token, timeout)
            if status != 200 or not answer["results"]:
                raise e2e.CheckFailed(f"a batch of {len(rest)} was answered {status}: {str(answer)[:300]}")
            results += answer["results"]
            if len(results) >= len(mutations):
                break
        return results


def reasons(results):
    counts = {}
    for result in results:
        key = result["status"] if result["status"] != "rejected" else result["reason"]["name"]
        counts[key] = counts.get(key, 0) + 1
    return counts


def run_threads(targets):
    threads = [threading.Thread(target=target, daemon=True) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# ---------------------------------------------------------------------------------------------------------------
# An attack's run: the broker, the measurements, the checks, the row of figures

class Run:
    """What one attack gets: the broker's port, `expect` for its checks, `note` for the table's last column,
    `bound_mb` to set the RSS bound it derived."""

    def __init__(self, name, scenario, broker):
        self.name = name
        self.scenario = scenario
        self.broker = broker
        self.port = broker.port
        self.memory = Memory(broker.process.pid)
        self.metric = metric_reader(broker.url)
        self.failures = []
        self.notes = []
        self.bound_mb = None
        self.fds_bound = None
        self.attackers = ""
        self.writer_probe = False

    def expect(self, condition, what, found=None):
        if condition:
            print(f"OK {self.name}: {what}", flush=True)
        else:
            detail = "" if found is None else f" (found: {found})"
            print(f"FAIL {self.name}: {what}{detail}", flush=True)
            self.failures.append(what + detail)
        return condition

    def note(self, text):
        print(f"   {text}", flush=True)
        self.notes.append(text)


FIGURES = []


def run_attack(name, attack):
    """Starts a broker, lets `attack.setup` prepare it, measures `attack.run`, checks the bounds; records a row."""
    print(f"=== {name}: {attack.__doc__.strip().splitlines()[0]}", flush=True)
    started = time.monotonic()
    row = {"attack": name, "failed": True}
    try:
        with e2e.Scenario("hostile-" + name) as scenario:
            broker = Broker(scenario)
            broker.start()
            run = Run(name, scenario, broker)
            setup = getattr(attack, "setup", None)
            state = setup(run) if setup else None
            baseline = run.memory.settle(2.0)
            fds_before = run.memory.fds()
            probes = [Probe(run.port)]
            if getattr(attack, "writer_probe", False):
                probes.append(Probe(run.port, writer=True))
            run.memory.start()
            attack_started = time.monotonic()
            try:
                attack.run(run, state)
            finally:
                seconds = time.monotonic() - attack_started
                peak = run.memory.stop()
                figures = [probe.stop() for probe in probes]
            alive = broker.process.poll() is None
            run.expect(alive, "the broker is alive", f"exited {broker.process.returncode}")
            bound_kb = None if run.bound_mb is None else int((run.bound_mb + SLACK_MB) * 1024)
            after = run.memory.settle(SETTLE_SECONDS, target_kb=baseline + 4096) if alive else None
            loop = figures[0]
            row.update(baseline=baseline, peak=peak, after=after, bound=bound_kb, loop=loop,
                       fds=run.memory.fds_peak - fds_before,
                       writer=figures[1] if len(figures) > 1 else None, seconds=seconds,
                       attackers=run.attackers, notes=run.notes)
            if bound_kb is not None:
                run.expect(peak - baseline <= bound_kb,
                           f"RSS grew at most {bound_kb / 1024:.0f} MB during the attack "
                           f"({run.bound_mb:.0f} MB of limits + {SLACK_MB} MB slack)",
                           f"+{(peak - baseline) / 1024:.0f} MB")
                if alive:
                    run.expect(after - baseline <= bound_kb, "and is within it once the attackers left",
                               f"+{(after - baseline) / 1024:.0f} MB")
            # Descriptors: every connection holds one, counted or not (lingering, refused). At most [limits]
            # connections of them (the attack's own tighter bound, if it sets one), beyond the broker's own.
            fds_bound = run.fds_bound if run.fds_bound is not None else LIMITS["connections"]
            run.expect(run.memory.fds_peak - fds_before <= fds_bound,
                       f"the broker held at most {fds_bound} sockets more than before",
                       f"{run.memory.fds_peak - fds_before} more")
            run.expect(loop["errors"] == 0, "the loop probe got every answer",
                       f"{loop['errors']} errors: {loop['first_errors']}")
            run.expect(loop["max_ms"] is not None and loop["max_ms"] <= LATENCY_BOUND_MS,
                       f"the loop probe waited at most {LATENCY_BOUND_MS} ms for an answer",
                       f"{loop['max_ms']} ms (p99 {loop['p99_ms']} ms, {loop['count']} requests)")
            if len(figures) > 1:
                writer = figures[1]
                run.expect(writer["errors"] == 0 and writer["max_ms"] is not None
                           and writer["max_ms"] <= WRITER_LATENCY_BOUND_MS,
                           f"another workspace's batches waited at most {WRITER_LATENCY_BOUND_MS} ms",
                           f"{writer['max_ms']} ms (p99 {writer['p99_ms']} ms, {writer['count']} batches, "
                           f"{writer['errors']} errors {writer['first_errors']})")
            if alive:
                healthy = False
                try:
                    healthy = call(run.port, "GET", "/healthz", timeout=30)[0] == 200
                except OSError as error:
                    run.note(f"/healthz: {error}")
                run.expect(healthy, "the broker answers /healthz at the end")
                # Every attacker's socket is given back (a graceful close lingers up to 2 s).
                fds_after = run.memory.fds()
                deadline = time.monotonic() + 4
                while fds_after > fds_before + 2 and time.monotonic() < deadline:
                    time.sleep(0.2)
                    fds_after = run.memory.fds()
                run.expect(fds_after <= fds_before + 2, "the attackers' sockets are closed",
                           f"{fds_before} before, {fds_after} after")
            row["failed"] = bool(run.failures)
            row["failures"] = run.failures
            if run.failures:
                with open(broker.log_path, errors="replace") as log:
                    lines = log.readlines()
                print(f"----- the broker's log (last 20 of {len(lines)} lines) -----\n{''.join(lines[-20:])}-----",
                      flush=True)
    except Exception:  # noqa: BLE001 - Scenario printed it, with the broker's log
        row["failures"] = ["the harness raised"]
    print(f"=== {name}: {'FAILED' if row['failed'] else 'held'} in {time.monotonic() - started:.1f} s",
          flush=True)
    FIGURES.append(row)


# ---------------------------------------------------------------------------------------------------------------
# The attacks. Each is a class: a docstring (its first line names it in the output), `setup(run)` (optional, not
# measured: what the attack needs in the store), `run(run, state)` (measured), and its bound in a comment.

def flood(sock, chunk, seconds, stats, key):
    """Sends `chunk` again and again on `sock` for `seconds`, never reading. Stops early once the broker has not
    taken a byte for 1 s (it stopped reading this connection, as a bound on queued answers does, or is too busy
    to read it) or closed it.
    Adds to stats[key]: bytes sent, and whether the broker stopped reading or closed."""
    sock.setblocking(False)
    deadline = time.monotonic() + seconds
    sent, offset, stalled_since, outcome = 0, 0, None, "kept reading"
    while time.monotonic() < deadline:
        _, writable, _ = select.select([], [sock], [], 0.1)
        now = time.monotonic()
        if not writable:
            stalled_since = stalled_since or now
            if now - stalled_since >= 1.0:
                outcome = "took no byte for 1 s"
                break
            continue
        stalled_since = None
        try:
            count = sock.send(chunk[offset:] if offset else chunk)
        except BlockingIOError:
            continue
        except OSError:
            outcome = "closed"
            break
        sent += count
        offset = (offset + count) % len(chunk)
    with LOCK:
        entry = stats.setdefault(key, {"sent": 0, "outcomes": {}})
        entry["sent"] += sent
        entry["outcomes"][outcome] = entry["outcomes"].get(outcome, 0) + 1


LOCK = threading.Lock()


def unread_bytes(port):
    """Bytes the kernel holds for the broker, received from the attackers' addresses and not read yet (the
    receive queues of the broker's side of their connections, from /proc/net/tcp)."""
    local = f"0100007F:{port:04X}"
    sources = {"".join(reversed([f"{int(part):02X}" for part in address.split(".")])) for address in ATTACKERS}
    total = 0
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[1] == local and fields[2].split(":")[0] in sources:
                total += int(fields[4].split(":")[1], 16)
    return total


def hold_until_read(run, longest=20.0):
    """Keeps the attackers' connections open until the broker read what the kernel buffered for it, or stopped
    reading (nothing read for 1 s), at most `longest` seconds: the buffered bytes are the attack too, and a broker
    that reads them slowly must not be let off by a close. Returns the seconds held and the bytes left unread."""
    started = time.monotonic()
    last, still_since = unread_bytes(run.port), time.monotonic()
    while last > 0 and time.monotonic() - started < longest:
        time.sleep(0.1)
        now = unread_bytes(run.port)
        if now < last:
            still_since = time.monotonic()
        elif time.monotonic() - still_since >= 1.0:
            break
        last = now
    return time.monotonic() - started, last


def describe_floods(run, stats):
    for key, entry in sorted(stats.items()):
        outcomes = ", ".join(f"{count} {what}" for what, count in sorted(entry["outcomes"].items()))
        run.note(f"{key}: {entry['sent'] / MiB:.1f} MB sent; the broker {outcomes}")


class FloodStreamUnread:
    """Device streams that send small frames and never read what they are answered."""

    # 8 streams from one address, each with a 4 KB receive buffer, sending for 5 s (3 with --short): empty pings
    # (a pong each), empty binary frames and malformed JSON (an error each), unknown ops, and subscribes (a
    # `subscribed` each): every frame costs the broker an answer it cannot write. Bound: each stream may hold
    # queued_bytes_per_connection of answers plus one message being read (frame_bytes), twice over for buffer
    # growth and allocator overhead: 8 x 2 x (256 KiB + 256 KiB) = 8 MB with the suite's limits.
    STREAMS = 8

    def run(self, run, state):
        seconds = 3 if OPTIONS.short else 5
        kinds = {
            "ping": ws_frame(9, b""),
            "empty binary": ws_frame(2, b""),
            "malformed JSON": ws_frame(1, b"{"),
            "unknown op": ws_frame(1, b'{"op":"dance"}'),
            "subscribe": ws_frame(1, b'{"op":"subscribe","pages":["p1","p2","p3"]}'),
        }
        plan = ["ping", "ping", "empty binary", "empty binary", "malformed JSON", "malformed JSON", "unknown op",
                "subscribe"]
        per_stream = LIMITS["queued_bytes_per_connection"] + LIMITS["frame_bytes"]
        run.bound_mb = self.STREAMS * 2 * per_stream / MiB
        run.attackers = f"{self.STREAMS} streams, 4 KB receive buffers, {seconds} s"
        streams = [open_stream(run.port, ATTACKERS[0], rcvbuf=4096)[0] for _ in plan]
        stats = {}
        run_threads([lambda sock=sock, kind=kind: flood(sock, kinds[kind] * (16384 // len(kinds[kind])),
                                                        seconds, stats, kind)
                     for sock, kind in zip(streams, plan)])
        held, unread = hold_until_read(run)
        run.note(f"held open {held:.1f} s more: the broker left {unread / MiB:.1f} MB unread")
        describe_floods(run, stats)
        for sock in streams:
            sock.close()


class FloodStreamReading:
    """Device streams that send small frames as fast as they can and read every answer."""

    # 4 streams from one address send empty pings and empty binary frames (a pong, an error each) for 5 s (3 with
    # --short) while a thread each reads everything. Nothing need pile up (the answers are read), but every frame
    # costs the loop, and the other clients must still be served within LATENCY_BOUND_MS: the loop must not spend
    # long on one connection's reads at a time. Bound: 4 x 2 x (queued_bytes_per_connection + frame_bytes) = 4 MB.
    STREAMS = 4

    def run(self, run, state):
        seconds = 3 if OPTIONS.short else 5
        run.bound_mb = self.STREAMS * 2 * (LIMITS["queued_bytes_per_connection"] + LIMITS["frame_bytes"]) / MiB
        run.attackers = f"{self.STREAMS} streams, reading, {seconds} s"
        plan = ["ping", "empty binary"] * (self.STREAMS // 2)
        kinds = {"ping": ws_frame(9, b""), "empty binary": ws_frame(2, b"")}
        streams = [open_stream(run.port, ATTACKERS[0])[0] for _ in plan]
        received = [0] * len(streams)

        def drain(index, sock):
            while True:
                try:
                    readable, _, _ = select.select([sock], [], [], 0.5)
                    if readable:
                        chunk = sock.recv(262144)
                        if not chunk:
                            return
                        received[index] += len(chunk)
                except (OSError, ValueError):
                    return

        readers = [threading.Thread(target=drain, args=(i, sock), daemon=True) for i, sock in enumerate(streams)]
        for reader in readers:
            reader.start()
        stats = {}
        run_threads([lambda sock=sock, kind=kind: flood(sock, kinds[kind] * (16384 // len(kinds[kind])), seconds,
                                                        stats, kind)
                     for sock, kind in zip(streams, plan)])
        held, unread = hold_until_read(run)
        run.note(f"held open {held:.1f} s more: the broker left {unread / MiB:.1f} MB unread; "
                 f"{sum(received) / MiB:.1f} MB of answers read")
        describe_floods(run, stats)
        for sock in streams:
            sock.close()


class FloodHTTPUnread:
    """HTTP connections that pipeline requests and never read the answers."""

    # 8 connections from one address, 4 KB receive buffers, pipelining `GET /metrics` (about 10 KB of answer for
    # 40 bytes of request) for 5 s (3 with --short). Bound: each may hold queued_bytes_per_connection of answers,
    # plus the requests read ahead (16 pipelined, one 64 KiB read), twice over: 8 x 2 x (256 + 64) KiB = 5 MB.
    CONNECTIONS = 8

    def run(self, run, state):
        seconds = 3 if OPTIONS.short else 5
        per_connection = LIMITS["queued_bytes_per_connection"] + 64 * KiB
        run.bound_mb = self.CONNECTIONS * 2 * per_connection / MiB
        run.attackers = f"{self.CONNECTIONS} connections, 4 KB receive buffers, {seconds} s"
        request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
        socks = [connect_from(run.port, ATTACKERS[0], rcvbuf=4096) for _ in range(self.CONNECTIONS)]
        stats = {}
        run_threads([lambda sock=sock: flood(sock, request * 400, seconds, stats, "pipelined GET /metrics")
                     for sock in socks])
        held, unread = hold_until_read(run)
        run.note(f"held open {held:.1f} s more: the broker left {unread / MiB:.1f} MB unread")
        describe_floods(run, stats)
        for sock in socks:
            sock.close()


class TrickleFrames:
    """Device streams that send most of a frame, or a message's first fragments, then trickle one byte at a time."""

    # 24 streams: 16 send a text frame of frame_bytes - 16 bytes but for its last 200 bytes, then one byte every
    # 0.5 s (any byte counts as life: the ping timeout never fires); 8 send the first fragment of a text message
    # (FIN clear), then a one-byte continuation frame every 0.5 s (every frame completes, the message never
    # does). Each must be closed 1008 within frame_seconds (+ 1.5 s for the timer's granularity and a loaded
    # machine). Bound: 24 x 2 x frame_bytes (a message held while it arrives, buffer growth) = 12 MB.
    FRAMES, FRAGMENTS = 16, 8

    def run(self, run, state):
        limit = OPTIONS.limit("frame_seconds")
        streams = self.FRAMES + self.FRAGMENTS
        run.bound_mb = streams * 2 * LIMITS["frame_bytes"] / MiB
        run.attackers = f"{self.FRAMES} half-sent frames, {self.FRAGMENTS} unfinished messages, 1 byte per 0.5 s"
        size = LIMITS["frame_bytes"] - 16
        socks = []
        for index in range(streams):
            sock, leftover = open_stream(run.port, ATTACKERS[index % 2])
            if index < self.FRAMES:
                frame = ws_frame(1, b"a" * size)
                sock.sendall(frame[:-200])
                rest = frame[-200:]
            else:
                sock.sendall(ws_frame(1, b'{"op":"subscribe","pages":["a', fin=False))
                rest = None
            socks.append({"sock": sock, "rest": rest, "data": leftover, "closed": None, "code": None,
                          "opened": time.monotonic()})
        deadline = time.monotonic() + limit + 1.5
        while time.monotonic() < deadline and any(s["closed"] is None for s in socks):
            for s in socks:
                if s["closed"] is not None:
                    continue
                try:
                    if s["rest"] is not None:
                        s["sock"].sendall(s["rest"][:1])
                        s["rest"] = s["rest"][1:]
                    else:
                        s["sock"].sendall(ws_frame(0, b"a", fin=False))
                except OSError:
                    pass
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                readable, _, _ = select.select([s["sock"] for s in socks if s["closed"] is None], [], [],
                                               max(0, end - time.monotonic()))
                for s in socks:
                    if s["sock"] not in readable:
                        continue
                    try:
                        chunk = s["sock"].recv(65536)
                    except OSError:
                        chunk = b""
                    s["data"] += chunk
                    frames, s["data"] = parse_frames(s["data"])
                    for opcode, payload in frames:
                        if opcode == 8 and s["code"] is None:
                            s["code"] = close_code(payload)
                            s["reason"] = payload[2:].decode("utf-8", "replace")
                    if not chunk or s["code"] is not None:
                        s["closed"] = time.monotonic() - s["opened"]
        closed = [s for s in socks if s["closed"] is not None]
        codes = sorted({(s["code"], s.get("reason", "")) for s in closed}, key=repr)
        run.note(f"{len(closed)} of {streams} closed within {limit + 1.5:.1f} s"
                 + (f", the last after {max(s['closed'] for s in closed):.1f} s, with {codes}" if closed else ""))
        run.expect(len(closed) == streams and all(s["code"] == 1008 for s in closed),
                   f"every trickling stream is closed 1008 within frame_seconds ({limit} s) + 1.5 s",
                   f"{len(closed)} of {streams} closed, codes {codes}")
        for s in socks:
            s["sock"].close()


class TrickleRequests:
    """HTTP requests whose head or body arrives one byte at a time (slowloris)."""

    # 24 connections: 12 trickle a request head, 12 a body (Content-Length 100,000, the first 1,000 bytes at once),
    # one byte every 0.3 s. Each must get 408 within request_seconds (+ 1.5 s) of its first byte. Bound: what
    # the connections hold (a head of at most 32 KiB, a body of at most body_bytes while it arrives: here 1 KB):
    # 24 x 2 x 64 KiB (a read buffer each) = 3 MB.
    HEADS, BODIES = 12, 12

    def run(self, run, state):
        limit = OPTIONS.limit("request_seconds")
        count = self.HEADS + self.BODIES
        run.bound_mb = count * 2 * 64 * KiB / MiB
        run.attackers = f"{self.HEADS} heads, {self.BODIES} bodies, 1 byte per 0.3 s"
        conns = []
        for index in range(count):
            sock = connect_from(run.port, ATTACKERS[index % 2])
            if index < self.HEADS:
                rest = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"
            else:
                head = (f"POST /v1/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALICE}\r\n"
                        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n").encode()
                sock.sendall(head + b" " * 1000)
                rest = b" " * 99000
            conns.append({"sock": sock, "rest": rest, "data": b"", "closed": None, "opened": time.monotonic()})
        deadline = time.monotonic() + limit + 1.5
        while time.monotonic() < deadline and any(c["closed"] is None for c in conns):
            for c in conns:
                if c["closed"] is None and c["rest"]:
                    try:
                        c["sock"].sendall(c["rest"][:1])
                        c["rest"] = c["rest"][1:]
                    except OSError:
                        pass
            end = time.monotonic() + 0.3
            while time.monotonic() < end:
                readable, _, _ = select.select([c["sock"] for c in conns if c["closed"] is None], [], [],
                                               max(0, end - time.monotonic()))
                for c in conns:
                    if c["sock"] in readable:
                        try:
                            chunk = c["sock"].recv(65536)
                        except OSError:
                            chunk = b""
                        c["data"] += chunk
                        if not chunk:
                            c["closed"] = time.monotonic() - c["opened"]
        answered = [c for c in conns if c["data"].startswith(b"HTTP/1.1 408")]
        closed = [c for c in conns if c["closed"] is not None]
        statuses = sorted({c["data"][:12].decode("latin-1") for c in closed})
        run.note(f"{len(answered)} of {count} answered 408 and closed within {limit + 1.5:.1f} s"
                 + (f", the last after {max(c['closed'] for c in closed):.1f} s" if closed else ""))
        run.expect(len(answered) == count and len(closed) == count,
                   f"every trickled request gets 408 and a close within request_seconds ({limit} s) + 1.5 s",
                   f"{len(answered)} 408s, {len(closed)} closed, answers {statuses}")
        for c in conns:
            c["sock"].close()


class Pipelining:
    """Clients that keep a connection busy with pipelined requests, reading every answer."""

    # 2 connections sending `GET /metrics` for request_seconds x 1.5 + 1.5 s, reading every answer, each write
    # ending inside a request (so the broker is always in the middle of one): one in lock step (the rest of a
    # request and the first half of the next, then wait for the answer), one in bulk (20 requests a write, the
    # last one byte short, up to 60 unanswered). A busy connection is not a slow one: no answer may be a 408 and
    # no connection closed, every request answered 200. Bound: 2 x 2 x queued_bytes_per_connection = 1 MB.
    CONNECTIONS = 2

    def run(self, run, state):
        limit = OPTIONS.limit("request_seconds")
        seconds = limit * 1.5 + 1.5
        run.bound_mb = self.CONNECTIONS * 2 * LIMITS["queued_bytes_per_connection"] / MiB
        run.attackers = f"{self.CONNECTIONS} connections, {seconds:.1f} s"
        results = []

        def client(lock_step):
            sock = connect_from(run.port, ATTACKERS[0], timeout=30)
            request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
            state = {"sent": 0, "answered": 0, "statuses": {}, "closed": None, "done": False}
            started = time.monotonic()

            def reader():
                data = b""
                try:
                    while not (state["done"] and state["answered"] >= state["sent"]):
                        chunk = sock.recv(262144)
                        if not chunk:
                            state["closed"] = f"{time.monotonic() - started:.1f} s"
                            return
                        data += chunk
                        while True:
                            head_end = data.find(b"\r\n\r\n")
                            if head_end < 0:
                                break
                            head = data[:head_end].decode("latin-1")
                            length = 0
                            for line in head.split("\r\n")[1:]:
                                if line.lower().startswith("content-length:"):
                                    length = int(line.split(":")[1])
                            if len(data) < head_end + 4 + length:
                                break
                            status = head.split(" ")[1]
                            state["statuses"][status] = state["statuses"].get(status, 0) + 1
                            state["answered"] += 1
                            data = data[head_end + 4 + length:]
                except (OSError, ValueError) as error:
                    state["closed"] = f"{type(error).__name__} after {time.monotonic() - started:.1f} s"

            thread = threading.Thread(target=reader, daemon=True)
            thread.start()
            carry = b""
            try:
                while time.monotonic() - started < seconds and state["closed"] is None:
                    # The last request sent is incomplete (its rest goes with the next write): it is not owed.
                    if state["sent"] - 1 - state["answered"] > (0 if lock_step else 60):
                        time.sleep(0.0005)
                        continue
                    data = carry + (request if lock_step else request * 20)
                    cut = len(data) - (len(request) // 2 if lock_step else 1)
                    sock.sendall(data[:cut])
                    carry = data[cut:]
                    state["sent"] += 1 if lock_step else 20
                sock.sendall(carry)
            except OSError as error:
                state["closed"] = state["closed"] or f"{type(error).__name__} while sending"
            state["done"] = True
            thread.join(timeout=30)
            sock.close()
            results.append(state)

        run_threads([lambda: client(True), lambda: client(False)])
        for state in results:
            run.note(f"{state['sent']} sent, {state['answered']} answered {state['statuses']}"
                     + (f", closed by the broker after {state['closed']}" if state["closed"] else ""))
        run.expect(all(state["closed"] is None and state["statuses"].keys() == {"200"}
                       and state["answered"] == state["sent"] for state in results),
                   f"every pipelined request answered 200 over {seconds:.1f} s, no 408, no close",
                   [(state["statuses"], state["closed"]) for state in results])


class DeepTree:
    """A page tree as deep as a device can make it: a cycle through it, and batches of moves in it."""

    # Setup: a chain of pages, each the child of the one before: tree_depth + 50 of them (10,050 against a broker
    # without tree_depth: past the 10,000 steps where its cycle check gave up). The creates past tree_depth must
    # be rejected. Measured: a batch of MOVES `move_page` in the chain (the deepest page moved under one of its
    # ancestors, again and again: each move walks the chain) while another workspace pushes one-mutation batches
    # (the writer probe); then moving the chain's root under its deepest page must be rejected `invalid_parent`.
    # Bound: the store's work is on the writer thread, its answers small: the slack alone.
    writer_probe = True

    def setup(self, run):
        depth = OPTIONS.limit("tree_depth")
        length = 10_050 if depth is None else depth + 50
        client = Client(run.port, "alice-chain")
        outcomes, deepest = {}, None
        chain = [f"c{i}" for i in range(length)]
        started = time.monotonic()
        for start in range(0, length, 1000):
            mutations = [client.mutation(page, "create_page", parent=chain[i - 1] if i else None, title=page)
                         for i, page in zip(range(start, start + 1000), chain[start:start + 1000])]
            results = client.push(mutations)
            for mutation, result in zip(mutations, results):
                key = result["status"] if result["status"] != "rejected" else result["reason"]["name"]
                outcomes[key] = outcomes.get(key, 0) + 1
                if result["status"] == "applied":
                    deepest = mutation["page"]
        applied = outcomes.get("applied", 0)
        run.note(f"a chain of {length} creates: {outcomes} in {time.monotonic() - started:.1f} s")
        run.expect(applied <= LIMITS["tree_depth"] + 1,
                   f"the chain stops at tree_depth ({LIMITS['tree_depth']}): the creates past it are rejected",
                   f"{applied} applied")
        return {"client": client, "chain": chain[:applied], "deepest": deepest}

    def run(self, run, state):
        moves = 300 if OPTIONS.short or OPTIONS.limit("tree_depth") is None else 1000
        run.bound_mb = 0
        chain, client = state["chain"], state["client"]
        run.attackers = f"{moves} moves in a {len(chain)}-page chain, then a cycle"
        leaf = chain[-1]
        mutations = [client.mutation(leaf, "move_page", parent=chain[-2 - (i % 3) - (i % 2) * 4])
                     for i in range(moves)]
        started = time.monotonic()
        results = client.push(mutations)
        run.note(f"the batch of {moves} moves: {reasons(results)} in {time.monotonic() - started:.1f} s")
        result = client.push([client.mutation(chain[0], "move_page", parent=leaf)])[0]
        found = result["status"] + ("" if result["status"] != "rejected" else " " + result["reason"]["name"])
        run.note(f"moving the root under its deepest page: {found}")
        # invalid_parent is the cycle's reason (docs/protocol.md); a broker may see first that the move is too deep.
        run.expect(result["status"] == "rejected",
                   "moving the chain's root under its deepest page is rejected (a cycle)", found)


def random_text(length, rng):
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ."
    return "".join(rng.choice(alphabet) for _ in range(length))


class HugePages:
    """Pages as big as a device can make them, read by several clients at once, slow readers among them."""

    # Setup: one page grown by blocks of 60,000 characters, 100 a batch, up to HUGE_MB (past page_bytes: the
    # blocks beyond it must be rejected `too_large`; against a broker without the bound, a page big enough to show
    # what an unbounded one costs), and 6 pages of 16 such blocks (about 1 MB each). Measured: 4
    # readers of the big page at once, 2 of them slow (their reading takes about 4 s: longer than the 2 s a
    # graceful close lingers) and asking `Connection: close` as urllib does; a fetch of the 6 pages; a
    # `GET /v1/sync` of everything. Every answer must arrive whole; fetch and sync answers must be paged at
    # answer_bytes (an answer may pass it by one page). Bound: a page's answer is at most ANSWER_FACTOR x
    # page_bytes (each block's text, its CRDT state in base64, JSON; measured 2.0), held twice (built, then
    # queued), for the 4 readers and the sync (whose answer may hold the big page): 5 x 2 x 2.5 x 4 MiB = 100 MB;
    # plus the fetch: 2 x (answer_bytes + one medium page) = 6 MB.
    ANSWER_FACTOR = 2.5
    BLOCK = 60_000
    HUGE_MB = 24
    writer_probe = False

    def setup(self, run):
        rng = random.Random(16)
        blocks = [random_text(self.BLOCK, rng) for _ in range(8)]
        client = Client(run.port, "alice-pages")
        client.push([client.mutation("huge", "create_page", parent=None, title="huge")])
        outcomes, added, started = {}, 0, time.monotonic()
        while added * self.BLOCK < self.HUGE_MB * MiB:
            mutations = [client.mutation("huge", "add_block", block=f"b{added + i}", blockType="text",
                                         text=blocks[(added + i) % len(blocks)][:-8] + f"{added + i:08d}",
                                         after=None, attributes={})
                         for i in range(100)]
            results = reasons(client.push(mutations))
            for key, count in results.items():
                outcomes[key] = outcomes.get(key, 0) + count
            added += 100
            if "too_large" in results:
                break
        applied = outcomes.get("applied", 0)
        run.note(f"the big page: {added} blocks of {self.BLOCK} characters sent, {outcomes}, "
                 f"{applied * self.BLOCK / MiB:.1f} MB of text, in {time.monotonic() - started:.1f} s")
        page_bytes = LIMITS["page_bytes"]
        run.expect("too_large" in outcomes and applied * self.BLOCK <= page_bytes,
                   f"blocks past page_bytes ({page_bytes / MiB:.0f} MiB) are rejected too_large",
                   f"{applied * self.BLOCK / MiB:.1f} MB applied, {outcomes}")
        for index in range(6):
            page = f"medium{index}"
            client.push([client.mutation(page, "create_page", parent=None, title=page)]
                        + [client.mutation(page, "add_block", block=f"m{index}-{i}", blockType="text",
                                           text=blocks[i % len(blocks)], after=None, attributes={})
                           for i in range(16)])
        return {"medium": [f"medium{index}" for index in range(6)]}

    def run(self, run, state):
        page_bytes = LIMITS["page_bytes"]
        answer_bytes = LIMITS["answer_bytes"]
        readers = 4
        one_medium = http_get(run.port, "/v1/pages/medium0")[3]
        run.bound_mb = ((readers + 1) * 2 * self.ANSWER_FACTOR * page_bytes + 2 * (answer_bytes + one_medium)) / MiB
        run.attackers = f"{readers} readers of the big page (2 slow, Connection: close), a fetch, a sync"
        answers = {}

        def guarded(key, action):
            """Runs `action`; an exception is that client's answer (a broker too busy to answer in 60 s...)."""
            def run_action():
                try:
                    action()
                except Exception as error:  # noqa: BLE001 - reported as the client's outcome
                    answers[key] = f"{type(error).__name__}: {error}"
            return run_action

        def read_page(index):
            slow = index >= 2
            if slow:
                answers[f"reader {index}"] = http_get(run.port, "/v1/pages/huge", close=True, read_seconds=4,
                                                      rcvbuf=65536, source=ATTACKERS[1])
            else:
                answers[f"reader {index}"] = http_get(run.port, "/v1/pages/huge", source=ATTACKERS[0])

        def fetch():
            cursor, pages, sizes = None, [], []
            while True:
                status, answer, size = call(run.port, "POST", "/v1/fetch", {
                    "pages": {page: 0 for page in state["medium"]}, "limit": 1000, "cursor": cursor})
                sizes.append(size)
                if status != 200:
                    answers["fetch"] = (status, sizes, pages)
                    return
                pages += [delta["id"] for delta in answer["deltas"]]
                cursor = answer.get("nextCursor")
                if not cursor:
                    answers["fetch"] = (status, sizes, pages)
                    return

        def sync():
            # The next answer: from `nextOffset` when the answer says (one cut at answer_bytes), else the next page.
            where, sizes, pages = "page=0", [], []
            for index in range(1, 100):
                status, answer, size = call(run.port, "GET", f"/v1/sync?mutationsSince=0&limit=1000&{where}")
                sizes.append(size)
                if status != 200:
                    break
                pages += [page["id"] for page in answer["changes"]]
                if not answer.get("hasMore"):
                    break
                where = f"offset={answer['nextOffset']}" if "nextOffset" in answer else f"page={index}"
            answers["sync"] = (status, sizes, pages)

        run_threads([guarded(f"reader {i}", lambda i=i: read_page(i)) for i in range(readers)]
                    + [guarded("fetch", fetch), guarded("sync", sync)])
        for index in range(readers):
            what = "slow, Connection: close" if index >= 2 else "fast"
            if isinstance(answers[f"reader {index}"], str):
                run.note(f"reader {index} ({what}): {answers[f'reader {index}']}")
                run.expect(False, f"reader {index} ({what}) gets the whole page", answers[f"reader {index}"])
                continue
            status, headers, body, expected = answers[f"reader {index}"]
            run.note(f"reader {index} ({what}): {status}, {len(body) / MiB:.1f} of {expected / MiB:.1f} MB")
            run.expect(status == 200 and len(body) == expected,
                       f"reader {index} ({what}) gets the whole page", f"{status}, {len(body)} of {expected} bytes")
            if index == 0 and LIMITS["page_bytes"] and expected > 0:
                run.expect(expected <= self.ANSWER_FACTOR * page_bytes,
                           f"the big page's answer is at most {self.ANSWER_FACTOR} x page_bytes",
                           f"{expected / MiB:.1f} MB")
        # An answer may pass answer_bytes by one page: a medium one for the fetch, the big one for the sync.
        largest = {"fetch": one_medium,
                   "sync": max(one_medium, answers["reader 0"][3] if isinstance(answers["reader 0"], tuple) else 0)}
        for what in ("fetch", "sync"):
            if isinstance(answers[what], str):
                run.note(f"{what}: {answers[what]}")
                run.expect(False, f"{what} answers are paged at answer_bytes", answers[what])
                continue
            status, sizes, pages = answers[what]
            run.note(f"{what}: {status}, {len(sizes)} answers of at most {max(sizes) / MiB:.1f} MB, "
                     f"{len(pages)} pages")
            run.expect(status == 200 and max(sizes) <= answer_bytes + largest[what]
                       and set(state["medium"]) <= set(pages),
                       f"{what} answers are paged at answer_bytes ({answer_bytes / MiB:.0f} MiB, + one page) "
                       "and bring every page", f"{status}, sizes {sizes}, pages {sorted(set(pages))}")


class ManyConnections:
    """As many connections as the limits allow: streams subscribed to many ids, and idle connections."""

    # From 4 addresses, connections_per_peer (300) each less a margin: 200 streams each subscribed to 200 page ids
    # that do not exist (a device may subscribe to pages before they exist), and 60 connections that never send a
    # byte. Bound: each connection may cost CONNECTION_KB (its objects, buffers, a read buffer), each subscription
    # SUBSCRIPTION_BYTES: 1,040 x 64 KiB + 160,000 x 256 B = 65 + 39 MB.
    PER_ADDRESS_STREAMS, PER_ADDRESS_IDLE, SUBSCRIPTIONS = 200, 60, 200
    CONNECTION_KB = 64
    SUBSCRIPTION_BYTES = 256

    def run(self, run, state):
        addresses = ATTACKERS[:2] if OPTIONS.short else ATTACKERS
        streams = len(addresses) * self.PER_ADDRESS_STREAMS
        idle = len(addresses) * self.PER_ADDRESS_IDLE
        subscriptions = streams * self.SUBSCRIPTIONS
        run.bound_mb = ((streams + idle) * self.CONNECTION_KB * KiB + subscriptions * self.SUBSCRIPTION_BYTES) / MiB
        run.attackers = f"{streams} streams x {self.SUBSCRIPTIONS} subscriptions, {idle} idle connections"
        socks, failures = [], []

        def open_many(address, index):
            for n in range(self.PER_ADDRESS_IDLE):
                try:
                    with LOCK:
                        socks.append(connect_from(run.port, address))
                except OSError as error:
                    failures.append(f"idle: {error}")
            for n in range(self.PER_ADDRESS_STREAMS):
                try:
                    sock, _ = open_stream(run.port, address)
                    pages = [f"nope-{index}-{n}-{i}" for i in range(self.SUBSCRIPTIONS)]
                    sock.sendall(ws_frame(1, json.dumps({"op": "subscribe", "pages": pages}).encode()))
                    with LOCK:
                        socks.append(sock)
                except OSError as error:
                    failures.append(f"stream: {error}")

        started = time.monotonic()
        run_threads([lambda a=a, i=i: open_many(a, i) for i, a in enumerate(addresses)])
        # Every subscription in place.
        deadline = time.monotonic() + 30
        while run.metric("subscriptions") < subscriptions and time.monotonic() < deadline:
            time.sleep(0.1)
        held = run.metric("subscriptions")
        run.note(f"{len(socks)} connections open, {held:.0f} subscriptions, in {time.monotonic() - started:.1f} s"
                 + (f"; {len(failures)} failed: {failures[:2]}" if failures else ""))
        run.expect(not failures and held >= subscriptions,
                   f"{streams + idle} connections open and {subscriptions} subscriptions held",
                   f"{len(failures)} failed, {held:.0f} subscriptions")
        for sock in socks:
            sock.close()


class RefusedConnections:
    """Connections past the per-address limit, opened and closed as fast as a client can."""

    # One address holds its whole quota (connections_per_peer idle connections); then 4 threads from it connect
    # and close at once, as fast as they can, for 3 s: each new connection is refused (503) at accept. A refused
    # connection must not hold a descriptor beyond the limits (under systemd the broker has LimitNOFILE=16384;
    # once they are gone, accept fails for every client): the broker's descriptors stay within [limits]
    # connections. Bound: refusals are small: the slack alone.
    THREADS = 4

    def run(self, run, state):
        seconds = 3
        run.bound_mb = 0
        run.fds_bound = LIMITS["connections"]
        run.attackers = f"{LIMITS['connections_per_peer']} held, {self.THREADS} threads connecting, {seconds} s"
        held = [connect_from(run.port, ATTACKERS[0]) for _ in range(LIMITS["connections_per_peer"])]
        until = time.monotonic() + seconds
        count = [0]

        def churn():
            while time.monotonic() < until:
                try:
                    connect_from(run.port, ATTACKERS[0]).close()
                    with LOCK:
                        count[0] += 1
                except OSError:
                    pass

        run_threads([churn] * self.THREADS)
        run.note(f"{count[0]} connections opened and closed past the quota; the broker's sockets peaked at "
                 f"{run.memory.fds_peak}")
        for sock in held:
            sock.close()


class ReconnectChurn:
    """Devices that connect, subscribe and go, again and again, leaving in every way a connection can end."""

    # 8 threads from 2 addresses for 5 rounds of 3 s (3 of 2 s with --short): open a stream, subscribe to 20 pages,
    # then end it by a close frame, a reset (SO_LINGER 0), a plain close, or mid-upgrade (half a request). After
    # each round the streams, subscriptions and connections gauges must be back to 0; over the rounds RSS must not
    # grow (a leak of a few hundred bytes per connection would show: thousands of connections a round). The
    # attackers hold at most 8 connections at a time. (Some may still be refused 503 while the broker counts
    # connections they closed: counted in the notes, not a failure; the descriptors stay within [limits]
    # connections as in every attack.) Bound for the peak: 8 connections at a time, the slack alone; for the
    # leak: LEAK_MB from the first round to the last.
    THREADS = 8
    LEAK_MB = 4

    def run(self, run, state):
        rounds = 3 if OPTIONS.short else 5
        seconds = 2.0 if OPTIONS.short else 3.0
        run.bound_mb = 0
        run.attackers = f"{self.THREADS} threads x {rounds} rounds of {seconds:.0f} s"
        ends = ["close frame", "reset", "plain close", "mid-upgrade"]
        totals = {end: 0 for end in ends}
        failures, refused = [], [0]
        after_round = []

        def churn(index, until):
            n = 0
            address = ATTACKERS[index % 2]
            while time.monotonic() < until:
                end = ends[(index + n) % len(ends)]
                n += 1
                try:
                    if end == "mid-upgrade":
                        sock = connect_from(run.port, address)
                        sock.sendall(b"GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n")
                        sock.close()
                    else:
                        sock, _ = open_stream(run.port, address)
                        pages = [f"churn-{index}-{i}" for i in range(20)]
                        sock.sendall(ws_frame(1, json.dumps({"op": "subscribe", "pages": pages}).encode()))
                        if end == "close frame":
                            sock.sendall(ws_frame(8, struct.pack(">H", 1000)))
                        elif end == "reset":
                            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        sock.close()
                    with LOCK:
                        totals[end] += 1
                except OSError as error:
                    with LOCK:
                        if "HTTP/1.1 503" in str(error):
                            refused[0] += 1
                        elif len(failures) < 3:
                            failures.append(f"{end}: {error}")

        for round_ in range(rounds):
            until = time.monotonic() + seconds
            run_threads([lambda i=i: churn(i, until) for i in range(self.THREADS)])
            deadline = time.monotonic() + 5
            gauges = None
            while time.monotonic() < deadline:
                gauges = (run.metric("device_streams"), run.metric("subscriptions"), run.metric("connections"))
                # Left: the probe's connection and the one asking.
                if gauges[0] == 0 and gauges[1] == 0 and gauges[2] <= 2:
                    break
                time.sleep(0.1)
            run.expect(gauges[0] == 0 and gauges[1] == 0 and gauges[2] <= 2,
                       f"round {round_ + 1}: streams, subscriptions and connections back to 0",
                       f"streams {gauges[0]}, subscriptions {gauges[1]}, connections {gauges[2]}")
            after_round.append(run.memory.settle(1.5))
        run.note(f"{sum(totals.values())} connections: {totals}; {refused[0]} upgrades refused 503"
                 + (f"; failures {failures}" if failures else ""))
        run.note("RSS after each round: " + ", ".join(f"{kb / 1024:.1f}" for kb in after_round) + " MB")
        growth = (after_round[-1] - after_round[0]) / 1024
        run.expect(growth <= self.LEAK_MB, f"RSS grew at most {self.LEAK_MB} MB from the first round to the last",
                   f"+{growth:.1f} MB")
        run.expect(not failures, "every connection of the churn was served", failures)


ATTACKS = {
    "flood_stream_unread": FloodStreamUnread(),
    "flood_stream_reading": FloodStreamReading(),
    "flood_http_unread": FloodHTTPUnread(),
    "trickle_frames": TrickleFrames(),
    "trickle_requests": TrickleRequests(),
    "pipelining": Pipelining(),
    "deep_tree": DeepTree(),
    "huge_pages": HugePages(),
    "many_connections": ManyConnections(),
    "refused_connections": RefusedConnections(),
    "reconnect_churn": ReconnectChurn(),
}


# ---------------------------------------------------------------------------------------------------------------
# The table

def mb(kb):
    return "–" if kb is None else f"{kb / 1024:.0f}"


def print_table():
    limits = ", ".join(f"{key} = {value}" for key, value in LIMITS.items() if key not in OPTIONS.omitted)
    omitted = f"; left out (the broker predates them): {', '.join(sorted(OPTIONS.omitted))}" if OPTIONS.omitted else ""
    print(f"\nFigures ([limits] {limits}{omitted}; RSS in MB, the probe's waits in ms):\n", flush=True)
    print("| attack | attackers | RSS before | peak growth | growth bound | after | sockets | loop max (p99) | "
          "writer max | held |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in FIGURES:
        if "baseline" not in row:
            print(f"| {row['attack']} | | | | | | | | | **no**: the harness raised |")
            continue
        loop, writer = row["loop"], row["writer"]
        writer_max = "–" if writer is None else f"{writer['max_ms']:.0f}"
        print(f"| {row['attack']} | {row['attackers']} | {mb(row['baseline'])} | "
              f"+{(row['peak'] - row['baseline']) / 1024:.0f} | {mb(row['bound'])} | {mb(row['after'])} | "
              f"+{row['fds']} | "
              f"{loop['max_ms']:.0f} ({loop['p99_ms']:.0f}) | "
              f"{writer_max} | "
              f"{'yes' if not row['failed'] else '**no**'} |")
    print()
    for row in FIGURES:
        for note in row.get("notes", []):
            print(f"- {row['attack']}: {note}")
        for failure in row.get("failures", []):
            print(f"- {row['attack']}: **failed**: {failure}")
    print(flush=True)


def main():
    global OPTIONS
    if len(sys.argv) >= 3 and sys.argv[2] == "--probe":
        probe_main(sys.argv[3], int(sys.argv[4]))
        return
    if len(sys.argv) < 2:
        print(__doc__.split("\n\n")[2], file=sys.stderr)
        sys.exit(64)
    OPTIONS = Options(sys.argv[2:])
    if not os.access(e2e.BROKER_PROGRAM, os.X_OK):
        print(f"FAIL {e2e.BROKER_PROGRAM} is not an executable: build first", flush=True)
        sys.exit(1)
    # Thousands of sockets in this process (many_connections); the broker inherits the limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 16384) if hard != resource.RLIM_INFINITY else 16384, hard))
    names = OPTIONS.only or list(ATTACKS)
    unknown = [name for name in names if name not in ATTACKS]
    if unknown:
        raise SystemExit(f"hostile.py: unknown attack(s) {unknown}; known: {', '.join(ATTACKS)}")
    started = time.monotonic()
    for name in names:
        run_attack(name, ATTACKS[name])
    print_table()
    failed = [row["attack"] for row in FIGURES if row["failed"]]
    print(f"{len(names)} attacks in {time.monotonic() - started:.0f} s", flush=True)
    if failed:
        print(f"FAILED: {', '.join(failed)}", flush=True)
        sys.exit(1)
    print("ALL OK", flush=True)


if __name__ == "__main__":
    main()
