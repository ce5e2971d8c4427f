import DaemonCore
import DaemonCoreTestKit
import DaemonStore
import EventLoopTestKit
import SyncModel
import Testing

/// Offline pages the broker says this device may not see: marked missing by `purge`, listed and counted as
/// such, unmarked by a download, and gone with their last reason. Read back with the `sqlite3` command line too.
@Suite struct MissingPageTests {
  @Test func aGoneOfflinePageIsMarkedMissingOnceAndListedAndCounted() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try toggleOffline(store, ["NOPE", "K"])
    try store.applyDelta(try wholePage("K", time: 3))

    // "OTHER" is not offline: purged, never marked (a marker exists only for an offline page).
    let purge = try store.purge([id("NOPE"), id("OTHER")], nowMillis: 1_000)
    #expect(purge.foundMissing == [id("NOPE")])
    #expect(try sqlite3(file.path, "SELECT page_id || '@' || found_at_ms FROM missing_page") == "NOPE@1000")
    // Said again at the next catch-up: already marked, not found missing anew; the first time stays.
    #expect(try store.purge([id("NOPE")], nowMillis: 2_000).foundMissing.isEmpty)
    #expect(try sqlite3(file.path, "SELECT found_at_ms FROM missing_page") == "1000")

    let list = try store.offlineList()
    #expect(list.map(\.id) == [id("K"), id("NOPE")])
    #expect(list.map(\.missing) == [false, true])
    #expect(list.map(\.complete) == [true, false])
    #expect(try store.offlineEntry(id("NOPE"))?.missing == true)
    #expect(try store.status().missingPages == 1)
    #expect(try store.missingPages() == [id("NOPE")])
  }

  @Test func aDownloadClearsTheMarkAndSoDoesRemovingTheLastReason() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try toggleOffline(store, ["LATER", "GONE"])
    _ = try store.purge([id("LATER"), id("GONE")], nowMillis: 1)
    #expect(try store.status().missingPages == 2)

    // Made since on another device (or access given back): its download is stored, the mark goes with it.
    _ = try store.applyDeltas([try wholePage("LATER", time: 9)])
    #expect(try store.offlineEntry(id("LATER"))?.missing == false)
    #expect(try store.offlineEntry(id("LATER"))?.complete == true)

    // The user removes the reason: the page leaves the set and its mark with it (ON DELETE CASCADE).
    let gone = OfflineAction(origin: id("GONE"), from: nil, impacted: id("GONE"), type: .toggled)
    try store.applyForestChange(
      ForestChange(deletedActions: [gone], removedPages: [id("GONE")]), recentOrder: [])
    #expect(try sqlite3(file.path, "SELECT count(*) FROM missing_page") == "0")
    #expect(try store.status().missingPages == 0)
  }

  /// A purge keeps an offline page that holds pending mutations, unmarked. Once they are settled (rejected here)
  /// the page, which has no local copy, is among those to download whole again, so the daemon asks for it and
  /// the broker's `gone` marks it then; while one is still pending it is not.
  @Test func aPageAPurgeHeldIsToBeDownloadedOnceItsMutationsAreSettled() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try toggleOffline(store, ["NOPE"])
    let first = try store.recordEdit(
      page: id("NOPE"), action: .setView(filter: nil, sort: nil), nowMillis: 1_000)
    let second = try store.recordEdit(
      page: id("NOPE"), action: .setView(filter: nil, sort: nil), nowMillis: 1_001)
    #expect(try store.purge([id("NOPE")], nowMillis: 2_000) == LocalStore.Purge(), "held: unsent edits")
    #expect(try store.missingPages().isEmpty)

    func rejected(_ edit: Mutation) -> BatchOutcome {
      BatchOutcome(
        results: [
          MutationResult(mutationId: edit.id, page: id("NOPE"), status: .rejected, reason: .unknownPage)
        ],
        pages: [:], sequence: nil, lastMutationId: edit.id, epoch: "e1")
    }
    #expect(
      try store.settle(rejected(first), sent: [first.id], nowMillis: 3_000).settled.isEmpty, "one pending")
    #expect(try store.settle(rejected(second), sent: [second.id], nowMillis: 3_001).settled == [id("NOPE")])
    #expect(try store.purge([id("NOPE")], nowMillis: 4_000).foundMissing == [id("NOPE")])
    #expect(try sqlite3(file.path, "SELECT count(*) FROM mutation_queue WHERE status = 'rejected'") == "2")
  }
}
