/// The broker's notification fan-out, without I/O: who follows which page (the `ChannelIndex`), which workspaces
/// each subscriber may see, what is pending for each (a `CoalescingQueue`), and who has something new to write
/// (the dirty list). Every path of the broker that changes subscriptions or notifications goes through it; the
/// broker only writes to each socket what `drain` hands out.
///
/// ```
///  addSubscriber ──▶ subscribe(_:knownPages:) / subscribe(_:storePages:) ──▶ unsubscribe ──▶ removeSubscriber
///                    setWorkspaces (grant changed)    removeAllSubscriptions (token revoked)
///
///  publish(page) ──▶ every subscriber of the page that may see its workspace:
///                      enqueue (coalesced per page), and onto the dirty list unless it is on it
///  takeDirty ──────▶ the broker drains each taken subscriber's queue (drain) while its socket has room; what
///                    does not fit waits for that socket's drain callback, not for the dirty list
/// ```
///
/// Rules it keeps (`violations()` checks each; the model tests call it after every step):
/// - A queue holds only pages its subscriber follows, of workspaces it may see. Unsubscribing drops a page's
///   pending entry; narrowing the workspaces drops the entries of the others, so a narrowed grant stops
///   notifications at once, pending ones included. Beyond tidiness: the index reuses the key of a channel that
///   lost its last subscriber, and a stale entry would name another page.
/// - The dirty list holds each live subscriber that was queued something since the list was last taken, once,
///   and nothing else: a removed subscriber leaves it at once (its id may be handed out again at once).
///
/// Cost of `publish` per subscriber of a changed page: one array read for its answer on the page's workspace
/// (cached by workspace number), one enqueue, one flag test. No dictionary lookup and no allocation, but the
/// first entry of an empty queue.
///
/// Subscriber ids are dense: `addSubscriber` hands out a freed id first, so a subscriber's state is an array
/// slot. A caller must not use an id after `removeSubscriber` (a precondition stops one that does).
///
/// Owned by the broker's loop thread. A value, like `ChannelIndex`: keep one and mutate it in place.
public struct FanOut: Sendable {
  /// One subscriber's slot.
  struct Subscriber: Sendable {
    var queue = CoalescingQueue()
    var visibility = WorkspaceVisibility(workspaces: [])
    /// Its position in `dirty`, or `FanOut.clean`.
    var dirtyPosition = FanOut.clean
    var isLive = false
  }

  static let clean = UInt32.max

  /// Who follows which page, and what the broker knows of each followed page.
  public internal(set) var index = ChannelIndex()
  var subscribers: ContiguousArray<Subscriber> = []
  var freeSubscribers: ContiguousArray<UInt32> = []
  var dirty: ContiguousArray<SubscriberID> = []

  /// Subscribers added and not removed.
  public private(set) var subscriberCount = 0
  /// Notifications folded into one already pending for the same page and subscriber.
  public private(set) var coalescedCount = 0

  public init() {}

  // MARK: Subscribers

  /// Adds a subscriber that may see the workspaces `workspaces` (ids); returns its id (a freed one first).
  public mutating func addSubscriber(workspaces: Set<String>) -> SubscriberID {
    let slot: UInt32
    if let free = freeSubscribers.popLast() {
      slot = free
    } else {
      // UInt32.max is reserved (the index's free marker).
      precondition(subscribers.count < Int(UInt32.max), "subscriber ids exhausted")
      slot = UInt32(subscribers.count)
      subscribers.append(Subscriber())
    }
    subscribers[Int(slot)] = Subscriber(visibility: WorkspaceVisibility(workspaces: workspaces), isLive: true)
    subscriberCount += 1
    return SubscriberID(slot)
  }

  /// Forgets a subscriber that went away: its subscriptions, its queue and its place on the dirty list. Its id
  /// may be handed out again by the next `addSubscriber`. Returns how many subscriptions it had.
  @discardableResult
  public mutating func removeSubscriber(_ subscriber: SubscriberID) -> Int {
    let slot = liveSlot(subscriber)
    let removed = index.removeSubscriber(subscriber)
    leaveDirtyList(slot)
    subscribers[slot] = Subscriber()
    freeSubscribers.append(subscriber.rawValue)
    subscriberCount -= 1
    return removed
  }

  /// Ends every subscription of a subscriber, drops what is pending for it and lets it see no workspace, but
  /// keeps it (a stream whose token was revoked, until its close completes: nothing reaches it any more).
  /// Returns how many subscriptions it had.
  @discardableResult
  public mutating func removeAllSubscriptions(of subscriber: SubscriberID) -> Int {
    let slot = liveSlot(subscriber)
    subscribers[slot].queue.removeAll()
    subscribers[slot].visibility = WorkspaceVisibility(workspaces: [])
    return index.removeSubscriber(subscriber)
  }

  /// Whether `subscriber` was added and not removed.
  public func isLive(_ subscriber: SubscriberID) -> Bool {
    Int(subscriber.rawValue) < subscribers.count && subscribers[Int(subscriber.rawValue)].isLive
  }

