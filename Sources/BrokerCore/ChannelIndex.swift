/// Which subscribers listen on which page channels, kept both ways in a few bytes a subscription.
///
/// Estimated cost: 16.6 bytes a subscription for 1,000 devices on the same 1,000 pages (design benchmark B3;
/// Redis spends ~194), about 110 when each of a million pages has one subscriber and so brings its own channel and
/// 36-byte id (see `ChannelIndexMemoryTests`).
///
/// Owned by the broker's loop thread. It is a value: a copy is cheap until either side changes, which then copies
/// the storage (the broker keeps one and mutates it in place).
///
/// Layout, all in a few flat arrays so a million subscriptions are a few dozen allocations, not a million:
/// - `channelSubscribers[key]`: the subscribers of a channel, a `KeySet` (the one subscriber inline, or a hash
///   table of 4-byte ids);
/// - `subscriptionSets[subscriber]`: the page keys a subscriber listens to, a `KeySet` too;
/// - page ids are interned (`ChannelIndex+Interning.swift`): their bytes back to back in one arena, found through
///   an open-addressing table of keys.
///
/// Lifetime of a key: interned when a page gets its first subscriber, released when it loses its last one. A
/// released key goes on a free list and is reused for the next new page; free keys at the end are trimmed and the
/// arrays shrink once a quarter full, so churn through any number of distinct pages does not grow memory. A key
/// therefore must not outlive its channel: the broker drops a page's pending notifications when it unsubscribes
/// from it (`FanOut.unsubscribe` does both), and a subscriber's queue when it goes.
public struct ChannelIndex: Sendable {
  /// Where a channel's page id is, or for a released key, where the key is on the free list.
  struct NameRef: Sendable {
    /// Live: offset of the id in `names`. Free: the key's position in `freeKeys`.
    var offset: UInt32
    /// Hash of the id (seeded SipHash, truncated), so resizing the key table never rehashes strings.
    var hash: UInt32
    /// Bytes of the id, 1...64; 0 marks a free key.
    var length: UInt8
    /// The page's workspace as a number of `workspaceIDs`, once the broker has learned it; `unknownWorkspace`
    /// until then (`ChannelIndex+Pages.swift`).
    var workspace: UInt16 = ChannelIndex.unknownWorkspace
    /// The page's newest `lastUpdatedTime` the broker has learned with its workspace; 0 while that is unknown.
    var lastUpdated: UInt64 = 0
  }

  static let unknownWorkspace = UInt16.max

  var channelSubscribers: ContiguousArray<KeySet> = []
  var nameRefs: ContiguousArray<NameRef> = []
  var freeKeys: ContiguousArray<UInt32> = []
  /// The bytes of live page ids, back to back, with holes left by released ones (`garbageNameBytes`).
  var names: ContiguousArray<UInt8> = []
  var garbageNameBytes = 0
  /// Open addressing, linear probing: the keys of live channels, homed by their id's hash; `KeySet.free` if empty.
  var keySlots: ContiguousArray<UInt32> = []
  var subscriptionSets: [SubscriberID: KeySet] = [:]
  /// Workspaces named by channels, numbered in the order first seen (never forgotten: there are few).
  var workspaceIDs: ContiguousArray<String> = []
  var workspaceNumbers: [String: UInt16] = [:]
  /// Heap bytes of every `KeySet` table, kept up to date as they grow and shrink.
  var setHeapBytes = 0
  let seed = HashSeed.process

  /// Keys released so far. While it stays the same, every key that was live is live still and stands for the
  /// same page: a caller holding keys across loop turns checks it before using them.
  public internal(set) var keyReleases = 0

  /// Channels (page ids) with a key.
  public internal(set) var channelCount = 0
  /// Subscriptions (subscriber, page) in the index.
  public private(set) var totalSubscriptions = 0

  public init() {}

  // MARK: Subscribing

  /// Adds subscriptions to pages already interned; returns how many were new.
  ///
  /// Every key must be live (from `key(for:)` or `existingKey(for:)` since its channel last had subscribers).
  public mutating func subscribe(_ subscriber: SubscriberID, to pages: some Sequence<PageKey>) -> Int {
    var set = takeSubscriptions(of: subscriber)
    let heapBefore = set.heapBytes
    var added = 0
    for page in pages {
      precondition(isLive(page), "subscribe to a released page key")
      if addSubscription(subscriber, page.rawValue, to: &set) { added += 1 }
    }
    putSubscriptions(set, of: subscriber, heapBefore: heapBefore)
    return added
  }

  /// Adds subscriptions by page id, interning ids not seen yet; returns how many were new.
  ///
  /// This is how the broker subscribes: a page gets its key together with its first subscriber, so no key is
  /// ever left interned without one. Every id must be valid (`isValidPageID(_:)`).
  public mutating func subscribe(_ subscriber: SubscriberID, toPageIDs pageIDs: some Sequence<String>) -> Int
  {
    var set = takeSubscriptions(of: subscriber)
    let heapBefore = set.heapBytes
    var added = 0
    for pageID in pageIDs {
      let page = key(for: pageID)
      if addSubscription(subscriber, page.rawValue, to: &set) { added += 1 }
    }
    putSubscriptions(set, of: subscriber, heapBefore: heapBefore)
    return added
  }

