"""Bad-input tables: for each interface of pagesync, malformed and hostile inputs and the exact error each must
get, with the process alive and its store intact after every row (issue #7, item 4).

Usage: bad_inputs.py BIN_DIR {all|broker_http|broker_stream|local_api|cli|config}

BIN_DIR holds the built pagesync-broker, pagesyncd and pagesync. Each table is data at the top of its function:
one row per input, with the answer it must get (an HTTP status and a fragment of the JSON `message`; a WebSocket
close code and reason, or the stream's `{"op": "error"}`; an exit status and a fragment of stderr; a config error
naming file, line and key). After every row the process must still answer (`/healthz`, `pagesync status`), its
SQLite file must pass `PRAGMA integrity_check`, and, where the input must not write, the store's fingerprint (the
broker's sequence and client records; the daemon's queue and next mutation id) must be unchanged.

Prints one "OK ..." line per row and "ALL OK" at the end; a failing row prints "FAIL", what was expected, what
came, and the logs of every process. Built on daemon_e2e.py's scenario, broker and device classes.
"""
import base64
import json
import os
import random
import re
import signal
import socket
import string
import struct
import subprocess
import sys
import tempfile
import time

import daemon_e2e as e2e
from daemon_e2e import CheckFailed, check, note, ok

ALICE = e2e.USERS["alice"][0]
CAROL = e2e.USERS["carol"][0]  # workspace w2
# The broker's limits for these tables: small, so the rows that pass them stay small.
BODY_BYTES = 65536
BATCH_MUTATIONS = 10
FRAME_BYTES = 4096
PAGE_BYTES = 65536
REQUEST_SECONDS = 1
FRAME_SECONDS = 1
QUEUED_BYTES = 65536
BIG = 18446744073709551615  # 2**64 - 1


class Broker(e2e.Broker):
    """daemon_e2e's broker, with small limits."""

    def write_config(self):
        super().write_config()
        with open(self.config, "a") as config:
            config.write(f"[limits]\nbody_bytes = {BODY_BYTES}\nbatch_mutations = {BATCH_MUTATIONS}\n"
                         f"frame_bytes = {FRAME_BYTES}\npage_bytes = {PAGE_BYTES}\n"
                         f"request_seconds = {REQUEST_SECONDS}\n"
                         f"frame_seconds = {FRAME_SECONDS}\nqueued_bytes_per_connection = {QUEUED_BYTES}\n")


# ---------------------------------------------------------------------------------------------------------------
# Plumbing: raw HTTP over TCP or a Unix socket, raw WebSocket frames, the checks after each row.

def exchange(address, data, timeout=15.0):
    """Sends `data` on a new connection (TCP (host, port) or a Unix socket path) and reads until the peer closes;
    returns (status, headers, body bytes). A connection the peer resets or drops without an answer is status 0."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(address)
        try:
            s.sendall(data)
        except OSError:
            pass  # the peer may answer and close before it read everything (413, 431)
        received = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                received += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ")[1])
    except (IndexError, ValueError):
        return 0, {}, received
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def request(method, path, body=None, token=ALICE, headers=()):
    """A request's bytes, with `Connection: close`. `body`: bytes, or a value sent as JSON."""
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode()
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", "Connection: close"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    lines += list(headers)
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def check_answer(what, answer, status, fragment, header=None):
    """An answer with `status`, a JSON error body whose `message` contains `fragment` (or, for a success, whose
    text contains it), and, if given, the header (name, value)."""
    got_status, headers, body = answer
    try:
        decoded = json.loads(body) if body else None
    except ValueError:
        decoded = None
    if status >= 400:
        good = (got_status == status and isinstance(decoded, dict) and decoded.get("error") == status
                and fragment in decoded.get("message", ""))
    else:
        good = got_status == status and fragment in body.decode("utf-8", "replace")
    if header is not None:
        good = good and headers.get(header[0].lower()) == header[1]
    check(good, f"{what}: {status} {fragment!r}",
          f"{status} with {fragment!r}" + (f" and {header[0]}: {header[1]}" if header else ""),
          f"{got_status} {headers if header else ''} {body[:400]!r}")
    return decoded


def integrity(path):
    rows = e2e.sqlite_rows(path, "PRAGMA integrity_check")
    return [row["integrity_check"] for row in rows]


def broker_fingerprint(broker):
    """What a refused input must leave as it was: the sequence, the epoch, every client's last mutation id and
    the pages."""
    return (broker.rows("SELECT key, value FROM meta ORDER BY key"),
            broker.rows("SELECT id, user_id, last_mutation_id FROM client ORDER BY id"),
            broker.rows("SELECT id, workspace_id, last_updated FROM page ORDER BY id"))


def noise(count, seed):
    """`count` letters that zlib cannot shrink much (a block's CRDT state deflates its text)."""
    generator = random.Random(seed)
    return "".join(generator.choice(string.ascii_letters + string.digits + " ") for _ in range(count))


def check_broker_intact(broker, before, writes=False):
    check(broker.process.poll() is None, "   the broker is running")
    status, _, body = exchange(("127.0.0.1", broker.port), request("GET", "/healthz", token=None))
    check(status == 200 and json.loads(body)["status"] == "ok", "   /healthz answers 200", 200, (status, body))
    found = integrity(broker.store)
    check(found == ["ok"], "   the store passes PRAGMA integrity_check", ["ok"], found)
    after = broker_fingerprint(broker)
    if not writes:
        check(after == before, "   nothing was written", before, after)
    return after


# WebSocket frames, as a client writes them (masked unless told otherwise).

def ws_frame(opcode, payload=b"", mask=True, fin=True, rsv=0):
    first = (0x80 if fin else 0) | rsv | opcode
    size = len(payload)
    if size < 126:
        head = bytes([first, (0x80 if mask else 0) | size])
    elif size < 65536:
        head = bytes([first, (0x80 if mask else 0) | 126]) + struct.pack(">H", size)
    else:
        head = bytes([first, (0x80 if mask else 0) | 127]) + struct.pack(">Q", size)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def text(value):
    return ws_frame(1, value if isinstance(value, bytes) else json.dumps(value).encode())


