import DaemonCore
import SeededRandom
import SyncModel
import Testing

/// The change stream's window (`ChangeFeed`): ids, resuming, coalescing for a reader behind, and what a reader
/// that fell out of the window or comes from another run gets.
@Suite struct ChangeFeedTests {
  /// A test event: its key (what the feed computes from the payload) and a value to tell it by.
  struct Event {
    var key: String?
    var value: String
  }
  typealias Feed = ChangeFeed<String, Event>

  /// The payloads of a reading, or nil if it was `.lost`.
  static func payloads(_ reading: Feed.Reading) -> [String]? {
    guard case .events(let entries) = reading else { return nil }
    return entries.map(\.payload.value)
  }

  static func ids(_ reading: Feed.Reading) -> [UInt64] {
    guard case .events(let entries) = reading else { return [] }
    return entries.map(\.id)
  }

  @Test func idsIncreaseFromTheFirstAndAReaderGetsWhatCameAfterIt() {
    var feed = Feed(capacity: 10, firstID: 1000)
    #expect(feed.newestID == 999)
    #expect(Self.payloads(feed.read(after: 999)) == [])
    #expect(feed.append(key: nil, payload: "a") == 1000)
    #expect(feed.append(key: nil, payload: "b") == 1001)
    #expect(feed.append(key: nil, payload: "c") == 1002)
    #expect(Self.payloads(feed.read(after: 999)) == ["a", "b", "c"])
    #expect(Self.payloads(feed.read(after: 1000)) == ["b", "c"])
    #expect(Self.payloads(feed.read(after: 1002)) == [])
    #expect(Self.ids(feed.read(after: 1000)) == [1001, 1002])
  }

  @Test func aReaderBehindGetsOnlyTheNewestEventOfEachKeyInOrderOfTheNewest() {
    var feed = Feed(capacity: 100, firstID: 1)
    feed.append(key: "page:a", payload: "a1")
    feed.append(key: "page:b", payload: "b1")
    feed.append(key: nil, payload: "conflict1")
    feed.append(key: "page:a", payload: "a2")
    feed.append(key: nil, payload: "conflict2")
    feed.append(key: "sync", payload: "s1")
    feed.append(key: "page:b", payload: "b2")
    feed.append(key: "sync", payload: "s2")
    #expect(Self.payloads(feed.read(after: 0)) == ["conflict1", "a2", "conflict2", "b2", "s2"])
    // From a position after a2, only what came after it, coalesced among itself.
    #expect(Self.payloads(feed.read(after: 4)) == ["conflict2", "b2", "s2"])
  }

  /// Read in pieces (a limit per call), a reader behind still ends with the newest of every key, and never gets
  /// an event that a later one in the window supersedes.
  @Test func readingInPiecesLosesNoKeysNewestEvent() {
    var random = SplitMix64(seed: 17)
    for round in 0..<50 {
      var feed = Feed(capacity: 64, firstID: 1)
      var newest: [String: String] = [:]
      var unkeyed: [String] = []
      for index in 0..<Int(random.next() % 60) {
        let choice = random.next() % 6
        if choice == 0 {
          unkeyed.append("u\(index)")
          feed.append(key: nil, payload: "u\(index)")
        } else {
          let key = "k\(choice)"
          newest[key] = "\(key)#\(index)"
          feed.append(key: key, payload: "\(key)#\(index)")
        }
      }
      let limit = 1 + Int(random.next() % 4)
      var position: UInt64 = 0
      var got: [String] = []
      while true {
        guard case .events(let entries) = feed.read(after: position, limit: limit) else {
          Issue.record("round \(round): lost within the window")
          return
        }
        if entries.isEmpty { break }
        #expect(entries.count <= limit)
        got += entries.map(\.payload.value)
        position = entries.last!.id
      }
      #expect(position == feed.newestID, "round \(round)")
      #expect(Set(got.filter { $0.hasPrefix("k") }) == Set(newest.values), "round \(round)")
      #expect(got.filter { $0.hasPrefix("u") } == unkeyed, "round \(round)")
      // Each key at most once: no superseded event was sent before its successor.
      let keys = got.filter { $0.hasPrefix("k") }.map { $0.split(separator: "#")[0] }
      #expect(keys.count == Set(keys).count, "round \(round): \(got)")
    }
  }

