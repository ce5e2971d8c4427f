"""Two pagesync brokers on one PostgreSQL store, written to at once (issue #19, item 2).

Usage: broker_pair.py BASE_URL_1 BASE_URL_2 ALICE_TOKEN BOB_TOKEN
Devices of two users (workspaces w1 and w2) send batches to the same pages through both brokers at once, and one
device sends the same batch through both (a failover re-send). Checks: both brokers share the store's epoch; every
batch is answered 200; each page's times, as answered, are distinct, and the time both brokers then serve is the
greatest of them (a later commit never carries a smaller time); the re-sent batch is applied once.
Prints one "OK ..." line per check and "ALL OK" at the end; on the first mismatch "FAIL ..." and exit 1.
"""
import sys
import threading

from checks import check, json_caller

BASE1, BASE2, ALICE, BOB = sys.argv[1:5]
ROUNDS = 30


def mutation(number, page, kind, millis, counter, **fields):
    return dict({"id": number, "page": page, "time": f"{millis}:{counter}", "type": kind}, **fields)


def main():
    brokers = [json_caller(BASE1, ALICE), json_caller(BASE2, ALICE)]
    as_bob = [json_caller(BASE1, BOB), json_caller(BASE2, BOB)]
    epochs = [call("GET", "/healthz")[1]["epoch"] for call in brokers]
    check(epochs[0] == epochs[1], f"both brokers serve the store's one epoch ({epochs})")

    pages = {"w1": ["h0", "h1", "h2"], "w2": ["k0", "k1", "k2"]}
    for workspace, call in [("w1", brokers[0]), ("w2", as_bob[1])]:
        ids = pages[workspace]
        status, body = call("POST", "/v1/batch", {"client": "setup-" + workspace, "workspace": workspace, "mutations": [
            mutation(n + 1, page, "create_page", 1000, 0, title=page) for n, page in enumerate(ids)]})
        check(status == 200, f"{workspace}'s pages are created ({status} {body})")

    answered = {page: [] for ids in pages.values() for page in ids}
    failures = []
    lock = threading.Lock()

    def writer(name, call, workspace, counter):
        for round in range(ROUNDS):
            ids = pages[workspace]
            touched = [ids[(round + counter) % 3], ids[(round + counter + 1) % 3]]
            batch = {"client": name, "workspace": workspace, "mutations": [
                mutation(2 * round + n + 1, page, "set_title", 2000 + round, counter, title=f"{name} {round}")
                for n, page in enumerate(touched)]}
            status, body = call("POST", "/v1/batch", batch)
            with lock:
                if status != 200 or any(r["status"] != "applied" for r in body["results"]):
                    failures.append((name, round, status, body))
                else:
                    for page, time in body["pages"].items():
                        answered[page].append(time)

    resent = []

    def roamer(call):
        batch = {"client": "roamer", "workspace": "w1", "mutations": [
            mutation(1, "h0", "set_title", 1500, 9, title="once")]}
        status, body = call("POST", "/v1/batch", batch)
        with lock:
            resent.append((status, body))

    threads = [
        threading.Thread(target=writer, args=("a1", brokers[0], "w1", 0)),
        threading.Thread(target=writer, args=("a2", brokers[1], "w1", 1)),
        threading.Thread(target=writer, args=("b1", as_bob[0], "w2", 2)),
        threading.Thread(target=writer, args=("b2", as_bob[1], "w2", 3)),
        threading.Thread(target=roamer, args=(brokers[0],)),
        threading.Thread(target=roamer, args=(brokers[1],)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check(not failures, f"every batch through either broker is applied ({failures[:2]})")
    statuses = sorted(body["results"][0]["status"] for status, body in resent if status == 200)
    check(statuses == ["applied", "duplicate"], f"a batch re-sent through the other broker is applied once ({resent})")
    for status, body in resent:
        # Applied, it changed h0 only if its title's time won (the writers' come later).
        if body["results"][0]["status"] == "applied" and body.get("sequence") is not None:
            answered["h0"].append(body["pages"]["h0"])

    for page, times in answered.items():
        check(len(set(times)) == len(times), f"{page}: no two commits answered the same time ({sorted(times)})")
        tokens = brokers if page.startswith("h") else as_bob
        served = [call("GET", f"/v1/pages/{page}")[1]["lastUpdatedTime"] for call in tokens]
        check(served == [max(times)] * 2, f"{page}: both brokers serve the greatest time ({served}, {max(times)})")
    print("ALL OK", flush=True)


main()
