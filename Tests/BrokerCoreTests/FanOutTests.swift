import Testing

@testable import BrokerCore

/// The `FanOut` the broker runs, one behaviour at a time (FanOutModelTests mixes them at random).
@Suite struct FanOutTests {
  static let limit = 100

  /// Three subscribers: alice sees w1, bob w1 and w2, carol w2.
  struct Fixture {
    var fanOut = FanOut()
    let alice: SubscriberID
    let bob: SubscriberID
    let carol: SubscriberID

    init() {
      alice = fanOut.addSubscriber(workspaces: ["w1"])
      bob = fanOut.addSubscriber(workspaces: ["w1", "w2"])
      carol = fanOut.addSubscriber(workspaces: ["w2"])
    }

    /// Subscribes through the store path: `pages` are page → workspace (nil: does not exist yet).
    @discardableResult
    mutating func subscribe(_ subscriber: SubscriberID, _ pages: KeyValuePairs<String, String?>)
      -> FanOut.Subscription
    {
      fanOut.subscribe(
        subscriber,
        storePages: pages.map { FanOut.StorePage(id: $0.key, workspace: $0.value, lastUpdated: 1) },
        limit: FanOutTests.limit)
    }

    func pending(_ subscriber: SubscriberID) -> [String] {
      fanOut.pending(of: subscriber).map { "\(fanOut.index.name(of: $0.page))@\($0.lastUpdatedTime)" }
    }

    mutating func flush() -> [SubscriberID] {
      var taken = ContiguousArray<SubscriberID>()
      fanOut.takeDirty(into: &taken)
      return Array(taken)
    }
  }

  /// Issue #16, item 10: ids were a counter (`&+= 1` on a UInt32) that wrapped onto live sessions after 2^32
  /// connections and stopped the broker at UInt32.max. Now a freed id is handed out first: however many streams
  /// come and go, ids stay below the most ever open at once, and no live id is handed out twice.
  @Test func idsOfStreamsThatComeAndGoStayBelowTheMostOpenAtOnce() {
    var fanOut = FanOut()
    var live: [SubscriberID] = []
    for round in 0..<200_000 {
      // Between one and three open at a time: a reconnect churn.
      if live.count < 3 && (live.isEmpty || round % 3 != 0) {
        let id = fanOut.addSubscriber(workspaces: ["w1"])
        #expect(!live.contains(id), "round \(round): live id \(id.rawValue) handed out again")
        live.append(id)
      } else {
        fanOut.removeSubscriber(live.removeFirst())
      }
      #expect(live.allSatisfy { $0.rawValue < 3 }, "round \(round): ids grow with churn")
    }
    #expect(fanOut.subscriberCount == live.count)
  }

  @Test func everySubscriberOfAChangedPageThatMaySeeItsWorkspaceGetsItOnce() {
    var f = Fixture()
    f.subscribe(f.alice, ["a": "w1", "b": "w1"])
    f.subscribe(f.bob, ["b": "w1"])
    f.subscribe(f.carol, ["c": "w2"])
    f.fanOut.publish(pageID: "a", workspace: "w1", lastUpdated: 7)
    f.fanOut.publish(pageID: "b", workspace: "w1", lastUpdated: 8)
    f.fanOut.publish(pageID: "b", workspace: "w1", lastUpdated: 9)
    f.fanOut.publish(pageID: "nobody-follows", workspace: "w1", lastUpdated: 9)
    #expect(f.pending(f.alice) == ["a@7", "b@9"])
    #expect(f.pending(f.bob) == ["b@9"])
    #expect(f.pending(f.carol) == [])
    #expect(f.fanOut.coalescedCount == 2)
    #expect(f.flush() == [f.alice, f.bob])
    #expect(f.fanOut.violations() == [])
  }

  @Test func aPageOfAnotherWorkspaceIsNeverQueuedWhateverTheSubscriptionSays() {
    var f = Fixture()
    // Subscribed before the page existed: allowed, but it turns out to be w2's.
    #expect(f.subscribe(f.alice, ["later": nil]).denied == [])
    f.subscribe(f.carol, ["later": nil])
    f.fanOut.publish(pageID: "later", workspace: "w2", lastUpdated: 3)
    #expect(f.pending(f.alice) == [])
    #expect(f.pending(f.carol) == ["later@3"])
    #expect(f.flush() == [f.carol])
    // Now the index knows its workspace: a frame naming it again is refused for alice, by either path.
    let key = f.fanOut.knownKeys(of: ["later"])!
    #expect(f.fanOut.subscribe(f.alice, knownPages: key, limit: Self.limit).denied == ["later"])
    #expect(f.subscribe(f.alice, ["later": "w2"]).denied == ["later"])
    #expect(f.fanOut.violations() == [])
  }

  @Test func aNarrowedGrantStopsNotificationsAtOncePendingOnesIncluded() {
    var f = Fixture()
    f.subscribe(f.bob, ["one": "w1", "two": "w2"])
    f.fanOut.publish(pageID: "one", workspace: "w1", lastUpdated: 4)
    f.fanOut.publish(pageID: "two", workspace: "w2", lastUpdated: 5)
    #expect(f.pending(f.bob) == ["one@4", "two@5"])
    f.fanOut.setWorkspaces(["w1"], of: f.bob)
    #expect(f.pending(f.bob) == ["one@4"], "the pending w2 notification is dropped")
    f.fanOut.publish(pageID: "two", workspace: "w2", lastUpdated: 6)
    #expect(f.pending(f.bob) == ["one@4"], "and no new one is queued")
    // The subscription itself stays until the broker withdraws it; widened again, it is notified again.
    #expect(f.fanOut.subscriptionCount(of: f.bob) == 2)
    f.fanOut.setWorkspaces(["w1", "w2"], of: f.bob)
    f.fanOut.publish(pageID: "two", workspace: "w2", lastUpdated: 7)
    #expect(f.pending(f.bob) == ["one@4", "two@7"])
    #expect(f.fanOut.violations() == [])
  }

