/// Delivery bookkeeping when many devices subscribe to many pages (B3): for every (device, page) subscription the
/// newest time the device was told, for every page the newest time an acknowledged batch gave it, and the latency
/// of each notified page from the scheduled send of the batch it stands for.
///
/// Tokens are the broker's `lastUpdatedTime`s: each batch of the run changes one page, so its sequence names it.
/// As in `DeliveryLedger`, a notification that arrives before its batch's answer is parked until the answer
/// comes, and a coalesced notification stands for every batch up to its time. Times are nanoseconds on the
/// harness's monotonic clock.
public struct DensityLedger: Sendable {
  public let layout: DensityLayout
  private var lastSeen: [UInt64]
  private var finalToken: [UInt64]
  private var scheduled: [UInt64: UInt64] = [:]
  private var parked: [UInt64: [UInt64]] = [:]
  /// Batches acknowledged with a token.
  public private(set) var acknowledged = 0
  /// Page notifications received (one per page entry of a `changed` frame), every device together.
  public private(set) var notifications = 0
  /// Notifications not newer than one the device already had for that page.
  public private(set) var regressions = 0
  /// Notifications for a page the device did not subscribe to.
  public private(set) var strays = 0
  /// Latency of each notification from the scheduled send of its batch.
  public private(set) var latency = LatencyRecorder()

  public init(layout: DensityLayout) {
    self.layout = layout
    lastSeen = Array(repeating: 0, count: layout.subscriptions)
    finalToken = Array(repeating: 0, count: layout.pool)
  }

  /// The slot of `page` in `device`'s set, nil if the device does not subscribe to it.
  private func slot(device: Int, page: Int) -> Int? {
    guard device >= 0, device < layout.devices, page >= 0, page < layout.pool else { return nil }
    let start = (device * layout.pagesPerDevice) % layout.pool
    let offset = (page - start + layout.pool) % layout.pool
    return offset < layout.pagesPerDevice ? device * layout.pagesPerDevice + offset : nil
  }

  /// The batch scheduled at `scheduledAt` was answered: it gave pool page `page` the time `token`.
  public mutating func acknowledged(token: UInt64, page: Int, scheduledAt: UInt64) {
    precondition(token > 0, "token 0 means nothing seen")
    acknowledged += 1
    scheduled[token] = scheduledAt
    if page >= 0, page < layout.pool { finalToken[page] = max(finalToken[page], token) }
    if let waiting = parked.removeValue(forKey: token) {
      for receivedAt in waiting { latency.record(nanoseconds: receivedAt - min(receivedAt, scheduledAt)) }
    }
  }

  /// Device `device` was told at `receivedAt` that pool page `page` has time `token`.
  public mutating func received(device: Int, page: Int, token: UInt64, at receivedAt: UInt64) {
    guard token > 0 else { return }
    guard let slot = slot(device: device, page: page) else {
      strays += 1
      return
    }
    notifications += 1
    if token <= lastSeen[slot] {
      regressions += 1
    } else {
      lastSeen[slot] = token
    }
    if let scheduledAt = scheduled[token] {
      latency.record(nanoseconds: receivedAt - min(receivedAt, scheduledAt))
    } else {
      parked[token, default: []].append(receivedAt)
    }
  }

  /// Whether `device` knows the final time of every one of its pages that the run changed.
  public func isComplete(device: Int) -> Bool {
    let base = device * layout.pagesPerDevice
    for (offset, page) in layout.pages(of: device).enumerated() where finalToken[page] > 0 {
      if lastSeen[base + offset] != finalToken[page] { return false }
    }
    return true
  }

  /// Devices that know the final time of every changed page they subscribe to. O(subscriptions).
  public var completeDevices: Int { (0..<layout.devices).reduce(0) { $0 + (isComplete(device: $1) ? 1 : 0) } }

  /// Subscriptions whose page changed but whose device does not know the page's final time. O(subscriptions).
  public var staleSubscriptions: Int {
    var stale = 0
    for device in 0..<layout.devices {
      let base = device * layout.pagesPerDevice
      for (offset, page) in layout.pages(of: device).enumerated()
      where finalToken[page] > 0 && lastSeen[base + offset] != finalToken[page] {
        stale += 1
      }
    }
    return stale
  }

  /// Notifications whose token no acknowledged batch carried (yet).
  public var unmatchedNotifications: Int { parked.values.reduce(0) { $0 + $1.count } }
}

/// What a catch-up answered against what it should have: the pages changed while the device was away, at their
/// new times (B4, C1).
public struct CatchUpCheck: Sendable, Equatable {
  /// Changed pages the answer did not name: a device that would miss them.
  public var missing: Int
  /// Pages the answer named that did not change: fetches the device would make for nothing.
  public var needless: Int
  /// Pages named with another time than the change gave.
  public var wrongTime: Int

  public init(missing: Int, needless: Int, wrongTime: Int) {
    self.missing = missing
    self.needless = needless
    self.wrongTime = wrongTime
  }

  public init(expected: [String: UInt64], reported: [String: UInt64]) {
    missing = expected.keys.filter { reported[$0] == nil }.count
    needless = reported.keys.filter { expected[$0] == nil }.count
    wrongTime = reported.filter { page, time in expected[page].map { $0 != time } ?? false }.count
  }

  public var isExact: Bool { missing == 0 && needless == 0 && wrongTime == 0 }
}
