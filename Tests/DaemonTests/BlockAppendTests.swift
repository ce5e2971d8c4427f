import DaemonCoreTestKit
import DaemonStore
import FoundationEssentials
import SyncModel
import Testing
import Web

@testable import Daemon

/// `POST /v1/pages/ID/blocks` without `after` appends, as every editor does (DESIGN.md, `block add`): the queued
/// `add_block` goes last wherever it applies — the broker's page as it is then, this device's copy — whether or
/// not this device stores the page. Checked with the one placement rule both apply (`BlockPlacement`).
@Suite struct BlockAppendTests {
  /// The broker's page when the mutation arrives: three blocks, the last appended by another device.
  static let brokerPage = [
    BlockPlacement.Slot(id: id("b1"), position: 1), BlockPlacement.Slot(id: id("b2"), position: 2),
    BlockPlacement.Slot(id: id("other"), position: 3),
  ]

  /// The `after` of the one `add_block` queued, and the block it adds.
  static func queuedAddBlock(_ store: LocalStore) throws -> (block: EntityID, after: EntityID?) {
    let added = try store.pendingMutations(limit: 100).compactMap { mutation -> (EntityID, EntityID?)? in
      guard case .addBlock(let block, _, _, let after, _) = mutation.action else { return nil }
      return (block, after)
    }
    try #require(added.count == 1)
    return added[0]
  }

  /// Where the broker puts the queued block on `brokerPage`: the index among the page's blocks.
  static func brokerIndex(_ store: LocalStore) throws -> Int {
    let (block, after) = try queuedAddBlock(store)
    let position = BlockPlacement.place(after: after, among: brokerPage.filter { $0.id != block }).position
    return brokerPage.filter { $0.position < position }.count
  }

  @Test func aBlockAddedToAPageThisDeviceDoesNotStoreGoesLast() throws {
    // The page is not offline here (its copy was dropped once its edits were acknowledged): the daemon cannot
    // name its last block, and sent `after: null`, which puts a block first.
    let harness = try DaemonHarness(api: true)
    harness.goLive()
    let added = try harness.answer(
      harness.request(.POST, "/v1/pages/far/blocks", body: #"{"id":"b3","text":"three"}"#), "block add")
    #expect(added.head.status.code == 201)
    #expect(try Self.brokerIndex(harness.store) == 3, "after every block the broker's page has")
    try harness.shutdown()
  }

  @Test func aBlockAddedToAStoredPageGoesLastHereAndOnTheBroker() throws {
    let harness = try DaemonHarness(
      prepare: { store in
        try toggleOffline(store, ["a"])
        try storePages(store, [Broker.page("a", time: 1)])
      }, api: true)
    // Offline (never started): edits of a stored page are taken.
    for (block, text) in [("b1", "one"), ("b2", "two")] {
      let body = #"{"id":"\#(block)","text":"\#(text)"}"#
      #expect(
        try harness.answer(harness.request(.POST, "/v1/pages/a/blocks", body: body), block).head.status.code
          == 201)
    }
    _ = try harness.answer(
      harness.request(.POST, "/v1/pages/a/blocks", body: #"{"id":"b3","text":"three"}"#), "block add")
    #expect(try harness.store.localPage(id("a"))?.blocks.map(\.id.rawValue) == ["b1", "b2", "b3"])
    // On the broker, another device appended `other` meanwhile: an append goes after it too.
    let queued = try harness.store.pendingMutations(limit: 100).compactMap { mutation -> EntityID?? in
      guard case .addBlock(let block, _, _, let after, _) = mutation.action, block == id("b3") else {
        return nil
      }
      return after
    }
    let after = try #require(queued.first)
    #expect(BlockPlacement.place(after: after, among: Self.brokerPage).position > 3)
    try harness.shutdown()
  }

  @Test func firstStillPutsABlockFirstAndCannotBeGivenWithAfter() throws {
    let harness = try DaemonHarness(api: true)
    harness.goLive()
    let first = try harness.answer(
      harness.request(.POST, "/v1/pages/far/blocks", body: #"{"id":"b0","text":"zero","first":true}"#),
      "first")
    #expect(first.head.status.code == 201)
    #expect(try Self.brokerIndex(harness.store) == 0)

    let both = try harness.answer(
      harness.request(
        .POST, "/v1/pages/far/blocks", body: #"{"id":"b9","text":"x","after":"b1","first":true}"#),
      "after and first")
    #expect(both.head.status.code == 400)
    #expect(both.body.readableString.contains(#"give \"after\" or \"first\", not both"#))
    #expect(try harness.store.pendingMutations(limit: 100).count == 1, "nothing queued for the bad request")
    try harness.shutdown()
  }
}
