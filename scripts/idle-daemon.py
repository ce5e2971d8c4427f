#!/usr/bin/env python3
"""The idle-daemon figure of issue #6: a pagesyncd holding ~10,000 offline pages, once synced and left alone,
must stay under 30 MB RSS and wake up for nothing but its heartbeat; issue #22 aims at 16 MB, 24 MB at the peak
of the first sync (`target_rss_ok`: met since round 13; `target_peak_ok`: not yet, docs/benchmarks.md).

  scripts/idle-daemon.py [--bin .build/release] [--broker-bin DIR] [--shared-swift-runtime] [--databases 200]
                         [--rows 50] [--idle 60] [--heartbeat 30] [--smaps FILE] [--peak-smaps FILE]
                         [--broker-smaps FILE] [--broker-only]

Starts a broker and a daemon from BIN on loopback in a temporary directory. On the broker: one page `root` with
DATABASES inline databases of ROWS rows each (10,201 pages by default). On the device: `pagesync offline add root`,
which makes the databases offline (inline in an offline page) and their first ROWS rows (database_row_limit), so
the whole tree. Once every page is complete, it samples the daemon for IDLE seconds: RSS (VmRSS) and peak
(VmHWM) from /proc/PID/status, and wake-ups: the context switches of every thread of the daemon
(/proc/PID/task/*/status), against what the heartbeat alone needs. The broker is sampled too, idle with no
connection (after the setup, 10 s after its last connection closed, before the daemon starts;
`broker_target_rss_ok`: the same 16 MiB; `--broker-only` stops there, sampling it again IDLE seconds later). Each
process's resident memory is broken down by mapping (/proc/PID/smaps: the heap and anonymous maps, the program,
each library). The first sync is sampled every 20 ms (`peak_sampled`: the largest sample, what it was made of and
when). Prints one JSON object.

A dynamic build's daemon and broker each load their own copy of the Swift runtime libraries (LD_LIBRARY_PATH to
copies in the temporary directory; `--shared-swift-runtime` loads the toolchain's): both give back the pages of
their code and libraries once a burst is over (MADV_PAGEOUT), and the kernel keeps every page another process maps
too. On a device (or a server) no other Swift program runs; on the machine that measures, the Swift compilers map
the toolchain's libswiftCore.so, which kept 8.6 MB of the runtime resident in the idle daemon whatever it did
(docs/benchmarks.md, issue #22 round 13). System libraries (libc, libcrypto, SQLite) stay shared, as on a device.
`--broker-bin` runs the broker from another build.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
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


class PeakSampler(threading.Thread):
    """Samples the daemon's /proc/PID/status every `interval` seconds while the first sync runs, and keeps the
    sample with the most resident memory: what it was made of (anonymous, file-backed) and, read at once,
    its resident kB by mapping. VmHWM says how high the peak was; this says what it was."""

    def __init__(self, pid, interval=0.02, keep_smaps=False):
        super().__init__(daemon=True)
        self.pid, self.interval, self.keep_smaps = pid, interval, keep_smaps
        self.stop = threading.Event()
        self.peak = {"rss_bytes": 0}
        self.peak_smaps = None

    def run(self):
        while not self.stop.is_set():
            try:
                status = read_status(self.pid)
                rss = int(status["VmRSS"].split()[0]) * 1024
                if rss > self.peak["rss_bytes"]:
                    self.peak = {"rss_bytes": rss,
                                 "rss_anon_bytes": int(status["RssAnon"].split()[0]) * 1024,
                                 "rss_file_bytes": int(status["RssFile"].split()[0]) * 1024,
                                 "seconds_after_start": round(time.monotonic() - self.started, 2),
                                 "resident_kb_by_mapping": smaps_breakdown(self.pid)}
                    if self.keep_smaps:
                        with open(f"/proc/{self.pid}/smaps") as smaps:
                            self.peak_smaps = smaps.read()
            except (FileNotFoundError, ProcessLookupError, KeyError):
                return
            time.sleep(self.interval)

    def start(self):
        self.started = time.monotonic()
        super().start()


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


def private_swift_runtime(program, directory):
    """Copies the Swift runtime libraries `program` loads (a dynamic build's libswiftCore.so,
    libFoundationEssentials.so, ...) into `directory`, for LD_LIBRARY_PATH; returns how many, 0 for a static build.
    MADV_PAGEOUT leaves alone every page another process maps, and on a machine that builds Swift the compilers map
    the toolchain's libswiftCore.so too: the daemon's figure would depend on who else runs. On a device no other
    Swift program runs; with its own copies, the daemon's pages of the runtime are its own, as they are there."""
    out = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
    copied = 0
    for line in out.splitlines():
        found = re.search(r"=> (\S*/swift/\S+\.so)", line)
        if found:
            os.makedirs(directory, exist_ok=True)
            subprocess.run(["cp", found.group(1), directory], check=True)
            copied += 1
    # Written back now: a page of a file still dirty in the page cache cannot be paged out (it would have to be
    # written first), and smaps counts it private dirty.
    os.sync()
    return copied


