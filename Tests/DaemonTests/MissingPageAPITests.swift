import DaemonCoreTestKit
import DaemonStore
import EventLoopTestKit
import FoundationEssentials
import SyncModel
import Testing
import Web

@testable import Daemon

/// A reason for a page the broker says this device may not see (it does not exist, or is another workspace's):
/// refused while the broker is reachable, nothing recorded; taken while it is not, then shown `missing` in
/// `GET /v1/offline` and counted in `GET /v1/status` once the broker says so — for `offline`, `favorite` and
/// `visit` alike.
@Suite struct MissingPageAPITests {
  struct Entry: Decodable, Equatable {
    var id: String
    var complete: Bool
    var missing: Bool
  }

  struct ErrorAnswer: Decodable, Equatable {
    var error: Int
    var message: String
  }

  struct Status: Decodable {
    var offlinePages: Int
    var missingPages: Int
  }

  static let adds: [(method: HTTPMethod, path: String)] = [
    (.PUT, "/v1/offline/"), (.PUT, "/v1/favorites/"), (.POST, "/v1/visits/"),
  ]

  static func decode<T: Decodable>(_ type: T.Type, _ response: HTTPResponse) throws -> T {
    try JSONDecoder().decode(type, from: Data(response.body.readableBytesArray))
  }

  static func list(_ harness: DaemonHarness) throws -> [Entry] {
    try decode([Entry].self, try harness.answer(harness.request(.GET, "/v1/offline"), "the offline list"))
  }

  static func status(_ harness: DaemonHarness) throws -> Status {
    try decode(Status.self, try harness.answer(harness.request(.GET, "/v1/status"), "the status"))
  }

