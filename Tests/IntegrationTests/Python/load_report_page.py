"""A real browser on the plots page of `pagesync-load … --html`: headless Chromium, driven over the DevTools
protocol, opens the file, and the page must lay its plots out (every chart, point and line with a size, inside its
chart), fetch nothing, log no error, run no script of its own, and draw: the screenshot shows each series' colour.

Usage: load_report_page.py CHROMIUM HTML_FILE SERIES...
SERIES: the series the page must draw (`pagesync`, `redis`), in legend order.
Prints one "OK ..." line per check and "ALL OK" at the end; on the first mismatch prints "FAIL ..." and exits 1.
"""
import asyncio
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

import websockets

from checks import check, fail, png_pixels

CHROMIUM, HTML_FILE, SERIES = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3:]
WIDTH, HEIGHT = 1400, 2600
# LineChart.palette: series 0 and 1 (points are filled with it).
COLOURS = [bytes([0x1F, 0x6F, 0xEB]), bytes([0xCF, 0x22, 0x2E])]

# What the page lays out, read by the test (the page itself has no script).
LAYOUT = """JSON.stringify({
  scripts: document.scripts.length,
  charts: [...document.querySelectorAll('svg.chart')].map(svg => {
    const box = svg.getBoundingClientRect();
    const inside = e => { const r = e.getBoundingClientRect();
      return r.left >= box.left - 1 && r.right <= box.right + 1 && r.top >= box.top - 1 && r.bottom <= box.bottom + 1; };
    const sized = e => { const r = e.getBoundingClientRect(); return r.width > 0 || r.height > 0; };
    const points = [...svg.querySelectorAll('g.series circle')];
    const lines = [...svg.querySelectorAll('g.series polyline')];
    return { id: svg.id, width: box.width, height: box.height,
      points: points.length, sizedPoints: points.filter(sized).length, pointsInside: points.filter(inside).length,
      lines: lines.length, sizedLines: lines.filter(sized).length,
      legend: [...svg.querySelectorAll('g.legend')].map(g => g.dataset.series),
      ticks: svg.querySelectorAll('g.tick').length };
  }),
  tables: document.querySelectorAll('table').length,
  notes: [...document.querySelectorAll('ul.notes li')].map(li => li.textContent)
})"""


def start_chromium(profile):
    """Headless Chromium with DevTools on a port of its own choosing; returns (process, page's WebSocket URL)."""
    environment = dict(os.environ, HOME=profile, XDG_CONFIG_HOME=profile, XDG_CACHE_HOME=profile)
    process = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--no-zygote", "--disable-dev-shm-usage", "--disable-gpu",
         "--no-first-run", "--hide-scrollbars", "--remote-debugging-port=0", "--user-data-dir=" + profile + "/data",
         "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment)
    port_file = os.path.join(profile, "data", "DevToolsActivePort")
    deadline = time.monotonic() + 60
    while not os.path.exists(port_file) or not open(port_file).read().strip():
        if process.poll() is not None:
            fail(f"chromium exited {process.returncode}: {process.stderr.read().decode(errors='replace')[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            fail("chromium did not open its DevTools port within 60 s")
        time.sleep(0.1)
    port = int(open(port_file).read().split()[0])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=20) as answer:
        pages = [target for target in json.load(answer) if target["type"] == "page"]
    check(len(pages) >= 1, "chromium has a page to drive")
    return process, pages[0]["webSocketDebuggerUrl"]


class DevTools:
    """Commands with ids over the page's socket; every event kept in `events`."""

    def __init__(self, socket):
        self.socket, self.next_id, self.events = socket, 0, []

    async def call(self, method, **params):
        self.next_id += 1
        ident = self.next_id
        await self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(await asyncio.wait_for(self.socket.recv(), 30))
            if message.get("id") == ident:
                if "error" in message:
                    fail(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    async def wait_for(self, method):
        while not any(event.get("method") == method for event in self.events):
            self.events.append(json.loads(await asyncio.wait_for(self.socket.recv(), 30)))


async def drive(url):
    async with websockets.connect(url, max_size=64 << 20) as socket:
        tools = DevTools(socket)
        for domain in ("Runtime", "Log", "Page", "Network"):
            await tools.call(domain + ".enable")
        await tools.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1,
                         mobile=False)
        await tools.call("Page.navigate", url="file://" + HTML_FILE)
        await tools.wait_for("Page.loadEventFired")
        layout = json.loads((await tools.call("Runtime.evaluate", expression=LAYOUT, returnByValue=True))
                            ["result"]["value"])
        shot = await tools.call("Page.captureScreenshot", format="png")
        return layout, base64.b64decode(shot["data"]), tools.events