  /// Replaces the workspaces a subscriber may see (its grant changed), with effect at once: later publishes check
  /// the new set, and pending notifications of pages of the workspaces it may no longer see are dropped. Its
  /// subscriptions stay; the broker ends those the store says are out of reach (`unsubscribe`).
  public mutating func setWorkspaces(_ workspaces: Set<String>, of subscriber: SubscriberID) {
    let slot = liveSlot(subscriber)
    var visibility = WorkspaceVisibility(workspaces: workspaces)
    var queue = subscribers[slot].queue
    subscribers[slot].queue = CoalescingQueue()  // so that `queue` is not a second reference to its storage
    queue.removeAll { page in
      // Every queued page has a known workspace (publish learns it before it enqueues), but past 65,535
      // workspaces, which the index does not number: those entries stay until the broker unsubscribes them.
      guard let number = index.workspace(of: page) else { return false }
      return !visibility.maySee(number, in: index)
    }
    subscribers[slot].queue = queue
    subscribers[slot].visibility = visibility
  }

  // MARK: Publishing

  /// After a commit changed page `pageID` of workspace `workspace`, now at `lastUpdated`: records the page's facts
  /// in the index and queues the change for every subscriber of it that may see the workspace (coalesced: one
  /// entry per page, the newest time), putting each on the dirty list. Does nothing for a page nobody follows.
  public mutating func publish(pageID: String, workspace: String, lastUpdated: UInt64) {
    guard let key = index.existingKey(for: pageID) else { return }
    // Number of the page's workspace, to answer each subscriber from its cache (none only past 65,535
    // workspaces: then the id itself).
    let number = index.learn(workspace: workspace, lastUpdated: lastUpdated, of: key)
    for subscriber in index.subscribers(of: key) {
      let slot = Int(subscriber.rawValue)
      let allowed =
        if let number {
          maySee(number, slot)
        } else {
          subscribers[slot].visibility.maySee(workspaceID: workspace)
        }
      guard allowed else { continue }
      if !subscribers[slot].queue.enqueue(key, lastUpdatedTime: lastUpdated) { coalescedCount += 1 }
      if subscribers[slot].dirtyPosition == Self.clean {
        subscribers[slot].dirtyPosition = UInt32(dirty.count)
        dirty.append(subscriber)
      }
    }
  }

  /// Whether a subscriber may see the workspace numbered `number`: its cached answer, else worked out and cached.
  @inline(__always)
  mutating func maySee(_ number: ChannelIndex.WorkspaceNumber, _ slot: Int) -> Bool {
    if let answer = subscribers[slot].visibility.answer(for: number) { return answer }
    let answer = subscribers[slot].visibility.workspaces.contains(index.workspaceID(number))
    subscribers[slot].visibility.remember(answer, for: number)
    return answer
  }

  // MARK: Flushing

  /// Whether a subscriber was queued something since the dirty list was last taken.
  public var hasDirtySubscribers: Bool { !dirty.isEmpty }

  /// Hands the dirty list over in `taken` (in the order the subscribers got on it, but that a removal moves the
  /// last one into the place it left) and empties it: the caller then writes each one's queue (`drain`). The two
  /// arrays swap storage, so once both have grown a flush allocates nothing.
  public mutating func takeDirty(into taken: inout ContiguousArray<SubscriberID>) {
    taken.removeAll(keepingCapacity: true)
    swap(&taken, &dirty)
    for subscriber in taken { subscribers[Int(subscriber.rawValue)].dirtyPosition = Self.clean }
  }

  /// Moves up to `max` of a subscriber's pending notifications, oldest first, to the end of `output`; returns
  /// how many.
  @discardableResult
  public mutating func drain(
    _ subscriber: SubscriberID, max: Int, into output: inout [(page: PageKey, lastUpdatedTime: UInt64)]
  ) -> Int {
    subscribers[liveSlot(subscriber)].queue.drain(max: max, into: &output)
  }

  /// A subscriber's pending notifications (distinct pages).
  public func pendingCount(of subscriber: SubscriberID) -> Int {
    subscribers[liveSlot(subscriber)].queue.count
  }

  // MARK: Internals

  func liveSlot(_ subscriber: SubscriberID) -> Int {
    precondition(isLive(subscriber), "subscriber \(subscriber.rawValue) is not live")
    return Int(subscriber.rawValue)
  }

  /// Takes a subscriber off the dirty list, moving the last one into its place.
  private mutating func leaveDirtyList(_ slot: Int) {
    let position = subscribers[slot].dirtyPosition
    guard position != Self.clean else { return }
    let last = dirty.removeLast()
    if Int(position) < dirty.count {
      dirty[Int(position)] = last
      subscribers[Int(last.rawValue)].dirtyPosition = position
    }
    subscribers[slot].dirtyPosition = Self.clean
  }
}
