"""`pagesync-load` stopped by SIGTERM or SIGINT mid-run stops the servers it started (issue #19).

Usage: load_signal.py BIN_DIR

For each signal: `pagesync-load run B1 --store postgres --brokers 2 --bus redis` in a session of its own (so only
it gets the signal, as from `kill PID`); once its four children run (PostgreSQL through runuser, redis-server, two
brokers), the signal goes to pagesync-load alone. It must exit non-zero within 30 s saying `interrupted`, and every
server it started (its children and the postmaster, whose pid is in postmaster.pid) must be gone, PostgreSQL's
temporary directory removed. Whatever survives is stopped by pid before the script fails. Prints "OK ..." per
check and "ALL OK" at the end.
"""
import os
import re
import signal
import subprocess
import sys
import time


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run(load, sig):
    process = subprocess.Popen(
        [load, "run", "B1", "--store", "postgres", "--brokers", "2", "--bus", "redis", "--subscribers", "10",
         "--rate", "50", "--seconds", "120", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    servers, directory, postmaster = [], None, None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and process.poll() is None:
        servers = children(process.pid)
        commands = [cmdline(c) for c in servers]
        found = [re.search(r"-D (/tmp/pagesync-load-pg-\w+)/data", c) for c in commands]
        directory = next((m.group(1) for m in found if m), None)
        if len(servers) >= 4 and sum("pagesync-broker" in c for c in commands) == 2 and directory:
            try:
                with open(os.path.join(directory, "data", "postmaster.pid")) as f:
                    postmaster = int(f.readline())
                break
            except (OSError, ValueError):
                pass
        time.sleep(0.1)
    if postmaster is None:
        process.kill()
        out, err = process.communicate()
        raise SystemExit(f"FAILED: the cluster never ran: {servers} {err[-2000:]}")
    time.sleep(2)  # the run under way
    watched = servers + [postmaster]
    os.kill(process.pid, sig)
    try:
        _, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        err += "\n(did not exit within 30 s: killed)"
    left = [(pid, cmdline(pid)) for pid in watched if alive(pid)]
    for pid, _ in left:  # ours: stopped by pid before failing
        try:
            os.kill(pid, signal.SIGINT if pid == postmaster else signal.SIGTERM)
        except OSError:
            pass
    name = signal.Signals(sig).name
    failures = []
    if process.returncode == 0 or "interrupted" not in err:
        failures.append(f"{name}: expected a non-zero exit saying interrupted, got {process.returncode}: "
                        f"{err.strip()[-500:]}")
    if left:
        failures.append(f"{name}: still running after pagesync-load exited: {left}")
    if os.path.exists(directory):
        failures.append(f"{name}: PostgreSQL's directory {directory} is still there")
    if not failures:
        print(f"OK {name}: pagesync-load exited {process.returncode} (interrupted); its {len(watched)} processes "
              "(runuser and the postmaster, redis-server, two brokers) are gone and PostgreSQL's directory removed", flush=True)
    return failures


def main():
    load = os.path.join(os.path.abspath(sys.argv[1]), "pagesync-load")
    failures = run(load, signal.SIGTERM) + run(load, signal.SIGINT)
    if failures:
        print("FAILED: " + "; ".join(failures), flush=True)
        sys.exit(1)
    print("ALL OK", flush=True)


if __name__ == "__main__":
    main()
