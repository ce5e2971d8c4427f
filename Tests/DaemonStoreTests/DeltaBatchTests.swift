import DaemonCoreTestKit
import DaemonStore
import EventLoopTestKit
import SQLiteStore
import SyncModel
import Testing

/// A fetch answer's deltas are stored in one transaction (`applyDeltas`), each in a savepoint.
@Suite struct DeltaBatchTests {
  private static func deltas() throws -> [PageDelta] {
    [
      try wholePage("D", time: 5, kind: "database", rows: ["A", "B", "C"]),
      try wholePage("A", time: 2, parent: "D", properties: #"{"n": 1}"#, blocks: [("a1", "one", 1)]),
      try wholePage("B", time: 3, parent: "D", properties: #"{"n": 2}"#),
      try wholePage(
        "C", time: 4, parent: "D", properties: #"{"n": 3}"#, blocks: [("c1", "x", 1), ("c2", "y", 2)]),
      try partialDelta("A", since: 2, time: 6, title: "A again", properties: #"{"m": true}"#),
    ]
  }

  private static let dump =
    "SELECT id, kind, parent, title, properties, rows, last_updated, sync_status FROM local_page ORDER BY id; "
    + "SELECT * FROM local_block ORDER BY id"

  @Test func storingTogetherGivesWhatStoringOneByOneGives() throws {
    let (one, many) = (TemporaryStore(), TemporaryStore())
    defer {
      one.remove()
      many.remove()
    }
    let byOne = try LocalStore(path: one.path)
    let together = try LocalStore(path: many.path)
    defer {
      byOne.close()
      together.close()
    }
    // A local edit waiting in each queue: it is rebased on the downloaded page either way.
    for store in [byOne, together] {
      _ = try store.recordEdit(page: id("B"), action: .setTitle("mine"), nowMillis: 1)
    }
    for delta in try Self.deltas() { try byOne.applyDelta(delta) }
    let errors = try together.applyDeltas(try Self.deltas())
    #expect(errors.allSatisfy { $0 == nil })
    let expected = try sqlite3(one.path, Self.dump)
    #expect(expected.contains("mine"))
    #expect(try sqlite3(many.path, Self.dump) == expected)
  }

  @Test func aDeltaThatCannotBeStoredIsRolledBackAloneAndTheOthersStay() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    // B's queue holds a mutation this store cannot read back: rebasing B on its delta fails.
    let other = try file.inspect()
    try other.execute(
      "INSERT INTO mutation_queue (type, page_id, data, created_at_ms) VALUES ('set_title', 'B', 'not JSON', 1)",
      [])
    other.close()
    let errors = try store.applyDeltas(try Self.deltas())
    #expect(errors.map { $0 == nil } == [true, true, false, true, true])
    #expect(try sqlite3(file.path, "SELECT id FROM local_page ORDER BY id") == "A\nC\nD")
    #expect(try sqlite3(file.path, "SELECT count(*) FROM local_block") == "3")
  }
}
