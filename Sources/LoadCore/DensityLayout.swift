/// Which pages each simulated device subscribes to in the density scenarios (B3, B4, B7), and the arithmetic of
/// their figures. No I/O, no clock: plain numbers in, plain numbers out.
///
/// Devices draw their pages from a pool of `pool` pages: device `d` subscribes `pagesPerDevice` consecutive pages
/// starting at `(d × pagesPerDevice) mod pool`, wrapping around. With `pool == pagesPerDevice` (the default) every
/// device subscribes the same pages (1,000 devices × 1,000 pages: every page has 1,000 subscribers); with
/// `pool == devices × pagesPerDevice` every device has pages of its own; in between, each page has
/// `devices × pagesPerDevice / pool` subscribers when that divides evenly.
public struct DensityLayout: Sendable, Equatable {
  public let devices: Int
  public let pagesPerDevice: Int
  public let pool: Int

  /// Nil unless every size is positive and a device's pages fit in the pool (no page twice in one set).
  public init?(devices: Int, pagesPerDevice: Int, pool: Int) {
    guard devices > 0, pagesPerDevice > 0, pool >= pagesPerDevice else { return nil }
    self.devices = devices
    self.pagesPerDevice = pagesPerDevice
    self.pool = pool
  }

  /// Every subscription of every device.
  public var subscriptions: Int { devices * pagesPerDevice }

  /// The pool indices of device `device`'s pages, in subscription order.
  public func pages(of device: Int) -> [Int] {
    let start = (device * pagesPerDevice) % pool
    return (0..<pagesPerDevice).map { (start + $0) % pool }
  }

  /// How many devices subscribe to each pool page (index: pool page).
  public func subscribersPerPage() -> [Int] {
    var counts = Array(repeating: 0, count: pool)
    for device in 0..<devices {
      for page in pages(of: device) { counts[page] += 1 }
    }
    return counts
  }

  /// Subscriptions per pool page on average: how many notifications one page change sends.
  public var meanSubscribersPerPage: Double { Double(subscriptions) / Double(pool) }

  /// Page changes per second that give `updatesPerSecond` notifications per second, when the changes are spread
  /// evenly over the pool (each batch changes one page: batch k changes page k mod pool).
  public func pageChangesPerSecond(forUpdates updatesPerSecond: Double) -> Double {
    updatesPerSecond / meanSubscribersPerPage
  }
}

/// The figures of a bulk subscribe and of the memory it took.
public enum DensityFigures {
  /// Subscriptions per second: `subscriptions` answered `nanoseconds` after the first subscribe frame was sent.
  /// Zero when no time passed (nothing to measure).
  public static func subscriptionsPerSecond(subscriptions: Int, nanoseconds: UInt64) -> Double {
    guard nanoseconds > 0 else { return 0 }
    return Double(subscriptions) / (Double(nanoseconds) / 1e9)
  }

  /// Broker memory per subscription: (RSS after − RSS before) / subscriptions. Negative when the RSS fell (the
  /// allocator returned memory): the caller reports it as measured, it is not clamped to 0.
  public static func bytesPerSubscription(rssBefore: Int, rssAfter: Int, subscriptions: Int) -> Double {
    guard subscriptions > 0 else { return 0 }
    return Double(rssAfter - rssBefore) / Double(subscriptions)
  }

  /// How far a figure is from its target, as a factor ≥ 1 when missed (measured / target for a ceiling,
  /// target / measured for a floor) and ≤ 1 when met. Zero when the measure is 0 for a floor.
  public static func factor(measured: Double, target: Double, higherIsBetter: Bool) -> Double {
    if higherIsBetter { return measured > 0 ? target / measured : 0 }
    return target > 0 ? measured / target : 0
  }
}
