import DaemonCore
import DaemonCoreTestKit
import EventLoopTestKit
import SQLiteStore
import SyncModel
import Testing

@testable import DaemonStore

/// The device's clock against the broker's `clock_ahead` rule: a clock far ahead is not stamped from, and edits
/// the broker rejected `clock_ahead` are sent again with a fresh time instead of being parked as conflicts.
@Suite struct ClockAheadTests {
  static let wall: UInt64 = 1_700_000_000_000
  static let day: UInt64 = 86_400_000

  func rejected(_ ids: [UInt64], _ reason: RejectionReason = .clockAhead, last: UInt64) -> BatchOutcome {
    BatchOutcome(
      results: ids.map { MutationResult(mutationId: $0, page: id("P"), status: .rejected, reason: reason) },
      pages: [:], sequence: nil, lastMutationId: last, epoch: "e1")
  }

  /// One `Pagesync-Clock` of 2^64-1 was merged and persisted, and every later edit was stamped after it. A clock
  /// stored so (before this rule) is dropped at the next edit; one observed so is not merged.
  @Test func aPoisonedClockIsDroppedForTheWallClock() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    let inspect = try file.inspect()
    defer { inspect.close() }
    try inspect.execute("UPDATE sync_meta SET value = '18446744073709551615:4294967295' WHERE key = 'hlc'")
    let first = try store.recordEdit(page: id("P"), action: .setTitle("a"), nowMillis: Self.wall)
    #expect(first.time == HLCTimestamp(millis: Self.wall))
    let hostile = HLCTimestamp(millis: .max, counter: .max)
    let second = try store.recordEdits(
      page: id("P"), actions: [.setTitle("b")], nowMillis: Self.wall, observed: hostile)
    #expect(second.map(\.time) == [HLCTimestamp(millis: Self.wall, counter: 1)])
    #expect(try store.clockValue() == HLCTimestamp(millis: Self.wall, counter: 1))
    // Within the bound the broker's clock is merged as before.
    let near = HLCTimestamp(millis: Self.wall + 5_000, counter: 2)
    let third = try store.recordEdits(
      page: id("P"), actions: [.setTitle("c")], nowMillis: Self.wall, observed: near)
    #expect(third.map(\.time) == [HLCTimestamp(millis: Self.wall + 5_000, counter: 4)])
  }

  /// Edits stamped three days ahead (a wall clock that was wrong, set right since) are rejected `clock_ahead`:
  /// they go again, in order, with fresh times, under the ids after the batch, and the edit queued after them
  /// follows; nothing is a conflict.
  @Test func clockAheadRejectionsAreSentAgainWithFreshTimesInOrder() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    let ahead = Self.wall + 3 * Self.day
    let made = try store.recordEdits(
      page: id("P"), actions: [.setTitle("a"), .setTitle("b"), .setTitle("c")], nowMillis: ahead)
    #expect(made.map(\.id) == [1, 2, 3])
    let sent = try store.pendingMutations(limit: 2)
    let settlement = try store.settle(rejected([1, 2], last: 2), sent: sent.map(\.id), nowMillis: Self.wall)
    #expect(settlement.restamped == 2 && settlement.keptAhead == 0)
    #expect(try store.conflicts().isEmpty)
    let queue = try store.pendingMutations(limit: 10)
    #expect(queue.map(\.id) == [3, 4, 5], "after the batch's ids, which the broker consumed")
    #expect(queue.map(\.action) == [.setTitle("a"), .setTitle("b"), .setTitle("c")])
    #expect(
      queue.map(\.time) == [0, 1, 2].map { HLCTimestamp(millis: Self.wall, counter: $0) },
      "fresh times, in the order they were made")
    #expect(try store.clockValue() == HLCTimestamp(millis: Self.wall, counter: 2))
    let next = try store.recordEdit(page: id("P"), action: .setTitle("d"), nowMillis: Self.wall)
    #expect(next.id == 6 && next.time == HLCTimestamp(millis: Self.wall, counter: 3))
    #expect(try store.status().pendingMutations == 4)
  }

  /// A mutation stamped by the device's own wall clock, which the broker finds too far ahead: a fresh time would
  /// not be earlier, so it is kept as a conflict (sending it again would be rejected again, for ever).
  @Test func aRejectionOfTheDevicesOwnWallClockIsKeptAsAConflict() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    _ = try store.recordEdit(page: id("P"), action: .setTitle("a"), nowMillis: Self.wall)
    let settlement = try store.settle(rejected([1], last: 1), sent: [1], nowMillis: Self.wall)
    #expect(settlement.restamped == 0 && settlement.keptAhead == 1)
    #expect(try store.conflicts().map(\.reason) == [.clockAhead])
    #expect(try store.pendingMutations(limit: 10).isEmpty)
  }
}
