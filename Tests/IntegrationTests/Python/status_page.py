"""A real browser on a running broker's status page: headless Chromium loads GET /status and shows the figures
GET /metrics has, and its screenshot is a picture of them.

Usage: status_page.py BASE_URL ALICE_TOKEN BOB_TOKEN CHROMIUM STORE_FILE BATCH_MUTATIONS
STORE_FILE: the name the broker's store was given (hostile: it holds "<script>"); BATCH_MUTATIONS: the broker's
[limits] batch_mutations, which the page must show as the configuration in force.
Prints one "OK ..." line per check, the time each browser run took, and "ALL OK" at the end; on the first mismatch
prints "FAIL ..." and exits 1.
"""
import asyncio
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import websockets

from checks import check, fail, json_caller, png_pixels

BASE, ALICE, BOB, CHROMIUM, STORE_FILE, BATCH_MUTATIONS = sys.argv[1:7]
WS = BASE.replace("http://", "ws://") + "/v1/stream"
P = "pagesync_broker_"
WIDTH, HEIGHT = 1200, 900
# The page's accent colour (light scheme): the big figures are drawn in it.
ACCENT = bytes([0x1F, 0x6F, 0xEB])

call = json_caller(BASE, ALICE)


def scrape():
    """{sample name with labels: value} of GET /metrics."""
    with urllib.request.urlopen(BASE + "/metrics", timeout=20) as response:
        samples = {}
        for line in response.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples


# Attempts when Chromium itself dies by a signal (not when it exits with an error): once in CI, busy with the
# parallel test run, its zygote died (SIGTRAP, "zygote_linux.cc write: Broken pipe") before loading anything; on a
# machine at a load of 8, even without a zygote, three times in a row (SIGTRAP, nothing said): waits between tries.
CHROMIUM_ATTEMPTS = 5


def chromium(profile, *arguments):
    """Runs headless Chromium with a profile of its own; returns (stdout, seconds taken). No zygote (one process
    fewer to lose) and no /dev/shm (small in containers): what the page shows does not depend on either."""
    environment = dict(os.environ, HOME=profile, XDG_CONFIG_HOME=profile, XDG_CACHE_HOME=profile)
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--no-zygote", "--disable-dev-shm-usage", "--disable-gpu",
        "--no-first-run", "--hide-scrollbars", "--user-data-dir=" + profile + "/data", *arguments, BASE + "/status",
    ]
    for attempt in range(1, CHROMIUM_ATTEMPTS + 1):
        started = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, timeout=60, env=environment)
        except subprocess.TimeoutExpired:
            fail(f"chromium did not finish within 60 s: {command}")
        if done.returncode < 0 and attempt < CHROMIUM_ATTEMPTS:
            # What it said last, less the noise every run prints (no D-Bus, no cpufreq in a container).
            said = [line for line in done.stderr.decode(errors="replace").splitlines()
                    if line.strip() and "dbus" not in line and "cpufreq" not in line][-3:]
            print(f"  NOTE chromium died by signal {-done.returncode} (attempt {attempt}); trying again: {said}",
                  flush=True)
            time.sleep(2 * attempt)
            continue
        if done.returncode != 0:
            fail(f"chromium exited {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}")
        return done.stdout.decode(), time.monotonic() - started


def figures(dom):
    """{data-metric: data-value} of the page as the browser parsed it."""
    pairs = re.findall(r'data-metric="([^"]*)" data-value="([^"]*)"', dom)
    return {html.unescape(metric): float(value) for metric, value in pairs}


def element_text(dom, attribute):
    """The text of the element carrying `attribute` (e.g. data-key="store.path"), unescaped."""
    match = re.search(re.escape(attribute) + r'[^>]*>(.*?)</', dom, re.S)
    check(match is not None, f"the page has an element with {attribute}")
    return match.group(1)


