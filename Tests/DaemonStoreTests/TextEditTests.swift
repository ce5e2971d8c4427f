import DaemonCore
import DaemonCoreTestKit
import EventLoopTestKit
import RichText
import SQLiteStore
import SyncModel
import Testing

@testable import DaemonStore

/// Block text on the device: edits become CRDT operations on the stored state, committed with their queued
/// mutation; the broker's state and updates merge with unsent local edits; blocks without a state (stored before
/// the CRDT) are edited the old way.
@Suite struct TextEditTests {
  static let base = "The quick fox jumps."

  /// A whole page with block b1 as the broker sends it: its text and, unless `withState` is false (an older
  /// broker), its CRDT state.
  func page(_ document: TextDocument, time: UInt64, withState: Bool = true) -> PageDelta {
    let block = BlockState(
      id: id("b1"), type: "text", text: document.text, attributes: [:], position: 1, deleted: false,
      marks: document.marks, crdt: withState ? TextOps(bytes: document.encoded()) : nil)
    let snapshot = PageSnapshot(
      id: id("P"), workspace: id("W"), kind: "page", parent: nil, title: "", deleted: false, properties: [:],
      blocks: [block], databases: [], view: nil, rows: nil, lastUpdatedTime: time)
    return PageDelta(
      id: id("P"), since: 0, lastUpdatedTime: time, full: true, page: snapshot, properties: [:], blocks: [])
  }

  /// A partial delta carrying block b1's update since `since`.
  func update(_ update: TextUpdate, text: String, since: UInt64, time: UInt64) -> PageDelta {
    var header = page(TextDocument(), time: time).page
    header.blocks = []
    let block = BlockState(
      id: id("b1"), type: "text", text: text, attributes: [:], position: 1, deleted: false, marks: [],
      crdt: TextOps(update))
    return PageDelta(
      id: id("P"), since: since, lastUpdatedTime: time, full: false, page: header, properties: [:],
      blocks: [block])
  }

  func text(_ store: LocalStore) throws -> String { try store.localPage(id("P"))!.blocks[0].text }

  func openStore(_ file: TemporaryStore) throws -> LocalStore {
    let store = try LocalStore(path: file.path)
    try toggleOffline(store, ["P"])
    return store
  }

  @Test func aSpliceIsCRDTOperationsOnTheStoredStateQueuedInTheSameTransaction() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try openStore(file)
    defer { store.close() }
    try store.applyDelta(page(TextDocument(text: Self.base, client: ""), time: 5))

