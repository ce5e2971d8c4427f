/// What the broker does with subscriptions and pending notifications, as pure functions over the index and the
/// subscribers' queues. The broker's loop owns both and performs the I/O these decisions call for.
///
/// The functions here keep the two in step: a queue only ever holds pages its subscriber is subscribed to. That
/// matters beyond tidiness, since the index reuses the key of a channel that lost its last subscriber: a stale
/// pending entry would later name another page.
public enum FanOut {
  /// After a commit: every subscriber of each changed page gets `(page, lastUpdatedTime)` enqueued (coalesced).
  /// Returns the subscribers whose queue went from empty to non-empty, each once, in the order they woke: they
  /// need a write scheduled. The others already have one.
  ///
  /// Changes of keys that are not live (no subscribers) are skipped.
  public static func publish(
    _ changes: [(page: PageKey, lastUpdatedTime: UInt64)],
    index: ChannelIndex,
    queues: inout [SubscriberID: CoalescingQueue]
  ) -> [SubscriberID] {
    var woken: [SubscriberID] = []
    for change in changes {
      for subscriber in index.subscribers(of: change.page) {
        let wasEmpty = enqueue(
          change.page, change.lastUpdatedTime, into: &queues[subscriber, default: CoalescingQueue()])
        if wasEmpty { woken.append(subscriber) }
      }
    }
    return woken
  }

  /// Unsubscribes `subscriber` from `pages` and drops their pending notifications; returns how many
  /// subscriptions there were.
  public static func unsubscribe(
    _ subscriber: SubscriberID,
    from pages: some Collection<PageKey>,
    index: inout ChannelIndex,
    queues: inout [SubscriberID: CoalescingQueue]
  ) -> Int {
    if queues[subscriber]?.isEmpty == false {
      for page in pages { queues[subscriber]?.remove(page) }
    }
    return index.unsubscribe(subscriber, from: pages)
  }

  /// Forgets a subscriber that went away: its subscriptions and its queue; returns how many subscriptions it had.
  public static func removeSubscriber(
    _ subscriber: SubscriberID,
    index: inout ChannelIndex,
    queues: inout [SubscriberID: CoalescingQueue]
  ) -> Int {
    queues[subscriber] = nil
    return index.removeSubscriber(subscriber)
  }

  /// Enqueues into `queue`; returns whether it was empty before (its subscriber needs waking).
  private static func enqueue(_ page: PageKey, _ time: UInt64, into queue: inout CoalescingQueue) -> Bool {
    let wasEmpty = queue.isEmpty
    queue.enqueue(page, lastUpdatedTime: time)
    return wasEmpty
  }
}
