#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// How a plot's axis maps a value to a position: linear from 0, or logarithmic by decades. Built from the values
/// to show; ticks fall on round numbers.
///
/// Values a log scale cannot show (0, negative, not finite) are not placed (`position` is nil): a plot says how
/// many it left out rather than drawing them at a false place.
public struct PlotScale: Sendable, Equatable {
  public enum Kind: Sendable, Equatable {
    case linear
    case logarithmic
  }

  public let kind: Kind
  /// The domain shown, low to high (for a log scale, whole decades).
  public let low: Double
  public let high: Double

  /// A scale that shows every value of `values` it can. Linear: from 0 to a round number at or above the largest
  /// (`minimumHigh` at least). Log: the decades around the positive finite values, at least one; 1 to 10 when there
  /// are none.
  /// A single value sits inside its scale, not on its edge. `minimumLow`: where a log scale may start at the
  /// lowest (1 for an axis of 1/(1−p), which starts at the 0th percentile).
  public init(_ kind: Kind, covering values: [Double], minimumHigh: Double = 1, minimumLow: Double? = nil) {
    self.kind = kind
    switch kind {
    case .linear:
      let largest = values.filter(\.isFinite).max() ?? 0
      low = 0
      high = PlotScale.roundUp(max(largest, minimumHigh))
    case .logarithmic:
      let shown = values.filter { $0.isFinite && $0 > 0 }
      guard let smallest = shown.min(), let largest = shown.max() else {
        low = 1
        high = 10
        return
      }
      let single = smallest == largest
      var lowExponent = PlotScale.floorLog10(single ? smallest / 3 : smallest)
      if let minimumLow, minimumLow > 0 { lowExponent = max(lowExponent, PlotScale.floorLog10(minimumLow)) }
      var highExponent = PlotScale.ceilLog10(single ? largest * 3 : largest)
      if highExponent <= lowExponent { highExponent = lowExponent + 1 }
      low = PlotScale.power(lowExponent)
      high = PlotScale.power(highExponent)
    }
  }

  /// Where `value` falls from 0 (low) to 1 (high); nil for what this scale cannot show. Values outside the domain
  /// give fractions outside 0...1 (a scale built from the values never does).
  public func fraction(_ value: Double) -> Double? {
    guard value.isFinite else { return nil }
    switch kind {
    case .linear:
      return high > low ? (value - low) / (high - low) : 0
    case .logarithmic:
      guard value > 0 else { return nil }
      return (log10(value) - log10(low)) / (log10(high) - log10(low))
    }
  }

  /// Round values between low and high for ticks: 4 to 10 of them on a linear scale; on a log scale every decade,
  /// and 2 and 5 within each when there are at most two decades.
  public var ticks: [Double] {
    switch kind {
    case .linear:
      let step = PlotScale.roundUp(high / 5)
      var ticks: [Double] = []
      var value = low
      while value <= high * (1 + 1e-9) && ticks.count < 20 {
        ticks.append(value)
        value += step
      }
      return ticks
    case .logarithmic:
      let decades = Int((log10(high) - log10(low)).rounded())
      var ticks: [Double] = []
      var decade = low
      for _ in 0..<decades {
        ticks.append(decade)
        if decades <= 2 { ticks += [2 * decade, 5 * decade] }
        decade *= 10
      }
      return ticks + [high]
    }
  }

  /// The smallest of 1, 2, 5 × 10^k at or above `value` (positive).
  static func roundUp(_ value: Double) -> Double {
    guard value > 0, value.isFinite else { return 1 }
    let decade = power(floorLog10(value))
    for step in [1.0, 2, 5, 10] where step * decade >= value * (1 - 1e-12) { return step * decade }
    return 10 * decade
  }

  static func floorLog10(_ value: Double) -> Int { Int(log10(value * (1 + 1e-12)).rounded(.down)) }
  static func ceilLog10(_ value: Double) -> Int { Int(log10(value * (1 - 1e-12)).rounded(.up)) }

  static func power(_ exponent: Int) -> Double {
    var result = 1.0
    for _ in 0..<abs(exponent) { result *= 10 }
    return exponent < 0 ? 1 / result : result
  }

  /// A tick's label: `0.01`, `0.5`, `2`, `250`, `1k`, `20k`, `1.5M`, `10G`; past 10^12 as `1e15`.
  public static func label(_ value: Double) -> String {
    let magnitude = abs(value)
    if magnitude >= 1e12 {
      let exponent = floorLog10(magnitude)
      return ReportValue.format(value / power(exponent), places: 2) + "e" + String(exponent)
    }
    for (limit, suffix) in [(1e9, "G"), (1e6, "M"), (1e3, "k")] where magnitude >= limit {
      return ReportValue.format(value / limit, places: 2) + suffix
    }
    return ReportValue.format(value, places: magnitude < 0.01 && magnitude > 0 ? 6 : 3)
  }
}
