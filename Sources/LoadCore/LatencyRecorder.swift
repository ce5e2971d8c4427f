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

  /// The latency at the percentiles of `LatencyDistribution.percentiles(count:)`, in milliseconds: the curve of
  /// the HdrHistogram plots (percentile as 1/(1−p) on a log scale). Empty without samples.
  public var distribution: [LatencyDistribution.Point] {
    LatencyDistribution.percentiles(count: histogram.totalCount).map { percentile in
      LatencyDistribution.Point(
        percentile: percentile, ms: Double(histogram.valueAtPercentile(percentile)) / 1000)
    }
  }

  /// The summary's fields and `distribution`: `[[percentile, ms], ...]`.
  public var reportValue: ReportValue {
    guard case .object(let fields) = summary.reportValue else { return summary.reportValue }
    return .object(fields + [("distribution", LatencyDistribution.reportValue(distribution))])
  }
}

/// A latency distribution as the HdrHistogram plots draw it: the latency at percentiles spaced evenly on a log
/// scale of 1/(1−p) (2 is the median, 100 is p99, 1,000 is p99.9).
public enum LatencyDistribution {
  /// One point of the curve.
  public struct Point: Sendable, Equatable {
    /// 0 ≤ percentile < 100.
    public var percentile: Double
    public var ms: Double

    public init(percentile: Double, ms: Double) {
      self.percentile = percentile
      self.ms = ms
    }
  }

  /// Seven steps a decade of 1/(1−p): 1, 1.25, 2, 2.5, 4, 5, 8 × 10^k, so that every percentile is a short
  /// decimal (0, 20, 50, 60, 75, 80, 87.5, 90, 92, 95, 96, 97.5, 98, 98.75, 99, ...).
  static let stepsPerDecade = [1.0, 1.25, 2, 2.5, 4, 5, 8]

  /// The grid's percentiles that `count` samples resolve: up to 1/(1−p) ≤ `count` (past it the curve is the
  /// maximum, which the summary has); none for no samples, at most 10^12.
  public static func percentiles(count: UInt64) -> [Double] {
    var percentiles: [Double] = []
    var decade = 1.0
    while decade <= 1e12 {
      for step in stepsPerDecade {
        let inverse = step * decade
        guard inverse <= Double(count) else { return percentiles }
        percentiles.append(100 - 100 / inverse)
      }
      decade *= 10
    }
    return percentiles
  }

  /// `[[percentile, ms], ...]`, percentiles to 9 decimals.
  public static func reportValue(_ points: [Point]) -> ReportValue {
    .array(points.map { .array([.decimal($0.percentile, places: 9), .number($0.ms)]) })
  }

  /// The points of a report's `[[percentile, ms], ...]`, nil if it is not that.
  public static func points(_ value: ReportValue) -> [Point]? {
    guard let elements = value.elements else { return nil }
    var points: [Point] = []
    for element in elements {
      guard let pair = element.elements, pair.count == 2, let percentile = pair[0].numeric,
        let ms = pair[1].numeric
      else { return nil }
      points.append(Point(percentile: percentile, ms: ms))
    }
    return points
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
