"""Deep page trees against a running broker (issue #16, item 2): a chain as deep as `[limits] tree_depth` allows,
a page below it and moves that would make cycles get their rejections, and a batch of heavy moves in that chain
is cut by `[limits] batch_work` so that another workspace's one-mutation batch, and /healthz, answer meanwhile.

Usage: broker_trees.py BASE_URL ALICE_TOKEN BOB_TOKEN
The broker runs with the default `tree_depth` (1000) and `batch_work` (100000).
Prints one "OK ..." line per check and "ALL OK" at the end; on the first mismatch prints "FAIL ..." and exits 1.
"""
import sys
import threading
import time

from checks import check, json_caller

BASE, ALICE, BOB = sys.argv[1], sys.argv[2], sys.argv[3]
DEPTH = 1000
call = json_caller(BASE, ALICE)


class Client:
    """A device: its client id, workspace, token and next mutation id."""

    def __init__(self, client, workspace, token):
        self.client, self.workspace, self.token, self.next, self.clock = client, workspace, token, 1, 0

    def mutations(self, actions):
        """Numbered mutations for (page, type, fields) actions."""
        out = []
        for page, type_, fields in actions:
            self.clock += 1
            m = {"id": self.next + len(out), "page": page, "time": f"{1_700_000_000_000 + self.clock}:0",
                 "type": type_}
            m.update(fields)
            out.append(m)
        return out

    def push(self, mutations):
        """One batch; the client's next id follows the broker's lastMutationId (a cut batch is continued)."""
        status, answer = call("POST", "/v1/batch",
                              {"client": self.client, "workspace": self.workspace, "mutations": mutations},
                              self.token)
        if status == 200:
            self.next = answer["lastMutationId"] + 1
        return status, answer

    def push_all(self, actions):
        """Sends every action, 1,000 a batch, each batch starting where the last answer stopped, as the daemon
        does; returns (every result in order, the number of batches)."""
        mutations = self.mutations(actions)
        results, batches = [], 0
        while len(results) < len(mutations):
            status, answer = self.push(mutations[len(results):][:1000])
            check(status == 200 and answer["results"], f"a batch is answered ({status})")
            results += answer["results"]
            batches += 1
        return results, batches


def reasons(answer):
    return [r.get("reason", {}).get("name") for r in answer["results"]]


def main():
    alice = Client("alice-laptop", "w1", ALICE)
    chain = [f"p{i:04d}" for i in range(DEPTH)]
    results, batches = alice.push_all(
        [(page, "create_page", {"parent": chain[i - 1] if i else None, "title": page}) for i, page in enumerate(chain)])
    check(len(results) == DEPTH and all(r["status"] == "applied" for r in results)
          and [r["mutationId"] for r in results] == list(range(1, DEPTH + 1)),
          f"a chain of {DEPTH} pages is created, each once")
    check(batches > 1, f"the chain's creates took {batches} batches: each answered in part within batch_work")

    # Below the limit, and cycles.
    status, answer = alice.push(alice.mutations([("below", "create_page", {"parent": chain[-1], "title": "x"})]))
    check(status == 200 and answer["results"][0]["reason"] == {"code": 11, "name": "too_deep"},
          f"a page under the {DEPTH}th is rejected too_deep ({answer})")
    status, answer = alice.push(alice.mutations([
        (chain[0], "move_page", {"parent": chain[-1]}),
        (chain[500], "move_page", {"parent": chain[-1]}),
        (chain[-1], "move_page", {"parent": chain[-1]}),
    ]))
    check(status == 200 and [r["reason"] for r in answer["results"]] == [{"code": 7, "name": "invalid_parent"}] * 3,
          f"the root, a middle page and the leaf moved under the leaf are rejected invalid_parent ({answer})")
    status, page = call("GET", f"/v1/pages/{chain[0]}")
    check(status == 200 and page.get("parent") is None, "the root stays at the top")
    status, answer = alice.push(alice.mutations([("side", "create_page", {"parent": None, "title": "side"}),
                                                 ("side", "move_page", {"parent": chain[-3]}),
                                                 ("side", "move_page", {"parent": chain[-1]})]))
    check(status == 200 and reasons(answer) == [None, None, "too_deep"],
          f"a page moves to depth {DEPTH - 1}, not below the {DEPTH}th ({answer})")

    # A batch of 1,000 moves at the bottom of the chain (each walks it up, and changes the heights above): cut by
    # the budget, while another workspace's one-mutation batch and /healthz answer.
    moves = alice.mutations([(chain[-1], "move_page", {"parent": chain[-3 + i % 2]}) for i in range(1000)])
    heavy = {}

    def push_heavy():
        started = time.monotonic()
        heavy["answer"] = alice.push(moves)
        heavy["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=push_heavy)
    thread.start()
    time.sleep(0.05)
    bob = Client("bob-phone", "w2", BOB)
    started = time.monotonic()
    status, answer = bob.push(bob.mutations([("bobs", "create_page", {"parent": None, "title": "Bob"})]))
    bob_seconds = time.monotonic() - started
    started = time.monotonic()
    health, _ = call("GET", "/healthz", token=None)
    health_seconds = time.monotonic() - started
    thread.join()
    status_heavy, heavy_answer = heavy["answer"]
    check(status_heavy == 200 and 0 < len(heavy_answer["results"]) < 1000
          and all(r["status"] == "applied" for r in heavy_answer["results"]),
          f"the heavy batch is answered in part: {len(heavy_answer['results'])} of 1000 moves "
          f"in {heavy['seconds']:.3f} s")
    check(status == 200 and answer["results"][0]["status"] == "applied" and bob_seconds < 2.0,
          f"another workspace's one-mutation batch meanwhile: {bob_seconds:.3f} s")
    check(health == 200 and health_seconds < 2.0, f"/healthz meanwhile: {health_seconds:.3f} s")
    # The rest follows in later batches, each applied once.
    rest = moves[len(heavy_answer["results"]):]
    done = len(heavy_answer["results"])
    while rest:
        status, answer = alice.push(rest)
        check(status == 200 and answer["results"], "the rest of the moves is taken")
        done += len(answer["results"])
        rest = rest[len(answer["results"]):]
    status, page = call("GET", f"/v1/pages/{chain[-1]}")
    check(done == 1000 and status == 200 and page.get("parent") == chain[-2],
          "every move was applied once, the last one last")
    print("ALL OK", flush=True)


main()
