"""One client floods a broker with connections and requests; another client, from another address, must still be
served: the per-peer connection limit holds before any token is read, and the flooder gets its slots back as it
closes.

Usage: broker_flood.py BASE_URL ALICE_TOKEN BOB_TOKEN PER_PEER_LIMIT
The broker must run with `[limits] connections_per_peer = PER_PEER_LIMIT` and `connections` four times that; ALICE may write w1, BOB w2. The flooder connects from 127.0.0.1, the other client from 127.0.0.2 (the
whole of 127.0.0.0/8 is loopback on Linux).
Prints one "OK ..." line per check and "ALL OK" at the end; on the first mismatch prints "FAIL ..." and exits 1.
"""
import asyncio
import http.client
import json
import socket
import sys
import urllib.parse

import websockets

from checks import check

BASE, ALICE, BOB, PER_PEER = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
HOST, PORT = urllib.parse.urlsplit(BASE).hostname, urllib.parse.urlsplit(BASE).port
WS = BASE.replace("http://", "ws://") + "/v1/stream"
FLOODER, OTHER = "127.0.0.1", "127.0.0.2"


def open_from(source):
    sock = socket.create_connection((HOST, PORT), timeout=5, source_address=(source, 0))
    return sock


def answer_or_silence(sock, seconds):
    """The bytes the broker sent before closing, or None if it kept the connection open and said nothing."""
    sock.settimeout(seconds)
    data = b""
    try:
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return data
            data += chunk
    except socket.timeout:
        return None if not data else data


def call_from(source, method, path, body, token):
    connection = http.client.HTTPConnection(HOST, PORT, timeout=10, source_address=(source, 0))
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
    connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    return response.status, json.loads(payload or b"null")


async def main():
    # The flood: as many connections as the whole broker allows (without the per-peer limit they would take every
    # slot), sending nothing: the cheapest way to hold one. Then requests on the ones kept, pipelined, never read.
    # Connections are accepted in the order they were made: the first PER_PEER are kept, the rest refused.
    flood = [open_from(FLOODER) for _ in range(4 * PER_PEER)]
    held = [(sock, answer_or_silence(sock, 0.2)) for sock in flood[:PER_PEER]]
    refused = [(sock, answer_or_silence(sock, 10)) for sock in flood[PER_PEER:]]
    check(all(answer is None for _, answer in held), f"the flooder keeps its first {PER_PEER} idle connections")
    check(all(a and b"HTTP/1.1 503" in a and f"too many connections from {FLOODER}".encode() in a
              for _, a in refused), f"its other {len(refused)} get 503 naming its address")
    for sock, _ in held:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 200)

    # Meanwhile another client, from another address, works as usual: a write, a stream, a notification.
    status, _ = call_from(OTHER, "POST", "/v1/batch", {
        "client": "bob-phone", "workspace": "w2",
        "mutations": [{"id": 1, "page": "plans", "time": "1700000000001:0", "type": "create_page", "title": "P"}]},
        BOB)
    check(status == 200, "a client on another address pushes a batch during the flood")
    async with websockets.connect(WS, additional_headers={"Authorization": "Bearer " + BOB},
                                  local_addr=(OTHER, 0)) as ws:
        await ws.send(json.dumps({"op": "subscribe", "pages": ["plans"]}))
        answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
        check(answer["op"] == "subscribed" and answer["total"] == 1, "and opens a stream and subscribes")
        status, _ = call_from(OTHER, "POST", "/v1/batch", {
            "client": "bob-phone", "workspace": "w2",
            "mutations": [{"id": 2, "page": "plans", "time": "1700000000002:0", "type": "set_title", "title": "Q"}]},
            BOB)
        changed = json.loads(await asyncio.wait_for(ws.recv(), 10))
        check(status == 200 and changed["op"] == "changed" and "plans" in changed["pages"],
              "and is notified of its change")

    # A new connection from the flooder is still refused while it holds its slots...
    sock = open_from(FLOODER)
    answer = answer_or_silence(sock, 2)
    check(answer is not None and b"HTTP/1.1 503" in answer, "the flooder is refused while it holds its slots")
    sock.close()
    # ...and served once it let them go.
    for sock, _ in held + refused:
        sock.close()
    for attempt in range(50):
        try:
            status, body = call_from(FLOODER, "GET", "/healthz", None, ALICE)
        except (ConnectionError, http.client.HTTPException):
            status = None
        if status == 200:
            break
        await asyncio.sleep(0.1)
    check(status == 200, "the flooder is served again once it closed its connections")
    print("ALL OK", flush=True)


asyncio.run(main())