def main():
    with tempfile.TemporaryDirectory(prefix="pagesync-chromium-") as profile:
        process, url = start_chromium(profile)
        try:
            layout, png, events = asyncio.run(drive(url))
        finally:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shot = os.path.join(profile, "plots.png")
        with open(shot, "wb") as file:
            file.write(png)
        width, height, rows = png_pixels(shot)

    # Nothing fetched but the file itself; nothing logged as an error; no script.
    requests = [event["params"]["request"]["url"] for event in events
                if event.get("method") == "Network.requestWillBeSent"]
    check(all(request == "file://" + HTML_FILE for request in requests), f"nothing fetched but the page: {requests}")
    errors = [event for event in events
              if event.get("method") == "Runtime.exceptionThrown"
              or (event.get("method") == "Runtime.consoleAPICalled" and event["params"]["type"] == "error")
              or (event.get("method") == "Log.entryAdded" and event["params"]["entry"]["level"] == "error")]
    check(not errors, f"no console error: {errors}")
    check(layout["scripts"] == 0, "the page has no script")

    # Every chart laid out with a size, its points and lines sized and inside it, the legend naming the series.
    charts = {chart["id"]: chart for chart in layout["charts"]}
    for name in ("chart-p99", "chart-throughput", "chart-server-cpu"):
        check(name in charts, f"the page has {name}")
    percentiles = [name for name in charts if name.startswith("chart-percentiles-")]
    check(percentiles, f"a percentile plot per rate: {percentiles}")
    for name, chart in charts.items():
        check(chart["width"] >= 600 and chart["height"] >= 380, f"{name} is laid out {chart['width']}x{chart['height']}")
        check(chart["ticks"] >= 4, f"{name} has {chart['ticks']} ticks")
        check(chart["legend"] == SERIES, f"{name}'s legend names {chart['legend']}")
        check(chart["points"] >= len(SERIES), f"{name} draws {chart['points']} points")
        check(chart["sizedPoints"] == chart["points"] and chart["pointsInside"] == chart["points"],
              f"{name}: every point has a size and lies inside the chart")
        check(chart["sizedLines"] == chart["lines"], f"{name}: every line has a size")
    check(any(chart["lines"] >= len(SERIES) for chart in charts.values()), "the series are drawn as lines")
    check(layout["tables"] == len(SERIES), "a table of steps per series")
    check(any(note.startswith("harness-limited: ") for note in layout["notes"]), "the notes say who was harness-limited")
    check(any(note.startswith("rule: ") for note in layout["notes"]), "the notes give the rule")

    # The screenshot: the page drawn, each series in its colour.
    check((width, height) == (WIDTH, HEIGHT), f"the screenshot is {WIDTH}x{HEIGHT} ({width}x{height})")
    counts, background, differing, colours = [0] * len(SERIES), rows[0][:3], 0, set()
    for row in rows:
        for x in range(0, len(row), 3):
            pixel = row[x : x + 3]
            colours.add(pixel)
            differing += pixel != background
            for index in range(len(SERIES)):
                counts[index] += pixel == COLOURS[index]
    check(len(colours) >= 32, f"the screenshot is not blank ({len(colours)} colours)")
    check(differing >= WIDTH * HEIGHT // 50, f"{differing} pixels differ from the background")
    for index, name in enumerate(SERIES):
        check(counts[index] >= 100, f"{name} is drawn in its colour ({counts[index]} pixels)")
    print("ALL OK", flush=True)


main()