async def main():
    started = time.monotonic()
    async with websockets.connect(WS, additional_headers={"Authorization": "Bearer " + ALICE}) as ws:
        await ws.send(json.dumps({"op": "subscribe", "pages": ["home", "other"]}))
        answer = json.loads(await ws.recv())
        check(answer["op"] == "subscribed" and answer["total"] == 2, "a device subscribed to 2 pages")
        base = 1_700_000_000_000
        for i in range(3):
            kind = {"type": "create_page", "title": "Home"} if i == 0 else {"type": "set_title", "title": f"t{i}"}
            mutation = {"id": 1 + i, "page": "home", "time": f"{base + i}:0", **kind}
            status, outcome = call("POST", "/v1/batch", {"client": "s1", "workspace": "w1", "mutations": [mutation]})
            check(status == 200, f"batch {i + 1} answered 200")
        newest, seen = outcome["pages"]["home"], 0
        while seen < newest:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if message["op"] == "changed":
                seen = max(seen, message["pages"].get("home", 0))
        batches_done = time.monotonic()
        check(call("GET", "/v1/pages/home", token=None)[0] == 401, "a request without a token: 401")

        # HEAD answers as GET without a body; other methods are refused.
        with urllib.request.urlopen(urllib.request.Request(BASE + "/status", method="HEAD"), timeout=20) as head:
            check(head.status == 200, "HEAD /status answers 200 without a token")
            check(head.headers["Content-Type"] == "text/html; charset=utf-8", "Content-Type: text/html; charset=utf-8")
            check(head.headers["Cache-Control"] == "no-store", "Cache-Control: no-store")
            check(int(head.headers["Content-Length"]) > 1000 and head.read() == b"", "HEAD: a length, no body")
        try:
            urllib.request.urlopen(urllib.request.Request(BASE + "/status", data=b"", method="POST"), timeout=20)
            fail("POST /status was accepted")
        except urllib.error.HTTPError as error:
            check(error.code == 405 and error.headers["Allow"] == "GET, HEAD", "POST /status: 405, Allow: GET, HEAD")

        with tempfile.TemporaryDirectory(prefix="pagesync-chromium-") as profile:
            before = scrape()
            dom, dom_seconds = chromium(profile, "--dump-dom")
            after = scrape()
            print(f"TIME chromium --dump-dom {dom_seconds:.1f} s", flush=True)
            shot = os.path.join(profile, "status.png")
            _, shot_seconds = chromium(profile, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}")
            print(f"TIME chromium --screenshot {shot_seconds:.1f} s", flush=True)
            check(os.path.exists(shot), "chromium wrote the screenshot")
            width, height, rows = png_pixels(shot)

    # The figures the browser shows are /metrics' (those that this test's own requests do not move).
    shown = figures(dom)
    steady = [
        "device_streams", "subscriptions", "batches_applied_total", "batch_commit_seconds_count",
        "notifications_sent_total", "notifications_coalesced_total", "catchups_from_index_total",
        "subscribe_store_reads_pages_total", "writer_jobs", "store_bytes", "store_wal_bytes", "start_time_seconds",
        'http_refused_total{status="401"}', 'http_refused_total{status="405"}',
    ]
    for name in steady:
        metric = P + name
        check(before.get(metric) == after.get(metric), f"{metric} held still around the page load")
        check(shown.get(metric) == before.get(metric), f"the page shows {metric} = {shown.get(metric)}, as /metrics")
    check(shown[P + "device_streams"] == 1 and shown[P + "subscriptions"] == 2, "1 device stream, 2 subscriptions")
    check(shown[P + "batches_applied_total"] == 3 and shown[P + "batch_commit_seconds_count"] == 3, "3 batches")
    check(shown[P + "store_bytes"] > 0, "the store's size")
    check(shown[P + "http_refused_total{status=\"401\"}"] == 1, "the 401 is counted on the page")
    check(element_text(dom, 'data-metric="pagesync_broker_subscriptions"') == "2", "the subscriptions read 2")
    rate = re.search(r'data-rate="batches" data-value="([^"]+)">([^<]+)<', dom)
    check(rate is not None, "the batches' rate is shown")
    if time.monotonic() - batches_done < 8:
        check(float(rate.group(1)) > 0 and rate.group(2).endswith("/s"), f"the batches were seen: {rate.group(2)}")
    check(element_text(dom, 'data-key="limits.batch_mutations"') == BATCH_MUTATIONS, "the configuration in force")
    check(re.search(r'<meta http-equiv="refresh" content="\d+">', dom) is not None, "the page reloads itself")

    # A hostile store name is text, not markup; never a token, a user or a workspace (looked for outside the
    # store's path, whose scratch directory has a random name).
    check("<script" not in dom.lower(), "no script element: the store's name was escaped")
    path_markup = element_text(dom, 'data-key="store.path"')
    path_text = html.unescape(path_markup)
    check(path_text.endswith("/" + STORE_FILE + '"'), f"the store's name shows as written: {path_text}")
    for secret in (ALICE, BOB, "alice", "bob", "w1", "w2"):
        check(secret not in dom.replace(path_markup, ""), f"{secret!r} is not on the page")

    # The screenshot: the window's size, and a page drawn on it (text, cards, the big figures in the accent).
    check((width, height) == (WIDTH, HEIGHT), f"the screenshot is {WIDTH}x{HEIGHT} ({width}x{height})")
    colours, accent, background = set(), 0, rows[0][:3]
    differing = 0
    for row in rows:
        for x in range(0, len(row), 3):
            pixel = row[x : x + 3]
            colours.add(pixel)
            accent += pixel == ACCENT
            differing += pixel != background
    check(len(colours) >= 32, f"the screenshot has text and shapes ({len(colours)} colours)")
    check(accent >= 200, f"the big figures are drawn ({accent} pixels of the accent colour)")
    check(differing >= WIDTH * HEIGHT // 20, f"{differing} pixels differ from the background")
    print(f"TIME whole script {time.monotonic() - started:.1f} s", flush=True)
    print("ALL OK", flush=True)


asyncio.run(main())