def cpu_and_faults(pid):
    """The process's CPU time (user + system, seconds) and minor page faults so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks, int(fields[7])


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
    parser.add_argument("--broker-bin", help="run the broker from this directory rather than BIN")
    parser.add_argument("--shared-swift-runtime", action="store_true",
                        help="a dynamic build's daemon loads the toolchain's Swift runtime, not its own copy")
    parser.add_argument("--databases", type=int, default=200)
    parser.add_argument("--rows", type=int, default=50)
    parser.add_argument("--idle", type=float, default=60)
    parser.add_argument("--heartbeat", type=int, default=30)
    parser.add_argument("--smaps", help="copy the idle daemon's /proc/PID/smaps to this file, to study its mappings")
    parser.add_argument("--peak-smaps", help="copy the daemon's /proc/PID/smaps at the first sync's largest sample to "
                        "this file (private dirty and clean pages of each mapping at the peak)")
    parser.add_argument("--broker-smaps", help="copy the idle broker's /proc/PID/smaps to this file")
    parser.add_argument("--broker-only", action="store_true",
                        help="measure the idle broker and stop there (no daemon, no sync)")
    args = parser.parse_args()
    binary = os.path.abspath(args.bin)
    work = tempfile.mkdtemp(prefix="pagesync-idle-")
    with open(f"{work}/broker.toml", "w") as config:
        config.write(f'[server]\nlisten = "127.0.0.1:0"\n[store]\npath = "{work}/broker.sqlite"\n')
    broker_log = open(f"{work}/broker.log", "w+")
    broker_binary = os.path.abspath(args.broker_bin) if args.broker_bin else binary
    broker_environment = dict(os.environ)
    broker_runtime_copies = 0
    if not args.shared_swift_runtime:
        broker_runtime_copies = private_swift_runtime(f"{broker_binary}/pagesync-broker",
                                                      f"{work}/broker-swift-runtime")
        if broker_runtime_copies:
            broker_environment["LD_LIBRARY_PATH"] = f"{work}/broker-swift-runtime"
    broker = subprocess.Popen([f"{broker_binary}/pagesync-broker", "--config", f"{work}/broker.toml"],
                              stdout=broker_log, stderr=subprocess.STDOUT, env=broker_environment)
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
        # The broker idle, its setup connections closed: it gives memory back after 5 s with no connection and no
        # work (looked at once a second), so 10 s.
        time.sleep(10)
        broker_idle = memory(broker.pid)
        if args.broker_smaps:
            with open(f"/proc/{broker.pid}/smaps") as source, open(args.broker_smaps, "w") as copy:
                copy.write(source.read())
        broker_report = {
            "broker_idle": broker_idle, "broker_bin": broker_binary,
            # Issue #22's target for an idle broker with no connection: the daemon's, 16 MiB.
            "broker_target_rss_ok": broker_idle["rss_bytes"] <= 16 * 1024 * 1024,
            "broker_private_swift_runtime_libraries": broker_runtime_copies,
        }
        if args.broker_only:
            # And again after IDLE seconds more: what its once-a-second status sampler and its change log's
            # pruning (once a minute) bring back.
            time.sleep(args.idle)
            later = memory(broker.pid)
            print(json.dumps({"pages": len(mutations), **broker_report,
                              "broker_idle_later": later, "broker_idle_later_seconds": 10 + args.idle}, indent=1))
            return

        with open(f"{work}/pagesyncd.toml", "w") as config:
            config.write(f'[broker]\nurl = "{base}"\n[store]\npath = "{work}/pagesyncd.sqlite"\n'
                         f'[api]\nsocket = "{work}/pagesyncd.sock"\n[offline]\ndatabase_row_limit = {args.rows}\n'
                         f'[sync]\nheartbeat_interval = {args.heartbeat}\n')
        environment = dict(os.environ)
        runtime_copies = 0
        if not args.shared_swift_runtime:
            runtime_copies = private_swift_runtime(f"{binary}/pagesyncd", f"{work}/swift-runtime")
            if runtime_copies:
                environment["LD_LIBRARY_PATH"] = f"{work}/swift-runtime"
        daemon = subprocess.Popen([f"{binary}/pagesyncd", "--config", f"{work}/pagesyncd.toml"],
                                  stdout=open(f"{work}/daemon.log", "w"), stderr=subprocess.STDOUT,
                                  env=environment)
        sampler = PeakSampler(daemon.pid, keep_smaps=bool(args.peak_smaps))
        sampler.start()
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
        sync_cpu, _ = cpu_and_faults(daemon.pid)
        time.sleep(2)  # let the last answers and writes settle
        sampler.stop.set()
        sampler.join()

        before, threads = wakeups(daemon.pid)
        idle_cpu_before, faults_before = cpu_and_faults(daemon.pid)
        samples = []
        end = time.monotonic() + args.idle
        while time.monotonic() < end:
            status = read_status(daemon.pid)
            samples.append(int(status["VmRSS"].split()[0]) * 1024)
            time.sleep(1)
        after, _ = wakeups(daemon.pid)
        idle_cpu_after, faults_after = cpu_and_faults(daemon.pid)
        if args.smaps:
            with open(f"/proc/{daemon.pid}/smaps") as source, open(args.smaps, "w") as copy:
                copy.write(source.read())
        if args.peak_smaps and sampler.peak_smaps:
            with open(args.peak_smaps, "w") as copy:
                copy.write(sampler.peak_smaps)
        status = read_status(daemon.pid)
        heartbeats = args.idle / args.heartbeat
        report = {
            "offline_pages": pages, "sync_seconds": round(sync_seconds, 1), "idle_seconds": args.idle,
            "daemon_cpu_seconds_to_synced": round(sync_cpu, 2),
            "idle_cpu_seconds": round(idle_cpu_after - idle_cpu_before, 3),
            "idle_minor_faults": faults_after - faults_before,
            "rss_bytes": samples[-1], "rss_min_bytes": min(samples), "rss_max_bytes": max(samples),
            "rss_peak_bytes": int(status["VmHWM"].split()[0]) * 1024,
            "peak_sampled": sampler.peak,
            "rss_anon_bytes": int(status["RssAnon"].split()[0]) * 1024,
            "rss_file_bytes": int(status["RssFile"].split()[0]) * 1024, "threads": threads,
            "context_switches": after - before, "heartbeat_interval": args.heartbeat,
            "heartbeats_expected": heartbeats,
            "switches_per_heartbeat": round((after - before) / heartbeats, 1) if heartbeats else None,
            "resident_kb_by_mapping": smaps_breakdown(daemon.pid),
            # Issue #22's targets: 16 MB idle (met since round 13, both builds), 24 MB at the peak of the first sync
            # (not yet: docs/benchmarks.md, "The idle daemon at rest and at the peak"); issue #6's 30 MB, met.
            "target_rss_ok": samples[-1] <= 16 * 1024 * 1024,
            "target_peak_ok": int(status["VmHWM"].split()[0]) * 1024 <= 24 * 1024 * 1024,
            "issue6_rss_ok": samples[-1] <= 30 * 1024 * 1024,
            **broker_report,
            "private_swift_runtime_libraries": runtime_copies,
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