    let mutation = try #require(
      try store.recordTextEdit(
        block: id("b1"), edit: .splice(at: 10, delete: 0, insert: "brown "), nowMillis: 9))
    #expect(try text(store) == "The quick brown fox jumps.")
    guard case .spliceText(let block, let ops) = mutation.action else {
      Issue.record("expected splice_text, got \(mutation.action)")
      return
    }
    #expect(block == id("b1"))
    let update = try ops.update()
    #expect(update.runs.map(\.client) == [store.clientID.rawValue])
    #expect(update.runs.first?.text.map { String(String.UnicodeScalarView($0)) } == "brown ")
    #expect(try store.pendingMutations(limit: 10) == [mutation])
    // The stored state is the one the operations were made on: it renders the same text.
    #expect(
      try sqlite3(
        file.path, "SELECT text || '|' || legacy_text || '|' || (crdt IS NOT NULL) FROM local_block")
        == "The quick brown fox jumps.|0|1")
  }

  @Test func anOutOfRangeEditIsRefusedAndNothingIsQueued() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try openStore(file)
    defer { store.close() }
    try store.applyDelta(page(TextDocument(text: "abc", client: ""), time: 5))
    for edit in [
      TextEdit.splice(at: 4, delete: 0, insert: "x"), .splice(at: 1, delete: 3, insert: ""),
      .mark(from: 2, to: 9, type: .bold, value: nil, remove: false),
      .mark(from: 0, to: 1, type: .link, value: nil, remove: false),
    ] {
      #expect(throws: LocalStoreError.self) {
        try store.recordTextEdit(block: id("b1"), edit: edit, nowMillis: 9)
      }
    }
    #expect(throws: LocalStoreError.unknownBlock(id("nob"))) {
      try store.recordTextEdit(block: id("nob"), edit: .replace("x"), nowMillis: 9)
    }
    #expect(try store.pendingMutations(limit: 10).isEmpty)
    #expect(try text(store) == "abc")
  }

  @Test func aWholeTextReplacementIsTheFewestSplices() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try openStore(file)
    defer { store.close() }
    try store.applyDelta(page(TextDocument(text: Self.base, client: ""), time: 5))
    let mutation = try #require(
      try store.recordTextEdit(block: id("b1"), edit: .replace("The quick fox jumps high."), nowMillis: 9))
    guard case .spliceText(_, let ops) = mutation.action else {
      Issue.record("expected splice_text")
      return
    }
    let update = try ops.update()
    #expect(update.deletes.isEmpty)
    #expect(update.runs.count == 1 && update.runs[0].length == 5)
    // The same text again: nothing to do, nothing queued.
    #expect(
      try store.recordTextEdit(block: id("b1"), edit: .replace("The quick fox jumps high."), nowMillis: 10)
        == nil)
    #expect(try store.pendingMutations(limit: 10).count == 1)
  }

  @Test func remoteTextMergesWithPendingSplicesThroughDeltasAndARebase() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try openStore(file)
    defer { store.close() }
    let base = TextDocument(text: Self.base, client: "", seq: 5)
    try store.applyDelta(page(base, time: 5))
    _ = try store.recordTextEdit(
      block: id("b1"), edit: .splice(at: 10, delete: 0, insert: "brown "), nowMillis: 9)

    // Another device's splice reaches the broker (sequence 7) and comes as an update since 5.
    var broker = base
    var other = base
    broker.apply(try other.splice(at: 19, delete: 0, insert: " high", client: "other"), seq: 7)
    try store.applyDelta(update(broker.update(since: 5), text: broker.text, since: 5, time: 7))
    #expect(try text(store) == "The quick brown fox jumps high.")

    // A whole page (say the log no longer reaches back): the broker's state, then the unsent splice on top.
    try store.applyDelta(page(broker, time: 8))
    #expect(try text(store) == "The quick brown fox jumps high.")
    #expect(try store.pendingMutations(limit: 10).count == 1)
  }

  @Test func aMarkCarriesTheMutationsClockAndRenders() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try openStore(file)
    defer { store.close() }
    try store.applyDelta(page(TextDocument(text: Self.base, client: ""), time: 5))
    let mutation = try #require(
      try store.recordTextEdit(
        block: id("b1"), edit: .mark(from: 4, to: 9, type: .bold, value: nil, remove: false), nowMillis: 9))
    guard case .markText(_, let ops) = mutation.action else {
      Issue.record("expected mark_text")
      return
    }
    let mark = try #require(try ops.update().marks.first)
    #expect(mark.time == MarkTime(millis: mutation.time.millis, counter: mutation.time.counter))
    #expect(try store.localPage(id("P"))!.blocks[0].marks == [TextMark(type: "bold", start: 4, end: 9)])
  }

  @Test func aBlockWithoutAStateIsEditedAsWholeTextUntilTheBrokersStateArrives() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try openStore(file)
    defer { store.close() }
    // An older broker's page: text, no state.
    try store.applyDelta(page(TextDocument(text: Self.base, client: ""), time: 5, withState: false))
    let mutation = try #require(
      try store.recordTextEdit(
        block: id("b1"), edit: .splice(at: 10, delete: 0, insert: "brown "), nowMillis: 9))
    #expect(
      mutation.action == .editBlock(block: id("b1"), text: "The quick brown fox jumps.", attributes: nil))
    #expect(throws: LocalStoreError.textNotMergeable(id("b1"))) {
      try store.recordTextEdit(
        block: id("b1"), edit: .mark(from: 0, to: 3, type: .bold, value: nil, remove: false), nowMillis: 10)
    }
    // The broker's state arrives; the queued whole-text edit still shows, and the block stays whole-text until
    // that edit is acknowledged.
    try store.applyDelta(page(TextDocument(text: Self.base, client: ""), time: 6))
    #expect(try text(store) == "The quick brown fox jumps.")
    #expect(try sqlite3(file.path, "SELECT legacy_text FROM local_block") == "1")
    let next = try #require(
      try store.recordTextEdit(block: id("b1"), edit: .replace("The quick brown fox."), nowMillis: 11))
    #expect(next.action == .editBlock(block: id("b1"), text: "The quick brown fox.", attributes: nil))
  }

  @Test func aBlockCreatedAfterTheDeltasTimeArrivesWholeAndTakesSplices() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try openStore(file)
    defer { store.close() }
    try store.applyDelta(page(TextDocument(), time: 5).withoutBlocks)
    // Added by another device at sequence 6, then spliced at 7: the update since 5 holds all of it.
    var broker = TextDocument(text: "new block", client: "", seq: 6)
    var other = broker
    broker.apply(try other.splice(at: 3, delete: 0, insert: "er", client: "other"), seq: 7)
    try store.applyDelta(update(broker.update(since: 5), text: broker.text, since: 5, time: 7))
    #expect(try text(store) == "newer block")
    let mutation = try #require(
      try store.recordTextEdit(block: id("b1"), edit: .splice(at: 0, delete: 0, insert: "A "), nowMillis: 9))
    guard case .spliceText = mutation.action else {
      Issue.record("a block whose whole state arrived is edited by CRDT operations, got \(mutation.action)")
      return
    }
  }

  @Test func anUpdateWithoutTheBlocksEarlierTextKeepsTheBrokersText() throws {
    let file = TemporaryStore()
    defer { file.remove() }
    let store = try openStore(file)
    defer { store.close() }
    try store.applyDelta(page(TextDocument(), time: 5).withoutBlocks)
    // The block existed before 5 (its first text is not in the update): the device cannot rebuild its state.
    var broker = TextDocument(text: "old text", client: "", seq: 3)
    var other = broker
    broker.apply(try other.splice(at: 0, delete: 0, insert: "my ", client: "other"), seq: 7)
    try store.applyDelta(update(broker.update(since: 5), text: broker.text, since: 5, time: 7))
    #expect(try text(store) == "my old text")
    #expect(try sqlite3(file.path, "SELECT crdt IS NULL FROM local_block") == "1")
  }
}

extension PageDelta {
  /// The same page with no blocks.
  fileprivate var withoutBlocks: PageDelta {
    var copy = self
    copy.page.blocks = []
    return copy
  }
}
