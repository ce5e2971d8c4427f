#!/usr/bin/env python3
"""Big answers against a real broker (issue #16 item 3): its memory, loop and writer while clients download big
pages at once. The figures are in docs/threat-model.md ("Big pages and big answers").

Usage: scripts/big-answers.py BROKER_BINARY [--clients 8] [--blocks 2000] [--block-bytes 65000] [--slow] [--baseline]

Starts the broker on a scratch store with [limits] page_bytes at its largest and makes page `big` (BLOCKS blocks
of BLOCK_BYTES bytes of text: 130 MB by default, the issue's repro), then restarts it with the default limits, so
that `big` is a page stored before the bound, and makes page `bounded` (16 MB of such blocks, within the default
page_bytes). For each page, CLIENTS processes GET it at once (at full speed, or with --slow at about 20 MB/s each)
while a probe asks GET /metrics every 20 ms (answered on the loop thread: its latency is the loop's) and another
pushes a one-mutation batch every 100 ms (through the writer). Prints, per page, the probes' worst latencies (and
the loop probe's before the downloads: the machine's noise), the broker's peak RSS (VmHWM, from a restart), and
then the answers of a fetch of both pages followed by its cursor. --baseline runs a broker from before
page_bytes (no such key in its configuration).
"""
import argparse
import http.client
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, binary, directory):
        self.binary, self.directory = binary, directory
        self.port = free_port()
        self.process = None

    def start(self, limits):
        config = os.path.join(self.directory, "broker.toml")
        with open(config, "w") as f:
            f.write(f'[server]\nlisten = "127.0.0.1:{self.port}"\n[store]\npath = "{self.directory}/broker.sqlite"\n'
                    f'synchronous = "normal"\n[limits]\n{limits}\n[log]\nlevel = "warning"\n')
        self.log = open(os.path.join(self.directory, "broker.log"), "ab")
        self.process = subprocess.Popen([self.binary, "--config", config], stdout=self.log, stderr=self.log)
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.1):
                    return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("the broker did not start: see " + self.log.name)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=60)
        self.log.close()

    def status(self, key):
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        return 0


def request(port, method, path, body=None, timeout=600):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = json.dumps(body).encode() if body is not None else None
    connection.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    return response.status, payload


class Mutations:
    def __init__(self, client):
        self.client, self.next = client, 1

    def batch(self, mutations):
        numbered = []
        for m in mutations:
            numbered.append({"id": self.next, "time": f"{1_700_000_000_000 + self.next}:0", **m})
            self.next += 1
        return {"client": self.client, "workspace": "default", "mutations": numbered}


