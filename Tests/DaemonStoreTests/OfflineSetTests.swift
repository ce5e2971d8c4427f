import DaemonCore
import DaemonCoreTestKit
import EventLoopTestKit
import SQLiteStore
import SyncModel
import Testing

@testable import DaemonStore

/// The offline set as the daemon reads and maintains it: entries and reasons, dropping and purging local
/// copies, and the store as the forest's structure.
@Suite struct OfflineSetTests {
  @Test func droppingLocalCopiesKeepsOfflinePagesAndUnsentWork() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try toggleOffline(store, ["A"])
    for page in ["A", "B", "C", "F"] {
      try store.applyDelta(try wholePage(page, time: 5, blocks: [("\(page)1", "x", 1)]))
    }
    let pending = try store.recordEdit(page: id("C"), action: .setTitle("unsent"), nowMillis: 1)
    // A rejected mutation is kept in the queue, not in the page: it does not hold the copy.
    _ = try store.recordEdit(page: id("F"), action: .setTitle("refused"), nowMillis: 2)
    try store.acknowledge(
      try decodeJSON(
        BatchOutcome.self,
        """
        {"results": [{"mutationId": 2, "page": "F", "status": "rejected", "reason": {"code": 5, "name": "page_deleted"}}],
         "pages": {}, "lastMutationId": 2, "epoch": "e1"}
        """), nowMillis: 3)

