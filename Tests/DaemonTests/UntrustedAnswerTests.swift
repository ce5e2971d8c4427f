import DaemonCore
import DaemonCoreTestKit
import DaemonStore
import EventLoopTestKit
import SyncModel
import SyncProtocol
import Testing

@testable import Daemon

/// The daemon against a broker whose answers it must not trust: numbers at the edges of 64 bits and clocks far
/// ahead. The HTTP link refuses such answers (`BrokerAnswerDecodingTests`); these answers come past it (a scripted
/// broker), so what is tested is that nothing behind the link traps either.
@Suite struct UntrustedAnswerTests {
  /// A push answered with mutation id 2^63, a fetch with time 2^64-1, a poke with 2^63: each used to trap the
  /// daemon (and, the answer being the same at every start, in a loop). Now the answer is not recorded, the
  /// mutation stays queued, and the daemon goes on.
  @Test func answersWithNumbersAbove2To63StopNothing() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages)
    let stream = harness.goLive(caughtUp: Broker.caughtUp(changed: ["a": 5]))
    let fetch = try #require(harness.broker.fetches.first)
    fetch.succeed(Broker.fetched([Broker.page("a", time: .max)]))
    #expect(harness.log.messages(atLeast: .error).contains { $0.contains("cannot store a delta") })
    #expect(try harness.store.catchUpMap()[id("a")] == 1, "the download time is not changed")

    _ = try harness.store.recordEdits(page: id("a"), actions: [.setTitle("kept")], nowMillis: 1)
    harness.driver.mutationsQueued()
    let push = try #require(harness.broker.pushes.first)
    var outcome = Broker.outcome(of: push.request)
    outcome.results[0].mutationId = UInt64(Int64.max) + 1
    push.succeed(outcome)
    #expect(
      harness.log.messages(atLeast: .error).contains { $0.contains("cannot record the broker's answer") })
    #expect(try harness.store.pendingMutations(limit: 10).map(\.id) == [1])

    stream.send(text: #"{"op":"changed","pages":{"b":9223372036854775808}}"#)
    #expect(harness.log.messages(atLeast: .warning).contains { $0.contains("an unreadable stream message") })
    #expect(harness.machine.state == .live)
    try harness.shutdown()
  }
}
