/// A page's channel as the broker's index knows it: a dense number standing for the page id.
///
/// Page ids are strings `[A-Za-z0-9_-]{1,64}`; `ChannelIndex` interns them to dense `UInt32` keys so a
/// subscription costs a few bytes. A key is valid only while its channel lives in the index that made it: when a
/// channel loses its last subscriber its key is released and may later stand for another page.
public struct PageKey: Hashable, Sendable {
  public let rawValue: UInt32

  init(_ rawValue: UInt32) { self.rawValue = rawValue }
}

/// One subscriber of the broker (a device connection), numbered by the broker.
///
/// `UInt32.max` is reserved (it marks free slots in the index's tables).
public struct SubscriberID: Hashable, Sendable {
  public let rawValue: UInt32

  public init(_ rawValue: UInt32) { self.rawValue = rawValue }
}

/// A set of page keys, laid out as the index's own sets (a few bytes a key, a seeded hash): for a request that
/// must notice a page it names twice.
public struct PageKeySet {
  private var keys = KeySet()
  private let seed = HashSeed.process

  public init() {}

  public var count: Int { keys.count }

  /// Adds `key`; returns false if it was already there.
  public mutating func insert(_ key: PageKey) -> Bool { keys.insert(key.rawValue, seed: seed) }

  public func contains(_ key: PageKey) -> Bool { keys.contains(key.rawValue, seed: seed) }
}
