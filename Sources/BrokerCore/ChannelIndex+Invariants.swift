// A full consistency check of the index, for tests (model-based and churn tests call it after every step).

extension ChannelIndex {
  /// Every broken layout rule, described; empty when the index is consistent. O(size of the index).
  func violations() -> [String] {
    var problems: [String] = []
    if nameRefs.count != channelSubscribers.count { problems.append("channel arrays differ in length") }

    // Keys: live or on the free list, never both; no free key at the end.
    var liveBytes = 0
    var live = 0
    for (key, ref) in nameRefs.enumerated() {
      if ref.length == 0 {
        let position = Int(ref.offset)
        if position >= freeKeys.count || freeKeys[position] != UInt32(key) {
          problems.append("free key \(key) not at its free-list position")
        }
        if !channelSubscribers[key].isEmpty { problems.append("free key \(key) has subscribers") }
        if ref.workspace != Self.unknownWorkspace || ref.lastUpdated != 0 {
          problems.append("free key \(key) keeps facts of a page")
        }
        continue
      }
      if ref.workspace != Self.unknownWorkspace && Int(ref.workspace) >= workspaceIDs.count {
        problems.append("key \(key) has workspace number \(ref.workspace) of \(workspaceIDs.count)")
      }
      if ref.workspace == Self.unknownWorkspace && ref.lastUpdated != 0 {
        problems.append("key \(key) has a time but no workspace")
      }
      live += 1
      liveBytes += Int(ref.length)
      withPageID(for: PageKey(UInt32(key))) { id in
        if Self.hash(id) != ref.hash { problems.append("key \(key) has a stale hash") }
        if findKey(id, hash: ref.hash).key != UInt32(key) {
          problems.append("key \(key) not found by its id")
        }
      }
    }
    if live != channelCount { problems.append("channelCount \(channelCount), \(live) live keys") }
    if nameRefs.count - live != freeKeys.count { problems.append("free list holds \(freeKeys.count) keys") }
    if let last = nameRefs.last, last.length == 0 { problems.append("free key at the end not trimmed") }
    if names.count - liveBytes != garbageNameBytes { problems.append("garbage bytes miscounted") }

    // The key table.
    let slotted = keySlots.filter { $0 != KeySet.free }.count
    if slotted != channelCount { problems.append("\(slotted) keys in the table, \(channelCount) channels") }
    if !keySlots.isEmpty
      && (keySlots.count & (keySlots.count - 1) != 0 || channelCount * 4 > keySlots.count * 3)
    {
      problems.append("key table of \(keySlots.count) slots for \(channelCount) channels")
    }
    if channelCount == 0 && (keySlots.capacity > 0 || names.capacity > 0) {
      problems.append("no channels but memory kept")
    }

    // Subscriptions, both ways.
    var fromSubscribers = 0
    var heap = 0
    for (subscriber, set) in subscriptionSets {
      if set.isEmpty { problems.append("subscriber \(subscriber.rawValue) kept with no subscriptions") }
      fromSubscribers += set.count
      heap += set.heapBytes
      problems += set.violations(seed: seed).map { "subscriber \(subscriber.rawValue): \($0)" }
      set.forEachKey { key in
        if !isLive(PageKey(key)) {
          problems.append("subscriber \(subscriber.rawValue) on released key \(key)")
        } else if !channelSubscribers[Int(key)].contains(subscriber.rawValue, seed: seed) {
          problems.append("subscriber \(subscriber.rawValue) missing from channel \(key)")
        }
      }
    }
    var fromChannels = 0
    for (key, set) in channelSubscribers.enumerated() {
      fromChannels += set.count
      heap += set.heapBytes
      problems += set.violations(seed: seed).map { "channel \(key): \($0)" }
      set.forEachKey { subscriber in
        if subscriptionSets[SubscriberID(subscriber)]?.contains(UInt32(key), seed: seed) != true {
          problems.append("channel \(key) lists subscriber \(subscriber) that does not list it")
        }
      }
    }
    if fromSubscribers != totalSubscriptions || fromChannels != totalSubscriptions {
      problems.append("totalSubscriptions \(totalSubscriptions), \(fromSubscribers) / \(fromChannels) held")
    }
    if heap != setHeapBytes { problems.append("set heap bytes \(setHeapBytes), actually \(heap)") }
    return problems
  }
}
