import ByteBuffers
import EventLoop
import EventLoopTestKit
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// An echo server: every accepted stream writes back what it reads and closes on EOF.
private func makeEchoServer(_ loop: Loop, _ address: SocketAddress) throws -> Listener {
  let listener = try Listener(loop: loop, address: address)
  listener.onConnection = { stream in
    stream.onRead = { [unowned stream] bytes in stream.write(ByteBuffer(bytes: bytes)) }
    stream.onEnd = { [unowned stream] in stream.closeGracefully(linger: 100) }
    stream.startReading()
  }
  return listener
}

/// Sends `payload` in `pieces` writes queued in one turn, half-closes, and collects the echo.
private func echoRoundTrip(_ loop: Loop, _ address: SocketAddress, payload: [UInt8], pieces: Int) throws
  -> [UInt8]
{
  let listener = try makeEchoServer(loop, address)
  var received: [UInt8] = []
  var failure: LoopError?
  ByteStream.connect(loop: loop, to: listener.address) { result in
    switch result {
    case .failure(let error):
      failure = error
      listener.close()
    case .success(let stream):
      stream.onRead = { received.append(contentsOf: $0) }
      stream.onEnd = { [unowned stream] in
        stream.close()
        listener.close()
      }
      stream.startReading()
      let size = (payload.count + pieces - 1) / pieces
      for start in stride(from: 0, to: payload.count, by: size) {
        stream.write(ByteBuffer(bytes: payload[start..<min(start + size, payload.count)]))
      }
      #expect(stream.queuedBytes == payload.count)
      stream.shutdownWrite()
    }
  }
  try loop.runUntilDone()
  if let failure { throw failure }
  return received
}

/// A server that keeps what its one connection sends and, at that connection's EOF, closes it and stops
/// listening: the loop runs out of work once the client's stream is closed.
private final class CollectingServer {
  let listener: Listener
  private var collector: StreamCollector?

  init(_ loop: Loop) throws {
    let listener = try Listener(loop: loop, address: .inet(host: "127.0.0.1", port: 0))
    self.listener = listener
    listener.onConnection = { [unowned self] stream in
      let collector = StreamCollector(stream)
      collector.onEnd = { listener.close() }
      self.collector = collector
    }
  }

  /// What the connection sent, as UTF-8.
  var received: String { collector?.string ?? "" }
}

