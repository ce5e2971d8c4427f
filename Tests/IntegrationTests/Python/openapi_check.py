"""Checks docs/openapi.yaml against a running pagesync broker, both ways.

Usage: openapi_check.py BASE_URL ALICE_TOKEN BOB_TOKEN BATCH_MUTATIONS

ALICE_TOKEN may write workspace w1, BOB_TOKEN workspace w2; BATCH_MUTATIONS is the broker's [limits]
batch_mutations (small, so that a batch over it is cheap). The store must be new.

1. The document is valid OpenAPI 3.1 (openapi_spec_validator), and every example in it matches its schema.
2. A scenario calls every operation and provokes every status it documents that a client can provoke; each answer's
   status must be documented for that operation (or, for a request no operation takes, in x-unrouted-responses;
   for any request, in x-any-request-responses), its documented headers present and matching, and its JSON body
   valid against the documented schema (JSON Schema 2020-12, $refs resolved in the document with `referencing`,
   which comes with jsonschema). Request bodies and parameters the scenario means as valid must match the
   request's schemas, and those meant as malformed must not. WebSocket frames are checked against the stream
   schemas.
3. Conversely, every operation was called, and every status it documents was seen or is one no client can
   provoke (UNPROVOKABLE).

Prints one "OK ..." line per check and "ALL OK" at the end; on the first mismatch prints "FAIL ..." and exits 1.
"""
import asyncio
import http.client
import json
import re
import sys
import urllib.parse
from pathlib import Path

import jsonschema
import websockets
import yaml
from openapi_spec_validator import validate as validate_openapi
from referencing import Registry
from referencing.jsonschema import DRAFT202012

BASE, ALICE, BOB, BATCH_LIMIT = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
HOST, PORT = urllib.parse.urlsplit(BASE).hostname, urllib.parse.urlsplit(BASE).port
SPEC_PATH = Path(__file__).resolve().parents[3] / "docs" / "openapi.yaml"
DOC_URI = "urn:pagesync:openapi"
METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
# Statuses a client cannot make the broker answer here: a failing store, the shutdown window, and the connection
# limit and the read timeout (thousands of sockets, or minutes of waiting).
UNPROVOKABLE = {"500", "503", "408"}

seen = {}  # (method, path template) -> statuses seen; (None, None) for requests no operation takes


def fail(message):
    print("FAIL " + message, flush=True)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)
    print("OK " + message, flush=True)


# MARK: The document


def escape(segment):
    return segment.replace("~", "~0").replace("/", "~1")


def lookup(pointer):
    node = DOC
    for part in pointer.lstrip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def follow(pointer):
    """The object at `pointer` and its own pointer, after following an OpenAPI $ref (responses, parameters)."""
    node = lookup(pointer)
    while isinstance(node, dict) and "$ref" in node:
        pointer = node["$ref"][1:]
        node = lookup(pointer)
    return node, pointer


def validator(pointer):
    return jsonschema.Draft202012Validator({"$ref": DOC_URI + "#" + pointer}, registry=REGISTRY)


def errors(pointer, instance):
    return sorted(validator(pointer).iter_errors(instance), key=lambda e: list(e.absolute_path))


def conforms(pointer, instance, what):
    found = errors(pointer, instance)
    if found:
        worst = jsonschema.exceptions.best_match(found)
        fail(f"{what} does not match {pointer}: {worst.message} at {list(worst.absolute_path)}\n"
             f"  {json.dumps(instance)[:600]}")


def lint(node, path="", in_example=False):
    """YAML pitfalls openapi_spec_validator lets through: a plain scalar with ", " or ": " inside a flow mapping
    silently becomes extra keys with null values."""
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str):
                fail(f"the document has a non-string key {key!r} at {path}")
            if key == "description" and not isinstance(value, str):
                fail(f"description at {path} is not a string")
            if value is None and not in_example:
                fail(f"the document has a null at {path}/{key}: a YAML scalar split by ', ' or ': '?")
            lint(value, f"{path}/{escape(key)}", in_example or key in ("example", "examples", "default", "const"))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            lint(value, f"{path}/{index}", in_example)


