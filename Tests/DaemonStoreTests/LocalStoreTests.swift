import DaemonCore
import DaemonCoreTestKit
import EventLoopTestKit
import SQLiteStore
import SyncModel
import Testing

@testable import DaemonStore

@Suite struct LocalStoreTests {
  @Test func migratesFromZeroWithDesignsColumns() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try LocalStore(path: file.path)
    #expect(try store.synchronousSetting() == .integer(2))  // FULL
    store.close()
    #expect(permissions(file.path) == 0o600)
    #expect(try sqlite3(file.path, "PRAGMA user_version") == "4")
    #expect(try sqlite3(file.path, "PRAGMA journal_mode") == "wal")
    #expect(try sqlite3(file.path, "PRAGMA integrity_check") == "ok")
    #expect(
      try sqlite3(file.path, "SELECT group_concat(name, ',') FROM pragma_table_info('offline_page')")
        == "page_id,last_downloaded_timestamp,complete,recent_rank")
    #expect(
      try sqlite3(file.path, "SELECT group_concat(name, ',') FROM pragma_table_info('offline_action')")
        == "origin_page_id,from_page_id,impacted_page_id,type")
    #expect(
      try sqlite3(file.path, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .split(separator: "\n") == [
          "local_block", "local_page", "missing_page", "mutation_queue", "offline_action", "offline_page",
          "sent_mutation", "sync_meta",
        ])
    // Owner-only, and a client id made once: reopening keeps it.
    #expect(try sqlite3(file.path, "SELECT count(*) FROM sync_meta WHERE key = 'client_id'") == "1")
    let first = try sqlite3(file.path, "SELECT value FROM sync_meta WHERE key = 'client_id'")
    let again = try LocalStore(path: file.path)
    #expect(again.clientID.rawValue == first)
    again.close()
    #expect(try sqlite3(file.path, "PRAGMA user_version") == "4")
  }

  /// The page cache is capped (`[store] cache_kib`), not left at SQLite's 2 MiB: it was the largest part of the
  /// heap at the peak of a first sync of 10,000 pages.
  @Test func thePageCacheIsCappedAsConfigured() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try LocalStore(path: file.path)
    #expect(try store.cacheKiB() == LocalStore.defaultCacheKiB && LocalStore.defaultCacheKiB == 512)
    store.close()
    let small = try LocalStore(path: file.path, cacheKiB: 64)
    #expect(try small.cacheKiB() == 64)
    small.close()
  }

  @Test func forestRowsRoundTripThroughRestore() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    let structure = MapStructure(
      kinds: [id("P"): .page, id("D"): .database, id("R1"): .page, id("R2"): .page, id("X"): .page],
      inline: [id("P"): [id("D")]], rows: [id("D"): [id("R1"), id("R2")]])
    var forest = OfflineForest(databaseRowLimit: 50, recentLimit: 2)
    var changes: [ForestChange] = []
    changes.append(forest.add(.toggled, origin: id("P"), structure: structure))
    changes.append(forest.add(.favorite, origin: id("R1"), structure: structure))
    changes.append(forest.visit(id("X"), structure: structure))
    changes.append(forest.visit(id("R2"), structure: structure))
    // The third visit pushes X out of the recent set (limit 2): deletes and a removed page.
    changes.append(forest.visit(id("D"), structure: structure))
    // Removing the toggle deletes P's tree; R1 stays (favorite), R2 and D stay (recent).
    changes.append(forest.remove(.toggled, origin: id("P")))
    #expect(changes.contains { !$0.deletedActions.isEmpty && !$0.removedPages.isEmpty })
    try store.applyForestChange(changes[0], recentOrder: [])
    try store.applyForestChange(changes[1], recentOrder: [])
    try store.applyForestChange(changes[2], recentOrder: [id("X")])
    try store.applyForestChange(changes[3], recentOrder: [id("R2"), id("X")])
    try store.applyForestChange(changes[4], recentOrder: [id("D"), id("R2")])
    try store.applyForestChange(changes[5], recentOrder: forest.recentOrder)

    let rows = try store.loadForestRows()
    let offline = [id("P"), id("D"), id("R1"), id("R2"), id("X")].filter { forest.isOffline($0) }
    let expected = Set(offline.flatMap { forest.reasons(for: $0) })
    #expect(Set(rows.actions) == expected)
    #expect(rows.actions.count == expected.count)
    #expect(rows.recentOrder == [id("D"), id("R2")])
    #expect(Set(try store.catchUpMap().keys) == Set(offline))
    #expect(!forest.isOffline(id("X")) && !forest.isOffline(id("P")))

    let restored = try OfflineForest.restore(
      actions: rows.actions, recentOrder: rows.recentOrder, databaseRowLimit: 50, recentLimit: 2)
    #expect(restored.change.isEmpty)
    #expect(restored.forest.recentOrder == forest.recentOrder)
    for page in [id("P"), id("D"), id("R1"), id("R2"), id("X")] {
      #expect(Set(restored.forest.reasons(for: page)) == Set(forest.reasons(for: page)), "\(page)")
    }
  }

  @Test func recentOrderNamingAPageNotOfflineIsRefusedWhole() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    let change = ForestChange(
      insertedActions: [OfflineAction(origin: id("A"), from: nil, impacted: id("A"), type: .toggled)],
      addedPages: [id("A")])
    #expect(throws: LocalStoreError.recentPageNotOffline(id("Z"))) {
      try store.applyForestChange(change, recentOrder: [id("Z")])
    }
    // Rolled back: not even the inserted action stayed.
    #expect(try store.loadForestRows().actions.isEmpty)
    #expect(try store.catchUpMap().isEmpty)
  }

  @Test func editsGetConsecutiveIDsAndIncreasingTimesAcrossReopen() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    var store = try LocalStore(path: file.path)
    var made: [Mutation] = []
    made.append(
      try store.recordEdit(page: id("P"), action: .createPage(parent: nil, title: "a"), nowMillis: 1000))
    made.append(try store.recordEdit(page: id("P"), action: .setTitle("b"), nowMillis: 1000))
    store.close()
    store = try LocalStore(path: file.path)
    defer { store.close() }
    // The wall clock went backwards across the restart: the persisted clock still moves forward.
    made.append(try store.recordEdit(page: id("P"), action: .setTitle("c"), nowMillis: 500))
    made.append(
      try store.recordEdit(page: id("P"), action: .setProperty(name: "n", value: .number(2)), nowMillis: 2000)
    )
    #expect(made.map(\.id) == [1, 2, 3, 4])
    #expect(zip(made, made.dropFirst()).allSatisfy { $0.time < $1.time })
    #expect(made[2].time == HLCTimestamp(millis: 1000, counter: 2))
    #expect(try store.clockValue() == made[3].time)
    #expect(try store.pendingMutations(limit: 10) == made)
    #expect(try store.pendingMutations(limit: 2) == Array(made.prefix(2)))
    let look = try file.inspect()
    defer { look.close() }
    #expect(try scalar(look, "SELECT title FROM local_page WHERE id = 'P'") == .text("c"))
    #expect(try scalar(look, "SELECT properties FROM local_page WHERE id = 'P'") == .text(#"{"n":2}"#))
    #expect(try scalar(look, "SELECT sync_status FROM local_page WHERE id = 'P'") == .text("pending"))
    #expect(try store.status().pendingMutations == 4)
  }

  @Test func anEditAndItsQueueRowAreOneTransaction() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    _ = try store.recordEdit(page: id("P"), action: .createPage(parent: nil, title: "old"), nowMillis: 1000)
    let clockBefore = try store.clockValue()
    // Another writer takes mutation id 2: the edit's last statement (the queue insert) fails, after the clock,
    // the id counter and the local page were already written in the transaction.
    let look = try file.inspect()
    defer { look.close() }
    try look.execute(
      "INSERT INTO mutation_queue (id, type, page_id, data, created_at_ms) VALUES (2, 'x', 'Q', '{}', 0)", [])
    #expect(throws: SQLiteError.self) {
      _ = try store.recordEdit(page: id("P"), action: .setTitle("new"), nowMillis: 5000)
    }
    #expect(try scalar(look, "SELECT title FROM local_page WHERE id = 'P'") == .text("old"))
    #expect(try store.clockValue() == clockBefore)
    #expect(try scalar(look, "SELECT value FROM sync_meta WHERE key = 'next_mutation_id'") == .text("2"))
    try look.execute("DELETE FROM mutation_queue WHERE id = 2", [])
    let retried = try store.recordEdit(page: id("P"), action: .setTitle("new"), nowMillis: 5000)
    #expect(retried.id == 2)
    #expect(try scalar(look, "SELECT title FROM local_page WHERE id = 'P'") == .text("new"))
  }

  @Test func acknowledgeDropsAppliedAndKeepsRejectedAsConflicts() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    _ = try store.recordEdit(page: id("P"), action: .createPage(parent: nil, title: "p"), nowMillis: 10)
    _ = try store.recordEdit(page: id("Q"), action: .setTitle("q"), nowMillis: 11)
    _ = try store.recordEdit(page: id("P"), action: .setTitle("p2"), nowMillis: 12)
    let fourth = try store.recordEdit(page: id("R"), action: .deletePage, nowMillis: 13)
    _ = try store.recordEdit(page: id("R"), action: .setTitle("r"), nowMillis: 14)
    let outcome = try decodeJSON(
      BatchOutcome.self,
      """
      {"results": [
        {"mutationId": 1, "page": "P", "status": "applied"},
        {"mutationId": 2, "page": "Q", "status": "rejected", "reason": {"code": 5, "name": "page_deleted"}},
        {"mutationId": 3, "page": "P", "status": "duplicate"},
        {"mutationId": 5, "page": "R", "status": "rejected", "reason": {"code": 4, "name": "too_large"},
         "message": "page R would hold 16777300 bytes, over [limits] page_bytes (16777216 bytes)"}],
       "pages": {"P": 7}, "sequence": 7, "lastMutationId": 3, "epoch": "e1"}
      """)
    try store.acknowledge(outcome, nowMillis: 99)
    #expect(try store.pendingMutations(limit: 10) == [fourth])
    // The broker's words, when it gave some, after the reason.
    #expect(
      try store.conflicts() == [
        MutationConflict(
          mutationId: 2, page: id("Q"), reason: .pageDeleted, type: "set_title", message: "page_deleted (5)",
          createdAt: 11),
        MutationConflict(
          mutationId: 5, page: id("R"), reason: .tooLarge, type: "set_title",
          message:
            "too_large (4): page R would hold 16777300 bytes, over [limits] page_bytes (16777216 bytes)",
          createdAt: 14),
      ])
    let status = try store.status()
    #expect(status.pendingMutations == 1 && status.failedMutations == 2)
    #expect(status.lastSuccessfulSync == 99)
    let look = try file.inspect()
    defer { look.close() }
    #expect(try scalar(look, "SELECT sync_status FROM local_page WHERE id = 'P'") == .text("synced"))
    #expect(try scalar(look, "SELECT value FROM sync_meta WHERE key = 'lastMutationAt'") == .text("99"))
    #expect(try scalar(look, "SELECT value FROM sync_meta WHERE key = 'epoch'") == .text("e1"))
    // A rejected mutation is never resent and never dropped, even by a later acknowledgement.
    try store.acknowledge(
      try decodeJSON(
        BatchOutcome.self,
        #"{"results": [{"mutationId": 4, "page": "R", "status": "applied"}], "pages": {}, "lastMutationId": 4, "epoch": "e2"}"#
      ), nowMillis: 100)
    #expect(try store.pendingMutations(limit: 10).isEmpty)
    #expect(try store.conflicts().map(\.mutationId) == [2, 5])
    // A push answer from a broker with another epoch (a restored store) does not adopt it: only the catch-up's
    // full refetch may, once every page is fetched again.
    #expect(try store.epoch() == "e1")
  }

  /// Issue #7: a broker store restored from an older copy (new epoch) lacks what it acknowledged after the copy
  /// was taken; the device had dropped those mutations from its queue, so they were lost (the next push got a
  /// 409 gap). Acknowledged mutations are now kept and go back into the queue, with the rejected ones (their ids
  /// must be sent too, or the next ones leave a gap), in id order.
  @Test func acknowledgedMutationsGoBackToTheQueueForARestoredBroker() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    let first = try store.recordEdit(
      page: id("P"), action: .createPage(parent: nil, title: "p"), nowMillis: 10)
    let second = try store.recordEdit(page: id("Q"), action: .setTitle("q"), nowMillis: 11)
    let third = try store.recordEdit(page: id("P"), action: .setTitle("p2"), nowMillis: 12)
    let fourth = try store.recordEdit(page: id("P"), action: .setTitle("p3"), nowMillis: 13)
    try store.acknowledge(
      try decodeJSON(
        BatchOutcome.self,
        """
        {"results": [
          {"mutationId": 1, "page": "P", "status": "applied"},
          {"mutationId": 2, "page": "Q", "status": "rejected", "reason": {"code": 5, "name": "page_deleted"}},
          {"mutationId": 3, "page": "P", "status": "duplicate"}],
         "pages": {"P": 7}, "sequence": 7, "lastMutationId": 3, "epoch": "e1"}
        """), nowMillis: 99)
    #expect(try store.pendingMutations(limit: 10) == [fourth])
    #expect(try store.requeueForRestoredBroker() == 3)
    #expect(try store.pendingMutations(limit: 10) == [first, second, third, fourth])
    #expect(try store.conflicts().isEmpty)
    let look = try file.inspect()
    defer { look.close() }
    #expect(try scalar(look, "SELECT sync_status FROM local_page WHERE id = 'P'") == .text("pending"))
    // Again (a restart before the new epoch was adopted): nothing more to put back, nothing doubled.
    #expect(try store.requeueForRestoredBroker() == 0)
    #expect(try store.pendingMutations(limit: 10).map(\.id) == [1, 2, 3, 4])
    // The restored broker answers: acknowledged again, they are kept again.
    try store.acknowledge(
      try decodeJSON(
        BatchOutcome.self,
        """
        {"results": [
          {"mutationId": 1, "page": "P", "status": "duplicate"},
          {"mutationId": 2, "page": "Q", "status": "applied"},
          {"mutationId": 3, "page": "P", "status": "applied"}, {"mutationId": 4, "page": "P", "status": "applied"}],
         "pages": {"P": 3}, "sequence": 3, "lastMutationId": 4, "epoch": "e2"}
        """), nowMillis: 100)
    #expect(try store.pendingMutations(limit: 10).isEmpty)
    #expect(try scalar(look, "SELECT count(*) FROM sent_mutation") == .integer(4))
  }

  @Test func applyDeltaFullThenPartialAdvancesTheDownloadTime() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try store.applyForestChange(
      ForestChange(
        insertedActions: [OfflineAction(origin: id("P"), from: nil, impacted: id("P"), type: .toggled)],
        addedPages: [id("P")]), recentOrder: [])
    let look = try file.inspect()
    defer { look.close() }
    #expect(try scalar(look, "SELECT complete FROM offline_page WHERE page_id = 'P'") == .integer(0))
    let header = #""id": "P", "workspace": "W", "kind": "page", "title": "T1", "deleted": false"#
    try store.applyDelta(
      try decodeJSON(
        PageDelta.self,
        """
        {"id": "P", "since": 0, "lastUpdatedTime": 10, "full": true, "properties": {}, "blocks": [],
         "page": {\(header), "properties": {"a": 1, "b": "x"}, "databases": [], "lastUpdatedTime": 10,
           "blocks": [
             {"id": "b1", "type": "text", "text": "one", "attributes": {}, "position": 1, "deleted": false},
             {"id": "b2", "type": "text", "text": "two", "attributes": {}, "position": 2, "deleted": false}]}}
        """))
    #expect(try store.catchUpMap() == [id("P"): 10])
    #expect(try scalar(look, "SELECT complete FROM offline_page WHERE page_id = 'P'") == .integer(1))
    #expect(
      try scalar(look, "SELECT group_concat(id || '=' || text) FROM local_block") == .text("b1=one,b2=two"))
    #expect(try scalar(look, "SELECT properties FROM local_page") == .text(#"{"a":1,"b":"x"}"#))

    try store.applyDelta(
      try decodeJSON(
        PageDelta.self,
        """
        {"id": "P", "since": 10, "lastUpdatedTime": 12, "full": false,
         "page": {"id": "P", "workspace": "W", "kind": "page", "title": "T2", "deleted": false, "properties": {},
           "blocks": [], "lastUpdatedTime": 12},
         "properties": {"a": null, "c": true},
         "blocks": [
           {"id": "b1", "type": "text", "text": "one", "attributes": {}, "position": 1, "deleted": true},
           {"id": "b2", "type": "text", "text": "TWO", "attributes": {}, "position": 2, "deleted": false},
           {"id": "b3", "type": "todo", "text": "three", "attributes": {}, "position": 3, "deleted": false}]}
        """))
    #expect(try store.catchUpMap() == [id("P"): 12])
    #expect(try scalar(look, "SELECT title FROM local_page") == .text("T2"))
    #expect(try scalar(look, "SELECT properties FROM local_page") == .text(#"{"b":"x","c":true}"#))
    #expect(try scalar(look, "SELECT databases FROM local_page") == .text("[]"))
    #expect(
      try scalar(
        look, "SELECT group_concat(id || '=' || text) FROM (SELECT * FROM local_block ORDER BY position)")
        == .text("b2=TWO,b3=three"))

    // A full delta replaces everything: blocks and properties it does not name are gone.
    try store.applyDelta(
      try decodeJSON(
        PageDelta.self,
        """
        {"id": "P", "since": 0, "lastUpdatedTime": 20, "full": true, "properties": {}, "blocks": [],
         "page": {\(header), "properties": {}, "databases": [], "lastUpdatedTime": 20,
           "blocks": [{"id": "b3", "type": "todo", "text": "3", "attributes": {}, "position": 3, "deleted": false}]}}
        """))
    #expect(try store.catchUpMap() == [id("P"): 20])
    #expect(try scalar(look, "SELECT group_concat(id || '=' || text) FROM local_block") == .text("b3=3"))
    #expect(try scalar(look, "SELECT properties FROM local_page") == .text("{}"))
  }

  @Test func catchUpMapListsEveryOfflinePageWithItsDownloadTime() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    let rows = [id("P"), id("Q")].map { OfflineAction(origin: $0, from: nil, impacted: $0, type: .toggled) }
    try store.applyForestChange(
      ForestChange(insertedActions: rows, addedPages: [id("P"), id("Q")]), recentOrder: [])
    #expect(try store.catchUpMap() == [id("P"): 0, id("Q"): 0])
    #expect(try store.status().offlinePages == 2)
    try store.applyForestChange(
      ForestChange(deletedActions: [rows[1]], removedPages: [id("Q")]), recentOrder: [])
    #expect(try store.catchUpMap() == [id("P"): 0])
    #expect(try store.loadForestRows().actions == [rows[0]])
  }
}
