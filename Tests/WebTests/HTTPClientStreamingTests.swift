import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

/// `HTTPClientConnection.stream`: a response handed over as it arrives, against our `HTTPServer` streaming a
/// body chunk by chunk on the same loop.
@Suite struct HTTPClientStreamingTests {
  /// A server whose `/pieces` streams what the test writes through `responder`, and answers `/hello` whole.
  final class PieceServer {
    let server: HTTPServer
    let router = HTTPRouter()
    var address: SocketAddress!
    var responder: HTTPResponder?

    init(loop: Loop) throws {
      server = HTTPServer(loop: loop, router: router)
      router.add(.GET, "/pieces") { [unowned self] _, responder in
        responder.startStreaming(
          HTTPResponseHead(status: .ok, headers: ["Content-Type": "text/event-stream"]))
        self.responder = responder
      }
      router.add(.GET, "/hello") { _, responder in responder.respond(.text(.ok, "hello")) }
      // A Unix socket: its kernel buffers are small and fixed (loopback TCP grows them to megabytes).
      address = try server.listen(on: .unix(path: temporarySocketPath("stream")))
    }
  }

  @Test func eachPieceArrivesBeforeTheServerWritesTheNext() throws {
    let loop = try Loop()
    let test = try PieceServer(loop: loop)
    var seen: [String] = []
    var whole: String?
    HTTPClientConnection.connect(loop: loop, to: test.address) { result in
      guard case .success(let connection) = result else {
        Issue.record("connect: \(result)")
        return test.server.close()
      }
      // The server writes piece i+1 only once the client holds piece i: the client cannot be collecting.
      connection.stream(HTTPRequest(head: HTTPRequestHead(method: .GET, target: "/pieces"))) { result in
        switch result {
        case .success(.head(let head)):
          seen.append("head \(head.status.code)")
          test.responder?.writeChunk(ByteBuffer(string: "piece 0"))
        case .success(.body(let bytes)):
          seen.append(bytes.readableString)
          if seen.count < 4 {
            test.responder?.writeChunk(ByteBuffer(string: "piece \(seen.count - 1)"))
          } else {
            test.responder?.finish()
          }
        case .success(.end):
          seen.append("end")
          // The connection stays usable after a streamed response.
          connection.send(.GET, "/hello") { result in
            whole = (try? result.get())?.body.readableString
            connection.close()
            test.server.close()
          }
        case .failure(let error):
          Issue.record("stream failed: \(error)")
          connection.close()
          test.server.close()
        }
      }
    }
    try loop.runUntilDone(timeout: 10_000)
    try loop.close()
    #expect(seen == ["head 200", "piece 0", "piece 1", "piece 2", "end"])
    #expect(whole == "hello")
  }

  @Test func aStreamedBodyLargerThanTheBodyLimitIsDelivered() throws {
    let loop = try Loop()
    let test = try PieceServer(loop: loop)
    var configuration = HTTPClientConfiguration()
    configuration.limits.maxBodyBytes = 1000
    var received = 0
    var ended = false
    HTTPClientConnection.connect(loop: loop, to: test.address, configuration: configuration) { result in
      guard case .success(let connection) = result else { return test.server.close() }
      connection.stream(HTTPRequest(head: HTTPRequestHead(method: .GET, target: "/pieces"))) { result in
        switch result {
        case .success(.head):
          for _ in 0..<100 {
            test.responder?.writeChunk(ByteBuffer(string: String(repeating: "x", count: 100)))
          }
          test.responder?.finish()
        case .success(.body(let bytes)): received += bytes.readableBytes
        case .success(.end):
          ended = true
          connection.close()
          test.server.close()
        case .failure(let error):
          Issue.record("stream failed: \(error)")
          test.server.close()
        }
      }
    }
    try loop.runUntilDone(timeout: 10_000)
    try loop.close()
    #expect(received == 10_000)
    #expect(ended)
  }

  @Test func pausingHoldsTheServerBackAndResumingDeliversEverything() throws {
    let loop = try Loop()
    let test = try PieceServer(loop: loop)
    let total = 8 << 20
    var received = 0
    var receivedWhilePaused = -1
    var serverQueuedWhilePaused = 0
    let window = LoopTimer(loop: loop)
    HTTPClientConnection.connect(loop: loop, to: test.address) { result in
      guard case .success(let connection) = result else { return test.server.close() }
      connection.stream(HTTPRequest(head: HTTPRequestHead(method: .GET, target: "/pieces"))) { result in
        switch result {
        case .success(.head):
          connection.pauseReading()
          let piece = ByteBuffer(string: String(repeating: "y", count: 64 * 1024))
          for _ in 0..<(total / (64 * 1024)) { test.responder?.writeChunk(piece) }
          test.responder?.finish()
          // While paused nothing is read, so what the kernel cannot hold stays queued on the server. (Without
          // the pause the client reads it all well within the window; a loaded machine can only make this pass
          // for the wrong reason, never fail for it.)
          window.start(after: 200) {
            receivedWhilePaused = received
            serverQueuedWhilePaused = test.responder?.queuedBytes ?? 0
            connection.resumeReading()
          }
        case .success(.body(let bytes)): received += bytes.readableBytes
        case .success(.end):
          window.close()
          connection.close()
          test.server.close()
        case .failure(let error):
          Issue.record("stream failed: \(error)")
          window.close()
          test.server.close()
        }
      }
    }
    try loop.runUntilDone(timeout: 20_000)
    try loop.close()
    #expect(receivedWhilePaused == 0)
    #expect(serverQueuedWhilePaused > total / 2)
    #expect(received == total)
  }

  @Test func aSilentStreamTimesOutAfterItsIdleTimeButNotBefore() throws {
    let loop = try Loop()
    let test = try PieceServer(loop: loop)
    var configuration = HTTPClientConfiguration()
    configuration.streamIdleTimeout = 100
    var outcome: String?
    var pieces = 0
    let ticker = LoopTimer(loop: loop)
    var started: UInt64 = 0
    HTTPClientConnection.connect(loop: loop, to: test.address, configuration: configuration) { result in
      guard case .success(let connection) = result else { return test.server.close() }
      connection.stream(HTTPRequest(head: HTTPRequestHead(method: .GET, target: "/pieces"))) { result in
        switch result {
        case .success(.head):
          started = loop.now
          // A piece every 40 ms keeps it alive for five pieces, then silence.
          ticker.start(after: 40, repeatEvery: 40) {
            pieces += 1
            if pieces <= 5 { test.responder?.writeChunk(ByteBuffer(string: ": keep-alive\n")) }
          }
        case .success(.body), .success(.end): break
        case .failure(let error):
          outcome = "\(error)"
          #expect(pieces >= 5, "timed out while pieces were still coming")
          #expect(loop.now - started >= 200)
          ticker.close()
          // An unfinished streamed answer keeps its connection until its responder goes.
          test.responder = nil
          test.server.close()
        }
      }
    }
    try loop.runUntilDone(timeout: 10_000)
    try loop.close()
    #expect(outcome == "\(HTTPClientError.timedOut)")
  }
}
