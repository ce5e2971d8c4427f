"""Drives a running pagesync broker over HTTP and WebSocket, as a device would, and checks every answer.

Usage: broker_api.py BASE_URL ALICE_TOKEN BOB_TOKEN
Prints one "OK ..." line per check and "ALL OK" at the end; on the first mismatch prints "FAIL ..." and exits 1.
"""
import asyncio
import json
import sys
import time
import urllib.error
import urllib.request

import websockets

from checks import check, fail, json_caller, metric_reader

BASE, ALICE, BOB = sys.argv[1], sys.argv[2], sys.argv[3]
WS = BASE.replace("http://", "ws://") + "/v1/stream"

call = json_caller(BASE, ALICE)


metric = metric_reader(BASE)


def call_text(path, text, token=ALICE):
    """POST `text` as it is (duplicate keys, escapes: what json.dumps cannot write) -> (status, decoded answer)."""
    request = urllib.request.Request(BASE + path, data=text.encode(), method="POST")
    request.add_header("Authorization", "Bearer " + token)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def clock_header(path):
    """The broker's HLC from an answer's Pagesync-Clock header, as (millis, counter)."""
    request = urllib.request.Request(BASE + path, headers={"Authorization": "Bearer " + ALICE})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            value = response.headers["Pagesync-Clock"]
    except urllib.error.HTTPError as error:
        value = error.headers["Pagesync-Clock"]
    millis, counter = value.split(":")
    return int(millis), int(counter)


class Client:
    """A device: its client id and its next mutation id."""

    def __init__(self, client, workspace="w1", token=ALICE):
        self.client, self.workspace, self.token, self.next, self.clock = client, workspace, token, 1, 0

    def mutation(self, page, type_, **fields):
        self.clock += 1
        m = {"id": self.next, "page": page, "time": f"{1_700_000_000_000 + self.clock}:0", "type": type_}
        m.update(fields)
        self.next += 1
        return m

    def push(self, mutations):
        return call("POST", "/v1/batch", {"client": self.client, "workspace": self.workspace, "mutations": mutations}, self.token)


async def receive_changes(ws, expected, timeout=10):
    """Collects 'changed' frames until each page in `expected` (page -> time) was seen at that time or later;
    returns {page: newest time seen} for every page any frame named."""
    seen = {}
    async def loop():
        while any(seen.get(page, -1) < time for page, time in expected.items()):
            message = json.loads(await ws.recv())
            if message["op"] == "changed":
                for page, time in message["pages"].items():
                    seen[page] = max(time, seen.get(page, -1))
    await asyncio.wait_for(loop(), timeout)
    return seen


async def assert_quiet(ws, seconds=0.3):
    try:
        message = await asyncio.wait_for(ws.recv(), seconds)
        fail(f"unexpected message {message[:200]}")
    except asyncio.TimeoutError:
        pass


