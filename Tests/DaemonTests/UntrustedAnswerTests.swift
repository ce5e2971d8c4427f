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

  /// One `Pagesync-Clock: 18446744073709551615:4294967295` was merged and persisted: every later edit was stamped
  /// after it and rejected `clock_ahead`, for good. Now a broker clock beyond `[sync] clock_ahead_seconds` is not
  /// merged (a warning, once), and an edit through the local API is stamped from the wall clock.
  @Test func aBrokerClockFarAheadIsNotMerged() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages, api: true)
    harness.goLive()
    let hostile = HLCTimestamp(millis: .max, counter: .max)
    harness.broker.onClock?(hostile)
    harness.broker.onClock?(hostile)
    #expect(harness.driver.observedClock == .zero)
    #expect(harness.log.messages(atLeast: .warning).count { $0.contains("clock_ahead_seconds") } == 1)
    let near = HLCTimestamp(millis: WallClock.millis() + 60_000)
    harness.broker.onClock?(near)
    #expect(harness.driver.observedClock == near, "a clock within the bound is merged")

    let edit = try harness.answer(
      harness.request(.PATCH, "/v1/pages/a", body: #"{"title": "stamped"}"#), "the edit")
    #expect(edit.head.status.code == 200)
    let queued = try #require(try harness.store.pendingMutations(limit: 10).first)
    #expect(queued.time > near && queued.time.millis < WallClock.millis() + 120_000)
    try harness.shutdown()
  }

  /// An edit stamped days ahead (by a clock poisoned before the bound existed, or a wall clock set right since)
  /// is rejected `clock_ahead`: the daemon pushes it again at once with a fresh time and the next id, and it is
  /// not a conflict.
  @Test func aClockAheadRejectionIsPushedAgainWithAFreshTime() throws {
    let harness = try DaemonHarness(prepare: SyncDriverTests.threePages)
    harness.goLive()
    let days = WallClock.millis() + 3 * 86_400_000
    _ = try harness.store.recordEdits(page: id("a"), actions: [.setTitle("ahead")], nowMillis: days)
    harness.driver.mutationsQueued()
    let first = try #require(harness.broker.pushes.first)
    #expect(first.request.mutations.map(\.time.millis) == [days])
    first.succeed(Broker.outcome(of: first.request, rejected: [1: .clockAhead]))
    try #require(harness.broker.pushes.count == 2)
    let again = harness.broker.pushes[1].request
    #expect(again.mutations.map(\.id) == [2] && again.mutations.map(\.action) == [.setTitle("ahead")])
    #expect(again.mutations[0].time.millis <= WallClock.millis())
    harness.broker.pushes[1].succeed(Broker.outcome(of: again))
    #expect(try harness.store.conflicts().isEmpty && harness.store.status().pendingMutations == 0)
    #expect(harness.log.messages(atLeast: .warning).contains { $0.contains("sent again with a fresh time") })
    #expect(harness.driver.counters.mutationsRejected == 0)
    try harness.shutdown()
  }
}
