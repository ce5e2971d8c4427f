#!/usr/bin/env python3
"""An HTTP server from Python's standard library, for interop tests of our HTTP client.

Listens on 127.0.0.1, port 0, and prints "PORT <n>" as its first line. Runs until killed (or, with
--exit-on-stdin-eof, until its stdin closes).

  GET  /hello    keep-alive, Content-Length body
  HEAD /hello    the same head, no body
  POST /echo     echoes the Content-Length body
  GET  /chunked  a Transfer-Encoding: chunked body, written by hand
  GET  /eof      an HTTP/1.0 response with no Content-Length: the body ends when the server closes

Every response carries X-Peer-Port, the client's port as the server saw it, so the test can tell whether
requests shared one connection.
"""

import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HELLO = b"hello from python"


def pattern(count):
    """Bytes that are not periodic in small strides, so a lost or repeated piece shows."""
    return bytes((i * 7 + (i >> 8) * 13) & 0xFF for i in range(count))


def exit_when_stdin_closes():
    """With --exit-on-stdin-eof: exit once stdin reaches EOF. The test holds the other end of a pipe, so a
    test that dies or times out without killing us (its watchdog closes the pipe) leaves no server behind."""
    if "--exit-on-stdin-eof" not in sys.argv[1:]:
        return

    def watch():
        sys.stdin.buffer.read()
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def start(self, status=200, version=None):
        if version:
            # BaseHTTPRequestHandler writes the status line with the instance's protocol_version.
            self.protocol_version = version
        self.send_response(status)
        self.send_header("X-Peer-Port", str(self.client_address[1]))

    def do_GET(self):
        if self.path == "/hello":
            self.start()
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(HELLO)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(HELLO)
        elif self.path == "/chunked":
            self.start()
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b"one,", b"two,", pattern(70000), b",three"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/eof":
            # The way BaseHTTPRequestHandler answers by default: HTTP/1.0, no length, close to end the body.
            self.start(version="HTTP/1.0")
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            self.wfile.write(pattern(200000))
            self.close_connection = True
        else:
            self.start(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    do_HEAD = do_GET

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        self.start()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    exit_when_stdin_closes()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("PORT %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