def check_examples():
    """Every example in the document matches the schema it illustrates."""
    count = 0
    for template, item in DOC["paths"].items():
        for method in METHODS:
            if method not in item:
                continue
            base = f"/paths/{escape(template)}/{method}"
            operation = item[method]
            for index, _ in enumerate(operation.get("parameters", [])):
                parameter, pointer = follow(f"{base}/parameters/{index}")
                if "example" in parameter:
                    conforms(pointer + "/schema", parameter["example"], f"the example of parameter {parameter['name']}")
                    count += 1
            places = [f"{base}/requestBody"] + [f"{base}/responses/{escape(s)}" for s in operation["responses"]]
            for place in places:
                if place.endswith("requestBody") and "requestBody" not in operation:
                    continue
                holder, pointer = follow(place)
                for media, content in holder.get("content", {}).items():
                    schema = f"{pointer}/content/{escape(media)}/schema"
                    if "example" in content:
                        conforms(schema, content["example"], f"the example at {pointer}")
                        count += 1
                    for name, example in content.get("examples", {}).items():
                        conforms(schema, example["value"], f"example {name} at {pointer}")
                        count += 1
    for extension in ("x-unrouted-responses", "x-any-request-responses"):
        for status in DOC[extension]["responses"]:
            holder, pointer = follow(f"/{extension}/responses/{status}")
            for media, content in holder.get("content", {}).items():
                conforms(f"{pointer}/content/{escape(media)}/schema", content["example"], f"the example at {pointer}")
                count += 1
    for name, schema in DOC["components"]["schemas"].items():
        for example in schema.get("examples", []):
            conforms(f"/components/schemas/{name}", example, f"an example of {name}")
            count += 1
        if "example" in schema:
            conforms(f"/components/schemas/{name}", schema["example"], f"the example of {name}")
            count += 1
    return count


DOC = yaml.safe_load(SPEC_PATH.read_text())
REGISTRY = Registry().with_resource(DOC_URI, DRAFT202012.create_resource(DOC))
TEMPLATES = [(template, re.compile("^" + re.sub(r"\\\{([^/]+?)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"))
             for template in DOC["paths"]]


# MARK: HTTP


class Answer:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body
        self.json = None


def exchange(method, target, body=None, token=ALICE, headers=None, content_length=None):
    """One request on a connection of its own; `body` is JSON (a str is sent as is). `content_length` claims a
    length without sending the body."""
    connection = http.client.HTTPConnection(HOST, PORT, timeout=20)
    data = None if body is None else (body if isinstance(body, str) else json.dumps(body)).encode()
    connection.putrequest(method, target, skip_accept_encoding=True)
    all_headers = {"Content-Type": "application/json"} if data is not None else {}
    if token:
        all_headers["Authorization"] = "Bearer " + token
    all_headers.update(headers or {})
    if content_length is not None:
        all_headers["Content-Length"] = str(content_length)
    elif data is not None or method in ("POST", "PUT", "PATCH"):
        all_headers["Content-Length"] = str(len(data or b""))
    for name, value in all_headers.items():
        connection.putheader(name, value)
    connection.endheaders()
    if data is not None and content_length is None:
        connection.send(data)
    response = connection.getresponse()
    answer = Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    connection.close()
    return answer


def operation_for(method, path):
    """The path template `path` matches, the operation for `method` there (or None), and the path parameters."""
    for template, pattern in TEMPLATES:
        if match := pattern.match(path):
            parameters = {name: urllib.parse.unquote(value) for name, value in match.groupdict().items()}
            return template, DOC["paths"][template].get(method.lower()), parameters
    return None, None, {}


def request_conforms(operation_pointer, operation, target, path_parameters, headers, body):
    """Errors of the request against the operation's parameters and body schema (empty: it conforms)."""
    problems = []
    sent = {
        "query": dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(target).query, keep_blank_values=True)),
        "header": {name.lower(): value for name, value in headers.items()},
        "path": path_parameters,
    }
    for index, _ in enumerate(operation.get("parameters", [])):
        parameter, pointer = follow(f"{operation_pointer}/parameters/{index}")
        name = parameter["name"].lower() if parameter["in"] == "header" else parameter["name"]
        values = sent[parameter["in"]]
        if name not in values:
            if parameter.get("required"):
                problems.append(f"{parameter['in']} parameter {parameter['name']} is missing")
            continue
        text = values[name]
        kind = lookup(pointer + "/schema").get("type")
        value = int(text) if kind == "integer" and re.fullmatch(r"-?[0-9]+", text) else text
        value = {"true": True, "false": False}.get(text, text) if kind == "boolean" else value
        problems += [e.message for e in errors(pointer + "/schema", value)]
    if "requestBody" in operation:
        holder, pointer = follow(operation_pointer + "/requestBody")
        try:
            instance = json.loads(body) if isinstance(body, str) else body
        except ValueError:
            return problems + ["the body is not JSON"]
        problems += [e.message for e in errors(f"{pointer}/content/application~1json/schema", instance)]
    return problems


