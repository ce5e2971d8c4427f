import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

/// Connects, writes `request` and hands the stream over.
private func rawConnect(
  _ loop: Loop, _ address: SocketAddress, _ request: String, _ then: @escaping (ByteStream) -> Void
) {
  ByteStream.connect(loop: loop, to: address) { result in
    guard case .success(let stream) = result else {
      Issue.record("connect failed: \(result)")
      return
    }
    if !request.isEmpty { stream.write(ByteBuffer(string: request)) }
    then(stream)
  }
}

/// A client that reads what comes and, at the server's EOF, keeps its end open (as a hostile or careless one
/// does), so that the server's connection lingers.
private final class HoldingClient {
  var bytes: [UInt8] = []
  var ended = false
  var stream: ByteStream?

  init(_ loop: Loop, _ address: SocketAddress, _ request: String) {
    rawConnect(loop, address, request) { stream in
      self.stream = stream
      stream.onRead = { [unowned self] in self.bytes.append(contentsOf: $0) }
      stream.onEnd = { [unowned self] in self.ended = true }
      stream.onError = { [unowned self] _ in self.ended = true }
      stream.startReading()
    }
  }

  var string: String { String(decoding: bytes, as: UTF8.self) }
  func close() { stream?.close() }
}

/// The body of the one response in `raw` (everything after its head).
private func bodyBytes(_ raw: [UInt8]) -> Int {
  let separator: [UInt8] = Array("\r\n\r\n".utf8)
  guard let end = raw.indices.first(where: { raw[$0...].starts(with: separator) }) else { return -1 }
  return raw.count - end - 4
}

/// Runs `body` every 5 ms until it returns true (a check, not a sleep).
private func poll(_ loop: Loop, _ body: @escaping () -> Bool) {
  let timer = LoopTimer(loop: loop)
  timer.start(after: 5, repeatEvery: 5) { if body() { timer.close() } }
}

/// The bounds of issue 16 on HTTP connections: per-request read deadlines, answers written whole to slow readers,
/// queued answers bounded, a stalled peer dropped, closing connections counted until their descriptor closes.
@Suite struct HTTPServerBoundsTests {
  // Peers here close while the server writes to them.
  init() { ignoreBrokenPipes() }

  /// Bytes of `/big`: more than loopback socket buffers take, so the answer waits in the connection's queue.
  static let bigSize = 8 << 20

  private func server(_ configuration: HTTPServerConfiguration, _ loop: Loop) throws -> TestServer {
    let test = try TestServer(loop: loop, configuration: configuration)
    let big = ByteBuffer(bytes: [UInt8](repeating: 0x61, count: Self.bigSize))
    test.router.add(.GET, "/big") { _, responder in responder.respond(HTTPResponse(status: .ok, body: big)) }
    return test
  }