async def main():
    status, body = call("GET", "/healthz", token=None)
    check(status == 200 and body["status"] == "ok", "healthz answers without a token")
    status, body = call("POST", "/v1/batch", {"client": "c", "workspace": "w1", "mutations": []}, token=None)
    check(status == 401, f"no token is 401 ({status})")
    status, body = call("POST", "/v1/batch", {"client": "c", "workspace": "w1", "mutations": []}, token="wrong-token-wrong-token")
    check(status == 401 and "not valid" in body["message"], "a wrong token is 401")
    status, body = call("POST", "/v1/batch", {"client": "c", "workspace": "w2", "mutations": []})
    check(status == 403, f"another workspace is 403 ({status} {body})")
    status, body = call("POST", "/v1/batch", b"not json".decode())
    check(status == 400, f"a malformed body is 400 ({status})")

    alice = Client("alice-laptop")
    pages = [f"page-{i:05d}" for i in range(10_000)]
    async with websockets.connect(WS, additional_headers={"Authorization": "Bearer " + ALICE}, max_size=None) as ws:
        await ws.send(json.dumps({"op": "subscribe", "pages": pages + ["bad id!"]}))
        answer = json.loads(await ws.recv())
        check(answer["op"] == "subscribed" and answer["added"] == 10_000 and answer["total"] == 10_000
              and answer["denied"] == ["bad id!"], "10,000 pages subscribed in one frame")

        # Two clients write; the subscriber hears exactly the pages that changed.
        status, first = alice.push([alice.mutation(p, "create_page", title=p) for p in pages[:3]])
        check(status == 200 and [r["status"] for r in first["results"]] == ["applied"] * 3, "a batch of creates is applied")
        phone = Client("alice-phone")
        phone.clock = 1000  # its edits are newer than the laptop's: last writer wins
        status, second = phone.push([phone.mutation(pages[1], "set_title", title="from the phone"),
                                     phone.mutation("unsubscribed-page", "create_page", title="x")])
        check(status == 200, "a second client pushes")
        expected = {pages[0]: first["sequence"], pages[1]: second["sequence"], pages[2]: first["sequence"]}
        seen = await receive_changes(ws, expected)
        check(seen == expected,
              f"notifications carry each page's newest lastUpdatedTime ({seen})")
        await assert_quiet(ws)
        check(True, "nothing is sent for pages nobody subscribed to")

        # The broker's clock (Pagesync-Clock) is after every mutation time it applied, even one from a device
        # whose clock runs ahead (here by an hour): devices merge it, so their next edits order after what the
        # broker has seen.
        before = clock_header("/v1/pages/" + pages[0])
        future = Client("future-device")
        ahead = int(time.time() * 1000) + 3_600_000
        status, _ = future.push([{"id": 1, "page": "from-the-future", "time": f"{ahead}:7",
                                  "type": "create_page", "title": "later"}])
        after = clock_header("/v1/pages/from-the-future")
        check(status == 200 and before < (ahead, 7) < after,
              f"answers carry the broker's clock, merged with applied times ({before} then {after})")
        # A time further ahead than [limits] clock_ahead_seconds (a day) would win every field it touches for
        # as long: rejected, and the broker's clock does not follow it.
        status, answer = future.push([{"id": 2, "page": "from-the-future", "time": "4102444800000:7",
                                       "type": "set_title", "title": "forever"}])
        latest = clock_header("/v1/pages/from-the-future")
        check(status == 200 and answer["results"][0]["reason"] == {"code": 10, "name": "clock_ahead"}
              and latest < (4102444800000, 0), f"a time years ahead is rejected clock_ahead ({latest})")

        # A re-sent batch is acknowledged again, applied once, and notifies nobody.
        batch = [alice.mutation(pages[0], "set_property", name="Count", value=1)]
        status, once = alice.push(batch)
        status2, again = call("POST", "/v1/batch", {"client": alice.client, "workspace": "w1", "mutations": batch})
        check(status2 == 200 and [r["status"] for r in again["results"]] == ["duplicate"]
              and again["pages"] == once["pages"] and "sequence" not in again, "a duplicate batch is acknowledged, not applied")
        seen = await receive_changes(ws, {pages[0]: once["sequence"]})
        check(seen == {pages[0]: once["sequence"]}, "the applied batch notified once")
        await assert_quiet(ws)
        check(True, "the duplicate notified nobody")

        # A gap in mutation ids is refused with 409, and nothing is applied.
        alice.next += 5
        status, body = alice.push([alice.mutation(pages[0], "set_title", title="after a gap")])
        check(status == 409 and "continue from" in body["message"], "a gap in mutation ids is 409")
        alice.next -= 6

        # Bob cannot see, subscribe to, or learn anything of Alice's pages.
        status, body = call("GET", f"/v1/pages/{pages[0]}", token=BOB)
        check(status == 404, "another user's page is not found")
        async with websockets.connect(WS, additional_headers={"Authorization": "Bearer " + BOB}) as bob:
            await bob.send(json.dumps({"op": "subscribe", "pages": pages[:2] + ["bob-page"]}))
            answer = json.loads(await bob.recv())
            check(answer["denied"] == pages[:2] and answer["added"] == 1, "subscribing to another workspace's pages is denied")
            # Pages the broker's index knows, with "op" last: the index reads the frame without a decoder.
            reads = metric("subscribe_store_reads_pages_total")
            await bob.send('{"pages": ' + json.dumps(pages[:2]) + ', "op": "subscribe", "op": "unsubscribe"}')
            answer = json.loads(await bob.recv())
            check(answer["op"] == "subscribed" and answer["denied"] == pages[:2] and answer["added"] == 0
                  and answer["total"] == 1 and metric("subscribe_store_reads_pages_total") == reads,
                  f"followed pages of another workspace are denied from the index, the first op winning ({answer})")
            status, secret = alice.push([alice.mutation(pages[0], "set_title", title="secret")])
            await receive_changes(ws, {pages[0]: secret["sequence"]})
            await assert_quiet(bob)
            check(True, "no notification crosses workspaces")
            # A page nobody subscribes to: its workspace comes from the store, not from the broker's index.
            status, _ = alice.push([alice.mutation("unwatched", "create_page", title="nobody listens")])
            await bob.send(json.dumps({"op": "subscribe", "pages": ["unwatched", "bob-page"]}))
            answer = json.loads(await bob.recv())
            check(status == 200 and answer["denied"] == ["unwatched"] and answer["added"] == 0 and answer["total"] == 1,
                  "a page of another workspace that nobody subscribes to is denied")
            # Frames take effect in the order sent, a subscribe that waits for the store included.
            await bob.send(json.dumps({"op": "subscribe", "pages": ["later-1", "later-2"]}))
            await bob.send(json.dumps({"op": "unsubscribe", "pages": ["later-1", "later-2"]}))
            await bob.send(json.dumps({"op": "subscribe", "pages": ["later-2"]}))
            answers = [json.loads(await bob.recv()) for _ in range(3)]
            check([a["op"] for a in answers] == ["subscribed", "unsubscribed", "subscribed"]
                  and [a["total"] for a in answers] == [3, 1, 2] and answers[1]["removed"] == 2,
                  f"subscribe, unsubscribe, subscribe answer in order ({answers})")

        # Catch-up and fetch.
        status, body = call("POST", "/v1/catchup", {"epoch": None, "pages": {pages[0]: 0, pages[5]: 0, "nope": 0}})
        check(status == 200 and list(body["changed"]) == [pages[0]] and body["gone"] == ["nope", pages[5]],
              "catch-up returns only the changed pages")
        # Pages somebody subscribes to: answered from the broker's index, the same as from the store.
        from_index = metric("catchups_from_index_total")
        reads = metric("subscribe_store_reads_pages_total")
        status, both = call("POST", "/v1/catchup", {"pages": {pages[0]: 0, pages[1]: 0}})
        t0, t1 = both["changed"].get(pages[0], 0), both["changed"].get(pages[1], 0)
        check(status == 200 and t0 > 0 and t1 > 0 and both["gone"] == [] and both["epoch"] and both["sequence"] >= max(t0, t1),
              f"a catch-up of subscribed pages names both at their times ({both})")
        status, one = call("POST", "/v1/catchup", {"epoch": both["epoch"], "pages": {pages[0]: t0 - 1, pages[1]: t1}})
        check(status == 200 and one["changed"] == {pages[0]: t0} and one["gone"] == [] and not one["epochChanged"],
              f"only the page newer than the device's time is changed ({one})")
        status, other_epoch = call("POST", "/v1/catchup", {"epoch": "another", "pages": {pages[0]: t0, pages[1]: t1}})
        check(status == 200 and other_epoch["epochChanged"] and other_epoch["changed"] == {pages[0]: t0, pages[1]: t1},
              "another epoch's times mean nothing: every page is changed")
        status, bobs = call("POST", "/v1/catchup", {"pages": {pages[0]: 0, pages[1]: 0}}, BOB)
        check(status == 200 and bobs["changed"] == {} and bobs["gone"] == sorted([pages[0], pages[1]]),
              f"another workspace's subscribed pages are gone for bob ({bobs})")
        check(metric("catchups_from_index_total") == from_index + 4, "those four were answered from the index")
        status, stored = call("POST", "/v1/catchup", {"epoch": both["epoch"], "pages": {pages[0]: t0 - 1, pages[1]: t1, "nope": 0}})
        check(status == 200 and stored["changed"] == one["changed"] and stored["gone"] == ["nope"]
              and metric("catchups_from_index_total") == from_index + 4,
              "with a page nobody follows the store answers, the same for the others")
        # The index reads the body itself (no decoder): it must read it as the decoder does. The first of duplicate
        # keys wins, pages and epoch alike; a later duplicate that is not a time is no error.
        p0, p1, epoch = json.dumps(pages[0]), json.dumps(pages[1]), json.dumps(both["epoch"])
        status, first_wins = call_text("/v1/catchup", f'{{"pages": {{{p0}: {t0 - 1}, {p1}: {t1}, {p0}: {t0}, {p1}: {t1 - 1}}}, '
                                                      f'"epoch": {epoch}, "epoch": "another", "pages": {{}}}}')
        check(status == 200 and first_wins["changed"] == {pages[0]: t0} and not first_wins["epochChanged"]
              and metric("catchups_from_index_total") == from_index + 5,
              f"the index reads the first of duplicate pages and epochs ({first_wins})")
        status, later_text = call_text("/v1/catchup", f'{{"pages": {{{p0}: {t0}, {p1}: {t1 - 1}, {p0}: "late"}}}}')
        check(status == 200 and later_text["changed"] == {pages[1]: t1},
              f"a later duplicate that is not a time is ignored, as by the decoder ({later_text})")
        escaped = "\\u00" + format(ord(pages[0][0]), "02x") + pages[0][1:]
        status, from_escape = call_text("/v1/catchup", f'{{"pages": {{"{escaped}": {t0 - 1}}}}}')
        check(status == 200 and from_escape["changed"] == {pages[0]: t0}, f"an id written with escapes is that id ({from_escape})")
        status, not_time = call_text("/v1/catchup", f'{{"pages": {{{p0}: "soon"}}}}')
        check(status == 400 and "UInt64" in not_time["message"], f"a followed page's time that is not one is 400 ({not_time})")
        check(metric("subscribe_store_reads_pages_total") == reads, "catch-ups read no workspace for subscriptions")
        status, body = call("POST", "/v1/fetch", {"pages": {pages[0]: 0, pages[1]: 0}, "limit": 1})
        check(status == 200 and len(body["deltas"]) == 1 and body["deltas"][0]["full"] and body["nextCursor"] == pages[0],
              "fetch is paginated")
        status, body = call("POST", "/v1/fetch", {"pages": {pages[0]: 0, pages[1]: 0}, "limit": 1, "cursor": pages[0]})
        check(status == 200 and body["deltas"][0]["page"]["title"] == "from the phone" and "nextCursor" not in body,
              "the next page of a fetch continues after the cursor")

        # Unsubscribe: no more notifications for those pages.
        await ws.send(json.dumps({"op": "unsubscribe", "pages": pages[:1]}))
        answer = json.loads(await ws.recv())
        check(answer == {"op": "unsubscribed", "removed": 1, "total": 9_999}, "unsubscribe answers with counts")
        alice.push([alice.mutation(pages[0], "set_title", title="quiet")])
        await assert_quiet(ws)
        check(True, "an unsubscribed page notifies nobody")

        await ws.send("{not json")
        answer = json.loads(await ws.recv())
        check(answer["op"] == "error" and answer["code"] == 4400, "a malformed frame gets an error and the stream stays")
    print("ALL OK", flush=True)


asyncio.run(main())