    #expect(try store.dropLocalCopies([id("A"), id("B"), id("C"), id("F"), id("Z")]) == [id("B"), id("F")])
    #expect(
      try sqlite3(file.path, "SELECT group_concat(id) FROM (SELECT id FROM local_page ORDER BY id)") == "A,C")
    #expect(
      try sqlite3(
        file.path, "SELECT group_concat(page_id) FROM (SELECT page_id FROM local_block ORDER BY page_id)")
        == "A,C")
    #expect(try store.hasLocalCopy(id("C")))
    #expect(try !store.hasLocalCopy(id("B")))
    #expect(try store.conflicts().map(\.mutationId) == [2])

    // Once its edit is acknowledged, C's copy may go too.
    try store.acknowledge(try appliedOutcome([pending]), nowMillis: 4)
    #expect(try store.dropLocalCopies([id("C")]) == [id("C")])
    #expect(try sqlite3(file.path, "SELECT group_concat(id) FROM local_page") == "A")
  }

  @Test func acknowledgedPagesAreDownloadedWholeAgainBecauseALosingEditChangesNothingOnTheBroker() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try toggleOffline(store, ["P", "Q", "R"])
    for page in ["P", "Q", "R"] { try store.applyDelta(try wholePage(page, time: 5, blocks: [])) }
    let lost = try store.recordEdit(page: id("P"), action: .setTitle("older, lost"), nowMillis: 1)
    let unsent = try store.recordEdit(page: id("R"), action: .setTitle("still queued"), nowMillis: 2)
    // The broker applied P's edit but a newer title won: P's sequence did not move, no notification will come.
    let settled = try store.acknowledge(try appliedOutcome([lost]), nowMillis: 3)
    #expect(settled == [id("P")])
    #expect(
      try sqlite3(
        file.path,
        "SELECT group_concat(page_id || ':' || last_downloaded_timestamp || ':' || complete) FROM "
          + "(SELECT * FROM offline_page ORDER BY page_id)") == "P:0:1,Q:5:1,R:5:1")
    // The next catch-up asks for P from 0, so the broker answers it whole, and P stays showable meanwhile.
    #expect(try store.catchUpMap()[id("P")] == 0)
    #expect(try store.localPage(id("P"))?.syncStatus == .synced)
    #expect(try store.acknowledge(try appliedOutcome([unsent]), nowMillis: 4) == [id("R")])
  }

  /// Found by `make faults` (seed 6 replays it): a row created here in an offline database, rejected by the
  /// broker (the database was deleted meanwhile), stayed in the database's local `rows` for good: the broker's
  /// database did not change, so nothing came to correct it. Its database is downloaded whole again, like the row.
  @Test func aRejectedRowLeavesItsDatabaseToBeDownloadedWholeAgain() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try toggleOffline(store, ["D", "Q"])
    try store.applyDelta(try wholePage("D", time: 5, kind: "database"))
    try store.applyDelta(try wholePage("Q", time: 5))
    let row = try store.recordEdit(
      page: id("R"), action: .createRow(database: id("D"), title: "R", properties: [:]), nowMillis: 1)
    #expect(try sqlite3(file.path, "SELECT rows FROM local_page WHERE id = 'D'") == #"["R"]"#)
    let settled = try store.acknowledge(
      try decodeJSON(
        BatchOutcome.self,
        """
        {"results": [{"mutationId": \(row.id), "page": "R", "status": "rejected",
                      "reason": {"code": 5, "name": "page_deleted"}}],
         "pages": {}, "lastMutationId": \(row.id), "epoch": "e1"}
        """), nowMillis: 2)
    #expect(settled == [id("R"), id("D")])
    #expect(try store.catchUpMap()[id("D")] == 0)
    #expect(try store.catchUpMap()[id("Q")] == 5)
  }

  @Test func purgeDropsGonePagesButKeepsTheirReasons() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try toggleOffline(store, ["P", "Q", "K"])
    for page in ["P", "Q", "K"] {
      try store.applyDelta(try wholePage(page, time: 10, blocks: [("\(page)1", "x", 1)]))
    }
    _ = try store.recordEdit(page: id("Q"), action: .setTitle("unsent"), nowMillis: 1)
    // Q holds an unsent edit: not missing (its create may simply not be pushed yet).
    #expect(
      try store.purge([id("P"), id("Q")], nowMillis: 7)
        == LocalStore.Purge(dropped: [id("P")], foundMissing: [id("P")]))
    #expect(
      try sqlite3(
        file.path,
        "SELECT group_concat(page_id || '=' || complete || '/' || last_downloaded_timestamp) FROM (SELECT * FROM offline_page ORDER BY page_id)"
      ) == "K=1/10,P=0/0,Q=0/0")
    #expect(
      try sqlite3(file.path, "SELECT group_concat(id) FROM (SELECT id FROM local_page ORDER BY id)") == "K,Q")
    #expect(try sqlite3(file.path, "SELECT count(*) FROM local_block WHERE page_id = 'P'") == "0")
    #expect(try sqlite3(file.path, "SELECT count(*) FROM offline_action") == "3")
    #expect(try store.catchUpMap() == [id("K"): 10, id("P"): 0, id("Q"): 0])
  }

  /// A fetch of a batch reads the download times of its own pages only (it read the whole set's, 10,000 rows for
  /// 100 pages, in a first sync): the same times `catchUpMap` has, 0 for a page never downloaded or not offline,
  /// and a corrupt time is an error, as there.
  @Test func aBatchsDownloadTimesAreItsPagesOwn() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try LocalStore(path: file.path)
    defer { store.close() }
    try toggleOffline(store, ["P", "Q", "K"])
    try store.applyDelta(try wholePage("K", time: 10))
    try store.applyDelta(try wholePage("P", time: 4))
    let times = try store.downloadTimes(of: ids("K", "Q", "gone"))
    #expect(times == [id("K"): 10, id("Q"): 0, id("gone"): 0])
    #expect(try store.catchUpMap().filter { times[$0.key] != nil } == [id("K"): 10, id("Q"): 0])
    #expect(try store.downloadTimes(of: [EntityID]()).isEmpty)

    _ = try sqlite3(file.path, "UPDATE offline_page SET last_downloaded_timestamp = -1 WHERE page_id = 'Q'")
    #expect(throws: LocalStoreError.self) { try store.downloadTimes(of: ids("K", "Q")) }
    #expect(try store.downloadTimes(of: ids("K", "P")) == [id("K"): 10, id("P"): 4])
  }

  /// `GET /v1/offline` reads the set a page of entries at a time (the ids after the last one read, and the
  /// reasons of those ids only): every entry comes once, in id order, with all its reasons and none of its
  /// neighbours', wherever the pages' ends fall (ids that are prefixes of one another, reasons from several
  /// origins).
  @Test func theOfflineListIsReadInPagesWithEachEntrysOwnReasons() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    #expect(try store.offlineListPage(after: nil, limit: 3).isEmpty)

    let ids = ["p", "p1", "p10", "p100", "p2", "p20", "q", "q-", "q_", "r"] + (0..<23).map { "s\($0)" }
    try toggleOffline(store, ids)
    // More reasons from other origins on some pages: the range read of a page's reasons must not lose them.
    let extra = ["p10", "p2", "q", "s5", "s9"].flatMap { page in
      [
        OfflineAction(origin: id("z"), from: id("zz"), impacted: id(page), type: .toggled),
        OfflineAction(origin: id(page), from: nil, impacted: id(page), type: .favorite),
      ]
    }
    try store.applyForestChange(ForestChange(insertedActions: extra), recentOrder: [])
    for pageSize in [1, 3, 7, 33, 34, 256] {
      var pages: [[OfflineEntry]] = []
      repeat {
        pages.append(try store.offlineListPage(after: pages.last?.last?.id, limit: pageSize))
      } while pages.last!.count == pageSize
      #expect(pages.dropLast().allSatisfy { $0.count == pageSize }, "page size \(pageSize)")
      #expect(pages.last!.count < pageSize)
      let entries = pages.flatMap { $0 }
      #expect(try store.offlineList() == entries)
      #expect(
        entries.map(\.id.rawValue) == ids.sorted(by: { Array($0.utf8).lexicographicallyPrecedes($1.utf8) }))
      for entry in entries {
        // One page's own query, as `pagesync why` reads it.
        #expect(try store.offlineEntry(entry.id) == entry, "page size \(pageSize): \(entry.id)")
      }
      #expect(entries.first { $0.id == id("q") }?.reasons.count == 3)
    }
  }

  @Test func offlineEntriesListReasonsByOriginThenType() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    let structure = MapStructure(
      kinds: [id("P"): .page, id("D"): .database, id("R"): .page, id("A"): .page],
      inline: [id("P"): [id("D")]], rows: [id("D"): [id("R")]])
    var forest = OfflineForest()
    try store.applyForestChange(forest.add(.toggled, origin: id("P"), structure: structure), recentOrder: [])
    try store.applyForestChange(forest.visit(id("R"), structure: structure), recentOrder: forest.recentOrder)
    try store.applyForestChange(
      forest.add(.favorite, origin: id("R"), structure: structure), recentOrder: [id("R")])
    try store.applyForestChange(
      forest.add(.toggled, origin: id("A"), structure: structure), recentOrder: [id("R")])
    try store.applyDelta(try wholePage("R", time: 7))

    let list = try store.offlineList()
    #expect(list.map(\.id.rawValue) == ["A", "D", "P", "R"])
    let r = try #require(list.last)
    #expect(r.complete && r.lastDownloadedTimestamp == 7)
    #expect(
      r.reasons == [
        OfflineAction(origin: id("P"), from: id("D"), impacted: id("R"), type: .toggled),
        OfflineAction(origin: id("R"), from: nil, impacted: id("R"), type: .favorite),
        OfflineAction(origin: id("R"), from: nil, impacted: id("R"), type: .recent),
      ])
    #expect(r.reasons == forest.reasons(for: id("R")))
    #expect(try store.reasons(for: id("R")) == r.reasons)
    #expect(try store.offlineEntry(id("R")) == r)
    #expect(try store.offlineEntry(id("D")) == list[1])
    #expect(list[1].complete == false && list[1].lastDownloadedTimestamp == 0)
    #expect(try store.offlineEntry(id("Z")) == nil)
    #expect(try store.reasons(for: id("Z")).isEmpty)
  }

  @Test func theStoreAnswersAsTheForestsStructure() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try store.applyDelta(try wholePage("P", time: 1, databases: ["D", "GONE", "LATER"]))
    try store.applyDelta(
      try wholePage("D", time: 1, kind: "database", parent: "P", rows: ["R1", "R2", "R3"]))
    try store.applyDelta(try wholePage("GONE", time: 1, kind: "database", parent: "P"))
    try store.applyDelta(try wholePage("R1", time: 1, parent: "D"))
    _ = try store.recordEdit(page: id("GONE"), action: .deletePage, nowMillis: 1)

    #expect(store.kind(of: id("P")) == .page)
    #expect(store.kind(of: id("D")) == .database)
    #expect(store.kind(of: id("GONE")) == nil)  // deleted here
    #expect(store.kind(of: id("LATER")) == nil)  // not downloaded
    #expect(store.inlineDatabases(of: id("P")) == [id("D"), id("LATER")])
    #expect(store.inlineDatabases(of: id("Z")).isEmpty)
    #expect(store.rowsInView(of: id("D"), limit: 2) == [id("R1"), id("R2")])
    #expect(store.rowsInView(of: id("P"), limit: 2).isEmpty)

    var forest = OfflineForest(databaseRowLimit: 2, recentLimit: 5)
    let change = try store.readingStructure { forest.add(.toggled, origin: id("P"), structure: $0) }
    #expect(Set(change.addedPages) == [id("P"), id("D"), id("LATER"), id("R1"), id("R2")])
    try store.applyForestChange(change, recentOrder: [])
    #expect(Set(try store.catchUpMap().keys) == [id("P"), id("D"), id("LATER"), id("R1"), id("R2")])

    // A read that fails is not "no databases": readingStructure throws, and the walk's change is not used.
    _ = try sqlite3(file.path, "UPDATE local_page SET databases = 'not json' WHERE id = 'P'")
    var next = forest
    #expect(throws: LocalStoreError.self) {
      _ = try store.readingStructure { next.refresh(id("P"), structure: $0) }
    }
    // Called directly, a failed read answers []; the error it records does not leak into the next operation.
    #expect(store.inlineDatabases(of: id("P")).isEmpty)
    #expect(try store.readingStructure { _ in 1 } == 1)
    // The same for a database's rows: JSON that is not a list of ids is an error, not an empty view.
    for corrupt in ["[1, 2]", "[\"R1\"", "{}"] {
      _ = try sqlite3(file.path, "UPDATE local_page SET rows = '\(corrupt)' WHERE id = 'D'")
      #expect(throws: LocalStoreError.self, "rows \(corrupt)") {
        _ = try store.readingStructure { $0.rowsInView(of: id("D"), limit: 2) }
      }
    }
  }
}
