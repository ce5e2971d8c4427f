import ByteBuffers
import EventLoop
import EventLoopTestKit
import SyncProtocol
import Testing
import Web

@testable import Broker

/// The `[limits]` that bound one connection (issue 16): that they reach the HTTP server and the stream route, at
/// start and on reload, and that a real device stream flooding the broker is held to them.
@Suite struct BrokerConnectionLimitsTests {
  init() { ignoreBrokenPipes() }

  @Test func theConnectionLimitsReachTheServerAndTheStreamRouteAndReloadLive() throws {
    let harness = try BrokerHarness { configuration in
      configuration.limits.queuedBytesPerConnection = 1 << 20
      configuration.limits.frameSeconds = 7
      configuration.limits.requestSeconds = 3
      configuration.limits.writeStallSeconds = 11
    }
    func check(queued: Int, frame: UInt64, request: UInt64, stall: UInt64) throws {
      let http = harness.broker.http.configuration
      #expect(http.maxQueuedResponseBytes == queued)
      #expect(http.requestReadTimeout == request * 1000)
      #expect(http.writeStallTimeout == stall * 1000)
      let stream = try #require(harness.broker.http.router.webSocketRoute(for: "/v1/stream")).configuration
      #expect(stream.maxQueuedBytes == queued)
      #expect(stream.messageTimeout == frame * 1000)
      #expect(stream.messageTimeoutReason == "frame not completed within [limits] frame_seconds")
      #expect(stream.writeStallTimeout == stall * 1000)
    }
    try check(queued: 1 << 20, frame: 7, request: 3, stall: 11)
    // One key at a time: each must reach what it bounds by itself.
    var next = harness.broker.configuration
    var applied: [String] = []
    func reload(_ change: (inout BrokerLimits) -> Void) {
      change(&next.limits)
      let plan = harness.broker.reload(next)
      #expect(plan.needsRestart.isEmpty)
      applied += plan.applied
    }
    reload { $0.frameSeconds = 8 }
    try check(queued: 1 << 20, frame: 8, request: 3, stall: 11)
    reload { $0.writeStallSeconds = 12 }
    try check(queued: 1 << 20, frame: 8, request: 3, stall: 12)
    reload { $0.queuedBytesPerConnection = 2 << 20 }
    try check(queued: 2 << 20, frame: 8, request: 3, stall: 12)
    reload { $0.requestSeconds = 4 }
    try check(queued: 2 << 20, frame: 8, request: 4, stall: 12)
    #expect(
      applied == [
        "limits.frame_seconds", "limits.write_stall_seconds", "limits.queued_bytes_per_connection",
        "limits.request_seconds",
      ])
    try harness.shutDown()
  }

  /// The repro, in process: a device stream that sends empty binary frames (each answered with a 4400
  /// error) and never reads. The broker answers until `queued_bytes_per_connection` wait, then stops reading it;
  /// when the device goes, so do its session and queue.
  @Test func aStreamThatFloodsAndNeverReadsIsHeldToTheQueueBound() throws {
    let bound = 64 << 10
    let harness = try BrokerHarness { configuration in
      configuration.limits.queuedBytesPerConnection = bound
    }
    // What `start` does but its services, which the harness started.
    let address = try harness.broker.http.listen(on: .inet(host: "127.0.0.1", port: 0))
    // 16 MiB of empty masked binary frames (6 bytes each), as the client sent 30 MB.
    let frame: [UInt8] = [0x82, 0x80, 1, 2, 3, 4]
    var flood: [UInt8] = []
    flood.reserveCapacity(16 << 20)
    for _ in 0..<(16 << 20) / frame.count { flood += frame }
    var client: ByteStream?
    ByteStream.connect(loop: harness.loop, to: address) { result in
      guard case .success(let stream) = result else { return }
      client = stream
      stream.write(
        ByteBuffer(
          string: "GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "Authorization: Bearer \(BrokerHarness.alice)\r\n\r\n"))
      stream.write(ByteBuffer(bytes: flood))
    }
    try harness.run(until: { harness.broker.streamCount == 1 })
    var maxQueued = 0
    func sample() {
      for case let session? in harness.broker.sessions {
        maxQueued = max(maxQueued, session.socket.queuedBytes)
      }
    }
    // 64 frames a turn are answered (`maxFramesPerTurn`), and the kernel takes the answers until the client's
    // buffers are full; then they queue, up to the bound. Sampled after every turn.
    try harness.run(
      until: {
        sample()
        return maxQueued > bound
      }, timeout: 60_000)
    let readWhenHeld = harness.loop.streamBytesRead
    // Held: nothing more is read or answered, however long the device floods.
    var turns = 0
    let watch = LoopTimer(loop: harness.loop)
    watch.start(after: 1, repeatEvery: 1) {
      turns += 1
      sample()
    }
    try harness.run(until: { turns >= 300 })
    watch.close()
    let read = harness.loop.streamBytesRead
    #expect(maxQueued <= bound + 256, "queued \(maxQueued) bytes")
    #expect(read - readWhenHeld <= 64 << 10, "read \(read - readWhenHeld) bytes more once held")
    #expect(read < 8 << 20, "read \(read) of 16 MiB")
    client?.close()
    try harness.run(until: { harness.broker.streamCount == 0 && harness.broker.connectionCount == 0 })
    try harness.shutDown()
  }

  /// Refusals are what any client can cause at will: twenty connections over `connections_per_peer` make one log
  /// line, not twenty (`LogThrottle`: one a `logThrottleInterval`; the next says how many it held back).
  @Test func aFloodOfRefusedConnectionsLogsOneLine() throws {
    let harness = try BrokerHarness { configuration in
      configuration.limits.connectionsPerPeer = 1
    }
    let address = try harness.broker.http.listen(on: .inet(host: "127.0.0.1", port: 0))
    var streams: [ByteStream] = []
    var ended = 0
    func connect() {
      ByteStream.connect(loop: harness.loop, to: address) { result in
        guard case .success(let stream) = result else { return }
        streams.append(stream)
        stream.onRead = { _ in }
        stream.onEnd = { ended += 1 }
        stream.startReading()
      }
    }
    connect()
    try harness.run(until: { harness.broker.connectionCount == 1 })
    for _ in 0..<20 { connect() }
    // Each refused one is answered 503 and closed by the broker.
    try harness.run(until: { ended == 20 })
    let refusals = harness.log.entries(atLeast: .warning).filter { $0.message == "connection refused" }
    #expect(refusals.count == 1, "\(refusals.map(\.metadata))")
    #expect(refusals.first?.metadata["broker.not_logged"] == "0")
    #expect(refusals.first?.metadata["reason"] == "too many connections from 127.0.0.1")
    for stream in streams { stream.close() }
    try harness.run(until: { harness.broker.connectionCount == 0 })
    try harness.shutDown()
  }
}