private func pattern(_ count: Int) -> [UInt8] {
  (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
}

@Suite struct StreamTests {
  @Test func tcpEchoOverIPv4() throws {
    let loop = try Loop()
    let payload = pattern(1 << 20)
    #expect(
      try echoRoundTrip(loop, .inet(host: "127.0.0.1", port: 0), payload: payload, pieces: 300) == payload)
    try loop.close()
  }

  @Test func tcpEchoOverIPv6() throws {
    let loop = try Loop()
    let payload = pattern(100_000)
    #expect(try echoRoundTrip(loop, .inet(host: "::1", port: 0), payload: payload, pieces: 7) == payload)
    try loop.close()
  }

  @Test func unixSocketEchoWithOwnerOnlySocketFile() throws {
    let loop = try Loop()
    let path = temporarySocketPath()
    let listener = try makeEchoServer(loop, .unix(path: path))
    var info = stat()
    #expect(stat(path, &info) == 0)
    #expect(info.st_mode & 0o777 == 0o600)
    listener.close()
    loop.runNoWait()
    #expect(access(path, F_OK) != 0, "the socket file is removed on close")
    let payload = pattern(70_000)
    #expect(try echoRoundTrip(loop, .unix(path: path), payload: payload, pieces: 3) == payload)
    try loop.close()
  }

  @Test func staleUnixSocketFileIsReplacedButALiveOneIsNot() throws {
    let loop = try Loop()
    let path = temporarySocketPath("stale")
    // A socket file whose listener is gone.
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
      raw.copyBytes(from: Array(path.utf8) + [0])
    }
    unlink(path)
    let bound = withUnsafePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    #expect(bound == 0)
    close(fd)
    let first = try Listener(loop: loop, address: .unix(path: path))
    #expect(throws: LoopError.self) { _ = try Listener(loop: loop, address: .unix(path: path)) }
    #expect(access(path, F_OK) == 0, "a failed second listener must not remove the live socket")
    first.close()
    try loop.runUntilDone()
    try loop.close()
  }

  @Test func writesQueuedInOneTurnGoOutInOneWriteCall() throws {
    let loop = try Loop()
    let server = try CollectingServer(loop)
    var callsForTenBuffers = -1
    ByteStream.connect(loop: loop, to: server.listener.address) { result in
      guard case .success(let stream) = result else { return }
      let before = stream.writeCalls
      for i in 0..<10 { stream.write(ByteBuffer(string: "frame\(i);")) }
      #expect(stream.writeCalls == before, "write only queues")
      stream.onDrain = { [unowned stream] in
        callsForTenBuffers = stream.writeCalls - before
        #expect(
          !stream.holdsWriteQueue, "a drained stream keeps no write queue (an idle connection's memory)")
        stream.close()
      }
    }
    try loop.runUntilDone()
    #expect(callsForTenBuffers == 1)
    #expect(server.received == (0..<10).map { "frame\($0);" }.joined())
    try loop.close()
  }

  @Test func flushNowWritesBeforeTheTurnEndsAndTheTurnDoesNotWriteAgain() throws {
    let loop = try Loop()
    let server = try CollectingServer(loop)
    var callsInTurn = -1
    var queuedAfterFlush = -1
    var drains = 0
    var callsAtTurnEnd = -1
    ByteStream.connect(loop: loop, to: server.listener.address) { result in
      guard case .success(let stream) = result else { return }
      stream.onDrain = { drains += 1 }
      let before = stream.writeCalls
      stream.write(ByteBuffer(string: "answer;"))
      stream.flushNow()
      // In the kernel already, in the same turn: what follows in this turn does not hold it back.
      callsInTurn = stream.writeCalls - before
      queuedAfterFlush = stream.queuedBytes
      stream.flushNow()  // nothing queued: nothing written
      let later = LoopTimer(loop: loop)
      later.start(after: 1) { [unowned stream] in
        // A later turn: the end of the first one wrote nothing more and drained once.
        callsAtTurnEnd = stream.writeCalls - before
        stream.close()
        later.close()
      }
    }
    try loop.runUntilDone()
    #expect(callsInTurn == 1)
    #expect(queuedAfterFlush == 0)
    #expect(callsAtTurnEnd == 1, "the turn's own flush found nothing left to write")
    #expect(drains == 1, "one drain for one write, not another from the turn's flush")
    #expect(server.received == "answer;")
    try loop.close()
  }

  @Test func whatADrainCallbackQueuesWaitsForTheNextTurnsPoll() throws {
    // A stream that refills its queue from its drain callback, as an HTTP connection answering pipelined
    // requests does, against a peer whose kernel buffers take everything: each refill must wait for the next
    // turn, so the loop polls (here: sees a wake-up signalled at the first drain) between two of them.
    let loop = try Loop()
    let server = try CollectingServer(loop)
    var drains = 0
    var drainsWhenTheTaskRan = -1
    var wakeup: Wakeup!
    wakeup = Wakeup(loop: loop) {
      drainsWhenTheTaskRan = drains
      wakeup.close()
    }
    ByteStream.connect(loop: loop, to: server.listener.address) { result in
      guard case .success(let stream) = result else { return }
      stream.onDrain = { [unowned stream] in
        drains += 1
        if drains == 1 { wakeup.signal() }
        if drains < 50 { stream.write(ByteBuffer(string: "\(drains);")) } else { stream.close() }
      }
      stream.write(ByteBuffer(string: "0;"))
    }
    try loop.runUntilDone()
    #expect(drains == 50)
    #expect(drainsWhenTheTaskRan == 1, "the loop polled between the first drain's refill and the second")
    #expect(server.received == (0..<50).map { "\($0);" }.joined())
    try loop.close()
  }

  @Test func aListenerTakesAtMostMaxAcceptsPerTurnAndTheRestNextTurn() throws {
    // Six connections wait in the kernel's backlog before the loop first runs (a blocking connect completes
    // there). libuv would accept all six in one callback; with a bound of 2 they come 2 a turn.
    let loop = try Loop()
    let listener = try Listener(loop: loop, address: .inet(host: "127.0.0.1", port: 0))
    listener.maxAcceptsPerTurn = 2
    var clients: [Int32] = []
    for _ in 0..<6 {
      let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
      var address = sockaddr_in()
      address.sin_family = sa_family_t(AF_INET)
      address.sin_port = in_port_t(UInt16(listener.address.port!).bigEndian)
      address.sin_addr.s_addr = inet_addr("127.0.0.1")
      let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
      }
      #expect(connected == 0)
      clients.append(fd)
    }
    var turnsOfAccepts: [UInt64] = []
    var streams: [ByteStream] = []
    listener.onConnection = { stream in
      turnsOfAccepts.append(loop.turns)
      streams.append(stream)
      if streams.count == 6 {
        for stream in streams { stream.close() }
        listener.close()
      }
    }
    try loop.runUntilDone()
    for fd in clients { close(fd) }
    #expect(turnsOfAccepts.count == 6)
    let perTurn = Dictionary(grouping: turnsOfAccepts, by: { $0 }).values.map(\.count)
    #expect(perTurn.max() == 2, "accepts by turn: \(turnsOfAccepts)")
    try loop.close()
  }

  @Test func writeNowOnAnIdleStreamWritesAtOnceAndQueuesBehindWhatWaits() throws {
    let loop = try Loop()
    let server = try CollectingServer(loop)
    var callsAfterFirst = -1
    var queuedAfterFirst = -1
    var heldQueueAfterFirst = true
    var callsAfterThird = -1
    ByteStream.connect(loop: loop, to: server.listener.address) { result in
      guard case .success(let stream) = result else { return }
      let before = stream.writeCalls
      stream.writeNow(ByteBuffer(string: "one;"))
      // In the kernel at once, and no queue kept for it (the fan-out's one frame per subscriber).
      callsAfterFirst = stream.writeCalls - before
      queuedAfterFirst = stream.queuedBytes
      heldQueueAfterFirst = stream.holdsWriteQueue
      // Behind a queued write, it waits its turn: order is kept.
      stream.write(ByteBuffer(string: "two;"))
      stream.writeNow(ByteBuffer(string: "three;"))
      callsAfterThird = stream.writeCalls - before
      stream.onDrain = { [unowned stream] in stream.close() }
    }
    try loop.runUntilDone()
    #expect(callsAfterFirst == 1)
    #expect(queuedAfterFirst == 0)
    #expect(!heldQueueAfterFirst)
    #expect(callsAfterThird == 1, "queued behind the write that waits for the end of the turn")
    #expect(server.received == "one;two;three;")
    try loop.close()
  }

  @Test func queuedBytesShowBackpressureUntilThePeerReads() throws {
    let loop = try Loop()
    let listener = try Listener(loop: loop, address: .inet(host: "127.0.0.1", port: 0))
    var serverSide: ByteStream?
    var received = 0
    let total = 32 << 20
    var maxQueued = 0
    var drained = false
    listener.onConnection = { stream in serverSide = stream }
    ByteStream.connect(loop: loop, to: listener.address) { result in
      guard case .success(let stream) = result else { return }
      // One shared 1 MiB buffer written 32 times: no copies, and far more than the socket buffers hold.
      let chunk = ByteBuffer(bytes: pattern(1 << 20))
      for _ in 0..<32 { stream.write(chunk) }
      stream.onDrain = { [unowned stream] in
        drained = true
        stream.close()
      }
      // Let a few turns pass with the server not reading, then start reading.
      let timer = LoopTimer(loop: loop)
      timer.start(after: 50) { [unowned stream] in
        maxQueued = stream.queuedBytes
        timer.close()
        serverSide?.onRead = { chunk in received += chunk.count }
        serverSide?.onEnd = {
          serverSide?.close()
          listener.close()
        }
        serverSide?.startReading()
      }
    }
    try loop.runUntilDone()
    #expect(maxQueued > 0, "the kernel cannot take 32 MiB at once")
    #expect(drained)
    #expect(received == total)
    try loop.close()
  }

  @Test func connectionRefusedIsReported() throws {
    let loop = try Loop()
    // Find a free port, then close it so nothing listens there.
    let probe = try Listener(loop: loop, address: .inet(host: "127.0.0.1", port: 0))
    let address = probe.address
    probe.close()
    var error: LoopError?
    ByteStream.connect(loop: loop, to: address) { result in
      if case .failure(let e) = result { error = e }
    }
    try loop.runUntilDone()
    #expect(error?.name == "ECONNREFUSED")
    try loop.close()
  }

  @Test func hostNamesAreResolved() throws {
    let loop = try Loop()
    let listener = try makeEchoServer(loop, .inet(host: "127.0.0.1", port: 0))
    var echoed = ""
    ByteStream.connect(loop: loop, to: .inet(host: "localhost", port: listener.address.port!)) { result in
      guard case .success(let stream) = result else {
        listener.close()
        return
      }
      stream.onRead = { echoed += String(decoding: $0, as: UTF8.self) }
      stream.onEnd = { [unowned stream] in
        stream.close()
        listener.close()
      }
      stream.startReading()
      stream.write(ByteBuffer(string: "ping"))
      stream.shutdownWrite()
    }
    try loop.runUntilDone()
    #expect(echoed == "ping")
    try loop.close()
  }

  @Test func peerResetIsAnErrorNotACrash() throws {
    let loop = try Loop()
    let listener = try Listener(loop: loop, address: .inet(host: "127.0.0.1", port: 0))
    var serverError: LoopError?
    var serverEnded = false
    listener.onConnection = { stream in
      stream.onError = { [unowned stream] error in
        serverError = error
        stream.close()
        listener.close()
      }
      stream.onEnd = { [unowned stream] in
        serverEnded = true
        stream.close()
        listener.close()
      }
      stream.startReading()
    }
    ByteStream.connect(loop: loop, to: listener.address) { result in
      guard case .success(let stream) = result, let fd = stream.fileDescriptor else { return }
      // SO_LINGER with a zero timeout makes close(2) send a reset.
      var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
      stream.close()
    }
    try loop.runUntilDone()
    #expect(serverError?.name == "ECONNRESET" || serverEnded)
    try loop.close()
  }
}
