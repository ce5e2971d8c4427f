import DaemonCore
import DaemonCoreTestKit
import RichText
import SyncModel
import Testing

/// The device's clock bound (`[sync] clock_ahead_seconds`): what it merges, what it stamps from, when it sends a
/// `clock_ahead` rejection again. Times are a test's wall clock, in milliseconds.
@Suite struct ClockBoundTests {
  static let day: UInt64 = 86_400_000
  let bound = ClockBound(aheadMillis: day)

  @Test func admitsTimesUpToTheBoundAheadOfTheWallClock() {
    let now: UInt64 = 1_700_000_000_000
    #expect(bound.admits(HLCTimestamp(millis: now + Self.day, counter: .max), at: now))
    #expect(!bound.admits(HLCTimestamp(millis: now + Self.day + 1), at: now))
    #expect(!bound.admits(HLCTimestamp(millis: .max, counter: .max), at: now))
    // Near the end of time the bound saturates rather than trapping.
    #expect(bound.latest(at: .max - 5) == .max)
    #expect(bound.admits(HLCTimestamp(millis: .max), at: .max - 5))
  }

  /// The trace of a clock poisoned by one broker answer far ahead: before, it was merged and every edit was
  /// stamped after it (rejected `clock_ahead` for good); now it is refused, and a clock already poisoned (stored
  /// before this rule) is dropped for the wall clock at the next stamp.
  @Test func aClockFarAheadIsNeitherMergedNorStampedFrom() {
    var wall: UInt64 = 1_700_000_000_000
    var clock = HybridLogicalClock()
    let hostile = HLCTimestamp(millis: .max, counter: .max)
    if bound.admits(hostile, at: wall) { clock.observe(hostile, physicalMillis: wall) }
    #expect(clock.now(physicalMillis: wall) == HLCTimestamp(millis: wall))

    // A broker clock a little ahead (within the bound) is merged: later edits come after it.
    let ahead = HLCTimestamp(millis: wall + 60_000, counter: 3)
    if bound.admits(ahead, at: wall) { clock.observe(ahead, physicalMillis: wall) }
    wall += 10
    #expect(clock.now(physicalMillis: wall) == HLCTimestamp(millis: wall + 59_990, counter: 5))

    // A stored clock past the bound: stamps start again from the wall clock.
    let poisoned = HLCTimestamp(millis: wall + 2 * Self.day, counter: 9)
    var restored = HybridLogicalClock(last: bound.sane(poisoned, at: wall))
    #expect(restored.now(physicalMillis: wall) == HLCTimestamp(millis: wall))
    // One within it is kept, and stamps stay after it (a clock never goes back within the bound).
    let recent = HLCTimestamp(millis: wall + 1_000, counter: 2)
    #expect(bound.sane(recent, at: wall) == recent)
  }

  @Test func aRejectedTimeIsRestampedOnlyWhenTheFreshTimeIsEarlier() {
    let wall: UInt64 = 1_700_000_000_000
    var clock = HybridLogicalClock(last: HLCTimestamp(millis: wall + 3 * Self.day))
    // Stamped by a clock far ahead: a fresh time from the wall clock is earlier.
    let rejected = HLCTimestamp(millis: wall + 3 * Self.day, counter: 4)
    #expect(bound.restampTime(for: rejected, clock: &clock, at: wall) == HLCTimestamp(millis: wall))
    #expect(clock.last == HLCTimestamp(millis: wall), "the clock was made sane")
    #expect(
      bound.restampTime(for: rejected, clock: &clock, at: wall) == HLCTimestamp(millis: wall, counter: 1))

    // Stamped by this device's own wall clock, which the broker finds ahead: a fresh time is not earlier, so it
    // is not sent again (it would be rejected again, for ever).
    var own = HybridLogicalClock(last: HLCTimestamp(millis: wall))
    #expect(bound.restampTime(for: HLCTimestamp(millis: wall), clock: &own, at: wall + 5) == nil)
    #expect(own.last == HLCTimestamp(millis: wall), "the clock is left as it was")
  }

  @Test func aRewriteNumbersRestampsAndStampsMarksWithTheNewTime() throws {
    var document = TextDocument(text: "abc", client: "")
    let mark = try document.mark(
      from: 0, to: 2, type: .bold, value: nil, remove: false, client: "dev",
      time: MarkTime(millis: 9_000_000_000_000, counter: 0))
    let far = HLCTimestamp(millis: 9_000_000_000_000)
    let mutations = [
      Mutation(id: 7, page: id("P"), time: far, action: .setTitle("t")),
      Mutation(id: 8, page: id("P"), time: far, action: .markText(block: id("b"), ops: TextOps(mark))),
    ]
    let fresh = HLCTimestamp(millis: 1_700_000_000_000, counter: 1)
    let rewritten = QueueRewrite.rewrite(
      mutations, firstID: 12, times: [nil, fresh], client: id("dev"), rename: nil)
    #expect(rewritten.map(\.id) == [12, 13])
    #expect(rewritten.map(\.time) == [far, fresh])
    guard case .markText(_, let ops) = rewritten[1].action else {
      Issue.record("\(rewritten[1].action)")
      return
    }
    #expect(try ops.update().marks.map(\.time) == [MarkTime(millis: fresh.millis, counter: 1)])
  }
}
