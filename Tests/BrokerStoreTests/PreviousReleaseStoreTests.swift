import BrokerStore
import EventLoopTestKit
import FoundationEssentials
import RichText
import SQLiteStore
import SyncModel
import Testing

/// A file of Tests/Fixtures/previous-release (made by the release before block text became a CRDT; its README
/// says how).
private func previousRelease(_ name: String, file: String = #filePath) -> String {
  file.split(separator: "/", omittingEmptySubsequences: false).dropLast(2).joined(separator: "/")
    + "/Fixtures/previous-release/" + name
}

/// Copies a fixture to `path`: the tests never open one in place.
private func copyFixture(_ name: String, to path: String) throws {
  let copy = try runToCompletion("cp", [previousRelease(name), path])
  try #require(copy.status == 0, "cp \(name): \(copy.errorOutput)")
}

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// The old broker file opened by this release's PageStore, on a copy (a store migrates the file it opens).
private final class UpgradedBroker {
  let file = TemporaryDatabase()
  /// `id hex(text)` of every block (deleted ones too), read from the copy before this release opened it.
  let textsBefore: String
  let store: PageStore

  init() throws {
    try copyFixture("broker.sqlite", to: file.path)
    #expect(try sqlite3(file.path, "PRAGMA user_version") == "2")
    textsBefore = try sqlite3(file.path, "SELECT id || ' ' || hex(text) FROM block ORDER BY id")
    let connection = try SQLiteConnection(path: file.path)
    try connection.configure(synchronous: .normal)
    store = try PageStore(connection: connection)
  }

  deinit {
    store.connection.close()
    file.remove()
  }

  /// The text and CRDT state of every block, deleted ones included.
  func blocks() throws -> [String: (text: String, crdt: SQLiteValue)] {
    var blocks: [String: (text: String, crdt: SQLiteValue)] = [:]
    for row in try store.connection.query("SELECT id, text, crdt FROM block") {
      guard case .text(let block) = row[0], case .text(let text) = row[1] else {
        Issue.record("block row \(row)")
        continue
      }
      blocks[block] = (text, row[2])
    }
    return blocks
  }

  /// Applies a batch as the broker does, in one transaction.
  func push(_ client: String, _ mutations: [Mutation]) throws -> BatchOutcome {
    let batch = MutationBatch(client: id(client), workspace: id("w1"), mutations: mutations)
    return try store.connection.transaction(writing: true) {
      try store.apply(batch, user: id("alice"), workspaces: [id("w1")], nowMillis: 1_795_609_100_000)
    }
  }
}

/// Texts compared as Unicode scalars: `String ==` is canonical equivalence, and b4's decomposed accents must
/// stay decomposed.
private func scalars(_ text: String) -> [Unicode.Scalar] { Array(text.unicodeScalars) }

/// "Upgrade without loss" (issue #15 item 3), broker side: the store file of the previous release, where block
/// text was a last-writer-wins string, opened by this release.
@Suite struct PreviousReleaseStoreTests {
  /// The texts of the old broker file (its README): non-ASCII, decomposed accents, empty, CR LF and tab, and a
  /// deleted block.
  static let oldTexts: [String: String] = [
    "b1": "Hello, world",
    "b2": "Grüße aus Köln — naïve café ☕",
    "b3": "日本語のテキスト 🎉 emoji",
    "b4": "Cafe\u{301} cre\u{300}me (decomposed: NFD)",
    "b5": "",
    "b6": "deleted before the upgrade",
    "c1": "plain ASCII line",
    "c2": "two lines\r\nand a\ttab",
    "d1": "untouched: ½ ⅓ ¼ — Ω≈ç√",
  ]