def step(what, method, target, expect, body=None, request="valid", **options):
    """Sends a request, checks that the answer has status `expect` and conforms to the document; returns the
    parsed JSON body. `request`: "valid" (the request must conform to the document), "invalid" (it must not: the
    schemas are as strict as the broker), or None (not checked: e.g. a body over the size limit)."""
    answer = exchange(method, target, body, **options)
    path = urllib.parse.urlsplit(target).path
    template, operation, path_parameters = operation_for(method, path)
    key = (method.lower(), template) if operation else (None, None)
    if operation and request:
        problems = request_conforms(
            f"/paths/{escape(template)}/{method.lower()}", operation, target, path_parameters,
            options.get("headers", {}), body)
        if request == "valid" and problems:
            fail(f"{what}: the request does not conform to the document: {problems}")
        if request == "invalid" and not problems:
            fail(f"{what}: the request conforms to the document, yet the broker is expected to refuse it")
    if answer.status != expect:
        fail(f"{what}: {method} {target} answered {answer.status}, expected {expect}: {answer.body[:300]!r}")
    answer.json = conforming(what, method, target, key, answer)
    check(True, f"{method} {target[:70]} {answer.status}: {what}")
    return answer.json


def conforming(what, method, target, key, answer):
    """Checks `answer` against the response the document gives for its status; returns the JSON body."""
    status = str(answer.status)
    if key[0]:
        pointer = f"/paths/{escape(key[1])}/{key[0]}/responses"
    else:
        pointer = "/x-unrouted-responses/responses"
    if status in lookup(pointer):
        response, pointer = follow(f"{pointer}/{status}")
    elif status in DOC["x-any-request-responses"]["responses"]:
        response, pointer = follow(f"/x-any-request-responses/responses/{status}")
    else:
        where = f"{key[0].upper()} {key[1]}" if key[0] else "a request no operation takes"
        fail(f"{what}: status {status} is not documented for {where}")
    seen.setdefault(key, set()).add(status)
    for name, header in response.get("headers", {}).items():
        value = answer.headers.get(name.lower())
        if value is None:
            if header.get("required"):
                fail(f"{what}: the {status} answer lacks the documented header {name}")
            continue
        conforms(f"{pointer}/headers/{escape(name)}/schema", value, f"{what}: header {name}")
    if "content" not in response:
        return None
    media = answer.headers.get("content-type", "").split(";")[0]
    if media not in response["content"]:
        fail(f"{what}: Content-Type {answer.headers.get('content-type')} is not documented for {status}")
    if media in ("text/plain", "text/html"):
        conforms(f"{pointer}/content/{escape(media)}/schema", answer.body.decode(), f"{what}: the {status} body")
        return None
    try:
        body = json.loads(answer.body)
    except ValueError:
        fail(f"{what}: the {status} body is not JSON: {answer.body[:200]!r}")
    conforms(f"{pointer}/content/application~1json/schema", body, f"{what}: the {status} body")
    if answer.status >= 400 and body["error"] != answer.status:
        fail(f"{what}: the error body says {body['error']}, the status is {answer.status}")
    return body


