import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

/// A streamed answer with no end of its own (Server-Sent Events: `startStreaming(_:endsWithPeer: true)`) is cut
/// as soon as the client ends its side, not held until a write to the gone client fails.
@Suite struct EndlessStreamTests {
  @Test func anEndlessStreamIsClosedWhenItsClientEndsItsSide() throws {
    let loop = try Loop()
    let router = HTTPRouter()
    let server = HTTPServer(loop: loop, router: router)
    var held: [HTTPResponder] = []
    router.add(.GET, "/events") { _, responder in
      responder.startStreaming(
        HTTPResponseHead(status: .ok, headers: ["Content-Type": "text/event-stream"]), endsWithPeer: true)
      responder.writeChunk(ByteBuffer(string: ": hello\n\n"))
      held.append(responder)  // never finished: only the client's going ends it
    }
    let address = try server.listen(on: .inet(host: "127.0.0.1", port: 0))
    var received = ""
    var ended = false
    ByteStream.connect(loop: loop, to: address) { result in
      guard case .success(let stream) = result else {
        Issue.record("connect failed: \(result)")
        return
      }
      stream.onRead = { [unowned stream] bytes in
        received += String(decoding: bytes, as: UTF8.self)
        // The head and the first chunk came: the client is done sending (as a reader that goes away is).
        if received.contains(": hello") { stream.shutdownWrite() }
      }
      stream.onEnd = { [unowned stream] in
        ended = true
        stream.close()
        server.close()
      }
      stream.startReading()
      stream.write(ByteBuffer(string: "GET /events HTTP/1.1\r\nHost: x\r\n\r\n"))
    }
    // Without the cut, the server holds the connection and the loop never runs out of work (the watchdog fails).
    try loop.runUntilDone(timeout: 10_000)
    #expect(ended)
    #expect(received.hasPrefix("HTTP/1.1 200"))
    #expect(held.count == 1 && !held[0].isConnectionOpen)
    held.removeAll()
    try loop.close()
  }
}
