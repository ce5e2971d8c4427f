import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

@testable import PagesyncClient

/// `LocalAPIClient.events()` against a scripted daemon serving canned Server-Sent Events over its Unix socket:
/// typed events in order, a stream split across writes, reconnection with `Last-Event-ID` (and across a daemon
/// restart), cancellation and a dropped iterator closing the connection, refusals, and the bound on what waits
/// for a slow app.
@Suite struct EventStreamTests {
  static let snapshot = #"{"type":"sync","state":"live","connected":true,"pendingMutations":0}"#
  static let page1 = #"{"type":"page","id":"home","lastDownloadedTimestamp":1764072000123,"source":"local"}"#

  /// The body the contract describes, with one event of every type, a comment and an unknown type.
  static let body =
    "retry: 1000\n\n"
    + "event: sync\ndata: \(snapshot)\n\n"
    + "id: 1764072000000001\nevent: page\ndata: \(page1)\n\n"
    + ": keep-alive\n\n"
    + "id: 1764072000000002\nevent: typing\ndata: {\"type\":\"typing\",\"id\":\"home\"}\n\n"
    + "id: 1764072000000003\nevent: offline\ndata: {\"type\":\"offline\",\"id\":\"home\",\"available\":true}\n\n"
    + "id: 1764072000000004\nevent: page\ndata: {\"type\":\"page\",\"id\":\"old\",\"lastDownloadedTimestamp\":null,"
    + "\"source\":\"remote\",\"deleted\":true,\"extra\":[1]}\n\n"
    + "id: 1764072000000005\nevent: conflict\n"
    + "data: {\"type\":\"conflict\",\"mutationId\":41,\"page\":\"home\",\"reason\":\"page_deleted\"}\n\n"
    + "id: 1764072000000006\nevent: offline\n"
    + "data: {\"type\":\"offline\",\"id\":\"NOPE\",\"available\":false,\"missing\":true}\n\n"
    + "id: 1764072000000007\nevent: reset\ndata: {\"type\":\"reset\",\"reason\":\"daemon restarted\"}\n\n"

