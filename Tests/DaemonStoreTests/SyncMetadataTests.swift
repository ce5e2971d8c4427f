import DaemonCoreTestKit
import EventLoopTestKit
import SQLiteStore
import SyncModel
import Testing

@testable import DaemonStore

/// Push bookkeeping, the epoch, sync times and what `status` and `conflicts` report.
@Suite struct SyncMetadataTests {
  @Test func aFailedPushCountsRetriesOnPendingMutationsOnly() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    for n in 1...3 {
      _ = try store.recordEdit(page: id("P\(n)"), action: .setTitle("t"), nowMillis: UInt64(n))
    }
    try store.acknowledge(
      try decodeJSON(
        BatchOutcome.self,
        """
        {"results": [{"mutationId": 3, "page": "P3", "status": "rejected", "reason": {"code": 1, "name": "unknown_page"}}],
         "pages": {}, "lastMutationId": 3, "epoch": "e1"}
        """), nowMillis: 10)
    try store.markPushFailed(ids: [1, 2, 3], error: "broker unreachable")
    try store.markPushFailed(ids: [1], error: "HTTP 503")
    #expect(
      try sqlite3(
        file.path,
        "SELECT group_concat(id || ':' || retry_count || ':' || coalesce(last_error, '-'), ',') FROM (SELECT * FROM mutation_queue ORDER BY id)"
      ) == "1:2:HTTP 503,2:1:broker unreachable,3:0:unknown_page (1)")
    // Still pending: they are sent again.
    #expect(try store.pendingMutations(limit: 10).map(\.id) == [1, 2])
  }

  @Test func epochSyncTimesAndStatus() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    #expect(try store.epoch() == nil)
    var status = try store.status()
    #expect(status.lastSuccessfulSync == nil && status.lastSyncAttempt == nil && status.lastMutationAt == nil)
    try store.setEpoch("4259ddef")
    #expect(try store.epoch() == "4259ddef")
    try store.recordSyncAttempt(nowMillis: 500)
    try store.markSynced(nowMillis: 600)
    status = try store.status()
    #expect(status.lastSyncAttempt == 500 && status.lastSuccessfulSync == 600 && status.lastMutationAt == nil)
    let edit = try store.recordEdit(
      page: id("P"), action: .createPage(parent: nil, title: ""), nowMillis: 700)
    try store.acknowledge(try appliedOutcome([edit]), nowMillis: 800)
    status = try store.status()
    #expect(status.lastMutationAt == 800 && status.lastSuccessfulSync == 800)
    // The answer's epoch ("e1") is not adopted over the stored one: only a full refetch may change it.
    #expect(try store.epoch() == "4259ddef")
    #expect(try sqlite3(file.path, "SELECT value FROM sync_meta WHERE key = 'lastSyncAttempt'") == "500")
    store.close()
    // Kept across a restart.
    let reopened = try LocalStore(path: file.path)
    defer { reopened.close() }
    #expect(try reopened.status().lastSyncAttempt == 500)
    #expect(try reopened.epoch() == "4259ddef")
  }

  @Test func conflictsCarryTheActionTheMessageAndTheTime() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    _ = try store.recordEdit(
      page: id("P"), action: .addBlock(block: id("b"), type: "todo", text: "t", after: nil, attributes: [:]),
      nowMillis: 1_732_244_000_123)
    try store.markPushFailed(ids: [1], error: "timeout")
    try store.acknowledge(
      try decodeJSON(
        BatchOutcome.self,
        """
        {"results": [{"mutationId": 1, "page": "P", "status": "rejected", "reason": {"code": 9, "name": "unknown_block"}}],
         "pages": {}, "lastMutationId": 1, "epoch": "e1"}
        """), nowMillis: 2)
    #expect(
      try store.conflicts() == [
        MutationConflict(
          mutationId: 1, page: id("P"), reason: .unknownBlock, type: "add_block",
          message: "unknown_block (9)",
          createdAt: 1_732_244_000_123)
      ])
  }
}