  @Test func theWindowKeepsTheNewestCapacityEventsAndAReaderOutsideItIsLost() {
    var feed = Feed(capacity: 3, firstID: 10)
    for payload in ["a", "b", "c", "d", "e"] { feed.append(key: nil, payload: payload) }
    #expect(feed.count == 3)
    #expect(feed.oldestID == 12)
    #expect(feed.newestID == 14)
    // After 11 the next is 12, still kept; after 10, 11 is gone.
    #expect(Self.payloads(feed.read(after: 11)) == ["c", "d", "e"])
    #expect(Self.payloads(feed.read(after: 10)) == nil)
    #expect(!feed.canResume(after: 10))
    #expect(feed.canResume(after: 11))
  }

  /// The window of 10,000 events (`[api] events_kept`'s default) holds each as its id and payload only, in a
  /// ring with room for 10,000, not the 16,384 an array doubling its way there would keep (1.3 MB of a daemon's
  /// first sync and of its rest after, now 0.56 MB).
  @Test func theWindowHoldsEachEventCompactlyAndNoMoreRoomThanItsCapacity() throws {
    #expect(MemoryLayout<ChangeFeed<ChangeEventKey, ChangeEvent>.Entry>.stride <= 56)
    let page = try EntityID(validating: "page")
    var feed = ChangeFeed<ChangeEventKey, ChangeEvent>(capacity: 10_000, firstID: 1, key: \.key)
    for time in 0..<UInt64(12_000) {
      feed.append(.page(id: page, lastDownloadedTimestamp: time, source: .remote))
    }
    #expect(feed.count == 10_000)
    // The allocator may round the last allocation up by a page or so.
    #expect(feed.reservedCapacity >= 10_000 && feed.reservedCapacity < 10_100, "\(feed.reservedCapacity)")
    guard case .events(let newest) = feed.read(after: 0 + 2_000) else {
      Issue.record("the window's oldest position is lost")
      return
    }
    #expect(newest.map(\.id) == [12_000], "a reader behind gets the newest of the page only")
  }

  @Test func aPositionFromAnotherRunIsLost() {
    var feed = Feed(capacity: 100, firstID: 5000)
    feed.append(key: nil, payload: "a")
    // Before this run's first id (an earlier run), and after its newest (a later run, or a made-up id).
    #expect(Self.payloads(feed.read(after: 4000)) == nil)
    #expect(Self.payloads(feed.read(after: 5001)) == nil)
    #expect(Self.payloads(feed.read(after: .max)) == nil)
    // The position just before the first event is this run's start: nothing lost.
    #expect(Self.payloads(feed.read(after: 4999)) == ["a"])
    // An empty feed: only its own start position is resumable.
    let empty = Feed(capacity: 10, firstID: 7)
    #expect(Self.payloads(empty.read(after: 6)) == [])
    #expect(Self.payloads(empty.read(after: 5)) == nil)
    #expect(Self.payloads(empty.read(after: 7)) == nil)
  }

  @Test func theEventsKeysCoalesceByPageAndKindAndRejectionsNever() throws {
    let home = try EntityID(validating: "home")
    let other = try EntityID(validating: "other")
    let page = ChangeEvent.page(id: home, lastDownloadedTimestamp: 5, source: .remote)
    #expect(page.key == .page(home))
    #expect(ChangeEvent.page(id: home, lastDownloadedTimestamp: nil, source: .local).key == page.key)
    #expect(ChangeEvent.page(id: other, lastDownloadedTimestamp: nil, source: .local).key != page.key)
    #expect(ChangeEvent.offline(id: home, available: true).key == .offline(home))
    #expect(ChangeEvent.sync(state: "live", connected: true, pendingMutations: 0).key == .sync)
    #expect(ChangeEvent.conflict(mutationId: 3, page: home, reason: "forbidden").key == nil)
    #expect(ChangeEvent.reset(reason: "x").key == nil)
  }
}

extension ChangeFeed where Key == String, Payload == ChangeFeedTests.Event {
  init(capacity: Int, firstID: UInt64) {
    self.init(capacity: capacity, firstID: firstID, key: \.key)
  }

  @discardableResult
  mutating func append(key: String?, payload: String) -> UInt64 {
    append(ChangeFeedTests.Event(key: key, value: payload))
  }
}
