import EventLoopTestKit
import Testing

@testable import BrokerCore

/// Memory of the index: what a subscription costs at the scale of design benchmark B3, and that churn through many
/// distinct pages gives everything back. Figures are the index's structural estimate (from capacities, so
/// deterministic); resident memory is printed for comparison, never asserted.
@Suite struct ChannelIndexMemoryTests {
  @Test func aThousandDevicesOnTheSameThousandPagesCostUnder100BytesASubscription() {
    let rssBefore = residentBytes()
    var index = ChannelIndex()
    let pageIDs = (0..<1_000).map(uuidLikePageID)
    for device in 0..<1_000 {
      let added = index.subscribe(SubscriberID(UInt32(device)), toPageIDs: pageIDs)
      #expect(added == 1_000)
    }
    #expect(index.totalSubscriptions == 1_000_000)
    #expect(index.channelCount == 1_000)
    let perSubscription = Double(index.estimatedMemoryBytes) / 1_000_000
    #expect(perSubscription < 100)
    let rssPerSubscription = rssBefore.flatMap { before in residentBytes().map { Double($0 - before) / 1e6 } }
    print(
      "B3 shape, 1,000 × the same 1,000 pages: \(index.estimatedMemoryBytes) bytes estimated,",
      "\(perSubscription) per subscription; resident growth \(rssPerSubscription.map { "\($0)" } ?? "?") per one"
    )

    // Every subscriber of a page is found, and removing every device empties the index.
    #expect(index.subscribers(of: index.existingKey(for: pageIDs[500])!).count == 1_000)
    for device in 0..<1_000 {
      let removed = index.removeSubscriber(SubscriberID(UInt32(device)))
      #expect(removed == 1_000)
    }
    #expect(index.channelCount == 0)
    #expect(index.estimatedMemoryBytes == 0)
  }

  @Test func aThousandDevicesOnAThousandPagesEachCostUnder128BytesASubscription() {
    // The other extreme: every page has one subscriber, so every subscription also pays for a channel and its id
    // (36 bytes of the figure are the id itself; about 110 in all).
    let rssBefore = residentBytes()
    var index = ChannelIndex()
    for device in 0..<1_000 {
      let pageIDs = (device * 1_000..<(device + 1) * 1_000).map(uuidLikePageID)
      let added = index.subscribe(SubscriberID(UInt32(device)), toPageIDs: pageIDs)
      #expect(added == 1_000)
    }
    #expect(index.channelCount == 1_000_000)
    let perSubscription = Double(index.estimatedMemoryBytes) / 1_000_000
    #expect(perSubscription < 128)
    let rssPerSubscription = rssBefore.flatMap { before in residentBytes().map { Double($0 - before) / 1e6 } }
    print(
      "1,000 × 1,000 distinct pages (36-byte ids): \(index.estimatedMemoryBytes) bytes estimated,",
      "\(perSubscription) per subscription; resident growth \(rssPerSubscription.map { "\($0)" } ?? "?") per one"
    )
  }

  @Test func churnThroughDistinctPagesOneAtATimeLeavesNothingBehind() {
    var index = ChannelIndex()
    let device = SubscriberID(7)
    _ = index.subscribe(SubscriberID(1), toPageIDs: ["kept"])
    let start = index.estimatedMemoryBytes
    var peak = start
    for n in 0..<100_000 {
      let added = index.subscribe(device, toPageIDs: [uuidLikePageID(n)])
      let removed = index.unsubscribe(device, from: [index.existingKey(for: uuidLikePageID(n))!])
      if added != 1 || removed != 1 {
        Issue.record("page \(n): subscribed \(added), unsubscribed \(removed)")
        break
      }
      peak = max(peak, index.estimatedMemoryBytes)
    }
    #expect(index.channelCount == 1)
    #expect(index.totalSubscriptions == 1)
    // Back to the start but for the dictionary entry of a second subscriber.
    #expect(index.estimatedMemoryBytes < start + 256)
    #expect(peak < start + 1_024)
    #expect(index.violations() == [])
  }

  @Test func churnThroughDistinctPagesInBulkGivesTheMemoryBack() {
    var random = SplitMix64(seed: 0x3E3_0000)
    var index = ChannelIndex()
    let start = index.estimatedMemoryBytes
    let pageIDs = (0..<100_000).map(uuidLikePageID)
    for round in 0..<2 {
      // Many devices hold overlapping slices, then leave in an order unrelated to the one they came in.
      for device in 0..<10 {
        let slice = pageIDs[device * 9_000..<device * 9_000 + 19_000].shuffled(using: &random)
        _ = index.subscribe(SubscriberID(UInt32(device)), toPageIDs: slice)
      }
      #expect(index.channelCount == 100_000, "round \(round)")
      #expect(index.estimatedMemoryBytes > start + 100_000 * 36)
      for device in [3, 9, 0, 5, 1, 8, 2, 7, 4, 6] {
        let keys = index.subscriptions(of: SubscriberID(UInt32(device))).shuffled(using: &random)
        _ = index.unsubscribe(SubscriberID(UInt32(device)), from: keys.prefix(keys.count / 2))
        _ = index.removeSubscriber(SubscriberID(UInt32(device)))
        if device == 1 { #expect(index.violations() == [], "round \(round), half the devices gone") }
      }
      #expect(index.channelCount == 0, "round \(round)")
      #expect(index.totalSubscriptions == 0, "round \(round)")
      #expect(index.estimatedMemoryBytes == start, "round \(round)")
    }
  }

  @Test func memoryFollowsTheLiveChannelsDown() {
    // A key still in use at the end of the array pins the key array (keys are handed out and cannot move), but
    // ids, the key table and the sets shrink to what is live.
    var index = ChannelIndex()
    let pageIDs = (0..<50_000).map(uuidLikePageID)
    _ = index.subscribe(SubscriberID(1), toPageIDs: pageIDs)
    _ = index.subscribe(SubscriberID(2), toPageIDs: pageIDs.suffix(1))
    let full = index.estimatedMemoryBytes
    _ = index.removeSubscriber(SubscriberID(1))
    #expect(index.channelCount == 1)
    #expect(index.names.capacity < 1_024)
    #expect(index.keySlots.count <= 8)
    #expect(index.estimatedMemoryBytes < full / 2)
    print("50,000 pages, then all but the last released: \(full) bytes, then \(index.estimatedMemoryBytes)")
    #expect(index.violations() == [])
  }
}