# MARK: The scenario


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

    def batch(self, mutations):
        return {"client": self.client, "workspace": self.workspace, "mutations": mutations}

    def refused(self, batch):
        """The broker applied none of `batch`: its ids are free again."""
        self.next = batch["mutations"][0]["id"]


def http_scenario():
    # Health, the HTTP layer, routing.
    health = step("health needs no token", "GET", "/healthz", 200, token=None)
    epoch = health["epoch"]
    step("a header section over 32 KiB", "GET", "/healthz", 431, token=None, headers={"X-Big": "a" * 33_000})
    step("an unknown path", "GET", "/v1/nope", 404)
    step("metrics need no token", "GET", "/metrics", 200, token=None)
    step("the status page needs no token", "GET", "/status", 200, token=None)
    for template, item in DOC["paths"].items():
        listed = {m.upper() for m in METHODS if m in item}
        other = next(m for m in ["DELETE", "PUT", "PATCH"] if m not in listed)
        path = re.sub(r"\{[^/]+\}", "home", template)
        answer = exchange(other, path)
        conforming(f"{other} {path}", other, path, (None, None), answer)
        allowed = {m.strip() for m in answer.headers.get("allow", "").split(",")}
        check(answer.status == 405 and listed <= allowed and allowed - listed <= {"HEAD"},
              f"{other} {path} {answer.status}: 405 allows what the document lists ({answer.headers.get('allow')})")

    # Batches.
    laptop = Client("laptop")
    empty = {"client": "c0", "workspace": "w1", "mutations": []}
    step("no token", "POST", "/v1/batch", 401, empty, token=None)
    step("a malformed Authorization header", "POST", "/v1/batch", 401, empty, token=None,
         headers={"Authorization": "Basic YWxpY2U6eA=="})
    step("an unknown token", "POST", "/v1/batch", 401, empty, token="wrong-token-wrong-token")
    step("a body that is not JSON", "POST", "/v1/batch", 400, "not json", request="invalid")
    step("a malformed id", "POST", "/v1/batch", 400, laptop.batch([{"id": 1, "page": "a b", "time": "1:0",
                                                                     "type": "set_title", "title": "x"}]),
         request="invalid")
    step("an unknown mutation type", "POST", "/v1/batch", 400,
         laptop.batch([{"id": 1, "page": "home", "time": "1:0", "type": "rename"}]), request="invalid")
    step("another user's workspace", "POST", "/v1/batch", 403, {**empty, "workspace": "w2"})
    setup = laptop.batch([
        laptop.mutation("home", "create_page", parent=None, title="Home"),
        laptop.mutation("tasks", "create_database", parent="home", title="Tasks"),
        laptop.mutation("r1", "create_row", database="tasks", title="One", properties={"Due": 2, "Tags": ["a"]}),
        laptop.mutation("r2", "create_row", database="tasks", title="Two", properties={"Due": 1, "Done": True}),
        laptop.mutation("home", "add_block", block="b1", blockType="text", text="hi", after=None,
                        attributes={"colour": "red"}),
    ])
    applied = step("a batch of creates", "POST", "/v1/batch", 200, setup)
    check([r["status"] for r in applied["results"]] == ["applied"] * 5, "every create is applied")
    mixed = laptop.batch([
        laptop.mutation("home", "add_block", block="b2", after="b1"),
        laptop.mutation("home", "set_property", name="Status", value="Draft"),
        laptop.mutation("tasks", "set_view", filter=None, sort={"property": "Due", "descending": False}),
        laptop.mutation("nowhere", "set_title", title="x"),
        laptop.mutation("home", "edit_block", block="b1", text="hello"),
    ])
    answer = step("a batch with a rejection", "POST", "/v1/batch", 200, mixed)
    check(answer["results"][3]["reason"] == {"code": 1, "name": "unknown_page"}, "a rejection names its reason")
    again = step("a re-sent batch", "POST", "/v1/batch", 200, mixed)
    check([r["status"] for r in again["results"]] == ["duplicate"] * 3 + ["rejected", "duplicate"]
          and again["results"][3]["reason"] == {"code": 1, "name": "unknown_page"} and "sequence" not in again,
          "a re-sent batch is acknowledged as duplicates, its rejection rejected again, without a sequence")
    gap = laptop.batch([laptop.mutation("home", "set_title", title="x")])
    gap["mutations"][0]["id"] += 3
    step("a gap in mutation ids", "POST", "/v1/batch", 409, gap)
    laptop.next -= 1
    skipping = laptop.batch([laptop.mutation("home", "set_title", title="x"), laptop.mutation("home", "set_title", title="y")])
    skipping["mutations"][1]["id"] += 1
    step("non-consecutive mutation ids", "POST", "/v1/batch", 400, skipping)
    laptop.refused(skipping)
    step("a client id of another user", "POST", "/v1/batch", 403, Client("laptop", "w2", BOB).batch(
        [{"id": 1, "page": "bob-home", "time": "1:0", "type": "create_page", "title": "Bob"}]), token=BOB)
    big = laptop.batch([laptop.mutation("home", "set_title", title=f"t{i}") for i in range(BATCH_LIMIT + 1)])
    step("more mutations than [limits] batch_mutations", "POST", "/v1/batch", 413, big)
    laptop.refused(big)
    step("a body over [limits] body_bytes", "POST", "/v1/batch", 413, "", content_length=1 << 31, request=None)

    # Pages.
    home = step("a page", "GET", "/v1/pages/home", 200)
    check(home["databases"] == ["tasks"] and "parent" not in home and [b["id"] for b in home["blocks"]] == ["b1", "b2"],
          "a top-level page lists its inline database and its blocks in order")
    tasks = step("a database", "GET", "/v1/pages/tasks", 200)
    check(tasks["rows"] == ["r2", "r1"] and tasks["view"] == {"sort": {"property": "Due", "descending": False}},
          "a database has its view and its rows in view order")
    step("an unknown page", "GET", "/v1/pages/nope", 404)
    step("another workspace's page", "GET", "/v1/pages/home", 404, token=BOB)
    step("a malformed page id", "GET", "/v1/pages/bad!id", 400, request="invalid")
    step("no token", "GET", "/v1/pages/home", 401, token=None)

    # Catch-up.
    sequence = step("health after writes", "GET", "/healthz", 200, token=None)["sequence"]
    body = step("catch-up", "POST", "/v1/catchup", 200,
                {"epoch": epoch, "pages": {"home": 0, "tasks": sequence, "nope": 0}})
    check(body["changed"] == {"home": sequence} and body["gone"] == ["nope"] and not body["epochChanged"],
          "catch-up names changed and gone pages")
    body = step("catch-up from another epoch", "POST", "/v1/catchup", 200,
                {"epoch": "0" * 32, "pages": {"home": sequence}})
    check(body["epochChanged"] and "home" in body["changed"], "another epoch: everything is changed")
    step("catch-up with a malformed body", "POST", "/v1/catchup", 400, {"pages": ["home"]}, request="invalid")
    step("catch-up without a token", "POST", "/v1/catchup", 401, {"pages": {}}, token=None)
    step("catch-up over [limits] body_bytes", "POST", "/v1/catchup", 413, "", content_length=1 << 31, request=None)

    # Fetch: whole pages, pagination, then deltas.
    held = {"home": 0, "tasks": 0, "r1": 0, "zz": 0}
    first = step("fetch, first page", "POST", "/v1/fetch", 200, {"epoch": None, "pages": held, "limit": 2})
    check([d["id"] for d in first["deltas"]] == ["home", "r1"] and first["nextCursor"] == "r1",
          "fetch answers in page-id order and names the next cursor")
    rest = step("fetch, next page", "POST", "/v1/fetch", 200, {"pages": held, "limit": 2, "cursor": "r1"})
    check([d["id"] for d in rest["deltas"]] == ["tasks"] and rest["gone"] == ["zz"] and "nextCursor" not in rest,
          "the last page of a fetch has no cursor")
    since = sequence
    changes = laptop.batch([
        laptop.mutation("home", "set_title", title="Home 2"),
        laptop.mutation("home", "set_property", name="Status", value=None),
        laptop.mutation("home", "delete_block", block="b2"),
        laptop.mutation("home", "move_block", block="b1", after=None),
        laptop.mutation("tasks", "set_view", filter={"property": "Due", "value": 2}, sort=None),
    ])
    edited = step("a batch of edits", "POST", "/v1/batch", 200, changes)
    check({r["status"] for r in edited["results"]} == {"applied"}, "every edit is applied")
    deltas = step("fetch deltas", "POST", "/v1/fetch", 200, {"epoch": epoch, "pages": {"home": since, "tasks": since}})
    home_delta, tasks_delta = deltas["deltas"]
    check(not home_delta["full"] and home_delta["properties"] == {"Status": None}
          and {b["id"]: b["deleted"] for b in home_delta["blocks"]} == {"b1": False, "b2": True},
          "a delta carries removed properties as null and deleted blocks")
    check("databases" not in home_delta["page"],
          "a delta header leaves out inline databases that did not change (not [])")
    check(tasks_delta["page"]["rows"] == ["r1"]
          and tasks_delta["page"]["view"] == {"filter": {"property": "Due", "value": 2}},
          "a database's delta header carries its new view and rows")
    step("fetch with a malformed body", "POST", "/v1/fetch", 400, {"pages": {"home": "x"}}, request="invalid")
    step("fetch without a token", "POST", "/v1/fetch", 401, {"pages": {}}, token=None)
    step("fetch over [limits] body_bytes", "POST", "/v1/fetch", 413, "", content_length=1 << 31, request=None)

    # The seed guide's API.
    pull = step("pull", "GET", "/v1/sync?mutationsSince=0&page=0&limit=2", 200)
    check(len(pull["changes"]) == 2 and pull["hasMore"] and pull["nextOffset"] == 2,
          "pull is paginated, and says where the next answer starts")
    by_offset = step("pull from nextOffset", "GET", "/v1/sync?mutationsSince=0&offset=2&limit=2", 200)
    pull = step("pull, next page", "GET", f"/v1/sync?mutationsSince=0&page=1&limit=2", 200)
    check(by_offset["changes"] == pull["changes"], "offset 2 is page 1 of 2")
    latest = pull["latest"]
    step("pull metadata", "GET", f"/v1/sync?mutationsSince={latest}&metadataOnly=true", 200)
    step("pull with limit 0", "GET", "/v1/sync?limit=0", 400, request="invalid")
    step("pull with a word for a number", "GET", "/v1/sync?mutationsSince=yesterday", 400, request="invalid")
    step("pull without a token", "GET", "/v1/sync", 401, token=None)
    push = laptop.batch([laptop.mutation("notes", "create_page", title="Notes")])
    step("push after pulling", "POST", f"/v1/sync?lastMutationAt={latest}", 200, push)
    stale = laptop.batch([laptop.mutation("notes", "set_title", title="x")])
    step("push without pulling first", "POST", f"/v1/sync?lastMutationAt={latest}", 409, stale)
    laptop.refused(stale)
    latest += 1
    step("push without lastMutationAt", "POST", "/v1/sync", 400, push, request="invalid")
    step("push to another workspace", "POST", f"/v1/sync?lastMutationAt={latest}", 403, {**push, "workspace": "w2"})
    step("push without a token", "POST", f"/v1/sync?lastMutationAt={latest}", 401, push, token=None)
    big = laptop.batch([laptop.mutation("notes", "set_title", title=f"t{i}") for i in range(BATCH_LIMIT + 1)])
    step("push with too many mutations", "POST", f"/v1/sync?lastMutationAt={latest}", 413, big)
    laptop.refused(big)
    return laptop


UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


def frame(ws_text, schema):
    message = json.loads(ws_text)
    conforms(f"/components/schemas/{schema}", message, f"a {schema} frame")
    return message


async def send(ws, message):
    conforms("/components/schemas/StreamClientMessage", message, "a frame the device sends")
    await ws.send(json.dumps(message))


async def stream_scenario(laptop):
    step("an upgrade without a token", "GET", "/v1/stream", 401, token=None,
         headers={**UPGRADE, "Sec-WebSocket-Version": "13"})
    step("WebSocket version 8", "GET", "/v1/stream", 426, headers={**UPGRADE, "Sec-WebSocket-Version": "8"},
         request="invalid")
    step("a GET that is not an upgrade", "GET", "/v1/stream", 426, request="invalid")
    step("an upgrade without a key", "GET", "/v1/stream", 400,
         headers={"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13"}, request="invalid")
    ws_url = BASE.replace("http://", "ws://") + "/v1/stream"
    async with websockets.connect(ws_url, additional_headers={"Authorization": "Bearer " + ALICE},
                                  proxy=None, compression=None) as ws:
        upgrade = Answer(ws.response.status_code, {k.lower(): v for k, v in ws.response.headers.raw_items()}, b"")
        conforming("the stream upgrade", "GET", "/v1/stream", ("get", "/v1/stream"), upgrade)
        check(upgrade.status == 101, "GET /v1/stream 101: the device stream opens with a bearer token")
        await send(ws, {"op": "subscribe", "pages": ["home", "tasks", "bad id!"]})
        answer = frame(await ws.recv(), "StreamServerMessage")
        check(answer == {"op": "subscribed", "added": 2, "total": 2, "denied": ["bad id!"]}, "subscribed")
        body = step("a batch a subscriber hears", "POST", "/v1/batch", 200,
                    laptop.batch([laptop.mutation("home", "set_title", title="Home 3")]))
        answer = frame(await asyncio.wait_for(ws.recv(), 10), "StreamServerMessage")
        check(answer == {"op": "changed", "pages": {"home": body["sequence"]}}, "changed")
        await send(ws, {"op": "unsubscribe", "pages": ["tasks"]})
        answer = frame(await ws.recv(), "StreamServerMessage")
        check(answer == {"op": "unsubscribed", "removed": 1, "total": 1}, "unsubscribed")
        await ws.send('{"op": "publish"}')
        answer = frame(await ws.recv(), "StreamServerMessage")
        check(answer["op"] == "error" and answer["code"] == 4400, "an unknown op is an error frame")
    async with websockets.connect(ws_url + "?access_token=" + BOB, proxy=None, compression=None) as ws:
        check(ws.response.status_code == 101, "GET /v1/stream 101: the token may come as access_token")
        seen[("get", "/v1/stream")].add("101")


