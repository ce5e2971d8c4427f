"""U+0000 (NUL) in text, against real brokers on both stores (issue #19): SQLite keeps NUL, PostgreSQL's `text`
refuses it, so the broker rejects it up front on both alike (docs/protocol.md, "Rejection reasons": `invalid_value`
with a message naming NUL), and pagesyncd refuses such an edit on its local API with a 400.

Usage: nul_text.py BIN_DIR

For each store (a SQLite file; a PostgreSQL the script starts, as the fault suite does): one broker; a batch sent
with curl holding a NUL (escaped `\\u0000`, the only way JSON carries one) in a create's title, a property value,
a list item, a block's text and an attribute, then a clean edit: each NUL mutation is answered `rejected`, code 3,
`invalid_value`, with the message; the clean one is applied; the same batch sent again gets the same rejections
(the others `duplicate`);
/healthz stays 200 and the store holds no NUL. Then a device on that broker: `POST /v1/pages` with a NUL in the
title is 400 naming NUL, and nothing is queued. Prints "OK ..." per check and "ALL OK" at the end.
"""
import json
import os
import subprocess
import sys

import daemon_e2e as e2e

TOKEN = e2e.USERS["alice"][0]
MESSAGE = "holds U+0000 (NUL)"


def curl(*args):
    run = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", *args], capture_output=True, text=True, timeout=30)
    if run.returncode != 0:
        raise e2e.CheckFailed(f"curl {' '.join(args)} exited {run.returncode}: {run.stderr}")
    body, _, status = run.stdout.rpartition("\n")
    return int(status), body


def post_batch(broker, body):
    return curl("-X", "POST", "-H", f"Authorization: Bearer {TOKEN}", "-H", "Content-Type: application/json",
                "--data-binary", body, broker.url + "/v1/batch")


def check_store(scenario, store_name, pg):
    broker = scenario.broker(store=pg, name=f"broker-{store_name}")
    t = "1732244000123"
    # Written by hand: each NUL is the escape \u0000 in the JSON text (a raw 0x00 byte is not JSON).
    body = ('{"client": "nul-client", "workspace": "w1", "mutations": ['
            f'{{"id": 1, "page": "p", "time": "{t}:0", "type": "create_page", "title": "P"}},'
            f'{{"id": 2, "page": "q", "time": "{t}:1", "type": "create_page", "title": "a\\u0000b"}},'
            f'{{"id": 3, "page": "p", "time": "{t}:2", "type": "set_property", "name": "S", "value": "x\\u0000"}},'
            f'{{"id": 4, "page": "p", "time": "{t}:3", "type": "set_property", "name": "L", "value": ["ok", "\\u0000"]}},'
            f'{{"id": 5, "page": "p", "time": "{t}:4", "type": "add_block", "block": "b1", "text": "\\u0000"}},'
            f'{{"id": 6, "page": "p", "time": "{t}:5", "type": "add_block", "block": "b2", "text": "t", '
            '"attributes": {"k": "v\\u0000"}},'
            f'{{"id": 7, "page": "p", "time": "{t}:6", "type": "set_title", "title": "clean"}}'
            ']}')
    for attempt, done in (("sent", "applied"), ("sent again", "duplicate")):
        expected = [(done, None)] + [("rejected", 3)] * 5 + [(done, None)]
        status, answer = post_batch(broker, body)
        e2e.check_equal(status, 200, f"{store_name}: the batch {attempt} is answered 200 (not a 500 from the store)")
        results = json.loads(answer)["results"]
        found = [(r["status"], r.get("reason", {}).get("code")) for r in results]
        e2e.check_equal(found, expected, f"{store_name}: batch {attempt}: each NUL mutation rejected invalid_value "
                        f"(3), the others {done}")
        messages = [r.get("message", "") for r in results if r["status"] == "rejected"]
        e2e.check(all(MESSAGE in m for m in messages) and all(r["reason"]["name"] == "invalid_value"
                                                               for r in results if r["status"] == "rejected"),
                  f"{store_name}: batch {attempt}: every rejection names NUL", MESSAGE, messages)
    status, _ = curl(broker.url + "/healthz")
    e2e.check_equal(status, 200, f"{store_name}: /healthz is 200")
    title = broker.rows("SELECT title FROM page WHERE id = 'p'")
    e2e.check_equal(title, [{"title": "clean"}], f"{store_name}: the clean edit is stored")
    stray = broker.rows("SELECT id FROM page WHERE id = 'q'") + broker.rows("SELECT id FROM block")
    e2e.check_equal(stray, [], f"{store_name}: no page or block with a NUL was stored")

    device = scenario.device(f"d-{store_name}", broker.url)
    run = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "--unix-socket", device.socket, "-X", "POST",
                          "-H", "Content-Type: application/json", "--data-binary",
                          '{"kind": "page", "id": "n1", "title": "a\\u0000b"}', "http://localhost/v1/pages"],
                         capture_output=True, text=True, timeout=30)
    body, _, code = run.stdout.rpartition("\n")
    e2e.check_equal(int(code), 400, f"{store_name}: pagesyncd answers 400 to a page titled with a NUL")
    e2e.check("U+0000 (NUL)" in body, f"{store_name}: its message names NUL", "U+0000 (NUL)", body)
    e2e.check_equal(device.queue(), [], f"{store_name}: nothing was queued")


def main():
    bin_dir = os.path.abspath(sys.argv[1])
    e2e.BROKER_PROGRAM = os.path.join(bin_dir, "pagesync-broker")
    e2e.DAEMON_PROGRAM = os.path.join(bin_dir, "pagesyncd")
    e2e.CLI_PROGRAM = os.path.join(bin_dir, "pagesync")
    failed = []
    for store_name in ("sqlite", "postgres"):  # both, even when the first fails: they must behave alike
        try:
            with e2e.Scenario(f"nul-{store_name}") as scenario:
                pg = scenario.postgres() if store_name == "postgres" else None
                check_store(scenario, store_name, pg)
        except e2e.CheckFailed as error:
            failed.append(f"{store_name}: {str(error).splitlines()[0]}")
    if failed:
        raise e2e.CheckFailed("; ".join(failed))
    print("ALL OK", flush=True)


if __name__ == "__main__":
    try:
        main()
    except e2e.CheckFailed as error:
        print(f"FAILED: {error}", flush=True)
        sys.exit(1)
