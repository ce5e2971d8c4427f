"""Two pagesync-broker processes and one redis-server (Debian's, started here on a free loopback port): a device on
one broker hears by push of edits committed through the other; Redis killed (-9) and started again on the same port
mid-run loses no notification (each broker's devices catch up from the store once its bus is live again); while
the bus is down a catch-up is answered from the store, not from a channel index that missed the other broker's
commits; garbage published on a bus channel is counted and logged, never a crash.

The two brokers share one SQLite file (WAL, busy timeout) until the PostgreSQL store lands: the store both brokers
must share is what the bus assumes, and this test will run on PostgreSQL too.

Usage: bus_e2e.py BIN_DIR. Never skips: without redis-server the test fails (.ci/run installs it).
Prints OK lines and ALL OK at the end."""
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import websockets

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, fail, json_caller, metric_reader  # noqa: E402

BIN = sys.argv[1]
ALICE = "alice-token-0123456789"
WAIT = 15


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_command(port, *parts):
    """One RESP command to redis at `port`; the raw reply bytes."""
    data = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in (x.encode() for x in parts))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        return s.recv(65536)


def wait_until(what, probe, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if probe():
                check(True, what)
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            fail(what + f" (not within {timeout} s)")
        time.sleep(0.05)


class Cluster:
    def __init__(self, directory):
        self.directory = directory
        self.redis_port = free_port()
        self.redis = None
        self.brokers = []
        self.logs = []

    def start_redis(self):
        if shutil.which("redis-server") is None:
            fail("redis-server is not installed (apt-get install redis-server): this test does not skip")
        log = open(os.path.join(self.directory, "redis.log"), "ab")
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.directory],
            stdout=log, stderr=subprocess.STDOUT)
        wait_until(f"redis-server answers PING on port {self.redis_port}",
                   lambda: redis_command(self.redis_port, "PING") == b"+PONG\r\n")

    def kill_redis(self):
        self.redis.send_signal(signal.SIGKILL)
        self.redis.wait()

    def start_broker(self, name):
        config = os.path.join(self.directory, name + ".toml")
        with open(config, "w") as f:
            f.write(f"""
[server]
listen = "127.0.0.1:0"
[store]
path = "{self.directory}/shared.sqlite"
[[auth.tokens]]
token = "{ALICE}"
user = "alice"
workspaces = ["w1"]
[bus]
url = "redis://127.0.0.1:{self.redis_port}"
backoff_base_ms = 50
backoff_cap_ms = 400
""")
        log_path = os.path.join(self.directory, name + ".log")
        process = subprocess.Popen(
            [os.path.join(BIN, "pagesync-broker"), "--config", config],
            stdout=open(log_path, "ab"), stderr=subprocess.STDOUT)
        self.logs.append(log_path)
        address = []

        def listening():
            with open(log_path) as f:
                for line in f:
                    if "broker.address=" in line:
                        address.append(line.split("broker.address=")[1].split()[0])
                        return True
            if process.poll() is not None:
                fail(f"{name} exited: {open(log_path).read()}")
            return False

        wait_until(f"{name} listens", listening)
        base = "http://" + address[0]
        self.brokers.append(process)
        return base

    def dump_logs(self):
        for path in self.logs:
            print(f"--- {path}\n" + open(path).read(), flush=True)

    def stop(self):
        statuses = []
        for process in self.brokers:
            process.send_signal(signal.SIGTERM)
        for process in self.brokers:
            try:
                statuses.append(process.wait(timeout=20))
            except subprocess.TimeoutExpired:
                process.kill()
                statuses.append(None)
        if self.redis and self.redis.poll() is None:
            self.redis.kill()
            self.redis.wait()
        return statuses


async def changed_to(ws, page, at_least, what, timeout=WAIT):
    """Waits for a `changed` frame that brings `page` to `at_least` or later."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            fail(what + f" (no changed frame with {page} >= {at_least} within {timeout} s)")
        try:
            message = json.loads(await asyncio.wait_for(ws.recv(), left))
        except asyncio.TimeoutError:
            continue
        if message.get("op") == "changed" and message["pages"].get(page, 0) >= at_least:
            check(True, what)
            return


NEXT_ID = {}
LAST_STAMP = [0]


def edit(call, page, title, create=False, at=None):
    """One batch (client writer-PAGE, ids from 1) through `call`'s broker, stamped `at` (ms; by default now, or after
    the last stamp, so that each edit wins over the one before); the page's new lastUpdatedTime."""
    NEXT_ID[page] = NEXT_ID.get(page, 0) + 1
    now = at or max(int(time.time() * 1000), LAST_STAMP[0] + 1)
    LAST_STAMP[0] = now
    mutation = {"id": NEXT_ID[page], "page": page, "time": f"{now}:0", "type": "create_page" if create else "set_title",
                "title": title}
    status, outcome = call("POST", "/v1/batch", {"client": "writer-" + page, "workspace": "w1", "mutations": [mutation]})
    if status != 200 or outcome["results"][0]["status"] != "applied":
        fail(f"edit of {page}: {status} {outcome}")
    return outcome["pages"][page]


