import DaemonCore
import DaemonCoreTestKit
import DaemonStore
import FoundationEssentials
import SyncModel
import SyncProtocol
import Testing
import Web

@testable import Daemon

#if canImport(Glibc)
  import Glibc
#endif

/// The local API on its Unix socket, over a daemon wired to a scripted broker: `POST /v1/sync` as the machine's
/// event, reasons changed through the offline set, read-through with the typed link.
@Suite struct LocalAPITests {
  struct SyncAnswerBody: Decodable, Equatable {
    var pushed: Int
    var fetched: Int
    var pendingMutations: Int
    var failedMutations: Int
  }

  struct ErrorAnswer: Decodable {
    var error: Int
    var message: String
  }

  static func decode<T: Decodable>(_ type: T.Type, _ response: HTTPResponse) throws -> T {
    try JSONDecoder().decode(type, from: Data(response.body.readableBytesArray))
  }

  /// A request to the local API is work too: once the API is quiet, what it touched (the offline list of 10,000
  /// pages, the code that wrote it) goes back to the system, as after a fetch.
  @Test func theMemoryARequestUsedIsGivenBackOnceTheAPIIsQuiet() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true)
    harness.driver.memoryReturnDelayMillis = 1
    #expect(harness.driver.memoryReturns == 0)
    let list = try harness.answer(harness.request(.GET, "/v1/offline"), "the offline list")
    #expect(list.head.status.code == 200)
    try harness.run(until: "the memory given back") { harness.driver.memoryReturns == 1 }
    try harness.shutdown()
  }

  /// `GET /v1/offline` is streamed as the store reads it, `OfflineListJSON.entriesPerChunk` entries at a time
  /// (`Transfer-Encoding: chunked`): 10,000 entries and their 1.5 MB answer were whole in memory at once, the peak
  /// of a first sync. The bytes stay what `JSONEncoder` wrote, across the chunks' ends, and an empty set is `[]`.
  @Test func theOfflineListIsStreamedInChunksAsTheStoreReadsIt() throws {
    let pages = (0..<600).map { "p\($0)" }
    let harness = try DaemonHarness(prepare: { try toggleOffline($0, pages) }, api: true)
    let list = try harness.answer(harness.request(.GET, "/v1/offline"), "the offline list")
    #expect(list.head.status.code == 200)
    #expect(list.head.headers["Transfer-Encoding"] == "chunked")
    #expect(list.head.headers["Content-Length"] == nil)
    #expect(list.head.headers["Content-Type"] == "application/json")
    let entries = try harness.store.offlineList()
    #expect(entries.count == 600)
    let expected = JSONBodies().encode(entries.map(OfflineEntryJSON.init)).readableBytesArray
    #expect(list.body.readableBytesArray == expected)
    try harness.shutdown()

    let empty = try DaemonHarness(api: true)
    let none = try empty.answer(empty.request(.GET, "/v1/offline"), "the empty offline list")
    #expect(none.head.status.code == 200 && none.body.readableString == "[]")
    try empty.shutdown()
  }

  /// A client slower than the daemon holds the writing of `GET /v1/offline`, not the whole answer in the daemon's
  /// memory: once the connection holds more than `OfflineListStream.highWater` bytes the kernel has not taken, the
  /// next chunk is read from the store only when they are (written at once, 10,000 entries were all queued, 2.6 MB).
  /// Read at last, the answer is whole, and what JSONEncoder wrote.
  @Test func theOfflineListIsWrittenAsTheClientReadsIt() throws {
    let pages = (0..<5000).map { "p\($0)" }
    let harness = try DaemonHarness(prepare: { try toggleOffline($0, pages) }, api: true)
    let api = try #require(harness.api)
    // A client of its own over the socket, that reads nothing until told.
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) {
      $0.copyBytes(from: Array(harness.configuration.socketPath.utf8) + [0])
    }
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    try #require(connected == 0)
    let request = Array("GET /v1/offline HTTP/1.1\r\nHost: daemon\r\n\r\n".utf8)
    #expect(write(fd, request, request.count) == request.count)
    try harness.run(until: "the list waiting for its client") { api.offlineListsWaiting == 1 }

    _ = fcntl(fd, F_SETFL, O_NONBLOCK)
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    try harness.run(until: "the whole answer") {
      while case let count = read(fd, &buffer, buffer.count), count > 0 { received += buffer[0..<count] }
      return received.suffix(5) == Array("0\r\n\r\n".utf8)
    }
    #expect(api.offlineListsWaiting == 0)
    // The chunked body, put together.
    let separator = Array("\r\n\r\n".utf8)
    let headEnd = try #require(
      received.indices.first { received[$0...].starts(with: separator) })
    #expect(String(decoding: received[..<headEnd], as: UTF8.self).contains("Transfer-Encoding: chunked"))
    var at = headEnd + separator.count
    var body: [UInt8] = []
    var chunks = 0
    while true {
      let line = try #require(received[at...].firstIndex(of: UInt8(ascii: "\r")))
      let size = try #require(Int(String(decoding: received[at..<line], as: UTF8.self), radix: 16))
      at = line + 2
      if size == 0 { break }
      body += received[at..<at + size]
      at += size + 2
      chunks += 1
    }
    #expect(chunks > 5000 / OfflineListJSON.entriesPerChunk)
    let expected = JSONBodies().encode(try harness.store.offlineList().map(OfflineEntryJSON.init))
    #expect(body == expected.readableBytesArray)
    try harness.shutdown()
  }

  @Test func syncAnswersOnceThePushAndAnExtraCatchUpCheckAreDone() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true)
    harness.goLive()
    let edit = try harness.answer(
      harness.request(.PATCH, "/v1/pages/a", body: #"{"title":"edited"}"#), "the edit")
    #expect(edit.head.status.code == 200)
    let push = try #require(harness.broker.pushes.first)

    let sync = harness.request(.POST, "/v1/sync")
    try harness.run(until: "the sync reached the daemon") { harness.machine.waitingSyncRequests.count == 1 }
    // Settling first: the push, then the edited page downloaded whole; no check while they are under way.
    push.succeed(Broker.outcome(of: push.request, pages: ["a": 8]))
    try #require(harness.broker.fetches.count == 1)
    #expect(harness.broker.catchUps.count == 1)
    harness.broker.fetches[0].succeed(Broker.fetched([Broker.page("a", time: 8, title: "edited")]))

    // Settled: one catch-up of its own; what it finds is fetched before the answer.
    try #require(harness.broker.catchUps.count == 2)
    #expect(harness.broker.catchUps[1].request.pages == [id("a"): 8, id("b"): 1, id("c"): 2])
    harness.broker.catchUps[1].succeed(Broker.caughtUp(changed: ["b": 9]))
    try #require(harness.broker.fetches.count == 2)
    #expect(harness.broker.fetches[1].request.pages == [id("b"): 1])
    harness.loop.runNoWait()
    #expect(sync.result == nil, "no answer before what the check found is fetched")
    harness.broker.fetches[1].succeed(Broker.fetched([Broker.page("b", time: 9)]))

    let answer = try harness.answer(sync, "the sync's answer")
    #expect(answer.head.status.code == 200)
    #expect(
      try Self.decode(SyncAnswerBody.self, answer)
        == SyncAnswerBody(pushed: 1, fetched: 2, pendingMutations: 0, failedMutations: 0))
    #expect(harness.driver.counters.catchUpRequests == 2)
    try harness.shutdown()
  }

  @Test func syncReconnectsAtOnceAndFailsWith503WhenTheBrokerIsUnreachable() throws {
    // A backoff far longer than the test: only the sync can make the second attempt.
    let harness = try DaemonHarness(
      prepare: SyncDriverTests.threePages,
      configure: {
        $0.backoffBase = 600_000
        $0.backoffCap = 600_000
      }, api: true)
    harness.driver.start()
    harness.broker.streamOpens[0].fail(.unreachable("connect failed: connection refused"))
    #expect(harness.machine.state == .disconnected)

    let sync = harness.request(.POST, "/v1/sync")
    try harness.run(until: "the sync's connection attempt") { harness.broker.streamOpens.count == 2 }
    harness.broker.streamOpens[1].fail(.unreachable("connect failed: connection refused"))
    let answer = try harness.answer(sync, "the sync's answer")
    #expect(answer.head.status.code == 503)
    let error = try Self.decode(ErrorAnswer.self, answer)
    #expect(error.error == 503 && error.message.hasPrefix("the broker is unreachable: "))
    #expect(error.message.contains("connection refused"))
    try harness.shutdown()
  }

  @Test func syncFailsWith502WhenThePushFails() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true)
    harness.goLive()
    _ = try harness.answer(harness.request(.PATCH, "/v1/pages/a", body: #"{"title":"x"}"#), "the edit")
    let failing = harness.request(.POST, "/v1/sync")
    try harness.run(until: "the sync reached the daemon") { harness.machine.waitingSyncRequests.count == 1 }
    try #require(harness.broker.pushes.count == 1)
    harness.broker.pushes[0].fail(.status(503, "busy"))
    let failed = try harness.answer(failing, "the failed sync's answer")
    #expect(failed.head.status.code == 502)
    #expect(
      try Self.decode(ErrorAnswer.self, failed).message
        == "the push failed: push failed: the broker answered 503: busy")

    // Deferred to the heartbeat: the next sync fails at once too.
    #expect(try harness.answer(harness.request(.POST, "/v1/sync"), "a second sync").head.status.code == 502)
    #expect(harness.broker.pushes.count == 1)
    try harness.shutdown()
  }

  @Test func aSyncThatDoesNotFinishInTimeIsAnswered504() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true, syncTimeout: 5)
    // The connection attempt is never answered.
    harness.driver.start()
    let slow = try harness.answer(harness.request(.POST, "/v1/sync"), "the slow sync's answer")
    #expect(slow.head.status.code == 504)
    #expect(try Self.decode(ErrorAnswer.self, slow).message.hasPrefix("sync did not finish in"))
    #expect(harness.machine.waitingSyncRequests.isEmpty && harness.machine.state == .connecting)
    try harness.shutdown()
  }

  @Test func aWaitingSyncIsAnswered503WhenTheDaemonStops() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true)
    harness.driver.start()
    let sync = harness.request(.POST, "/v1/sync")
    try harness.run(until: "the sync reached the daemon") { harness.machine.waitingSyncRequests.count == 1 }
    try harness.shutdown()
    let answer = try #require(try sync.result?.get())
    #expect(answer.head.status.code == 503)
    #expect(try Self.decode(ErrorAnswer.self, answer).message == "the daemon is stopping")
  }

  @Test func aPageTakenOfflineIsSubscribedFetchedOnceSubscribedAndDroppedWhenItsReasonGoes() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true)
    let stream = harness.goLive()
    let add = harness.request(.PUT, "/v1/offline/x")
    // Not stored here: the daemon asks the broker whether x exists first (MissingPageAPITests).
    try harness.run(until: "the existence check") { harness.broker.catchUps.count == 2 }
    harness.broker.catchUps[1].succeed(Broker.caughtUp(changed: ["x": 4]))
    let added = try harness.answer(add, "offline add")
    #expect(added.head.status.code == 200 && added.body.readableString == #"{"id":"x","offlinePages":4}"#)
    #expect(stream.sent.last == .subscribe(ids("x")))
    #expect(harness.broker.fetches.isEmpty, "not before the subscription is in place")
    stream.answerSubscribe(total: 4)
    try #require(harness.broker.fetches.count == 1)
    #expect(harness.broker.fetches[0].request.pages == [id("x"): 0])
    harness.broker.fetches[0].succeed(Broker.fetched([Broker.page("x", time: 4, title: "X")]))
    #expect(try harness.store.offlineEntry(id("x"))?.complete == true)

    let removed = try harness.answer(harness.request(.DELETE, "/v1/offline/x"), "offline remove")
    #expect(removed.head.status.code == 200)
    #expect(stream.sent.last == .unsubscribe(ids("x")))
    #expect(try harness.store.localPage(id("x")) == nil)
    let again = try harness.answer(harness.request(.DELETE, "/v1/offline/x"), "a second remove")
    #expect(again.head.status.code == 404)
    try harness.shutdown()
  }

  @Test func aPageNotOfflineIsReadThroughWhileConnected() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true)
    harness.goLive()
    let read = harness.request(.GET, "/v1/pages/far")
    try harness.run(until: "the read-through") { harness.broker.pageReads.count == 1 }
    #expect(harness.broker.pageReads[0].request == id("far"))
    harness.broker.pageReads[0].succeed(Broker.page("far", time: 5, title: "Far away").page)
    let answer = try harness.answer(read, "the page")
    #expect(answer.head.status.code == 200 && answer.body.readableString.contains(#""source":"broker""#))

    let missing = harness.request(.GET, "/v1/pages/nowhere")
    try harness.run(until: "the second read-through") { harness.broker.pageReads.count == 2 }
    harness.broker.pageReads[1].fail(.status(404, "no such page"))
    #expect(try harness.answer(missing, "a missing page").head.status.code == 404)
    try harness.shutdown()
  }
}