  /// Removes subscriptions; returns how many there were. A page that loses its last subscriber is released.
  public mutating func unsubscribe(_ subscriber: SubscriberID, from pages: some Sequence<PageKey>) -> Int {
    var set = takeSubscriptions(of: subscriber)
    let heapBefore = set.heapBytes
    var removed = 0
    for page in pages {
      guard set.remove(page.rawValue, seed: seed) else { continue }
      removeFromChannel(subscriber, page.rawValue)
      removed += 1
    }
    putSubscriptions(set, of: subscriber, heapBefore: heapBefore)
    return removed
  }

  /// Removes every subscription of a subscriber (it disconnected); returns how many.
  public mutating func removeSubscriber(_ subscriber: SubscriberID) -> Int {
    let set = takeSubscriptions(of: subscriber)
    let heapBefore = set.heapBytes
    set.forEachKey { removeFromChannel(subscriber, $0) }
    putSubscriptions(KeySet(), of: subscriber, heapBefore: heapBefore)
    return set.count
  }

  // MARK: Queries

  /// The subscribers of a page, in no particular order; empty for a key that is not live. No copy is made.
  public func subscribers(of page: PageKey) -> Subscribers {
    Subscribers(keys: isLive(page) ? channelSubscribers[Int(page.rawValue)] : KeySet())
  }

  /// The pages a subscriber listens to, in no particular order. No copy is made.
  public func subscriptions(of subscriber: SubscriberID) -> Subscriptions {
    Subscriptions(keys: subscriptionSets[subscriber] ?? KeySet())
  }

  public func subscriptionCount(of subscriber: SubscriberID) -> Int {
    subscriptionSets[subscriber]?.count ?? 0
  }

  public func isSubscribed(_ subscriber: SubscriberID, to page: PageKey) -> Bool {
    subscriptionSets[subscriber]?.contains(page.rawValue, seed: seed) ?? false
  }

  /// Subscribers with at least one subscription.
  public var subscriberCount: Int { subscriptionSets.count }

  /// Bytes this index holds, estimated from the capacities of its arrays and tables (so it is deterministic):
  /// for the metrics and the memory-per-subscription figure. Allocator overhead is not counted.
  public var estimatedMemoryBytes: Int {
    arrayBytes(channelSubscribers) + arrayBytes(nameRefs) + arrayBytes(freeKeys) + arrayBytes(names)
      + arrayBytes(keySlots) + dictionaryBytes + setHeapBytes
  }

  // MARK: Internals

  func isLive(_ page: PageKey) -> Bool {
    Int(page.rawValue) < nameRefs.count && nameRefs[Int(page.rawValue)].length > 0
  }

  /// Takes a subscriber's set out of the dictionary, so it is mutated in place without a copy.
  private mutating func takeSubscriptions(of subscriber: SubscriberID) -> KeySet {
    precondition(subscriber.rawValue != KeySet.free, "SubscriberID(UInt32.max) is reserved")
    return subscriptionSets.removeValue(forKey: subscriber) ?? KeySet()
  }

  private mutating func putSubscriptions(_ set: KeySet, of subscriber: SubscriberID, heapBefore: Int) {
    setHeapBytes += set.heapBytes - heapBefore
    if !set.isEmpty {
      subscriptionSets[subscriber] = set
    } else if subscriptionSets.isEmpty {
      subscriptionSets = [:]
    } else if subscriptionSets.capacity > 48 && subscriptionSets.count * 8 < subscriptionSets.capacity {
      // Dictionaries never shrink by themselves; after a wave of disconnects, give the buckets back.
      var smaller = [SubscriberID: KeySet](minimumCapacity: subscriptionSets.count * 2)
      for (id, set) in subscriptionSets { smaller[id] = set }
      subscriptionSets = smaller
    }
  }

  private mutating func addSubscription(_ subscriber: SubscriberID, _ page: UInt32, to set: inout KeySet)
    -> Bool
  {
    guard set.insert(page, seed: seed) else { return false }
    let heapBefore = channelSubscribers[Int(page)].heapBytes
    _ = channelSubscribers[Int(page)].insert(subscriber.rawValue, seed: seed)
    setHeapBytes += channelSubscribers[Int(page)].heapBytes - heapBefore
    totalSubscriptions += 1
    return true
  }

  private mutating func removeFromChannel(_ subscriber: SubscriberID, _ page: UInt32) {
    let heapBefore = channelSubscribers[Int(page)].heapBytes
    let removed = channelSubscribers[Int(page)].remove(subscriber.rawValue, seed: seed)
    assert(removed, "the two sides of the index disagree")
    setHeapBytes += channelSubscribers[Int(page)].heapBytes - heapBefore
    totalSubscriptions -= 1
    if channelSubscribers[Int(page)].isEmpty { release(page) }
  }

  /// Swift's native dictionary: a header, then per bucket a key, a value and a bit, at most 3/4 of buckets used.
  private var dictionaryBytes: Int {
    let capacity = subscriptionSets.capacity
    guard capacity > 0 else { return 0 }
    var buckets = 1
    while buckets * 3 < capacity * 4 { buckets *= 2 }
    return 64 + buckets * (MemoryLayout<SubscriberID>.stride + MemoryLayout<KeySet>.stride) + buckets / 8
  }
}
