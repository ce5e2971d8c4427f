#!/usr/bin/env python3
"""Device-to-device delivery latency of a text splice against a title edit, on real processes over loopback.

Usage: scripts/text-latency.py BIN_DIR [EDITS]

A broker and two daemons (A and B) share page P with block b1, offline on both. EDITS times (default 400),
alternating, device A makes a title edit or a one-character splice through its local API (as an app would); the
time runs from the request until B's local store shows the edit (read with SQLite every 0.2 ms). Both kinds take
the same path (push, the broker's commit, the notification, B's fetch of the delta, B's merge), so the difference
is what the text CRDT costs end to end. Prints one JSON object: p50/p90/p99 (ms) per kind and their ratios.
Build in release for figures that mean anything: `swift build -c release`, then BIN_DIR = .build/release.
"""
import json
import os
import socket
import sqlite3
import statistics
import sys
import time

if len(sys.argv) < 2:
    print(__doc__, file=sys.stderr)
    sys.exit(64)
BIN_DIR = os.path.abspath(sys.argv[1])
EDITS = int(sys.argv[2]) if len(sys.argv) > 2 else 400
sys.argv = [sys.argv[0], BIN_DIR]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "IntegrationTests",
                                "Python"))
import daemon_e2e as e2e  # noqa: E402  (its BIN comes from sys.argv)


def call(path, method, target, body):
    """One request to a daemon's local API on its Unix socket; the answer's status."""
    data = json.dumps(body).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        s.sendall(f"{method} {target} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main():
    with e2e.Scenario("text-latency") as s:
        broker = s.broker()
        a = s.device("A", broker.url)
        b = s.device("B", broker.url)
        a.cli("create", "page", "--id", "P", "--title", "start")
        a.cli("offline", "add", "P")
        a.cli("block", "add", "P", "--id", "b1", "--text", "The quick fox jumps.")
        a.sync()
        b.cli("offline", "add", "P")
        b.sync()
        store = sqlite3.connect(f"file:{os.path.join(b.dir, 'pagesyncd.sqlite')}?mode=ro", uri=True)
        shown = lambda: store.execute(
            "SELECT title, (SELECT length(text) FROM local_block WHERE id = 'b1') FROM local_page WHERE id = 'P'"
        ).fetchone()
        deadline = time.monotonic() + 10
        while shown() != ("start", 20) and time.monotonic() < deadline:
            time.sleep(0.01)
        times = {"title": [], "splice": []}
        length = 20
        for i in range(EDITS):
            kind = "title" if i % 2 == 0 else "splice"
            started = time.monotonic()
            if kind == "title":
                status = call(a.socket, "PATCH", "/v1/pages/P", {"title": f"t{i}"})
                expected = lambda row, i=i: row[0] == f"t{i}"
            else:
                status = call(a.socket, "POST", "/v1/blocks/b1/splice", {"at": length // 2, "insert": "x"})
                length += 1
                expected = lambda row, n=length: row[1] == n
            if status != 200:
                raise SystemExit(f"edit {i} ({kind}) answered {status}")
            while not expected(shown()):
                if time.monotonic() - started > 10:
                    raise SystemExit(f"edit {i} ({kind}) not seen on B within 10 s")
                time.sleep(0.0002)
            times[kind].append((time.monotonic() - started) * 1000)
            time.sleep(0.02)
        report = {"edits": EDITS}
        for kind, values in times.items():
            report[kind] = {"p50_ms": round(statistics.median(values), 2),
                            "p90_ms": round(percentile(values, 0.9), 2),
                            "p99_ms": round(percentile(values, 0.99), 2)}
        report["splice_over_title"] = {key: round(report["splice"][key] / report["title"][key], 2)
                                       for key in ("p50_ms", "p90_ms", "p99_ms")}
        print(json.dumps(report))


if __name__ == "__main__":
    main()
