/// Batch commit times counted as the `pagesync_broker_batch_commit_seconds` histogram counts them, in plain
/// numbers the loop can read back (swift-prometheus' histogram cannot be read, only rendered).
///
/// `BrokerMetrics.batchCommitted(after:)` records each commit here and in the histogram in the same call, with
/// the same bucket rule (a value goes in every bucket whose bound is at least the value), so the status page's
/// commit latency and `/metrics` count the same commits (`BrokerStatusPageTests` checks them against the
/// exposition).
///
/// A value, I/O-free: two tallies taken at different times subtract to what was committed in between.
public struct CommitTally: Sendable, Equatable {
  /// The buckets' upper bounds, ascending (`BrokerMetrics.commitBuckets`).
  public let bounds: [Duration]
  /// Commits at most each bound took, cumulative as in the exposition (`le`); above the largest bound only
  /// `count` has them.
  public private(set) var cumulative: [Int]
  /// Commits counted (`_count`).
  public private(set) var count = 0
  /// The time they took together (`_sum`).
  public private(set) var total = Duration.zero

  public init(bounds: [Duration] = BrokerMetrics.commitBuckets) {
    self.bounds = bounds
    cumulative = Array(repeating: 0, count: bounds.count)
  }

  /// One commit that took `duration`.
  public mutating func record(_ duration: Duration) {
    for index in bounds.indices where bounds[index] >= duration { cumulative[index] += 1 }
    count += 1
    total += duration
  }

  /// What was recorded after `earlier` (a tally of the same buckets, taken before this one).
  public func since(_ earlier: CommitTally) -> CommitTally {
    guard earlier.bounds == bounds else { return self }
    var delta = self
    delta.count = max(0, count - earlier.count)
    delta.total = max(.zero, total - earlier.total)
    for index in cumulative.indices {
      delta.cumulative[index] = max(0, cumulative[index] - earlier.cumulative[index])
    }
    return delta
  }

  /// The mean commit time, or nil without commits.
  public var mean: Duration? { count > 0 ? total / count : nil }

  /// Where the `quantile` (0 to 1) of the commits lies, at the histogram's resolution.
  public enum Bound: Sendable, Equatable {
    /// At most this bucket's bound (and above the one before).
    case atMost(Duration)
    /// Above the largest bound.
    case above(Duration)
  }

  /// The smallest bucket bound that at least `quantile` of the commits took no longer than (what
  /// `histogram_quantile` would interpolate inside); nil without commits.
  public func bound(quantile: Double) -> Bound? {
    guard count > 0, let largest = bounds.last else { return nil }
    let needed = Double(count) * min(max(quantile, 0), 1)
    for index in bounds.indices where Double(cumulative[index]) >= needed {
      return .atMost(bounds[index])
    }
    return .above(largest)
  }
}
