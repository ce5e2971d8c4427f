"""What the broker test scripts share: checks that print "OK ..." or "FAIL ..." (and exit 1), a JSON call, and
the pixels of a screenshot."""
import json
import struct
import sys
import zlib
import urllib.error
import urllib.request


def fail(message):
    print("FAIL " + message, flush=True)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)
    print("OK " + message, flush=True)


def json_caller(base, default_token):
    """call(method, path, body=None, token=default_token) -> (status, decoded JSON body) against `base`."""

    def call(method, path, body=None, token=default_token):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(base + path, data=data, method=method)
        if token:
            request.add_header("Authorization", "Bearer " + token)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    return call


def metric_reader(base):
    """metric(name) -> the broker's counter or gauge `pagesync_broker_NAME` of GET /metrics at `base` (0 if absent)."""

    def metric(name):
        with urllib.request.urlopen(base + "/metrics", timeout=20) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("pagesync_broker_" + name + " "):
                    return float(line.split()[1])
        return 0.0

    return metric


def png_pixels(path):
    """(width, height, rows of RGB bytes) of a PNG, its chunks' CRCs checked (8-bit RGB or RGBA)."""
    data = open(path, "rb").read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "the screenshot is a PNG")
    position, header, compressed = 8, None, b""
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        if zlib.crc32(kind + body) != crc:
            fail(f"PNG chunk {kind} has a bad CRC")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed += body
        position += 12 + length
    width, height, depth, colour = header[:4]
    check(depth == 8 and colour in (2, 6), f"8-bit RGB or RGBA (depth {depth}, colour type {colour})")
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(compressed)
    stride = width * channels
    check(len(raw) == height * (stride + 1), "the image data has every row")
    rows, previous = [], bytes(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]
        if kind == 0 or (kind == 2 and not any(line)):
            row = line if kind == 0 else previous
        elif kind == 2:
            row = bytes((a + b) & 255 for a, b in zip(line, previous))
        else:
            row = bytearray(line)
            for i in range(stride):
                left = row[i - channels] if i >= channels else 0
                up, corner = previous[i], previous[i - channels] if i >= channels else 0
                if kind == 1:
                    predicted = left
                elif kind == 3:
                    predicted = (left + up) // 2
                else:
                    estimate = left + up - corner
                    pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
                    predicted = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                row[i] = (row[i] + predicted) & 255
            row = bytes(row)
        rows.append(row[::1] if channels == 3 else bytes(b for i, b in enumerate(row) if i % 4 != 3))
        previous = row
    return width, height, rows
