/// The loop's cumulative counters that the status page turns into rates.
public struct StatusCounters: Sendable, Equatable {
  public var batchesApplied = 0
  public var notificationsSent = 0
  public var notificationsCoalesced = 0
  public var commits = CommitTally()

  public init() {}
}

/// What happened over the last few seconds: the counters' growth per second, and the commits in that time.
public struct StatusRates: Sendable, Equatable {
  /// The time the rates cover, in seconds (at most the window's span).
  public var seconds: Double
  public var batchesPerSecond: Double
  public var notificationsPerSecond: Double
  public var coalescedPerSecond: Double
  /// The commits counted in that time.
  public var commits: CommitTally
}

/// A sliding window of samples of the loop's cumulative counters, to read rates from: the rate is the growth
/// from the oldest sample still inside the window to the reading, divided by the time between them.
///
/// It has no clock and never waits: the caller passes the time of each sample and of each reading, in
/// milliseconds of a monotonic clock (the broker: the loop's `now`, a sample each second from a loop timer;
/// tests: numbers they choose). Memory is bounded by `capacity` samples whatever the caller does.
///
/// ```
///   samples:   s0 ─ s1 ─ s2 ─ … ─ s10        (one a second, older than `span` dropped)
///   reading at now: baseline = the oldest sample no older than now − span;
///                   rate = (current − baseline) / (now − baseline.time)
/// ```
///
/// Threading: a value; the broker keeps its own on the loop thread.
public struct CounterWindow: Sendable {
  public struct Sample: Sendable, Equatable {
    public var time: UInt64
    public var counters: StatusCounters
  }

  /// How far back a reading looks, in milliseconds.
  public let span: UInt64
  /// The most samples kept: the oldest goes first when a new one would pass it.
  public let capacity: Int
  /// Oldest first.
  public private(set) var samples: [Sample] = []

  public init(span: UInt64, capacity: Int) {
    precondition(span > 0 && capacity > 1, "a window needs a span and room for two samples")
    self.span = span
    self.capacity = capacity
    samples.reserveCapacity(capacity)
  }

  /// Adds the counters as they were at `time`. A time before the newest sample's is ignored (a monotonic
  /// clock does not go back; nothing would read it).
  public mutating func record(_ counters: StatusCounters, at time: UInt64) {
    if let newest = samples.last, time < newest.time { return }
    // Samples older than `span` can be no reading's baseline from now on.
    let expired = samples.prefix { $0.time + span < time }.count
    samples.removeFirst(expired)
    if samples.count == capacity { samples.removeFirst() }
    samples.append(Sample(time: time, counters: counters))
  }

  /// The rates from the oldest sample inside the window to `current`, read at `now`; nil when no sample is
  /// inside the window and older than `now` (just started, or the sampling stopped).
  public func rates(_ current: StatusCounters, at now: UInt64) -> StatusRates? {
    guard let baseline = samples.first(where: { $0.time + span >= now && $0.time < now }) else {
      return nil
    }
    let seconds = Double(now - baseline.time) / 1000
    let before = baseline.counters
    // A counter never goes down; if one did (a bug), its rate is 0, not negative.
    func perSecond(_ now: Int, _ then: Int) -> Double { Double(max(0, now - then)) / seconds }
    return StatusRates(
      seconds: seconds,
      batchesPerSecond: perSecond(current.batchesApplied, before.batchesApplied),
      notificationsPerSecond: perSecond(current.notificationsSent, before.notificationsSent),
      coalescedPerSecond: perSecond(current.notificationsCoalesced, before.notificationsCoalesced),
      commits: current.commits.since(before.commits))
  }
}
