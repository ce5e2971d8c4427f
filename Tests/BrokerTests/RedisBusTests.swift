import BrokerCore
import EventLoop
import EventLoopTestKit
import Logging
import Testing

@testable import Broker

#if canImport(Glibc)
  import Glibc
#endif

/// Two `RedisBus`es on one loop against a real `redis-server` (Debian's, started here on a free loopback port and
/// stopped by pid): messages cross between them and not back to their sender; garbage is counted; a stalled Redis
/// makes the publisher drop past `[bus] buffer_bytes` and repay with a `resync` once drained; a killed and
/// restarted Redis brings both back with a catch-up each. Never skips: without redis-server it fails.
@Suite(.serialized) struct RedisBusTests {
  /// A loopback port free now (bound and released: redis-server cannot be told port 0).
  static func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
  }

  /// What one bus handed to the server.
  final class Heard {
    var changes: [BusChange] = []
    var catchUps: [String] = []
  }

  /// A script of steps on the loop: each waits (polling every 10 ms) until its condition holds, then acts.
  final class Script {
    let loop: Loop
    var steps: [(what: String, until: () -> Bool, then: () -> Void)] = []
    var failure: String?
    private let timer: LoopTimer
    private var deadline: UInt64 = 0
    var onEnd: () -> Void = {}
    /// What a timed-out step reports besides its name.
    var state: () -> String = { "" }

    init(loop: Loop) {
      self.loop = loop
      timer = LoopTimer(loop: loop)
    }

    func step(_ what: String, until: @escaping () -> Bool, then: @escaping () -> Void = {}) {
      steps.append((what, until, then))
    }

    func run() {
      deadline = loop.now + 15_000
      timer.start(after: 0, repeatEvery: 10) { [unowned self] in self.tick() }
    }

    private func tick() {
      while let step = steps.first {
        guard step.until() else {
          if loop.now > deadline { finish("timed out: \(step.what); \(state())") }
          return
        }
        steps.removeFirst()
        step.then()
        deadline = loop.now + 15_000
      }
      finish(nil)
    }

    private func finish(_ failure: String?) {
      self.failure = failure
      steps = []
      timer.close()
      onEnd()
    }
  }

  @Test func messagesCrossBrokersAndABrokenOrStalledRedisIsRepaidWithCatchUps() throws {
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    let port = Self.freePort()
    var redis: ProcessRun?
    func startRedis() {
      do {
        redis = try ProcessRun(
          loop: loop, "redis-server",
          [
            "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
            directory.path,
          ])
      } catch {
        Issue.record("redis-server could not start (apt-get install redis-server): \(error)")
      }
    }
    var configuration = BusConfiguration(address: .inet(host: "127.0.0.1", port: port))
    configuration.bufferBytes = 65_536
    configuration.backoffBase = 20
    configuration.backoffCap = 200
    let logger = Logger(label: "bus-test") { _ in SwiftLogNoOpLogHandler() }
    let a = RedisBus(loop: loop, configuration: configuration, origin: "a", epoch: "e", logger: logger)
    let b = RedisBus(loop: loop, configuration: configuration, origin: "b", epoch: "e", logger: logger)
    let heardA = Heard()
    let heardB = Heard()
    let page = { (id: String, time: UInt64) in BusChange.Page(id: id, lastUpdated: time) }
    var garbage: RedisLink?
    let script = Script(loop: loop)

    script.step("redis starts") {
      true
    } then: {
      startRedis()
      a.hold(["w1"])
      b.hold(["w1", "w2"])
      a.start(onChange: { heardA.changes.append($0) }, onCatchUp: { heardA.catchUps.append($0) })
      b.start(onChange: { heardB.changes.append($0) }, onCatchUp: { heardB.catchUps.append($0) })
    }
    script.step(
      "both buses live, each having caught up once"
    ) {
      a.figures.connected && b.figures.connected && heardA.catchUps.count == 1 && heardB.catchUps.count == 1
    } then: {
      #expect(a.figures.channels == 2 && b.figures.channels == 3)
      a.publish(sequence: 5, clock: "1:0", workspace: "w1", pages: [page("p1", 5), page("p2", 5)])
      // Nobody but b holds w2: a must not hear it.
      a.publish(sequence: 6, clock: "1:0", workspace: "w2", pages: [page("q", 6)])
      b.publish(sequence: 7, clock: "1:0", workspace: "w2", pages: [page("q", 7)])
      b.publish(sequence: 8, clock: "1:0", workspace: "w1", pages: [page("p1", 8)])
    }
    script.step(
      "each hears the other's messages of its workspaces, not its own"
    ) {
      heardB.changes.count == 2 && heardA.changes.count == 1
    } then: {
      #expect(heardB.changes.map(\.sequence) == [5, 6])
      #expect(
        heardB.changes[0]
          == BusChange(
            origin: "a", epoch: "e", sequence: 5, clock: "1:0", workspace: "w1",
            pages: [page("p1", 5), page("p2", 5)]))
      #expect(heardA.changes.map(\.sequence) == [8])
      RedisLink.connect(loop: loop, to: configuration.address, maxMessageBytes: 1024) { result in
        garbage = try? result.get()
        garbage?.send(["PUBLISH", "pagesync:ws:w1", "\u{1}garbage"])
        garbage?.send(["PUBLISH", "pagesync:ws:w1", "pagesync-bus/1 changed c other-epoch 1 1:0 w1 p1=1"])
      }
    }
    script.step(
      "garbage and another store's epoch are refused by both"
    ) {
      a.figures.refused == 2 && b.figures.refused == 2
    } then: {
      #expect(heardA.changes.count == 1 && heardB.changes.count == 2)
      garbage?.close()
      // Redis stops reading: what a publishes piles up in its socket, then in its queue, up to buffer_bytes.
      try? redis?.process.kill(SIGSTOP)
      let pages = (0..<500).map { page("page-number-\($0)", 1000) }
      for sequence in 1000..<6000 where a.figures.dropped == 0 {
        a.publish(sequence: UInt64(sequence), clock: "1:0", workspace: "w1", pages: pages)
      }
      #expect(a.figures.dropped > 0, "the buffer toward redis was bounded")
      try? redis?.process.kill(SIGCONT)
    }
    script.step(
      "once drained, a's resync makes b catch up"
    ) {
      heardB.catchUps.contains { $0.contains("broker a lost bus messages") }
    } then: {
      #expect(heardA.catchUps.count == 1, "a's own resync does not make a catch up")
      try? redis?.process.kill(SIGKILL)
    }
    script.step("redis killed: both buses down") {
      !a.figures.connected && !b.figures.connected
    } then: {
      #expect(!a.indexIsCurrent && !b.indexIsCurrent)
      startRedis()
    }
    script.step(
      "redis back on the same port: both live again, with a reconnect and a catch-up each"
    ) {
      a.figures.connected && b.figures.connected
        && heardA.catchUps.filter({ $0 == "the bus is live" }).count == 2
        && heardB.catchUps.filter({ $0 == "the bus is live" }).count == 2
    } then: {
      #expect(a.figures.reconnects == 1 && b.figures.reconnects == 1)
      #expect(!a.indexIsCurrent && !b.indexIsCurrent, "with a bus, catch-ups always read the store")
      let before = heardB.changes.count
      a.publish(sequence: 9_000, clock: "1:0", workspace: "w1", pages: [page("p1", 9_000)])
      script.step("the bus carries messages after the restart", until: { heardB.changes.count > before })
    }
    script.state = { "a: \(a.figures) \(heardA.catchUps); b: \(b.figures) \(heardB.catchUps)" }
    script.onEnd = {
      a.close()
      b.close()
      try? redis?.process.kill(SIGKILL)
    }
    script.run()
    try loop.runUntilDone(timeout: 90_000)
    try loop.close()
    #expect(script.failure == nil, "\(script.failure ?? "")")
    #expect(
      redis?.status != nil || redis?.signal != 0, "redis-server ran: \(redis?.errorOutput.string ?? "")")
  }
}