def make_page(port, writer, page, blocks, block_bytes):
    sentence = "The quick brown fox jumps over the lazy dog, and keeps on running. "
    text = (sentence * (block_bytes // len(sentence) + 1))[:block_bytes]
    status, body = request(port, "POST", "/v1/batch",
                           writer.batch([{"page": page, "type": "create_page", "parent": None, "title": page}]))
    assert status == 200, body
    per_batch = max(1, (6 << 20) // block_bytes)
    for start in range(0, blocks, per_batch):
        mutations = [{"page": page, "type": "add_block", "block": f"{page}-{n}", "blockType": "text",
                      "text": text, "after": f"{page}-{n - 1}" if n else None, "attributes": {}}
                     for n in range(start, min(blocks, start + per_batch))]
        status, body = request(port, "POST", "/v1/batch", writer.batch(mutations))
        answer = json.loads(body)
        assert status == 200 and all(r["status"] == "applied" for r in answer["results"]), body[:300]


def download(port, path, slow, results):
    """In a process of its own, so that the probes' timings are not the downloads' Python (its GIL)."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        connection.request("GET", path)
        response = connection.getresponse()
        total = 0
        while True:
            chunk = response.read(1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if slow:
                time.sleep(0.05)
        connection.close()
        results.put((response.status, total))
    except Exception as error:  # noqa: BLE001 - reported
        results.put((0, repr(error)))


def scenario(broker, page, clients, slow):
    port = broker.port
    stop = threading.Event()
    loop_times, writer_worst, rss_peak = [], [0.0], [0]
    downloading = threading.Event()

    def probe_loop():
        while not stop.is_set():
            started = time.monotonic()
            request(port, "GET", "/metrics")
            loop_times.append((downloading.is_set(), time.monotonic() - started))
            time.sleep(0.02)

    prober = Mutations(f"probe-{page}-{int(time.time() * 1000)}")

    def probe_writer():
        n = 0
        while not stop.is_set():
            started = time.monotonic()
            status, body = request(port, "POST", "/v1/batch", prober.batch(
                [{"page": "small", "type": "set_title", "title": f"t{n}"}]))
            assert status == 200, body
            writer_worst[0] = max(writer_worst[0], time.monotonic() - started)
            n += 1
            time.sleep(0.1)

    def sample_rss():
        while not stop.is_set():
            rss_peak[0] = max(rss_peak[0], broker.status("VmRSS"))
            time.sleep(0.02)

    probes = [threading.Thread(target=f) for f in (probe_loop, probe_writer, sample_rss)]
    for t in probes:
        t.start()
    time.sleep(1.0)  # the probes alone first: the machine's noise floor
    downloading.set()
    results = multiprocessing.Queue()
    started = time.monotonic()
    downloads = [multiprocessing.Process(target=download, args=(port, f"/v1/pages/{page}", slow, results))
                 for _ in range(clients)]
    for p in downloads:
        p.start()
    answers = [results.get() for _ in downloads]
    for p in downloads:
        p.join()
    elapsed = time.monotonic() - started
    time.sleep(0.3)
    stop.set()
    for t in probes:
        t.join()
    idle = sorted(t for busy, t in loop_times if not busy)
    busy = sorted(t for busy, t in loop_times if busy)
    return {"page": page, "clients": clients, "slow": slow, "answers": sorted(set(answers)),
            "seconds": round(elapsed, 2), "idle_loop_worst_ms": round(idle[-1] * 1000, 1),
            "loop_median_ms": round(busy[len(busy) // 2] * 1000, 1), "loop_worst_ms": round(busy[-1] * 1000, 1),
            "writer_worst_ms": round(writer_worst[0] * 1000, 1), "rss_peak_mb": round(rss_peak[0] / 1e6),
            "hwm_mb": round(broker.status("VmHWM") / 1e6)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--blocks", type=int, default=2000)
    parser.add_argument("--block-bytes", type=int, default=65000)
    parser.add_argument("--slow", action="store_true")
    parser.add_argument("--baseline", action="store_true",
                        help="a broker from before [limits] page_bytes: no such key in its configuration")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    arguments = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="big-answers-")
    broker = Broker(os.path.abspath(arguments.binary), directory)
    try:
        broker.start(("" if arguments.baseline else "page_bytes = 1073741824\n") + "body_bytes = 16777216")
        writer = Mutations("maker")
        make_page(broker.port, writer, "big", arguments.blocks, arguments.block_bytes)
        broker.stop()
        broker.start("")
        status, _ = request(broker.port, "POST", "/v1/batch", writer.batch(
            [{"page": "small", "type": "create_page", "parent": None, "title": "small"}]))
        assert status == 200
        # About as large as the default page_bytes (16 MiB) lets a page grow; the next block is refused.
        make_page(broker.port, writer, "bounded", 16_000_000 // arguments.block_bytes, arguments.block_bytes)
        # `big`, stored before the bound, cannot grow.
        status, body = request(broker.port, "POST", "/v1/batch", writer.batch(
            [{"page": "big", "type": "add_block", "block": "big-more", "blockType": "text", "text": "x" * 60000,
              "after": None, "attributes": {}}]))
        print("one more block for big:", json.loads(body)["results"][0])
        for page in ("big", "bounded"):
            broker.stop()
            broker.start("")
            print(json.dumps(scenario(broker, page, arguments.clients, arguments.slow)))
        # Fetch both whole, following the cursor: each answer within answer_bytes but for a page alone.
        cursor, answers, fetched = None, 0, []
        while True:
            body = {"pages": {"big": 0, "bounded": 0, "small": 0}}
            if cursor:
                body["cursor"] = cursor
            status, payload = request(broker.port, "POST", "/v1/fetch", body)
            answer = json.loads(payload)
            answers += 1
            fetched += [d["id"] for d in answer["deltas"]]
            print(f"fetch answer {answers}: {len(payload)} bytes, pages {[d['id'] for d in answer['deltas']]}, "
                  f"nextCursor {answer.get('nextCursor')}")
            cursor = answer.get("nextCursor")
            if not cursor:
                break
        assert fetched == ["big", "bounded", "small"], fetched
    finally:
        broker.stop()
        if not arguments.keep:
            shutil.rmtree(directory)


if __name__ == "__main__":
    sys.exit(main())
