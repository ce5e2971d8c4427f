"""Fault injection with an oracle: one broker and D daemons as real processes, each daemon behind its own TCP relay,
a seeded random workload from every device while a seeded fault schedule kills (SIGKILL) and restarts the broker
and the daemons, cuts and delays their connections. At the end, with the faults healed and every device synced,
the oracle checks what the run recorded as it went.

The faults: SIGKILL of a daemon (restarted at once); of a daemon whose batch the broker committed while the answer
waits in its proxy (`holding`); of the broker a few milliseconds after an edit, or with a committed batch's answer
held; the broker down for a few steps; a device's proxy cut for a few steps; its answers delayed. Every SIGKILL is
followed by `PRAGMA integrity_check` of the killed process's store.

With --extra (comma separated; none by default, so that the plans of the classic seeds stay what they were):
 - crash: a process (the broker or a daemon) is restarted with the test hook PAGESYNC_TEST_CRASH_AT=LABEL:N
   (Sources/SQLiteStore/TestCrashPoint.swift: the n-th write statement, BEGIN, COMMIT, after COMMIT, or the
   daemon's `edit`, `acknowledge` and `delta` points half-way through those transactions), edits run until it
   dies there; the run checks it died by SIGKILL with the hook's line in its log, checks its store and restarts
   it. The last line counts the crash points reached and how many landed inside a transaction;
 - restore: a backup of the broker's store (online with `sqlite3 .backup`, or its files while stopped), restored
   a few steps later as docs/operations.md says (stopped, files replaced, a new epoch, started);
 - stall: a device's relay forwards only part of the next chunk in one direction (half a WebSocket frame or an
   HTTP answer or request), holds the rest 0.2 to 12 s, then sends it or resets both connections.

With --brokers 2, two brokers share ONE SQLite store file (WAL, busy timeout: a stand-in until the PostgreSQL
store lands) and every device lists both (`[broker] url`, each through a relay of its own, the devices alternating
which comes first): the broker faults take turns between the brokers, so a device whose broker is killed fails
over to the other (when one stays down, each device that was on it, its network not cut, must be live on the
other within 30 s), and a broker down while the other is killed leaves the devices between brokers. A device's
network faults (cut, delay, stall, held answers) hit both its relays. The plan is the same as with one broker.
The brokers share a bus too: Debian's redis-server on a free loopback port (never skipped; stopped by pid), every
broker's `[bus] url`. Before the healing runs any `sync`, every device's offline pages must already equal the
store's (what a device on one broker missed of the other's commits came by push over the bus, or by the catch-up
of a reconnect or of a bus that came back, never by a sync), and a probe must reach each device without a sync: a
title set over HTTP through the broker the device is NOT on, on a page it keeps offline (in the oracle's model as
any acknowledged edit). Not with --extra restore (a restore stops the one broker that owns the store). Two more
extras need --brokers 2:
 - redis: Redis killed (SIGKILL) for a few steps, probes made meanwhile, then Redis started again on the same
   port: once both buses are live, each probe must reach its device without a sync (the brokers make their
   devices catch up from the store when their bus is back; without that, or without the bus, this fails);
 - concurrent: in one step, every device edits one page at once (own property or a new block), while two more
   clients post batches through both brokers at once to the same pages (one property each, straight over HTTP);
   from those clients' answers and from the store (sqlite3), every commit of a page got its own lastUpdatedTime,
   each client saw a page's times strictly increase, the change log holds each one and the page's time is at
   least the newest (the oracle's model holds their edits too: exactly once).

With --store postgres, the brokers share a PostgreSQL instead (the configuration issue #19 is about): the run
starts its own (Debian's initdb and pg_ctl in a new directory under /tmp, a unix socket there only; as root through
`runuser -u postgres`; never skipped; stopped by pid), every broker gets `[store] url`, and the oracle reads the
store with `psql` and checks its files with `pg_amcheck` instead of sqlite3 (not with crash or restore: SQLite's).
One more extra needs it:
 - postgres: PostgreSQL stopped at once (`pg_ctl stop -m immediate`: every backend killed, no checkpoint) for a
   few steps, then started again (crash recovery). While it is gone, a batch through each live broker must be
   answered 503 and /healthz 503; once it is back, pg_amcheck passes, no batch answered 503 is in the store (its
   client never got a row), each live broker applies a batch within 30 s by itself (the same batch sent again
   after each refusal) and its /healthz is 200, and an edit through each device's other broker reaches it by push.
   Broker faults, Redis faults and concurrent steps wait until PostgreSQL is back (they read the store).

Usage: faults.py BIN_DIR [--seed S] [--steps N] [--devices D] [--brokers 1|2] [--store sqlite|postgres]
                 [--extra crash,restore,stall,redis,concurrent,postgres] [--print-plan]

The plan (every workload step and every fault) is a pure function of (seed, steps, devices): a failing run prints
them and its plan, and `--seed S --steps N --devices D` replays it. Outcomes may still differ between runs by
timing (an edit refused with 503 in one run may pass in another); the oracle judges each run by what was
acknowledged in it.

The oracle:
 1. exactly once: each device's acknowledged mutations (CLI exit 0, with their ids) are applied on the broker:
    `client.last_mutation_id` is the device's last id and its next id; the broker's pages, properties, views and
    blocks are those of a model that applies every acknowledged, not rejected mutation in acknowledgement order
    (which is HLC order: every process reads one wall clock and the steps are sequential) with last-writer-wins;
    nothing is on the broker that no acknowledged mutation made; every block is where docs/protocol.md's rule
    put it against the page as the broker had it when the add applied (right after the block named if the
    page had it, else last: a device may name a block whose push has not reached the broker yet); no
    create or block add is ever rejected `already_exists` (ids are unique per plan: that would be a re-application);
 2. every device's offline pages equal the broker's state (title, deleted, parent, properties, blocks in order,
    a database's rows in view, a page's inline databases), read with sqlite3 (rows and databases by GET);
 3. every device's forest satisfies its invariant (each offline_page impacted by a row, each row's page offline,
    each tree has its origin row, `from` chains lead to the origin), its origin rows are the reasons the workload
    acknowledged, and it equals the forest of a fresh device given the same reasons that syncs from scratch
    (but for origins the broker does not have, which a connected device refuses: this one keeps them, marked in
    missing_page);
 4. no rejected mutation vanished: the queue's `rejected` rows are `pagesync conflicts`, the failed count matches,
    every conflict is an acknowledged mutation, a `page_deleted` one names a page deleted on the broker;
 5. `PRAGMA integrity_check` is ok on every store (also after each SIGKILL, on the killed process's store);
 6. no page was shown incomplete: a `pagesync show` answered from the local store is never of an offline page with
    complete = 0, and holds every block the device itself added there (acknowledged, never rejected, not deleted
    by anyone before the show): read-your-writes across kills and downloads;
 7. after each restore, every mutation a device still held (queued) and every one the old store acknowledged
    after the backup is on the broker (1 checks their effects): a restored store loses no edit a device keeps.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_e2e as e2e  # noqa: E402  (the harness: processes, proxies, polls)
from daemon_e2e import CheckFailed, note, wait_until  # noqa: E402

ROW_LIMIT = 3  # [offline] database_row_limit of every device: small, so view changes move rows in and out
RECENT_LIMIT = 3  # [offline] recent_limit
PROPERTY_NAMES = ["Rank", "Status", "Note"]
MUTATIONS = {"create_page", "create_database", "create_row", "set_title", "set_property", "unset_property",
             "block_add", "block_edit", "block_delete", "delete_page", "view_set"}
ALLOWED_REJECTIONS = {"page_deleted", "unknown_page", "unknown_block"}
# The faults of --extra (none by default, so the plans of older seeds stay what they were):
EXTRAS = {"crash", "restore", "stall", "redis", "concurrent", "postgres"}
# The extras that need two brokers (and their bus).
TWO_BROKER_EXTRAS = {"redis", "concurrent"}
CONCURRENT_ROUNDS = 6  # batches each HTTP client posts in a concurrent step
REFUSED_WRITER = "pw"  # the HTTP client whose batches go in while PostgreSQL is gone: none may ever be applied
WRITERS = ["cw1", "cw2"]  # the HTTP clients of concurrent steps, one per broker; "Writer" + digit: their property
# crash: the test hook PAGESYNC_TEST_CRASH_AT=LABEL:N (TestCrashPoint), with N drawn up to these bounds.
BROKER_POINTS = {"write": 60, "begin": 5, "commit": 5, "committed": 5}
DAEMON_POINTS = {"write": 30, "begin": 10, "commit": 10, "committed": 10, "edit": 4, "acknowledge": 3, "delta": 6}
CRASH_EDITS = 6  # workload edits run while a crash point is armed, until the process dies
CRASH_LINE = "pagesync test crash point: "


# The plan: a pure function of (seed, steps, devices).


def make_plan(seed, steps, devices, extra=frozenset()):
    rng = random.Random(seed)
    names = [chr(ord("A") + i) for i in range(devices)]
    counters = {name: 0 for name in names}
    pages, databases, blocks = [], [], {}  # every id the plan ever made, whatever became of it
    plan = []
    pending = []  # (step, event): restores and restarts scheduled by a fault
    cut, down, redis_down = set(), False, False
    pg_down = False  # only with "postgres": the plans without it stay what they were
    backup_taken = False  # a backup waits for its restore

    def fresh(device, kind):
        counters[device] += 1
        return f"{device}{kind}{counters[device]}"

    def workload(device, step):
        r = rng.random()
        if not pages or r < 0.10:
            page = fresh(device, "p")
            parent = rng.choice(pages) if pages and rng.random() < 0.3 else None
            pages.append(page)
            blocks[page] = []
            return {"op": "create_page", "page": page, "parent": parent, "title": f"{page} made at {step}"}
        if r < 0.15:
            db = fresh(device, "d")
            plain = [p for p in pages if p not in databases]  # a database's parent is a page (or a row)
            parent = rng.choice(plain) if plain and rng.random() < 0.5 else None
            pages.append(db)
            databases.append(db)
            blocks[db] = []
            return {"op": "create_database", "page": db, "parent": parent, "title": f"{db} made at {step}"}
        if r < 0.25 and databases:
            row = fresh(device, "r")
            db = rng.choice(databases)
            pages.append(row)
            blocks[row] = []
            props = {"Rank": rng.randrange(10)} if rng.random() < 0.7 else {}
            if rng.random() < 0.5:
                props["Status"] = rng.choice(["Todo", "Done"])
            return {"op": "create_row", "page": row, "database": db, "title": f"{row} made at {step}",
                    "properties": props}
        page = rng.choice(pages)
        if r < 0.35:
            return {"op": "set_title", "page": page, "title": f"{device} titled at {step}"}
        if r < 0.45:
            name = rng.choice(PROPERTY_NAMES)
            if rng.random() < 0.2:
                return {"op": "unset_property", "page": page, "name": name}
            value = rng.randrange(10) if name == "Rank" else rng.choice(["Todo", "Done", f"n{step}"])
            return {"op": "set_property", "page": page, "name": name, "value": value}
        if r < 0.57:
            block = fresh(device, "b")
            after = rng.choice(blocks[page]) if blocks[page] and rng.random() < 0.7 else None
            blocks[page].append(block)
            return {"op": "block_add", "page": page, "block": block, "after": after, "text": f"{block} at {step}"}
        if r < 0.64:
            owned = [(p, b) for p in pages for b in blocks[p]]
            if owned:
                p, block = rng.choice(owned)
                return {"op": "block_edit", "page": p, "block": block, "text": f"{device} edited at {step}"}
            return {"op": "visit", "page": page}
        if r < 0.67:
            owned = [(p, b) for p in pages for b in blocks[p]]
            if owned:
                p, block = rng.choice(owned)
                return {"op": "block_delete", "page": p, "block": block}
            return {"op": "visit", "page": page}
        if r < 0.69:
            return {"op": "delete_page", "page": page}
        if r < 0.75:
            return {"op": "offline_add", "page": page}
        if r < 0.78:
            return {"op": "offline_remove", "page": page}
        if r < 0.81:
            return {"op": "favorite_add", "page": page}
        if r < 0.83:
            return {"op": "favorite_remove", "page": page}
        if r < 0.88:
            return {"op": "visit", "page": page}
        if r < 0.91 and databases:
            db = rng.choice(databases)
            choice = rng.randrange(4)
            view = [None, {"sort": ["Rank", False]}, {"sort": ["Rank", True]}, {"filter": ["Status", "Done"]}][choice]
            return {"op": "view_set", "page": db, "view": view}
        if r < 0.97:
            return {"op": "show", "page": page}
        return {"op": "sync"}

    def edit(device, step):
        """A workload step that queues a mutation (not a read, a sync or an offline reason): the push to hit."""
        while True:
            op = workload(device, step)
            if op["op"] in MUTATIONS:
                return op

    for step in range(steps):
        still = []
        for due, event in pending:
            if due <= step:
                plan.append(event)
                if event["fault"] == "restore":
                    cut.discard(event["device"])
                if event["fault"] == "broker_up":
                    down = False
                if event["fault"] == "restore_backup":
                    backup_taken = False
                if event["fault"] == "redis_up":
                    redis_down = False
                if event["fault"] == "postgres_up":
                    pg_down = False
            else:
                still.append((due, event))
        pending = still
        device = rng.choice(names)
        r = rng.random()
        if r < 0.04:
            plan.append({"fault": "kill_daemon", "device": device})
        elif r < 0.07:
            # The broker commits the batch, its answer waits in the proxy, the daemon dies before reading it.
            plan.append({"fault": "kill_daemon_in_flight", "device": device, "edit": edit(device, step)})
        elif r < 0.09 and not down and not pg_down:
            plan.append({"fault": "kill_broker"})
        elif r < 0.12 and not down and not pg_down:
            op, draw = edit(device, step), rng.randrange(0, 40)
            if draw < 24:
                # SIGKILL of the broker a few milliseconds after an edit: the push is on its way or in the commit.
                plan.append({"fault": "kill_broker_after_edit", "device": device, "edit": op, "delay_ms": draw // 3})
            else:
                # The broker commits the batch and dies before its answer, held in the proxy, reaches the daemon.
                plan.append({"fault": "kill_broker_in_flight", "device": device, "edit": op})
        elif r < 0.135 and not down and not pg_down:
            down = True
            plan.append({"fault": "broker_down"})
            pending.append((step + rng.randrange(3, 12), {"fault": "broker_up"}))
        elif r < 0.17 and device not in cut:
            cut.add(device)
            plan.append({"fault": "cut", "device": device})
            pending.append((step + rng.randrange(3, 25), {"fault": "restore", "device": device}))
        elif r < 0.19:
            plan.append({"fault": "delay", "device": device, "ms": rng.randrange(100, 1500)})
        elif "crash" in extra and r < 0.25:
            # Restart a process with a crash point armed, run edits until it dies there (or give up), restart.
            target = device if down or rng.random() < 0.5 else "broker"
            points = BROKER_POINTS if target == "broker" else DAEMON_POINTS
            point = rng.choice(sorted(points))
            edits = []
            for _ in range(CRASH_EDITS):
                # A daemon's own edits hit its edit and acknowledge points; the others' its delta points.
                who = device if target != "broker" and rng.random() < 0.7 else rng.choice(names)
                edits.append(dict(edit(who, step), device=who))
            plan.append({"fault": "crash_at", "target": target, "point": point,
                         "n": rng.randrange(1, points[point] + 1), "edits": edits})
        elif "restore" in extra and r < 0.265 and not down and not backup_taken:
            # A backup of the broker's store now, restored (stopped, replaced, new epoch) a few steps later.
            backup_taken = True
            plan.append({"fault": "backup", "online": rng.random() < 0.7})
            pending.append((step + rng.randrange(4, 30), {"fault": "restore_backup"}))
        elif "stall" in extra and r < 0.30:
            # The device's relay forwards part of the next chunk (half a frame or answer), holds the rest.
            ms = rng.choice([rng.randrange(200, 2000), rng.randrange(2000, 12000)])
            plan.append({"fault": "stall", "device": device, "from_broker": rng.random() < 0.6,
                         "bytes": rng.randrange(1, 60), "ms": ms, "reset": rng.random() < 0.4})
        elif "redis" in extra and r < 0.32 and not redis_down and not pg_down:
            # Redis killed with SIGKILL, started again on its port a few steps later.
            redis_down = True
            plan.append({"fault": "kill_redis"})
            pending.append((step + rng.randrange(2, 12), {"fault": "redis_up"}))
        elif "concurrent" in extra and r < 0.35 and not pg_down:
            # Every device edits one page at once (disjoint fields: the model needs no order between them), and
            # the HTTP clients post their batches through both brokers at once.
            page = rng.choice(pages)
            edits = []
            for index, who in enumerate(names[:len(PROPERTY_NAMES)]):
                if rng.random() < 0.5:
                    name = PROPERTY_NAMES[index]
                    value = rng.randrange(10) if name == "Rank" else rng.choice(["Todo", "Done", f"n{step}"])
                    edits.append({"op": "set_property", "page": page, "name": name, "value": value, "device": who})
                else:
                    block = fresh(who, "b")
                    blocks[page].append(block)
                    edits.append({"op": "block_add", "page": page, "block": block, "after": None,
                                  "text": f"{block} at {step}", "device": who})
            plan.append({"fault": "concurrent", "edits": edits, "pick": rng.randrange(1 << 30)})
        elif "postgres" in extra and r < 0.37 and not pg_down and not redis_down and not down:
            # PostgreSQL stopped at once (no checkpoint) for a few steps, started again (crash recovery). Broker
            # restarts, Redis faults and concurrent steps wait until it is back (they read the store).
            pg_down = True
            plan.append({"fault": "kill_postgres"})
            pending.append((step + rng.randrange(2, 8), {"fault": "postgres_up"}))
        else:
            op = workload(device, step)
            op["device"] = device
            plan.append(op)
    for _, event in pending:
        plan.append(event)
    return plan


def describe(event):
    return json.dumps(event, separators=(",", ":"))


# Running it.


class Relays:
    """A device's relays, one per broker (--brokers 2), handled as one: a fault of the device's network (a cut, held
    answers, a stall) hits every one of them, whichever broker the device is on."""

    def __init__(self, relays):
        self.relays = relays

    @property
    def holding(self):
        return any(relay.holding for relay in self.relays)

    @holding.setter
    def holding(self, value):
        for relay in self.relays:
            relay.holding = value

    @property
    def stall(self):
        return next((relay.stall for relay in self.relays if relay.stall is not None), None)

    @stall.setter
    def stall(self, value):
        for relay in self.relays:
            relay.stall = dict(value) if value is not None else None

    @property
    def stalls(self):
        return [played for relay in self.relays for played in relay.stalls]

    @property
    def up(self):
        return all(relay.up for relay in self.relays)

    def cut(self, quiet=False):
        for relay in self.relays:
            relay.cut(quiet=quiet)

    def restore(self):
        for relay in self.relays:
            relay.restore()


class Run:
    def __init__(self, scenario, seed, devices, brokers=1, store="sqlite"):
        self.s = scenario
        self.seed = seed
        # --store postgres: a PostgreSQL of the run's own, every broker's [store] url (else one SQLite file).
        self.pg = scenario.postgres() if store == "postgres" else None
        # Several brokers share a bus: one redis-server (none with one broker).
        self.redis = scenario.redis() if brokers > 1 else None
        # The oracle reads the (shared) store through the first broker.
        self.broker = scenario.broker(name="broker" if brokers == 1 else "broker1", bus=self.redis, store=self.pg)
        # Further brokers share the first one's store: its SQLite file (WAL, busy timeout), or the PostgreSQL.
        self.brokers = [self.broker] + [scenario.broker(name=f"broker{i + 1}", store=self.broker.store,
                                                        bus=self.redis)
                                        for i in range(1, brokers)]
        for broker in self.brokers if self.redis else []:
            broker.wait_bus_live()
        self.up = [True] * brokers
        self.kills = 0  # broker faults so far: with several brokers they take turns
        self.names = [chr(ord("A") + i) for i in range(devices)]
        self.proxies, self.devices, self.clients = {}, {}, {}
        for index, name in enumerate(self.names):
            relays = [e2e.Proxy(scenario, broker.port) for broker in self.brokers]
            # Device i lists broker i (mod the count) first: the devices start spread over the brokers.
            first = index % len(relays)
            relays = relays[first:] + relays[:first]
            self.proxies[name] = relays[0] if len(relays) == 1 else Relays(relays)
            url = relays[0].url if len(relays) == 1 else [relay.url for relay in relays]
            self.devices[name] = scenario.device(name, url, database_row_limit=ROW_LIMIT,
                                                 recent_limit=RECENT_LIMIT)
            self.clients[name] = self.devices[name].status()["clientId"]
        self.acked = []  # in acknowledgement order: {"seq", "device", "op", "ids"}
        self.ambiguous = []  # commands that may or may not have taken effect
        self.shows = []  # (device, page, block ids, seq) of shows answered from the local store
        self.reasons = {name: {"toggled": set(), "favorite": set(), "visits": []} for name in self.names}
        self.timers = []
        self.counts = {}
        self.last_ack = 0.0
        self.crashes = []  # (target, point, n, reached: None | "start" | "run", in a transaction)
        self.backup = None  # the path of the broker store's backup waiting for its restore
        self.held_at_restore = []  # per restore, per device: mutation ids queued (not acknowledged by the broker)
        self.lost_at_restore = []  # per restore, per device: ids the broker acknowledged after the backup
        self.lock = threading.Lock()  # the records above, written by the threads of a concurrent step
        self.writer_ids = {writer: 0 for writer in WRITERS}  # each HTTP client's last mutation id sent
        self.probe_stalls = {}  # (device, probe title): how many stalls its relays had played when it was made
        self.writer_stamp = 0  # the last HLC millisecond an HTTP client stamped
        self.concurrent = {"batches": 0, "commits": 0, "pages": set()}  # what concurrent steps checked
        self.gap_probes = []  # probes made while Redis was down (probe_across)
        self.refused = []  # (broker, mutation id, page, title) of batches answered 503 while PostgreSQL was gone
        self.refused_id = 0  # REFUSED_WRITER's last mutation id
        self.recoveries = []  # seconds from PostgreSQL's start to each live broker's first applied batch

    # Commands.

    def cli(self, device, *args):
        run = self.devices[device].run(*args, timeout=60)
        return run

    def command(self, op):
        kind, page = op["op"], op.get("page")
        if kind == "create_page":
            args = ["create", "page", "--id", page, "--title", op["title"]]
            if op["parent"]:
                args += ["--parent", op["parent"]]
        elif kind == "create_database":
            args = ["create", "database", "--id", page, "--title", op["title"]]
            if op["parent"]:
                args += ["--parent", op["parent"]]
        elif kind == "create_row":
            args = ["create", "row", "--database", op["database"], "--id", page, "--title", op["title"]]
            for name, value in op["properties"].items():
                args += ["--set", f"{name}={value}"]
        elif kind == "set_title":
            args = ["edit", page, "--title", op["title"]]
        elif kind == "set_property":
            args = ["edit", page, "--set", f"{op['name']}={op['value']}"]
        elif kind == "unset_property":
            args = ["edit", page, "--unset", op["name"]]
        elif kind == "block_add":
            args = ["block", "add", page, "--id", op["block"], "--text", op["text"]]
            if op["after"]:
                args += ["--after", op["after"]]
        elif kind == "block_edit":
            args = ["block", "edit", op["block"], "--text", op["text"]]
        elif kind == "block_delete":
            args = ["block", "delete", op["block"]]
        elif kind == "delete_page":
            args = ["delete", page]
        elif kind == "view_set":
            args = ["view", "set", page]
            view = op["view"] or {}
            if "sort" in view:
                args += ["--sort", view["sort"][0] + (":desc" if view["sort"][1] else "")]
            if "filter" in view:
                args += ["--filter", f"{view['filter'][0]}={view['filter'][1]}"]
        elif kind in ("offline_add", "offline_remove", "favorite_add", "favorite_remove"):
            noun, verb = kind.split("_")
            args = [noun, verb, page]
        elif kind == "visit":
            args = ["visit", page]
        elif kind == "show":
            args = ["show", page]
        else:
            args = ["sync"]
        return args

    def do(self, device, op):
        """Runs one workload step on `device`; records what was acknowledged."""
        # HLC times are wall-clock milliseconds first: two acknowledged edits never share one.
        while time.time() - self.last_ack < 0.003:
            pass
        run = self.cli(device, *self.command(op))
        with self.lock:
            return self.record(device, op, run)

    def record(self, device, op, run):
        kind = op["op"]
        self.counts[(kind, run.returncode == 0)] = self.counts.get((kind, run.returncode == 0), 0) + 1
        if run.returncode != 0:
            message = run.stderr.strip()
            if run.returncode == 75 or "may or may not" in message:
                self.ambiguous.append((device, op, message))
                note(f"[{device}] ambiguous: {describe(op)}: {message}")
            return None
        self.last_ack = time.time()
        answer = json.loads(run.stdout) if run.stdout.strip() else {}
        if kind == "show":
            if answer.get("source") == "local":
                self.check_shown(device, op["page"], answer)
            return answer
        if kind in ("sync",):
            return answer
        reasons = self.reasons[device]
        if kind == "offline_add":
            reasons["toggled"].add(op["page"])
        elif kind == "offline_remove":
            reasons["toggled"].discard(op["page"])
        elif kind == "favorite_add":
            reasons["favorite"].add(op["page"])
        elif kind == "favorite_remove":
            reasons["favorite"].discard(op["page"])
        elif kind == "visit":
            reasons["visits"].append(op["page"])
        else:
            ids = answer.get("mutationIds", [])
            if len(ids) != 1:
                raise CheckFailed(f"[{device}] {describe(op)} acknowledged {len(ids)} mutation ids: {answer}")
            self.acked.append({"seq": len(self.acked), "device": device, "op": op, "id": ids[0]})
        return answer

    def check_shown(self, device, page, answer):
        """(6) A page answered from the local store is never an incomplete offline page."""
        rows = self.devices[device].rows(f"SELECT complete FROM offline_page WHERE page_id = '{page}'")
        if rows and not rows[0]["complete"]:
            raise CheckFailed(f"[{device}] show {page} answered from the local store while the page is offline "
                              f"with complete = 0: {answer}")
        self.shows.append((device, page, [b["id"] for b in answer.get("blocks", [])], len(self.acked)))

    # Faults.

    def kill_daemon(self, device, then=None):
        d = self.devices[device]
        code = d.stop(signal.SIGKILL)
        if code != -signal.SIGKILL:
            raise CheckFailed(f"{device}: pagesyncd exited {code} before SIGKILL reached it")
        self.integrity(d.store, f"{device}'s store after SIGKILL")
        if then:
            then()
        d.start(wait_connected=False)

    @property
    def broker_up(self):
        """Whether the first broker (the only one of the crash points, backups and restores) is up."""
        return self.up[0]

    @broker_up.setter
    def broker_up(self, value):
        self.up[0] = value

    def target(self):
        """The broker the next broker fault hits: they take turns (always the first with one broker)."""
        index = self.kills % len(self.brokers)
        self.kills += 1
        return index

    def kill_broker(self, index=0):
        broker = self.brokers[index]
        code = broker.stop(signal.SIGKILL)
        if code != -signal.SIGKILL:
            raise CheckFailed(f"{broker.name} exited {code} before SIGKILL reached it")
        if not self.pg:  # a broker's SIGKILL cannot harm PostgreSQL's files: checked after its own stops
            self.integrity(broker.store, f"the store after SIGKILL of {broker.name}")
        self.up[index] = False

    def start_broker(self, index=0):
        self.brokers[index].start()
        self.up[index] = True

    def integrity(self, path, what):
        if isinstance(path, e2e.Postgres):
            path.check(what)
            return
        rows = e2e.sqlite_rows(path, "PRAGMA integrity_check")
        if rows != [{"integrity_check": "ok"}]:
            raise CheckFailed(f"integrity_check of {what}: {rows}")

    def hold(self, device, ms):
        proxy = self.proxies[device]
        proxy.holding = True
        timer = threading.Timer(ms / 1000, lambda: setattr(proxy, "holding", False))
        timer.daemon = True
        timer.start()
        self.timers.append(timer)

    # Crash points (the test hook PAGESYNC_TEST_CRASH_AT), backups and restores, stalls.

    def crash_at(self, event):
        """Restarts the target armed with LABEL:N, runs the event's edits until the target dies at its crash
        point, checks it died there (SIGKILL, the hook's line in its log) and its store, restarts it unarmed."""
        target, spec = event["target"], f"{event['point']}:{event['n']}"
        env = {"PAGESYNC_TEST_CRASH_AT": spec}
        if target == "broker":
            if not self.broker_up:
                self.counts["crash_at skipped"] = self.counts.get("crash_at skipped", 0) + 1
                return
            self.kill_broker()
            server, store, start = self.broker, self.broker.store, lambda: self.broker.start(env=env)
        else:
            server = self.devices[target]
            store = server.store
            code = server.stop(signal.SIGKILL)
            if code != -signal.SIGKILL:
                raise CheckFailed(f"{target}: pagesyncd exited {code} before SIGKILL reached it")
            start = lambda: server.start(wait_connected=False, env=env)  # noqa: E731
        reached = None
        try:
            start()
            if target == "broker":
                self.broker_up = True
        except CheckFailed as error:
            if server.process.poll() is None or CRASH_LINE not in self.log_of(server):
                raise
            reached = "start"
            note(f"{target} died at {spec} while starting: {error}")
        if reached is None:
            for op in event["edits"]:
                self.do(op["device"], op)
                deadline = time.monotonic() + 0.7
                while server.process.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.02)
                if server.process.poll() is not None:
                    break
            deadline = time.monotonic() + 2
            while server.process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if server.process.poll() is not None:
                reached = "run"
        log = self.log_of(server)
        if reached is None:
            note(f"{target}: crash point {spec} not reached; SIGKILL instead")
            self.crashes.append((target, event["point"], event["n"], None, None))
            if target == "broker":
                self.kill_broker()
                self.start_broker()
            else:
                self.kill_daemon(target)
            return
        code = server.process.wait(timeout=15)
        line = next((ln for ln in log.splitlines() if ln.startswith(CRASH_LINE)), None)
        if code != -signal.SIGKILL or line is None:
            raise CheckFailed(f"{target} armed with {spec} exited {code} without reaching its crash point:\n"
                              + "\n".join(log.splitlines()[-20:]))
        inside = line.endswith("in a transaction: yes")
        self.crashes.append((target, event["point"], event["n"], reached, inside))
        note(f"{target} died at crash point {spec} ({'inside a transaction' if inside else 'outside'})")
        if target == "broker":
            self.broker_up = False
            self.integrity(store, "the broker's store after a crash point")
            self.start_broker()
        else:
            self.integrity(store, f"{target}'s store after a crash point")
            server.start(wait_connected=False)

    @staticmethod
    def log_of(server):
        with open(server.log_path, errors="replace") as log:
            return log.read()

    def take_backup(self, event):
        """A copy of the broker's store: online with `sqlite3 .backup`, or stopped (SIGTERM) as files."""
        path = os.path.join(self.s.dir, "broker-backup.sqlite")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.unlink(path + suffix)
        if event["online"] and self.broker_up:
            run = subprocess.run(["sqlite3", "-cmd", ".timeout 5000", self.broker.store, f".backup {path}"],
                                 capture_output=True, text=True, timeout=60)
            if run.returncode != 0:
                raise CheckFailed(f"sqlite3 .backup exited {run.returncode}: {run.stderr.strip()}")
        else:
            if self.broker_up:
                self.broker.stop()
                self.broker_up = False
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(self.broker.store + suffix):
                    shutil.copy(self.broker.store + suffix, path + suffix)
            self.start_broker()
        self.integrity(path, "the backup of the broker's store")
        self.backup = path
        note(f"backup of the broker's store taken ({'online' if event['online'] else 'stopped'}) after "
             f"{len(self.acked)} acknowledged mutations")

    def restore_backup(self):
        """docs/operations.md, "Restore": stop the broker, move its files away, put the backup in place, give it
        a new epoch, start it. Records what each device still held (queued, not acknowledged by the broker)."""
        if self.backup is None:
            return
        if self.broker_up:
            self.broker.stop()
            self.broker_up = False
        replaced = os.path.join(self.s.dir, f"replaced-{len(self.held_at_restore)}")
        os.makedirs(replaced)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.broker.store + suffix):
                shutil.move(self.broker.store + suffix, replaced)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.backup + suffix):
                shutil.move(self.backup + suffix, self.broker.store + suffix)
        self.backup = None
        self.integrity(self.broker.store, "the restored broker store")
        e2e.sqlite_rows(self.broker.store, "UPDATE meta SET value = lower(hex(randomblob(16))) WHERE key = 'epoch'")
        held, lost = {}, {}
        for name, d in self.devices.items():
            held[name] = [m["id"] for m in d.queue() if m["status"] == "pending"]
            rows = self.broker.rows(f"SELECT last_mutation_id FROM client WHERE id = '{self.clients[name]}'")
            restored_last = rows[0]["last_mutation_id"] if rows else 0
            # Acknowledged by the broker before the restore, after the backup: the restored store lacks them.
            lost[name] = [a["id"] for a in self.acked if a["device"] == name and a["id"] > restored_last
                          and a["id"] not in held[name]]
        self.held_at_restore.append(held)
        self.lost_at_restore.append(lost)
        self.start_broker()
        note(f"the broker restored from its backup with a new epoch; queued on the devices: {held}; "
             f"acknowledged after the backup (the restored store lacks them): {lost}")

    # Concurrent batches through both brokers.

    def post_batch(self, broker, writer, mutations):
        """POST /v1/batch of `mutations` as client `writer` straight to `broker`; (status, answer), or None when
        the broker could not be reached (refused: nothing was sent), or "ambiguous" (sent, no answer read)."""
        body = json.dumps({"client": writer, "workspace": "w1", "mutations": mutations}).encode()
        request = urllib.request.Request(
            broker.url + "/v1/batch", data=body, method="POST",
            headers={"Authorization": f"Bearer {e2e.USERS['alice'][0]}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")
        except ConnectionRefusedError:
            return None
        except urllib.error.URLError as error:
            if isinstance(error.reason, ConnectionRefusedError):
                return None
            return "ambiguous"
        except OSError:
            return "ambiguous"

    def write_concurrently(self, writer, broker, pages, seen):
        """`writer`'s CONCURRENT_ROUNDS batches through `broker`, each setting its own property on every page of
        `pages`; records what was applied (for the model) and each page's lastUpdatedTime per batch in `seen`."""
        name = "Writer" + writer[-1]
        for round_ in range(CONCURRENT_ROUNDS):
            with self.lock:
                mid = self.writer_ids[writer] + 1  # each mutation its own id, from mid on
                self.writer_ids[writer] += len(pages)
                self.writer_stamp = max(int(time.time() * 1000), self.writer_stamp + 1)
                stamp = self.writer_stamp
            value = f"{writer} round {round_}"
            mutations = [{"id": mid + index, "page": page, "time": f"{stamp}:{index}", "type": "set_property",
                          "name": name, "value": value} for index, page in enumerate(pages)]
            outcome = self.post_batch(broker, writer, mutations)
            if outcome is None:
                note(f"{writer}: {broker.name} is down; its batch was not sent")
                with self.lock:
                    self.writer_ids[writer] = mid - 1  # nothing sent: the ids are free again
                return
            if outcome == "ambiguous" or outcome[0] != 200:
                with self.lock:
                    for page in pages:
                        self.ambiguous.append((writer, {"op": "set_property", "page": page}, str(outcome)))
                note(f"{writer}: batch through {broker.name} ambiguous or refused: {outcome}")
                return
            answer = outcome[1]
            with self.lock:
                for result, mutation in zip(answer["results"], mutations):
                    if result["status"] != "applied":
                        raise CheckFailed(f"{writer}: mutation {mutation} through {broker.name} was "
                                          f"{result['status']}: {result}")
                    self.acked.append({"seq": len(self.acked), "device": writer, "id": mutation["id"],
                                       "op": {"op": "set_property", "page": mutation["page"], "name": name,
                                              "value": value}})
                for page in pages:
                    seen.append((writer, page, answer["pages"][page]))

    def concurrent_step(self, event):
        """Every device's edit of one page at once, while the HTTP clients post batches through both brokers at
        once to the same pages; then the checks of lastUpdatedTime (no two commits of a page share one, each
        client's times of a page increase, the store's change log holds each, the page's time is the newest)."""
        listed = ",".join(f"'{a['op']['page']}'" for a in self.acked
                          if a["op"]["op"] in ("create_page", "create_database", "create_row"))
        uncertain = {op.get("page") for _, op, _ in self.ambiguous}
        candidates = sorted(r["id"] for r in self.broker.rows(
            f"SELECT id FROM page WHERE deleted = 0 AND id IN ({listed})") if r["id"] not in uncertain) \
            if listed else []
        pages = random.Random(event["pick"]).sample(candidates, min(2, len(candidates)))
        seen, failures = [], []

        def guarded(work, *args):
            def run():
                try:
                    work(*args)
                except Exception as error:  # noqa: BLE001  (raised again on this thread below)
                    failures.append(error)
            return threading.Thread(target=run)

        threads = [guarded(self.do, op["device"], op) for op in event["edits"]]
        if pages:
            threads += [guarded(self.write_concurrently, writer, self.brokers[index % len(self.brokers)], pages, seen)
                        for index, writer in enumerate(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        if failures:
            raise failures[0] if isinstance(failures[0], CheckFailed) else CheckFailed(repr(failures[0]))
        if not seen:
            note(f"concurrent step: no batch of the HTTP clients committed (pages {pages})")
            return
        by_page = {}
        for writer, page, when in seen:
            by_page.setdefault(page, []).append((writer, when))
        for page, times in sorted(by_page.items()):
            values = [t for _, t in times]
            e2e.check(len(set(values)) == len(values), f"concurrent step: the {len(values)} commits of {page} "
                      "through both brokers each got their own lastUpdatedTime", "distinct", sorted(values))
            for writer in WRITERS:
                mine = [t for w, t in times if w == writer]
                e2e.check(mine == sorted(set(mine)), f"concurrent step: {writer} saw {page}'s time increase",
                          "increasing", mine)
            logged = {r["seq"] for r in self.broker.rows(f"SELECT DISTINCT seq FROM change_log WHERE page_id = "
                                                         f"'{page}'")}
            e2e.check(set(values) <= logged, f"concurrent step: the store's change log of {page} holds each of "
                      "those commits at its time", sorted(values), sorted(logged & set(values)))
            last = self.broker.rows(f"SELECT last_updated FROM page WHERE id = '{page}'")[0]["last_updated"]
            e2e.check(last >= max(values), f"concurrent step: {page}'s lastUpdatedTime in the store is at least "
                      "the newest one handed out", f">= {max(values)}", last)
            self.concurrent["pages"].add(page)
        self.concurrent["batches"] += len({(w, t) for w, _, t in seen})
        self.concurrent["commits"] += len(seen)

    # Probes of the bus: an edit through one broker that a device on the other must see without a sync.

    def broker_of(self, name):
        """The index of the broker device `name` is connected to, or None (not connected, or not live)."""
        status = self.devices[name].status()
        if not status["connected"] or status["state"] != "live":
            return None
        for relay in self.proxies[name].relays:
            if relay.url == status["broker"]:
                return next(i for i, b in enumerate(self.brokers) if b.port == relay.target_port)
        return None

    def probe_across(self, why):
        """For each device connected to a broker, an edit of a page it keeps offline (complete, on the store, not
        deleted) through the OTHER broker, straight over HTTP (a title set by an HTTP client, in the model like any
        acknowledged edit). Returns the probes for `check_probes`: (device, page, title, streams opened)."""
        probes = []
        uncertain = {op.get("page") for _, op, _ in self.ambiguous}
        for name, d in self.devices.items():
            index = self.broker_of(name)
            other = None if index is None else 1 - index
            if other is None or not self.up[other]:
                continue
            offline = [p for p, row in d.offline_pages().items() if row["complete"] and p not in uncertain]
            if not offline:
                continue
            listed = ",".join(f"'{p}'" for p in offline)
            live = sorted(r["id"] for r in self.broker.rows(
                f"SELECT id FROM page WHERE deleted = 0 AND id IN ({listed})"))
            if not live:
                continue
            page, writer = live[0], WRITERS[other]
            opened = d.status()["streamsOpened"]
            title = f"probe through {self.brokers[other].name} for {name} ({why})"
            if self.post_title(writer, self.brokers[other], page, title):
                probes.append((name, page, title, opened))
                self.probe_stalls[(name, title)] = len(self.proxies[name].stalls)
        return probes

    def stall_allowance(self, name, title):
        """Seconds the plan's own stalls may keep `name` from hearing a probe: each stall played on its relays
        since the probe was made, and each still armed (a stall is armed on every relay of the device, so one
        that follows the device to its other broker plays twice), plus the stream's ping timeout to notice a
        silent stream. 0 without such stalls."""
        proxy = self.proxies[name]
        played = proxy.stalls[self.probe_stalls.get((name, title), len(proxy.stalls)):]
        armed = [relay.stall for relay in getattr(proxy, "relays", [proxy]) if relay.stall is not None]
        held = sum(st[3] for st in played) + sum(st["ms"] for st in armed)
        return held / 1000 + 5 if held else 0

    def post_title(self, writer, broker, page, title):
        """`writer` sets `page`'s title through `broker`; True when applied (recorded for the model)."""
        with self.lock:
            self.writer_ids[writer] += 1
            mid = self.writer_ids[writer]
            while time.time() - self.last_ack < 0.003:
                pass
            self.writer_stamp = max(int(time.time() * 1000), self.writer_stamp + 1)
            mutation = {"id": mid, "page": page, "time": f"{self.writer_stamp}:0", "type": "set_title",
                        "title": title}
        outcome = self.post_batch(broker, writer, [mutation])
        with self.lock:
            if outcome is None:
                self.writer_ids[writer] = mid - 1
                return False
            if outcome == "ambiguous" or outcome[0] != 200:
                self.ambiguous.append((writer, {"op": "set_title", "page": page}, str(outcome)))
                return False
            result = outcome[1]["results"][0]
            if result["status"] != "applied":
                raise CheckFailed(f"{writer}: probe {mutation} through {broker.name} was {result['status']}: "
                                  f"{result}")
            self.acked.append({"seq": len(self.acked), "device": writer, "id": mid,
                               "op": {"op": "set_title", "page": page, "title": title}})
            self.last_ack = time.time()
            return True

    def check_probes(self, probes, how):
        """Each probed device shows its probe's title from its local store, without a sync: or the title the store
        has now, when a later step changed it (deleted, or no longer offline there: nothing to see). Returns the
        probes of devices not connected now (cut, their brokers down), left for later."""
        later = []
        for name, page, title, opened in probes:
            d = self.devices[name]
            if self.broker_of(name) is None:
                later.append((name, page, title, opened))
                continue

            def shown(d=d, page=page):
                rows = self.broker.rows(f"SELECT title, deleted FROM page WHERE id = '{page}'")
                if rows[0]["deleted"] or page not in d.offline_pages():
                    return True, "deleted or no longer offline"
                answer = d.show(page)
                return answer["title"] == rows[0]["title"] and answer.get("source") == "local", \
                    {"store": rows[0]["title"], "device": answer["title"], "source": answer.get("source")}

            # The plan's stalls of its relays since the probe (up to 12 s each, on each relay) may hold it longer.
            allowance = self.stall_allowance(name, title)
            wait_until(f"{name} shows '{title}' (or what the store has now) from its local store without a sync "
                       f"({how}{f'; {allowance:.1f} s more for its stalls' if allowance else ''})", shown,
                       timeout=15 + allowance, expected="the store's title, from the local store")
            again = d.status()["streamsOpened"]
            note(f"{name}: {'same stream' if again == opened else f'{again - opened} streams opened meanwhile'}")
            self.counts["probes seen"] = self.counts.get("probes seen", 0) + 1
            if again == opened:
                self.counts["probes seen on the same stream"] = self.counts.get("probes seen on the same stream",
                                                                               0) + 1
        return later

    def wait_moved(self, names, victim):
        """Each device of `names`, on broker `victim` when it was killed, connects to another broker (and is live
        there: it caught up) while the victim stays down. A stall or held answers on its relays may delay it."""
        for name in names:
            if not self.proxies[name].up or not any(up for i, up in enumerate(self.up) if i != victim):
                continue
            wait_until(f"{name} moved from {self.brokers[victim].name} (killed, still down) to the other broker",
                       lambda name=name: (lambda at: (at is not None and at != victim, at))(self.broker_of(name)),
                       timeout=30, expected="connected and live on the other broker")
            self.counts["failovers seen"] = self.counts.get("failovers seen", 0) + 1

    def kill_redis(self):
        """Redis killed; then, while it is down, probes through each device's other broker (the bus cannot carry
        them: they must reach the devices once it is back)."""
        if self.redis.up:
            self.redis.kill()
            self.gap_probes += self.probe_across("made while redis was down")

    def start_redis(self):
        """Redis started again on its port: the brokers' buses come back and their devices catch up, so each
        probe made during the gap reaches its device without a sync."""
        if not self.redis.up:
            self.redis.start()
            for index, broker in enumerate(self.brokers):
                if self.up[index]:
                    broker.wait_bus_live()
            self.gap_probes = self.check_probes(self.gap_probes, "after redis came back")

    def kill_postgres(self):
        """PostgreSQL stopped at once (SIGQUIT to the postmaster: every backend dies, no checkpoint). While it is gone
        each live broker answers a batch 503 (what it cannot keep it does not acknowledge) and /healthz 503."""
        if not self.pg.up:
            return
        self.pg.stop()
        made = [a["op"]["page"] for a in self.acked if a["op"]["op"] in ("create_page", "create_database")]
        for index, broker in enumerate(self.brokers):
            if not self.up[index] or not made:
                continue
            self.refused_id += 1
            page = made[self.refused_id % len(made)]
            title = f"refused by {broker.name} while postgres was gone ({self.refused_id})"
            with self.lock:
                self.writer_stamp = max(int(time.time() * 1000), self.writer_stamp + 1)
                mutation = {"id": self.refused_id, "page": page, "time": f"{self.writer_stamp}:0",
                            "type": "set_title", "title": title}
            started = time.monotonic()
            outcome = self.post_batch(broker, REFUSED_WRITER, [mutation])
            took = time.monotonic() - started
            if not isinstance(outcome, tuple) or outcome[0] != 503:
                raise CheckFailed(f"{broker.name} answered a batch with PostgreSQL gone: expected 503, got {outcome}")
            note(f"{broker.name}: batch refused in {took * 1000:.0f} ms with PostgreSQL gone: {outcome[1][:160]}")
            self.refused.append((broker.name, self.refused_id, page, title))
            health = self.healthz(broker)
            if health[0] != 503:
                raise CheckFailed(f"{broker.name}'s /healthz with PostgreSQL gone: expected 503, got {health}")
            self.counts["batches refused with postgres gone"] = self.counts.get(
                "batches refused with postgres gone", 0) + 1

    def healthz(self, broker):
        try:
            with urllib.request.urlopen(broker.url + "/healthz", timeout=30) as answer:
                return answer.status, answer.read().decode(errors="replace")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")

    def start_postgres(self):
        """PostgreSQL started again (crash recovery from its WAL): its files pass pg_amcheck, no batch answered 503
        was applied, and each live broker recovers by itself: within 30 s a batch through it applies (the same
        batch sent again after each refusal: exactly once makes that safe) and /healthz is 200; then an edit through
        each device's other broker reaches it by push without a sync."""
        if self.pg.up:
            return
        self.pg.start()
        started = time.monotonic()
        self.integrity(self.pg, "the store after an immediate shutdown")
        self.check_refused()
        for index, broker in enumerate(self.brokers):
            if not self.up[index]:
                continue
            writer = WRITERS[index % len(WRITERS)]
            made = sorted(r["id"] for r in self.broker.rows("SELECT id FROM page WHERE deleted = 0 LIMIT 50"))
            uncertain = {op.get("page") for _, op, _ in self.ambiguous}
            made = [p for p in made if p not in uncertain]
            if not made:
                continue
            page = made[index % len(made)]
            with self.lock:
                self.writer_ids[writer] += 1
                mid = self.writer_ids[writer]
                self.writer_stamp = max(int(time.time() * 1000), self.writer_stamp + 1)
                title = f"{broker.name} recovered ({mid})"
                mutation = {"id": mid, "page": page, "time": f"{self.writer_stamp}:0", "type": "set_title",
                            "title": title}
            answers = []
            while True:
                outcome = self.post_batch(broker, writer, [mutation])
                if isinstance(outcome, tuple) and outcome[0] == 200:
                    break
                answers.append(str(outcome)[:120])
                if time.monotonic() - started > 30:
                    raise CheckFailed(f"{broker.name} did not recover within 30 s of PostgreSQL's start: "
                                      f"{len(answers)} answers, the last {answers[-1]}")
                time.sleep(0.1)
            result = outcome[1]["results"][0]
            if result["status"] != "applied":
                raise CheckFailed(f"{writer}: {mutation} through {broker.name} after PostgreSQL's start was "
                                  f"{result['status']}: {result}")
            with self.lock:
                self.acked.append({"seq": len(self.acked), "device": writer, "id": mid,
                                   "op": {"op": "set_title", "page": page, "title": title}})
                self.last_ack = time.time()
            took = time.monotonic() - started
            self.recoveries.append(took)
            health = self.healthz(broker)
            if health[0] != 200:
                raise CheckFailed(f"{broker.name}'s /healthz after a batch applied: expected 200, got {health}")
            note(f"{broker.name} recovered {took * 1000:.0f} ms after PostgreSQL's start ({len(answers)} refusals "
                 f"first)")
        self.check_probes(self.probe_across("after postgres came back"), "after postgres came back")

    def check_refused(self):
        """No batch answered 503 while PostgreSQL was gone is in the store: its client has no row (it only ever sent
        those), no page has its title."""
        if not self.refused:
            return
        rows = self.broker.rows(f"SELECT last_mutation_id FROM client WHERE id = '{REFUSED_WRITER}'")
        e2e.check(rows == [], "no batch answered 503 while PostgreSQL was gone was applied (its client has no row)",
                  [], rows)
        titles = self.broker.rows("SELECT id, title FROM page WHERE title LIKE 'refused by %'")
        e2e.check(titles == [], "no page has the title of a batch answered 503", [], titles)

    def play_stall(self, event):
        self.proxies[event["device"]].stall = {k: event[k] for k in ("from_broker", "bytes", "ms", "reset")}

    def fault(self, event):
        kind = event["fault"]
        if kind == "crash_at":
            self.crash_at(event)
        elif kind == "backup":
            self.take_backup(event)
        elif kind == "restore_backup":
            self.restore_backup()
        elif kind == "stall":
            self.play_stall(event)
        elif kind == "kill_redis":
            self.kill_redis()
        elif kind == "redis_up":
            self.start_redis()
        elif kind == "concurrent":
            self.concurrent_step(event)
        elif kind == "kill_postgres":
            self.kill_postgres()
        elif kind == "postgres_up":
            self.start_postgres()
        elif kind == "kill_daemon":
            self.kill_daemon(event["device"])
        elif kind in ("kill_daemon_in_flight", "kill_broker_in_flight"):
            device = event["device"]
            proxy = self.proxies[device]
            victim = self.target() if kind == "kill_broker_in_flight" else 0
            proxy.holding = True
            answer = self.do(device, event["edit"])
            if answer is not None and "mutationIds" in answer and self.up[victim] and proxy.up:
                last = answer["mutationIds"][-1]
                client = self.clients[device]
                query = f"SELECT last_mutation_id FROM client WHERE id = '{client}'"

                def probe():
                    rows = self.broker.rows(query)
                    return bool(rows) and rows[0]["last_mutation_id"] >= last, rows

                try:
                    wait_until(f"{device}'s push of mutation {last} committed on the broker, its answer held",
                               probe, timeout=3)
                    self.counts["commits hit"] = self.counts.get("commits hit", 0) + 1
                except CheckFailed as error:
                    note(f"the push did not commit in 3 s (the device may be disconnected): {error}")
            if kind == "kill_daemon_in_flight":
                self.kill_daemon(device, then=lambda: setattr(proxy, "holding", False))
            else:
                if self.up[victim]:
                    self.kill_broker(victim)
                    proxy.holding = False
                    self.start_broker(victim)
                proxy.holding = False
        elif kind == "kill_broker":
            victim = self.target()
            if self.up[victim]:
                self.kill_broker(victim)
                self.start_broker(victim)
        elif kind == "kill_broker_after_edit":
            victim = self.target()
            self.do(event["device"], event["edit"])
            time.sleep(event["delay_ms"] / 1000)  # where the SIGKILL lands: that is the fault, not a wait
            if self.up[victim]:
                self.kill_broker(victim)
                self.start_broker(victim)
        elif kind == "broker_down":
            victim = self.target()
            if self.up[victim]:
                # With two brokers, each device on the victim (its network not cut) must move to the other.
                on = [n for n in self.devices if self.redis and self.proxies[n].up and self.broker_of(n) == victim]
                self.kill_broker(victim)
                self.wait_moved(on, victim)
        elif kind == "broker_up":
            for index, up in enumerate(self.up):
                if not up:
                    self.start_broker(index)
        elif kind == "cut":
            self.proxies[event["device"]].cut(quiet=True)
        elif kind == "restore":
            self.proxies[event["device"]].restore()
        elif kind == "delay":
            self.hold(event["device"], event["ms"])
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def execute(self, plan):
        for index, event in enumerate(plan):
            started = time.monotonic()
            if "fault" in event:
                note(f"step {index}: fault {describe(event)}")
                self.fault(event)
            else:
                self.do(event["device"], event)
            took = time.monotonic() - started
            if took > 3:
                note(f"step {index} took {took:.1f} s: {describe(event)}")

    # Healing.

    def heal(self):
        for timer in self.timers:
            timer.cancel()
        for proxy in self.proxies.values():
            proxy.holding = False
            proxy.stall = None
            proxy.restore()
        if self.pg and not self.pg.up:
            self.start_postgres()
        for index, up in enumerate(self.up):
            if not up:
                self.start_broker(index)
        if self.redis:
            self.start_redis()
            for broker in self.brokers:
                broker.wait_bus_live()
            # No sync yet: each device got the other broker's commits by push over the bus, or by the catch-up of
            # its reconnect or of a bus that came back.
            for name in self.devices:
                self.wait_settled(name)
            Oracle(self).check_offline_pages(" before any sync: by push over the bus and catch-ups alone",
                                             times=True)
            # And now, each device settled on a broker: an edit through the other broker reaches it by push.
            self.check_probes(self.gap_probes + self.probe_across("at the end"), "by push over the bus")
        for _ in range(2):  # the second round brings every device what the others pushed in the first
            for name, d in self.devices.items():
                wait_until(f"{name}: pagesync sync succeeds", lambda d=d: (d.run("sync", timeout=130).returncode == 0,
                                                                            "sync failed"), timeout=60)
        for name in self.devices:
            self.wait_settled(name)

    def wait_settled(self, name):
        d = self.devices[name]

        def settled():
            status = d.status()
            queue = [m["status"] for m in d.queue()]
            incomplete = self.incomplete(d)
            done = status["connected"] and status["state"] == "live" and "pending" not in queue and not incomplete
            return done, {"state": status["state"], "queue": queue, "incomplete": incomplete}

        wait_until(f"{name}: live, queue empty or only rejected, every offline page the broker has complete",
                   settled, timeout=30)

    def connections(self):
        """Per device, how many times it connected to each broker over the run (every start's log): which relay
        URL it was on, mapped to the broker behind it."""
        behind = {}
        for relays in self.proxies.values():
            for relay in getattr(relays, "relays", [relays]):
                behind[relay.url] = next(b.name for b in self.brokers if b.port == relay.target_port)
        counts = {}
        for name, d in self.devices.items():
            counts[name] = {}
            for start in range(1, d.starts + 1):
                path = os.path.join(self.s.dir, f"{name}.{start}.log")
                with open(path, errors="replace") as log:
                    for line in log:
                        if "connected to the broker" in line and "url=" in line:
                            url = line.split("url=", 1)[1].split()[0]
                            broker = behind.get(url, url)
                            counts[name][broker] = counts[name].get(broker, 0) + 1
        return counts

    def incomplete(self, device):
        """The device's incomplete offline pages that the broker has: one it does not have (a create it rejected,
        never pushed) cannot be downloaded."""
        pages = [p for p, row in device.offline_pages().items() if not row["complete"]]
        if not pages:
            return []
        listed = ",".join(f"'{p}'" for p in pages)
        return sorted(r["id"] for r in self.broker.rows(f"SELECT id FROM page WHERE id IN ({listed})"))


# The oracle.


def props_of(text):
    return {k: v for k, v in json.loads(text or "{}").items() if v is not None}


class Oracle:
    def __init__(self, run):
        self.run = run
        self.broker = run.broker
        self.conflicts = {}
        for name, d in run.devices.items():
            self.conflicts[name] = {c["mutationId"]: c for c in d.cli("conflicts", quiet=True)}
        self.rejected = {(name, mid) for name, table in self.conflicts.items() for mid in table}

    def broker_page_http(self, page):
        request = urllib.request.Request(f"{self.broker.url}/v1/pages/{page}",
                                         headers={"Authorization": f"Bearer {e2e.USERS['alice'][0]}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return {"error": error.code}

    def broker_pages(self):
        pages = {r["id"]: r for r in self.broker.rows(
            "SELECT id, kind, parent_id, title, deleted, last_updated FROM page")}
        props = {}
        for r in self.broker.rows("SELECT page_id, name, value FROM property WHERE value IS NOT NULL"):
            props.setdefault(r["page_id"], {})[r["name"]] = json.loads(r["value"])
        blocks = {r["id"]: r for r in self.broker.rows(
            "SELECT id, page_id, type, text, position, deleted FROM block")}
        views = {r["database_id"]: r for r in self.broker.rows("SELECT database_id, filter, sort FROM view")}
        return pages, props, blocks, views

    def check_exactly_once(self):
        run = self.run
        for name, d in run.devices.items():
            ids = [a["id"] for a in run.acked if a["device"] == name]
            e2e.check(ids == sorted(set(ids)), f"{name}: acknowledged mutation ids increase ({len(ids)} of them)",
                      "increasing", ids)
            meta = {r["key"]: r["value"] for r in d.rows("SELECT key, value FROM sync_meta")}
            last_local = int(meta.get("next_mutation_id", "1")) - 1
            rows = self.broker.rows(f"SELECT last_mutation_id FROM client WHERE id = '{run.clients[name]}'")
            last_broker = rows[0]["last_mutation_id"] if rows else 0
            ambiguous = any(dev == name for dev, _, _ in run.ambiguous)
            expected = last_local if ambiguous else (ids[-1] if ids else 0)
            e2e.check_equal((last_broker, last_local), (expected, expected),
                            f"{name}: the broker's last_mutation_id and the device's last id are its last "
                            "acknowledged id")
            for mid, conflict in self.conflicts[name].items():
                if conflict["reason"] not in ALLOWED_REJECTIONS:
                    raise CheckFailed(f"{name}: mutation {mid} rejected {conflict['reason']}: an acknowledged "
                                      f"mutation of a unique id re-applied, or a bad one sent: {conflict}")

        # The HTTP clients of concurrent steps: every batch applied once, up to the last id sent.
        for writer, last in run.writer_ids.items():
            if last and not any(dev == writer for dev, _, _ in run.ambiguous):
                rows = self.broker.rows(f"SELECT last_mutation_id FROM client WHERE id = '{writer}'")
                e2e.check_equal(rows, [{"last_mutation_id": last}],
                                f"{writer}: the store's last_mutation_id is the last id it sent")
        # The model: acknowledged, not rejected mutations in acknowledgement (HLC) order, last writer wins.
        pages, blocks, views = {}, {}, {}
        uncertain = {op["page"] for _, op, _ in run.ambiguous if "page" in op}
        for a in run.acked:
            if (a["device"], a["id"]) in self.rejected:
                continue
            op, kind, page = a["op"], a["op"]["op"], a["op"].get("page")
            if kind in ("create_page", "create_database"):
                pages[page] = {"kind": "database" if kind == "create_database" else "page", "parent": op["parent"],
                               "title": op["title"], "deleted": 0, "props": {}}
                if kind == "create_database":
                    views[page] = None
            elif kind == "create_row":
                pages[page] = {"kind": "page", "parent": op["database"], "title": op["title"], "deleted": 0,
                               "props": dict(op["properties"])}
            elif page not in pages and kind != "block_edit" and kind != "block_delete":
                raise CheckFailed(f"{a['device']}: mutation {a['id']} {describe(op)} is not in its conflicts, but "
                                  "no applied create made its page: a rejection vanished")
            elif kind == "set_title":
                pages[page]["title"] = op["title"]
            elif kind == "set_property":
                pages[page]["props"][op["name"]] = op["value"]
            elif kind == "unset_property":
                pages[page]["props"].pop(op["name"], None)
            elif kind == "delete_page":
                pages[page]["deleted"] = 1
            elif kind == "view_set":
                views[page] = op["view"]
            elif kind == "block_add":
                blocks[op["block"]] = {"page": page, "text": op["text"], "deleted": 0, "after": op["after"]}
            elif kind == "block_edit":
                if op["block"] in blocks:
                    blocks[op["block"]]["text"] = op["text"]
            elif kind == "block_delete":
                if op["block"] in blocks:
                    # A deleted block keeps no text on the broker (nothing can edit or restore it).
                    blocks[op["block"]]["deleted"] = 1
                    blocks[op["block"]]["text"] = ""
        b_pages, b_props, b_blocks, b_views = self.broker_pages()
        found = {p: {"kind": r["kind"], "parent": r["parent_id"], "title": r["title"], "deleted": r["deleted"],
                     "props": b_props.get(p, {})} for p, r in b_pages.items() if p not in uncertain}
        expected = {p: v for p, v in pages.items() if p not in uncertain}
        diff = {p: (expected.get(p), found.get(p)) for p in set(found) | set(expected)
                if expected.get(p) != found.get(p)}
        e2e.check(not diff, f"the broker's {len(found)} pages are the model's: every acknowledged mutation applied "
                  "once, last writer wins", "no difference", diff)
        found_blocks = {b: {"page": r["page_id"], "text": r["text"], "deleted": r["deleted"]}
                        for b, r in b_blocks.items() if r["page_id"] not in uncertain}
        expected_blocks = {b: {k: v[k] for k in ("page", "text", "deleted")} for b, v in blocks.items()
                           if v["page"] not in uncertain}
        diff = {b: (expected_blocks.get(b), found_blocks.get(b)) for b in set(found_blocks) | set(expected_blocks)
                if expected_blocks.get(b) != found_blocks.get(b)}
        e2e.check(not diff, f"the broker's {len(found_blocks)} blocks are the model's", "no difference", diff)
        misplaced = self.misplaced_blocks(blocks, b_blocks, uncertain)
        e2e.check(not misplaced, "every block is where docs/protocol.md's rule put it when the broker applied its "
                  "add (right after the block named if the page had it, else last)", [], misplaced)

        def view_of(row):
            found = {}
            if row["sort"]:
                sort = json.loads(row["sort"])
                found["sort"] = [sort["property"], bool(sort.get("descending", False))]
            if row["filter"]:
                fil = json.loads(row["filter"])
                found["filter"] = [fil["property"], fil["value"]]
            return found or None

        found_views = {db: view_of(r) for db, r in b_views.items() if db not in uncertain}
        expected_views = {db: v for db, v in views.items() if db not in uncertain}
        e2e.check_equal(found_views, expected_views, "the broker's views are the model's")
        self.model_deleted = {p for p, v in pages.items() if v["deleted"]}
        self.b_pages, self.b_props, self.b_blocks = b_pages, b_props, b_blocks

    def misplaced_blocks(self, blocks, b_blocks, uncertain):
        """The model's blocks that are not where docs/protocol.md ("Where a block goes") puts them. The rule is
        applied against the page as it is on the broker when the add applies, not as the plan saw it: the plan
        names, as `after`, any block added to the page earlier in the plan, also one whose device's push has not
        reached the broker yet (a stalled relay, a broker killed): the device then names a block neither it nor
        the broker has, and the block goes last. So each add is judged among the blocks the broker already had
        (deleted ones included), in the order the broker applied them: a block's first change-log entry (its
        batch's sequence; in PostgreSQL, sequence order is commit order within a workspace), then, inside one
        batch (one device), the device's order. `after` a block the page had: right after it (no block of the
        page then lies between them); otherwise, and without `after` (the CLI appends: the block's own id),
        after every block the page then had. Blocks are only ever inserted between others (a spread keeps their
        order), so these relations still hold at the end. Returns (block, after, what is wrong) triples."""
        floor = {r["key"]: r["value"] for r in self.broker.rows("SELECT key, value FROM meta")}.get("log_floor")
        if floor and int(floor) > 0:
            # The log was pruned: the order of the adds is unknown. Keep the weaker check.
            return [(b, v["after"], "not after it") for b, v in blocks.items()
                    if v["after"] in b_blocks and b in b_blocks
                    and not b_blocks[b]["position"] > b_blocks[v["after"]]["position"]]
        first = {}
        for r in self.broker.rows("SELECT field, MIN(seq) AS seq FROM change_log WHERE field LIKE 'block:%' "
                                  "GROUP BY page_id, field"):
            first[r["field"][len("block:"):]] = int(r["seq"])
        order = {a["op"]["block"]: a["seq"] for a in self.run.acked if a["op"]["op"] == "block_add"}
        applied = {b: (first[b], order[b]) for b, v in blocks.items()
                   if b in b_blocks and b in first and v["page"] not in uncertain}
        missing = [b for b, v in blocks.items() if b in b_blocks and b not in first and v["page"] not in uncertain]
        e2e.check(not missing, "every block on the broker has a change-log entry", [], missing)

        def place(block):
            return (b_blocks[block]["position"], block)
        misplaced = []
        for b, key in applied.items():
            page, after = blocks[b]["page"], blocks[b]["after"]
            there = [c for c, other in applied.items() if blocks[c]["page"] == page and other < key]
            if after in there:
                between = [c for c in there if place(after) < place(c) < place(b)]
                if not place(after) < place(b):
                    misplaced.append((b, after, "not after the block named, which the page had"))
                elif between:
                    misplaced.append((b, after, f"not right after the block named: {between} between"))
            else:
                before = [c for c in there if not place(c) < place(b)]
                if before:
                    misplaced.append((b, after, f"not last: {before} applied earlier and after it"))
        return misplaced

    def check_offline_pages(self, when="", times=False):
        """(2) Every device's offline pages equal the store's; with `times`, each local copy's lastUpdatedTime too
        (what the device last heard of the page is the store's newest commit of it)."""
        def compare():
            differences = {}
            b_pages, b_props, b_blocks, _ = self.broker_pages()
            live = {}
            for b, r in sorted(b_blocks.items(), key=lambda item: (item[1]["position"], item[0])):
                if not r["deleted"]:
                    live.setdefault(r["page_id"], []).append((b, r["type"], r["text"]))
            for name, d in self.run.devices.items():
                offline = d.offline_pages()
                local = {r["id"]: r for r in d.rows(
                    "SELECT id, kind, parent, title, deleted, properties, rows, databases, last_updated "
                    "FROM local_page")}
                local_blocks = {}
                for r in d.rows("SELECT id, page_id, type, text FROM local_block WHERE deleted = 0 "
                                "ORDER BY position, id"):
                    local_blocks.setdefault(r["page_id"], []).append((r["id"], r["type"], r["text"]))
                for page in offline:
                    if page not in b_pages:
                        if page in local:
                            differences[(name, page)] = "a local copy of a page the broker does not have"
                        continue
                    b = b_pages[page]
                    mine = local.get(page)
                    if mine is None:
                        differences[(name, page)] = "no local copy"
                        continue
                    want = (b["kind"], b["parent_id"], b["title"], b["deleted"], b_props.get(page, {}),
                            live.get(page, []))
                    have = (mine["kind"], mine["parent"], mine["title"], mine["deleted"],
                            props_of(mine["properties"]), local_blocks.get(page, []))
                    if want != have:
                        differences[(name, page)] = {"broker": want, "device": have}
                        continue
                    if times and mine["last_updated"] != b["last_updated"]:
                        differences[(name, page)] = {"store lastUpdatedTime": b["last_updated"],
                                                     "device lastUpdatedTime": mine["last_updated"]}
                        continue
                    http = self.broker_page_http(page)
                    if b["kind"] == "database" and json.loads(mine["rows"] or "[]") != http.get("rows", []):
                        differences[(name, page)] = {"broker rows": http.get("rows"), "device rows": mine["rows"]}
                    if json.loads(mine["databases"] or "[]") != http.get("databases", []):
                        differences[(name, page)] = {"broker databases": http.get("databases"),
                                                     "device databases": mine["databases"]}
            return not differences, differences

        wait_until("every device's offline pages equal the broker's (title, deleted, parent, properties, blocks in "
                   f"order, rows in view, inline databases{', lastUpdatedTime' if times else ''}){when}", compare,
                   timeout=20, expected="no difference")

    def check_forests(self):
        run = self.run
        for name, d in run.devices.items():
            actions = d.actions()
            offline = set(d.offline_pages())
            impacted = {row[2] for row in actions}
            e2e.check_equal(impacted, offline, f"{name}: offline_page is exactly the pages offline_action impacts")
            trees = {}
            for origin, source, page, kind in actions:
                trees.setdefault((origin, kind), set()).add((source, page))
            broken = []
            for (origin, kind), edges in trees.items():
                if (None, origin) not in edges:
                    broken.append((origin, kind, "no origin row"))
                reached = {page for source, page in edges}
                for source, page in edges:
                    if source is not None and source not in reached:
                        broken.append((origin, kind, f"{page} from {source}, which the tree does not hold"))
                # from chains lead to the origin
                parent = {page: source for source, page in edges}
                for page in reached:
                    seen, current = set(), page
                    while current != origin and current not in seen and current in parent:
                        seen.add(current)
                        current = parent[current]
                    if current != origin:
                        broken.append((origin, kind, f"{page}'s from chain does not reach the origin"))
            e2e.check(not broken, f"{name}: every tree has its origin row and from chains lead to it", [], broken)
            reasons = run.reasons[name]
            recent = []
            for page in reversed(reasons["visits"]):
                if page not in recent:
                    recent.append(page)
            expected_origins = ({(p, "toggled") for p in reasons["toggled"]}
                                | {(p, "favorite") for p in reasons["favorite"]}
                                | {(p, "recent") for p in recent[:RECENT_LIMIT]})
            origins = {(o, k) for (o, k), edges in trees.items()}
            e2e.check_equal(origins, expected_origins, f"{name}: the forest's origins are the reasons acknowledged")

            # Origins the broker does not have (a create it rejected, a reason taken while it was unreachable): a
            # connected device refuses a reason for them, so the fresh one gets none; this one keeps them,
            # marked missing.
            named = {o for o, k in expected_origins}
            listed = ",".join(f"'{p}'" for p in sorted(named))
            on_broker = {r["id"] for r in run.broker.rows(f"SELECT id FROM page WHERE id IN ({listed})")} \
                if named else set()
            absent = named - on_broker
            fresh = run.s.device(f"fresh{name}", run.broker.url, database_row_limit=ROW_LIMIT,
                                 recent_limit=RECENT_LIMIT)
            for page in sorted(reasons["toggled"] - absent):
                fresh.cli("offline", "add", page, quiet=True)
            for page in sorted(reasons["favorite"] - absent):
                fresh.cli("favorite", "add", page, quiet=True)
            for page in reversed([p for p in recent[:RECENT_LIMIT] if p not in absent]):
                fresh.cli("visit", page, quiet=True)
            fresh.sync()

            def same():
                mine = {row for row in d.actions() if row[0] not in absent}
                theirs = fresh.actions()
                incomplete = run.incomplete(fresh)
                missing = {r["page_id"] for r in d.rows("SELECT page_id FROM missing_page")}
                unmarked = sorted(absent - missing)
                return (mine == theirs and not incomplete and not unmarked,
                        (e2e.set_difference(theirs, mine), incomplete, unmarked))

            wait_until(f"{name}: its forest equals a fresh device's given the same reasons", same, timeout=20,
                       expected="the same offline_action rows")
            self.run.integrity(fresh.store, f"fresh{name}'s store")
            fresh.stop()

    def check_conflicts(self):
        run = self.run
        for name, d in run.devices.items():
            acked = {a["id"]: a for a in run.acked if a["device"] == name}
            queue = d.queue()
            rejected = {m["id"] for m in queue if m["status"] == "rejected"}
            e2e.check_equal(rejected, set(self.conflicts[name]),
                            f"{name}: pagesync conflicts lists every rejected mutation of the queue "
                            f"({len(rejected)})")
            e2e.check_equal(d.status()["failedMutations"], len(rejected), f"{name}: status counts them")
            strays = sorted(set(self.conflicts[name]) - set(acked))
            ambiguous = any(dev == name for dev, _, _ in run.ambiguous)
            e2e.check(not strays or ambiguous, f"{name}: every conflict is an acknowledged mutation", [], strays)
            wrong = []
            for mid, conflict in self.conflicts[name].items():
                if conflict["reason"] == "page_deleted":
                    op = acked[mid]["op"] if mid in acked else {}
                    target = op.get("database") if op.get("op") == "create_row" else conflict["page"]
                    if target in self.b_pages and not self.b_pages[target]["deleted"]:
                        wrong.append((mid, conflict))
            e2e.check(not wrong, f"{name}: every page_deleted rejection names a page deleted on the broker", [], wrong)

    def check_integrity(self):
        run = self.run
        run.integrity(run.broker.store, "the broker's store")
        for name, d in run.devices.items():
            run.integrity(d.store, f"{name}'s store")
        e2e.ok("PRAGMA integrity_check is ok on every store")

    def check_restores(self):
        """(7) After a restored older broker store (new epoch), nothing a device held is lost: every mutation it
        still had queued, and every one the old store had acknowledged after the backup (the daemon keeps what
        was acknowledged and pushes it again when the epoch changes), is on the broker: its last id covers them,
        none is pending, and the model check (1) found their effects, or they are conflicts. Lost ones would show
        there too; this names them."""
        run = self.run
        for index, (held, lost) in enumerate(zip(run.held_at_restore, run.lost_at_restore)):
            for name, d in run.devices.items():
                ids = set(held[name]) | set(lost[name])
                if not ids:
                    continue
                rows = self.broker.rows(f"SELECT last_mutation_id FROM client WHERE id = '{run.clients[name]}'")
                last = rows[0]["last_mutation_id"] if rows else 0
                pending = {m["id"] for m in d.queue() if m["status"] == "pending"}
                missing = sorted(i for i in ids if i > last or i in pending)
                e2e.check(not missing, f"restore {index + 1}, {name}: the {len(held[name])} mutations it held and "
                          f"the {len(lost[name])} the restored store lacked are on the broker", [], missing)

    def check_shows(self):
        run = self.run
        rejected = self.rejected
        missing = []
        for device, page, shown, seq in run.shows:
            deleted_before = {a["op"]["block"] for a in run.acked[:seq] if a["op"]["op"] == "block_delete"}
            for a in run.acked[:seq]:
                op = a["op"]
                if (a["device"] == device and op["op"] == "block_add" and op["page"] == page
                        and (device, a["id"]) not in rejected and op["block"] not in deleted_before
                        and op["block"] not in shown):
                    missing.append((device, page, op["block"], f"shown after acknowledgement {seq}", shown))
        e2e.check(not missing, f"{len(run.shows)} shows from the local store held every block their device added",
                  [], missing)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bin_dir")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--devices", type=int, default=3)
    parser.add_argument("--extra", default="", help="faults beyond the classic ones, comma separated: "
                        + ", ".join(sorted(EXTRAS)) + " (crash points, backup and restore, stalled relays; with --brokers 2: Redis killed, "
                        "concurrent batches through both brokers)")
    parser.add_argument("--brokers", type=int, default=1, choices=(1, 2),
                        help="brokers sharing one store, every device listing them all (failover)")
    parser.add_argument("--store", default="sqlite", choices=("sqlite", "postgres"),
                        help="the brokers' store: one SQLite file, or a PostgreSQL the run starts ([store] url)")
    parser.add_argument("--print-plan", action="store_true")
    options = parser.parse_args()
    extra = frozenset(x for x in options.extra.split(",") if x)
    if extra - EXTRAS:
        parser.error(f"--extra: unknown {sorted(extra - EXTRAS)}; known: {sorted(EXTRAS)}")
    if options.brokers > 1 and "restore" in extra:
        parser.error("--extra restore needs one broker (a restore stops the broker that owns the store)")
    if options.brokers < 2 and extra & TWO_BROKER_EXTRAS:
        parser.error(f"--extra {','.join(sorted(extra & TWO_BROKER_EXTRAS))} needs --brokers 2")
    if options.store == "postgres" and extra & {"crash", "restore"}:
        parser.error("--extra crash and restore are SQLite's (its crash points, its files): not with --store postgres")
    if "postgres" in extra and options.store != "postgres":
        parser.error("--extra postgres needs --store postgres")
    bin_dir = os.path.abspath(options.bin_dir)
    e2e.BROKER_PROGRAM = os.path.join(bin_dir, "pagesync-broker")
    e2e.DAEMON_PROGRAM = os.path.join(bin_dir, "pagesyncd")
    e2e.CLI_PROGRAM = os.path.join(bin_dir, "pagesync")
    plan = make_plan(options.seed, options.steps, options.devices, extra)
    replay = f"--seed {options.seed} --steps {options.steps} --devices {options.devices}"
    if extra:
        replay += f" --extra {','.join(sorted(extra))}"
    if options.brokers > 1:
        replay += f" --brokers {options.brokers}"
    if options.store != "sqlite":
        replay += f" --store {options.store}"
    if options.print_plan:
        for index, event in enumerate(plan):
            print(f"{index:4d} {describe(event)}")
        return
    faults = sum(1 for e in plan if "fault" in e)
    print(f"=== faults {replay}: {len(plan)} events, {faults} faults", flush=True)
    started = time.monotonic()
    run = None
    try:
        with e2e.Scenario(f"faults-{options.seed}") as scenario:
            run = Run(scenario, options.seed, options.devices, options.brokers, options.store)
            run.execute(plan)
            note(f"workload done in {time.monotonic() - started:.1f} s: {len(run.acked)} mutations acknowledged, "
                 f"{len(run.ambiguous)} ambiguous; healing")
            run.heal()
            oracle = Oracle(run)
            oracle.check_integrity()
            oracle.check_exactly_once()
            oracle.check_conflicts()
            oracle.check_offline_pages()
            oracle.check_forests()
            oracle.check_shows()
            oracle.check_restores()
            if run.pg:
                run.check_refused()
            connections = run.connections() if options.brokers > 1 else {}  # the logs go with the scenario
    except Exception as error:
        print(f"FAILED faults {replay}", flush=True)
        print("the plan (replay with the same options):", flush=True)
        for index, event in enumerate(plan):
            print(f"  {index:4d} {describe(event)}", flush=True)
        if run is not None and run.pg:
            print(run.pg.log(), flush=True)
        if not isinstance(error, CheckFailed):
            raise
        print(f"FAILED faults {replay}: {str(error).splitlines()[0]}", flush=True)
        sys.exit(1)
    summary = ", ".join(f"{k if isinstance(k, str) else k[0] + ('' if k[1] else ' refused')} {v}"
                        for k, v in sorted(run.counts.items(), key=lambda item: str(item[0])))
    note(summary)
    extras = ""
    if "crash" in extra:
        reached = [c for c in run.crashes if c[3]]
        inside = [c for c in reached if c[4]]
        committed = [c for c in reached if c[1] == "committed"]
        extras += (f"; crash points: {len(reached)} of {len(run.crashes)} reached, {len(inside)} inside a "
                   f"transaction, {len(committed)} right after a commit")
        by_label = {}
        for target, point, _, where, within in reached:
            key = f"{'broker' if target == 'broker' else 'daemon'} {point}"
            by_label[key] = by_label.get(key, 0) + 1
        note("crash points reached: " + ", ".join(f"{k} {v}" for k, v in sorted(by_label.items())))
    if "restore" in extra:
        lost = sum(len(ids) for restore in run.lost_at_restore for ids in restore.values())
        held = sum(len(ids) for restore in run.held_at_restore for ids in restore.values())
        extras += f"; restores: {len(run.held_at_restore)} ({held} mutations held, {lost} pushed again)"
    if options.brokers > 1:
        moved = sorted(name for name, seen in connections.items() if len(seen) > 1)
        note("connections per device and broker: " + "; ".join(
            f"{name} " + ", ".join(f"{b} {n}" for b, n in sorted(seen.items())) for name, seen in connections.items()))
        broker_faults = sum(run.counts.get(k, 0) for k in ("kill_broker", "kill_broker_after_edit",
                                                          "kill_broker_in_flight", "broker_down"))
        if broker_faults and not moved:
            print(f"FAILED faults {replay}: {broker_faults} broker faults and no device connected to more than one "
                  "broker (no failover happened)", flush=True)
            sys.exit(1)
        extras += f"; failover: {len(moved)} of {len(connections)} devices were on both brokers"
    if options.brokers > 1:
        extras += f"; {run.counts.get('failovers seen', 0)} devices seen moving off a broker that stayed down"
        extras += (f"; bus probes: {run.counts.get('probes seen', 0)} seen without a sync, "
                   f"{run.counts.get('probes seen on the same stream', 0)} on the same stream")
    if "redis" in extra:
        extras += f"; redis: killed {run.counts.get('kill_redis', 0)} times, started {run.redis.starts} times"
    if "concurrent" in extra:
        extras += (f"; concurrent: {run.counts.get('concurrent', 0)} steps, {run.concurrent['batches']} batches of "
                   f"two clients through both brokers, {len(run.concurrent['pages'])} pages, every time distinct")
    if "postgres" in extra:
        recoveries = ", ".join(f"{t * 1000:.0f}" for t in run.recoveries)
        extras += (f"; postgres: stopped {run.counts.get('kill_postgres', 0)} times, "
                   f"{len(run.refused)} batches answered 503 (none applied), brokers recovered in [{recoveries}] ms")
    if "stall" in extra:
        played = [st for proxy in run.proxies.values() for st in proxy.stalls]
        extras += (f"; stalls: {len(played)} played ({sum(1 for st in played if st[4])} reset, "
                   f"{sum(1 for st in played if not st[0])} towards the broker)")
    print(f"ALL OK faults {replay} in {time.monotonic() - started:.1f} s{extras}", flush=True)


if __name__ == "__main__":
    main()
