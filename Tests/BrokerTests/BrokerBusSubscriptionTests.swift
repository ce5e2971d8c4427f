import EventLoop
import EventLoopTestKit
import RedisWire
import SyncModel
import Testing

@testable import Broker

#if canImport(Glibc)
  import Glibc
#endif

/// A broker with `[bus]` against a real redis-server (started here on a free loopback port, stopped by pid):
/// what Redis says the broker is subscribed to follows its device streams' grants as they open, change on reload
/// and close. Never skips: without redis-server it fails.
@Suite(.serialized) struct BrokerBusSubscriptionTests {
  /// Subscribers per channel as Redis counts them (`PUBSUB NUMSUB`), asked every 10 ms on a connection of its own.
  final class ChannelCounts {
    private(set) var counts: [String: Int] = [:]
    private var link: RedisLink?
    private var connecting = false
    private let timer: LoopTimer

    init(loop: Loop, address: SocketAddress, channels: [String]) {
      timer = LoopTimer(loop: loop)
      timer.start(after: 0, repeatEvery: 10) { [unowned self] in
        if let link, link.isOpen {
          link.send(["PUBSUB", "NUMSUB"] + channels)
        } else if !connecting {
          connecting = true
          RedisLink.connect(loop: loop, to: address, maxMessageBytes: 1 << 20) { [unowned self] result in
            self.connecting = false
            guard case .success(let opened) = result else { return }
            opened.onReply = { [unowned self] reply in self.read(reply) }
            opened.onFailure = { [unowned self] _ in self.link = nil }
            self.link = opened
          }
        }
      }
    }

    func close() {
      timer.close()
      link?.close()
    }

    private func read(_ reply: RESPValue) {
      guard case .array(let parts?) = reply else { return }
      var index = 0
      while index + 1 < parts.count {
        if case .bulk(let name?) = parts[index], case .integer(let count) = parts[index + 1] {
          counts[String(decoding: name, as: UTF8.self)] = Int(count)
        }
        index += 2
      }
    }
  }

  @Test func theBrokerSubscribesTheWorkspacesItsStreamsMaySeeAsTheyOpenChangeAndClose() throws {
    let port = RedisBusTests.freePort()
    let address = SocketAddress.inet(host: "127.0.0.1", port: port)
    let harness = try BrokerHarness { configuration in
      var bus = BusConfiguration(address: address)
      bus.backoffBase = 20
      bus.backoffCap = 100
      configuration.bus = bus
    }
    let directory = ScratchDirectory()
    defer { directory.remove() }
    var redis: ProcessRun?
    do {
      redis = try ProcessRun(
        loop: harness.loop, "redis-server",
        [
          "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
          directory.path,
        ])
    } catch {
      Issue.record("redis-server could not start (apt-get install redis-server): \(error)")
    }
    let counts = ChannelCounts(
      loop: harness.loop, address: address, channels: ["pagesync:ws:w1", "pagesync:ws:w2", "pagesync:resync"])
    func count(_ workspace: String) -> Int? { counts.counts["pagesync:ws:" + workspace] }

    try harness.run(until: { harness.broker.bus.figures.connected && counts.counts["pagesync:resync"] == 1 })
    #expect(count("w1") == 0 && count("w2") == 0, "no stream, no workspace channel")
    // Alice may see w1, Dana w1 and w2: one channel each, whoever holds it.
    let alice = try harness.openStream(token: BrokerHarness.alice)
    let dana = try harness.openStream(token: BrokerHarness.dana)
    try harness.run(until: { count("w1") == 1 && count("w2") == 1 })
    dana.closeFromDevice()
    try harness.run(until: { count("w2") == 0 })
    #expect(count("w1") == 1, "alice still holds w1")
    // A reload moves Alice's token to w2: the broker follows her grant.
    var next = harness.broker.configuration
    next.tokens[0].workspaces = [try EntityID(validating: "w2")]
    #expect(harness.broker.reload(next).applied == ["auth.tokens"])
    try harness.run(until: { count("w1") == 0 && count("w2") == 1 })
    alice.closeFromDevice()
    try harness.run(until: { count("w2") == 0 })
    #expect(harness.broker.bus.figures.channels == 1)

    counts.close()
    try? redis?.process.kill(SIGKILL)
    try harness.shutDown()
  }
}