  @Test func theOldFileMigratesToTheNewestVersionIntactKeepingEveryTextWithAStateOfIt() throws {
    let broker = try UpgradedBroker()
    #expect(try sqlite3(broker.file.path, "PRAGMA user_version; PRAGMA integrity_check") == "6\nok")
    // Every page got its size (version 4) and its height (version 5): none is left out. 6: mutation digests.
    #expect(try sqlite3(broker.file.path, "SELECT count(*) FROM page WHERE stored_bytes IS NULL") == "0")
    #expect(try sqlite3(broker.file.path, "SELECT count(*) FROM page WHERE height < 0") == "0")
    // Byte for byte, as the sqlite3 command line reads them.
    #expect(
      try sqlite3(broker.file.path, "SELECT id || ' ' || hex(text) FROM block ORDER BY id")
        == broker.textsBefore)
    let blocks = try broker.blocks()
    #expect(blocks.keys.sorted() == Self.oldTexts.keys.sorted())
    for (block, stored) in blocks {
      #expect(scalars(stored.text) == scalars(Self.oldTexts[block] ?? "?"), "\(block)")
      guard case .blob(let bytes) = stored.crdt else {
        Issue.record("\(block) has no CRDT state: \(stored.crdt)")
        continue
      }
      let document = try TextDocument(encoded: bytes)
      #expect(scalars(document.text) == scalars(stored.text), "\(block)")
      #expect(!document.hasPendingOperations, "\(block)")
    }
  }

  @Test func aSnapshotOfAnOldPageCarriesEachBlocksStateAndNoMarks() throws {
    let broker = try UpgradedBroker()
    let page = try #require(try broker.store.snapshot(of: id("P1"), workspaces: [id("w1")]))
    #expect(page.title == "Upgrade notes")
    #expect(page.blocks.map(\.id.rawValue) == ["b1", "b2", "b3", "b4", "b5"])
    for block in page.blocks {
      #expect(scalars(block.text) == scalars(Self.oldTexts[block.id.rawValue] ?? "?"), "\(block.id)")
      #expect(block.marks == [], "\(block.id)")
      let crdt = try #require(block.crdt, "\(block.id)")
      // A whole state (what a device without one adopts), of the same text.
      let document = try TextDocument(encoded: crdt.bytes)
      #expect(scalars(document.text) == scalars(block.text), "\(block.id)")
    }
    // The JSON a device reads says so too.
    let json = String(decoding: try JSONEncoder().encode(page), as: UTF8.self)
    #expect(json.contains(#""marks":[]"#) && json.contains(#""crdt":""#))
  }

  /// The device's queue, read from its own old file, pushed to the upgraded broker: every old-style
  /// `edit_block` is merged as the broker's splices, so another device's splice, made meanwhile on the state it
  /// downloaded from this broker, survives beside it.
  @Test func theOldDevicesQueuedEditBlocksMergeAsDiffsWithAConcurrentSplice() throws {
    let broker = try UpgradedBroker()
    let device = TemporaryDatabase()
    defer { device.remove() }
    try copyFixture("pagesyncd.sqlite", to: device.path)
    let client = try sqlite3(device.path, "SELECT value FROM sync_meta WHERE key = 'client_id'")
    let queued = try sqlite3(
      device.path, "SELECT data FROM mutation_queue WHERE status = 'pending' ORDER BY id"
    )
    .split(separator: "\n").map { try JSONDecoder().decode(Mutation.self, from: Data($0.utf8)) }
    #expect(queued.map(\.id) == Array(1...8))
    #expect(queued.filter { if case .editBlock = $0.action { true } else { false } }.count == 5)

    // Device X (this release) downloaded P1 and inserts after "テキスト" in b3, before the old edits arrive.
    let page = try #require(try broker.store.snapshot(of: id("P1"), workspaces: [id("w1")]))
    var b3 = try TextDocument(encoded: try #require(page.blocks.first { $0.id == id("b3") }?.crdt).bytes)
    let splice = try b3.splice(at: 8, delete: 0, insert: "★", client: "X")
    #expect(b3.text == "日本語のテキスト★ 🎉 emoji")

    let old = try broker.push(client, queued)
    #expect(old.results.map(\.status) == Array(repeating: .applied, count: 8))
    let concurrent = try broker.push(
      "X",
      [
        Mutation(
          id: 1, page: id("P1"), time: HLCTimestamp(millis: 1_795_609_100_000),
          action: .spliceText(block: id("b3"), ops: TextOps(splice)))
      ])
    #expect(concurrent.results.map(\.status) == [.applied])

    var expected = Self.oldTexts
    expected["b1"] = "Hello, brave new world"
    expected["b2"] = "Grüße aus Zürich — naïve café ☕☕"
    // Both: the old edit's insertions and its "!" where they were made, X's star after "テキスト".
    expected["b3"] = "日本語の新しいテキスト★ 🎉🎊 emoji!"
    expected["c3"] = "added offline, then edited: ünïcödé"
    let blocks = try broker.blocks()
    #expect(blocks.keys.sorted() == expected.keys.sorted())
    for (block, stored) in blocks {
      #expect(scalars(stored.text) == scalars(expected[block] ?? "?"), "\(block): \(stored.text)")
      guard case .blob(let bytes) = stored.crdt else {
        Issue.record("\(block) has no CRDT state")
        continue
      }
      #expect(scalars(try TextDocument(encoded: bytes).text) == scalars(stored.text), "\(block)")
    }
    #expect(
      try sqlite3(broker.file.path, "SELECT title FROM page ORDER BY id")
        == "Upgrade notes (edited offline)\nSecond page, edited offline\nNo blocks here\n"
        + "Kept offline, never edited offline")
    #expect(
      try sqlite3(broker.file.path, "SELECT last_mutation_id FROM client WHERE id = '\(client)'") == "8")
  }

  /// A device that downloaded P3 before the upgrade (it had no blocks, so the device's migration kept its
  /// download time) gets a block added since as a whole state, which it adopts; a block it had, only the update
  /// since, which it merges into the state it downloaded.
  @Test func aBlockAddedAfterTheUpgradeComesInADeltaWithItsWholeState() throws {
    let broker = try UpgradedBroker()
    let since = broker.store.sequence
    let before = try #require(try broker.store.snapshot(of: id("P1"), workspaces: [id("w1")]))
    let time = HLCTimestamp(millis: 1_795_609_100_000)
    let outcome = try broker.push(
      "X",
      [
        Mutation(
          id: 1, page: id("P3"), time: time,
          action: .addBlock(
            block: id("e1"), type: "text", text: "added after the upgrade", after: nil, attributes: [:])),
        Mutation(
          id: 2, page: id("P1"), time: time,
          action: .editBlock(block: id("b1"), text: "Hello, upgraded world", attributes: nil)),
      ])
    #expect(outcome.results.map(\.status) == [.applied, .applied])

    let p3 = try #require(try broker.store.delta(of: id("P3"), since: since, workspaces: [id("w1")]))
    #expect(!p3.full && p3.blocks.map(\.id) == [id("e1")])
    // `TextDocument(encoded:)` reads a state only.
    let added = try TextDocument(encoded: try #require(p3.blocks.first?.crdt).bytes)
    #expect(added.text == "added after the upgrade")

    let p1 = try #require(try broker.store.delta(of: id("P1"), since: since, workspaces: [id("w1")]))
    let update = try #require(p1.blocks.first { $0.id == id("b1") }?.crdt).bytes
    #expect(throws: TextError.self) { try TextDocument(encoded: update) }
    var downloaded = try TextDocument(encoded: try #require(before.blocks.first?.crdt).bytes)
    try downloaded.apply(encoded: update)
    #expect(downloaded.text == "Hello, upgraded world")
  }
}
