"""Reloads a running broker's configuration with SIGHUP, as `systemctl reload` does, and checks over the wire that
what may change live changes, that no stream is dropped for it, and that a narrowed or revoked token loses what
it may no longer see at once.

Usage: broker_reload.py BASE_URL CONFIG_FILE PID LOG_FILE ALICE_TOKEN BOB_TOKEN
The broker must run CONFIG_FILE with ALICE in workspaces w1 and w2, BOB in w2; its log goes to LOG_FILE.
Prints one "OK ..." line per check and "ALL OK" at the end; on the first mismatch prints "FAIL ..." and exits 1.
"""
import asyncio
import json
import os
import signal
import sys
import time

import websockets

from checks import check, fail, json_caller

BASE, CONFIG, PID, LOG, ALICE, BOB = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
WS = BASE.replace("http://", "ws://") + "/v1/stream"
ORIGINAL = open(CONFIG).read()

call = json_caller(BASE, ALICE)


class Client:
    """A device: its client id, workspace and token, and its next mutation id."""

    def __init__(self, client, workspace, token):
        self.client, self.workspace, self.token, self.next = client, workspace, token, 1

    def push(self, *mutations):
        batch = []
        for page, type_, fields in mutations:
            m = {"id": self.next, "page": page, "time": f"{1_700_000_000_000 + self.next}:0", "type": type_}
            m.update(fields)
            batch.append(m)
            self.next += 1
        return call("POST", "/v1/batch", {"client": self.client, "workspace": self.workspace, "mutations": batch},
                    self.token)


def reload(text, outcome):
    """Writes `text` as the configuration, sends SIGHUP and waits until the broker logged one more `outcome`
    ("configuration reloaded" or "reload refused")."""
    before = open(LOG).read().count(outcome)
    with open(CONFIG, "w") as file:
        file.write(text)
    os.kill(PID, signal.SIGHUP)
    deadline = time.monotonic() + 10
    while open(LOG).read().count(outcome) == before:
        if time.monotonic() > deadline:
            fail(f"no '{outcome}' logged after SIGHUP:\n{open(LOG).read()[-2000:]}")
        time.sleep(0.02)


async def next_message(ws, timeout=10):
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def changed_pages(ws, timeout=10):
    """The pages of the next `changed` frame."""
    while True:
        message = await next_message(ws, timeout)
        if message["op"] == "changed":
            return set(message["pages"])


async def assert_quiet(ws, seconds=0.5):
    try:
        message = await asyncio.wait_for(ws.recv(), seconds)
        fail(f"unexpected message {message[:200]}")
    except asyncio.TimeoutError:
        pass


async def main():
    laptop = Client("alice-laptop", "w1", ALICE)
    tablet = Client("alice-tablet", "w2", ALICE)
    bob = Client("bob-phone", "w2", BOB)
    status, _ = laptop.push(("notes", "create_page", {"title": "notes"}))
    check(status == 200, "alice creates a page in w1")
    status, _ = tablet.push(("plans", "create_page", {"title": "plans"}))
    check(status == 200, "alice creates a page in w2")

    headers = {"Authorization": "Bearer " + ALICE}
    async with websockets.connect(WS, additional_headers=headers) as ws:
        await ws.send(json.dumps({"op": "subscribe", "pages": ["notes", "plans"]}))
        answer = await next_message(ws)
        check(answer["op"] == "subscribed" and answer["total"] == 2, "alice's stream subscribes to both pages")

        # A file that does not validate changes nothing: the stream stays, the old limits hold.
        reload(ORIGINAL.replace('user = "alice"', 'user = "alice"\nnot_a_key = 1'), "reload refused")
        status, _ = bob.push(("plans", "set_title", {"title": "bob 1"}))
        check(status == 200 and await changed_pages(ws) == {"plans"},
              "after a refused reload the stream is still notified")

        # Narrow alice to w1, lower the batch limit, and change the listen address (which needs a restart).
        narrowed = (ORIGINAL.replace('workspaces = ["w1", "w2"]', 'workspaces = ["w1"]')
                    .replace("[limits]", "[limits]\nbatch_mutations = 2")
                    .replace('listen = "127.0.0.1:0"', 'listen = "127.0.0.1:1"'))
        check(narrowed != ORIGINAL and "batch_mutations = 2" in narrowed, "the narrowed file differs")
        reload(narrowed, "configuration reloaded")
        answer = await next_message(ws)
        check(answer == {"op": "revoked", "revokedPages": ["plans"], "total": 1},
              f"alice's stream is told its w2 subscription is revoked ({answer})")
        status, _ = bob.push(("plans", "set_title", {"title": "bob 2"}))
        check(status == 200, "bob still writes w2")
        await assert_quiet(ws)
        check(True, "a w2 change no longer reaches alice's stream")
        status, _ = laptop.push(("notes", "set_title", {"title": "still here"}))
        check(status == 200 and await changed_pages(ws) == {"notes"},
              "the same stream, never dropped, is still notified of w1")
        status, body = tablet.push(("plans", "set_title", {"title": "too late"}))
        check(status == 403, f"alice may no longer write w2 ({status} {body})")
        status, body = laptop.push(*[("notes", "set_title", {"title": str(i)}) for i in range(3)])
        check(status == 413 and "at most 2" in body["message"], f"the new batch limit holds at once ({status})")
        status, _ = call("GET", "/healthz", token=None)
        check(status == 200, "the broker still serves on its old address (listen needs a restart)")

        # Remove alice's token: her stream is closed with 1008 and her requests are refused.
        revoked = narrowed.replace(f'token = "{ALICE}"', 'token = "someone-else-0123456789"')
        reload(revoked, "configuration reloaded")
        try:
            while True:
                await next_message(ws)
        except websockets.ConnectionClosed as closed:
            check(closed.rcvd is not None and closed.rcvd.code == 1008 and closed.rcvd.reason == "token revoked",
                  f"a revoked token's stream is closed with 1008 ({closed.rcvd})")
        status, _ = laptop.push(("notes", "set_title", {"title": "gone"}))
        check(status == 401, f"a revoked token is refused ({status})")
    status, _ = bob.push(("plans", "set_title", {"title": "bob 3"}))
    check(status == 200, "another token is untouched")
    print("ALL OK", flush=True)


asyncio.run(main())
