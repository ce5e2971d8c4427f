// Subscribing and unsubscribing: what a device stream's `subscribe` and `unsubscribe` frames do, and how the
// broker withdraws subscriptions a narrowed grant no longer reaches.

extension FanOut {
  /// What a subscribe did.
  public struct Subscription: Equatable, Sendable {
    /// Subscriptions it added.
    public var added: Int
    /// The subscriber's subscriptions after it.
    public var total: Int
    /// The ids it refused, in the order named: a page of a workspace the subscriber may not see, or one past
    /// the limit.
    public var denied: [String]
  }

  /// A page of a subscribe frame as the store knows it: its workspace and newest time, or none if the page does
  /// not exist (yet).
  public struct StorePage: Sendable {
    public var id: String
    public var workspace: String?
    public var lastUpdated: UInt64

    public init(id: String, workspace: String?, lastUpdated: UInt64) {
      self.id = id
      self.workspace = workspace
      self.lastUpdated = lastUpdated
    }
  }

  /// Subscribes to pages whose workspace the index knows (keys read straight from a frame while it knew every
  /// one, `ChannelIndex.facts(of:)`), but for those of workspaces the subscriber may not see and those that would
  /// take it past `limit` subscriptions. Every key must be live.
  public mutating func subscribe(_ subscriber: SubscriberID, knownPages keys: [PageKey], limit: Int)
    -> Subscription
  {
    subscribe(subscriber, .known(keys), limit: limit)
  }

  /// Subscribes to pages the store was asked about, but for those of workspaces the subscriber may not see and
  /// those past `limit`. A page that does not exist yet is subscribed, and notified once it exists in a workspace
  /// the subscriber may see. What the store said of each subscribed page is recorded in the index.
  public mutating func subscribe(_ subscriber: SubscriberID, storePages pages: [StorePage], limit: Int)
    -> Subscription
  {
    subscribe(subscriber, .read(pages), limit: limit)
  }

  /// Ends a subscriber's subscriptions to the pages named and drops their pending notifications; returns the ids
  /// of the subscriptions it ended, each once, in the order named (ids it did not follow are skipped).
  @discardableResult
  public mutating func unsubscribe(_ subscriber: SubscriberID, fromPageIDs pageIDs: some Sequence<String>)
    -> [String]
  {
    let slot = liveSlot(subscriber)
    var keys: [PageKey] = []
    var ended: [String] = []
    var seen = PageKeySet()
    for id in pageIDs {
      guard let key = index.existingKey(for: id), index.isSubscribed(subscriber, to: key), seen.insert(key)
      else { continue }
      subscribers[slot].queue.remove(key)
      keys.append(key)
      ended.append(id)
    }
    // Only now, all at once: a key is released with its channel's last subscription.
    _ = index.unsubscribe(subscriber, from: keys)
    return ended
  }

  /// A subscriber's subscriptions.
  public func subscriptionCount(of subscriber: SubscriberID) -> Int {
    index.subscriptionCount(of: subscriber)
  }

  /// The ids of the pages a subscriber follows, in no particular order.
  public func subscribedPageIDs(of subscriber: SubscriberID) -> [String] {
    index.subscriptions(of: subscriber).map { index.pageID(for: $0) }
  }

  /// The keys of `pageIDs`, in order, if the index knows the workspace of every one; nil at the first it does not.
  public func knownKeys(of pageIDs: some Sequence<String>) -> [PageKey]? {
    var keys: [PageKey] = []
    keys.reserveCapacity(pageIDs.underestimatedCount)
    for id in pageIDs {
      guard let key = index.existingKey(for: id), index.workspace(of: key) != nil else { return nil }
      keys.append(key)
    }
    return keys
  }

  // MARK: Internals

  private enum Pages {
    case known([PageKey])
    case read([StorePage])
  }

  private mutating func subscribe(_ subscriber: SubscriberID, _ pages: Pages, limit: Int) -> Subscription {
    let slot = liveSlot(subscriber)
    var denied: [String] = []
    var keys: [PageKey] = []
    var learned: [(key: PageKey, workspace: String, lastUpdated: UInt64)] = []
    var count = index.subscriptionCount(of: subscriber)
    let pageCount: Int
    switch pages {
    case .known(let known): pageCount = known.count
    case .read(let read): pageCount = read.count
    }
    keys.reserveCapacity(pageCount)
    // If every page could be new and still stay within the limit, no page needs its own check against it.
    let cannotReachLimit = count + pageCount <= limit
    for position in 0..<pageCount {
      // Whether the page may be seen, its key if it has one, and its id and facts if the store was read.
      let isAllowed: Bool
      let existing: PageKey?
      var read: StorePage?
      switch pages {
      case .known(let known):
        existing = known[position]
        if let number = index.workspace(of: known[position]) {
          isAllowed = maySee(number, slot)
        } else {
          isAllowed = true
        }
      case .read(let pages):
        read = pages[position]
        isAllowed =
          pages[position].workspace.map { subscribers[slot].visibility.maySee(workspaceID: $0) } ?? true
        // A page allowed while the limit cannot be reached needs no key but the one `key(for:)` gives below:
        // looking it up first hashed each of a returning device's 10,000 ids twice.
        existing = isAllowed && cannotReachLimit ? nil : index.existingKey(for: pages[position].id)
      }
      let subscribed =
        cannotReachLimit ? false : existing.map { index.isSubscribed(subscriber, to: $0) } ?? false
      if !isAllowed || (!cannotReachLimit && count >= limit && !subscribed) {
        denied.append(existing.map { index.pageID(for: $0) } ?? read!.id)
      } else {
        let key = existing ?? index.key(for: read!.id)
        if !subscribed { count += 1 }
        keys.append(key)
        if let read, let workspace = read.workspace { learned.append((key, workspace, read.lastUpdated)) }
      }
    }
    let added = index.subscribe(subscriber, to: keys)
    for page in learned {
      index.learn(workspace: page.workspace, lastUpdated: page.lastUpdated, of: page.key)
    }
    return Subscription(added: added, total: index.subscriptionCount(of: subscriber), denied: denied)
  }
}
