import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing
import Web

/// A server with one WebSocket route at /ws that echoes text, and records its sockets and how they closed.
private final class BoundsServer {
  let server: HTTPServer
  let address: SocketAddress
  var sockets: [WebSocket] = []
  var closes: [WebSocketCloseInfo] = []
  var texts: [String] = []
  /// Called with each text before it is echoed.
  var onText: ((WebSocket, String) -> Void)?
  /// Called with each socket as it opens.
  var onOpen: ((WebSocket) -> Void)?

  init(loop: Loop, configuration: WebSocketConfiguration) throws {
    let router = HTTPRouter()
    server = HTTPServer(loop: loop, router: router)
    address = try server.listen(on: .inet(host: "127.0.0.1", port: 0))
    router.webSocket(
      "/ws",
      WebSocketRoute(
        configuration: configuration,
        onOpen: { [unowned self] socket in
          self.sockets.append(socket)
          self.onOpen?(socket)
          socket.onText = { [unowned self, unowned socket] text in
            self.texts.append(text)
            self.onText?(socket, text)
            socket.send(text: text)
          }
          socket.onClose = { [unowned self] info in
            self.closes.append(info)
            self.server.close()
          }
        }))
  }
}

/// A raw client: the upgrade request, then whatever frames the test writes (masked, as a client must).
private func rawWebSocket(_ loop: Loop, _ address: SocketAddress, _ then: @escaping (ByteStream) -> Void) {
  ByteStream.connect(loop: loop, to: address) { result in
    guard case .success(let stream) = result else {
      Issue.record("connect failed: \(result)")
      return
    }
    stream.write(
      ByteBuffer(
        string: "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"))
    then(stream)
  }
}

private func masked(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
  encodedFrame(opcode, payload, fin: fin, maskingKey: 0x1234_5678)
}

/// The bounds of issue 16 on WebSocket connections: what a peer that never reads can make the server queue, and
/// how long an unfinished frame or message may take.
@Suite struct WebSocketBoundsTests {
  // Peers here close while the server writes to them.
  init() { ignoreBrokenPipes() }

  /// Regression (issue 16, item 1): every frame was answered (here, pings with pongs) and read whatever was
  /// queued, so a peer that sends and never reads grew the server without bound. Now the server stops handling
  /// frames, and reading, past `maxQueuedBytes`, and the connection's memory goes with the peer.
  @Test func aPeerThatFloodsAndNeverReadsCostsAtMostTheQueueBound() throws {
    let loop = try Loop()
    var configuration = WebSocketConfiguration()
    configuration.maxQueuedBytes = 64 << 10
    let echo = try BoundsServer(loop: loop, configuration: configuration)
    // Small kernel buffers for the pongs, so that what the server reads is what its own queue allows.
    echo.onOpen = { socket in
      if let fd = socket.fileDescriptor { shrinkSocketBuffers(fileDescriptor: fd, send: 16 << 10) }
    }
    // 8 MiB of 125-byte pings: 8 MiB of pongs to queue if every one were answered.
    let ping = masked(.ping, [UInt8](repeating: 0x70, count: 125))
    var flood: [UInt8] = []
    for _ in 0..<(8 << 20) / ping.count { flood += ping }
    var maxQueued = 0
    var receivedWhileStuck = 0
    rawWebSocket(loop, echo.address) { client in
      client.write(ByteBuffer(bytes: flood))
      let watch = LoopTimer(loop: loop)
      var ticks = 0
      watch.start(after: 1, repeatEvery: 1) {
        if let socket = echo.sockets.first { maxQueued = max(maxQueued, socket.queuedBytes) }
        ticks += 1
        guard ticks == 300 else { return }
        watch.close()
        receivedWhileStuck = echo.sockets.first?.bytesReceived ?? -1
        // The peer goes away: the server must drop the connection and what it queued.
        client.close()
      }
    }
    try loop.runUntilDone()
    #expect(maxQueued > 0 && maxQueued <= (64 << 10) + 127, "queued \(maxQueued) bytes")
    #expect(receivedWhileStuck > 0 && receivedWhileStuck < 2 << 20, "read \(receivedWhileStuck) bytes")
    #expect(echo.closes.count == 1, "the server's socket closed once the peer went")
    try loop.close()
  }

