"""Scrapes a running pagesync broker's GET /metrics around known traffic and checks what moved, and by how much.

Usage: broker_metrics.py BASE_URL ALICE_TOKEN
Prints one "OK ..." line per check and "ALL OK" at the end; on the first mismatch prints "FAIL ..." and exits 1.
The exposition is parsed strictly (text format 0.0.4): every sample belongs to a family with # HELP and # TYPE,
names and labels are well formed, values are numbers, histogram buckets are cumulative.
"""
import asyncio
import json
import math
import re
import sys
import time
import urllib.error
import urllib.request

import websockets

from checks import check, fail, json_caller

BASE, ALICE = sys.argv[1], sys.argv[2]
WS = BASE.replace("http://", "ws://") + "/v1/stream"
P = "pagesync_broker_"

call = json_caller(BASE, ALICE)


NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"'
SAMPLE = re.compile(r"^(" + NAME + r")(?:\{(" + LABEL + r"(?:," + LABEL + r")*)?\})? (\S+)$")


def parse(text):
    """{(name, ((label, value), ...)): value}, checking the exposition's grammar and its families."""
    helps, types, samples = {}, {}, {}
    check(text.endswith("\n"), "the exposition ends with a newline")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            if not re.fullmatch(NAME, name) or not help_text or name in helps:
                fail(f"bad or repeated HELP line: {line!r}")
            helps[name] = help_text
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            if kind not in ("counter", "gauge", "histogram", "summary", "untyped") or name in types:
                fail(f"bad or repeated TYPE line: {line!r}")
            types[name] = kind
        elif line.startswith("#") or not line:
            continue
        else:
            match = SAMPLE.match(line)
            if not match:
                fail(f"not a sample line: {line!r}")
            name, labels, value = match.group(1), match.group(2) or "", match.group(7)
            pairs = tuple(sorted(re.findall(LABEL, labels)))
            try:
                number = float(value)
            except ValueError:
                fail(f"not a number: {line!r}")
            family = name
            for suffix in ("_bucket", "_sum", "_count"):
                if name.endswith(suffix) and types.get(name[: -len(suffix)]) == "histogram":
                    family = name[: -len(suffix)]
            if family not in types:
                fail(f"a sample before or without its # TYPE line: {line!r}")
            if (name, pairs) in samples:
                fail(f"a repeated sample: {line!r}")
            samples[(name, pairs)] = number
    check(set(helps) == set(types), "every family has both # HELP and # TYPE")
    for name, kind in types.items():
        check(name.startswith(P), f"{name} is in the pagesync_broker_ namespace")
        if kind == "counter":
            check(name.endswith("_total"), f"counter {name} ends in _total")
        if kind == "histogram":
            # One series per set of labels other than `le` (a labelled histogram has several).
            series = {}
            for (n, labels), value in samples.items():
                if n == name + "_bucket":
                    rest = tuple(pair for pair in labels if pair[0] != "le")
                    series.setdefault(rest, []).append((float(dict(labels)["le"]), value))
            check(bool(series), f"histogram {name} has buckets")
            for rest, buckets in series.items():
                buckets.sort()
                shown = f"{name}{dict(rest) or ''}"
                check(math.isinf(buckets[-1][0]), f"histogram {shown} has a +Inf bucket")
                check(all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), f"histogram {shown}'s buckets are cumulative")
                check(buckets[-1][1] == samples[(name + "_count", rest)], f"histogram {shown}: +Inf bucket == _count")
    return types, samples


def scrape():
    request = urllib.request.Request(BASE + "/metrics")
    with urllib.request.urlopen(request, timeout=20) as response:
        check(response.status == 200, "GET /metrics answers 200 without a token")
        check(response.headers["Content-Type"].startswith("text/plain; version=0.0.4"), "text format 0.0.4")
        return parse(response.read().decode())


def value(samples, name, **labels):
    return samples.get((P + name, tuple(sorted(labels.items()))), 0.0)