  static let expected: [PagesyncEvent] = [
    PagesyncEvent(
      id: nil, change: .sync(.init(state: "live", connected: true, pendingMutations: 0)), json: snapshot),
    PagesyncEvent(
      id: 1_764_072_000_000_001,
      change: .page(.init(id: "home", lastDownloadedTimestamp: 1_764_072_000_123, source: "local")),
      json: page1),
    PagesyncEvent(
      id: 1_764_072_000_000_003, change: .offline(.init(id: "home", available: true)),
      json: #"{"type":"offline","id":"home","available":true}"#),
    PagesyncEvent(
      id: 1_764_072_000_000_004,
      change: .page(.init(id: "old", lastDownloadedTimestamp: nil, source: "remote", deleted: true)),
      json:
        #"{"type":"page","id":"old","lastDownloadedTimestamp":null,"source":"remote","deleted":true,"extra":[1]}"#
    ),
    PagesyncEvent(
      id: 1_764_072_000_000_005,
      change: .conflict(.init(mutationId: 41, page: "home", reason: "page_deleted")),
      json: #"{"type":"conflict","mutationId":41,"page":"home","reason":"page_deleted"}"#),
    PagesyncEvent(
      id: 1_764_072_000_000_006, change: .offline(.init(id: "NOPE", available: false, missing: true)),
      json: #"{"type":"offline","id":"NOPE","available":false,"missing":true}"#),
    PagesyncEvent(
      id: 1_764_072_000_000_007, change: .reset(.init(reason: "daemon restarted")),
      json: #"{"type":"reset","reason":"daemon restarted"}"#),
  ]

  /// The options of these tests: no idle timeout and a long answer timeout. The scripted daemon sends no
  /// keep-alives, and when the whole suite runs, a test's task can wait longer than the defaults for a thread of
  /// the cooperative pool: a reconnection they caused would be replayed by a daemon that knows no positions.
  static var quiet: EventStreamOptions {
    var options = EventStreamOptions()
    options.idleTimeout = 0
    options.answerTimeout = 600_000
    return options
  }

  @Test func everyTypeArrivesTypedInOrderAndUnknownTypesAreSkipped() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    daemon.onEvents { call in
      let responder = call.responder
      responder.startStreaming(eventStreamHead)
      responder.writeChunk(chunk(Self.body))
    }
    var received: [PagesyncEvent] = []
    for try await event in LocalAPIClient(socketPath: daemon.path).events(Self.quiet) {
      received.append(event)
      if received.count == Self.expected.count { break }
    }
    #expect(received == Self.expected)
    let request = try #require(daemon.requests.first)
    #expect(request.target == "/v1/events")
    #expect(request.headers["Accept"] == "text/event-stream")
    #expect(request.headers["Last-Event-ID"] == nil)
    // Leaving the loop dropped the iterator: its connection is closed.
    daemon.sendKeepAlives()
    try await daemon.waitForConnections(0)
  }

  @Test func aStreamCutIntoSmallWritesGivesTheSameEvents() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    // With a byte order mark and CRLF line ends, written a few bytes a loop turn (every write its own chunk).
    let bytes = Array(("\u{FEFF}" + Self.body.replacingOccurrences(of: "\n", with: "\r\n")).utf8)
    daemon.onEvents { call in
      let responder = call.responder
      responder.startStreaming(eventStreamHead)
      let timer = LoopTimer(loop: call.loop)
      let sizes = [1, 2, 3, 5, 7, 11]
      let state = WriteCursor()
      timer.start(after: 1, repeatEvery: 1) {
        let size = sizes[state.writes % sizes.count]
        let end = min(state.offset + size, bytes.count)
        responder.writeChunk(ByteBuffer(bytes: bytes[state.offset..<end]))
        state.offset = end
        state.writes += 1
        if end == bytes.count { timer.close() }
      }
    }
    var received: [PagesyncEvent] = []
    for try await event in LocalAPIClient(socketPath: daemon.path).events(Self.quiet) {
      received.append(event)
      if received.count == Self.expected.count { break }
    }
    #expect(received == Self.expected)
  }

  @Test func aDroppedStreamIsReopenedAfterTheLastEventReceived() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    daemon.onEvents { call in
      let responder = call.responder
      responder.startStreaming(eventStreamHead)
      if call.index == 0 {
        // A short reconnection time for the test, then two events, then the daemon ends the stream.
        responder.writeChunk(chunk("retry: 20\n\nevent: sync\ndata: \(Self.snapshot)\n\n"))
        responder.writeChunk(chunk("id: 11\nevent: page\ndata: \(Self.page1)\n\n"))
        responder.writeChunk(chunk("id: 12\nevent: page\ndata: \(Self.page1)\n\n"))
        responder.finish()
      } else {
        responder.writeChunk(chunk("event: sync\ndata: \(Self.snapshot)\n\n"))
        responder.writeChunk(
          chunk("id: 13\nevent: reset\ndata: {\"type\":\"reset\",\"reason\":\"window passed\"}\n\n"))
      }
    }
    var ids: [UInt64?] = []
    for try await event in LocalAPIClient(socketPath: daemon.path).events(Self.quiet) {
      ids.append(event.id)
      if ids.count == 5 { break }
    }
    #expect(ids == [nil, 11, 12, nil, 13])
    #expect(daemon.requests.map { $0.headers["Last-Event-ID"] } == [nil, "12"])
  }

  @Test func aStreamReopenedWithNothingToResumeFromIsAReset() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    // The first stream ends after its unnumbered snapshot: the client has no id to resume from, and whatever
    // happened before the second stream opened is unknown to both sides.
    daemon.onEvents { call in
      let responder = call.responder
      responder.startStreaming(eventStreamHead)
      responder.writeChunk(chunk("retry: 10\n\nevent: sync\ndata: \(Self.snapshot)\n\n"))
      if call.index == 0 { responder.finish() }
    }
    var events = LocalAPIClient(socketPath: daemon.path).events(Self.quiet).makeAsyncIterator()
    #expect(try await events.next()?.id == nil)
    let reset = try await events.next()
    guard case .reset(let why)? = reset?.change else {
      Issue.record("expected a reset, got \(String(describing: reset))")
      return
    }
    #expect(why.reason.contains("cannot resume"))
    #expect(reset?.id == nil)
    #expect(reset?.json == #"{"type":"reset","reason":"\#(why.reason)"}"#)
    #expect(
      try await events.next()?.change == .sync(.init(state: "live", connected: true, pendingMutations: 0)))
    #expect(daemon.requests.map { $0.headers["Last-Event-ID"] } == [nil, nil])
  }

  @Test func aDaemonRestartIsWaitedForAndResumedFrom() async throws {
    let path = temporarySocketPath("restart")
    var daemon = try ScriptedDaemon(path: path)
    daemon.onEvents { call in
      let responder = call.responder
      responder.startStreaming(eventStreamHead)
      responder.writeChunk(chunk("retry: 10\n\nid: 5\nevent: page\ndata: \(Self.page1)\n\n"))
    }
    var options = Self.quiet
    options.maxRetryDelay = 50
    var events = LocalAPIClient(socketPath: path).events(options).makeAsyncIterator()
    #expect(try await events.next()?.id == 5)
    // The daemon goes away and comes back on the same socket: the client waits, then resumes after 5.
    daemon.shutdown()
    daemon = try ScriptedDaemon(path: path)
    defer { daemon.shutdown() }
    daemon.onEvents { call in
      let responder = call.responder
      responder.startStreaming(eventStreamHead)
      // A daemon of another run cannot resume: it says so with a reset.
      let resumed = call.request.headers["Last-Event-ID"] == "5"
      responder.writeChunk(
        chunk("id: 100\nevent: reset\ndata: {\"type\":\"reset\",\"reason\":\"resumed \(resumed)\"}\n\n"))
    }
    let next = try await events.next()
    #expect(next?.change == .reset(.init(reason: "resumed true")))
    #expect(next?.id == 100)
  }

  @Test func cancellingTheConsumingTaskEndsTheSequenceAndClosesTheConnection() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    daemon.onEvents { call in
      let responder = call.responder
      responder.startStreaming(eventStreamHead)
      responder.writeChunk(chunk("event: sync\ndata: \(Self.snapshot)\n\n"))
    }
    let first = Latch()
    let task = Task {
      var count = 0
      for try await _ in LocalAPIClient(socketPath: daemon.path).events(Self.quiet) {
        count += 1
        first.open()
      }
      return count
    }
    await first.wait()
    try await daemon.waitForConnections(1)
    task.cancel()
    // The sequence ends (nil, not an error) and the daemon sees the connection go.
    #expect(try await task.value == 1)
    daemon.sendKeepAlives()
    try await daemon.waitForConnections(0)
  }

  @Test func aDaemonThatIsNotThereFailsAtOnceUnlessWaitedFor() async throws {
    let path = temporarySocketPath("absent")
    var events = LocalAPIClient(socketPath: path).events(Self.quiet).makeAsyncIterator()
    await #expect(throws: PagesyncClientError.unreachable(socket: path, reason: "no such file or directory"))
    {
      try await events.next()
    }
    #expect(try await events.next() == nil)

    var options = Self.quiet
    options.waitForDaemon = true
    options.maxRetryDelay = 20
    var waiting = LocalAPIClient(socketPath: path).events(options).makeAsyncIterator()
    let task = Task { try await waiting.next() }
    let daemon = try ScriptedDaemon(path: path)
    defer { daemon.shutdown() }
    daemon.onEvents { call in
      let responder = call.responder
      responder.startStreaming(eventStreamHead)
      responder.writeChunk(chunk("event: sync\ndata: \(Self.snapshot)\n\n"))
    }
    #expect(try await task.value?.change == .sync(.init(state: "live", connected: true, pendingMutations: 0)))
  }

  @Test func aRefusalEndsTheSequenceWithTheDaemonsMessage() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    daemon.onEvents { call in
      let responder = call.responder
      responder.respond(
        HTTPResponse(
          status: .serviceUnavailable, headers: ["Content-Type": "application/json"],
          body: chunk(#"{"error": 503, "message": "too many event streams ([api] event_streams = 64)"}"#)))
    }
    var events = LocalAPIClient(socketPath: daemon.path).events(Self.quiet).makeAsyncIterator()
    await #expect(
      throws: PagesyncClientError.daemonError(
        status: 503, message: "too many event streams ([api] event_streams = 64)")
    ) { try await events.next() }
  }

  @Test func anAnswerThatIsNotAnEventStreamIsInvalid() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    daemon.onEvents { call in
      let responder = call.responder
      responder.respond(
        HTTPResponse(status: .ok, headers: ["Content-Type": "application/json"], body: chunk("{}")))
    }
    var events = LocalAPIClient(socketPath: daemon.path).events(Self.quiet).makeAsyncIterator()
    await #expect(
      throws: PagesyncClientError.invalidAnswer(
        "GET /v1/events answered \"application/json\", not text/event-stream")
    ) { try await events.next() }
  }

  @Test(arguments: [
    (
      "id: 7\nevent: page\ndata: {\"type\":\"page\",\"id\":\"home\"}\n\n",
      "event 7 (page): \"source\" is missing"
    ),
    ("id: x7\nevent: page\ndata: \(EventStreamTests.page1)\n\n", "event x7: its id is not a decimal number"),
    ("event: sync\ndata: [1]\n\n", "the unnumbered event: its data is not a JSON object with a \"type\""),
    ("data: " + String(repeating: "x", count: 5000) + "\n\n", "an event of the stream exceeds 4096 bytes"),
  ])
  func aStreamThatBreaksTheContractEndsWithInvalidAnswer(body: String, problem: String) async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    daemon.onEvents { call in
      let responder = call.responder
      responder.startStreaming(eventStreamHead)
      responder.writeChunk(chunk("event: sync\ndata: \(Self.snapshot)\n\n" + body))
    }
    var options = Self.quiet
    options.maxEventBytes = 4096
    var events = LocalAPIClient(socketPath: daemon.path).events(options).makeAsyncIterator()
    #expect(try await events.next()?.id == nil)
    do {
      let event = try await events.next()
      Issue.record("a bad event was accepted: \(String(describing: event))")
    } catch {
      guard case .invalidAnswer(let what) = error else { throw error }
      #expect(what.hasPrefix("GET /v1/events: \(problem)"), "\(what)")
    }
    daemon.sendKeepAlives()
    try await daemon.waitForConnections(0)
  }

  @Test func anAppThatFallsBehindHoldsTheDaemonBackAndLosesNothing() async throws {
    let daemon = try ScriptedDaemon()
    defer { daemon.shutdown() }
    let total = 20_000
    daemon.onEvents { call in
      let responder = call.responder
      responder.startStreaming(eventStreamHead)
      var text = ""
      for id in 1...total {
        text +=
          "id: \(id)\nevent: page\ndata: {\"type\":\"page\",\"id\":\"p\(id)\",\"source\":\"remote\","
          + "\"lastDownloadedTimestamp\":\(id)}\n\n"
        if id % 1000 == 0 {
          responder.writeChunk(chunk(text))
          text = ""
        }
      }
    }
    var options = Self.quiet
    options.bufferLimit = 16
    let events = LocalAPIClient(socketPath: daemon.path).events(options)
    var iterator = events.makeAsyncIterator()
    #expect(try await iterator.next()?.id == 1)
    // The app stops reading for a while: the reader fills the buffer, stops reading, and the rest stays with
    // the daemon. (Without the bound the reader takes all 2 MB well within the window.)
    try await Task.sleep(for: .milliseconds(300))
    let queued = Queued()
    daemon.onLoop { streams in queued.set(streams.first?.queuedBytes ?? 0) }
    let figures = iterator.stream.buffer.figures
    // One read is at most 64 KiB: about 700 of these events.
    #expect(figures.held <= options.bufferLimit + 800, "\(figures)")
    try await daemon.waitForRequests(1)
    #expect(await queued.value() > 1_000_000)
    // Then it catches up: every event, in order, none lost.
    var next = 2
    while next <= total, let event = try await iterator.next() {
      #expect(event.id == UInt64(next))
      next += 1
    }
    #expect(next == total + 1)
    #expect(iterator.stream.buffer.figures.highWater <= options.bufferLimit + 800)
  }
}

