import ByteBuffers
import DaemonCore
import DaemonCoreTestKit
import DaemonStore
import EventLoop
import EventLoopTestKit
import FoundationEssentials
import SyncModel
import SyncProtocol
import Testing
import Web

@testable import Daemon

/// The change stream (`GET /v1/events`) of a daemon wired to a scripted broker, read from its Unix socket as raw
/// bytes: events after commits, resuming with `Last-Event-ID`, the window, slow readers, the limits.
@Suite struct ChangeStreamTests {
  /// One event as read from the wire.
  struct Event: Equatable {
    var id: UInt64?
    var type: String
    var data: String

    /// The data's JSON as a dictionary (strings, numbers, booleans, null).
    func json() throws -> [String: AnyValue] {
      try JSONDecoder().decode([String: AnyValue].self, from: Data(data.utf8))
    }
  }

  enum AnyValue: Decodable, Equatable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    init(from decoder: any Decoder) throws {
      let container = try decoder.singleValueContainer()
      if container.decodeNil() {
        self = .null
      } else if let value = try? container.decode(Bool.self) {
        self = .bool(value)
      } else if let value = try? container.decode(Double.self) {
        self = .number(value)
      } else {
        self = .string(try container.decode(String.self))
      }
    }
  }

  /// A raw reader of one `GET /v1/events`: the response head, then the chunked body de-framed and cut into SSE
  /// events at blank lines (this daemon writes `\n` line ends and one `data:` line per event).
  final class Reader {
    let stream: ByteStream
    var raw: [UInt8] = []
    var head: String?
    var body: [UInt8] = []
    var events: [Event] = []
    var comments = 0
    var ended = false
    private var consumedBody = 0

    init(stream: ByteStream) { self.stream = stream }

    static func open(_ harness: DaemonHarness, lastEventID: String? = nil) throws -> Reader {
      ignoreBrokenPipes()
      var opened: Result<ByteStream, LoopError>?
      ByteStream.connect(loop: harness.loop, to: .unix(path: harness.configuration.socketPath)) {
        opened = $0
      }
      try harness.run(until: "the connection") { opened != nil }
      let reader = Reader(stream: try opened!.get())
      reader.stream.onRead = { [unowned reader] bytes in reader.received(bytes) }
      reader.stream.onEnd = { [unowned reader] in reader.ended = true }
      reader.stream.onError = { [unowned reader] _ in reader.ended = true }
      reader.stream.startReading()
      var request = "GET /v1/events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n"
      if let lastEventID { request += "Last-Event-ID: \(lastEventID)\r\n" }
      reader.stream.write(ByteBuffer(string: request + "\r\n"))
      try harness.run(until: "the stream's head") { reader.head != nil || reader.ended }
      return reader
    }

    var status: Int? {
      head.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") }
    }

    func received(_ bytes: UnsafeRawBufferPointer) {
      raw += bytes
      if head == nil {
        guard let end = raw.indices.first(where: { raw[$0...].starts(with: [13, 10, 13, 10]) }) else {
          return
        }
        head = String(decoding: raw[..<end], as: UTF8.self)
        raw.removeFirst(end + 4)
      }
      // Chunks: size in hex, CRLF, data, CRLF.
      while let lineEnd = raw.indices.first(where: { raw[$0...].starts(with: [13, 10]) }),
        let size = Int(String(decoding: raw[..<lineEnd], as: UTF8.self), radix: 16),
        raw.count >= lineEnd + 2 + size + 2
      {
        body += raw[(lineEnd + 2)..<(lineEnd + 2 + size)]
        raw.removeFirst(lineEnd + 2 + size + 2)
        if size == 0 { ended = true }
      }
      parseEvents()
    }

    private func parseEvents() {
      while let end = body[consumedBody...].indices.first(where: { body[$0...].starts(with: [10, 10]) }) {
        let text = String(decoding: body[consumedBody..<end], as: UTF8.self)
        consumedBody = end + 2
        var event = Event(id: nil, type: "message", data: "")
        var isComment = true
        for line in text.split(separator: "\n") {
          if line.hasPrefix(":") { continue }
          isComment = false
          if line.hasPrefix("id: ") { event.id = UInt64(line.dropFirst(4)) }
          if line.hasPrefix("event: ") { event.type = String(line.dropFirst(7)) }
          if line.hasPrefix("data: ") { event.data = String(line.dropFirst(6)) }
        }
        if isComment {
          comments += 1
        } else if !text.hasPrefix("retry:") {
          events.append(event)
        }
      }
    }

    func close() { stream.close() }
  }

  static func edit(_ harness: DaemonHarness, _ page: String, title: String) throws {
    let answer = try harness.answer(
      harness.request(.PATCH, "/v1/pages/\(page)", body: #"{"title":"\#(title)"}"#), "the edit of \(page)")
    #expect(answer.head.status.code == 200)
  }

  @Test func editsFetchesAndTheSyncStateAreEventsAfterTheirCommit() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true)
    harness.goLive()
    let reader = try Reader.open(harness)
    #expect(reader.status == 200)
    #expect(reader.head?.contains("Content-Type: text/event-stream") == true)
    try harness.run(until: "the sync snapshot") { !reader.events.isEmpty }
    // A fresh stream's snapshot carries its position, the newest id.
    #expect(reader.events[0].type == "sync" && reader.events[0].id == harness.driver.changes.newestID)
    #expect(try reader.events[0].json()["state"] == .string("live"))
    #expect(try reader.events[0].json()["pendingMutations"] == .number(0))

    try Self.edit(harness, "a", title: "edited")
    try harness.run(until: "the page event") { reader.events.contains { $0.type == "page" } }
    let page = try #require(reader.events.first { $0.type == "page" })
    #expect(try page.json()["id"] == .string("a"))
    #expect(try page.json()["source"] == .string("local"))
    #expect(try page.json()["lastDownloadedTimestamp"] == .number(1))
    // The edit was committed before it was told: the local copy has it.
    #expect(try harness.store.localPage(id("a"))?.title == "edited")
    try harness.run(until: "the queue's length") {
      reader.events.contains { (try? $0.json()["pendingMutations"]) == .number(1) }
    }

    // The push answered and the page downloaded again: the queue is empty and the copy is the broker's.
    let push = try #require(harness.broker.pushes.first)
    push.succeed(Broker.outcome(of: push.request, pages: ["a": 8]))
    try #require(harness.broker.fetches.count == 1)
    harness.broker.fetches[0].succeed(Broker.fetched([Broker.page("a", time: 8, title: "edited")]))
    try harness.run(until: "the remote page event") {
      reader.events.contains { (try? $0.json()["source"]) == .string("remote") }
    }
    let remote = try #require(reader.events.last { $0.type == "page" })
    #expect(try remote.json()["lastDownloadedTimestamp"] == .number(8))
    #expect(reader.events.last { $0.type == "sync" }.map { try? $0.json()["pendingMutations"] } == .number(0))
    // Ids strictly increase.
    let ids = reader.events.compactMap(\.id)
    #expect(ids == ids.sorted() && Set(ids).count == ids.count && ids.count >= 3)
    reader.close()
    try harness.shutdown()
  }

  @Test func aReaderResumesAfterTheLastIdItSawAndMissesNothing() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true)
    harness.goLive()
    let first = try Reader.open(harness)
    try Self.edit(harness, "a", title: "one")
    try harness.run(until: "the first edit's event") { first.events.contains { $0.type == "page" } }
    let seen = try #require(first.events.compactMap(\.id).last)
    first.close()

    // While no one reads: two edits of b (coalesced to the newest) and one of c.
    try Self.edit(harness, "b", title: "two")
    try Self.edit(harness, "b", title: "three")
    try Self.edit(harness, "c", title: "four")
    let resumed = try Reader.open(harness, lastEventID: "\(seen)")
    try harness.run(until: "the missed events") {
      resumed.events.filter { $0.type == "page" }.count == 2
    }
    // A resumed stream's snapshot has no id: the older events it resumes with follow it.
    #expect(resumed.events.first?.type == "sync" && resumed.events.first?.id == nil)
    let pages = try resumed.events.filter { $0.type == "page" }.map { try $0.json()["id"] }
    #expect(pages == [.string("b"), .string("c")])
    #expect(resumed.events.allSatisfy { $0.type != "reset" })
    #expect(resumed.events.compactMap(\.id).allSatisfy { $0 > seen })
    resumed.close()
    try harness.shutdown()
  }

  @Test func aResumeFromOutsideTheWindowOrAnotherRunIsToldToReRead() throws {
    let harness = try DaemonHarness(
      prepare: SyncDriverTests.threePages, configure: { $0.eventsKept = 100 }, api: true)
    harness.goLive()
    let first = try Reader.open(harness)
    try Self.edit(harness, "a", title: "zero")
    try harness.run(until: "an event") { first.events.contains { $0.id != nil } }
    let seen = try #require(first.events.compactMap(\.id).last)
    first.close()
    for index in 0..<150 {
      harness.driver.changes.publish(.offline(id: id("a"), available: index % 2 == 0))
    }
    let late = try Reader.open(harness, lastEventID: "\(seen)")
    try harness.run(until: "the reset") { late.events.contains { $0.type == "reset" } }
    let reset = try #require(late.events.first { $0.type == "reset" })
    #expect(try reset.json()["reason"].map { "\($0)" }?.contains("events_kept") == true)
    #expect(reset.id == harness.driver.changes.newestID)
    late.close()

    let stranger = try Reader.open(harness, lastEventID: "12")
    try harness.run(until: "the reset") { stranger.events.contains { $0.type == "reset" } }
    #expect(
      try stranger.events.first { $0.type == "reset" }?.json()["reason"].map { "\($0)" }?.contains(
        "not from this run") == true)
    stranger.close()
    try harness.shutdown()
  }

  @Test func offlineChangesAndRejectionsAreEvents() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true)
    let stream = harness.goLive()
    let reader = try Reader.open(harness)
    let add = harness.request(.PUT, "/v1/offline/x")
    try harness.run(until: "the existence check") { harness.broker.catchUps.count == 2 }
    harness.broker.catchUps[1].succeed(Broker.caughtUp(changed: ["x": 4]))
    #expect(try harness.answer(add, "offline add").head.status.code == 200)
    stream.answerSubscribe(total: 4)
    try harness.run(until: "the offline event") { reader.events.contains { $0.type == "offline" } }
    let added = try #require(reader.events.first { $0.type == "offline" })
    #expect(try added.json() == ["type": .string("offline"), "id": .string("x"), "available": .bool(true)])
    #expect(
      try harness.answer(harness.request(.DELETE, "/v1/offline/x"), "offline remove").head.status.code == 200)
    try harness.run(until: "the second offline event") {
      reader.events.filter { $0.type == "offline" }.count == 2
    }
    #expect(try reader.events.last { $0.type == "offline" }?.json()["available"] == .bool(false))

    try Self.edit(harness, "b", title: "refused")
    let push = try #require(harness.broker.pushes.first)
    let mutation = try #require(push.request.mutations.first)
    push.succeed(Broker.outcome(of: push.request, rejected: [mutation.id: .forbidden]))
    try harness.run(until: "the conflict event") { reader.events.contains { $0.type == "conflict" } }
    let conflict = try #require(reader.events.first { $0.type == "conflict" })
    #expect(
      try conflict.json() == [
        "type": .string("conflict"), "mutationId": .number(Double(mutation.id)), "page": .string("b"),
        "reason": .string("forbidden"),
      ])
    reader.close()
    try harness.shutdown()
  }

  @Test func aPageTheBrokerSaysIsGoneIsAMissingEventAndItsReturnAnAvailableOne() throws {
    let harness = try DaemonHarness(api: true)
    let stream = harness.goLive()
    let reader = try Reader.open(harness)
    let add = harness.request(.PUT, "/v1/offline/P")
    try harness.run(until: "the existence check") { harness.broker.catchUps.count == 2 }
    harness.broker.catchUps[1].succeed(Broker.caughtUp(changed: ["P": 4]))
    _ = try harness.answer(add, "the add")
    stream.answerSubscribe(total: 1)
    try #require(harness.broker.fetches.count == 1)
    harness.broker.fetches[0].succeed(Broker.fetched([], gone: ["P"]))
    try harness.run(until: "the missing event") {
      reader.events.contains { $0.type == "offline" && $0.data.contains("missing") }
    }
    let missing = try #require(reader.events.last { $0.type == "offline" })
    #expect(
      try missing.json() == [
        "type": .string("offline"), "id": .string("P"), "available": .bool(false), "missing": .bool(true),
      ])
    // It was marked before it was told.
    #expect(try harness.store.offlineList().first { $0.id == id("P") } != nil)

    stream.send(Broker.changed(["P": 9]))
    try #require(harness.broker.fetches.count == 2)
    harness.broker.fetches[1].succeed(Broker.fetched([Broker.page("P", time: 9)]))
    try harness.run(until: "the page's return") {
      reader.events.last { $0.type == "offline" }.map { (try? $0.json()["available"]) == .bool(true) } == true
    }
    reader.close()
    try harness.shutdown()
  }

  @Test func badResumesAndTooManyStreamsAreRefusedWithAMessage() throws {
    let harness = try DaemonHarness(
      prepare: SyncDriverTests.threePages, configure: { $0.eventStreams = 1 }, api: true)
    harness.goLive()
    let bad = try Reader.open(harness, lastEventID: "12abc")
    #expect(bad.status == 400)
    try harness.run(until: "the error body") {
      String(decoding: bad.raw, as: UTF8.self).contains("Last-Event-ID")
    }
    bad.close()

    let one = try Reader.open(harness)
    #expect(one.status == 200)
    let two = try Reader.open(harness)
    #expect(two.status == 503)
    try harness.run(until: "the error body") {
      String(decoding: two.raw, as: UTF8.self).contains("event_streams")
    }
    two.close()
    // Once the first is gone, a stream may open again.
    one.close()
    try harness.run(until: "the first stream's close") { harness.api!.server.connectionCount == 0 }
    let three = try Reader.open(harness)
    #expect(three.status == 200)
    three.close()
    try harness.shutdown()
  }

  /// A reader that stops reading holds a position, not a queue: what waits for it stays under the high-water
  /// mark plus one read, and when it reads again it gets the newest event of each page, once.
  @Test func aReaderThatStopsReadingIsBoundedAndCatchesUpCoalesced() throws {
    let harness = try DaemonHarness(
      prepare: SyncDriverTests.threePages, configure: { $0.eventsKept = 1_000_000 }, api: true)
    harness.goLive()
    let reader = try Reader.open(harness)
    try harness.run(until: "the snapshot") { !reader.events.isEmpty }
    reader.stream.stopReading()
    let pages = (0..<50).map { id("p\($0)") }
    // About 3 MB of events at ~120 bytes each: far past what the socket buffers hold.
    for round in 0..<500 {
      for page in pages {
        harness.driver.changes.publish(
          .page(id: page, lastDownloadedTimestamp: UInt64(round), source: .remote))
      }
      if round % 100 == 0 { harness.loop.runNoWait() }
    }
    #expect(harness.driver.changes.openStreams == 1)
    let queued = harness.driver.changes.queuedBytesOfStreams
    #expect(queued.max() ?? 0 < 64 << 10 + 256 * 200, "queued: \(queued)")

    reader.stream.startReading()
    var newest: Set<String> = []
    var checked = 0
    try harness.run(until: "the newest event of every page") {
      for event in reader.events[checked...] where event.data.contains(#""lastDownloadedTimestamp":499,"#) {
        if let page = try? event.json()["id"], case .string(let name) = page { newest.insert(name) }
      }
      checked = reader.events.count
      return newest == Set(pages.map(\.rawValue))
    }
    // Far fewer events than were published: behind, the reader got each page's newest, not its history.
    let pageEvents = reader.events.filter { $0.type == "page" }
    #expect(pageEvents.count < 25_000 / 4, "\(pageEvents.count) events")
    #expect(reader.events.allSatisfy { $0.type != "reset" })
    reader.close()
    try harness.shutdown()
  }

  @Test func theDaemonStoppingEndsEveryStreamCleanly() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true)
    harness.goLive()
    let reader = try Reader.open(harness)
    try harness.run(until: "the snapshot") { !reader.events.isEmpty }
    harness.api?.close()
    try harness.run(until: "the end of the body") { reader.ended }
    reader.close()
    try harness.shutdown()
  }

  @Test func framesAreOneLineOfJSONWhateverTheValues() throws {
    let frame = String(
      decoding: ChangeStream.frame(.reset(reason: "line\nbreak \"quoted\""), id: 42), as: UTF8.self)
    #expect(
      frame
        == "id: 42\nevent: reset\ndata: {\"type\":\"reset\",\"reason\":\"line\\nbreak \\\"quoted\\\"\"}\n\n")
    let page = String(
      decoding: ChangeStream.frame(
        .page(id: id("home"), lastDownloadedTimestamp: nil, source: .local, deleted: true), id: nil),
      as: UTF8.self)
    #expect(
      page
        == "event: page\ndata: {\"type\":\"page\",\"id\":\"home\",\"lastDownloadedTimestamp\":null,\"source\":\"local\",\"deleted\":true}\n\n"
    )
  }
}
