import DaemonCore
import DaemonCoreTestKit
import EventLoopTestKit
import SQLiteStore
import SyncModel
import Testing

@testable import DaemonStore

/// `applyDelta` with unsent edits: the local copy shows the broker's state plus this device's pending edits.
@Suite struct RebaseTests {
  @Test func aPendingTitleSurvivesADeltaUntilItIsAcknowledged() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try toggleOffline(store, ["P"])
    try store.applyDelta(try wholePage("P", time: 10, title: "T1", properties: #"{"a": 1}"#))
    let edit = try store.recordEdit(page: id("P"), action: .setTitle("mine"), nowMillis: 100)
    func title() throws -> String { try sqlite3(file.path, "SELECT title FROM local_page WHERE id = 'P'") }
    #expect(try title() == "mine")

    // Another device's title arrives while the edit is unsent: the local edit stays on top, the rest of the
    // delta is taken.
    try store.applyDelta(
      try partialDelta("P", since: 10, time: 12, title: "theirs", properties: #"{"a": 2}"#))
    #expect(try title() == "mine")
    #expect(
      try sqlite3(file.path, "SELECT properties || ' ' || sync_status FROM local_page") == #"{"a":2} pending"#
    )
    #expect(try store.catchUpMap() == [id("P"): 12])
    #expect(try store.pendingMutations(limit: 10) == [edit])

    try store.acknowledge(try appliedOutcome([edit]), nowMillis: 200)
    #expect(try store.localPage(id("P"))?.syncStatus == .synced)
    // Acknowledged: the broker's next answer is the truth.
    try store.applyDelta(try partialDelta("P", since: 12, time: 13, title: "final"))
    #expect(try title() == "final")
    #expect(try store.localPage(id("P"))?.syncStatus == .synced)
  }

  @Test func pendingBlocksDatabasesAndRowsAreReappliedOnTopOfTheBrokersState() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try store.applyDelta(try wholePage("P", time: 10, blocks: [("b1", "one", 1)]))
    try store.applyDelta(try wholePage("D", time: 10, kind: "database"))
    _ = try store.recordEdit(
      page: id("P"),
      action: .addBlock(block: id("mine"), type: "text", text: "mine", after: id("b1"), attributes: [:]),
      nowMillis: 1)
    _ = try store.recordEdit(
      page: id("E"), action: .createDatabase(parent: id("P"), title: "E"), nowMillis: 2)
    _ = try store.recordEdit(
      page: id("R"), action: .createRow(database: id("D"), title: "R", properties: [:]), nowMillis: 3)
    // A refused edit is not re-applied: the broker's state stands.
    _ = try store.recordEdit(page: id("P"), action: .setTitle("refused"), nowMillis: 4)
    try store.acknowledge(
      try decodeJSON(
        BatchOutcome.self,
        """
        {"results": [{"mutationId": 4, "page": "P", "status": "rejected", "reason": {"code": 3, "name": "invalid_value"}}],
         "pages": {}, "lastMutationId": 4, "epoch": "e1"}
        """), nowMillis: 5)

    // The broker's whole page: another device added b2 after b1 and an inline database S.
    try store.applyDelta(
      try wholePage(
        "P", time: 20, title: "server", blocks: [("b1", "one", 1), ("b2", "two", 2)], databases: ["S"]))
    let page = try #require(try store.localPage(id("P")))
    #expect(page.title == "server")
    #expect(page.blocks.map(\.id.rawValue) == ["b1", "mine", "b2"])
    #expect(page.databases == [id("S"), id("E")])
    #expect(page.syncStatus == .pending)

    // The database's new rows in view name a row this device has; the pending row R is still shown, after it.
    try store.applyDelta(try wholePage("S1", time: 21, parent: "D"))
    try store.applyDelta(
      try partialDelta("D", since: 10, time: 21, kind: "database", extra: #""rows": ["S1"]"#))
    #expect(try sqlite3(file.path, "SELECT rows FROM local_page WHERE id = 'D'") == #"["S1","R"]"#)
    #expect(try store.localPage(id("D"))?.syncStatus == .synced)
  }

  @Test func aFullDeltaReplacesTheWholeCopy() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try toggleOffline(store, ["D"])
    try store.applyDelta(
      try wholePage(
        "D", time: 30, kind: "database", title: "old", parent: "P", properties: #"{"p": 1, "q": "x"}"#,
        blocks: [("b1", "one", 1), ("b2", "two", 2)], databases: ["X"],
        view: #"{"sort": {"property": "p", "descending": true}}"#, rows: ["A", "B"]))
    // A refetch from 0 (another epoch: a replaced broker store) answers with whole pages: nothing of the old
    // copy may survive, even fields the new one leaves empty.
    try store.applyDelta(try wholePage("D", time: 4, kind: "database", title: "new"))
    #expect(
      try sqlite3(
        file.path,
        "SELECT title, coalesce(parent, '-'), properties, databases, view, rows, last_updated FROM local_page"
      )
        == "new|-|{}|[]|{}|[]|4")
    #expect(try sqlite3(file.path, "SELECT count(*) FROM local_block") == "0")
    #expect(try store.catchUpMap() == [id("D"): 4])
  }
}
