import DaemonCoreTestKit
import EventLoopTestKit
import RichText
import SQLiteStore
import SyncModel
import Testing

@testable import DaemonStore

/// Numbers the store is handed from outside (the broker's answers, the local API's requests) at the edges of 64
/// bits: refused with an error, never a trap, and nothing of the call is written.
@Suite struct UntrustedNumberTests {
  /// A delta whose `lastUpdatedTime` is above 2^63-1 (the strict reader takes up to 2^64-1) trapped the daemon
  /// converting it for SQLite, at every start (the fetch was repeated). Now it is `numberOutOfRange`.
  @Test func aDeltaTimeAbove2To63IsRefusedAndNothingIsStored() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try toggleOffline(store, ["P"])
    for time in [UInt64(Int64.max) + 1, UInt64.max] {
      #expect(throws: LocalStoreError.numberOutOfRange("page P's lastUpdatedTime", time)) {
        try store.applyDelta(try wholePage("P", time: time, title: "hostile"))
      }
      let outcomes = try store.applyDeltas([try wholePage("P", time: time), try wholePage("Q", time: 3)])
      #expect(outcomes.map { $0 == nil } == [false, true])
    }
    #expect(try store.localPage(id("P")) == nil)
    #expect(try store.catchUpMap() == [id("P"): 0])
    try store.applyDelta(try wholePage("P", time: UInt64(Int64.max), title: "largest"))
    #expect(try store.localPage(id("P"))?.lastUpdatedTime == UInt64(Int64.max))
  }

  /// A batch answer naming mutation id 2^63 trapped the daemon recording it; the same push at the next start
  /// trapped it again. Now nothing of that answer is recorded and the mutation stays queued.
  @Test func aBatchAnswerWithAMutationIdAbove2To63IsRefusedAndTheQueueKept() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    let edit = try store.recordEdit(page: id("P"), action: .createPage(parent: nil, title: "t"), nowMillis: 1)
    let hostile = BatchOutcome(
      results: [
        MutationResult(mutationId: edit.id, page: id("P"), status: .applied),
        MutationResult(mutationId: UInt64(Int64.max) + 1, page: id("P"), status: .applied),
      ], pages: [:], sequence: nil, lastMutationId: 1, epoch: "e")
    #expect(throws: LocalStoreError.numberOutOfRange("the broker's mutationId", UInt64(Int64.max) + 1)) {
      try store.acknowledge(hostile, nowMillis: 2)
    }
    #expect(try store.pendingMutations(limit: 10).map(\.id) == [edit.id])
    #expect(try store.status().lastSuccessfulSync == nil)
  }

  /// `POST /v1/blocks/ID/splice {"at": 1, "delete": 9223372036854775807}`: `at + delete` overflowed and stopped
  /// the daemon. Now it is the same error as any range outside the text.
  @Test func aSpliceWhoseEndOverflowsIsARangeError() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try toggleOffline(store, ["P"])
    let document = TextDocument(text: "abc", client: "")
    let block = BlockState(
      id: id("b1"), type: "text", text: document.text, attributes: [:], position: 1, deleted: false,
      marks: [], crdt: TextOps(bytes: document.encoded()))
    let snapshot = PageSnapshot(
      id: id("P"), workspace: id("W"), kind: "page", parent: nil, title: "", deleted: false, properties: [:],
      blocks: [block], databases: [], view: nil, rows: nil, lastUpdatedTime: 2)
    try store.applyDelta(
      PageDelta(
        id: id("P"), since: 0, lastUpdatedTime: 2, full: true, page: snapshot, properties: [:], blocks: []))
    for (at, delete) in [(1, Int.max), (3, Int.max), (0, Int.max), (1, Int.min)] {
      do {
        _ = try store.recordTextEdit(
          block: id("b1"), edit: .splice(at: at, delete: delete, insert: ""), nowMillis: 3)
        Issue.record("splice at \(at) delete \(delete) was recorded")
      } catch LocalStoreError.invalidTextEdit(let why) {
        #expect(why.contains("out of range") || why.contains("outside"), "\(why)")
      }
    }
    // The text type itself (which the broker and apps use too) checks by the same rule.
    var plain = TextDocument(text: "abc", client: "")
    #expect(throws: TextError.self) {
      _ = try plain.splice(at: 2, delete: Int.max, insert: "", client: "c")
    }
    #expect(try store.pendingMutations(limit: 10).isEmpty)
  }
}
