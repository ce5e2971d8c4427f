import DaemonCoreTestKit
import DaemonStore
import SyncModel
import Testing

@testable import Daemon

/// The broker's answer to a batch may cover only its first mutations (`[limits] batch_work`, docs/protocol.md):
/// the daemon keeps the others queued, as not yet sent, and pushes them next; a `too_deep` rejection is kept as a
/// conflict like any other.
@Suite struct PartialBatchTests {
  @Test func aBatchAnsweredInPartKeepsTheRestQueuedAndPushesItNext() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages)
    harness.goLive()
    _ = try harness.store.recordEdits(
      page: id("a"), actions: [.setTitle("one"), .movePage(parent: id("b")), .setTitle("three")], nowMillis: 1
    )
    harness.driver.mutationsQueued()
    let first = try #require(harness.broker.pushes.first)
    #expect(first.request.mutations.map(\.id) == [1, 2, 3])
    // The broker took the first two (the second rejected too_deep) and left the third for the next batch.
    var outcome = Broker.outcome(of: first.request, rejected: [2: .tooDeep], pages: ["a": 6])
    outcome.results.removeLast()
    outcome.lastMutationId = 2
    first.succeed(outcome)

    let status = try harness.store.status()
    #expect(status.pendingMutations == 1 && status.failedMutations == 1)
    #expect(try harness.store.conflicts().map(\.reason) == [.tooDeep])
    let second = try #require(harness.broker.pushes.count == 2 ? harness.broker.pushes[1] : nil)
    #expect(second.request.mutations.map(\.id) == [3])
    second.succeed(Broker.outcome(of: second.request, pages: ["a": 7]))
    #expect(try harness.store.status().pendingMutations == 0)
    #expect(harness.broker.pushes.count == 2)
    try harness.shutdown()
  }
}
