import Testing

@testable import BrokerCore

@Suite struct ChannelIndexTests {
  let alice = SubscriberID(1)
  let bob = SubscriberID(2)
  let carol = SubscriberID(4_000_000_000)

  @Test func internsEachPageIDToOneStableKey() {
    var index = ChannelIndex()
    let a = index.key(for: "page-a")
    let b = index.key(for: "page_B")
    #expect(a != b)
    #expect(index.key(for: "page-a") == a)
    #expect(index.existingKey(for: "page-a") == a)
    #expect(index.existingKey(for: "page_B") == b)
    #expect(index.existingKey(for: "page-c") == nil)
    #expect(index.existingKey(for: "page a") == nil)
    #expect(index.pageID(for: a) == "page-a")
    #expect(index.pageID(for: b) == "page_B")
    #expect(index.withPageID(for: b) { Array($0) } == Array("page_B".utf8))
    #expect(index.channelCount == 2)
    #expect(index.violations() == [])
  }

  @Test func acceptsOnlyPageIDsOfTheGrammar() {
    let valid = ["a", "Z", "0", "_", "-", String(repeating: "x", count: 64), "AZaz09_-", uuidLikePageID(7)]
    let invalid = ["", String(repeating: "x", count: 65), "a b", "a/b", "é", "a.b", "page\n", "\u{0}"]
    for id in valid { #expect(ChannelIndex.isValidPageID(id), "\(id)") }
    for id in invalid { #expect(!ChannelIndex.isValidPageID(id), "\(id)") }
    let index = ChannelIndex()
    for id in invalid { #expect(index.existingKey(for: id) == nil) }
  }

  @Test func internRejectsAnInvalidPageID() async {
    await #expect(processExitsWith: .failure) {
      var index = ChannelIndex()
      _ = index.key(for: "not valid")
    }
  }

  @Test func subscribeCountsOnlyNewSubscriptions() {
    var index = ChannelIndex()
    #expect(index.subscribe(alice, toPageIDs: ["a", "b", "c"]) == 3)
    #expect(index.subscribe(alice, toPageIDs: ["a", "b", "d", "d"]) == 1)
    #expect(index.subscribe(alice, toPageIDs: ["a", "b", "c", "d"]) == 0)
    let a = index.existingKey(for: "a")!
    let d = index.existingKey(for: "d")!
    #expect(index.subscribe(bob, to: [a, d, a]) == 2)
    #expect(index.subscribe(bob, to: [a, d]) == 0)
    #expect(index.subscribe(bob, to: []) == 0)
    #expect(index.subscriptionCount(of: alice) == 4)
    #expect(index.subscriptionCount(of: bob) == 2)
    #expect(index.totalSubscriptions == 6)
    #expect(index.channelCount == 4)
    #expect(index.subscriberCount == 2)
    #expect(index.isSubscribed(bob, to: d))
    #expect(!index.isSubscribed(bob, to: index.existingKey(for: "b")!))
    #expect(index.violations() == [])
  }

  @Test func unsubscribeCountsOnlyExistingSubscriptions() {
    var index = ChannelIndex()
    _ = index.subscribe(alice, toPageIDs: ["a", "b", "c"])
    _ = index.subscribe(bob, toPageIDs: ["a"])
    let keys = ["a", "b", "c"].map { index.existingKey(for: $0)! }
    #expect(index.unsubscribe(alice, from: [keys[0], keys[1], keys[1]]) == 2)
    #expect(index.unsubscribe(alice, from: [keys[0], keys[1]]) == 0)
    #expect(index.unsubscribe(carol, from: keys) == 0)
    #expect(index.subscriptionCount(of: alice) == 1)
    #expect(index.totalSubscriptions == 2)
    // "b" lost its last subscriber and is released; "a" still has bob.
    #expect(index.existingKey(for: "b") == nil)
    #expect(index.existingKey(for: "a") == keys[0])
    #expect(index.channelCount == 2)
    #expect(index.unsubscribe(alice, from: [keys[2]]) == 1)
    #expect(index.subscriptionCount(of: alice) == 0)
    #expect(index.subscriberCount == 1)
    #expect(index.violations() == [])
  }

  @Test func removeSubscriberRemovesEverySubscriptionOnce() {
    var index = ChannelIndex()
    _ = index.subscribe(alice, toPageIDs: ["shared", "mine-1", "mine-2"])
    _ = index.subscribe(bob, toPageIDs: ["shared"])
    #expect(index.removeSubscriber(alice) == 3)
    #expect(index.removeSubscriber(alice) == 0)
    #expect(index.removeSubscriber(carol) == 0)
    #expect(index.subscriptionCount(of: alice) == 0)
    #expect(index.subscriptions(of: alice).isEmpty)
    #expect(index.totalSubscriptions == 1)
    #expect(index.channelCount == 1)
    #expect(index.existingKey(for: "mine-1") == nil)
    let shared = index.existingKey(for: "shared")!
    #expect(Array(index.subscribers(of: shared)) == [bob])
    #expect(index.violations() == [])
  }

  @Test func subscribersOfAPageAreExactlyItsSubscribers() {
    var index = ChannelIndex()
    // Page i has the subscribers whose id divides i: sets of every size, from one (inline) to a large table.
    var expected: [String: Set<SubscriberID>] = [:]
    for subscriber in 1...100 {
      let pages = stride(from: subscriber, through: 400, by: subscriber).map { "p\($0)" }
      _ = index.subscribe(SubscriberID(UInt32(subscriber)), toPageIDs: pages)
      for page in pages { expected[page, default: []].insert(SubscriberID(UInt32(subscriber))) }
    }
    func check() {
      for page in 1...400 {
        let id = "p\(page)"
        guard let key = index.existingKey(for: id) else {
          #expect(expected[id, default: []].isEmpty, "\(id) lost its key")
          continue
        }
        let subscribers = Array(index.subscribers(of: key))
        #expect(Set(subscribers) == expected[id], "\(id)")
        #expect(subscribers.count == expected[id]?.count, "\(id) lists a subscriber twice")
        #expect(index.subscribers(of: key).count == expected[id]?.count)
      }
      #expect(index.violations() == [])
    }
    check()
    // Shrink every set: odd subscribers leave their even pages.
    for subscriber in stride(from: 1, through: 99, by: 2) {
      let pages = stride(from: subscriber, through: 400, by: subscriber).filter { $0 % 2 == 0 }
      let keys = pages.map { index.existingKey(for: "p\($0)")! }
      #expect(index.unsubscribe(SubscriberID(UInt32(subscriber)), from: keys) == pages.count)
      for page in pages { expected["p\(page)"]!.remove(SubscriberID(UInt32(subscriber))) }
    }
    check()
    #expect(index.subscribers(of: PageKey(1_000_000)).isEmpty)
  }

  @Test func subscriptionsOfASubscriberAreExactlyItsPages() {
    var index = ChannelIndex()
    _ = index.subscribe(carol, toPageIDs: ["x", "y", "z"])
    _ = index.subscribe(alice, toPageIDs: ["y"])
    #expect(Set(index.subscriptions(of: carol).map { index.pageID(for: $0) }) == ["x", "y", "z"])
    #expect(index.subscriptions(of: alice).map { index.pageID(for: $0) } == ["y"])
    #expect(index.subscriptions(of: bob).isEmpty)
  }

  @Test func oneSubscriberSubscribesTenThousandPagesAtOnce() {
    var index = ChannelIndex()
    let ids = (0..<10_000).map(uuidLikePageID)
    #expect(index.subscribe(alice, toPageIDs: ids) == 10_000)
    #expect(index.subscribe(alice, toPageIDs: ids) == 0)
    #expect(index.subscriptionCount(of: alice) == 10_000)
    #expect(index.totalSubscriptions == 10_000)
    #expect(index.channelCount == 10_000)
    let subscribed = Set(index.subscriptions(of: alice).map { index.pageID(for: $0) })
    #expect(subscribed == Set(ids))
    for id in ids.prefix(100) {
      #expect(Array(index.subscribers(of: index.existingKey(for: id)!)) == [alice])
    }
    let half = ids.prefix(5_000).map { index.existingKey(for: $0)! }
    #expect(index.unsubscribe(alice, from: half) == 5_000)
    #expect(index.channelCount == 5_000)
    #expect(index.violations() == [])
    #expect(index.removeSubscriber(alice) == 5_000)
    #expect(index.channelCount == 0)
    #expect(index.violations() == [])
  }

  @Test func aReleasedKeyIsReusedForTheNextNewPage() {
    var index = ChannelIndex()
    _ = index.subscribe(alice, toPageIDs: ["first", "second", "third"])
    let second = index.existingKey(for: "second")!
    #expect(index.unsubscribe(alice, from: [second]) == 1)
    #expect(index.existingKey(for: "second") == nil)
    _ = index.subscribe(bob, toPageIDs: ["fourth"])
    let fourth = index.existingKey(for: "fourth")!
    #expect(fourth == second)
    #expect(index.pageID(for: fourth) == "fourth")
    #expect(Array(index.subscribers(of: fourth)) == [bob])
    #expect(index.pageID(for: index.existingKey(for: "third")!) == "third")
    #expect(index.violations() == [])
  }

  @Test func aKeyInternedWithoutSubscribersIsReleasedOnRequestOnly() {
    var index = ChannelIndex()
    let lonely = index.key(for: "lonely")
    let busy = index.key(for: "busy")
    _ = index.subscribe(alice, to: [busy])
    #expect(index.channelCount == 2)
    #expect(index.releaseIfUnused(busy) == false)
    #expect(index.releaseIfUnused(lonely) == true)
    #expect(index.releaseIfUnused(lonely) == false)
    #expect(index.existingKey(for: "lonely") == nil)
    #expect(index.channelCount == 1)
    #expect(index.violations() == [])
  }

  @Test func aCopyIsIndependent() {
    var index = ChannelIndex()
    _ = index.subscribe(alice, toPageIDs: ["a", "b", "c"])
    let snapshot = index
    _ = index.removeSubscriber(alice)
    _ = index.subscribe(bob, toPageIDs: ["d"])
    #expect(snapshot.subscriptionCount(of: alice) == 3)
    #expect(snapshot.existingKey(for: "d") == nil)
    #expect(snapshot.pageID(for: snapshot.existingKey(for: "b")!) == "b")
    #expect(snapshot.violations() == [])
    #expect(index.violations() == [])
  }
}
