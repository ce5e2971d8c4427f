#!/usr/bin/env python3
"""Runs one pagesync-load command N times (--json) and prints the median and spread (min..max) of chosen figures.

docs/benchmarks.md quotes no figure from a single run: this machine is shared and noisy.

  scripts/load-median.py 3 .build-release/release/pagesync-load compare B1 --rate 1000

Interleaved rounds (run A, B, C once each, three times over, so that a change in the machine's load falls on all
of them alike): keep each run's report with --save DIR, then summarize the kept reports with --reports.

  scripts/load-median.py --save var/round/b1 1 .build-release/release/pagesync-load compare B1 --sweep
  scripts/load-median.py --reports var/round/b1/*.json

--html FILE (before the rest) also draws the reports as `pagesync-load render` draws them: one HTML page, each
point the median across the runs; reports with a "label" (run with --label) or from several directories are
series of their own (old and new builds side by side). The program that draws: --load PROGRAM, else the
command's own pagesync-load, else $PAGESYNC_LOAD, else the release or debug build of this checkout.

  scripts/load-median.py --html var/round/b1.html --reports var/round/old-b1/*.json var/round/new-b1/*.json
"""
import os
import json
import statistics
import subprocess
import sys
import tempfile

FIGURES = [
    "batches.acked_per_s", "batches.mutations_per_s", "batches.ack_latency.p50_ms", "batches.ack_latency.p99_ms",
    "delivery.frames_per_s", "delivery.latency.p50_ms", "delivery.latency.p99_ms", "delivery.latency.p999_ms",
    "delivery.latency.max_ms", "delivery.lost_subscribers", "generator.lag_p99_ms", "generator.harness_cpu_pct",
    "generator.thread_cpu_pct", "readers.busiest_cpu_pct", "readers.lag_p99_ms", "readers.backlog_peak_bytes",
    "server.cpu_pct", "server.rss_after_bytes", "wire.bytes_received", "time.to_fresh_ms", "time.catchup_ms",
    "bytes.over_ideal", "bytes.total_wire", "machine.loadavg_1m_start", "machine.loadavg_1m_end",
    # B2
    "saturation.updates_per_s_at_p99_limit", "saturation.rate_at_p99_limit", "saturation.updates_per_s_kept_up",
    "saturation.rate_kept_up", "saturation.rate_not_kept_up",
    # B5
    "healthy_p99_ms.without_slow", "healthy_p99_ms.with_slow", "healthy_p99_ms.change_pct",
    "slow.twin_bytes_while_stalled", "slow.bytes_after_resume", "slow.bytes_saved_by_coalescing",
    "slow.caught_up_ms", "server_rss_growth.without_slow_bytes", "server_rss_growth.with_slow_bytes",
    "server_rss_while_stalled.growth_bytes", "server_rss_while_stalled.late_growth_bytes",
    # B6
    "connections_opened", "connect_seconds", "memory.broker_bytes_per_connection",
    "memory.broker_bytes_per_connection_from_start", "memory.harness_bytes_per_connection",
    "memory.broker_rss_after_bytes",
    # B3, B4, B7
    "subscribe.per_s", "subscribe.seconds", "subscribe.bytes_per_subscription", "subscribe.server_cpu_seconds",
    "writes.ack_latency.p50_ms", "writes.ack_latency.p99_ms", "delivery.notifications_per_s",
    "delivery.stale_subscriptions", "time.all_resubscribed_ms", "time.all_restored_ms", "time.restored.p50_ms",
    "time.restored.p99_ms", "catchup.missed", "catchup.needless", "rss.first_bytes", "rss.last_bytes",
    "rss.slope_bytes_per_min", "rss.later_half_slope_bytes_per_min", "fds.first_fds", "fds.last_fds",
    "fds.slope_fds_per_min", "subscriptions.harness", "subscriptions.broker", "subscriptions.leaked",
    "churn.reconnects",
    # --store postgres, --brokers, --bus redis: CPU of each process over the run, per delivered notification
    "cluster.cpu_us_per_delivery.pagesync-broker 1", "cluster.cpu_us_per_delivery.pagesync-broker 2",
    "cluster.cpu_us_per_delivery.redis-server", "cluster.cpu_us_per_delivery.postgres",
    "cluster.cpu_us_per_delivery.all", "cluster.processes.pagesync-broker 1.cpu_seconds",
    "cluster.processes.pagesync-broker 2.cpu_seconds", "cluster.processes.redis-server.cpu_seconds",
    "cluster.processes.postgres.cpu_seconds", "cluster.seconds",
]
# B2: each rate step's figures, for the steps a run reached (r250, r500, ...).
STEP_FIGURES = [
    "delivery.updates_per_s", "delivery.latency.p99_ms", "batches.acked_per_s", "generator.lag_p99_ms",
    "generator.thread_cpu_pct", "readers.busiest_cpu_pct", "readers.lag_p99_ms",
]


