import Prometheus
import SQLiteStore

/// `pagesync_broker_writer_phase_seconds`: each committed batch's `WriterTimings`, counted by phase on the loop
/// thread and written into the exposition at scrape time, in the text format swift-prometheus writes its own
/// histograms in (the same bucket bounds' spelling, labels before `le`).
///
/// Not a swift-prometheus `Histogram`: its `record` takes a lock and adds to every bucket at or above the value,
/// ~680 instructions a phase, 2,700 a batch (callgrind); here a phase is a short walk up from the lowest bound
/// over whole nanoseconds, where almost every value stops, into one bucket, made cumulative when rendered.
///
/// A value, I/O-free; the loop thread owns the one `BrokerMetrics` keeps.
public struct WriterPhaseTally: Sendable, Equatable {
  /// The phases, in `WriterTimings`' order, as the `phase` label spells them.
  public static let phases = ["queued", "applied", "committed", "handed_back"]
  /// The buckets' upper bounds, ascending (`BrokerMetrics.phaseBuckets`), in nanoseconds.
  private let bounds: [Int64]
  private let boundLabels: [String]
  /// Per phase: how many values fell in each bucket, not cumulative; the last one is above the largest bound.
  private var buckets: [[Int]]
  /// Per phase: the values' sum, in nanoseconds.
  private var sums: [Int64]
  /// Batches recorded (each phase has one value per batch).
  public private(set) var count = 0

  public init(bounds: [Duration] = BrokerMetrics.phaseBuckets) {
    // The bounds are whole microseconds: the quotient is exact.
    self.bounds = bounds.map { Int64(($0 / .nanoseconds(1)).rounded()) }
    boundLabels = bounds.map(\.bucketRepresentation)
    buckets = Array(repeating: Array(repeating: 0, count: bounds.count + 1), count: Self.phases.count)
    sums = Array(repeating: 0, count: Self.phases.count)
  }

  /// One committed batch.
  public mutating func record(_ timings: WriterTimings) {
    add(0, timings.queuedNanoseconds)
    add(1, timings.appliedNanoseconds)
    add(2, timings.committedNanoseconds)
    add(3, timings.handedBackNanoseconds)
    count += 1
  }

  private mutating func add(_ phase: Int, _ nanoseconds: Int64) {
    // A negative value (none is expected from a monotonic clock) counts as 0, and one over a day as a day, so
    // that no run of values can overflow a sum.
    let value = min(max(nanoseconds, 0), 86_400_000_000_000)
    var index = 0
    while index < bounds.count && bounds[index] < value { index += 1 }
    buckets[phase][index] += 1
    sums[phase] &+= value
  }

  /// Appends the family: its HELP and TYPE lines, then per phase its cumulative buckets, `+Inf`, sum and count.
  public func render(into buffer: inout [UInt8], name: String, help: String) {
    buffer.append(contentsOf: "# HELP \(name) \(help)\n# TYPE \(name) histogram\n".utf8)
    for (phase, label) in Self.phases.enumerated() {
      var cumulative = 0
      for (index, bound) in boundLabels.enumerated() {
        cumulative += buckets[phase][index]
        buffer.append(contentsOf: "\(name)_bucket{phase=\"\(label)\",le=\"\(bound)\"} \(cumulative)\n".utf8)
      }
      buffer.append(contentsOf: "\(name)_bucket{phase=\"\(label)\",le=\"+Inf\"} \(count)\n".utf8)
      let sum = Duration.nanoseconds(sums[phase]).bucketRepresentation
      buffer.append(contentsOf: "\(name)_sum{phase=\"\(label)\"} \(sum)\n".utf8)
      buffer.append(contentsOf: "\(name)_count{phase=\"\(label)\"} \(count)\n".utf8)
    }
  }
}