/// A flag a task opens once and another waits for.
final class Latch: @unchecked Sendable {
  private let lock = Lock()
  private var isOpen = false
  private var waiters: [CheckedContinuation<Void, Never>] = []

  func open() {
    let waiting = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
      isOpen = true
      defer { waiters = [] }
      return waiters
    }
    for continuation in waiting { continuation.resume() }
  }

  func wait() async {
    await withCheckedContinuation { continuation in
      let now = lock.withLock { () -> Bool in
        if isOpen { return true }
        waiters.append(continuation)
        return false
      }
      if now { continuation.resume() }
    }
  }
}

/// A figure set on the daemon's loop and read by the test.
final class Queued: @unchecked Sendable {
  private let lock = Lock()
  private var figure: Int?
  private let latch = Latch()

  func set(_ value: Int) {
    lock.withLock { figure = value }
    latch.open()
  }

  func value() async -> Int {
    await latch.wait()
    return lock.withLock { figure ?? 0 }
  }
}

/// Where a writer is in the bytes it writes a few at a time (loop thread).
final class WriteCursor: @unchecked Sendable {
  var offset = 0
  var writes = 0
}

extension String {
  /// Every occurrence of `target` replaced by `replacement` (no Foundation).
  func replacingOccurrences(of target: String, with replacement: String) -> String {
    split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
  }
}
