import DaemonCore
import DaemonCoreTestKit
import EventLoopTestKit
import SQLiteStore
import SyncModel
import Testing

@testable import DaemonStore

/// `recordEdit`'s local effects (every action shows on the local copy at once) and its refusals.
@Suite struct LocalEditTests {
  /// The page's local block ids in position order, read with the sqlite3 CLI.
  func blockOrder(_ file: TemporaryStore, _ page: String) throws -> String {
    try sqlite3(
      file.path,
      "SELECT group_concat(id) FROM (SELECT id FROM local_block WHERE page_id = '\(page)' ORDER BY position)")
  }

  @Test func severalEditsQueueTogetherStampedAfterTheBrokersClock() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    _ = try store.recordEdit(page: id("P"), action: .createPage(parent: nil, title: "P"), nowMillis: 1000)
    // The broker has seen 5000:3; this device's wall clock says 2000: its stamps must still come after.
    let observed = HLCTimestamp(millis: 5000, counter: 3)
    let mutations = try store.recordEdits(
      page: id("P"), actions: [.setTitle("T"), .setProperty(name: "A", value: .number(1))], nowMillis: 2000,
      observed: observed)
    #expect(mutations.map(\.id) == [2, 3])
    #expect(mutations[0].time > observed && mutations[1].time > mutations[0].time)
    #expect(
      try sqlite3(file.path, "SELECT value FROM sync_meta WHERE key = 'hlc'") == mutations[1].time.description
    )
    #expect(
      try sqlite3(file.path, "SELECT group_concat(type) FROM mutation_queue ORDER BY id")
        == "create_page,set_title,set_property")
    // One breaks a rule: none of the batch is written.
    #expect(throws: LocalStoreError.invalidMutation(.invalidValue)) {
      _ = try store.recordEdits(
        page: id("P"), actions: [.setTitle("U"), .setProperty(name: "", value: .number(1))], nowMillis: 3000)
    }
    #expect(try sqlite3(file.path, "SELECT count(*) FROM mutation_queue") == "3")
    #expect(try sqlite3(file.path, "SELECT title FROM local_page WHERE id = 'P'") == "T")
    #expect(try sqlite3(file.path, "SELECT value FROM sync_meta WHERE key = 'next_mutation_id'") == "4")
  }

  @Test func blockPositionsFollowAddMoveAndDelete() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    var now: UInt64 = 1000
    func edit(_ action: MutationAction) throws {
      now += 1
      _ = try store.recordEdit(page: id("P"), action: action, nowMillis: now)
    }
    func add(_ block: String, after: String?) throws {
      try edit(
        .addBlock(block: id(block), type: "text", text: block, after: after.map { id($0) }, attributes: [:]))
    }
    try edit(.createPage(parent: nil, title: "P"))
    try add("b1", after: nil)
    try add("b2", after: "b1")
    try add("b3", after: nil)  // nil: first
    try add("b4", after: "zz")  // not a block here: appended at the end
    #expect(try blockOrder(file, "P") == "b3,b1,b2,b4")
    try add("b5", after: "b1")  // between b1 and the next block
    #expect(try blockOrder(file, "P") == "b3,b1,b5,b2,b4")
    try edit(.moveBlock(block: id("b4"), after: nil))
    try edit(.moveBlock(block: id("b3"), after: id("b2")))
    #expect(try blockOrder(file, "P") == "b4,b1,b5,b2,b3")
    try edit(.editBlock(block: id("b1"), text: "one", attributes: ["color": "red"]))
    try edit(.editBlock(block: id("b2"), text: nil, attributes: ["done": "yes"]))
    try edit(.deleteBlock(block: id("b5")))
    #expect(try sqlite3(file.path, "SELECT count(*) FROM local_block WHERE id = 'b5'") == "0")
    #expect(try blockOrder(file, "P") == "b4,b1,b2,b3")
    #expect(
      try sqlite3(file.path, "SELECT text || ' ' || attributes FROM local_block WHERE id = 'b1'")
        == #"one {"color":"red"}"#)
    #expect(
      try sqlite3(file.path, "SELECT text || ' ' || attributes FROM local_block WHERE id = 'b2'")
        == #"b2 {"done":"yes"}"#)
    let page = try #require(try store.localPage(id("P")))
    #expect(page.blocks.map(\.id.rawValue) == ["b4", "b1", "b2", "b3"])
    #expect(
      page.blocks[1] == LocalBlock(id: id("b1"), type: "text", text: "one", attributes: ["color": "red"]))
    #expect(page.syncStatus == .pending)
    #expect(try store.pageOfBlock(id("b1")) == id("P"))
    #expect(try store.pageOfBlock(id("b5")) == nil)
    // A block action names the block's page: a block of another page is left alone.
    _ = try store.recordEdit(page: id("Q"), action: .deleteBlock(block: id("b1")), nowMillis: now)
    #expect(try store.pageOfBlock(id("b1")) == id("P"))
    // Every edit was queued, in order.
    #expect(try store.pendingMutations(limit: 100).map(\.id) == Array(1...12))
  }

  @Test func insertingAtTheSamePlaceManyTimesRenumbersAndKeepsTheOrder() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    _ = try store.recordEdit(page: id("P"), action: .createPage(parent: nil, title: ""), nowMillis: 1)
    for block in ["a", "z"] {
      _ = try store.recordEdit(
        page: id("P"),
        action: .addBlock(
          block: id(block), type: "text", text: "", after: block == "z" ? id("a") : nil, attributes: [:]),
        nowMillis: 1)
    }
    // Each new block goes right after `a`: the gap halves every time, until the page is renumbered.
    var expected = ["a"]
    for n in 1...60 {
      _ = try store.recordEdit(
        page: id("P"),
        action: .addBlock(block: id("n\(n)"), type: "text", text: "", after: id("a"), attributes: [:]),
        nowMillis: 1)
      expected.insert("n\(n)", at: 1)
    }
    expected.append("z")
    #expect(try blockOrder(file, "P") == expected.joined(separator: ","))
    #expect(try sqlite3(file.path, "SELECT count(DISTINCT position) FROM local_block") == "62")
    #expect(try store.localPage(id("P"))?.blocks.map(\.id.rawValue) == expected)
  }

  @Test func setViewRecomputesRowsOfADatabaseMadeHere() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    func edit(_ page: String, _ action: MutationAction) throws {
      _ = try store.recordEdit(page: id(page), action: action, nowMillis: 1)
    }
    func rows() throws -> String { try sqlite3(file.path, "SELECT rows FROM local_page WHERE id = 'D'") }
    try edit("D", .createDatabase(parent: nil, title: "Tasks"))
    #expect(try rows() == "[]")
    let made: [(String, [String: PropertyValue])] = [
      ("R1", ["Status": .string("b"), "Prio": .number(2)]),
      ("R2", ["Status": .string("a"), "Prio": .number(1)]),
      ("R3", ["Status": .string("a")]),
      ("R4", ["Status": .string("b"), "Prio": .number(3)]),
      ("R5", ["Status": .string("a"), "Prio": .number(2)]),
    ]
    for (row, properties) in made {
      try edit(row, .createRow(database: id("D"), title: row, properties: properties))
    }
    // Rows made here enter the database's rows at once, in creation order (the default view).
    #expect(try rows() == #"["R1","R2","R3","R4","R5"]"#)
    // Sorted descending; R1 and R5 tie on Prio (creation order); R3 lacks Prio: last.
    try edit("D", .setView(filter: nil, sort: ViewSort(property: "Prio", descending: true)))
    #expect(try rows() == #"["R4","R1","R5","R2","R3"]"#)
    #expect(
      try sqlite3(file.path, "SELECT view FROM local_page WHERE id = 'D'")
        == #"{"sort":{"descending":true,"property":"Prio"}}"#)
    try edit(
      "D",
      .setView(filter: ViewFilter(property: "Status", value: .string("a")), sort: ViewSort(property: "Prio")))
    #expect(try rows() == #"["R2","R5","R3"]"#)
    // A property the view reads moves a row; a deleted row leaves the view.
    try edit("R3", .setProperty(name: "Prio", value: .number(0)))
    #expect(try rows() == #"["R3","R2","R5"]"#)
    try edit("R2", .deletePage)
    #expect(try rows() == #"["R3","R5"]"#)
    try edit("D", .setView(filter: nil, sort: nil))
    #expect(try rows() == #"["R1","R3","R4","R5"]"#)
    let database = try #require(try store.localPage(id("D")))
    #expect(database.kind == .database)
    #expect(database.rows?.map(\.rawValue) == ["R1", "R3", "R4", "R5"])
    #expect(database.view?.filter == nil && database.view?.sort == nil)
  }

  @Test func setViewOnADownloadedDatabaseUsesTheBrokersCreationOrderForTies() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    // The broker's creation order is B, A, C; the rows are stored here in id order (A, B, C), as a fetch
    // answers them.
    try store.applyDelta(try wholePage("D", time: 5, kind: "database", rows: ["B", "A", "C"]))
    try store.applyDelta(try wholePage("A", time: 2, parent: "D", properties: #"{"n": 1}"#))
    try store.applyDelta(try wholePage("B", time: 1, parent: "D", properties: #"{"n": 1}"#))
    try store.applyDelta(try wholePage("C", time: 3, parent: "D", properties: #"{"n": 0}"#))
    _ = try store.recordEdit(
      page: id("D"), action: .setView(filter: nil, sort: ViewSort(property: "n")), nowMillis: 1)
    #expect(try sqlite3(file.path, "SELECT rows FROM local_page WHERE id = 'D'") == #"["C","B","A"]"#)
    #expect(try store.localPage(id("D"))?.syncStatus == .pending)
  }

  @Test func setViewLeavesRowsWhenTheyAreNotAllKnownHere() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    // B has no local copy: the order is the broker's to give.
    try store.applyDelta(try wholePage("D", time: 5, kind: "database", rows: ["A", "B"]))
    try store.applyDelta(try wholePage("A", time: 2, parent: "D", properties: #"{"n": 9}"#))
    _ = try store.recordEdit(
      page: id("D"), action: .setView(filter: nil, sort: ViewSort(property: "n", descending: true)),
      nowMillis: 1)
    #expect(try sqlite3(file.path, "SELECT rows FROM local_page WHERE id = 'D'") == #"["A","B"]"#)
    #expect(
      try sqlite3(file.path, "SELECT view FROM local_page WHERE id = 'D'")
        == #"{"sort":{"descending":true,"property":"n"}}"#)

    // A filtered view hides rows this device may never have seen: every row local is not enough.
    try store.applyDelta(
      try wholePage(
        "E", time: 6, kind: "database", view: #"{"filter": {"property": "n", "value": 1}}"#, rows: ["X"]))
    try store.applyDelta(try wholePage("X", time: 2, parent: "E", properties: #"{"n": 1}"#))
    _ = try store.recordEdit(page: id("E"), action: .setView(filter: nil, sort: nil), nowMillis: 1)
    #expect(try sqlite3(file.path, "SELECT rows FROM local_page WHERE id = 'E'") == #"["X"]"#)
    // What is certain still applies: a row deleted here leaves the view.
    _ = try store.recordEdit(page: id("A"), action: .deletePage, nowMillis: 1)
    #expect(try sqlite3(file.path, "SELECT rows FROM local_page WHERE id = 'D'") == #"["B"]"#)
  }

  @Test func aDatabaseMadeInAPageIsListedInItsDatabases() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    try store.applyDelta(try wholePage("P", time: 3, databases: ["OLD"]))
    _ = try store.recordEdit(
      page: id("D"), action: .createDatabase(parent: id("P"), title: "D"), nowMillis: 1)
    #expect(try store.localPage(id("P"))?.databases == [id("OLD"), id("D")])
    _ = try store.recordEdit(page: id("D"), action: .movePage(parent: nil), nowMillis: 2)
    #expect(try store.localPage(id("P"))?.databases == [id("OLD")])
    _ = try store.recordEdit(page: id("D"), action: .movePage(parent: id("P")), nowMillis: 3)
    _ = try store.recordEdit(page: id("D"), action: .deletePage, nowMillis: 4)
    #expect(try store.localPage(id("P"))?.databases == [id("OLD")])
    // The page itself has no unsent edit.
    #expect(try store.localPage(id("P"))?.syncStatus == .synced)
  }

  @Test func anInvalidMutationWritesNothing() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    _ = try store.recordEdit(page: id("P"), action: .createPage(parent: nil, title: "kept"), nowMillis: 1000)
    let clock = try store.clockValue()
    let refused: [(MutationAction, RejectionReason)] = [
      (.setTitle(String(repeating: "x", count: 1025)), .tooLarge),
      (.setProperty(name: "", value: .string("v")), .invalidValue),
      (.editBlock(block: id("b"), text: nil, attributes: nil), .invalidValue),
      (.addBlock(block: id("b"), type: "Bad Type", text: "", after: nil, attributes: [:]), .invalidValue),
      (.movePage(parent: id("P")), .invalidParent),
    ]
    for (action, reason) in refused {
      #expect(throws: LocalStoreError.invalidMutation(reason)) {
        _ = try store.recordEdit(page: id("P"), action: action, nowMillis: 5000)
      }
    }
    #expect(try sqlite3(file.path, "SELECT value FROM sync_meta WHERE key = 'next_mutation_id'") == "2")
    #expect(try sqlite3(file.path, "SELECT group_concat(id) FROM mutation_queue") == "1")
    #expect(
      try sqlite3(file.path, "SELECT title || ' ' || properties FROM local_page WHERE id = 'P'") == "kept {}")
    #expect(try sqlite3(file.path, "SELECT count(*) FROM local_block") == "0")
    #expect(try store.clockValue() == clock)
  }

  @Test func aCreateOfAStoredPageOrBlockIsRefused() throws {
    let (file, store) = try freshStore()
    defer { closeAndRemove(store, file) }
    _ = try store.recordEdit(page: id("P"), action: .createPage(parent: nil, title: "p"), nowMillis: 1)
    _ = try store.recordEdit(
      page: id("P"), action: .addBlock(block: id("b"), type: "text", text: "t", after: nil, attributes: [:]),
      nowMillis: 2)
    try store.applyDelta(try wholePage("G", time: 4))
    _ = try store.recordEdit(page: id("G"), action: .deletePage, nowMillis: 3)
    #expect(throws: LocalStoreError.pageExists(id("P"))) {
      _ = try store.recordEdit(
        page: id("P"), action: .createDatabase(parent: nil, title: "again"), nowMillis: 4)
    }
    // A deleted page's id stays taken on the broker.
    #expect(throws: LocalStoreError.pageExists(id("G"))) {
      _ = try store.recordEdit(page: id("G"), action: .createPage(parent: nil, title: "again"), nowMillis: 4)
    }
    #expect(throws: LocalStoreError.blockExists(id("b"))) {
      _ = try store.recordEdit(
        page: id("Q"),
        action: .addBlock(block: id("b"), type: "text", text: "x", after: nil, attributes: [:]),
        nowMillis: 4)
    }
    #expect(try sqlite3(file.path, "SELECT value FROM sync_meta WHERE key = 'next_mutation_id'") == "4")
    #expect(try sqlite3(file.path, "SELECT title || ' ' || kind FROM local_page WHERE id = 'P'") == "p page")
    #expect(try sqlite3(file.path, "SELECT page_id || ' ' || text FROM local_block WHERE id = 'b'") == "P t")
  }
}
