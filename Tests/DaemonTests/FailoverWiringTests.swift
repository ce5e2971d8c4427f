import DaemonCore
import DaemonCoreTestKit
import DaemonStore
import SyncModel
import Testing
import Web

@testable import Daemon

/// The driver's side of failover (`[broker] url` as a list), against a scripted link: which broker each stream
/// and request goes to, and what status says.
@Suite struct FailoverWiringTests {
  static let urls = ["http://b0.example:7700", "http://b1.example:7700"]

  static func twoBrokers(_ configuration: inout DaemonConfiguration) {
    configuration.brokerURLs = urls.map { try! HTTPURL(parsing: $0) }
  }

  static func onePage(_ store: LocalStore) throws {
    try toggleOffline(store, ["a"])
    try storePages(store, [Broker.page("a", time: 1)])
  }

  @Test func aBrokerDownAtStartIsPassedAndRequestsGoWhereTheStreamIs() throws {
    let harness = try DaemonHarness(
      prepare: Self.onePage, configure: Self.twoBrokers, brokers: 2)
    harness.driver.start()
    try #require(harness.broker.streamOpens.count == 1)
    #expect(harness.driver.brokerURL.description == Self.urls[0])
    harness.broker.streamOpens[0].fail(.unreachable("connect failed: connection refused"))
    // Status: the next broker to try, and the error naming the one that failed.
    #expect(harness.driver.brokerURL.description == Self.urls[1])
    #expect(
      harness.driver.lastError
        == "\(Self.urls[0]): the broker is unreachable: connect failed: connection refused")
    try harness.run(until: "the attempt on the second broker") { harness.broker.streamOpens.count == 2 }
    let stream = harness.broker.acceptStream()
    stream.answerSubscribe()
    #expect(harness.driver.lastError == nil && harness.driver.brokerURL.description == Self.urls[1])
    // A local edit once live: pushed to the broker the stream is on.
    harness.broker.catchUps.last?.succeed(Broker.caughtUp())
    _ = try harness.store.recordEdits(page: id("a"), actions: [.setTitle("x")], nowMillis: 1)
    harness.driver.mutationsQueued()
    #expect(harness.broker.routed == ["stream 0", "stream 1", "catchUp 1", "push 1"])
    try harness.shutdown()
  }

  @Test func aLostBrokerMovesTheDeviceToTheNextAndItCatchesUpThere() throws {
    let harness = try DaemonHarness(
      prepare: Self.onePage, configure: Self.twoBrokers, brokers: 2)
    let first = harness.goLive()
    _ = try harness.store.recordEdits(page: id("a"), actions: [.setTitle("queued")], nowMillis: 1)
    harness.driver.mutationsQueued()
    try #require(harness.broker.pushes.count == 1)
    // Broker 0 dies with the push in flight: the stream drops.
    first.closeByBroker(code: 1006)
    #expect(harness.driver.lastError?.hasPrefix("\(Self.urls[0]): the stream closed: 1006") == true)
    try harness.run(until: "the attempt on the second broker") { harness.broker.streamOpens.count == 2 }
    harness.broker.acceptStream().answerSubscribe()
    // Catch-up on broker 1, then the unanswered push again, there.
    let catchUp = try #require(harness.broker.catchUps.last)
    #expect(catchUp.request.pages.keys.contains(id("a")))
    catchUp.succeed(Broker.caughtUp())
    #expect(harness.broker.routed == ["stream 0", "catchUp 0", "push 0", "stream 1", "catchUp 1", "push 1"])
    #expect(
      harness.broker.pushes[1].request.mutations.map(\.id)
        == harness.broker.pushes[0].request.mutations.map(\.id))
    #expect(harness.driver.brokerURL.description == Self.urls[1])
    try harness.shutdown()
  }

  /// A token handed by an app reconnects the stream, to the same broker: the broker was not lost.
  @Test func aNewTokenReconnectsToTheSameBroker() throws {
    let harness = try DaemonHarness(prepare: Self.onePage, configure: Self.twoBrokers, brokers: 2)
    harness.goLive()
    harness.driver.hand(token: "a-handed-token-0123456789")
    try harness.run(until: "the reconnection with the new token") { harness.broker.streamOpens.count == 2 }
    #expect(harness.broker.routed == ["stream 0", "catchUp 0", "stream 0"])
    #expect(harness.driver.brokerURL.description == Self.urls[0])
    try harness.shutdown()
  }

  /// Whatever made the first broker fail — refused, a failed TLS handshake, a 5xx answer to the upgrade — the
  /// next attempt goes to the second.
  @Test(arguments: [
    BrokerLinkError.unreachable("connect failed: connection refused (ECONNREFUSED)"),
    BrokerLinkError.unreachable(
      "connection closed: TLS: handshake with b0.example failed: certificate verify failed"),
    BrokerLinkError.status(503, "the store is unavailable"),
    BrokerLinkError.status(502, "Bad Gateway"),
  ])
  func anyFailureOfTheFirstBrokerMovesToTheSecond(error: BrokerLinkError) throws {
    let harness = try DaemonHarness(prepare: Self.onePage, configure: Self.twoBrokers, brokers: 2)
    harness.driver.start()
    try #require(harness.broker.streamOpens.count == 1)
    harness.broker.streamOpens[0].fail(error)
    #expect(harness.driver.lastError == "\(Self.urls[0]): \(error)")
    try harness.run(until: "the attempt on the second broker") { harness.broker.streamOpens.count == 2 }
    #expect(harness.broker.routed == ["stream 0", "stream 1"])
    try harness.shutdown()
  }
}