  /// Regression (issue 16, item 4): a frame trickled a byte at a time was held forever (any byte counted as
  /// life). Now a frame or message not complete `messageTimeout` after its first byte closes with 1008.
  @Test func anUnfinishedFrameIsClosedWith1008AtItsDeadline() throws {
    let loop = try Loop()
    var configuration = WebSocketConfiguration()
    configuration.messageTimeout = 150
    configuration.messageTimeoutReason = "frame not completed within frame_seconds"
    let echo = try BoundsServer(loop: loop, configuration: configuration)
    let frame = masked(.text, [UInt8](repeating: 0x61, count: 1000))
    var collector: StreamCollector?
    var closedAfter: UInt64?
    rawWebSocket(loop, echo.address) { client in
      collector = StreamCollector(client)
      let start = loop.now
      // The header and 10 bytes, then a byte every 10 ms.
      client.write(ByteBuffer(bytes: frame[0..<18]))
      var sent = 18
      let trickle = LoopTimer(loop: loop)
      trickle.start(after: 10, repeatEvery: 10) {
        if !echo.closes.isEmpty || sent == frame.count - 1 || loop.now - start > 2_000 {
          if closedAfter == nil, !echo.closes.isEmpty { closedAfter = loop.now - start }
          trickle.close()
          client.close()
          echo.server.close()
          return
        }
        client.write(ByteBuffer(bytes: frame[sent..<sent + 1]))
        sent += 1
      }
    }
    try loop.runUntilDone()
    #expect(echo.closes.first?.code == .policyViolation)
    #expect(echo.closes.first?.reason == "frame not completed within frame_seconds")
    let elapsed = try #require(closedAfter)
    #expect(elapsed >= 150 && elapsed < 1_000, "closed after \(elapsed) ms")
    _ = collector
    try loop.close()
  }

  /// The bytes of an unfinished frame are no sign of life: with no message deadline, the heartbeat drops a peer
  /// that trickles a frame and answers no ping.
  @Test func trickledBytesOfAnUnfinishedFrameDoNotKeepAPeerAlive() throws {
    let loop = try Loop()
    var configuration = WebSocketConfiguration()
    configuration.messageTimeout = 0
    configuration.pingInterval = 40
    configuration.pongTimeout = 40
    let echo = try BoundsServer(loop: loop, configuration: configuration)
    let frame = masked(.text, [UInt8](repeating: 0x61, count: 1000))
    rawWebSocket(loop, echo.address) { client in
      let start = loop.now
      client.write(ByteBuffer(bytes: frame[0..<18]))
      var sent = 18
      let trickle = LoopTimer(loop: loop)
      trickle.start(after: 10, repeatEvery: 10) {
        if !echo.closes.isEmpty || sent == frame.count - 1 || loop.now - start > 1_000 {
          trickle.close()
          client.close()
          echo.server.close()
          return
        }
        client.write(ByteBuffer(bytes: frame[sent..<sent + 1]))
        sent += 1
      }
    }
    try loop.runUntilDone()
    #expect(echo.closes.first?.code == .abnormalClosure)
    #expect(echo.closes.first?.reason.contains("no answer to ping") == true)
    try loop.close()
  }

  /// The deadline is per message: messages that each arrive in time, in pieces and over many deadlines in all,
  /// are all delivered (so are control frames between fragments, which do not restart the message's time).
  @Test func messagesThatEachCompleteInTimeAreNeverCut() throws {
    let loop = try Loop()
    var configuration = WebSocketConfiguration()
    configuration.messageTimeout = 150
    let echo = try BoundsServer(loop: loop, configuration: configuration)
    // Each message: a first fragment, a ping, then the rest 60 ms later.
    let first = masked(.text, Array("hello ".utf8), fin: false) + masked(.ping, [])
    var collector: StreamCollector?
    rawWebSocket(loop, echo.address) { client in
      collector = StreamCollector(client)
      var round = 0
      let timer = LoopTimer(loop: loop)
      timer.start(after: 1, repeatEvery: 60) {
        if round % 2 == 0 {
          client.write(ByteBuffer(bytes: first))
        } else {
          client.write(ByteBuffer(bytes: masked(.continuation, Array("\(round / 2)".utf8))))
        }
        round += 1
        guard round == 12 else { return }
        timer.close()
        client.write(ByteBuffer(bytes: masked(.close, [0x03, 0xE8])))
      }
    }
    try loop.runUntilDone()
    #expect(echo.texts == (0..<6).map { "hello \($0)" })
    #expect(echo.closes.first?.code == .normalClosure)
    _ = collector
    try loop.close()
  }