def coverage():
    for template, item in DOC["paths"].items():
        for method in METHODS:
            if method not in item:
                continue
            statuses = seen.get((method, template))
            if not statuses:
                fail(f"{method.upper()} {template} was never called")
            missing = set(item[method]["responses"]) - statuses - UNPROVOKABLE
            if missing:
                fail(f"{method.upper()} {template}: documented {sorted(missing)} never seen")
            check(True, f"{method.upper()} {template}: saw {sorted(statuses)}")
    other = set(DOC["x-unrouted-responses"]["responses"]) | set(DOC["x-any-request-responses"]["responses"])
    missing = other - set().union(*seen.values()) - UNPROVOKABLE
    if missing:
        fail(f"statuses for any request {sorted(missing)} never seen")
    check(True, "every status documented for requests no operation takes, or for any request, was seen")


def main():
    try:
        validate_openapi(DOC)
    except Exception as error:  # the validator's exceptions have no common public base
        fail(f"{SPEC_PATH} is not valid OpenAPI 3.1: {error}")
    check(DOC["openapi"].startswith("3.1"), f"{SPEC_PATH.name} is valid OpenAPI {DOC['openapi']}")
    lint(DOC)
    check(True, "no YAML scalar split into stray keys")
    count = check_examples()
    check(count > 20, f"the document's {count} examples match their schemas")
    laptop = http_scenario()
    asyncio.run(stream_scenario(laptop))
    coverage()
    print("ALL OK", flush=True)


main()