def leaf(obj, path):
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj if isinstance(obj, (int, float)) and not isinstance(obj, bool) else None


def render(html, load, paths):
    """Draws the reports at `paths` into `html` with `pagesync-load render` (no second renderer here)."""
    if load is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        candidates = [os.environ.get("PAGESYNC_LOAD")] + [
            os.path.join(root, build, "pagesync-load")
            for build in (".build-release/release", ".build/release", ".build/debug")
        ]
        load = next((path for path in candidates if path and os.access(path, os.X_OK)), None)
        if load is None:
            sys.exit("--html: no pagesync-load to render with (give --load PROGRAM or set PAGESYNC_LOAD)")
    out = subprocess.run([load, "render", "--html", html, *paths], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{load} render failed ({out.returncode}): {out.stderr.strip()}")
    print(f"plots: {html}")


def main():
    args = sys.argv[1:]
    html = load = None
    while args[:1] in (["--html"], ["--load"]):
        if len(args) < 2:
            sys.exit(f"{args[0]} needs a value")
        if args[0] == "--html":
            html = args[1]
        else:
            load = args[1]
        args = args[2:]
    if args[:1] == ["--reports"]:
        paths = args[1:]
        if not paths:
            sys.exit("--reports needs at least one report file")
        summarize(" ".join(paths), [json.load(open(path)) for path in paths])
        if html:
            render(html, load, paths)
        return
    save = None
    if args[:1] == ["--save"]:
        save, args = args[1], args[2:]
        os.makedirs(save, exist_ok=True)
    runs, command = int(args[0]), args[1:]
    reports, texts = [], []
    for index in range(runs):
        out = subprocess.run(command + ["--json", "--quiet"], capture_output=True, text=True)
        if out.returncode not in (0, 2):
            sys.exit(f"run {index + 1} failed ({out.returncode}): {out.stderr}")
        reports.append(json.loads(out.stdout))
        texts.append(out.stdout)
        if save:
            # Numbered after the reports already there, so repeated calls (interleaved rounds) add to them.
            taken = len([name for name in os.listdir(save) if name.endswith(".json")])
            with open(os.path.join(save, f"{taken + 1:02}.json"), "w") as file:
                file.write(out.stdout)
    summarize(" ".join(command), reports)
    if html:
        if load is None and os.path.basename(command[0]) == "pagesync-load":
            load = command[0]
        with tempfile.TemporaryDirectory(prefix="load-median-") as directory:
            paths = []
            for index, text in enumerate(texts):
                paths.append(os.path.join(directory, f"{index + 1:02}.json"))
                with open(paths[-1], "w") as file:
                    file.write(text)
            render(html, load, paths)


def summarize(title, reports):
    runs = len(reports)
    sides = ["pagesync", "redis"] if "ratios" in reports[0] else [None]
    print(f"{title}  ({runs} runs: median [min..max])")
    for path in FIGURES:
        cells = []
        for side in sides:
            values = [leaf(r[side] if side else r, path) for r in reports]
            values = [v for v in values if v is not None]
            if values:
                cells.append(f"{side or 'value'} {statistics.median(values):.3f} [{min(values):.3f}..{max(values):.3f}]")
        if len(cells) == len(sides):
            print(f"  {path:30} " + "   ".join(cells))
    for side in sides:
        names = []
        for r in reports:
            for name in ((r[side] if side else r).get("steps") or {}):
                if name not in names:
                    names.append(name)
        for name in names:
            for figure in STEP_FIGURES:
                values = [leaf(r[side] if side else r, f"steps.{name}.{figure}") for r in reports]
                values = [v for v in values if v is not None]
                if values:
                    print(f"  {side or 'value'} steps.{name}.{figure:26} {statistics.median(values):.3f} "
                          f"[{min(values):.3f}..{max(values):.3f}] ({len(values)} runs)")
    for side in sides:
        oks = [(r[side] if side else r).get("ok") for r in reports]
        print(f"  ok ({side or 'run'}): {sum(1 for ok in oks if ok)} of {len(oks)} runs correct")
    for side in sides:
        notes = {(r[side] if side else r).get("notes", "") for r in reports} - {""}
        for note in notes:
            print(f"  note ({side or 'run'}): {note}")


if __name__ == "__main__":
    main()
