"""Pushes batches from several clients at once, and SIGKILLs the broker mid-stream; then, against the restarted
broker, checks that every acknowledged batch is there, none is half there, and re-sending the unanswered ones
applies each exactly once.

Usage: broker_crash.py push BASE TOKEN PID STATEFILE   (kills PID after enough acknowledgements)
       broker_crash.py verify BASE TOKEN STATEFILE
"""
import json
import os
import signal
import sys
import threading
import urllib.error
import urllib.request

CLIENTS = 4


def call(base, token, method, path, body=None):
    request = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(), method=method)
    request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def batch(client, n):
    """Batch n of a client: mutation ids 2n-1 and 2n, two properties that must land together."""
    time = f"{1_700_000_000_000 + n}:0"
    return {"client": client, "workspace": "w1", "mutations": [
        {"id": 2 * n - 1, "page": "crash", "time": time, "type": "set_property", "name": f"{client}-{n}-a", "value": n},
        {"id": 2 * n, "page": "crash", "time": time, "type": "set_property", "name": f"{client}-{n}-b", "value": n},
    ]}


def push(base, token, pid, state_file):
    status, _ = call(base, token, "POST", "/v1/batch", {"client": "setup", "workspace": "w1", "mutations": [
        {"id": 1, "page": "crash", "time": "1:0", "type": "create_page", "title": "crash test"}]})
    assert status == 200, status
    acked = {f"c{i}": 0 for i in range(CLIENTS)}
    sent = {f"c{i}": 0 for i in range(CLIENTS)}
    lock = threading.Lock()
    killed = threading.Event()

    def worker(client):
        n = 0
        while not killed.is_set() or n == 0:
            n += 1
            with lock:
                sent[client] = n
            try:
                status, body = call(base, token, "POST", "/v1/batch", batch(client, n))
            except Exception:
                return
            if status != 200 or [r["status"] for r in body["results"]] != ["applied", "applied"]:
                print(f"FAIL {client} batch {n}: {status} {body}", flush=True)
                os._exit(1)
            with lock:
                acked[client] = n
                if sum(acked.values()) >= 300 and not killed.is_set():
                    killed.set()
                    os.kill(pid, signal.SIGKILL)

    threads = [threading.Thread(target=worker, args=(c,)) for c in acked]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(state_file, "w") as f:
        json.dump({"acked": acked, "sent": sent}, f)
    print(f"OK killed the broker after {sum(acked.values())} acknowledged batches; sent {sent}", flush=True)


def verify(base, token, state_file):
    state = json.load(open(state_file))
    status, page = call(base, token, "GET", "/v1/pages/crash")
    assert status == 200, status
    props = page["properties"]
    for client, last_acked in state["acked"].items():
        for n in range(1, state["sent"][client] + 1):
            a, b = f"{client}-{n}-a" in props, f"{client}-{n}-b" in props
            if n <= last_acked and not (a and b):
                print(f"FAIL acknowledged batch {client}/{n} is missing after the crash", flush=True)
                sys.exit(1)
            if a != b:
                print(f"FAIL batch {client}/{n} is half applied", flush=True)
                sys.exit(1)
    print("OK every acknowledged batch survived kill -9, none is half applied", flush=True)
    # The client re-sends what it has no answer for: applied now or acknowledged as a duplicate, never twice.
    for client, last_acked in state["acked"].items():
        for n in range(last_acked + 1, state["sent"][client] + 1):
            status, body = call(base, token, "POST", "/v1/batch", batch(client, n))
            statuses = {r["status"] for r in body["results"]}
            if status != 200 or len(statuses) != 1 or statuses - {"applied", "duplicate"}:
                print(f"FAIL re-sent batch {client}/{n}: {status} {body}", flush=True)
                sys.exit(1)
        status, body = call(base, token, "POST", "/v1/batch", batch(client, state["sent"][client]))
        if [r["status"] for r in body["results"]] != ["duplicate", "duplicate"]:
            print(f"FAIL a second re-send of {client} was applied again: {body}", flush=True)
            sys.exit(1)
    status, page = call(base, token, "GET", "/v1/pages/crash")
    expected = 2 * sum(state["sent"].values())
    if len(page["properties"]) != expected:
        print(f"FAIL {len(page['properties'])} properties after re-sending, expected {expected}", flush=True)
        sys.exit(1)
    print("OK re-sent batches applied exactly once", flush=True)
    print("ALL OK", flush=True)


if sys.argv[1] == "push":
    push(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
else:
    verify(sys.argv[2], sys.argv[3], sys.argv[4])
