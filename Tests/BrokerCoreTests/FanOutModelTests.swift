import EventLoopTestKit
import Testing

@testable import BrokerCore

/// Random subscribes, unsubscribes, disconnects, publishes and drains against a reference model made of
/// dictionaries, sets and arrays, checked after every step: the index, every queue, and the wake-ups.
@Suite struct FanOutModelTests {
  /// The obviously correct broker: who is subscribed to what, and each subscriber's pending (page, time) list.
  struct Model {
    var subscriptions: [UInt32: Set<String>] = [:]
    var queues: [UInt32: [(page: String, time: UInt64)]] = [:]

    func subscribers(of page: String) -> [UInt32] {
      subscriptions.filter { $0.value.contains(page) }.map(\.key).sorted()
    }
    var channels: Set<String> { subscriptions.values.reduce(into: []) { $0.formUnion($1) } }

    mutating func enqueue(_ page: String, _ time: UInt64, for subscriber: UInt32) {
      if let position = queues[subscriber, default: []].firstIndex(where: { $0.page == page }) {
        queues[subscriber]![position].time = max(queues[subscriber]![position].time, time)
      } else {
        queues[subscriber, default: []].append((page, time))
      }
    }
  }

  /// Page ids of a few shapes: short, UUID-like and the longest allowed, so the arena holds ids of every size.
  static let pageIDs: [String] = (0..<80).map { n in
    switch n % 3 {
    case 0: "p\(n)"
    case 1: uuidLikePageID(n)
    default: String(repeating: "L", count: 62) + String(n % 100 / 10) + String(n % 10)
    }
  }
  static let subscriberIDs: [UInt32] = Array(0..<10) + [65_536, 4_000_000_000]

  @Test(arguments: [1, 2, 3, 4] as [UInt64]) func randomOperationsMatchTheModel(seed: UInt64) {
    var random = SplitMix64(seed: 0xFA40_0000 + seed)
    var index = ChannelIndex()
    var queues: [SubscriberID: CoalescingQueue] = [:]
    var model = Model()
    var clock: UInt64 = 100

    func pick<T>(_ array: [T]) -> T { array[Int(random.next() % UInt64(array.count))] }
    func somePages() -> [String] {
      // Mostly a few pages, sometimes a large set at once (a device subscribing its whole offline set).
      let count = random.next() % 8 == 0 ? 40 : Int(random.next() % 6)
      return (0..<count).map { _ in pick(Self.pageIDs) }
    }

    for step in 0..<2_500 {
      let subscriber = pick(Self.subscriberIDs)
      let id = SubscriberID(subscriber)
      let roll = random.next() % 100
      var action = ""
      switch roll {
      case 0..<28:
        let pages = somePages()
        action = "subscribe \(subscriber) to \(pages.count)"
        let expected = Set(pages).subtracting(model.subscriptions[subscriber, default: []]).count
        let added: Int
        if roll < 8 {
          // By key, for pages that have one; the rest by id.
          let keyed = pages.compactMap { index.existingKey(for: $0) }
          let byID = pages.filter { index.existingKey(for: $0) == nil }
          added = index.subscribe(id, to: keyed) + index.subscribe(id, toPageIDs: byID)
        } else {
          added = index.subscribe(id, toPageIDs: pages)
        }
        #expect(added == expected, "step \(step): \(action)")
        if !pages.isEmpty { model.subscriptions[subscriber, default: []].formUnion(pages) }
      case 28..<45:
        let pages = somePages() + Array(model.subscriptions[subscriber, default: []].prefix(3))
        action = "unsubscribe \(subscriber) from \(pages.count)"
        let expected = Set(pages).intersection(model.subscriptions[subscriber, default: []]).count
        let keys = pages.compactMap { index.existingKey(for: $0) }
        let removed = FanOut.unsubscribe(id, from: keys, index: &index, queues: &queues)
        #expect(removed == expected, "step \(step): \(action)")
        model.subscriptions[subscriber]?.subtract(pages)
        if model.subscriptions[subscriber]?.isEmpty == true { model.subscriptions[subscriber] = nil }
        model.queues[subscriber]?.removeAll { pages.contains($0.page) }
      case 45..<50:
        action = "remove \(subscriber)"
        let removed = FanOut.removeSubscriber(id, index: &index, queues: &queues)
        #expect(removed == model.subscriptions[subscriber, default: []].count, "step \(step): \(action)")
        model.subscriptions[subscriber] = nil
        model.queues[subscriber] = nil
      case 50..<80:
        var changes: [(page: PageKey, lastUpdatedTime: UInt64)] = []
        let wasEmpty = Set(Self.subscriberIDs.filter { model.queues[$0, default: []].isEmpty })
        var expectedWoken: Set<UInt32> = []
        for _ in 0..<(1 + random.next() % 6) {
          let page = pick(Self.pageIDs)
          clock += 1
          // Now and then a change older than what may be pending: it must not replace it.
          let time = random.next() % 4 == 0 ? clock - random.next() % 20 : clock
          guard let key = index.existingKey(for: page) else {
            #expect(model.subscribers(of: page).isEmpty, "step \(step): \(page) has subscribers but no key")
            continue
          }
          changes.append((key, time))
          for subscriber in model.subscribers(of: page) {
            model.enqueue(page, time, for: subscriber)
            if wasEmpty.contains(subscriber) { expectedWoken.insert(subscriber) }
          }
        }
        action = "publish \(changes.count)"
        let woken = FanOut.publish(changes, index: index, queues: &queues).map(\.rawValue)
        #expect(Set(woken) == expectedWoken, "step \(step): \(action)")
        #expect(woken.count == Set(woken).count, "step \(step): a subscriber woken twice")
      default:
        let max = Int(random.next() % 12)
        action = "drain \(max) of \(subscriber)"
        let drained = queues[id]?.drain(max: max) ?? []
        let expected = model.queues[subscriber, default: []].prefix(max)
        model.queues[subscriber]?.removeFirst(expected.count)
        #expect(drained.map { index.name(of: $0.page) } == expected.map(\.page), "step \(step): \(action)")
        #expect(drained.map(\.lastUpdatedTime) == expected.map(\.time), "step \(step): \(action)")
      }
      check(index, queues, model, "step \(step): after \(action)")
    }
  }

