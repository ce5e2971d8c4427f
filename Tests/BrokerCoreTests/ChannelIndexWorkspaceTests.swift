import Testing

@testable import BrokerCore

@Suite struct ChannelIndexWorkspaceTests {
  let alice = SubscriberID(1)
  let bob = SubscriberID(2)

  @Test func remembersAPagesWorkspaceWhileItsChannelLives() {
    var index = ChannelIndex()
    _ = index.subscribe(alice, toPageIDs: ["a", "b", "c"])
    let a = index.existingKey(for: "a")!
    let b = index.existingKey(for: "b")!
    let c = index.existingKey(for: "c")!
    #expect(index.workspace(of: a) == nil)
    index.setWorkspace("ws1", of: a)
    index.setWorkspace("ws2", of: b)
    index.setWorkspace("ws1", of: c)
    #expect(index.workspace(of: a).map(index.workspaceID) == "ws1")
    #expect(index.workspace(of: b).map(index.workspaceID) == "ws2")
    #expect(index.workspace(of: a) == index.workspace(of: c))
    // A page never changes workspace: a later, different answer is not taken.
    index.setWorkspace("ws9", of: a)
    #expect(index.workspace(of: a).map(index.workspaceID) == "ws1")
    #expect(index.violations() == [])
  }

  @Test func aReleasedKeyForgetsItsWorkspaceAndItsReuseStartsUnknown() {
    var index = ChannelIndex()
    _ = index.subscribe(alice, toPageIDs: ["a", "b"])
    let a = index.existingKey(for: "a")!
    index.setWorkspace("ws1", of: a)
    _ = index.unsubscribe(alice, from: [a])
    #expect(index.existingKey(for: "a") == nil)
    #expect(index.workspace(of: a) == nil)
    #expect(index.violations() == [])
    // The freed key now stands for another page, whose workspace nobody has said.
    _ = index.subscribe(bob, toPageIDs: ["other"])
    let other = index.existingKey(for: "other")!
    #expect(other == a)
    #expect(index.workspace(of: other) == nil)
    // And a page that comes back starts unknown too.
    _ = index.subscribe(bob, toPageIDs: ["a"])
    #expect(index.workspace(of: index.existingKey(for: "a")!) == nil)
    #expect(index.violations() == [])
  }

  @Test func aKeyWithoutSubscribersOrNotLiveTakesNoWorkspace() {
    var index = ChannelIndex()
    _ = index.subscribe(alice, toPageIDs: ["a"])
    let a = index.existingKey(for: "a")!
    _ = index.removeSubscriber(alice)
    index.setWorkspace("ws1", of: a)
    #expect(index.workspace(of: a) == nil)
    #expect(index.violations() == [])
  }

  @Test func theWorkspaceCostsNoMemory() {
    #expect(MemoryLayout<ChannelIndex.NameRef>.stride == 12)
  }
}
