import DaemonCore
import DaemonCoreTestKit
import DaemonStore
import EventLoopTestKit
import SyncModel
import SyncProtocol
import Testing

@testable import Daemon

/// The driver with a store that another copy of it (a backup restored, a cloned image) has numbered past: the
/// broker's `id_reused` makes it push the queue again under a new client id, at once.
@Suite struct RestoredDeviceTests {
  @Test func anIdReusedAnswerIsPushedAgainUnderANewClientId() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages)
    harness.goLive()
    let old = harness.store.clientID
    _ = try harness.store.recordEdits(
      page: id("a"), actions: [.setTitle("one"), .setTitle("two")], nowMillis: WallClock.millis())
    harness.driver.mutationsQueued()
    let first = try #require(harness.broker.pushes.first)
    #expect(first.request.client == old && first.request.mutations.map(\.id) == [1, 2])
    first.succeed(Broker.outcome(of: first.request, rejected: [1: .idReused, 2: .idReused]))
    try #require(harness.broker.pushes.count == 2)
    let again = harness.broker.pushes[1].request
    #expect(again.client != old && again.client == harness.store.clientID)
    #expect(again.mutations.map(\.id) == [1, 2])
    #expect(again.mutations.map(\.action) == [.setTitle("one"), .setTitle("two")])
    harness.broker.pushes[1].succeed(Broker.outcome(of: again))
    #expect(try harness.store.conflicts().isEmpty && harness.store.status().pendingMutations == 0)
    #expect(harness.driver.counters.mutationsRejected == 0)
    #expect(
      harness.log.messages(atLeast: .warning).contains { $0.contains("another copy of this device's store") })
    try harness.shutdown()
  }
}