  /// Compares everything observable with the model; one expectation per step, listing what differs.
  func check(
    _ index: ChannelIndex, _ queues: [SubscriberID: CoalescingQueue], _ model: Model, _ context: String
  ) {
    var problems = index.violations()
    if index.channelCount != model.channels.count { problems.append("channelCount \(index.channelCount)") }
    if index.totalSubscriptions != model.subscriptions.values.map(\.count).reduce(0, +) {
      problems.append("totalSubscriptions \(index.totalSubscriptions)")
    }
    for subscriber in Self.subscriberIDs {
      let id = SubscriberID(subscriber)
      let pages = index.subscriptions(of: id).map { index.name(of: $0) }
      let expected = model.subscriptions[subscriber, default: []]
      if Set(pages) != expected || pages.count != expected.count
        || index.subscriptionCount(of: id) != expected.count
      {
        problems.append("subscriptions of \(subscriber): \(pages.sorted()), expected \(expected.sorted())")
      }
      // The queue: the model's pending list exactly, so at most one entry per page, only for subscribed pages.
      let queue = queues[id] ?? CoalescingQueue()
      problems += queue.violations().map { "queue of \(subscriber): \($0)" }
      let pending = queue.pending.map { "\(index.name(of: $0.page))@\($0.lastUpdatedTime)" }
      let expectedPending = model.queues[subscriber, default: []].map { "\($0.page)@\($0.time)" }
      if pending != expectedPending {
        problems.append("queue of \(subscriber): \(pending), expected \(expectedPending)")
      }
      if !Set(queue.pending.map { index.name(of: $0.page) }).isSubset(of: expected) {
        problems.append("queue of \(subscriber) holds a page it is not subscribed to")
      }
    }
    var expectedSubscribers: [String: [UInt32]] = [:]
    for (subscriber, pages) in model.subscriptions {
      for page in pages { expectedSubscribers[page, default: []].append(subscriber) }
    }
    for page in Self.pageIDs {
      let subscribers =
        index.existingKey(for: page).map { key in index.subscribers(of: key).map(\.rawValue).sorted() } ?? []
      let expected = expectedSubscribers[page, default: []].sorted()
      if subscribers != expected {
        problems.append("subscribers of \(page): \(subscribers), expected \(expected)")
      }
      if expected.isEmpty && index.existingKey(for: page) != nil { problems.append("\(page) kept its key") }
    }
    #expect(problems == [], "\(context)")
  }
}
