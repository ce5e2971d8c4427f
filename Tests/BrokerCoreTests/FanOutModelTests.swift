import EventLoopTestKit
import Testing

@testable import BrokerCore

/// Random operations on the `FanOut` the broker runs, against a reference model made of dictionaries, sets and
/// arrays, checked after every step: subscribers coming and going (their ids reused), subscribe frames by both
/// paths (keys the index knows, pages the store was read for) with a subscription limit, unsubscribes, commits of
/// pages in four workspaces, grants narrowed and widened (then the broker's withdrawal), tokens revoked, flushes
/// of the dirty list with sockets that take only part of a queue, and drains on a socket's drain callback.
///
/// Checked each step: the model's subscriptions, queues (order and times) and dirty set, every rule of
/// `FanOut.violations()` (the index's included), and that no subscriber ever has a page of a workspace it may
/// not see queued. Checked at each flush: the dirty list holds every subscriber queued something since the last
/// flush, each once, and no removed one (nor a new subscriber that reuses a removed one's id and was queued
/// nothing).
@Suite struct FanOutModelTests {
  /// The obviously correct fan-out.
  struct Model {
    struct Subscriber {
      var workspaces: Set<String>
      var subscriptions: Set<String> = []
      var queue: [(page: String, time: UInt64)] = []
      var dirty = false
    }

    var subscribers: [UInt32: Subscriber] = [:]
    /// The store: pages that exist, with their time (a page's workspace is fixed by its id: `workspace(of:)`).
    var times: [String: UInt64] = [:]

    var channels: Set<String> { subscribers.values.reduce(into: []) { $0.formUnion($1.subscriptions) } }

    mutating func enqueue(_ page: String, _ time: UInt64, for id: UInt32) {
      if let position = subscribers[id]!.queue.firstIndex(where: { $0.page == page }) {
        subscribers[id]!.queue[position].time = max(subscribers[id]!.queue[position].time, time)
      } else {
        subscribers[id]!.queue.append((page, time))
      }
      subscribers[id]!.dirty = true
    }

    /// Whether `id` may see `page`: a page that does not exist yet may be followed by anyone.
    func maySee(_ page: String, _ id: UInt32) -> Bool {
      times[page] == nil || subscribers[id]!.workspaces.contains(FanOutModelTests.workspace(of: page))
    }
  }

  static let workspaces = ["w0", "w1", "w2", "w3"]
  static let limit = 24

  /// Page ids of a few shapes: short, UUID-like and the longest allowed.
  static let pageIDs: [String] = (0..<60).map { n in
    switch n % 3 {
    case 0: "p\(n)"
    case 1: uuidLikePageID(n)
    default: String(repeating: "L", count: 62) + String(n % 100 / 10) + String(n % 10)
    }
  }

  static func workspace(of page: String) -> String {
    workspaces[pageIDs.firstIndex(of: page)! % workspaces.count]
  }

