#!/usr/bin/env python3
"""What the bus's choice of channels costs (docs/architecture.md, "The bus"), measured against Debian's redis-server
started here on a free loopback port, and a pagesync-broker with [bus]:

1. Redis: SUBSCRIBE of N channels on one connection (as per-page channels would need when a device with N pages
   connects), in commands of 1,000 names (what the broker sends) and the memory Redis holds for them.
2. The broker: CPU per bus message it receives and does not need (a page of a workspace its devices may see but
   that none follows: the price of per-workspace channels), against one it needs (a followed page: a changed frame
   to one device).

Usage: scripts/bus-channels.py BROKER_BINARY [MESSAGES]. Prints a small table; needs Python websockets."""
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import websockets

BROKER = sys.argv[1]
MESSAGES = int(sys.argv[2]) if len(sys.argv) > 2 else 50_000
TOKEN = "alice-token-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp(*parts):
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in (x.encode() for x in parts))


def command(port, *parts):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(resp(*parts))
        return s.recv(1 << 20)


def used_memory(port):
    info = command(port, "INFO", "memory").decode()
    return int(next(line.split(":")[1] for line in info.splitlines() if line.startswith("used_memory:")))


def subscribe_cost(port, count):
    """Seconds until Redis confirmed `count` channels subscribed in commands of 1,000, and the bytes it holds."""
    before = used_memory(port)
    with socket.create_connection(("127.0.0.1", port)) as s:
        names = [f"pagesync:ws:page-{i:08d}-0000-0000-0000-000000000000" for i in range(count)]
        started = time.perf_counter()
        for start in range(0, count, 1000):
            s.sendall(resp("SUBSCRIBE", *names[start:start + 1000]))
        expected = f":{count}\r\n".encode()
        tail = b""
        while not tail.endswith(expected):
            tail = (tail + s.recv(1 << 20))[-64:]
        elapsed = time.perf_counter() - started
        held = used_memory(port) - before
    return elapsed, held


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric(base, name):
    with urllib.request.urlopen(base + "/metrics") as response:
        for line in response.read().decode().splitlines():
            if line.startswith("pagesync_broker_" + name + " "):
                return float(line.split()[1])
    return 0.0


async def broker_cost(port, directory):
    config = os.path.join(directory, "broker.toml")
    with open(config, "w") as f:
        f.write(f"""
[server]
listen = "127.0.0.1:0"
[store]
path = "{directory}/broker.sqlite"
synchronous = "normal"
[[auth.tokens]]
token = "{TOKEN}"
user = "alice"
workspaces = ["w1"]
[bus]
url = "redis://127.0.0.1:{port}"
""")
    log = os.path.join(directory, "broker.log")
    broker = subprocess.Popen([BROKER, "--config", config], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        base = None
        while base is None:
            time.sleep(0.05)
            for line in open(log):
                if "broker.address=" in line:
                    base = "http://" + line.split("broker.address=")[1].split()[0]
                    epoch = line.split("broker.epoch=")[1].split()[0]
        while metric(base, "bus_connected") != 1:
            time.sleep(0.05)
        results = {}
        async with websockets.connect(base.replace("http", "ws") + "/v1/stream",
                                      additional_headers={"Authorization": "Bearer " + TOKEN}) as device:
            await device.send(json.dumps({"op": "subscribe", "pages": ["followed"]}))
            await device.recv()
            while b":1\r\n" not in command(port, "PUBSUB", "NUMSUB", "pagesync:ws:w1"):
                time.sleep(0.05)
            for label, page in (("unneeded (a page nobody follows)", "other"), ("needed (a followed page)", "followed")):
                received = metric(base, "bus_received_messages_total")
                refused = metric(base, "bus_refused_messages_total")
                payloads = [f"pagesync-bus/1 changed x {epoch} {n} 1:0 w1 {page}={n}" for n in range(1, MESSAGES + 1)]
                cpu = cpu_seconds(broker.pid)
                started = time.perf_counter()
                with socket.create_connection(("127.0.0.1", port)) as s:
                    s.sendall(b"".join(resp("PUBLISH", "pagesync:ws:w1", p) for p in payloads))
                    while metric(base, "bus_received_messages_total") < received + MESSAGES:
                        await asyncio.sleep(0.02)
                elapsed = time.perf_counter() - started
                used = cpu_seconds(broker.pid) - cpu
                if metric(base, "bus_refused_messages_total") != refused:
                    sys.exit("the broker refused the measured messages")
                # What the device got meanwhile (coalesced: fewer frames than messages).
                frames = 0
                try:
                    while True:
                        await asyncio.wait_for(device.recv(), 0.2)
                        frames += 1
                except asyncio.TimeoutError:
                    pass
                results[label] = (used / MESSAGES * 1e6, MESSAGES / elapsed, frames)
        return results
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait()


def main():
    directory = tempfile.mkdtemp(prefix="pagesync-bus-bench-")
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", directory], stdout=subprocess.DEVNULL)
    try:
        while True:
            try:
                if command(port, "PING") == b"+PONG\r\n":
                    break
            except OSError:
                time.sleep(0.05)
        for count in (1_000, 10_000, 100_000):
            elapsed, held = subscribe_cost(port, count)
            print(f"SUBSCRIBE {count:>7} channels: {elapsed * 1000:8.1f} ms, redis holds {held / count:6.0f} B/channel")
        for label, (micros, rate, frames) in asyncio.run(broker_cost(port, directory)).items():
            print(f"broker, bus message {label}: {micros:5.1f} us CPU each, {rate:8.0f}/s received, "
                  f"{frames} frames to the device")
    finally:
        redis.kill()
        redis.wait()


if __name__ == "__main__":
    main()
