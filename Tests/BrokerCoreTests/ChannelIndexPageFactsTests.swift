import Testing

@testable import BrokerCore

@Suite struct ChannelIndexPageFactsTests {
  let alice = SubscriberID(1)
  let bob = SubscriberID(2)

  @Test func remembersAPagesWorkspaceAndNewestTimeWhileItsChannelLives() {
    var index = ChannelIndex()
    _ = index.subscribe(alice, toPageIDs: ["a", "b", "c"])
    let a = index.existingKey(for: "a")!
    let b = index.existingKey(for: "b")!
    let c = index.existingKey(for: "c")!
    #expect(index.facts(of: a) == nil)
    index.learn(workspace: "ws1", lastUpdated: 7, of: a)
    index.learn(workspace: "ws2", lastUpdated: 3, of: b)
    index.learn(workspace: "ws1", lastUpdated: 9, of: c)
    #expect(index.workspace(of: a).map(index.workspaceID) == "ws1")
    #expect(index.workspace(of: b).map(index.workspaceID) == "ws2")
    #expect(index.workspace(of: a) == index.workspace(of: c))
    #expect(index.facts(of: a)?.lastUpdated == 7)
    // A page never changes workspace, and an older time (a read that raced a commit) does not take it back.
    index.learn(workspace: "ws9", lastUpdated: 5, of: a)
    #expect(index.workspace(of: a).map(index.workspaceID) == "ws1")
    #expect(index.facts(of: a)?.lastUpdated == 7)
    index.learn(workspace: "ws1", lastUpdated: 12, of: a)
    #expect(index.facts(of: a)?.lastUpdated == 12)
    #expect(index.violations() == [])
  }

  @Test func aReleasedKeyForgetsItsPageAndItsReuseStartsUnknown() {
    var index = ChannelIndex()
    _ = index.subscribe(alice, toPageIDs: ["a", "b"])
    let a = index.existingKey(for: "a")!
    index.learn(workspace: "ws1", lastUpdated: 4, of: a)
    _ = index.unsubscribe(alice, from: [a])
    #expect(index.existingKey(for: "a") == nil)
    #expect(index.facts(of: a) == nil)
    #expect(index.violations() == [])
    // The freed key now stands for another page, of which nothing is known.
    _ = index.subscribe(bob, toPageIDs: ["other"])
    let other = index.existingKey(for: "other")!
    #expect(other == a)
    #expect(index.facts(of: other) == nil)
    // And a page that comes back starts unknown too.
    _ = index.subscribe(bob, toPageIDs: ["a"])
    #expect(index.facts(of: index.existingKey(for: "a")!) == nil)
    #expect(index.violations() == [])
  }

  @Test func aKeyThatIsNotLiveLearnsNothing() {
    var index = ChannelIndex()
    _ = index.subscribe(alice, toPageIDs: ["a"])
    let a = index.existingKey(for: "a")!
    _ = index.removeSubscriber(alice)
    index.learn(workspace: "ws1", lastUpdated: 1, of: a)
    #expect(index.facts(of: a) == nil)
    #expect(index.violations() == [])
  }

  @Test func aChannelCostsTwelveBytesMoreForWhatIsKnownOfItsPage() {
    #expect(MemoryLayout<ChannelIndex.NameRef>.stride == 24)
  }
}

@Suite struct ChannelIndexKeysFromBytesTests {
  let alice = SubscriberID(1)

  private func key(_ index: ChannelIndex, utf8 id: String) -> PageKey? {
    var id = id
    return id.withUTF8 { index.existingKey(utf8: $0) }
  }

  @Test func findsTheSameKeyFromBytesAsFromAString() {
    var index = ChannelIndex()
    #expect(key(index, utf8: "a") == nil)
    _ = index.subscribe(alice, toPageIDs: ["a", "page-2", String(repeating: "x", count: 64)])
    for id in ["a", "page-2", String(repeating: "x", count: 64)] {
      #expect(key(index, utf8: id) != nil)
      #expect(key(index, utf8: id) == index.existingKey(for: id))
    }
    // Not followed, a prefix, and ids that are not ids: no key.
    for id in ["b", "page-", "page-22", "", "a b", "é", String(repeating: "x", count: 65)] {
      #expect(key(index, utf8: id) == nil)
    }
  }

  @Test func countsReleasedKeysSoThatHeldKeysCanBeChecked() {
    var index = ChannelIndex()
    _ = index.subscribe(alice, toPageIDs: ["a", "b", "c"])
    let before = index.keyReleases
    let b = index.existingKey(for: "b")!
    // Subscribing more, and learning, releases nothing: held keys stay good.
    _ = index.subscribe(alice, toPageIDs: ["d"])
    index.learn(workspace: "w", lastUpdated: 1, of: b)
    #expect(index.keyReleases == before)
    _ = index.unsubscribe(alice, from: [b])
    #expect(index.keyReleases == before + 1)
    // The last subscriber going releases every key it held.
    _ = index.removeSubscriber(alice)
    #expect(index.keyReleases == before + 4)
    #expect(index.channelCount == 0)
  }

  @Test func aPageKeySetTellsKeysSeenBefore() {
    var index = ChannelIndex()
    let ids = (0..<100).map { "p\($0)" }
    _ = index.subscribe(alice, toPageIDs: ids)
    var seen = PageKeySet()
    for id in ids {
      let added = seen.insert(index.existingKey(for: id)!)
      #expect(added)
    }
    for id in ids {
      #expect(seen.contains(index.existingKey(for: id)!))
      let addedAgain = seen.insert(index.existingKey(for: id)!)
      #expect(!addedAgain)
    }
    #expect(seen.count == 100)
  }
}
