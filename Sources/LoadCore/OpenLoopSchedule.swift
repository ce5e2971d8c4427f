/// When each batch of an open-loop writer is due, independent of when the previous one was answered.
///
/// Batch `k` is due at `start + k / rate`. A writer asks `take(now:)` on every tick and sends what it returns;
/// latency is then measured from `scheduledTime(of:)`, never from the moment the batch actually left. A writer
/// that falls behind (a slow tick, a busy loop) sends late, and that lateness shows in every latency it
/// records, instead of silently lowering the offered rate (coordinated omission).
///
/// Times are nanoseconds on any monotonic clock; the type reads no clock itself.
public struct OpenLoopSchedule: Sendable, Equatable {
  /// Batches per second.
  public let rate: Double
  /// When batch 0 is due.
  public let start: UInt64
  /// How many batches the run sends in all.
  public let total: Int
  /// Batches handed out so far (`0..<issued`).
  public private(set) var issued = 0

  /// A schedule of `rate` batches per second for `duration` nanoseconds from `start`.
  public init(rate: Double, start: UInt64, duration: UInt64) {
    precondition(rate > 0, "an open-loop schedule needs a positive rate")
    self.rate = rate
    self.start = start
    total = Int((Double(duration) / 1e9 * rate).rounded(.down))
  }

  /// When batch `index` should be sent.
  public func scheduledTime(of index: Int) -> UInt64 {
    start + UInt64((Double(index) * 1e9 / rate).rounded())
  }

  /// Whether every batch has been handed out.
  public var isFinished: Bool { issued >= total }

  /// The batches due at `now` that were not handed out yet, and marks them handed out.
  public mutating func take(now: UInt64) -> Range<Int> {
    guard now >= start else { return issued..<issued }
    let elapsed = Double(now - start) / 1e9
    // Batch k is due once k / rate <= elapsed: floor(elapsed * rate) + 1 batches are due.
    let due = min(total, Int((elapsed * rate).rounded(.down)) + 1)
    guard due > issued else { return issued..<issued }
    let range = issued..<due
    issued = due
    return range
  }

  /// How long from `now` until the next batch is due (0 if one is due already, nil when finished).
  public func delayUntilNext(now: UInt64) -> UInt64? {
    guard !isFinished else { return nil }
    let next = scheduledTime(of: issued)
    return next > now ? next - now : 0
  }
}
