import DaemonCore
import DaemonCoreTestKit
import EventLoopTestKit
import RichText
import SQLiteStore
import SyncModel
import Testing

@testable import DaemonStore

/// A device whose store was restored from an older copy (or cloned): the broker answers `id_reused` for edits
/// under ids another copy used, and the device sends them again under a new client id, nothing lost.
@Suite struct ClientChangeTests {
  func outcome(_ results: [(UInt64, MutationResult.Status, RejectionReason?)], last: UInt64) -> BatchOutcome {
    BatchOutcome(
      results: results.map { MutationResult(mutationId: $0.0, page: id("P"), status: $0.1, reason: $0.2) },
      pages: [:], sequence: nil, lastMutationId: last, epoch: "e1")
  }

  /// Page P with block b1 (text "abc", its CRDT state), offline and stored.
  func prepared(_ file: TemporaryStore) throws -> LocalStore {
    let store = try LocalStore(path: file.path)
    try toggleOffline(store, ["P"])
    let document = TextDocument(text: "abc", client: "")
    let block = BlockState(
      id: id("b1"), type: "text", text: "abc", attributes: [:], position: 1, deleted: false, marks: [],
      crdt: TextOps(bytes: document.encoded()))
    let snapshot = PageSnapshot(
      id: id("P"), workspace: id("W"), kind: "page", parent: nil, title: "", deleted: false, properties: [:],
      blocks: [block], databases: [], view: nil, rows: nil, lastUpdatedTime: 1)
    try store.applyDelta(
      PageDelta(
        id: id("P"), since: 0, lastUpdatedTime: 1, full: true, page: snapshot, properties: [:], blocks: []))
    return store
  }

  func state(_ store: LocalStore, _ block: String) throws -> TextDocument {
    let file = try #require(
      try store.connection.query("SELECT crdt FROM local_block WHERE id = ?", [.text(block)]).first?.first)
    guard case .blob(let bytes) = file else { throw LocalStoreError.missingMeta("crdt") }
    return try TextDocument(encoded: bytes)
  }

  @Test func anIdReusedAnswerSendsTheQueueAgainUnderANewClient() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    var store = try prepared(file)
    let old = store.clientID
    // Typed and acknowledged before the copy: old@0..1.
    let typed = try #require(
      try store.recordTextEdit(block: id("b1"), edit: .splice(at: 3, delete: 0, insert: "12"), nowMillis: 5))
    try store.acknowledge(outcome([(typed.id, .applied, nil)], last: 1), nowMillis: 6)
    // After the restore: a title, then text typed as old@2..3 (the other copy's old@2.. are other characters).
    _ = try store.recordEdit(page: id("P"), action: .setTitle("after the restore"), nowMillis: 7)
    let splice = try #require(
      try store.recordTextEdit(block: id("b1"), edit: .splice(at: 0, delete: 1, insert: "XY"), nowMillis: 8))
    _ = try store.recordEdit(page: id("P"), action: .setTitle("later"), nowMillis: 9)
    #expect(try store.pendingMutations(limit: 10).map(\.id) == [2, 3, 4])
    #expect(splice.id == 3)

    // The broker: id 2 the same as it has (a re-send), 3 another copy's, so 4 too.
    let settlement = try store.settle(
      outcome([(2, .duplicate, nil), (3, .rejected, .idReused), (4, .rejected, .idReused)], last: 9),
      sent: [2, 3, 4], nowMillis: 10)
    let change = try #require(settlement.clientChange)
    #expect(change.previous == old && change.current != old && change.renumbered == 2)
    #expect(store.clientID == change.current)
    #expect(try store.conflicts().isEmpty)
    let queue = try store.pendingMutations(limit: 10)
    #expect(queue.map(\.id) == [1, 2], "numbered from 1 under the new client")
    #expect(queue.map(\.time) == [splice.time, queue[1].time], "times kept")
    guard case .spliceText(_, let ops) = queue[0].action else {
      Issue.record("\(queue[0].action)")
      return
    }
    let update = try ops.update()
    #expect(update.runs.map(\.client) == [change.current.rawValue] && update.runs.map(\.counter) == [0])
    #expect(update.deletes.map(\.client) == [""], "the deleted character is the first text's, as before")
    #expect(queue[1].action == .setTitle("later"))

    // The local state: the characters typed after the restore are the new client's; the text is unchanged.
    let document = try state(store, "b1")
    #expect(document.text == "XYbc12")
    #expect(document.nextCounter(for: change.current.rawValue) == 2)
    #expect(document.nextCounter(for: old.rawValue) == 2, "old@0..1, acknowledged before, stay")
    // Kept across a restart; the next edit follows under the new client; the old acknowledged ones are gone.
    store.close()
    store = try LocalStore(path: file.path)
    defer { store.close() }
    #expect(store.clientID == change.current)
    let next = try store.recordEdit(page: id("P"), action: .setTitle("next"), nowMillis: 11)
    #expect(next.id == 3)
    #expect(try store.connection.query("SELECT count(*) FROM sent_mutation") == [[.integer(0)]])
    #expect(try store.meta("retired_client_ids") == old.rawValue)
    // The broker's answers name the new client's ids; they settle the right rows.
    try store.markPushFailed(ids: [1], error: "503")
    #expect(
      try store.connection.query(
        "SELECT retry_count FROM mutation_queue WHERE status = 'pending' ORDER BY id")
        == [[.integer(1)], [.integer(0)], [.integer(0)]])
    try store.acknowledge(
      outcome([(1, .applied, nil), (2, .applied, nil), (3, .applied, nil)], last: 3), nowMillis: 12)
    #expect(try store.pendingMutations(limit: 10).isEmpty)
    #expect(try store.status().pendingMutations == 0)
  }

  /// A restored broker after the change: the old client's rejections are not sent again under the new one.
  @Test func aRestoredBrokerDoesNotRequeueTheOldClientsRejections() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try prepared(file)
    defer { store.close() }
    _ = try store.recordEdit(page: id("P"), action: .setTitle("refused"), nowMillis: 1)
    _ = try store.recordEdit(page: id("P"), action: .setTitle("reused"), nowMillis: 2)
    try store.acknowledge(
      outcome([(1, .rejected, .pageDeleted), (2, .rejected, .idReused)], last: 1), nowMillis: 3)
    #expect(try store.conflicts().map(\.mutationId) == [1])
    #expect(try store.pendingMutations(limit: 10).map(\.id) == [1])
    #expect(try store.requeueForRestoredBroker() == 0)
    #expect(try store.pendingMutations(limit: 10).map(\.action) == [.setTitle("reused")])
  }
}