async def main():
    types, before = scrape()
    expected_types = {
        "connections": "gauge", "device_streams": "gauge", "subscriptions": "gauge",
        "batches_applied_total": "counter", "mutations_applied_total": "counter",
        "mutations_duplicate_total": "counter", "mutations_rejected_total": "counter",
        "notifications_sent_total": "counter", "notifications_coalesced_total": "counter",
        "batch_commit_seconds": "histogram", "writer_phase_seconds": "histogram", "catchup_requests_total": "counter",
        "fetch_requests_total": "counter", "received_bytes_total": "counter", "sent_bytes_total": "counter",
        "catchups_from_index_total": "counter", "subscribe_store_reads_pages_total": "counter",
        "writer_jobs": "gauge", "store_bytes": "gauge", "store_wal_bytes": "gauge", "start_time_seconds": "gauge",
    }
    for name, kind in expected_types.items():
        check(types.get(P + name) == kind, f"{P}{name} is a {kind}")
    check(value(before, "mutations_rejected_total", reason="unknown_page") == 0, "every rejection reason starts at 0")
    check(value(before, "connections") == 1, "the scrape's own connection is the only one open")
    check(value(before, "store_bytes") > 0, "the store's database file has a size")
    check(1.5e9 < value(before, "start_time_seconds") <= time.time(), "the start time is a time since 1970, past")

    async with websockets.connect(WS, additional_headers={"Authorization": "Bearer " + ALICE}) as ws:
        await ws.send(json.dumps({"op": "subscribe", "pages": ["home", "other"]}))
        answer = json.loads(await ws.recv())
        check(answer["op"] == "subscribed" and answer["total"] == 2, "the device subscribed to 2 pages")
        _, during = scrape()
        check(value(during, "device_streams") == 1, "device_streams counts the open stream")
        check(value(during, "subscriptions") == 2, "subscriptions counts its 2 channels")
        check(value(during, "connections") == 2, "connections: the stream and the scrape")

        # One batch of 4: a page created, its title set twice, and a mutation of a page that does not exist.
        base = 1_700_000_000_000
        mutations = [
            {"id": 1, "page": "home", "time": f"{base + 1}:0", "type": "create_page", "title": "Home"},
            {"id": 2, "page": "home", "time": f"{base + 2}:0", "type": "set_title", "title": "Home 2"},
            {"id": 3, "page": "ghost", "time": f"{base + 3}:0", "type": "set_title", "title": "nobody"},
        ]
        status, outcome = call("POST", "/v1/batch", {"client": "m1", "workspace": "w1", "mutations": mutations})
        check(status == 200, f"the batch was answered 200 ({outcome})")
        statuses = [r["status"] for r in outcome["results"]]
        check(statuses == ["applied", "applied", "rejected"], f"2 applied, 1 rejected: {statuses}")
        check(outcome["results"][2]["reason"]["name"] == "unknown_page", "rejected as unknown_page")
        # The same batch again: answered from the record, nothing applied twice.
        status, _ = call("POST", "/v1/batch", {"client": "m1", "workspace": "w1", "mutations": mutations[:2]})
        check(status == 200, "the re-sent batch was answered 200")
        # More edits of home, each its own batch: each reaches the device, sent or coalesced.
        edits = 5
        for i in range(edits):
            m = {"id": 4 + i, "page": "home", "time": f"{base + 10 + i}:0", "type": "set_title", "title": f"t{i}"}
            status, last = call("POST", "/v1/batch", {"client": "m1", "workspace": "w1", "mutations": [m]})
            check(status == 200, f"edit {i} answered 200")
        newest = last["pages"]["home"]
        seen = 0
        while seen < newest:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if message["op"] == "changed":
                seen = max(seen, message["pages"].get("home", 0))
        check(seen == newest, "the device saw home's newest time")

        # Refused requests: no token (401), a body that is not JSON (400), a page of no one (404).
        check(call("POST", "/v1/batch", {"client": "m1", "workspace": "w1", "mutations": []}, token=None)[0] == 401, "401")
        request = urllib.request.Request(BASE + "/v1/catchup", data=b"{not json", method="POST")
        request.add_header("Authorization", "Bearer " + ALICE)
        try:
            urllib.request.urlopen(request, timeout=20)
            fail("a broken body was accepted")
        except urllib.error.HTTPError as error:
            check(error.code == 400, "400 for a broken body")
        check(call("GET", "/v1/pages/nowhere")[0] == 404, "404 for an unknown page")
        # One catch-up and one fetch (the broken one above counted as a catch-up request too).
        check(call("POST", "/v1/catchup", {"pages": {"home": 0}})[0] == 200, "a catch-up")
        check(call("POST", "/v1/fetch", {"pages": {"home": 0}})[0] == 200, "a fetch")

        types, after = scrape()

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    batches = 2 + edits
    check(moved("batches_applied_total") == batches, f"batches_applied_total +{batches}: {moved('batches_applied_total')}")
    check(moved("mutations_applied_total") == 2 + edits, f"mutations_applied_total +{2 + edits}")
    check(moved("mutations_duplicate_total") == 2, "mutations_duplicate_total +2")
    check(moved("mutations_rejected_total", reason="unknown_page") == 1, "mutations_rejected_total{unknown_page} +1")
    check(moved("mutations_rejected_total", reason="forbidden") == 0, "no other rejection")
    check(moved("batch_commit_seconds_count") == batches, f"batch_commit_seconds_count +{batches}")
    check(moved("batch_commit_seconds_bucket", le="+Inf") == batches, "the +Inf bucket moved as much")
    check(moved("batch_commit_seconds_sum") > 0, "commit time was spent")
    # The same batches, each timed in the writer's four phases.
    for phase in ("queued", "applied", "committed", "handed_back"):
        check(moved("writer_phase_seconds_count", phase=phase) == batches,
              f"writer_phase_seconds_count{{phase={phase}}} +{batches}")
        check(moved("writer_phase_seconds_bucket", phase=phase, le="+Inf") == batches, f"{phase}: +Inf bucket")
    check(moved("writer_phase_seconds_sum", phase="committed") > 0, "the commits took time")
    sent, coalesced = moved("notifications_sent_total"), moved("notifications_coalesced_total")
    # Home changed in 1 + edits batches (the re-sent one changed nothing): each reached the device once,
    # either in a frame of its own or folded into one still pending.
    check(sent + coalesced == 1 + edits and sent >= 1, f"sent {sent} + coalesced {coalesced} == {1 + edits}")
    check(moved("catchup_requests_total") == 2, "catchup_requests_total +2")
    check(moved("fetch_requests_total") == 1, "fetch_requests_total +1")
    for code in ("400", "401", "404"):
        check(moved("http_refused_total", status=code) == 1, f"http_refused_total{{status={code}}} +1")
    check(not any(n == P + "http_refused_total" and dict(l)["status"] < "400" for (n, l) in after), "only 4xx/5xx")
    check(moved("received_bytes_total") > 7 * 100, "received_bytes_total counts the requests")
    check(moved("sent_bytes_total") > 7 * 100, "sent_bytes_total counts the answers")
    check(value(after, "device_streams") == 1 and value(after, "subscriptions") == 2, "gauges while the stream is open")

    _, closed = scrape()
    # The close completes on the broker's loop shortly after the client's: poll briefly.
    for _ in range(50):
        if value(closed, "device_streams") == 0:
            break
        await asyncio.sleep(0.1)
        _, closed = scrape()
    check(value(closed, "device_streams") == 0 and value(closed, "subscriptions") == 0, "gauges fall when it closes")
    print("ALL OK", flush=True)


asyncio.run(main())
