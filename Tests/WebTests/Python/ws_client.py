#!/usr/bin/env python3
"""A WebSocket client built on the Python `websockets` package, for interop tests of our server.

    ws_client.py BASE_URL SCENARIO        BASE_URL like ws://127.0.0.1:1234 (paths are added here)

Scenarios (the server under test provides /echo, which echoes text and binary and, on the text command
"close CODE REASON", closes with that code and reason; and /small, with small size limits):

    echo       text, binary, 1 MiB text and binary, fragmented text and binary messages, ping and pong
    close      the server closes with 4000 "server bye"; then we close with 4002 "client bye"
    oversize   a frame over /small's frame limit, then a fragmented message over its message limit: 1009

Prints "OK <check>" for each check, "ALL OK" at the end, and exits 0; on a mismatch prints
"FAIL <check>: <details>" and exits 1. Uses websockets' asyncio API (websockets >= 13) and falls back to the
legacy API when it is absent (or when WS_FORCE_LEGACY=1, to exercise that path).
"""

import asyncio
import inspect
import os
import sys
import time

import websockets

try:
    if os.environ.get("WS_FORCE_LEGACY") == "1":
        raise ImportError("legacy API forced")
    from websockets.asyncio.client import connect as _connect

    API = "asyncio"
except ImportError:
    try:
        from websockets.legacy.client import connect as _connect
    except ImportError:  # websockets < 10: the legacy API at top level
        from websockets import connect as _connect
    API = "legacy"

ConnectionClosed = websockets.exceptions.ConnectionClosed


class Mismatch(Exception):
    pass


def ok(check):
    print("OK " + check, flush=True)


def expect(check, got, want):
    if got != want:
        raise Mismatch("%s: got %s, want %s" % (check, short(got), short(want)))
    ok(check)


def short(value):
    text = repr(value)
    return text if len(text) <= 120 else text[:100] + "... (%d chars)" % len(text)


def connect(url, **options):
    """Connects without a proxy (loopback) and with no limit on incoming messages."""
    parameters = inspect.signature(_connect).parameters
    if "proxy" in parameters:
        options["proxy"] = None
    return _connect(url, max_size=None, **options)


async def ping_latency(ws, payload):
    """Sends a ping, waits for its pong, and returns the round trip in seconds."""
    started = time.monotonic()
    waiter = await ws.ping(payload)
    latency = await asyncio.wait_for(waiter, 10)
    # Old legacy versions resolve the waiter with None rather than the latency.
    return latency if isinstance(latency, float) else time.monotonic() - started


async def closed_code(ws):
    """Waits until the connection is closed; returns the close code and reason it ended with."""
    try:
        while True:
            await asyncio.wait_for(ws.recv(), 10)
    except ConnectionClosed:
        pass
    await asyncio.wait_for(ws.wait_closed(), 10)
    return ws.close_code, ws.close_reason


async def scenario_echo(base):
    async with connect(base + "/echo") as ws:
        for text in ["hello", "héllo wörld ✓ 🚀", ""]:
            await ws.send(text)
            expect("text echo %r" % text[:8], await ws.recv(), text)

        data = bytes(range(256)) * 4
        await ws.send(data)
        expect("binary echo", await ws.recv(), data)

        big_text = "".join(chr(0x41 + i % 26) for i in range(1 << 20))
        await ws.send(big_text)
        expect("1 MiB text echo", await ws.recv(), big_text)
        big_binary = os.urandom(1 << 20)
        await ws.send(big_binary)
        expect("1 MiB binary echo", await ws.recv(), big_binary)

        # An iterable is sent as one message in fragments (a text frame, then continuation frames).
        await ws.send(["frag1-", "frag2-", "ü-", "frag3"])
        expect("fragmented text echo", await ws.recv(), "frag1-frag2-ü-frag3")
        await ws.send([b"\x00\x01", b"\xff" * 3000, b"\x02"])
        expect("fragmented binary echo", await ws.recv(), b"\x00\x01" + b"\xff" * 3000 + b"\x02")

        latency = await ping_latency(ws, b"py-ping")
        if not latency > 0:
            raise Mismatch("ping: latency %r" % latency)
        ok("ping answered with pong")

        await ws.close(1000, "echo done")
        expect("normal close code", ws.close_code, 1000)


async def scenario_close(base):
    async with connect(base + "/echo") as ws:
        await ws.send("close 4000 server bye")
        code, reason = await closed_code(ws)
        expect("server-initiated close code", code, 4000)
        expect("server-initiated close reason", reason, "server bye")

    async with connect(base + "/echo") as ws:
        await ws.send("still open?")
        expect("echo before client close", await ws.recv(), "still open?")
        await ws.close(4002, "client bye")
        # The server echoes our code in its close frame (RFC 6455 5.5.1).
        expect("client-initiated close echoed code", ws.close_code, 4002)


async def scenario_oversize(base):
    async with connect(base + "/small") as ws:
        try:
            await ws.send(b"x" * (20 * 1024))
        except ConnectionClosed:
            pass
        code, _ = await closed_code(ws)
        expect("frame over the limit closes with", code, 1009)

    async with connect(base + "/small") as ws:
        try:
            await ws.send(["y" * 8192 for _ in range(8)])
        except ConnectionClosed:
            pass
        code, _ = await closed_code(ws)
        expect("fragmented message over the limit closes with", code, 1009)


SCENARIOS = {"echo": scenario_echo, "close": scenario_close, "oversize": scenario_oversize}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in SCENARIOS:
        print("usage: ws_client.py BASE_URL {%s}" % ",".join(SCENARIOS), file=sys.stderr)
        return 2
    print("websockets %s, %s API" % (websockets.__version__, API), flush=True)
    try:
        asyncio.run(asyncio.wait_for(SCENARIOS[sys.argv[2]](sys.argv[1]), 30))
    except Mismatch as error:
        print("FAIL %s" % error, flush=True)
        return 1
    except Exception as error:  # a refused handshake, a timeout, a dropped connection
        print("FAIL %s: %s" % (type(error).__name__, error), flush=True)
        return 1
    print("ALL OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
