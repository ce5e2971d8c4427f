import Histogram

/// A latency distribution: an HdrHistogram of microseconds, 3 significant digits, up to 10 minutes.
///
/// Values past the top are clamped to it and counted in `clamped` rather than dropped: a lost sample would flatter
/// the tail.
public struct LatencyRecorder: Sendable {
  private var histogram = Histogram<UInt64>(
    lowestDiscernibleValue: 1, highestTrackableValue: LatencyRecorder.highestMicroseconds,
    numberOfSignificantValueDigits: .three)
  /// Samples larger than the histogram's range (recorded as its top value).
  public private(set) var clamped = 0

  static let highestMicroseconds: UInt64 = 600_000_000

  public init() {}

  /// Records one sample of `nanoseconds` (rounded up to whole microseconds, at least 1).
  public mutating func record(nanoseconds: UInt64) {
    var micros = max(1, (nanoseconds + 999) / 1000)
    if micros > LatencyRecorder.highestMicroseconds {
      micros = LatencyRecorder.highestMicroseconds
      clamped += 1
    }
    _ = histogram.record(micros)
  }

  /// Adds every sample of `other`.
  public mutating func merge(_ other: LatencyRecorder) {
    histogram.add(other.histogram)
    clamped += other.clamped
  }

  public var count: UInt64 { histogram.totalCount }

  /// p50, p99, p99.9 and max, in milliseconds.
  public var summary: LatencySummary {
    guard histogram.totalCount > 0 else { return LatencySummary(count: 0, p50: 0, p99: 0, p999: 0, max: 0) }
    func ms(_ micros: UInt64) -> Double { Double(micros) / 1000 }
    return LatencySummary(
      count: histogram.totalCount, p50: ms(histogram.valueAtPercentile(50)),
      p99: ms(histogram.valueAtPercentile(99)), p999: ms(histogram.valueAtPercentile(99.9)),
      max: ms(histogram.max))
  }
}

/// The percentiles a report prints, in milliseconds.
public struct LatencySummary: Sendable, Equatable {
  public var count: UInt64
  public var p50: Double
  public var p99: Double
  public var p999: Double
  public var max: Double

  public init(count: UInt64, p50: Double, p99: Double, p999: Double, max: Double) {
    self.count = count
    self.p50 = p50
    self.p99 = p99
    self.p999 = p999
    self.max = max
  }

  /// The summary as report fields (`p50_ms`, ...).
  public var reportValue: ReportValue {
    .object([
      ("count", .int(Int(count))), ("p50_ms", .number(p50)), ("p99_ms", .number(p99)),
      ("p999_ms", .number(p999)), ("max_ms", .number(max)),
    ])
  }
}