  @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64]) func randomOperationsMatchTheModel(seed: UInt64) {
    var random = SplitMix64(seed: 0xFA40_1000 + seed)
    var fanOut = FanOut()
    var model = Model()
    var clock: UInt64 = 100
    var taken = ContiguousArray<SubscriberID>()

    func pick<T>(_ array: [T]) -> T { array[Int(random.next() % UInt64(array.count))] }
    func someWorkspaces() -> Set<String> { Set(Self.workspaces.filter { _ in random.next() % 2 == 0 }) }
    func somePages() -> [String] {
      // Mostly a few pages, sometimes many at once (a device subscribing its whole offline set); repeats happen.
      let count = random.next() % 8 == 0 ? 30 : Int(random.next() % 6)
      return (0..<count).map { _ in pick(Self.pageIDs) }
    }
    func drain(_ subscriber: SubscriberID, _ max: Int) {
      var drained: [(page: PageKey, lastUpdatedTime: UInt64)] = []
      fanOut.drain(subscriber, max: max, into: &drained)
      let expected = model.subscribers[subscriber.rawValue]!.queue.prefix(max)
      let names = drained.map { "\(fanOut.index.name(of: $0.page))@\($0.lastUpdatedTime)" }
      #expect(names == expected.map { "\($0.page)@\($0.time)" }, "drain \(max) of \(subscriber.rawValue)")
      model.subscribers[subscriber.rawValue]!.queue.removeFirst(expected.count)
    }

    for step in 0..<3_000 {
      let live = model.subscribers.keys.sorted()
      let roll = random.next() % 100
      var action = ""
      if live.isEmpty || (roll < 6 && live.count < 12) {
        let workspaces = someWorkspaces()
        let id = fanOut.addSubscriber(workspaces: workspaces).rawValue
        action = "add \(id) seeing \(workspaces.sorted())"
        #expect(model.subscribers[id] == nil, "step \(step): \(action): a live id handed out again")
        model.subscribers[id] = Model.Subscriber(workspaces: workspaces)
      } else {
        let id = pick(live)
        let subscriber = SubscriberID(id)
        switch roll {
        case 0..<10:
          action = "remove \(id)"
          let removed = fanOut.removeSubscriber(subscriber)
          #expect(removed == model.subscribers[id]!.subscriptions.count, "step \(step): \(action)")
          model.subscribers[id] = nil
        case 10..<34:
          let pages = somePages()
          // As the broker does: by keys when the index knows every page's workspace, else by what the store says.
          let known = fanOut.knownKeys(of: pages)
          action = "subscribe \(id) to \(pages.count) (\(known == nil ? "store" : "index"))"
          let outcome =
            if let known {
              fanOut.subscribe(subscriber, knownPages: known, limit: Self.limit)
            } else {
              fanOut.subscribe(
                subscriber,
                storePages: pages.map { page in
                  FanOut.StorePage(
                    id: page, workspace: model.times[page] == nil ? nil : Self.workspace(of: page),
                    lastUpdated: model.times[page] ?? 0)
                }, limit: Self.limit)
            }
          // The rule: pages of a workspace it may not see are denied; then, unless the whole frame fits, each
          // page it does not follow yet counts, and one that would pass the limit is denied.
          let before = model.subscribers[id]!.subscriptions
          let fits = before.count + pages.count <= Self.limit
          var count = before.count
          var denied: [String] = []
          for page in pages {
            if !model.maySee(page, id) || (!fits && count >= Self.limit && !before.contains(page)) {
              denied.append(page)
            } else {
              if !before.contains(page) { count += 1 }
              model.subscribers[id]!.subscriptions.insert(page)
            }
          }
          let total = model.subscribers[id]!.subscriptions.count
          #expect(
            outcome == FanOut.Subscription(added: total - before.count, total: total, denied: denied),
            "step \(step): \(action)")
        case 34..<46:
          let pages = somePages() + Array(model.subscribers[id]!.subscriptions.prefix(3))
          action = "unsubscribe \(id) from \(pages.count)"
          var expected: [String] = []
          for page in pages where model.subscribers[id]!.subscriptions.remove(page) != nil {
            expected.append(page)
          }
          model.subscribers[id]!.queue.removeAll { expected.contains($0.page) }
          #expect(fanOut.unsubscribe(subscriber, fromPageIDs: pages) == expected, "step \(step): \(action)")
        case 46..<72:
          var changes: [String] = []
          for _ in 0..<(1 + random.next() % 5) {
            let page = pick(Self.pageIDs)
            clock += 1
            // Now and then a change older than what may be pending: it must not replace it.
            let time = random.next() % 4 == 0 ? clock - random.next() % 20 : clock
            changes.append("\(page)@\(time)")
            model.times[page] = max(model.times[page] ?? 0, time)
            fanOut.publish(pageID: page, workspace: Self.workspace(of: page), lastUpdated: time)
            for (other, state) in model.subscribers
            where state.subscriptions.contains(page) && state.workspaces.contains(Self.workspace(of: page)) {
              model.enqueue(page, time, for: other)
            }
          }
          action = "publish \(changes)"
        case 72..<78:
          let workspaces = someWorkspaces()
          action = "set \(id)'s workspaces to \(workspaces.sorted())"
          fanOut.setWorkspaces(workspaces, of: subscriber)
          model.subscribers[id]!.workspaces = workspaces
          // At once: nothing pending of what it may no longer see.
          let visible = model
          model.subscribers[id]!.queue.removeAll { !visible.maySee($0.page, id) }
          if random.next() % 2 == 0 {
            // Then the broker's withdrawal: the store names the followed pages outside the new workspaces.
            let outside = model.subscribers[id]!.subscriptions.filter { !model.maySee($0, id) }.sorted()
            action += ", withdraw \(outside.count)"
            #expect(
              fanOut.unsubscribe(subscriber, fromPageIDs: outside) == outside, "step \(step): \(action)")
            model.subscribers[id]!.subscriptions.subtract(outside)
          }
        case 78..<80:
          action = "revoke \(id)'s token"
          let removed = fanOut.removeAllSubscriptions(of: subscriber)
          #expect(removed == model.subscribers[id]!.subscriptions.count, "step \(step): \(action)")
          model.subscribers[id]!.subscriptions = []
          model.subscribers[id]!.queue = []
          model.subscribers[id]!.workspaces = []
        case 80..<94:
          action = "flush"
          fanOut.takeDirty(into: &taken)
          let expected = Set(model.subscribers.filter(\.value.dirty).keys)
          #expect(
            taken.count == Set(taken).count && Set(taken.map(\.rawValue)) == expected,
            "step \(step): flush took \(taken.map(\.rawValue)), expected \(expected.sorted())")
          for other in taken where model.subscribers[other.rawValue] != nil {
            model.subscribers[other.rawValue]!.dirty = false
            // A socket with room for part of the queue only; the rest waits for its drain callback.
            drain(other, Int(random.next() % 12))
          }
        default:
          let max = Int(random.next() % 12)
          action = "drain \(max) of \(id)"
          drain(subscriber, max)
        }
      }
      check(fanOut, model, "step \(step): after \(action)")
    }

  }

  /// Compares everything observable with the model; one expectation per step, listing what differs.
  func check(_ fanOut: FanOut, _ model: Model, _ context: String) {
    var problems = fanOut.violations()
    let index = fanOut.index
    if fanOut.subscriberCount != model.subscribers.count {
      problems.append("subscriberCount \(fanOut.subscriberCount), expected \(model.subscribers.count)")
    }
    if index.channelCount != model.channels.count { problems.append("channelCount \(index.channelCount)") }
    for (id, expected) in model.subscribers {
      let subscriber = SubscriberID(id)
      if !fanOut.isLive(subscriber) {
        problems.append("\(id) is not live")
        continue
      }
      let pages = fanOut.subscribedPageIDs(of: subscriber)
      if Set(pages) != expected.subscriptions || pages.count != expected.subscriptions.count
        || fanOut.subscriptionCount(of: subscriber) != expected.subscriptions.count
      {
        problems.append(
          "subscriptions of \(id): \(pages.sorted()), expected \(expected.subscriptions.sorted())")
      }
      let pending = fanOut.pending(of: subscriber).map { "\(index.name(of: $0.page))@\($0.lastUpdatedTime)" }
      let expectedPending = expected.queue.map { "\($0.page)@\($0.time)" }
      if pending != expectedPending {
        problems.append("queue of \(id): \(pending), expected \(expectedPending)")
      }
      for entry in fanOut.pending(of: subscriber)
      where !expected.workspaces.contains(Self.workspace(of: index.name(of: entry.page))) {
        problems.append("\(id) has \(index.name(of: entry.page)) queued, of a workspace it may not see")
      }
    }
    let dirty = fanOut.dirtyList.map(\.rawValue)
    let expectedDirty = Set(model.subscribers.filter(\.value.dirty).keys)
    if dirty.count != Set(dirty).count || Set(dirty) != expectedDirty {
      problems.append("dirty list \(dirty), expected \(expectedDirty.sorted()) each once")
    }
    for page in Self.pageIDs {
      let followers = model.subscribers.filter { $0.value.subscriptions.contains(page) }.keys.sorted()
      let subscribers =
        index.existingKey(for: page).map { index.subscribers(of: $0).map(\.rawValue).sorted() } ?? []
      if subscribers != followers {
        problems.append("subscribers of \(page): \(subscribers), expected \(followers)")
      }
    }
    #expect(problems == [], "\(context)")
  }
}
