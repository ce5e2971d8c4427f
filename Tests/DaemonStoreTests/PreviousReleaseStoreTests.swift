import DaemonCore
import DaemonCoreTestKit
import DaemonStore
import EventLoopTestKit
import RichText
import SyncModel
import Testing

/// A file of Tests/Fixtures/previous-release (made by the release before block text became a CRDT; its README
/// says how).
private func previousRelease(_ name: String, file: String = #filePath) -> String {
  file.split(separator: "/", omittingEmptySubsequences: false).dropLast(2).joined(separator: "/")
    + "/Fixtures/previous-release/" + name
}

/// Texts compared as Unicode scalars: `String ==` is canonical equivalence, and b4's decomposed accents must
/// stay decomposed.
private func scalars(_ text: String) -> [Unicode.Scalar] { Array(text.unicodeScalars) }

/// The old device file opened by this release's LocalStore, on a copy (a store migrates the file it opens).
private final class UpgradedDevice {
  let file = TemporaryStore()
  /// `id hex(text)` of every local block, and the queue's rows, read from the copy before this release opened it.
  let textsBefore: String
  let queueBefore: String
  let store: LocalStore

  init() throws {
    let copy = try runToCompletion("cp", [previousRelease("pagesyncd.sqlite"), file.path])
    try #require(copy.status == 0, "cp: \(copy.errorOutput)")
    #expect(try sqlite3(file.path, "PRAGMA user_version") == "2")
    textsBefore = try sqlite3(file.path, "SELECT id || ' ' || hex(text) FROM local_block ORDER BY id")
    queueBefore = try sqlite3(file.path, "SELECT * FROM mutation_queue ORDER BY id")
    store = try LocalStore(path: file.path)
  }

  deinit {
    store.close()
    file.remove()
  }

  /// `id text crdt-present legacy_text` of the page's local blocks, in order.
  func blockRows(_ page: String) throws -> String {
    try sqlite3(
      file.path,
      """
      SELECT id || ' ' || (crdt IS NOT NULL) || ' ' || legacy_text FROM local_block WHERE page_id = '\(page)'
      ORDER BY position, id
      """)
  }
}

/// A whole page as this release's broker sends it for a page stored before the upgrade: each block's text with
/// its CRDT state, no marks.
private func upgradedBrokerPage(
  _ page: String, title: String, time: UInt64, blocks: [(id: String, document: TextDocument)]
) -> PageDelta {
  let states = blocks.enumerated().map { index, block in
    BlockState(
      id: id(block.id), type: block.id == "b4" ? "heading" : "text", text: block.document.text,
      attributes: [:], position: Double(index), deleted: false, marks: [],
      crdt: TextOps(bytes: block.document.encoded()))
  }
  return PageDelta(
    id: id(page), since: 0, lastUpdatedTime: time, full: true,
    page: PageSnapshot(
      id: id(page), workspace: id("w1"), kind: "page", parent: nil, title: title, deleted: false,
      properties: [:], blocks: states, databases: [], view: nil, rows: nil, lastUpdatedTime: time),
    properties: [:], blocks: [])
}

/// "Upgrade without loss" (issue #15 item 3), device side: the store file of a device of the previous release,
/// with old-style whole-text `edit_block` mutations queued while the broker was down, opened by this release.
@Suite struct PreviousReleaseStoreTests {
  /// P1's texts on the old broker (the device's copy before its offline edits).
  static let brokerTexts: [(id: String, text: String)] = [
    ("b1", "Hello, world"),
    ("b2", "Grüße aus Köln — naïve café ☕"),
    ("b3", "日本語のテキスト 🎉 emoji"),
    ("b4", "Cafe\u{301} cre\u{300}me (decomposed: NFD)"),
    ("b5", ""),
  ]
  /// The device's texts: its queued edits shown on its copy.
  static let deviceTexts: [String: [(id: String, text: String)]] = [
    "P1": [
      ("b1", "Hello, brave new world"),
      ("b2", "Grüße aus Zürich — naïve café ☕☕"),
      ("b3", "日本語の新しいテキスト 🎉🎊 emoji!"),
      ("b4", "Cafe\u{301} cre\u{300}me (decomposed: NFD)"),
      ("b5", ""),
    ],
    "P2": [
      ("c1", "plain ASCII line"),
      ("c2", "two lines\r\nand a\ttab"),
      ("c3", "added offline, then edited: ünïcödé"),
    ],
    "P4": [("d1", "untouched: ½ ⅓ ¼ — Ω≈ç√")],
  ]
  /// The queue the old daemon wrote, ids 1 to 8.
  static let queued: [MutationAction] = [
    .editBlock(block: id("b1"), text: "Hello, brave new world", attributes: nil),
    .editBlock(block: id("b2"), text: "Grüße aus Köln — naïve café ☕☕", attributes: nil),
    .editBlock(block: id("b2"), text: "Grüße aus Zürich — naïve café ☕☕", attributes: nil),
    .editBlock(block: id("b3"), text: "日本語の新しいテキスト 🎉🎊 emoji!", attributes: nil),
    .setTitle("Upgrade notes (edited offline)"),
    .setTitle("Second page, edited offline"),
    .addBlock(
      block: id("c3"), type: "text", text: "added offline: ünïcödé", after: id("c2"), attributes: [:]),
    .editBlock(block: id("c3"), text: "added offline, then edited: ünïcödé", attributes: nil),
  ]

