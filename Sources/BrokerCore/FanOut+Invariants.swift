// A full consistency check of the fan-out, for tests (the model tests call it after every step).

extension FanOut {
  /// Every broken rule, described; empty when the fan-out is consistent. O(size of the fan-out).
  func violations() -> [String] {
    var problems = index.violations()
    var live = 0
    var free = Set<UInt32>()
    for slot in freeSubscribers where !free.insert(slot).inserted {
      problems.append("id \(slot) freed twice")
    }
    for (slot, state) in subscribers.enumerated() {
      let subscriber = SubscriberID(UInt32(slot))
      guard state.isLive else {
        if !free.contains(UInt32(slot)) { problems.append("id \(slot) neither live nor free") }
        if !state.queue.isEmpty || state.dirtyPosition != Self.clean
          || index.subscriptionCount(of: subscriber) > 0
        {
          problems.append("free id \(slot) keeps a queue, a dirty mark or subscriptions")
        }
        continue
      }
      live += 1
      if free.contains(UInt32(slot)) { problems.append("live id \(slot) is on the free list") }
      problems += state.queue.violations().map { "queue of \(slot): \($0)" }
      for entry in state.queue.pending {
        if !index.isSubscribed(subscriber, to: entry.page) {
          problems.append("\(slot) has a page queued that it does not follow (key \(entry.page.rawValue))")
        } else if let number = index.workspace(of: entry.page),
          !state.visibility.workspaces.contains(index.workspaceID(number))
        {
          problems.append(
            "\(slot) has \(index.pageID(for: entry.page)) queued, of a workspace it may not see")
        }
      }
      for (number, maySee) in state.visibility.cachedAnswers
      where maySee != state.visibility.workspaces.contains(index.workspaceID(number)) {
        problems.append("\(slot) caches a wrong answer for workspace \(index.workspaceID(number))")
      }
      let position = state.dirtyPosition
      if position != Self.clean && (Int(position) >= dirty.count || dirty[Int(position)] != subscriber) {
        problems.append("\(slot) marked dirty at \(position), not there on the list")
      }
    }
    if live != subscriberCount { problems.append("subscriberCount \(subscriberCount), \(live) live") }
    if live + free.count != subscribers.count {
      problems.append("\(subscribers.count) slots, \(live) live, \(free.count) free")
    }
    if index.subscriberCount > live { problems.append("the index has \(index.subscriberCount) subscribers") }
    for (position, subscriber) in dirty.enumerated() {
      let slot = Int(subscriber.rawValue)
      if slot >= subscribers.count || !subscribers[slot].isLive {
        problems.append("dirty list holds \(slot), which is not live")
      } else if subscribers[slot].dirtyPosition != UInt32(position) {
        problems.append("dirty list holds \(slot) at \(position), not where it is marked (a duplicate?)")
      }
    }
    return problems
  }

  /// The dirty list, for tests.
  var dirtyList: [SubscriberID] { Array(dirty) }

  /// A subscriber's pending notifications in drain order, for tests.
  func pending(of subscriber: SubscriberID) -> [(page: PageKey, lastUpdatedTime: UInt64)] {
    subscribers[liveSlot(subscriber)].queue.pending
  }
}
