/// A rising-rate run (B2): which offered rate comes next, when to stop, and what the saturation throughput was.
///
/// Rates rise geometrically from `start` by `factor` up to `maximum`. After each step the run records what it
/// measured; stepping stops at the first step the target did not keep up with (see `StepResult.keptUp`) or when
/// the next rate would pass `maximum`. The saturation figures:
/// - `atLatencyLimit`: the highest step that kept up with p99 ≤ `p99LimitMs` (the target's form: updates/s delivered
///   at which p99 stays ≤ 25 ms);
/// - `lastKeptUp`: the highest step that kept up at all (the rate where the target stops keeping up is the next).
///
/// Pure: numbers in, decisions out, no clock.
public struct RateSteps: Sendable {
  /// What one step measured.
  public struct StepResult: Sendable, Equatable {
    /// Batches per second offered (the schedule's rate).
    public var rate: Double
    /// Batches scheduled and acknowledged; failed ones are the difference.
    public var scheduled: Int
    public var acked: Int
    /// Acknowledged batches per second, from the step's start to its last answer.
    public var ackedPerSecond: Double
    /// Updates delivered to subscribers per second (for B2, one per batch once its subscriber knows it).
    public var deliveredPerSecond: Double
    /// Delivery latency p99, ms, from the scheduled send.
    public var p99Ms: Double
    /// Every subscriber ended on its page's final time within the drain bound.
    public var settled: Bool

    public init(
      rate: Double, scheduled: Int, acked: Int, ackedPerSecond: Double, deliveredPerSecond: Double,
      p99Ms: Double, settled: Bool
    ) {
      self.rate = rate
      self.scheduled = scheduled
      self.acked = acked
      self.ackedPerSecond = ackedPerSecond
      self.deliveredPerSecond = deliveredPerSecond
      self.p99Ms = p99Ms
      self.settled = settled
    }

    /// Every batch answered at (nearly) the offered rate, and every subscriber settled: the target kept up. A
    /// target that answers 5% slower than offered is building a backlog.
    public var keptUp: Bool {
      settled && acked == scheduled && scheduled > 0 && ackedPerSecond >= 0.95 * rate
    }
  }

  /// Why stepping stopped.
  public enum Limit: String, Sendable {
    /// Still stepping.
    case none
    /// A step did not keep up: the saturation point is between the last two steps.
    case notKeptUp = "not-kept-up"
    /// The next rate would pass the maximum: the target kept up with every rate tried.
    case maximumRate = "maximum-rate"
  }

  public let start: Double
  public let factor: Double
  public let maximum: Double
  public let p99LimitMs: Double
  public private(set) var results: [StepResult] = []
  public private(set) var limit = Limit.none

  public init(start: Double, factor: Double, maximum: Double, p99LimitMs: Double = 25) {
    precondition(start > 0 && factor > 1 && maximum >= start, "rates must rise from a positive start")
    self.start = start
    self.factor = factor
    self.maximum = maximum
    self.p99LimitMs = p99LimitMs
  }

  /// The rate of the next step, nil once stepping has stopped.
  public var nextRate: Double? {
    guard limit == .none else { return nil }
    guard let last = results.last else { return start }
    let next = (last.rate * factor).rounded()
    return next <= maximum ? next : nil
  }

  /// Records a step's figures and decides whether to go on.
  public mutating func record(_ result: StepResult) {
    results.append(result)
    if !result.keptUp {
      limit = .notKeptUp
    } else if nextRate == nil {
      limit = .maximumRate
    }
  }

  /// The highest step that kept up with p99 within the limit.
  public var atLatencyLimit: StepResult? {
    results.filter { $0.keptUp && $0.p99Ms <= p99LimitMs }.max { $0.rate < $1.rate }
  }

  /// The highest step that kept up.
  public var lastKeptUp: StepResult? { results.filter(\.keptUp).max { $0.rate < $1.rate } }

  /// The first step that did not keep up (the rate where the target stopped keeping up), if any.
  public var firstNotKeptUp: StepResult? { results.first { !$0.keptUp } }
}

/// Whether an open-loop generator kept its schedule, and what to say when it did not.
public enum GeneratorVerdict {
  /// The generator's tick is 1 ms: lag p99 within 2 ms means it sent on time.
  public static let keptScheduleMs = 2.0
  /// A harness using this much of a core may itself be the bottleneck.
  public static let busyHarnessPercent = 85.0

  public static func keptSchedule(lagP99Ms: Double) -> Bool { lagP99Ms <= keptScheduleMs }

  /// One note for the steps of a multi-step run (B2, B5) instead of one per step: which steps fell behind their
  /// schedule and by how much at worst, and which found the harness busy.
  public static func notes(
    steps: [(name: String, lagP99Ms: Double, harnessCPUPercent: Double)], target: String
  )
    -> [String]
  {
    var notes: [String] = []
    let behind = steps.filter { !keptSchedule(lagP99Ms: $0.lagP99Ms) }
    if let worst = behind.map(\.lagP99Ms).max() {
      notes.append(
        "the generator fell behind its schedule in \(behind.count) of \(steps.count) steps "
          + "(\(behind.map(\.name).joined(separator: ", ")); lag p99 up to \(ReportValue.number(worst).json) ms): "
          + "latencies include that lag")
    }
    let busy = steps.filter { $0.harnessCPUPercent >= busyHarnessPercent }
    if !busy.isEmpty {
      notes.append(
        "the harness used \(Int(busyHarnessPercent))% or more of a core in \(busy.map(\.name).joined(separator: ", ")): "
          + "it may be the bottleneck there, not the \(target) server")
    }
    return notes
  }

  /// The notes a report carries about its own generator.
  public static func notes(lagP99Ms: Double, harnessCPUPercent: Double, closedLoop: Bool, target: String)
    -> [String]
  {
    var notes: [String] = []
    if closedLoop {
      notes.append(
        "closed loop: latency from the actual send, throughput is the broker's ceiling at this depth")
    } else if !keptSchedule(lagP99Ms: lagP99Ms) {
      notes.append(
        "the generator fell behind its schedule (lag p99 \(ReportValue.number(lagP99Ms).json) ms): "
          + "latencies include that lag, and the offered rate was lower than asked")
    }
    if harnessCPUPercent >= busyHarnessPercent {
      notes.append(
        "the harness used \(Int(harnessCPUPercent))% of a core: it may be the bottleneck, not the \(target) server"
      )
    }
    return notes
  }
}
