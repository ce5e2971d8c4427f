"""A broker started with [limits] subscriptions_per_connection = 5: a device's subscriptions stop at the limit,
whether the broker decides a frame from the store or from its index of followed pages.

Usage: broker_limits.py BASE_URL ALICE_TOKEN
Prints one "OK ..." line per check and "ALL OK" at the end; on the first mismatch prints "FAIL ..." and exits 1.
"""
import asyncio
import json
import sys

import websockets

from checks import check, json_caller, metric_reader

BASE, ALICE = sys.argv[1], sys.argv[2]
WS = BASE.replace("http://", "ws://") + "/v1/stream"
call = json_caller(BASE, ALICE)
PAGES = [f"limit-{letter}" for letter in "abcdefg"]


metric = metric_reader(BASE)


async def subscribe(ws, pages):
    await ws.send(json.dumps({"op": "subscribe", "pages": pages}))
    answer = json.loads(await ws.recv())
    return answer["added"], answer["total"], answer["denied"]


async def main():
    mutations = [{"id": i + 1, "page": page, "time": f"{1_700_000_000_000 + i}:0", "type": "create_page", "title": page}
                 for i, page in enumerate(PAGES)]
    status, _ = call("POST", "/v1/batch", {"client": "limits", "workspace": "w1", "mutations": mutations})
    check(status == 200, "seven pages created")
    headers = {"Authorization": "Bearer " + ALICE}
    async with websockets.connect(WS, additional_headers=headers) as first, \
            websockets.connect(WS, additional_headers=headers) as second, \
            websockets.connect(WS, additional_headers=headers) as third:
        # Pages nobody follows yet: decided from the store.
        check(await subscribe(first, PAGES[:3]) == (3, 3, []), "three subscriptions under a limit of five")
        check(await subscribe(first, PAGES[1:]) == (2, 5, PAGES[5:]),
              "pages already held count once; past the limit of five the rest are denied")
        check(await subscribe(first, PAGES[:2]) == (0, 5, []), "at the limit, pages already held are not denied")
        # Now every page has a subscriber, and the broker's index knows them all: decided without the store.
        check(await subscribe(third, PAGES[5:]) == (2, 2, []), "another connection has its own five")
        reads = metric("subscribe_store_reads_pages_total")
        check(await subscribe(second, PAGES) == (5, 5, PAGES[5:]), "from the index, the limit holds the same")
        check(await subscribe(second, [PAGES[0], PAGES[6], PAGES[1]]) == (0, 5, [PAGES[6]]),
              "from the index, at the limit, held pages pass and a new one is denied")
        check(metric("subscribe_store_reads_pages_total") == reads, "those frames read no store")
    print("ALL OK")


asyncio.run(main())
