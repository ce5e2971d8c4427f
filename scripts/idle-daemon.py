#!/usr/bin/env python3
"""The idle-daemon figure of issue #6: a pagesyncd holding ~10,000 offline pages, once synced and left alone,
must stay under 30 MB RSS and wake up for nothing but its heartbeat; issue #22 aims at 16 MB, 24 MB at the peak
of the first sync (`target_rss_ok`, `target_peak_ok`: not met yet, docs/benchmarks.md).

  scripts/idle-daemon.py [--bin .build/release] [--databases 200] [--rows 50] [--idle 60] [--heartbeat 30]

Starts a broker and a daemon from BIN on loopback in a temporary directory. On the broker: one page `root` with
DATABASES inline databases of ROWS rows each (10,201 pages by default). On the device: `pagesync offline add root`,
which makes the databases offline (inline in an offline page) and their first ROWS rows (database_row_limit), so
the whole tree. Once every page is complete, it samples the daemon for IDLE seconds: RSS (VmRSS) and peak
(VmHWM) from /proc/PID/status, and wake-ups: the context switches of every thread of the daemon
(/proc/PID/task/*/status), against what the heartbeat alone needs. The broker is sampled too, idle with no
connection (after the setup, before the daemon starts). Each process's resident memory is broken down by mapping
(/proc/PID/smaps: the heap and anonymous maps, the program, each library). Prints one JSON object.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request


def read_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def smaps_breakdown(pid, top=8):
    """Resident kB by mapping name (anonymous maps, the heap, the program, each library), largest first."""
    resident = {}
    name = None
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                name = os.path.basename(fields[5]) if len(fields) > 5 else "[anon]"
            elif fields[0] == "Rss:":
                resident[name] = resident.get(name, 0) + int(fields[1])
    return dict(sorted(resident.items(), key=lambda item: -item[1])[:top])


def memory(pid):
    status = read_status(pid)
    return {"rss_bytes": int(status["VmRSS"].split()[0]) * 1024,
            "rss_anon_bytes": int(status["RssAnon"].split()[0]) * 1024,
            "rss_file_bytes": int(status["RssFile"].split()[0]) * 1024,
            "rss_peak_bytes": int(status["VmHWM"].split()[0]) * 1024,
            "resident_kb_by_mapping": smaps_breakdown(pid)}


def wakeups(pid):
    """Context switches of every thread, voluntary and not, and the thread count."""
    total, threads = 0, 0
    for path in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            fields = dict(line.split(":", 1) for line in open(path) if ":" in line)
        except FileNotFoundError:
            continue
        threads += 1
        total += int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
    return total, threads


def wait_for(what, predicate, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    sys.exit(f"timed out waiting for {what}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=".build/release")
    parser.add_argument("--databases", type=int, default=200)
    parser.add_argument("--rows", type=int, default=50)
    parser.add_argument("--idle", type=float, default=60)
    parser.add_argument("--heartbeat", type=int, default=30)
    parser.add_argument("--smaps", help="copy the idle daemon's /proc/PID/smaps to this file, to study its mappings")
    args = parser.parse_args()
    binary = os.path.abspath(args.bin)
    work = tempfile.mkdtemp(prefix="pagesync-idle-")
    with open(f"{work}/broker.toml", "w") as config:
        config.write(f'[server]\nlisten = "127.0.0.1:0"\n[store]\npath = "{work}/broker.sqlite"\n')
    broker_log = open(f"{work}/broker.log", "w+")
    broker = subprocess.Popen([f"{binary}/pagesync-broker", "--config", f"{work}/broker.toml"],
                              stdout=broker_log, stderr=subprocess.STDOUT)
    daemon = None
    try:
        def address():
            broker_log.seek(0)
            found = re.search(r"broker\.address=(\S+)", broker_log.read())
            return found and found.group(1)
        base = "http://" + wait_for("the broker's address", address, 30)

        # The tree, in batches of 1,000 mutations.
        now = int(time.time() * 1000)
        mutations = [{"type": "create_page", "page": "root", "title": "Root"}]
        for d in range(args.databases):
            mutations.append({"type": "create_database", "page": f"db{d}", "parent": "root", "title": f"DB {d}"})
            for r in range(args.rows):
                mutations.append({"type": "create_row", "page": f"db{d}-r{r}", "database": f"db{d}",
                                  "title": f"Row {r}", "properties": {"n": r}})
        for index, mutation in enumerate(mutations):
            mutation.update({"id": index + 1, "time": f"{now}:{index}"})
        for start in range(0, len(mutations), 1000):
            body = json.dumps({"client": "setup", "workspace": "default", "mutations": mutations[start:start + 1000]})
            request = urllib.request.Request(base + "/v1/batch", data=body.encode(), method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as answer:
                results = json.load(answer)["results"]
                if any(r["status"] != "applied" for r in results):
                    sys.exit(f"setup batch refused: {results[:3]}")
        pages = len(mutations)
        time.sleep(5)  # the broker idle, its setup connections closed
        broker_idle = memory(broker.pid)

        with open(f"{work}/pagesyncd.toml", "w") as config:
            config.write(f'[broker]\nurl = "{base}"\n[store]\npath = "{work}/pagesyncd.sqlite"\n'
                         f'[api]\nsocket = "{work}/pagesyncd.sock"\n[offline]\ndatabase_row_limit = {args.rows}\n'
                         f'[sync]\nheartbeat_interval = {args.heartbeat}\n')
        daemon = subprocess.Popen([f"{binary}/pagesyncd", "--config", f"{work}/pagesyncd.toml"],
                                  stdout=open(f"{work}/daemon.log", "w"), stderr=subprocess.STDOUT)
        wait_for("the daemon's socket", lambda: os.path.exists(f"{work}/pagesyncd.sock"), 30)

        def cli(*words):
            out = subprocess.run([f"{binary}/pagesync", *words, "--socket", f"{work}/pagesyncd.sock", "--json"],
                                 capture_output=True, text=True, timeout=120)
            if out.returncode != 0:
                sys.exit(f"pagesync {' '.join(words)}: {out.stderr}{out.stdout}")
            return json.loads(out.stdout)

        started = time.monotonic()
        cli("offline", "add", "root")

        def synced():
            # `status` is cheap; the list of 10,000 pages is not, so it is read only once every page was fetched.
            status = cli("status")
            if status["offlinePages"] != pages or status["fetchedPages"] < pages or not status["connected"]:
                return False
            return all(page["complete"] for page in cli("offline", "list"))
        wait_for(f"{pages} complete offline pages", synced, 1200)
        sync_seconds = time.monotonic() - started
        time.sleep(2)  # let the last answers and writes settle

        before, threads = wakeups(daemon.pid)
        samples = []
        end = time.monotonic() + args.idle
        while time.monotonic() < end:
            status = read_status(daemon.pid)
            samples.append(int(status["VmRSS"].split()[0]) * 1024)
            time.sleep(1)
        after, _ = wakeups(daemon.pid)
        if args.smaps:
            with open(f"/proc/{daemon.pid}/smaps") as source, open(args.smaps, "w") as copy:
                copy.write(source.read())
        status = read_status(daemon.pid)
        heartbeats = args.idle / args.heartbeat
        report = {
            "offline_pages": pages, "sync_seconds": round(sync_seconds, 1), "idle_seconds": args.idle,
            "rss_bytes": samples[-1], "rss_min_bytes": min(samples), "rss_max_bytes": max(samples),
            "rss_peak_bytes": int(status["VmHWM"].split()[0]) * 1024,
            "rss_anon_bytes": int(status["RssAnon"].split()[0]) * 1024,
            "rss_file_bytes": int(status["RssFile"].split()[0]) * 1024, "threads": threads,
            "context_switches": after - before, "heartbeat_interval": args.heartbeat,
            "heartbeats_expected": heartbeats,
            "switches_per_heartbeat": round((after - before) / heartbeats, 1) if heartbeats else None,
            "resident_kb_by_mapping": smaps_breakdown(daemon.pid),
            # Issue #22's targets: 16 MB idle, 24 MB at the peak of the first sync (not met yet:
            # docs/benchmarks.md, "The idle daemon at rest"); issue #6's 30 MB, met.
            "target_rss_ok": samples[-1] <= 16 * 1024 * 1024,
            "target_peak_ok": int(status["VmHWM"].split()[0]) * 1024 <= 24 * 1024 * 1024,
            "issue6_rss_ok": samples[-1] <= 30 * 1024 * 1024,
            "broker_idle": broker_idle,
        }
        print(json.dumps(report, indent=1))
    finally:
        for process in (daemon, broker):
            if process and process.poll() is None:
                process.terminate()
                process.wait(timeout=30)
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