  /// `pauseReading` stops delivery at once, frames already read included; they come, in order, on
  /// `resumeReading` (what keeps a device stream's waiting frames to those of one read).
  @Test func pausingStopsDeliveryOfFramesAlreadyRead() throws {
    let loop = try Loop()
    let echo = try BoundsServer(loop: loop, configuration: WebSocketConfiguration())
    var deliveredWhilePaused: [String] = []
    echo.onText = { [unowned echo] socket, text in
      guard text == "one" else { return }
      socket.pauseReading()
      let timer = LoopTimer(loop: loop)
      timer.start(after: 50) {
        timer.close()
        deliveredWhilePaused = echo.texts
        socket.resumeReading()
      }
    }
    var collector: StreamCollector?
    rawWebSocket(loop, echo.address) { client in
      collector = StreamCollector(client)
      // Three frames and a close in one write: one read on the server.
      let frames =
        masked(.text, Array("one".utf8)) + masked(.text, Array("two".utf8))
        + masked(.text, Array("three".utf8)) + masked(.close, [0x03, 0xE8])
      client.write(ByteBuffer(bytes: frames))
    }
    try loop.runUntilDone()
    #expect(deliveredWhilePaused == ["one"])
    #expect(echo.texts == ["one", "two", "three"])
    _ = collector
    try loop.close()
  }
  /// Regression (found by `make hostile`): a peer sending many small frames in one write, even one that reads every
  /// answer, had all of them handled in one read callback (libuv reads up to 32 × 64 KiB of a ready socket in
  /// one turn), and the loop served nobody else meanwhile. Now a connection yields after `maxFramesPerTurn`: a
  /// timer due at once, started at its first frame, runs before the rest of the flood is handled.
  @Test func aFloodOfSmallFramesYieldsTheLoopEveryFewFrames() throws {
    let loop = try Loop()
    var configuration = WebSocketConfiguration()
    configuration.maxFramesPerTurn = 8
    let echo = try BoundsServer(loop: loop, configuration: configuration)
    var handledWhenTheOthersRan: Int?
    var turnOfEachFrame: [UInt64] = []
    var probe: Wakeup!
    probe = Wakeup(loop: loop) { [unowned echo] in
      probe.close()
      handledWhenTheOthersRan = echo.texts.count
    }
    echo.onText = { _, text in
      turnOfEachFrame.append(loop.turns)
      guard text == "0" else { return }
      // Another connection's I/O, ready now: it must not wait for the whole flood.
      probe.signal()
    }
    var collector: StreamCollector?
    rawWebSocket(loop, echo.address) { client in
      collector = StreamCollector(client)
      // 1,000 small frames and a close in one write (about 8 KB): one read on the server.
      var frames: [UInt8] = []
      for n in 0..<1000 { frames += masked(.text, Array("\(n)".utf8)) }
      frames += masked(.close, [0x03, 0xE8])
      client.write(ByteBuffer(bytes: frames))
    }
    try loop.runUntilDone()
    #expect(echo.texts.count == 1000, "every frame handled in the end, in order")
    #expect(echo.texts == (0..<1000).map { "\($0)" })
    let handled = try #require(handledWhenTheOthersRan)
    #expect(handled <= 8, "\(handled) frames handled before the loop served anyone else")
    // And every later turn too: not one that yields once and then takes the rest (a timer restarted at 0 in
    // its own callback ran again in the same turn).
    let mostInATurn = Dictionary(grouping: turnOfEachFrame, by: { $0 }).values.map(\.count).max()
    #expect(mostInATurn == 8, "the most frames handled in one turn")
    #expect(echo.closes.first?.code == .normalClosure)
    _ = collector
    try loop.close()
  }
}
