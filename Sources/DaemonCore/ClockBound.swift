import SyncModel

/// How far ahead of this device's wall clock a time may be and still be taken into its hybrid logical clock: the
/// broker's `clock_ahead` rule (`[limits] clock_ahead_seconds`, a mutation time further ahead of the broker's
/// wall clock is rejected), applied on the device with `[sync] clock_ahead_seconds` (the same day by default).
///
/// Without it one `Pagesync-Clock` header far ahead (a broken or hostile broker, anyone on a plain-HTTP path)
/// was merged and persisted, and every later edit was stamped after it: rejected `clock_ahead`, for good. Now:
///
/// - a broker's clock beyond the bound is not merged (`admits`);
/// - a stored clock beyond it (merged before this rule, or a wall clock that was far ahead and was set right)
///   is dropped for the wall clock when the next edit is stamped (`sane`);
/// - a mutation the broker rejected `clock_ahead` is sent again with a fresh time when that time is earlier
///   than the rejected one (`restampTime`): progress, so a device whose own wall clock is ahead of the broker's
///   keeps its edit as a conflict instead of resending it for ever.
///
/// Pure: the caller passes the wall clock.
public struct ClockBound: Sendable, Equatable {
  /// The bound, milliseconds.
  public var aheadMillis: UInt64

  /// The broker's default, a day.
  public static let `default` = ClockBound(aheadMillis: 86_400_000)

  public init(aheadMillis: UInt64) {
    self.aheadMillis = aheadMillis
  }

  /// The latest time admitted at wall-clock time `now` (saturating: never a trap).
  public func latest(at now: UInt64) -> UInt64 {
    let (sum, overflow) = now.addingReportingOverflow(aheadMillis)
    return overflow ? .max : sum
  }

  /// Whether `time` may be merged into the device's clock at `now`.
  public func admits(_ time: HLCTimestamp, at now: UInt64) -> Bool {
    time.millis <= latest(at: now)
  }

  /// The clock to stamp from at `now`: `last` when it is within the bound, else nothing (`zero`: the next stamp
  /// is the wall clock's), as a clock beyond it would only stamp edits the broker rejects.
  public func sane(_ last: HLCTimestamp, at now: UInt64) -> HLCTimestamp {
    admits(last, at: now) ? last : .zero
  }

  /// The time a mutation rejected `clock_ahead` at `rejected` is sent again with, stamped by `clock` (made
  /// sane first) at `now`; nil when that time would not be earlier than the rejected one (the device's own wall
  /// clock is ahead of the broker's: sending again would be rejected again), and `clock` is then left as it was.
  public func restampTime(
    for rejected: HLCTimestamp, clock: inout HybridLogicalClock, at now: UInt64
  ) -> HLCTimestamp? {
    var fresh = HybridLogicalClock(last: sane(clock.last, at: now))
    let time = fresh.now(physicalMillis: now)
    guard time < rejected else { return nil }
    clock = fresh
    return time
  }
}
