#!/usr/bin/env python3
"""A WebSocket server built on the Python `websockets` package, for interop tests of our client.

Listens on 127.0.0.1, port 0, prints "PORT <n>" as its first line, and runs until killed (or, with
--exit-on-stdin-eof, until its stdin closes).

    /echo       echoes text and binary messages; on the text "ping-me" it pings the client, waits for the
                pong and answers "latency <seconds>"
    /close4001  closes at once with 4001 "server says bye"

When a connection ends it prints "CLOSED <path> code=<code> reason=<reason>" with the close code and reason
it received from the client, so the test can check what the server saw. Uses websockets' asyncio API
(websockets >= 13) and falls back to the legacy API when it is absent (or when WS_FORCE_LEGACY=1).
"""

import asyncio
import os
import sys
import threading
import time

import websockets

try:
    if os.environ.get("WS_FORCE_LEGACY") == "1":
        raise ImportError("legacy API forced")
    from websockets.asyncio.server import serve

    API = "asyncio"
except ImportError:
    try:
        from websockets.legacy.server import serve
    except ImportError:  # websockets < 10: the legacy API at top level
        from websockets import serve
    API = "legacy"

ConnectionClosed = websockets.exceptions.ConnectionClosed


def exit_when_stdin_closes():
    """With --exit-on-stdin-eof: exit once stdin reaches EOF. The test holds the other end of a pipe, so a
    test that dies or times out without killing us (its watchdog closes the pipe) leaves no server behind."""
    if "--exit-on-stdin-eof" not in sys.argv[1:]:
        return

    def watch():
        sys.stdin.buffer.read()
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def request_path(ws, path):
    if path is not None:  # legacy < 10.1 passes the path as a second argument
        return path
    request = getattr(ws, "request", None)  # asyncio API
    return request.path if request is not None else ws.path  # legacy


async def ping_latency(ws):
    started = time.monotonic()
    waiter = await ws.ping(b"server-ping")
    latency = await asyncio.wait_for(waiter, 10)
    return latency if isinstance(latency, float) else time.monotonic() - started


async def handler(ws, path=None):
    path = request_path(ws, path)
    try:
        if path == "/echo":
            async for message in ws:
                if message == "ping-me":
                    latency = await ping_latency(ws)
                    print("PING answered latency=%.6f" % latency, flush=True)
                    await ws.send("latency %.9f" % latency)
                else:
                    await ws.send(message)
        elif path == "/close4001":
            await ws.close(4001, "server says bye")
        else:
            await ws.close(1008, "no such path")
    except ConnectionClosed:
        pass
    except Exception as error:  # a pong that never came, say: report it and end the connection
        print("ERROR %s %s: %s" % (path, type(error).__name__, error), flush=True)
        await ws.close(1011, type(error).__name__)
    await ws.wait_closed()
    print("CLOSED %s code=%s reason=%s" % (path, ws.close_code, ws.close_reason), flush=True)


async def main():
    async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print("PORT %d" % port, flush=True)
        print("websockets %s, %s API" % (websockets.__version__, API), flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    exit_when_stdin_closes()
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
