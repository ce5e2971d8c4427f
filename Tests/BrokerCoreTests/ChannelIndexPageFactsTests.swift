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
