import Testing

@testable import BrokerCore

@Suite struct FanOutTests {
  let alice = SubscriberID(1)
  let bob = SubscriberID(2)
  let carol = SubscriberID(3)

  func pageIDs(_ queue: CoalescingQueue?, _ index: ChannelIndex) -> [String] {
    (queue?.pending ?? []).map { index.name(of: $0.page) }
  }

  @Test func everySubscriberOfAChangedPageGetsIt() {
    var index = ChannelIndex()
    var queues: [SubscriberID: CoalescingQueue] = [:]
    _ = index.subscribe(alice, toPageIDs: ["a", "b"])
    _ = index.subscribe(bob, toPageIDs: ["b"])
    _ = index.subscribe(carol, toPageIDs: ["c"])
    let a = index.existingKey(for: "a")!
    let b = index.existingKey(for: "b")!
    let woken = FanOut.publish([(a, 7), (b, 8)], index: index, queues: &queues)
    #expect(woken.count == 2)
    #expect(Set(woken) == [alice, bob])
    #expect(pageIDs(queues[alice], index) == ["a", "b"])
    #expect(queues[alice]?.pendingTime(of: b) == 8)
    #expect(pageIDs(queues[bob], index) == ["b"])
    #expect(queues[carol] == nil)
  }

  @Test func onlyQueuesThatWereEmptyWakeTheirSubscriber() {
    var index = ChannelIndex()
    var queues: [SubscriberID: CoalescingQueue] = [:]
    _ = index.subscribe(alice, toPageIDs: ["a", "b"])
    _ = index.subscribe(bob, toPageIDs: ["a", "b"])
    let a = index.existingKey(for: "a")!
    let b = index.existingKey(for: "b")!
    #expect(FanOut.publish([(a, 1)], index: index, queues: &queues).count == 2)
    _ = queues[bob]!.drain(max: 10)
    // alice still has a write scheduled; bob's queue was emptied and wakes again.
    #expect(FanOut.publish([(a, 2), (b, 3)], index: index, queues: &queues) == [bob])
    #expect(queues[alice]?.pending.map(\.lastUpdatedTime) == [2, 3])
    #expect(queues[alice]?.coalescedCount == 1)
  }

  @Test func changesOfPagesWithoutSubscribersAreSkipped() {
    var index = ChannelIndex()
    var queues: [SubscriberID: CoalescingQueue] = [:]
    _ = index.subscribe(alice, toPageIDs: ["a", "gone"])
    let gone = index.existingKey(for: "gone")!
    _ = FanOut.unsubscribe(alice, from: [gone], index: &index, queues: &queues)
    #expect(FanOut.publish([(gone, 1), (PageKey(999), 2)], index: index, queues: &queues) == [])
    #expect(queues.values.allSatisfy { $0.isEmpty })
  }

  @Test func unsubscribingDropsThePendingEntriesOfThosePagesOnly() {
    var index = ChannelIndex()
    var queues: [SubscriberID: CoalescingQueue] = [:]
    _ = index.subscribe(alice, toPageIDs: ["a", "b", "c"])
    _ = index.subscribe(bob, toPageIDs: ["b"])
    let keys = ["a", "b", "c"].map { index.existingKey(for: $0)! }
    _ = FanOut.publish(keys.map { ($0, 5) }, index: index, queues: &queues)
    #expect(FanOut.unsubscribe(alice, from: [keys[1], keys[2]], index: &index, queues: &queues) == 2)
    #expect(pageIDs(queues[alice], index) == ["a"])
    #expect(pageIDs(queues[bob], index) == ["b"])
    // "c" is released; its key, reused, must not bring alice an old entry.
    _ = index.subscribe(carol, toPageIDs: ["new"])
    #expect(index.existingKey(for: "new") == keys[2])
    #expect(pageIDs(queues[alice], index) == ["a"])
  }

  @Test func aRemovedSubscriberLosesItsQueueAndSubscriptions() {
    var index = ChannelIndex()
    var queues: [SubscriberID: CoalescingQueue] = [:]
    _ = index.subscribe(alice, toPageIDs: ["a", "b"])
    _ = FanOut.publish([(index.existingKey(for: "a")!, 1)], index: index, queues: &queues)
    #expect(FanOut.removeSubscriber(alice, index: &index, queues: &queues) == 2)
    #expect(queues[alice] == nil)
    #expect(index.channelCount == 0)
  }
}
