"""What the broker test scripts share: checks that print "OK ..." or "FAIL ..." (and exit 1), and a JSON call."""
import json
import sys
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