  @Test func theDirtyListHoldsEachQueuedSubscriberOnceAndNoRemovedOne() {
    var f = Fixture()
    f.subscribe(f.alice, ["a": "w1"])
    f.subscribe(f.bob, ["b": "w1"])
    f.subscribe(f.carol, ["c": "w2"])
    f.fanOut.publish(pageID: "a", workspace: "w1", lastUpdated: 1)
    f.fanOut.publish(pageID: "c", workspace: "w2", lastUpdated: 2)
    f.fanOut.publish(pageID: "b", workspace: "w1", lastUpdated: 3)
    f.fanOut.publish(pageID: "a", workspace: "w1", lastUpdated: 4)
    #expect(f.fanOut.dirtyList == [f.alice, f.carol, f.bob])
    // Alice goes; the last on the list takes her place, and a newcomer reuses her id but was queued nothing.
    f.fanOut.removeSubscriber(f.alice)
    #expect(f.fanOut.dirtyList == [f.bob, f.carol])
    let dave = f.fanOut.addSubscriber(workspaces: ["w1"])
    #expect(dave == f.alice)
    #expect(f.flush() == [f.bob, f.carol])
    #expect(f.fanOut.dirtyList == [])
    #expect(f.fanOut.violations() == [])
    // A subscriber whose socket took only part of its queue is not on the list again until queued more.
    var drained: [(page: PageKey, lastUpdatedTime: UInt64)] = []
    f.subscribe(f.bob, ["a": "w1"])
    f.fanOut.publish(pageID: "b", workspace: "w1", lastUpdated: 5)
    f.fanOut.publish(pageID: "a", workspace: "w1", lastUpdated: 5)
    #expect(f.flush() == [f.bob])
    #expect(f.fanOut.drain(f.bob, max: 1, into: &drained) == 1)
    #expect(f.fanOut.dirtyList == [])
    #expect(f.fanOut.pendingCount(of: f.bob) == 1, "one left for the drain callback")
    f.fanOut.publish(pageID: "b", workspace: "w1", lastUpdated: 6)
    #expect(f.fanOut.dirtyList == [f.bob])
  }

  @Test func unsubscribingDropsThosePendingEntriesAndAReusedKeyBringsNothingStale() {
    var f = Fixture()
    f.subscribe(f.alice, ["a": "w1", "b": "w1", "c": "w1"])
    f.subscribe(f.bob, ["b": "w1"])
    for page in ["a", "b", "c"] { f.fanOut.publish(pageID: page, workspace: "w1", lastUpdated: 5) }
    let c = f.fanOut.index.existingKey(for: "c")!
    #expect(f.fanOut.unsubscribe(f.alice, fromPageIDs: ["b", "c", "b", "nope", "bad id!"]) == ["b", "c"])
    #expect(f.pending(f.alice) == ["a@5"])
    #expect(f.pending(f.bob) == ["b@5"])
    // "c" lost its channel; its key, reused for another page, must not bring alice an old entry.
    f.subscribe(f.carol, ["new": "w2"])
    #expect(f.fanOut.index.existingKey(for: "new") == c)
    #expect(f.pending(f.alice) == ["a@5"])
    #expect(f.fanOut.violations() == [])
  }

  @Test func aRevokedTokenKeepsItsSubscriberButNothingReachesIt() {
    var f = Fixture()
    f.subscribe(f.bob, ["a": "w1", "b": "w2"])
    f.fanOut.publish(pageID: "a", workspace: "w1", lastUpdated: 1)
    #expect(f.fanOut.removeAllSubscriptions(of: f.bob) == 2)
    #expect(f.fanOut.isLive(f.bob))
    #expect(f.pending(f.bob) == [])
    #expect(f.subscribe(f.bob, ["a": "w1"]).denied == ["a"])
    #expect(f.fanOut.index.channelCount == 0)
    #expect(f.fanOut.removeSubscriber(f.bob) == 0)
    #expect(f.fanOut.violations() == [])
  }

  @Test func bothSubscribePathsDecideAlikeAndStopAtTheLimit() {
    var byStore = Fixture()
    var byIndex = Fixture()
    let pages = (0..<8).map { "p\($0)" }
    // The index learns every page's workspace through another subscriber (what a store read would say).
    let facts = pages.enumerated().map {
      FanOut.StorePage(id: $1, workspace: $0 % 2 == 0 ? "w1" : "w2", lastUpdated: 1)
    }
    _ = byIndex.fanOut.subscribe(byIndex.bob, storePages: facts, limit: Self.limit)
    let keys = byIndex.fanOut.knownKeys(of: pages)!
    let fromIndex = byIndex.fanOut.subscribe(byIndex.alice, knownPages: keys, limit: 3)
    let fromStore = byStore.fanOut.subscribe(byStore.alice, storePages: facts, limit: 3)
    #expect(fromIndex == fromStore)
    #expect(fromStore == FanOut.Subscription(added: 3, total: 3, denied: ["p1", "p3", "p5", "p6", "p7"]))
    // Pages already followed do not count again.
    let again = byStore.fanOut.subscribe(byStore.alice, storePages: facts, limit: 3)
    #expect(again == FanOut.Subscription(added: 0, total: 3, denied: ["p1", "p3", "p5", "p6", "p7"]))
    #expect(byIndex.fanOut.violations() == [] && byStore.fanOut.violations() == [])
  }
}