  /// Regression (issue 16, item 6): the read deadline ran from the first request begun while the connection kept
  /// reading, so busy pipelining got a 408 `requestReadTimeout` after it started, whatever each request took.
  @Test func pipelinedRequestsEachGetTheirOwnReadDeadline() throws {
    let loop = try Loop()
    var configuration = HTTPServerConfiguration()
    configuration.requestReadTimeout = 100
    let test = try server(configuration, loop)
    var collector: StreamCollector?
    // Each round ends the request begun in the last and begins the next: no request takes more than 30 ms to
    // arrive, while the connection is never without one for 10 rounds.
    rawConnect(loop, test.address, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /hel") { stream in
      collector = StreamCollector(stream)
      collector?.onEnd = { test.server.close() }
      var round = 0
      let timer = LoopTimer(loop: loop)
      timer.start(after: 30, repeatEvery: 30) {
        round += 1
        if round < 10 {
          stream.write(ByteBuffer(string: "lo HTTP/1.1\r\nHost: x\r\n\r\nGET /hel"))
        } else {
          stream.write(ByteBuffer(string: "lo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
          timer.close()
        }
      }
    }
    try loop.runUntilDone()
    #expect(statusCodes(collector?.string ?? "") == Array(repeating: 200, count: 11))
    try loop.close()
  }

  /// Regression (issue 16, item 5): with `Connection: close` the linger started before the answer was written,
  /// and a reader slower than it got part of the answer.
  @Test func aConnectionCloseAnswerReachesASlowReaderWhole() throws {
    let loop = try Loop()
    var configuration = HTTPServerConfiguration()
    configuration.lingerTimeout = 50
    let test = try server(configuration, loop)
    var reader: SlowReader?
    rawConnect(loop, test.address, "GET /big HTTP/1.1\r\nConnection: close\r\n\r\n") { stream in
      // Nothing read for 4 lingers, then a read every 2 ms.
      reader = SlowReader(stream, interval: 2, startAfter: 200)
      reader?.onEnd = { test.server.close() }
    }
    try loop.runUntilDone()
    #expect(bodyBytes(reader?.bytes ?? []) == Self.bigSize)
    #expect(reader?.failed == false)
    try loop.close()
  }

  /// A peer that reads nothing of its answer is not kept past `writeStallTimeout` after it stopped taking bytes,
  /// whether it asked with `Connection: close` (the connection is closing) or not (it is dropped, and said so):
  /// its descriptor and queued answer go.
  @Test func aPeerThatReadsNothingOfItsAnswerIsDroppedAtTheStallLimit() throws {
    let loop = try Loop()
    var configuration = HTTPServerConfiguration()
    configuration.writeStallTimeout = 100
    let test = try server(configuration, loop)
    var stalls: [Int] = []
    test.server.onEvent = { event in
      if case .writeStalled(let queued) = event { stalls.append(queued) }
    }
    var clients: [ByteStream] = []
    var droppedAfter: UInt64?
    let start = loop.now
    for request in ["GET /big HTTP/1.1\r\nConnection: close\r\n\r\n", "GET /big HTTP/1.1\r\n\r\n"] {
      rawConnect(loop, test.address, request) { stream in clients.append(stream) }
    }
    poll(loop) {
      guard clients.count == 2, test.server.openConnectionCount == 0 else { return false }
      droppedAfter = loop.now - start
      for client in clients { client.close() }
      test.server.close()
      return true
    }
    try loop.runUntilDone(timeout: 5_000)
    let elapsed = try #require(droppedAfter)
    #expect(elapsed >= 100 && elapsed < 1_500, "dropped after \(elapsed) ms")
    #expect(stalls.count == 1 && stalls[0] > 0, "the keep-alive one is reported: \(stalls)")
    try loop.close()
  }

  /// Regression: the idle timer ran while an answer was still being written, so a keep-alive reader slower than
  /// `idleTimeout` lost the end of it.
  @Test func aKeepAliveAnswerToASlowReaderIsNotCutByTheIdleTimeout() throws {
    let loop = try Loop()
    var configuration = HTTPServerConfiguration()
    configuration.idleTimeout = 50
    let test = try server(configuration, loop)
    var reader: SlowReader?
    rawConnect(loop, test.address, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n") { stream in
      reader = SlowReader(stream, interval: 2, startAfter: 200)
      reader?.onEnd = { test.server.close() }
    }
    try loop.runUntilDone()
    #expect(bodyBytes(reader?.bytes ?? []) == Self.bigSize, "then closed for idleness")
    try loop.close()
  }

  /// Regression: a client that half-closes after its request (as `printf … | nc` does) made the server close at
  /// once, dropping the answer still queued.
  @Test func aClientThatHalfClosesAfterItsRequestGetsTheWholeAnswer() throws {
    let loop = try Loop()
    var configuration = HTTPServerConfiguration()
    // The connection keeps reading while the answer is queued (under the bound), so it sees the EOF at once.
    configuration.maxQueuedResponseBytes = 64 << 20
    let test = try server(configuration, loop)
    var collector: StreamCollector?
    rawConnect(loop, test.address, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n") { stream in
      stream.shutdownWrite()
      collector = StreamCollector(stream)
      collector?.onEnd = { test.server.close() }
    }
    try loop.runUntilDone()
    #expect(bodyBytes(collector?.bytes ?? []) == Self.bigSize)
    try loop.close()
  }

  /// Regression (issue 16, item 1): a request kept back by pipelining was parsed as soon as an earlier answer was
  /// ready, however much was queued, so a client that pipelines and never reads grew the queue without bound.
  /// Now no request is parsed past `maxQueuedResponseBytes`: the queue holds at most that plus the answers of
  /// the requests already read (16 pipelined).
  @Test func answersQueuedToAPeerThatDoesNotReadStayWithinTheBound() throws {
    let loop = try Loop()
    var configuration = HTTPServerConfiguration()
    configuration.maxQueuedResponseBytes = 256 << 10
    let test = try server(configuration, loop)
    let answer = ByteBuffer(bytes: [UInt8](repeating: 0x62, count: 64 << 10))
    var maxQueued = 0
    var answered = 0
    test.router.add(.GET, "/later") { _, responder in
      let timer = LoopTimer(loop: loop)
      timer.start(after: 1) {
        timer.close()
        responder.respond(HTTPResponse(status: .ok, body: answer))
        answered += 1
        maxQueued = max(maxQueued, responder.queuedBytes)
      }
    }
    // 600 requests of 64 KiB answers: 38 MiB, far beyond what loopback buffers hold.
    let requests = String(repeating: "GET /later HTTP/1.1\r\nHost: x\r\n\r\n", count: 600)
    var client: ByteStream?
    var answeredWhileStuck = -1
    rawConnect(loop, test.address, requests) { stream in
      client = stream
      let timer = LoopTimer(loop: loop)
      timer.start(after: 400) {
        timer.close()
        answeredWhileStuck = answered
        client?.close()
        // The client gone, so are its connection and queue.
        poll(loop) {
          guard test.server.openConnectionCount == 0 else { return false }
          test.server.close()
          return true
        }
      }
    }
    try loop.runUntilDone()
    #expect(maxQueued <= (256 << 10) + 17 * (64 << 10), "queued \(maxQueued) bytes")
    #expect(answeredWhileStuck > 0 && answeredWhileStuck < 300, "answered \(answeredWhileStuck)")
    try loop.close()
  }

  /// A connection the server closed counts against the limits until its descriptor is closed, lingering
  /// included: otherwise a client that never closes its end held descriptors without limit.
  @Test func closedConnectionsCountAgainstThePeerLimitUntilTheirDescriptorCloses() throws {
    let loop = try Loop()
    var configuration = HTTPServerConfiguration()
    configuration.maxConnectionsPerPeer = 2
    configuration.lingerTimeout = 300
    let test = try server(configuration, loop)
    let request = "GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n"
    let first = HoldingClient(loop, test.address, request)
    let second = HoldingClient(loop, test.address, request)
    var whileLingering = ""
    var countWhileLingering = -1
    var afterLinger = ""
    poll(loop) {
      // Both answered and sent FIN by the server, which now lingers for their end.
      guard first.ended, second.ended else { return false }
      countWhileLingering = test.server.openConnectionCount(fromPeer: "127.0.0.1")
      rawExchange(loop, test.address, request) { answer in
        whileLingering = answer
        poll(loop) {
          guard test.server.openConnectionCount == 0 else { return false }
          rawExchange(loop, test.address, request) { answer in
            afterLinger = answer
            first.close()
            second.close()
            test.server.close()
          }
          return true
        }
      }
      return true
    }
    try loop.runUntilDone()
    #expect(statusCodes(first.string) == [200] && statusCodes(second.string) == [200])
    #expect(countWhileLingering == 2)
    #expect(statusCodes(whileLingering) == [503])
    #expect(statusCodes(afterLinger) == [200], "the slots come back once the lingering descriptors close")
    try loop.close()
  }

  /// Refused connections linger for their 503 only up to `maxLingeringRefusals` at once; past it they are closed
  /// at once, so a flood of refused connections cannot pile up descriptors either.
  @Test func refusalsPastTheLingeringCapAreClosedWithoutAnAnswer() throws {
    let loop = try Loop()
    var configuration = HTTPServerConfiguration()
    configuration.maxConnections = 1
    configuration.maxLingeringRefusals = 1
    let test = try server(configuration, loop)
    let occupant = HoldingClient(loop, test.address, "")
    var refused: HoldingClient?
    var lingering = -1
    var closedAtOnce: String?
    poll(loop) {
      guard test.server.openConnectionCount == 1 else { return false }
      let client = HoldingClient(loop, test.address, "")
      refused = client
      poll(loop) {
        guard client.ended else { return false }
        lingering = test.server.lingeringRefusals
        rawExchange(loop, test.address, "GET /hello HTTP/1.1\r\n\r\n") { answer in
          closedAtOnce = answer
          occupant.close()
          client.close()
          test.server.close()
        }
        return true
      }
      return true
    }
    try loop.runUntilDone()
    #expect(statusCodes(refused?.string ?? "") == [503])
    #expect(lingering == 1)
    #expect(closedAtOnce == "")
    try loop.close()
  }
}