async def scenario(cluster):
    cluster.start_redis()
    base1 = cluster.start_broker("broker1")
    base2 = cluster.start_broker("broker2")
    call1, call2 = json_caller(base1, ALICE), json_caller(base2, ALICE)
    metric1, metric2 = metric_reader(base1), metric_reader(base2)
    wait_until("both brokers' buses are live", lambda: metric1("bus_connected") == 1 and metric2("bus_connected") == 1)

    auth = {"Authorization": "Bearer " + ALICE}
    async with websockets.connect(base1.replace("http", "ws") + "/v1/stream", additional_headers=auth) as device1, \
            websockets.connect(base2.replace("http", "ws") + "/v1/stream", additional_headers=auth) as device2:
        for device in (device1, device2):
            await device.send(json.dumps({"op": "subscribe", "pages": ["home", "notes"]}))
            answer = json.loads(await asyncio.wait_for(device.recv(), WAIT))
            check(answer["op"] == "subscribed" and answer["total"] == 2, "a device subscribed to home and notes")
        # Its first stream subscribes the broker to w1's channel: wait for Redis to count both brokers there.
        wait_until("both brokers subscribed w1's channel",
                   lambda: b":2\r\n" in redis_command(cluster.redis_port, "PUBSUB", "NUMSUB", "pagesync:ws:w1"))

        # Across brokers, both ways.
        home = edit(call2, "home", "Home", create=True)
        await changed_to(device1, "home", home, "an edit committed through broker 2 reached broker 1's device by push")
        await changed_to(device2, "home", home, "and broker 2's own device")
        notes = edit(call1, "notes", "Notes", create=True)
        await changed_to(device2, "notes", notes, "an edit committed through broker 1 reached broker 2's device")
        await changed_to(device1, "notes", notes, "and broker 1's own device")
        # Clocks: an edit stamped an hour ahead (within clock_ahead_seconds) through broker 2 moves broker 1's
        # Pagesync-Clock too, so a device on either broker stamps its next edits after it.
        ahead = int(time.time() * 1000) + 3_600_000
        home = edit(call2, "home", "Home from a clock ahead", at=ahead)
        await changed_to(device1, "home", home, "the edit stamped ahead reached broker 1's device")
        request = urllib.request.Request(base1 + "/v1/catchup", data=b'{"pages": {}}', method="POST",
                                         headers={**auth, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            clock = int(response.headers["Pagesync-Clock"].split(":")[0])
        check(clock >= ahead, f"broker 1's Pagesync-Clock merged broker 2's ({clock} >= {ahead})")
        check(metric2("bus_published_messages_total") >= 1 and metric1("bus_received_messages_total") >= 1,
              "the bus metrics count what was published and received")

        # Redis dies. Edits go on through both brokers (the store is shared); the bus cannot carry them.
        cluster.kill_redis()
        wait_until("both brokers see the bus down",
                   lambda: metric1("bus_connected") == 0 and metric2("bus_connected") == 0)
        home_gap = edit(call2, "home", "Home during the gap")
        notes_gap = edit(call1, "notes", "Notes during the gap")
        # While its bus is down, broker 1's channel index still says home is at `home`: a catch-up must come from
        # the store, which has broker 2's commit.
        status, answer = call1("POST", "/v1/catchup", {"pages": {"home": home}})
        check(status == 200 and answer["changed"].get("home") == home_gap,
              f"with the bus down, broker 1 answers a catch-up from the store ({answer})")

        # Redis comes back on the same port: each broker resubscribes and its devices catch up.
        cluster.start_redis()
        await changed_to(device1, "home", home_gap,
                         "after Redis restarted, broker 1's device got broker 2's edit made during the gap")
        await changed_to(device2, "notes", notes_gap,
                         "after Redis restarted, broker 2's device got broker 1's edit made during the gap")
        wait_until("both buses are live again with a reconnect counted",
                   lambda: all(m("bus_connected") == 1 and m("bus_reconnects_total") >= 1 for m in (metric1, metric2)))
        wait_until("both brokers subscribed w1's channel again",
                   lambda: b":2\r\n" in redis_command(cluster.redis_port, "PUBSUB", "NUMSUB", "pagesync:ws:w1"))

        # Garbage and another version on the bus: counted, logged, nothing else.
        refused = metric1("bus_refused_messages_total")
        redis_command(cluster.redis_port, "PUBLISH", "pagesync:ws:w1", "\x00\xffgarbage")
        redis_command(cluster.redis_port, "PUBLISH", "pagesync:ws:w1", "pagesync-bus/9 changed b e 1 w1 home=1")
        wait_until("bad bus messages are counted as refused",
                   lambda: metric1("bus_refused_messages_total") >= refused + 2)
        # And the bus still works after them.
        home_after = edit(call2, "home", "Home after")
        await changed_to(device1, "home", home_after, "the bus still carries edits after refusing bad messages")

    with urllib.request.urlopen(base1 + "/status", timeout=10) as response:
        page = response.read().decode()
    check('data-metric="pagesync_broker_bus_connected" data-value="1"' in page and 'data-key="bus.url"' in page,
          "the status page shows the bus live and its configuration")

    statuses = cluster.stop()
    check(statuses == [0, 0], f"both brokers drained and exited 0 on SIGTERM ({statuses})")
    logs = "".join(open(p).read() for p in cluster.logs)
    check("bus: message refused" in logs, "the refused bus message was logged")
    check("bus: lost redis" in logs, "the lost bus was logged")


def main():
    directory = tempfile.mkdtemp(prefix="pagesync-bus-")
    cluster = Cluster(directory)
    try:
        asyncio.run(scenario(cluster))
    except SystemExit:
        cluster.stop()
        cluster.dump_logs()
        raise
    except BaseException:
        cluster.stop()
        cluster.dump_logs()
        raise
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print("ALL OK", flush=True)


if __name__ == "__main__":
    main()