extension RedisBusTests {
  /// A Redis that stops answering without closing its connections (SIGSTOP: as a partition looks) is found out by
  /// the pings: the bus goes down (catch-ups come from the store) and, once Redis answers again, comes back with a
  /// catch-up.
  @Test func aSilentRedisIsFoundOutByPings() throws {
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    let port = Self.freePort()
    var redis: ProcessRun?
    do {
      redis = try ProcessRun(
        loop: loop, "redis-server",
        [
          "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
          directory.path,
        ])
    } catch {
      Issue.record("redis-server could not start (apt-get install redis-server): \(error)")
    }
    var configuration = BusConfiguration(address: .inet(host: "127.0.0.1", port: port))
    configuration.pingInterval = 100
    configuration.connectTimeout = 300
    configuration.backoffBase = 20
    configuration.backoffCap = 100
    let bus = RedisBus(
      loop: loop, configuration: configuration, origin: "a", epoch: "e",
      logger: Logger(label: "bus-test") { _ in SwiftLogNoOpLogHandler() })
    let heard = Heard()
    let script = Script(loop: loop)
    script.step("the bus starts") {
      true
    } then: {
      bus.hold(["w1"])
      bus.start(onChange: { heard.changes.append($0) }, onCatchUp: { heard.catchUps.append($0) })
    }
    script.step("live") {
      bus.figures.connected
    } then: {
      try? redis?.process.kill(SIGSTOP)
    }
    script.step("a silent redis takes the bus down") {
      !bus.figures.connected
    } then: {
      #expect(!bus.indexIsCurrent)
      try? redis?.process.kill(SIGCONT)
    }
    script.step("redis answers again: live, with a catch-up") {
      bus.figures.connected && heard.catchUps.count == 2
    } then: {
      #expect(bus.figures.reconnects == 1)
    }
    script.state = { "\(bus.figures) \(heard.catchUps)" }
    script.onEnd = {
      bus.close()
      try? redis?.process.kill(SIGKILL)
    }
    script.run()
    try loop.runUntilDone(timeout: 60_000)
    try loop.close()
    #expect(script.failure == nil, "\(script.failure ?? "")")
  }
}

/// A scratch directory for one test, removed by `remove()`.
struct ScratchDirectory {
  let path: String
  init() {
    var template = Array("/tmp/pagesync-bus-XXXXXX".utf8CString)
    path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
  }
  func remove() {
    _ = try? runToCompletion("/bin/rm", ["-rf", path], timeout: 10_000)
  }
}
