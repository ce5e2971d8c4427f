import SeededRandom

/// When each device of a soak (B7) disconnects and comes back: `percentPerMinute` of the devices per minute, spread
/// evenly over the run, devices chosen by a seeded generator (the same seed, the same schedule).
///
/// Event `i` of `count` is due at `(i + 0.5) × seconds / count` after the start. Devices are drawn without
/// replacement until every device had its turn, then again: with less than 100% churn over the run no device
/// churns twice.
public struct ChurnSchedule: Sendable, Equatable {
  public struct Event: Sendable, Equatable {
    /// Nanoseconds after the start of the run.
    public var at: UInt64
    public var device: Int

    public init(at: UInt64, device: Int) {
      self.at = at
      self.device = device
    }
  }

  public let events: [Event]

  public init(devices: Int, percentPerMinute: Double, seconds: Double, seed: UInt64) {
    let count = ChurnSchedule.count(devices: devices, percentPerMinute: percentPerMinute, seconds: seconds)
    var generator = SplitMix64(seed: seed)
    var order: [Int] = []
    var events: [Event] = []
    events.reserveCapacity(count)
    for index in 0..<count {
      if order.isEmpty {
        order = Array(0..<devices)
        order.shuffle(using: &generator)
      }
      let total = UInt64(seconds * 1e9)
      let at = UInt64(2 * index + 1) * total / UInt64(2 * count)
      events.append(Event(at: at, device: order.removeLast()))
    }
    self.events = events
  }

  /// Reconnections in a run: devices × percent/100 × minutes, rounded; 0 without devices or time.
  public static func count(devices: Int, percentPerMinute: Double, seconds: Double) -> Int {
    guard devices > 0, percentPerMinute > 0, seconds > 0 else { return 0 }
    return Int((Double(devices) * percentPerMinute / 100 * seconds / 60).rounded())
  }
}

/// Samples of one figure over time (broker RSS, open descriptors) and whether it stayed flat: the least-squares
/// slope, first, last, min and max.
public struct SampleSeries: Sendable, Equatable {
  /// (nanoseconds since the start, value).
  public private(set) var samples: [(at: UInt64, value: Double)] = []

  public init() {}

  public mutating func record(at: UInt64, value: Double) { samples.append((at, value)) }

  public var first: Double? { samples.first?.value }
  public var last: Double? { samples.last?.value }
  public var minimum: Double? { samples.map(\.value).min() }
  public var maximum: Double? { samples.map(\.value).max() }

  /// The least-squares slope in units per minute; 0 with fewer than 2 samples or no time between them.
  public var slopePerMinute: Double { SampleSeries.slope(samples[...]) * 60 }

  /// The slope over the later half of the samples only (after start-up effects: caches filling, first
  /// allocations), per minute.
  public var laterHalfSlopePerMinute: Double {
    SampleSeries.slope(samples[(samples.count / 2)...]) * 60
  }

  /// Least-squares slope of value over seconds.
  static func slope(_ points: ArraySlice<(at: UInt64, value: Double)>) -> Double {
    guard points.count >= 2 else { return 0 }
    let n = Double(points.count)
    let xs = points.map { Double($0.at) / 1e9 }
    let meanX = xs.reduce(0, +) / n
    let meanY = points.reduce(0) { $0 + $1.value } / n
    var covariance = 0.0
    var variance = 0.0
    for (x, point) in zip(xs, points) {
      covariance += (x - meanX) * (point.value - meanY)
      variance += (x - meanX) * (x - meanX)
    }
    return variance > 0 ? covariance / variance : 0
  }

  public static func == (lhs: SampleSeries, rhs: SampleSeries) -> Bool {
    lhs.samples.count == rhs.samples.count
      && zip(lhs.samples, rhs.samples).allSatisfy { $0.at == $1.at && $0.value == $1.value }
  }
}