  @Test(arguments: adds)
  func aReasonForAPageTheBrokerDoesNotHaveIsRefusedWhileConnected(_ method: HTTPMethod, _ path: String) throws
  {
    let harness = try DaemonHarness(api: true)
    let stream = harness.goLive()
    let add = harness.request(method, path + "NOPE")
    try harness.run(until: "the existence check") { harness.broker.catchUps.count == 2 }
    let check = harness.broker.catchUps[1]
    #expect(check.request.pages == [id("NOPE"): 0] && check.request.epoch == nil)
    check.succeed(Broker.caughtUp(gone: ["NOPE"]))

    let answer = try harness.answer(add, "the refusal")
    #expect(answer.head.status.code == 404)
    #expect(
      try Self.decode(ErrorAnswer.self, answer) == ErrorAnswer(error: 404, message: "page NOPE not found"))
    // Nothing recorded: no row in the store (read with the sqlite3 command line), no subscription.
    let rows = try sqlite3(
      harness.configuration.storePath,
      "SELECT (SELECT count(*) FROM offline_page) || ' ' || (SELECT count(*) FROM offline_action)")
    #expect(rows == "0 0")
    #expect(try Self.list(harness).isEmpty)
    #expect(stream.sent == [.subscribe([])], "only the connection's subscription of the (empty) set")
    try harness.shutdown()
  }

  @Test func aReasonForAPageTheBrokerHasIsTakenAfterTheCheck() throws {
    let harness = try DaemonHarness(api: true)
    let stream = harness.goLive()
    let add = harness.request(.PUT, "/v1/offline/P")
    try harness.run(until: "the existence check") { harness.broker.catchUps.count == 2 }
    #expect(try Self.list(harness).isEmpty, "nothing recorded before the broker answered")
    harness.broker.catchUps[1].succeed(Broker.caughtUp(changed: ["P": 4]))
    let answer = try harness.answer(add, "the answer")
    #expect(answer.head.status.code == 200 && answer.body.readableString == #"{"id":"P","offlinePages":1}"#)
    #expect(stream.sent == [.subscribe([]), .subscribe(ids("P"))])
    #expect(harness.driver.counters.catchUpRequests == 2)
    try harness.shutdown()
  }

  @Test func aPageStoredHereNeedsNoCheck() throws {
    let harness = try DaemonHarness(
      prepare: { store in try storePages(store, [Broker.page("far", time: 3)]) }, api: true)
    harness.goLive()
    let answer = try harness.answer(harness.request(.PUT, "/v1/favorites/far"), "the favorite")
    #expect(answer.head.status.code == 200)
    #expect(harness.broker.catchUps.count == 1, "only the connection's catch-up")
    try harness.shutdown()
  }

  @Test func aCheckThatFailsTakesTheReasonAsAsked() throws {
    let harness = try DaemonHarness(api: true)
    harness.goLive()
    let add = harness.request(.POST, "/v1/visits/P")
    try harness.run(until: "the existence check") { harness.broker.catchUps.count == 2 }
    harness.broker.catchUps[1].fail(.status(503, "busy"))
    #expect(try harness.answer(add, "the answer").head.status.code == 200)
    #expect(try Self.list(harness).map(\.id) == ["P"])
    try harness.shutdown()
  }

  @Test(arguments: adds)
  func aReasonTakenOfflineIsShownMissingOnceTheCatchUpSaysSo(_ method: HTTPMethod, _ path: String) throws {
    let harness = try DaemonHarness(api: true)
    // Disconnected: taken as asked, nothing to check with.
    let added = try harness.answer(harness.request(method, path + "NOPE"), "the add")
    #expect(added.head.status.code == 200)
    #expect(try Self.list(harness) == [Entry(id: "NOPE", complete: false, missing: false)])
    #expect(harness.broker.catchUps.isEmpty)

    // The broker is back: NOPE is subscribed, and the catch-up says this device may not see it.
    let stream = harness.startAndConnect()
    #expect(stream.sent == [.subscribe(ids("NOPE"))])
    stream.answerSubscribe(total: 1)
    harness.broker.catchUps[0].succeed(Broker.caughtUp(gone: ["NOPE"]))
    #expect(try Self.list(harness) == [Entry(id: "NOPE", complete: false, missing: true)])
    let status = try Self.status(harness)
    #expect(status.offlinePages == 1 && status.missingPages == 1)
    #expect(
      harness.log.messages(atLeast: .warning).contains {
        $0.hasPrefix("offline pages missing on the broker")
      })

    // It stays, as the user asked, until the user removes the reason (a visit leaves only as recent visits
    // push it out).
    if method != .POST {
      let removed = try harness.answer(harness.request(.DELETE, path + "NOPE"), "the removal")
      #expect(removed.head.status.code == 200)
      #expect(try Self.list(harness).isEmpty)
      #expect(try Self.status(harness).missingPages == 0)
    }
    try harness.shutdown()
  }

  @Test func aPageAFetchSaysIsGoneIsMissingUntilADownloadOfItIsStored() throws {
    let harness = try DaemonHarness(api: true)
    let stream = harness.goLive()
    let add = harness.request(.PUT, "/v1/offline/P")
    try harness.run(until: "the existence check") { harness.broker.catchUps.count == 2 }
    harness.broker.catchUps[1].succeed(Broker.caughtUp(changed: ["P": 4]))
    _ = try harness.answer(add, "the add")
    stream.answerSubscribe(total: 1)
    // Gone between the check and the fetch (its workspace was taken from the token, say).
    try #require(harness.broker.fetches.count == 1)
    harness.broker.fetches[0].succeed(Broker.fetched([], gone: ["P"]))
    #expect(try Self.list(harness) == [Entry(id: "P", complete: false, missing: true)])

    // Access given back: it is notified, fetched, stored, no longer missing.
    stream.send(Broker.changed(["P": 9]))
    try #require(harness.broker.fetches.count == 2)
    harness.broker.fetches[1].succeed(Broker.fetched([Broker.page("P", time: 9)]))
    #expect(try Self.list(harness) == [Entry(id: "P", complete: true, missing: false)])
    #expect(try Self.status(harness).missingPages == 0)
    try harness.shutdown()
  }

  /// An edit made offline on a page the broker does not have (the fault suite's case): the connection's catch-up
  /// says the page is gone while the edit is still queued, so the purge keeps it (unsent work) and does not mark
  /// it. The push is then rejected; with nothing pending left the page, which has no local copy, is asked for
  /// again, and the fetch's `gone` marks it missing. The rejected edit stays for recovery.
  @Test func aPageGoneWhileItsEditWasQueuedIsMarkedMissingOnceTheEditIsRejected() throws {
    let harness = try DaemonHarness(prepare: Self.editedOffline, api: true)
    let push = try Self.catchUpGoneThenPush(harness)
    push.succeed(Broker.outcome(of: push.request, rejected: [push.request.mutations[0].id: .unknownPage]))

    try harness.run(until: "the page is asked for again") { harness.broker.fetches.count == 1 }
    #expect(harness.broker.fetches[0].request.pages == [id("NOPE"): 0])
    harness.broker.fetches[0].succeed(Broker.fetched([], gone: ["NOPE"]))
    #expect(try Self.list(harness) == [Entry(id: "NOPE", complete: false, missing: true)])
    #expect(try Self.status(harness).missingPages == 1)
    #expect(try sqlite3(harness.configuration.storePath, "SELECT status FROM mutation_queue") == "rejected")
    try harness.shutdown()
  }

  /// The same, but the broker applied the edit (the page was made, or access given back, meanwhile): the page is
  /// asked for again, and its download is stored; it is never marked missing.
  @Test func aPageGoneWhileItsEditWasQueuedIsDownloadedIfTheBrokerAppliedTheEdit() throws {
    let harness = try DaemonHarness(prepare: Self.editedOffline, api: true)
    let push = try Self.catchUpGoneThenPush(harness)
    push.succeed(Broker.outcome(of: push.request, pages: ["NOPE": 7]))

    try harness.run(until: "the page is asked for again") { harness.broker.fetches.count == 1 }
    harness.broker.fetches[0].succeed(Broker.fetched([Broker.database("NOPE", time: 7, rows: [])]))
    #expect(try Self.list(harness) == [Entry(id: "NOPE", complete: true, missing: false)])
    #expect(try Self.status(harness).missingPages == 0)
    try harness.shutdown()
  }

  /// A database kept offline with a view set here while disconnected, never downloaded.
  static func editedOffline(_ store: LocalStore) throws {
    try toggleOffline(store, ["NOPE"])
    _ = try store.recordEdit(page: id("NOPE"), action: .setView(filter: nil, sort: nil), nowMillis: 1_000)
  }

  /// Connects; the catch-up says NOPE is gone while its edit is queued: held, not marked; then the push.
  static func catchUpGoneThenPush(_ harness: DaemonHarness) throws
    -> ScriptedCall<MutationBatch, BatchOutcome>
  {
    let stream = harness.startAndConnect()
    stream.answerSubscribe(total: 1)
    try harness.run(until: "the catch-up") { harness.broker.catchUps.count == 1 }
    harness.broker.catchUps[0].succeed(Broker.caughtUp(gone: ["NOPE"]))
    #expect(
      try list(harness) == [Entry(id: "NOPE", complete: false, missing: false)], "it holds an unsent edit")
    try harness.run(until: "the push") { harness.broker.pushes.count == 1 }
    #expect(harness.broker.fetches.isEmpty)
    return harness.broker.pushes[0]
  }
}