class Stream:
    """A raw WebSocket client of /v1/stream."""

    def __init__(self, port, token=ALICE, version="13", key=True, query=""):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        lines = [f"GET /v1/stream{query} HTTP/1.1", "Host: localhost", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Version: {version}"]
        if key:
            lines.append("Sec-WebSocket-Key: " + base64.b64encode(os.urandom(16)).decode())
        if token:
            lines.append(f"Authorization: Bearer {token}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1]) if lines[0] else 0
        self.headers = {l.partition(":")[0].strip().lower(): l.partition(":")[2].strip() for l in lines[1:]}
        if self.status != 101:
            # The refusal's body: read to the end of the connection.
            try:
                while True:
                    chunk = self.sock.recv(65536)
                    if not chunk:
                        break
                    self.buffer += chunk
            except OSError:
                pass

    def _need(self, count):
        while len(self.buffer) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"the connection closed with {self.buffer!r} unread")
            self.buffer += chunk

    def receive(self):
        """The next frame from the broker, skipping pings: ("text", value) or ("close", code, reason)."""
        while True:
            self._need(2)
            opcode, size, offset = self.buffer[0] & 0x0F, self.buffer[1] & 0x7F, 2
            if size == 126:
                self._need(4)
                size, offset = struct.unpack(">H", self.buffer[2:4])[0], 4
            elif size == 127:
                self._need(10)
                size, offset = struct.unpack(">Q", self.buffer[2:10])[0], 10
            self._need(offset + size)
            payload, self.buffer = self.buffer[offset:offset + size], self.buffer[offset + size:]
            if opcode == 1:
                return ("text", json.loads(payload))
            if opcode == 8:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
                return ("close", code, payload[2:].decode("utf-8", "replace"))
            if opcode != 9 and opcode != 10:
                return ("other", opcode, payload)

    def send(self, data):
        self.sock.sendall(data)

    def close(self):
        self.sock.close()


# ---------------------------------------------------------------------------------------------------------------
# The broker's HTTP API.

def table_broker_http(s):
    """The broker's HTTP API: raw malformed requests, bad bodies, bad ids, auth, workspaces, client ids."""
    broker = s.broker_with_limits()
    address = ("127.0.0.1", broker.port)

    def batch(client, mutations, workspace="w1"):
        return {"client": client, "workspace": workspace, "mutations": mutations}

    def mutation(id_, page, type_="set_title", time_="1700000000000:0", **fields):
        m = {"id": id_, "page": page, "time": time_, "type": type_}
        m.update(fields if fields or type_ != "set_title" else {"title": "t"})
        return m

    # The state the rows run against: alice's laptop applied ids 1-3 (page home in w1); carol has a page in w2.
    laptop = [mutation(1, "home", "create_page", parent=None, title="Home"),
              mutation(2, "home", title="Home 2"), mutation(3, "home", title="Home 3")]
    check_answer("setup: alice-laptop pushes ids 1-3",
                 exchange(address, request("POST", "/v1/batch", batch("alice-laptop", laptop))), 200, '"applied"')
    check_answer("setup: carol creates her page in w2",
                 exchange(address, request("POST", "/v1/batch", batch(
                     "carol-laptop", [mutation(1, "carols", "create_page", parent=None, title="C")], "w2"),
                     token=CAROL)), 200, '"applied"')

    huge_header = request("GET", "/healthz", token=None, headers=["X-Filler: " + "a" * 40000])
    many_headers = request("GET", "/healthz", token=None, headers=[f"X-H{i}: {'b' * 20}" for i in range(2000)])
    chunked_over = (b"POST /v1/batch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + (b"8000\r\n" + b"a" * 0x8000 + b"\r\n") * 2 + b"10\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n")
    # Rows: (what, request bytes, status, message fragment, writes, header or None).
    rows = [
        # The request itself.
        ("a request line that is not HTTP", b"GARBAGE\r\n\r\n", 400, "invalid HTTP method", False, None),
        ("an HTTP/0.9 request line", b"GET /healthz\r\n\r\n", 505, "HTTP/0.9 is not supported", False, None),
        ("HTTP/2.0", b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505, "HTTP/2.0 is not supported", False, None),
        ("a header line without a colon", b"GET /healthz HTTP/1.1\r\nHost x\r\n\r\n", 400,
         "invalid character in header", False, None),
        ("one 40 KB header", huge_header, 431, "header section exceeds 32768 bytes", False, None),
        ("2,000 headers", many_headers, 431, "header section exceeds 32768 bytes", False, None),
        ("a Content-Length over [limits] body_bytes",
         request("POST", "/v1/batch", b"x" * (BODY_BYTES + 10)), 413,
         f"Content-Length {BODY_BYTES + 10} exceeds the {BODY_BYTES}-byte body limit", False, None),
        ("a chunked body over [limits] body_bytes", chunked_over, 413,
         f"chunked body exceeds the {BODY_BYTES}-byte body limit (a chunk of 16 bytes after {BODY_BYTES})",
         False, None),
        ("a chunk size that is not hex",
         b"POST /v1/batch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n", 400,
         "invalid character in chunk size header", False, None),
        ("chunked and Content-Length together",
         b"POST /v1/batch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
         b"3\r\nabc\r\n0\r\n\r\n", 400, "unexpected content-length header", False, None),
        ("two Content-Lengths",
         b"POST /v1/batch HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400,
         "unexpected content-length header", False, None),
        ("a negative Content-Length", b"POST /v1/batch HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400,
         "invalid character in content-length header", False, None),
        ("a body shorter than its Content-Length (then silence past [limits] request_seconds)",
         b"POST /v1/batch HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc", 408,
         "request not received in time", False, None),
        # Paths and methods.
        ("an unknown path", request("GET", "/nope"), 404, "no route for /nope", False, None),
        ("an unknown path under /v1", request("POST", "/v1/batches", {}), 404, "no route for /v1/batches",
         False, None),
        ("GET /v1/batch", request("GET", "/v1/batch"), 405, "GET is not allowed on /v1/batch", False,
         ("Allow", "POST")),
        ("DELETE /healthz", request("DELETE", "/healthz"), 405, "DELETE is not allowed on /healthz", False,
         ("Allow", "GET, HEAD")),
        ("PUT /v1/pages/home", request("PUT", "/v1/pages/home", {}), 405, "PUT is not allowed on /v1/pages/home",
         False, ("Allow", "GET, HEAD")),
        ("GET /v1/stream without an upgrade", request("GET", "/v1/stream"), 426,
         "upgrade with Sec-WebSocket-Version 13", False, ("Sec-WebSocket-Version", "13")),
        ("POST /v1/stream", request("POST", "/v1/stream", {}), 405, "POST is not allowed on /v1/stream", False,
         None),
        # Authentication.
        ("no token", request("POST", "/v1/batch", batch("alice-laptop", []), token=None), 401,
         "a bearer token is required", False, ("WWW-Authenticate", 'Bearer realm="pagesync"')),
        ("a wrong token", request("POST", "/v1/batch", batch("alice-laptop", []), token="wrong-token-wrong-token"),
         401, "the token is not valid", False, ("WWW-Authenticate", 'Bearer realm="pagesync"')),
        ("a token that is a prefix of a real one", request("GET", "/v1/pages/home", token=ALICE[:-1]), 401,
         "the token is not valid", False, None),
        ("Basic instead of Bearer",
         request("GET", "/v1/pages/home", token=None, headers=["Authorization: Basic YWxpY2U6eA=="]), 401,
         'the Authorization header must be "Bearer TOKEN"', False, None),
        ("Bearer with nothing after it",
         request("GET", "/v1/pages/home", token=None, headers=["Authorization: Bearer"]), 401,
         "the Authorization header must be", False, None),
        ("a wrong access_token in the query", request("GET", "/v1/pages/home?access_token=nope", token=None),
         401, "the token is not valid", False, None),
        # Bodies.
        ("a body that is not JSON", request("POST", "/v1/batch", b"{"), 400, "invalid JSON body", False, None),
        ("a body that is not UTF-8",
         request("POST", "/v1/batch", b'{"client":"\xff\xfe","workspace":"w1","mutations":[]}'), 400,
         "invalid JSON body: it is not valid UTF-8", False, None),
        ("a JSON array for an object", request("POST", "/v1/batch", []), 400,
         "Expected to decode Dictionary<String, Any> but found an array", False, None),
        ("a number for the client id", request("POST", "/v1/batch", {"client": 1, "workspace": "w1",
                                                                     "mutations": []}), 400,
         "at client: Expected to decode String but found number", False, None),
        ("no mutations field", request("POST", "/v1/batch", {"client": "c", "workspace": "w1"}), 400,
         'missing field "mutations"', False, None),
        ("a mutation without its title", request("POST", "/v1/batch", batch("alice-laptop", [
            {"id": 4, "page": "home", "time": "1:0", "type": "set_title"}])), 400,
         'at mutations[0]: missing field "title"', False, None),
        ("an unknown mutation type", request("POST", "/v1/batch", batch("alice-laptop", [
            mutation(4, "home", "dance")])), 400, 'at mutations[0].type: unknown mutation type "dance"', False,
         None),
        ("a time that is not MILLIS:COUNTER", request("POST", "/v1/batch", batch("alice-laptop", [
            mutation(4, "home", time_="yesterday")])), 400,
         'at mutations[0].time: invalid HLC timestamp "yesterday"', False, None),
        ("a time whose counter is over 32 bits", request("POST", "/v1/batch", batch("alice-laptop", [
            mutation(4, "home", time_="1:4294967296")])), 400, 'invalid HLC timestamp "1:4294967296"', False,
         None),
        ("a negative mutation id", request("POST", "/v1/batch", batch("alice-laptop", [mutation(-1, "home")])),
         400, "a number does not fit its field (negative, fractional or too large)", False, None),
        ("a fractional mutation id", request("POST", "/v1/batch", batch("alice-laptop", [mutation(4.5, "home")])),
         400, "a number does not fit its field (negative, fractional or too large)", False, None),
        # Ids.
        ("a client id of 65 characters", request("POST", "/v1/batch", batch("c" * 65, [])), 400,
         'at client: invalid id "' + "c" * 65 + '": ids are 1 to 64', False, None),
        ("a client id with a space", request("POST", "/v1/batch", batch("alice laptop", [])), 400,
         'at client: invalid id "alice laptop"', False, None),
        ("an empty workspace id", request("POST", "/v1/batch", batch("alice-laptop", [], "")), 400,
         'at workspace: invalid id ""', False, None),
        ("a page id with a slash", request("POST", "/v1/batch", batch("alice-laptop", [mutation(4, "a/b")])),
         400, 'at mutations[0].page: invalid id "a/b"', False, None),
        ("a page id with a NUL", request("POST", "/v1/batch", batch("alice-laptop", [mutation(4, "a\u0000b")])),
         400, "at mutations[0].page: invalid id", False, None),
        ("a page path with a space", request("GET", "/v1/pages/bad%20id"), 400, '"bad%20id" is not a page id',
         False, None),
        ("a page path of 65 characters", request("GET", "/v1/pages/" + "p" * 65), 400, "is not a page id", False,
         None),
        ("a catch-up key that is not an id", request("POST", "/v1/catchup", {"pages": {"bad id": 1}}), 400,
         "at pages.bad id: Could not convert key to type EntityID", False, None),
        ("a fetch whose pages are a list", request("POST", "/v1/fetch", {"pages": ["home"]}), 400,
         "at pages: Expected to decode Dictionary", False, None),
        ("a catch-up epoch that is a number", request("POST", "/v1/catchup", {"epoch": 5, "pages": {}}), 400,
         "at epoch: Expected to decode String", False, None),
        # Batches.
        ("non-consecutive ids", request("POST", "/v1/batch", batch("alice-laptop", [
            mutation(4, "home"), mutation(6, "home")])), 400,
         "mutation ids in a batch must be consecutive and ascending", False, None),
        ("descending ids", request("POST", "/v1/batch", batch("alice-laptop", [
            mutation(4, "home"), mutation(3, "home")])), 400, "must be consecutive and ascending", False, None),
        # Regression: 2**64-1 + 1 overflowed in MutationBatch.hasConsecutiveIDs and killed the broker.
        ("the largest id followed by another", request("POST", "/v1/batch", batch("alice-laptop", [
            mutation(BIG, "home"), mutation(1, "home")])), 400, "must be consecutive and ascending", False, None),
        ("more mutations than [limits] batch_mutations", request("POST", "/v1/batch", batch("alice-laptop", [
            mutation(4 + i, "home") for i in range(BATCH_MUTATIONS + 1)])), 413,
         f"a batch may carry at most {BATCH_MUTATIONS} mutations", False, None),
        ("a gap after the client's last id", request("POST", "/v1/batch", batch("alice-laptop", [
            mutation(9, "home")])), 409, "mutation ids must continue from 4; the batch starts at 9", False, None),
        ("the largest id as a client's first", request("POST", "/v1/batch", batch("alice-phone", [
            mutation(BIG, "home")])), 409, f"must continue from 1; the batch starts at {BIG}", False, None),
        ("another client re-using the laptop's ids 2-3 (ids are per client)",
         request("POST", "/v1/batch", batch("alice-tablet", laptop[1:])), 409,
         "mutation ids must continue from 1; the batch starts at 2", False, None),
        # Regression: JSONDecoder trapped (SIGILL) on an integer written with a long fraction and an exponent
        # (its Decimal fallback), and one batch, catch-up or fetch stopped the broker. The strict readers refuse it.
        ("a mutation id JSONDecoder trapped on", request("POST", "/v1/batch", (
            b'{"client":"alice-laptop","workspace":"w1","mutations":[{"id":9007199254740993' + b"9" * 300
            + b'e-300,"page":"home","time":"1700000000000:0","type":"set_title","title":"t"}]}')), 400,
         "at mutations[0].id: an integer written with a fraction or an exponent must be exactly a whole number",
         False, None),
        ("a catch-up time JSONDecoder trapped on", request("POST", "/v1/catchup", (
            b'{"pages":{"home":9007199254740993' + b"9" * 300 + b'e-300}}')), 400,
         "at pages.home: an integer written with a fraction or an exponent", False, None),
        ("a fetch limit JSONDecoder trapped on", request("POST", "/v1/fetch", (
            b'{"pages":{},"limit":9007199254740993' + b"9" * 300 + b'e-300}')), 400,
         "at limit: an integer written with a fraction or an exponent", False, None),
        # Regression: id 0 was acknowledged as a duplicate (and a daemon drops duplicates from its queue).
        ("mutation id 0", request("POST", "/v1/batch", batch("alice-laptop", [mutation(0, "home")])), 200,
         '"reason":{"code":3,"name":"invalid_value"},"status":"rejected"', False, None),
        # Workspaces and users.
        ("a batch for another user's workspace", request("POST", "/v1/batch", batch("alice-laptop", [
            mutation(4, "home")], "w2")), 403, "workspace w2 is not one this token may write", False, None),
        ("a batch for a workspace nobody has", request("POST", "/v1/batch", batch("alice-laptop", [], "w9")),
         403, "workspace w9 is not one this token may write", False, None),
        ("carol replaying alice's batch with alice's client id",
         request("POST", "/v1/batch", batch("alice-laptop", laptop, "w2"), token=CAROL), 403,
         "this client id belongs to another user", False, None),
        ("carol continuing alice's client id",
         request("POST", "/v1/batch", batch("alice-laptop", [mutation(4, "carols")], "w2"), token=CAROL), 403,
         "this client id belongs to another user", False, None),
        ("another workspace's page", request("GET", "/v1/pages/carols"), 404, "no page carols", False, None),
        ("an edit of another workspace's page is rejected as unknown",
         request("POST", "/v1/batch", batch("alice-laptop", [mutation(4, "carols")])), 200,
         '"reason":{"code":1,"name":"unknown_page"}', True, None),
        # Query parameters.
        ("limit=0", request("GET", "/v1/sync?limit=0"), 400,
         "mutationsSince, page, offset and limit must be numbers (limit 1 to 1000)", False, None),
        ("a negative mutationsSince", request("GET", "/v1/sync?mutationsSince=-1"), 400,
         "mutationsSince, page, offset and limit must be numbers", False, None),
        ("a negative offset", request("GET", "/v1/sync?offset=-1"), 400,
         "mutationsSince, page, offset and limit must be numbers", False, None),
        ("lastMutationAt that is not a number", request("POST", "/v1/sync?lastMutationAt=abc",
                                                         batch("alice-laptop", [])), 400,
         "lastMutationAt must be a sequence number", False, None),
        # Regression: numbers past Int64.max were bound with Int64(...) and trapped.
        ("lastMutationAt=2**64-1", request("POST", f"/v1/sync?lastMutationAt={BIG}", batch("alice-laptop", [])),
         200, '"lastMutationId":4', False, None),
        ("a fetch from time 2**64-1", request("POST", "/v1/fetch", {"pages": {"home": BIG}}), 200,
         '"id":"home"', False, None),
        ("a catch-up from time 2**64-1", request("POST", "/v1/catchup", {"pages": {"home": BIG}}), 200,
         '"changed":{}', False, None),
        # Regression: the broker's clock merged a time of 2**64-1:2**32-1 and overflowed (after the commit, so
        # every re-send crashed it again). Now such a time is refused (further ahead than clock_ahead_seconds), and
        # stays refused when re-sent.
        ("the largest HLC time", request("POST", "/v1/batch", batch("alice-laptop", [
            mutation(5, "home", time_=f"{BIG}:4294967295", title="far future")])), 200,
         '"reason":{"code":10,"name":"clock_ahead"}', True, None),
        ("the largest HLC time again (a re-send)", request("POST", "/v1/batch", batch("alice-laptop", [
            mutation(5, "home", time_=f"{BIG}:4294967295", title="far future")])), 200,
         '"reason":{"code":10,"name":"clock_ahead"}', False, None),
        # Regression: a page had no size bound (2,000 blocks of 65 KB made a 130 MB page, and eight downloads of
        # it took the broker to 2 GB). Each block fits the body and text limits; the page does not.
        ("a block of 30,000 bytes in a page within [limits] page_bytes", request("POST", "/v1/batch", batch(
            "alice-laptop", [mutation(6, "home", "add_block", block="big1", blockType="text", text=noise(30000, 1),
                                      after=None, attributes={})])), 200,
         '"mutationId":6,"page":"home","status":"applied"', True, None),
        ("a second one, past [limits] page_bytes", request("POST", "/v1/batch", batch(
            "alice-laptop", [mutation(7, "home", "add_block", block="big2", blockType="text", text=noise(30000, 2),
                                      after="big1", attributes={})])), 200,
         f'over [limits] page_bytes ({PAGE_BYTES} bytes)","mutationId":7,"page":"home",'
         '"reason":{"code":4,"name":"too_large"},"status":"rejected"', True, None),
        ("the page past [limits] page_bytes stays whole and readable", request("GET", "/v1/pages/home"), 200,
         '"id":"big1"', False, None),
    ]
    before = broker_fingerprint(broker)
    for what, data, status, fragment, writes, header in rows:
        check_answer(what, exchange(address, data), status, fragment, header)
        before = check_broker_intact(broker, before, writes)
    pipelined_past_the_deadline(address)
    before = check_broker_intact(broker, before)
    return len(rows) + 1


def pipelined_past_the_deadline(address):
    """Regression (issue 16): pipelined requests, each complete well within [limits] request_seconds, that keep the
    connection reading for longer than it in all, got a 408 at request_seconds after the first began."""
    rounds = 6
    with socket.create_connection(address, timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /heal")
        for round_ in range(rounds):
            time.sleep(REQUEST_SECONDS * 0.4)
            last = round_ == rounds - 1
            s.sendall(b"thz HTTP/1.1\r\nHost: x\r\n" + (b"Connection: close\r\n\r\n" if last else b"\r\nGET /heal"))
        received = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            received += chunk
    # Answers follow each other without a line break: a status line may follow a body on its line.
    statuses = [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", received)]
    check(statuses == [200] * (rounds + 1),
          f"{rounds + 1} pipelined requests over {rounds * 0.4 * REQUEST_SECONDS:.1f} s, each within "
          f"[limits] request_seconds ({REQUEST_SECONDS} s): every one 200", [200] * (rounds + 1), statuses)


# ---------------------------------------------------------------------------------------------------------------
# The device stream.

def table_broker_stream(s):
    """The broker's WebSocket /v1/stream: refused upgrades, protocol violations, bad messages."""
    broker = s.broker_with_limits()
    port = broker.port
    address = ("127.0.0.1", port)
    check_answer("setup: carol creates her page in w2",
                 exchange(address, request("POST", "/v1/batch", {"client": "carol-laptop", "workspace": "w2", "mutations": [
                     {"id": 1, "page": "carols", "time": "1:0", "type": "create_page", "parent": None,
                      "title": "C"}]}, token=CAROL)), 200, '"applied"')

    # Upgrades refused: (what, Stream arguments, status, message fragment, header or None).
    upgrades = [
        ("an upgrade without a token", {"token": None}, 401, "a bearer token is required",
         ("WWW-Authenticate", 'Bearer realm="pagesync"')),
        ("an upgrade with a wrong token", {"token": "wrong-token-wrong-token"}, 401, "the token is not valid",
         None),
        ("an upgrade with a wrong access_token", {"token": None, "query": "?access_token=nope"}, 401,
         "the token is not valid", None),
        ("WebSocket version 12", {"version": "12"}, 426, "unsupported WebSocket version 12; this server speaks 13",
         ("Sec-WebSocket-Version", "13")),
    ]
    # Frames on an open stream: (what, bytes, expected). Expected: ("error", code, fragment): an error message
    # and the stream stays (a subscribe still works after it); ("close", code, fragment): the broker closes;
    # ("subscribed", fields): the answer to a subscribe.
    subscribe = text({"op": "subscribe", "pages": ["home"]})
    frames = [
        ("a binary frame", ws_frame(2, b'{"op":"subscribe","pages":[]}'), ("error", 4400, "frames are JSON text")),
        ("a text frame that is not JSON", text(b"{not json"), ("error", 4400, "invalid message: ")),
        ("a JSON number", text(b"42"), ("error", 4400, "invalid message: Expected to decode Dictionary")),
        ("a message without op", text({"pages": []}), ("error", 4400, 'invalid message: missing field "op"')),
        ("an unknown op", text({"op": "dance"}),
         ("error", 4400, 'unknown op "dance": expected subscribe or unsubscribe')),
        ("subscribe with pages as a string", text({"op": "subscribe", "pages": "home"}),
         ("error", 4400, "invalid message: at pages: Expected to decode Array")),
        ("unsubscribe with numbers", text({"op": "unsubscribe", "pages": [1, 2]}),
         ("error", 4400, "invalid message: at pages[0]: Expected to decode String")),
        ("subscribe with bad ids", text({"op": "subscribe", "pages": ["ok", "bad id", "x" * 65, "", "a/b"]}),
         ("subscribed", {"added": 1, "denied": ["bad id", "x" * 65, "", "a/b"]})),
        ("subscribe to another workspace's page", text({"op": "subscribe", "pages": ["carols", "mine"]}),
         ("subscribed", {"added": 1, "denied": ["carols"]})),
        ("an unmasked frame", ws_frame(1, b'{"op":"subscribe","pages":[]}', mask=False),
         ("close", 1002, "unmasked frame from a client")),
        ("a frame over [limits] frame_bytes", text(b"a" * (FRAME_BYTES + 1)),
         ("close", 1009, f"frame payload of {FRAME_BYTES + 1} bytes exceeds the limit of {FRAME_BYTES}")),
        ("a message over the limit in fragments",
         ws_frame(1, b"[" * 3000, fin=False) + ws_frame(0, b"[" * 3000),
         ("close", 1009, f"exceeds the limit of {FRAME_BYTES}")),
        ("a text frame that is not UTF-8", text(b'{"op":"\xff"}'), ("close", 1007, "text message is not valid UTF-8")),
        ("UTF-8 broken across fragments", ws_frame(1, b'{"op":"\xe2\x82', fin=False) + ws_frame(0, b'x"}'),
         ("close", 1007, "not valid UTF-8")),
        ("a reserved opcode", ws_frame(3), ("close", 1002, "reserved opcode 3")),
        ("a fragmented ping", ws_frame(9, fin=False), ("close", 1002, "fragmented control frame")),
        ("a ping over 125 bytes", ws_frame(9, b"p" * 126), ("close", 1002, "")),
        ("a continuation with nothing to continue", ws_frame(0, b"abc"),
         ("close", 1002, "continuation frame without a message to continue")),
        ("RSV1 without an extension", ws_frame(1, b"{}", rsv=0x40),
         ("close", 1002, "reserved bits set but no extension was negotiated")),
        ("a close whose reason is not UTF-8", ws_frame(8, struct.pack(">H", 1000) + b"\xff"),
         ("close", 1007, "close reason is not valid UTF-8")),
        ("a close with code 1005", ws_frame(8, struct.pack(">H", 1005)),
         ("close", 1002, "close code 1005 may not be sent")),
        # Regression (issue 16): a half-sent frame was held forever.
        ("a frame left unfinished past [limits] frame_seconds", ws_frame(1, b'{"op":"subscribe","pages":[]}')[:12],
         ("close", 1008, "frame not completed within [limits] frame_seconds")),
        ("a fragmented message left unfinished past [limits] frame_seconds",
         ws_frame(1, b'{"op":', fin=False) + ws_frame(9),
         ("close", 1008, "frame not completed within [limits] frame_seconds")),
    ]
    before = broker_fingerprint(broker)
    for what, arguments, status, fragment, header in upgrades:
        stream = Stream(port, **arguments)
        check_answer(what, (stream.status, stream.headers, stream.buffer), status, fragment, header)
        stream.close()
        before = check_broker_intact(broker, before)
    for what, data, expected in frames:
        stream = Stream(port)
        check(stream.status == 101, f"{what}: the upgrade is accepted", 101, stream.status)
        stream.send(data)
        found = stream.receive()
        if expected[0] == "error":
            _, code, fragment = expected
            good = (found[0] == "text" and found[1].get("op") == "error" and found[1].get("code") == code
                    and fragment in found[1].get("message", ""))
            check(good, f"{what}: error {code} {fragment!r}", expected, found)
            stream.send(subscribe)
            after = stream.receive()
            check(after[0] == "text" and after[1].get("op") == "subscribed", "   the stream stays open",
                  "subscribed", after)
        elif expected[0] == "subscribed":
            fields = expected[1]
            good = found[0] == "text" and found[1].get("op") == "subscribed" and all(
                found[1].get(k) == v for k, v in fields.items())
            check(good, f"{what}: subscribed {fields}", fields, found)
        else:
            _, code, fragment = expected
            good = found[0] == "close" and found[1] == code and fragment in found[2]
            check(good, f"{what}: closed {code} {fragment!r}", expected, found)
        stream.close()
        before = check_broker_intact(broker, before)
    flood_that_never_reads(port)
    before = check_broker_intact(broker, before)
    return len(upgrades) + len(frames) + 1


def flood_that_never_reads(port):
    """Regression (issue 16): every frame of a stream is answered (here empty binary frames, each with a 4400
    error), and the broker read and answered whatever was queued: 30 MB from a client that never reads grew it by
    ~330 MB. Now it stops reading the stream once [limits] queued_bytes_per_connection wait, so the client's
    sending stalls; and the connection goes when the client does."""
    stream = Stream(port)
    check(stream.status == 101, "flood: the upgrade is accepted", 101, stream.status)
    stream.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    frame = ws_frame(2)
    flood = frame * ((32 << 20) // len(frame))
    stream.sock.settimeout(3)
    sent = 0
    try:
        while sent < len(flood):
            sent += stream.sock.send(flood[sent:sent + (1 << 20)])
    except socket.timeout:
        pass
    check(sent < len(flood) // 2,
          f"32 MB of empty binary frames, never reading: the broker stops reading after "
          f"[limits] queued_bytes_per_connection of answers (sent {sent >> 20} MB)", "< 16 MB", sent)
    stream.close()


# ---------------------------------------------------------------------------------------------------------------
# The daemon's local API.

def daemon_fingerprint(device):
    return (device.rows("SELECT id, type, page_id, status FROM mutation_queue ORDER BY id"),
            device.rows("SELECT key, value FROM sync_meta WHERE key = 'next_mutation_id'"),
            device.rows("SELECT origin_page_id, impacted_page_id, type FROM offline_action ORDER BY 1, 2, 3"))


def check_daemon_intact(device, before, writes=False):
    check(device.process.poll() is None, "   pagesyncd is running")
    run = device.run("status")
    check(run.returncode == 0 and json.loads(run.stdout)["clientId"], "   pagesync status answers", 0,
          (run.returncode, run.stderr))
    found = integrity(device.store)
    check(found == ["ok"], "   the store passes PRAGMA integrity_check", ["ok"], found)
    after = daemon_fingerprint(device)
    if not writes:
        check(after == before, "   nothing was queued or changed", before, after)
    return after


def table_local_api(s):
    """pagesyncd's local API on its Unix socket, connected and with the broker down."""
    broker = s.broker_with_limits()
    device = s.device("A", broker.url)
    sock = device.socket
    # A page the daemon has (made here) and one only the broker has (made by another client).
    device.cli("create", "page", "--id", "home", "--title", "Home")
    device.cli("block", "add", "home", "--id", "b1", "--text", "one")
    device.cli("offline", "add", "home")  # kept here: a create of its id is refused locally (409)
    check_answer("setup: a page made by another client",
                 exchange(("127.0.0.1", broker.port), request("POST", "/v1/batch", {
                     "client": "elsewhere", "workspace": "w1", "mutations": [
                         {"id": 1, "page": "remote", "time": "1:0", "type": "create_page", "parent": None,
                          "title": "R"},
                         {"id": 2, "page": "remotedb", "time": "1:1", "type": "create_database", "parent": None,
                          "title": "DB"}]})), 200, '"applied"')
    device.sync()
    long_id = "x" * 300
    # Rows: (what, request bytes, status, message fragment, writes, header or None).
    connected = [
        ("a request line that is not HTTP", b"GARBAGE\r\n\r\n", 400, "invalid HTTP method", False, None),
        ("a body over 8 MiB", request("POST", "/v1/pages", token=None, headers=["Content-Length: 9000000"]), 413,
         "Content-Length 9000000 exceeds the 8388608-byte body limit", False, None),
        ("an unknown path", request("GET", "/v1/nope", token=None), 404, "no route for /v1/nope", False, None),
        ("an empty page id", request("GET", "/v1/pages/", token=None), 404, "no route for /v1/pages/", False,
         None),
        ("a path under a page that does not exist", request("GET", "/v1/pages/home/x/y", token=None), 404,
         "no such path: /v1/pages/home/x/y", False, None),
        ("DELETE /v1/status", request("DELETE", "/v1/status", token=None), 405,
         "DELETE is not allowed on /v1/status", False, None),
        ("GET of a page's blocks", request("GET", "/v1/pages/home/blocks", token=None), 405,
         "GET is not allowed here", False, ("Allow", "POST")),
        ("POST of a page", request("POST", "/v1/pages/home", {}, token=None), 405, "POST is not allowed here",
         False, ("Allow", "GET, PATCH, DELETE")),
        ("a body that is not JSON", request("POST", "/v1/pages", b"{", token=None), 400, "invalid JSON body",
         False, None),
        ("a body that is not UTF-8", request("POST", "/v1/pages", b'{"kind":"page","id":"\xff"}', token=None),
         400, "invalid JSON body: it is not valid UTF-8", False, None),
        ("a JSON array", request("POST", "/v1/pages", [], token=None), 400,
         "Expected to decode Dictionary<String, Any> but found an array", False, None),
        ("a create without an id", request("POST", "/v1/pages", {"kind": "page"}, token=None), 400,
         'missing field "id"', False, None),
        ("an unknown kind", request("POST", "/v1/pages", {"kind": "blob", "id": "x"}, token=None), 400,
         'unknown kind "blob": page, database or row', False, None),
        ("an id with a space", request("POST", "/v1/pages", {"kind": "page", "id": "a b"}, token=None), 400,
         'invalid id "a b": ids are 1 to 64', False, None),
        ("an id of 300 characters (named, not echoed whole)",
         request("POST", "/v1/pages", {"kind": "page", "id": long_id}, token=None), 400,
         'invalid id "' + "x" * 80 + '…": ids are 1 to 64', False, None),
        ("a bad parent id", request("POST", "/v1/pages", {"kind": "page", "id": "p1", "parent": "a/b"},
                                    token=None), 400, 'invalid parent "a/b"', False, None),
        ("a row without its database", request("POST", "/v1/pages", {"kind": "row", "id": "r1"}, token=None),
         400, 'a row needs "database"', False, None),
        ("a create of an id taken here", request("POST", "/v1/pages", {"kind": "page", "id": "home"},
                                                 token=None), 409, "page home already exists", False, None),
        ("a title over 1 KiB", request("POST", "/v1/pages", {"kind": "page", "id": "p2", "title": "t" * 2000},
                                       token=None), 400,
         "the edit breaks a rule: too_large (4): a title over 1 KiB", False, None),
        ("an edit with nothing to change", request("PATCH", "/v1/pages/home", {}, token=None), 400,
         'nothing to change: give "title" or "properties"', False, None),
        ("a title that is a number", request("PATCH", "/v1/pages/home", {"title": 5}, token=None), 400,
         "at title: Expected to decode String but found number", False, None),
        ("a property value that is an object",
         request("PATCH", "/v1/pages/home", {"properties": {"a": {"x": 1}}}, token=None), 400,
         "at properties.a: a property value is a string, a number, a boolean or a list of strings", False, None),
        ("an empty property name", request("PATCH", "/v1/pages/home", {"properties": {"": 1}}, token=None), 400,
         "the edit breaks a rule: invalid_value (3): an empty name", False, None),
        ("a bad page id in the path", request("PATCH", "/v1/pages/a%2Fb", {"title": "x"}, token=None), 400,
         'invalid id "a%2Fb"', False, None),
        ("a block of a bad type", request("POST", "/v1/pages/home/blocks", {"id": "b2", "text": "t",
                                                                            "type": "Bad"}, token=None), 400,
         "the edit breaks a rule: invalid_value (3)", False, None),
        ("a block without text", request("POST", "/v1/pages/home/blocks", {"id": "b2"}, token=None), 400,
         'missing field "text"', False, None),
        # Found by FuzzLocalAPI: this was a 500 "local store error".
        ("a block id taken here", request("POST", "/v1/pages/home/blocks", {"id": "b1", "text": "t"}, token=None),
         409, "block b1 already exists", False, None),
        ("a block with a bad after", request("POST", "/v1/pages/home/blocks", {"id": "b2", "text": "t",
                                                                               "after": "no such"}, token=None),
         400, 'invalid after "no such"', False, None),
        ("a block both after another and first",
         request("POST", "/v1/pages/home/blocks", {"id": "b2", "text": "t", "after": "b1", "first": True},
                 token=None), 400, 'give "after" or "first", not both', False, None),
        ("an edit of a block not stored here", request("PATCH", "/v1/blocks/nob", {"text": "x"}, token=None), 404,
         "block nob is not stored on this device", False, None),
        ("a block edit whose text is a list", request("PATCH", "/v1/blocks/b1", {"text": ["x"]}, token=None), 400,
         "at text: Expected to decode String", False, None),
        # `at + delete` overflowed and stopped the daemon (SIGILL).
        ("a splice whose end overflows",
         request("POST", "/v1/blocks/b1/splice", {"at": 1, "delete": 9223372036854775807}, token=None), 400,
         "range 1..<9223372036854775807 is outside the text (0...3)", False, None),
        ("a view filter without its value",
         request("PUT", "/v1/pages/home/view", {"filter": {"property": "a"}}, token=None), 400,
         'at filter: missing field "value"', False, None),
        ("untoggling a page not toggled", request("DELETE", "/v1/offline/remote", token=None), 404,
         "page remote is not toggled offline", False, None),
        ("unfavoriting a page not a favorite", request("DELETE", "/v1/favorites/home", token=None), 404,
         "page home is not a favorite", False, None),
        ("why of a bad id", request("GET", "/v1/why/bad%20id", token=None), 400, 'invalid id "bad%20id"', False,
         None),
        ("a page nobody has", request("GET", "/v1/pages/nowhere", token=None), 404, "page nowhere not found",
         False, None),
        ("toggling offline a page nobody has", request("PUT", "/v1/offline/nowhere", token=None), 404,
         "page nowhere not found", False, None),
        ("a favorite nobody has", request("PUT", "/v1/favorites/nowhere", token=None), 404,
         "page nowhere not found", False, None),
        ("a visit of a page nobody has", request("POST", "/v1/visits/nowhere", token=None), 404,
         "page nowhere not found", False, None),
    ]
    before = daemon_fingerprint(device)
    for what, data, status, fragment, writes, header in connected:
        check_answer(what, exchange(sock, data), status, fragment, header)
        before = check_daemon_intact(device, before, writes)

    broker.stop()
    device.wait_connected(False)
    offline = [
        ("an edit of a page not available offline",
         request("PATCH", "/v1/pages/remote", {"title": "x"}, token=None), 503,
         "page remote is not available offline and the broker is unreachable", False, None),
        ("a delete of a page not available offline", request("DELETE", "/v1/pages/remote", token=None), 503,
         "page remote is not available offline and the broker is unreachable", False, None),
        ("showing a page not available offline", request("GET", "/v1/pages/remote", token=None), 503,
         "page remote is not available offline and the broker is unreachable", False, None),
        ("a row of a database not available offline",
         request("POST", "/v1/pages", {"kind": "row", "id": "r1", "database": "remotedb"}, token=None), 503,
         "page remotedb is not available offline", False, None),
        ("a page under a parent not available offline",
         request("POST", "/v1/pages", {"kind": "page", "id": "child", "parent": "remote"}, token=None), 503,
         "page remote is not available offline", False, None),
        ("a block added to a page not available offline",
         request("POST", "/v1/pages/remote/blocks", {"id": "b9", "text": "t"}, token=None), 503,
         "page remote is not available offline", False, None),
        ("a sync without a broker", request("POST", "/v1/sync", token=None), 503, "the broker is unreachable",
         False, None),
        ("an edit of a page made here still works",
         request("PATCH", "/v1/pages/home", {"title": "offline edit"}, token=None), 200, '"mutationIds":[',
         True, None),
    ]
    for what, data, status, fragment, writes, header in offline:
        check_answer(what, exchange(sock, data), status, fragment, header)
        before = check_daemon_intact(device, before, writes)
    return len(connected) + len(offline)


# ---------------------------------------------------------------------------------------------------------------
# The command line.

def table_cli(s):
    """`pagesync` against a real daemon: usage errors, daemon errors, sockets that cannot be reached."""
    broker = s.broker_with_limits()
    device = s.device("A", broker.url)
    device.cli("create", "page", "--id", "home", "--title", "Home")
    device.cli("block", "add", "home", "--id", "b1", "--text", "one")
    device.cli("offline", "add", "home")
    not_a_socket = os.path.join(s.dir, "plain-file")
    with open(not_a_socket, "w") as plain:
        plain.write("not a socket")
    missing = os.path.join(s.dir, "missing.sock")
    # Rows: (what, arguments (the device's --socket and --json are added unless told), exit status, stderr
    # fragment, environment overrides or None). Usage errors (64) print swift-argument-parser's "Error: ...".
    rows = [
        # Regression: the words named no command, and the error called --json an unknown option.
        ("an unknown command", ["frobnicate"], 64, "Error: Unexpected argument 'frobnicate'", None),
        ("an unknown subcommand", ["offline", "toggle", "home"], 64,
         "Error: 2 unexpected arguments: 'toggle', 'home'", None),
        ("an unknown option", ["status", "--bogus"], 64, "Error: Unknown option '--bogus'", None),
        ("an extra argument", ["status", "extra"], 64, "Error: Unexpected argument 'extra'", None),
        ("--set without its value", ["edit", "home", "--title", "T", "--set"], 64,
         "Error: Missing value for '--set <name=value>'", None),
        ("--set without =", ["edit", "home", "--set", "Status"], 64, "expected NAME=VALUE", None),
        ("--set with an empty name", ["edit", "home", "--set", "=x"], 64, "the name is empty", None),
        ("--filter without =", ["view", "set", "home", "--filter", "Status"], 64, "expected NAME=VALUE", None),
        ("a missing --id", ["create", "page"], 64, "Error: Missing expected argument '--id <id>'", None),
        ("--id without its value", ["create", "page", "--title", "T", "--id"], 64,
         "Error: Missing value for '--id <id>'", None),
        ("an id with a space", ["create", "page", "--id", "a b"], 64, 'invalid id "a b"', None),
        ("an id of 65 characters", ["show", "x" * 65], 64, "ids are 1 to 64", None),
        ("a block type in capitals", ["block", "add", "home", "--id", "b1", "--text", "x", "--type", "Heading"],
         64, "a block type is 1 to 32 of a-z and _", None),
        ("an edit with nothing to change", ["edit", "home"], 64, "nothing to change", None),
        ("a property both set and unset", ["edit", "home", "--set", "A=1", "--unset", "A"], 64,
         'property "A" is both set and unset', None),
        ("a splice with nothing to do", ["block", "splice", "b1", "--at", "0"], 64,
         "give --delete, --insert or both", None),
        ("a mark of an unknown type", ["block", "mark", "b1", "--from", "0", "--to", "1", "--type", "blink"], 64,
         'unknown mark type "blink"', None),
        ("a mark whose range is empty", ["block", "mark", "b1", "--from", "2", "--to", "2", "--type", "bold"], 64,
         "--to must be greater than --from", None),
        # The daemon's refusals: exit 1 and its message with the status (64 for a 400: the values were wrong).
        ("a create of an id taken", ["create", "page", "--id", "home"], 1,
         "pagesync: page home already exists (HTTP 409)", None),
        ("removing a toggle that is not there", ["offline", "remove", "other"], 1,
         "pagesync: page other is not toggled offline (HTTP 404)", None),
        ("a title over 1 KiB", ["edit", "home", "--title", "t" * 2000], 64,
         "pagesync: the edit breaks a rule: too_large (4): a title over 1 KiB", None),
        ("a splice past the end of the text", ["block", "splice", "b1", "--at", "4", "--insert", "x"], 64,
         "pagesync: position 4 is outside the text (0...3) (HTTP 400)", None),
        ("a splice deleting past the end", ["block", "splice", "b1", "--at", "1", "--delete", "9"], 64,
         "pagesync: range 1..<10 is outside the text (0...3) (HTTP 400)", None),
        ("a mark past the end of the text", ["block", "mark", "b1", "--from", "1", "--to", "7", "--type", "bold"],
         64, "pagesync: range 1..<7 is outside the text (0...3) (HTTP 400)", None),
        ("a link without a URL", ["block", "mark", "b1", "--from", "0", "--to", "2", "--type", "link"], 64,
         "pagesync: invalid mark: link needs a value (HTTP 400)", None),
        ("a splice of a block not stored here", ["block", "splice", "nob", "--at", "0", "--insert", "x"], 1,
         "pagesync: block nob is not stored on this device (HTTP 404)", None),
        ("an edit of a block not stored here", ["block", "edit", "nob", "--text", "x"], 1,
         "pagesync: block nob is not stored on this device (HTTP 404)", None),
        # Sockets that cannot be reached.
        ("a socket that does not exist", ["status", "--socket", missing], 69,
         f"pagesync: cannot reach the daemon at {missing}: ", None),
        ("a socket path that is a plain file", ["status", "--socket", not_a_socket], 69,
         f"pagesync: cannot reach the daemon at {not_a_socket}: ", None),
        ("a socket path that is a directory", ["status", "--socket", s.dir], 69,
         f"pagesync: cannot reach the daemon at {s.dir}: ", None),
        ("PAGESYNC_SOCKET naming nothing", ["status"], 69, f"pagesync: cannot reach the daemon at {missing}: ",
         {"PAGESYNC_SOCKET": missing}),
    ]
    before = daemon_fingerprint(device)
    for what, arguments, status, fragment, environment in rows:
        argv = [e2e.CLI_PROGRAM, *arguments]
        if environment is None and "--socket" not in arguments:
            argv += ["--socket", device.socket, "--json"]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                             env={**os.environ, **(environment or {})}, cwd=s.dir)
        check(run.returncode == status and run.stdout == "" and fragment in run.stderr,
              f"{what}: exit {status}, {fragment!r}", (status, "", fragment),
              (run.returncode, run.stdout, run.stderr))
        before = check_daemon_intact(device, before)
    return len(rows)


# ---------------------------------------------------------------------------------------------------------------
# Configuration files.

def table_config(s):
    """`--check-config` of both programs on bad files: the first error names the file, the line and the key."""
    broker, daemon = e2e.BROKER_PROGRAM, e2e.DAEMON_PROGRAM
    token = '[[auth.tokens]]\ntoken = "0123456789abcdef"\nuser = "a"\nworkspaces = ["w"]\n'
    # Rows: (what, program, file text, stderr fragment after "FILE:"). Every row exits 64.
    rows = [
        ("broker: an unknown key", broker, '[store]\npath = "x"\ncolour = "blue"\n', "3: store.colour: unknown key"),
        ("broker: an unknown table", broker, "[logging]\nlevel = \"info\"\n", "1: logging: unknown key"),
        ("broker: a key outside its table", broker, 'listen = "127.0.0.1:1"\n', "1: listen: unknown key"),
        ("broker: a number for a string", broker, "[server]\nlisten = 7700\n", "2: server.listen: must be a string"),
        ("broker: a float for an integer", broker, "[limits]\nbody_bytes = 1.5\n",
         "2: limits.body_bytes: must be an integer"),
        ("broker: a string for an integer", broker, '[limits]\nconnections = "many"\n',
         "2: limits.connections: must be an integer"),
        ("broker: a value out of range", broker, "[limits]\nconnections = 0\n",
         "2: limits.connections: must be from 1 to 1000000 (got 0)"),
        ("broker: a ping interval of 0", broker, "[stream]\nping_interval = 0\n",
         "2: stream.ping_interval: must be from 1 to 3600 (got 0)"),
        ("broker: queued_bytes_per_connection under 64 KiB", broker, "[limits]\nqueued_bytes_per_connection = 1024\n",
         "2: limits.queued_bytes_per_connection: must be from 65536 to 1073741824 (got 1024)"),
        ("broker: a frame_seconds of 0", broker, "[limits]\nframe_seconds = 0\n",
         "2: limits.frame_seconds: must be from 1 to 3600 (got 0)"),
        ("broker: a port out of range", broker, '[server]\nlisten = "127.0.0.1:70000"\n',
         "2: server.listen: port must be a number from 0 to 65535"),
        ("broker: an empty unix socket path", broker, '[server]\nlisten = "unix:"\n',
         "2: server.listen: empty socket path"),
        ("broker: a table header left open", broker, '[server\nlisten = "x"\n',
         "1: Error while parsing table header"),
        ("broker: a key given twice", broker, '[server]\nlisten = "127.0.0.1:1"\nlisten = "127.0.0.1:2"\n',
         "3: Error while parsing key-value pair: cannot redefine existing string 'listen'"),
        ("broker: a key that is not UTF-8", broker, "\udcff = 1\n", "1: Error while parsing root table"),
        ("broker: the same token twice", broker, token + token.replace('"a"', '"b"'),
         "6: auth.tokens[1].token: is listed twice"),
        ("broker: a token under 16 characters", broker, '[[auth.tokens]]\ntoken = "short"\nuser = "a"\n',
         "2: auth.tokens[0].token: must be at least 16 characters"),
        ("broker: a token without its user", broker, '[[auth.tokens]]\ntoken = "0123456789abcdef"\n',
         "1: auth.tokens[0].user: is required"),
        ("broker: workspaces that are not a list", broker, token.replace('["w"]', '"w"'),
         "4: auth.tokens[0].workspaces: must be an array of strings"),
        ("broker: a workspace that is not an id", broker, token.replace('["w"]', '["bad id"]'),
         '4: auth.tokens[0].workspaces: "bad id" is not an id'),
        ("broker: tokens that are not a table array", broker, "[auth]\ntokens = 5\n",
         "2: auth.tokens: must be an array of tables ([[auth.tokens]])"),
        ("broker: a non-loopback listen without tokens", broker, '[server]\nlisten = "0.0.0.0:7700"\n',
         "2: server.listen: 0.0.0.0:7700 is not a loopback address: configure [[auth.tokens]] or [[auth.jwt]] to serve it"),
        ("broker: a JWT issuer allowing alg none", broker, '[[auth.jwt]]\nalgorithms = ["none"]\nsecret_file = "s"\n',
         '2: auth.jwt[0].algorithms: "none" is not one of HS256, RS256, ES256, EdDSA'),
        ("broker: a JWT issuer with two key sources", broker,
         '[[auth.jwt]]\nalgorithms = ["HS256"]\nsecret_file = "s"\njwks_file = "j"\n',
         "3: auth.jwt[0].secret_file: exactly one of secret_file, public_key, jwks_file is required"),
        ("broker: an IPv6 wildcard without tokens", broker, '[server]\nlisten = "[::]:7700"\n',
         "2: server.listen: [::]:7700 is not a loopback address"),
        ("daemon: an ftp broker URL", daemon, '[broker]\nurl = "ftp://b.example"\n',
         "2: broker.url: scheme ftp is not supported (use http, https, ws or wss)"),
        ("daemon: a CA file for a plain http broker", daemon, '[broker]\nurl = "http://b.example"\nca_file = "ca.pem"\n',
         "3: broker.ca_file: needs an https:// url"),
        ("daemon: a CA file that cannot be read", daemon,
         '[broker]\nurl = "https://b.example"\nca_file = "/nonexistent/ca.pem"\n',
         " broker.ca_file: cannot read the CA certificates /nonexistent/ca.pem: No such file or directory"),
        ("broker: a TLS certificate without its key", broker, '[server.tls]\ncert = "c.pem"\n',
         "1: server.tls.key: is needed with cert"),
        ("broker: a TLS certificate that cannot be read", broker,
         '[server.tls]\ncert = "/nonexistent/c.pem"\nkey = "/nonexistent/c.key"\n',
         " server.tls: cannot read the certificate chain /nonexistent/c.pem: No such file or directory"),
        ("daemon: a number for the token", daemon, "[broker]\ntoken = 5\n", "2: broker.token: must be a string"),
        ("daemon: a token with a space", daemon, '[broker]\ntoken = "a b"\n',
         "2: broker.token: must not contain spaces"),
        ("daemon: a workspace that is not an id", daemon, '[broker]\nworkspace = "not an id"\n',
         "2: broker.workspace: must be an id"),
        ("daemon: a socket mode that is a number", daemon, "[api]\nsocket_mode = 600\n",
         "2: api.socket_mode: must be a string"),
        ("daemon: a socket mode that is not octal", daemon, '[api]\nsocket_mode = "0999"\n',
         "2: api.socket_mode: must be an octal mode"),
        ("daemon: push_batch 0", daemon, "[sync]\npush_batch = 0\n",
         "2: sync.push_batch: must be from 1 to 1000000 (got 0)"),
        ("daemon: a cap below the base", daemon, "[sync]\nbackoff_base_ms = 500\nbackoff_cap_ms = 100\n",
         "3: sync.backoff_cap_ms: must not be below backoff_base_ms"),
        ("daemon: an integer over 64 bits", daemon, "[sync]\nrequest_timeout = 99999999999999999999\n",
         "2: Error while parsing decimal integer"),
        ("daemon: an unknown key", daemon, "[sync]\npoll = true\n", "2: sync.poll: unknown key"),
        ("daemon: a top-level key", daemon, "x = 1\n", "1: x: unknown key"),
        ("daemon: a table header left open", daemon, "[broker\n", "1: Error while parsing table header"),
        ("daemon: a key given twice", daemon, '[broker]\nurl = "http://a"\nurl = "http://b"\n',
         "3: Error while parsing key-value pair: cannot redefine existing string 'url'"),
    ]
    for index, (what, program, content, fragment) in enumerate(rows):
        path = os.path.join(s.dir, f"bad-{index}.toml")
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as config:
            config.write(content)
        run = subprocess.run([program, "--config", path, "--check-config"], capture_output=True, text=True,
                             errors="replace", timeout=30)
        expected = f"Error: {path}:{fragment}"
        check(run.returncode == 64 and expected in run.stderr, f"{what}: exit 64, {fragment!r}",
              (64, expected), (run.returncode, run.stderr))
    # Not only --check-config: a bad file stops either program before it serves anything.
    start_rows = [
        ("the broker will not start on a non-loopback listen without tokens", broker,
         '[server]\nlisten = "0.0.0.0:0"\n', "2: server.listen: 0.0.0.0:0 is not a loopback address"),
        ("pagesyncd will not start with an ftp URL", daemon,
         f'[broker]\nurl = "ftp://b.example"\n[api]\nsocket = "{s.dir}/never.sock"\n',
         "2: broker.url: scheme ftp is not supported"),
    ]
    for what, program, content, fragment in start_rows:
        path = os.path.join(s.dir, "start.toml")
        with open(path, "w") as config:
            config.write(content)
        run = subprocess.run([program, "--config", path], capture_output=True, text=True, timeout=30, cwd=s.dir)
        expected = f"Error: {path}:{fragment}"
        check(run.returncode == 64 and expected in run.stderr and not os.path.exists(f"{s.dir}/never.sock"),
              f"{what}: exit 64, {fragment!r}", (64, expected), (run.returncode, run.stderr))
    other = [
        ("a missing file", [broker, "--config", "/nonexistent/b.toml", "--check-config"], 64,
         "Error: /nonexistent/b.toml: cannot read the file: No such file or directory"),
        ("an unknown option", [daemon, "--bogus"], 64, "Error: Unknown option '--bogus'"),
        ("--config without its value", [daemon, "--config"], 64, "Error: Missing value for '--config <config>'"),
    ]
    for what, argv, status, fragment in other:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        check(run.returncode == status and fragment in run.stderr, f"{what}: exit {status}, {fragment!r}",
              (status, fragment), (run.returncode, run.stderr))
    return len(rows) + len(start_rows) + len(other)


# ---------------------------------------------------------------------------------------------------------------

class Scenario(e2e.Scenario):
    def broker_with_limits(self):
        broker = Broker(self)
        broker.start()
        return broker


TABLES = {
    "broker_http": table_broker_http,
    "broker_stream": table_broker_stream,
    "local_api": table_local_api,
    "cli": table_cli,
    "config": table_config,
}


def main():
    if len(sys.argv) != 3 or (sys.argv[2] != "all" and sys.argv[2] not in TABLES):
        print(f"usage: bad_inputs.py BIN_DIR {{all|{'|'.join(TABLES)}}}", file=sys.stderr)
        sys.exit(64)
    for program in (e2e.BROKER_PROGRAM, e2e.DAEMON_PROGRAM, e2e.CLI_PROGRAM):
        if not os.access(program, os.X_OK):
            print(f"FAIL {program} is not an executable: build first", flush=True)
            sys.exit(1)
    names = list(TABLES) if sys.argv[2] == "all" else [sys.argv[2]]
    failed = []
    for name in names:
        print(f"=== {name}: {TABLES[name].__doc__.splitlines()[0]}", flush=True)
        started = time.monotonic()
        count = 0
        try:
            with Scenario(name) as scenario:
                count = TABLES[name](scenario)
        except Exception:
            failed.append(name)
        print(f"=== {name}: {'FAILED' if name in failed else f'{count} rows passed'} in "
              f"{time.monotonic() - started:.1f} s", flush=True)
    if failed:
        print(f"FAILED: {', '.join(failed)}", flush=True)
        sys.exit(1)
    print("ALL OK", flush=True)


if __name__ == "__main__":
    main()