  /// Expects the page's local blocks to be `expected`, ids and texts as Unicode scalars.
  func expectBlocks(
    _ store: LocalStore, _ page: String, _ expected: [(id: String, text: String)],
    sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    let blocks = try #require(try store.localPage(id(page)), sourceLocation: sourceLocation).blocks
    #expect(blocks.map(\.id.rawValue) == expected.map(\.id), sourceLocation: sourceLocation)
    for (block, wanted) in zip(blocks, expected) {
      #expect(
        scalars(block.text) == scalars(wanted.text), "\(block.id): \(block.text)",
        sourceLocation: sourceLocation)
      #expect(block.marks == [], sourceLocation: sourceLocation)
    }
  }

  @Test func theOldFileMigratesKeepingEveryTextItsQueueAndCompletePagesToDownloadOnce() throws {
    let device = try UpgradedDevice()
    let path = device.file.path
    #expect(try sqlite3(path, "PRAGMA user_version; PRAGMA integrity_check") == "4\nok")
    #expect(
      try sqlite3(path, "SELECT id || ' ' || hex(text) FROM local_block ORDER BY id") == device.textsBefore)
    for (page, texts) in Self.deviceTexts { try expectBlocks(device.store, page, texts) }
    // No state yet (it comes from the broker), nothing marked as an old edit yet.
    #expect(
      try sqlite3(path, "SELECT count(*) FROM local_block WHERE crdt IS NOT NULL OR legacy_text != 0") == "0")

    // The old queue, untouched and decodable, still to send.
    #expect(try sqlite3(path, "SELECT * FROM mutation_queue ORDER BY id") == device.queueBefore)
    let pending = try device.store.pendingMutations(limit: 100)
    #expect(pending.map(\.id) == Array(1...8))
    #expect(pending.map(\.action) == Self.queued)
    #expect(
      pending.map(\.page) == [id("P1"), id("P1"), id("P1"), id("P1"), id("P1"), id("P2"), id("P2"), id("P2")])

    // Pages with blocks are downloaded whole once (their states), P4 too, which has no queued edit (an
    // acknowledged edit would reset P1's and P2's anyway); the page without blocks keeps its time. All stay
    // complete, so they are shown offline meanwhile.
    #expect(try device.store.catchUpMap() == [id("P1"): 0, id("P2"): 0, id("P3"): 13, id("P4"): 0])
    #expect(try sqlite3(path, "SELECT group_concat(complete) FROM offline_page") == "1,1,1,1")
    #expect(try device.store.localPage(id("P1"))?.title == "Upgrade notes (edited offline)")
    #expect(try device.store.localPage(id("P3"))?.title == "No blocks here")
  }

  /// The first download after the upgrade (whole pages, with states) rebases the queued old edits: the local
  /// copy still shows them until the broker has merged them, then shows the broker's merged state.
  @Test func aQueuedOldEditSurvivesTheRebaseOnTheUpgradedBrokersState() throws {
    let device = try UpgradedDevice()
    let store = device.store
    // The upgraded broker's states: each old text as first text (`backfillTextStates`).
    var documents = Self.brokerTexts.map { (id: $0.id, document: TextDocument(text: $0.text, client: "")) }
    try store.applyDelta(upgradedBrokerPage("P1", title: "Upgrade notes", time: 9, blocks: documents))
    try store.applyDelta(
      upgradedBrokerPage(
        "P2", title: "Second page", time: 12,
        blocks: [("c1", "plain ASCII line"), ("c2", "two lines\r\nand a\ttab")].map {
          (id: $0.0, document: TextDocument(text: $0.1, client: ""))
        }))

    for (page, texts) in Self.deviceTexts { try expectBlocks(store, page, texts) }
    #expect(try store.localPage(id("P1"))?.title == "Upgrade notes (edited offline)")
    #expect(try store.localPage(id("P1"))?.syncStatus == .pending)
    // Every block has the broker's state now; the edited ones show their queued whole text over it.
    #expect(try device.blockRows("P1") == "b1 1 1\nb2 1 1\nb3 1 1\nb4 1 0\nb5 1 0")
    #expect(try device.blockRows("P2") == "c1 1 0\nc2 1 0\nc3 1 1")
    #expect(try store.pendingMutations(limit: 100).map(\.action) == Self.queued)

    // Until then a whole-text edit of such a block goes the old way, on the text shown; a mark waits.
    let edit = try #require(
      try store.recordTextEdit(block: id("b1"), edit: .splice(at: 22, delete: 0, insert: "."), nowMillis: 1))
    #expect(edit.action == .editBlock(block: id("b1"), text: "Hello, brave new world.", attributes: nil))
    #expect(
      throws: LocalStoreError.textNotMergeable(id("b1")),
      performing: {
        try store.recordTextEdit(
          block: id("b1"), edit: .mark(from: 0, to: 1, type: .bold, value: nil, remove: false), nowMillis: 2)
      })

    // The broker applies the queue (each edit_block as its own splices) and answers; its next whole page is the
    // truth, and the blocks are mergeable again.
    let pending = try store.pendingMutations(limit: 100)
    #expect(pending.count == 9)
    for (index, entry) in documents.enumerated() {
      let last = pending.compactMap { mutation -> String? in
        if case .editBlock(let block, let text?, _) = mutation.action, block.rawValue == entry.id {
          text
        } else {
          nil
        }
      }.last
      if let last { _ = documents[index].document.replaceText(with: last, client: "@broker", seq: 16) }
    }
    try store.acknowledge(try appliedOutcome(pending), nowMillis: 3)
    try store.applyDelta(
      upgradedBrokerPage("P1", title: "Upgrade notes (edited offline)", time: 16, blocks: documents))
    var merged = Self.deviceTexts["P1"]!
    merged[0].text = "Hello, brave new world."
    try expectBlocks(store, "P1", merged)
    #expect(try device.blockRows("P1") == "b1 1 0\nb2 1 0\nb3 1 0\nb4 1 0\nb5 1 0")
    #expect(try store.localPage(id("P1"))?.syncStatus == .synced)
    let splice = try #require(
      try store.recordTextEdit(block: id("b4"), edit: .splice(at: 0, delete: 0, insert: "★ "), nowMillis: 4))
    guard case .spliceText(let block, _) = splice.action else {
      Issue.record("a migrated block is spliced as \(splice.action)")
      return
    }
    #expect(block == id("b4"))
    #expect(
      scalars(try #require(try store.localPage(id("P1"))).blocks[3].text)
        == scalars("★ Cafe\u{301} cre\u{300}me (decomposed: NFD)"))
  }

  /// Before its state arrives a migrated block is edited the old way, by whole text, compared as Unicode
  /// scalars: the same text precomposed (NFC) is a change to send (`String ==` would call it equal and drop it),
  /// the very same scalars are not.
  @Test func aWholeTextEditOfAMigratedBlockIsComparedScalarByScalar() throws {
    let device = try UpgradedDevice()
    let decomposed = "Cafe\u{301} cre\u{300}me (decomposed: NFD)"
    let precomposed = "Caf\u{e9} cr\u{e8}me (decomposed: NFD)"
    #expect(decomposed == precomposed)  // canonically equivalent
    #expect(try device.store.recordTextEdit(block: id("b4"), edit: .replace(decomposed), nowMillis: 1) == nil)
    let edit = try #require(
      try device.store.recordTextEdit(block: id("b4"), edit: .replace(precomposed), nowMillis: 2))
    guard case .editBlock(let block, let text?, nil) = edit.action else {
      Issue.record("\(edit.action)")
      return
    }
    #expect(block == id("b4") && scalars(text) == scalars(precomposed))
    #expect(
      try sqlite3(device.file.path, "SELECT hex(text) FROM local_block WHERE id = 'b4'")
        == "436166C3A9206372C3A86D6520286465636F6D706F7365643A204E464429")
  }
}
