/// How many idle connections a B6 run opens, and what limited the count.
///
/// Each connection costs the harness one descriptor (the broker one more, in its own process, which inherits the
/// harness's limit). `reserve` descriptors stay free for the harness's own files, the writer and the server's
/// pipes.
public struct ConnectionBudget: Sendable, Equatable {
  /// What decided the count.
  public enum Limit: String, Sendable {
    /// The count asked for (`--connections`) fits.
    case requested
    /// The descriptor limit (RLIMIT_NOFILE after raising the soft limit to the hard one).
    case fileDescriptors = "fd-limit"
  }

  public var connections: Int
  public var limitedBy: Limit

  /// `requested` nil means "as many as the descriptor limit allows".
  public static func plan(requested: Int?, descriptorLimit: Int, reserve: Int) -> ConnectionBudget {
    let available = max(0, descriptorLimit - reserve)
    if let requested, requested <= available {
      return ConnectionBudget(connections: requested, limitedBy: .requested)
    }
    return ConnectionBudget(connections: available, limitedBy: .fileDescriptors)
  }
}

/// Resident memory a server added per connection (or per subscription): (after − before) / count.
public struct MemoryPerItem: Sendable, Equatable {
  public var beforeBytes: Int
  public var afterBytes: Int
  public var count: Int

  public init(beforeBytes: Int, afterBytes: Int, count: Int) {
    self.beforeBytes = beforeBytes
    self.afterBytes = afterBytes
    self.count = count
  }

  /// Bytes per item; 0 with no items. Negative growth (memory returned) counts as 0.
  public var bytesPerItem: Double {
    guard count > 0 else { return 0 }
    return Double(max(0, afterBytes - beforeBytes)) / Double(count)
  }

  /// Whether the figure is within `targetBytes`.
  public func meets(targetBytes: Double) -> Bool { bytesPerItem <= targetBytes }
}

/// A server's RSS sampled through a run (B5): where it started, its highest, where it ended.
public struct MemorySeries: Sendable, Equatable {
  public private(set) var samples: [(at: UInt64, bytes: Int)] = []

  public init() {}

  public mutating func record(at time: UInt64, bytes: Int) { samples.append((time, bytes)) }

  public var first: Int { samples.first?.bytes ?? 0 }
  public var last: Int { samples.last?.bytes ?? 0 }
  public var peak: Int { samples.map(\.bytes).max() ?? 0 }
  /// Highest minus first: what the run added at its worst.
  public var growth: Int { max(0, peak - first) }

  /// Growth in the second half of the samples (peak of the second half minus the first half's peak): a bounded
  /// server levels off, so this stays near 0 however long the run; one that buffers without bound keeps growing.
  public var lateGrowth: Int {
    guard samples.count >= 4 else { return 0 }
    let half = samples.count / 2
    let early = samples[..<half].map(\.bytes).max() ?? 0
    let late = samples[half...].map(\.bytes).max() ?? 0
    return max(0, late - early)
  }

  public static func == (lhs: MemorySeries, rhs: MemorySeries) -> Bool {
    lhs.samples.elementsEqual(rhs.samples) { $0.at == $1.at && $0.bytes == $1.bytes }
  }
}

/// Values from a Prometheus text exposition (the broker's `GET /metrics`).
public enum PrometheusText {
  /// The value of the sample named exactly `name` without labels (`name 42`), nil if absent.
  public static func value(of name: String, in text: String) -> Double? {
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
      let fields = line.split(separator: " ", omittingEmptySubsequences: true)
      if fields.count >= 2, fields[0] == name { return Double(fields[1]) }
    }
    return nil
  }
}
