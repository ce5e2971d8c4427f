import BrokerStore
import EventLoop
import EventLoopTestKit
import SQLiteStore
import SyncModel
import Testing

#if canImport(Glibc)
  import Glibc
#endif

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// A page store on a fresh file, and helpers to push batches as a client would.
final class StoreFixture {
  let file: TestStoreDatabase
  let store: PageStore
  var nextID: [String: UInt64] = [:]
  var clock = HybridLogicalClock()
  var wall: UInt64 = 1_000_000

  static let workspace = id("ws1")
  static let other = id("ws2")

  init(_ engine: StoreEngine = .sqlite) throws {
    file = try TestStoreDatabase(engine)
    let connection = try file.open()
    store = try PageStore(connection: connection)
    // As the broker's writer runs it: the sequence and clients' rows written once per group (SQLite).
    store.defersWritesToGroupEnd()
  }

  deinit {
    store.connection.close()
    file.remove()
  }

  func mutation(_ client: String, _ page: String, _ action: MutationAction, time: HLCTimestamp? = nil)
    -> Mutation
  {
    let next = (nextID[client] ?? 0) + 1
    nextID[client] = next
    wall += 1
    return Mutation(id: next, page: id(page), time: time ?? clock.now(physicalMillis: wall), action: action)
  }

  @discardableResult
  func push(
    _ client: String, _ mutations: [Mutation], user: String = "alice",
    workspace: EntityID = StoreFixture.workspace,
    workspaces: Set<EntityID> = [StoreFixture.workspace]
  ) throws -> BatchOutcome {
    let batch = MutationBatch(client: id(client), workspace: workspace, mutations: mutations)
    return try apply(batch, user: user, workspaces: workspaces)
  }

  /// Applies `batch` as the broker's writer does, as a group of one job: its kept writes are written before
  /// COMMIT.
  func apply(
    _ batch: MutationBatch, user: String = "alice", workspaces: Set<EntityID> = [StoreFixture.workspace]
  ) throws -> BatchOutcome {
    var committed = false
    defer { store.groupEnded(committed: committed) }
    let outcome = try store.connection.transaction(writing: true) {
      let outcome = try store.apply(batch, user: id(user), workspaces: workspaces, nowMillis: wall)
      store.jobEnded(kept: true)
      try store.groupWillCommit()
      return outcome
    }
    committed = true
    return outcome
  }

  @discardableResult
  func push(_ client: String, _ page: String, _ action: MutationAction) throws -> BatchOutcome {
    try push(client, [mutation(client, page, action)])
  }

  func snapshot(_ page: String, workspaces: Set<EntityID> = [StoreFixture.workspace]) throws -> PageSnapshot?
  {
    try store.snapshot(of: id(page), workspaces: workspaces)
  }
}

@Suite struct PageStoreTests {
  @Test(arguments: StoreEngine.tested) func createEditAndReadAPage(engine: StoreEngine) throws {
    let f = try StoreFixture(engine)
    let created = try f.push("c1", "home", .createPage(parent: nil, title: "Home"))
    #expect(created.results.map(\.status) == [.applied])
    #expect(created.sequence == 1)
    #expect(created.pages == [id("home"): 1])
    try f.push(
      "c1",
      [
        f.mutation("c1", "home", .setTitle("Home ✓")),
        f.mutation("c1", "home", .setProperty(name: "Status", value: .string("Draft"))),
        f.mutation(
          "c1", "home", .addBlock(block: id("b1"), type: "text", text: "first", after: nil, attributes: [:])),
        f.mutation(
          "c1", "home",
          .addBlock(
            block: id("b2"), type: "todo", text: "second", after: id("b1"), attributes: ["checked": "false"])),
        f.mutation(
          "c1", "home", .addBlock(block: id("b0"), type: "heading", text: "top", after: nil, attributes: [:])),
      ])
    let page = try #require(try f.snapshot("home"))
    #expect(page.title == "Home ✓")
    #expect(page.properties == ["Status": .string("Draft")])
    #expect(page.blocks.map(\.id) == [id("b0"), id("b1"), id("b2")])
    #expect(page.blocks[2].attributes == ["checked": "false"])
    #expect(page.lastUpdatedTime == 2)
    #expect(f.store.sequence == 2)
    #expect(page.workspace == StoreFixture.workspace)
  }

  @Test(arguments: StoreEngine.tested) func aResentBatchIsAcknowledgedAgainButAppliedOnce(engine: StoreEngine)
    throws
  {
    let f = try StoreFixture(engine)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    let batch = [
      f.mutation("c1", "p", .setProperty(name: "Count", value: .number(1))),
      f.mutation("c1", "p", .setTitle("P2")),
    ]
    let first = try f.push("c1", batch)
    let again = try f.push("c1", batch)
    #expect(first.results.map(\.status) == [.applied, .applied])
    #expect(again.results.map(\.status) == [.duplicate, .duplicate])
    #expect(again.sequence == nil)
    #expect(again.pages == first.pages)
    #expect(again.lastMutationId == 3)
    #expect(f.store.sequence == 2)
    // A batch that overlaps the applied ones applies only what is new.
    let overlap = try f.push("c1", [batch[1], f.mutation("c1", "p", .setTitle("P3"))])
    #expect(overlap.results.map(\.status) == [.duplicate, .applied])
    #expect(try f.snapshot("p")?.title == "P3")
  }

  /// A re-sent batch whose first answer was lost (found by `make faults`: a daemon killed while the answer waited)
  /// gets its rejections again, with their reasons: `duplicate` would make the client drop them as applied.
  @Test(arguments: StoreEngine.tested) func aResentRejectionIsRejectedAgainNotADuplicate(engine: StoreEngine)
    throws
  {
    let f = try StoreFixture(engine)
    let batch = [
      f.mutation("c1", "ghost", .setTitle("nobody made this page")),
      f.mutation("c1", "p", .createPage(parent: nil, title: "P")),
    ]
    let first = try f.push("c1", batch)
    #expect(first.results.map(\.status) == [.rejected, .applied])
    let again = try f.push("c1", batch)
    #expect(again.results.map(\.status) == [.rejected, .duplicate])
    #expect(again.results.first?.reason == .unknownPage)
    #expect(again.lastMutationId == first.lastMutationId)
    // Rejections are per client: another client's mutation 1, applied, is a duplicate when re-sent.
    let other = [f.mutation("c2", "p", .setTitle("P2"))]
    #expect(try f.push("c2", other).results.map(\.status) == [.applied])
    #expect(try f.push("c2", other).results.map(\.status) == [.duplicate])
  }

  /// Id 0 is no re-send of anything: rejected, never acknowledged as a duplicate the client would drop.
  @Test(arguments: StoreEngine.tested) func mutationIDZeroIsRejectedNotADuplicate(engine: StoreEngine) throws
  {
    let f = try StoreFixture(engine)
    let zero = Mutation(
      id: 0, page: id("p"), time: HLCTimestamp(millis: 1), action: .createPage(parent: nil, title: "P"))
    let outcome = try f.push("c1", [zero])
    #expect(outcome.results.map(\.status) == [.rejected])
    #expect(outcome.results.first?.reason == .invalidValue)
    #expect(outcome.sequence == nil && outcome.lastMutationId == 0)
    #expect(try f.snapshot("p") == nil)
    // The client's ids still start at 1.
    #expect(try f.push("c1", "p", .createPage(parent: nil, title: "P")).results.map(\.status) == [.applied])
  }

  /// A sequence past Int64.max (a client's `since`) means "nothing changed after it", not a trap.
  @Test(arguments: StoreEngine.tested) func timesPastInt64MaxAreNotTraps(engine: StoreEngine) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    #expect(
      try f.store.pagesChanged(after: .max, workspaces: [StoreFixture.workspace], offset: 0, limit: 10).pages
        .isEmpty)
    let delta = try f.store.delta(of: id("p"), since: .max, workspaces: [StoreFixture.workspace])
    #expect(delta?.full == false && delta?.properties.isEmpty == true)
  }

  @Test(arguments: StoreEngine.tested) func aGapInMutationIDsIsRefusedWhole(engine: StoreEngine) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    f.nextID["c1"] = 5
    #expect(throws: BatchError.gap(expected: 2, received: 6)) {
      try f.push("c1", [f.mutation("c1", "p", .setTitle("lost?"))])
    }
    #expect(try f.snapshot("p")?.title == "P")
    let broken = [f.mutation("c2", "p", .setTitle("x")), f.mutation("c2", "p", .setTitle("y"))]
    #expect(throws: BatchError.nonConsecutiveIDs) { try f.push("c2", [broken[1], broken[0]]) }
  }

  @Test(arguments: StoreEngine.tested) func aClientIDCannotBeUsedByAnotherUser(engine: StoreEngine) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    #expect(throws: BatchError.clientOfAnotherUser) {
      try f.push("c1", [f.mutation("c1", "p", .setTitle("mallory was here"))], user: "mallory")
    }
    #expect(try f.snapshot("p")?.title == "P")
  }

  @Test(arguments: StoreEngine.tested) func lastWriterWinsByHLCWhateverTheArrivalOrder(engine: StoreEngine)
    throws
  {
    let f = try StoreFixture(engine)
    try f.push("c0", "p", .createPage(parent: nil, title: "P"))
    // A week-old offline edit arrives after a newer one: the newer one stays.
    let old = HLCTimestamp(millis: 2_000_000, counter: 0)
    let new = HLCTimestamp(millis: 2_000_100, counter: 0)
    try f.push("new", [f.mutation("new", "p", .setTitle("newer"), time: new)])
    let late = try f.push("old", [f.mutation("old", "p", .setTitle("older"), time: old)])
    #expect(late.results.map(\.status) == [.applied])
    #expect(late.sequence == nil, "a write that lost changes nothing")
    #expect(try f.snapshot("p")?.title == "newer")
    // Equal times: the larger client id wins, on every replica.
    try f.push(
      "aaa", [f.mutation("aaa", "p", .setProperty(name: "k", value: .string("from aaa")), time: new)])
    try f.push(
      "zzz", [f.mutation("zzz", "p", .setProperty(name: "k", value: .string("from zzz")), time: new)])
    try f.push(
      "mmm", [f.mutation("mmm", "p", .setProperty(name: "k", value: .string("from mmm")), time: new)])
    #expect(try f.snapshot("p")?.properties["k"] == .string("from zzz"))
  }

  @Test(arguments: StoreEngine.tested) func rejectionsConcernTheirPageOnlyAndLeakNothing(engine: StoreEngine)
    throws
  {
    let f = try StoreFixture(engine)
    try f.push("c1", "mine", .createPage(parent: nil, title: "Mine"))
    try f.push(
      "c9", [f.mutation("c9", "theirs", .createPage(parent: nil, title: "Theirs"))], user: "bob",
      workspace: StoreFixture.other, workspaces: [StoreFixture.other])
    try f.push("c1", "gone", .createPage(parent: nil, title: "Gone"))
    try f.push("c1", "gone", .deletePage)
    let outcome = try f.push(
      "c1",
      [
        f.mutation("c1", "theirs", .setTitle("hijack")),
        f.mutation("c1", "nowhere", .setTitle("x")),
        f.mutation("c1", "gone", .setTitle("revive")),
        f.mutation("c1", "mine", .setView(filter: nil, sort: nil)),
        f.mutation("c1", "mine", .editBlock(block: id("nope"), text: "x", attributes: nil)),
        f.mutation("c1", "mine", .createPage(parent: nil, title: "dup")),
        f.mutation("c1", "mine", .setTitle(String(repeating: "x", count: 5000))),
        f.mutation("c1", "mine", .setTitle("still works")),
      ])
    #expect(
      outcome.results.map(\.reason) == [
        .unknownPage, .unknownPage, .pageDeleted, .notADatabase, .unknownBlock, .alreadyExists, .tooLarge,
        nil,
      ])
    #expect(outcome.results.last?.status == .applied)
    #expect(outcome.lastMutationId == 11)
    #expect(try f.snapshot("mine")?.title == "still works")
    #expect(try f.snapshot("theirs", workspaces: [StoreFixture.other])?.title == "Theirs")
    // Another workspace's page does not exist for us, in reads as in writes.
    #expect(try f.snapshot("theirs") == nil)
  }

  /// The store applies mutations without a savepoint each: every rejection must be decided before its mutation
  /// writes anything. One rejection of each kind that is decided late (after reads, block positions, cycle walks)
  /// must leave the pages, blocks, properties and views exactly as they were.
  @Test(arguments: StoreEngine.tested) func everyRejectionLeavesTheStoreAsIfTheMutationWereAbsent(
    engine: StoreEngine
  ) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "home", .createPage(parent: nil, title: "Home"))
    try f.push("c1", "child", .createPage(parent: id("home"), title: "Child"))
    try f.push("c1", "db", .createDatabase(parent: id("home"), title: "Tasks"))
    try f.push("c1", "row", .createRow(database: id("db"), title: "Row", properties: ["s": .string("a")]))
    for n in 1...3 {
      let after: EntityID? = n == 1 ? nil : id("b\(n - 1)")
      try f.push(
        "c1", "home", .addBlock(block: id("b\(n)"), type: "text", text: "\(n)", after: after, attributes: [:])
      )
    }
    try f.push(
      "c9", [f.mutation("c9", "theirs", .createPage(parent: nil, title: "Theirs"))], user: "bob",
      workspace: StoreFixture.other, workspaces: [StoreFixture.other, StoreFixture.workspace])
    func dump() throws -> [[SQLiteValue]] {
      try ["page", "property", "block", "view"].flatMap { table in
        try f.store.connection.query("SELECT * FROM \(table) ORDER BY 1, 2")
      }
    }
    let before = try dump()
    let rejected: [(String, MutationAction, RejectionReason)] = [
      ("new1", .createPage(parent: id("theirs"), title: "x"), .unknownPage),
      ("new2", .createDatabase(parent: id("db"), title: "x"), .invalidParent),
      ("new3", .createRow(database: id("child"), title: "x", properties: ["s": .string("b")]), .notADatabase),
      ("row", .createRow(database: id("db"), title: "again", properties: [:]), .alreadyExists),
      ("home", .deleteBlock(block: id("nope")), .unknownBlock),
      (
        "home", .addBlock(block: id("b1"), type: "text", text: "x", after: nil, attributes: [:]),
        .alreadyExists
      ),
      ("home", .moveBlock(block: id("nope"), after: nil), .unknownBlock),
      ("child", .editBlock(block: id("b1"), text: "x", attributes: nil), .unknownBlock),
      ("home", .movePage(parent: id("child")), .invalidParent),
      ("db", .movePage(parent: id("theirs")), .unknownPage),
      ("child", .setView(filter: nil, sort: nil), .notADatabase),
    ]
    let outcome = try f.push("c1", rejected.map { f.mutation("c1", $0.0, $0.1) })
    #expect(outcome.results.map(\.reason) == rejected.map(\.2))
    #expect(outcome.sequence == nil)
    #expect(try dump() == before)
  }

  @Test(arguments: StoreEngine.tested) func aTimeTooFarAheadOfTheBrokerIsRejectedAndStaysRejected(
    engine: StoreEngine
  ) throws {
    let f = try StoreFixture(engine)
    f.store.maxClockAheadMillis = 60_000
    try f.push("c1", "home", .createPage(parent: nil, title: "Home"))
    let now = f.wall
    let outcome = try f.push(
      "c1",
      [
        f.mutation(
          "c1", "home", .setTitle("half a minute ahead"), time: HLCTimestamp(millis: now + 30_000, counter: 0)
        ),
        f.mutation("c1", "home", .setTitle("forever"), time: HLCTimestamp(millis: now + 120_000, counter: 0)),
        f.mutation("c1", "home", .setTitle("the end"), time: HLCTimestamp(millis: .max, counter: .max)),
      ])
    #expect(outcome.results.map(\.reason) == [nil, .clockAhead, .clockAhead])
    #expect(try f.snapshot("home")?.title == "half a minute ahead")
    // A re-send (its first answer lost) is rejected again, not acknowledged as a duplicate.
    let batch = MutationBatch(
      client: id("c1"), workspace: StoreFixture.workspace,
      mutations: [
        Mutation(
          id: 3, page: id("home"), time: HLCTimestamp(millis: now + 120_000, counter: 0),
          action: .setTitle("forever"))
      ])
    let again = try f.apply(batch)
    #expect(again.results.map(\.reason) == [.clockAhead])
  }

  @Test(arguments: StoreEngine.tested) func movesThatWouldMakeACycleAreRefused(engine: StoreEngine) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "a", .createPage(parent: nil, title: "A"))
    try f.push("c1", "b", .createPage(parent: id("a"), title: "B"))
    try f.push("c1", "c", .createPage(parent: id("b"), title: "C"))
    let outcome = try f.push("c1", [f.mutation("c1", "a", .movePage(parent: id("c")))])
    #expect(outcome.results.first?.reason == .invalidParent)
    let fine = try f.push("c1", [f.mutation("c1", "c", .movePage(parent: nil))])
    #expect(fine.results.first?.status == .applied)
    #expect(try f.snapshot("c")?.parent == nil)
  }

  @Test(arguments: StoreEngine.tested) func databaseRowsInViewFollowFilterAndSortAndMoveTheDatabaseTime(
    engine: StoreEngine
  ) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "home", .createPage(parent: nil, title: "Home"))
    try f.push("c1", "tasks", .createDatabase(parent: id("home"), title: "Tasks"))
    #expect(try f.snapshot("home")?.databases == [id("tasks")])
    for (row, status, points) in [("r1", "Todo", 3.0), ("r2", "Done", 1.0), ("r3", "Todo", 2.0)] {
      try f.push(
        "c1", row,
        .createRow(
          database: id("tasks"), title: row,
          properties: ["Status": .string(status), "Points": .number(points)]))
    }
    #expect(try f.snapshot("tasks")?.rows == [id("r1"), id("r2"), id("r3")])
    try f.push(
      "c1", "tasks",
      .setView(
        filter: ViewFilter(property: "Status", value: .string("Todo")), sort: ViewSort(property: "Points")))
    #expect(try f.snapshot("tasks")?.rows == [id("r3"), id("r1")])
    let before = try #require(try f.snapshot("tasks")).lastUpdatedTime
    // A change that leaves the rows in view as they were does not touch the database...
    let quiet = try f.push("c1", "r1", .setProperty(name: "Notes", value: .string("irrelevant")))
    #expect(quiet.pages.keys.sorted() == [id("r1")])
    #expect(try f.snapshot("tasks")?.lastUpdatedTime == before)
    // ...one that changes them does.
    let loud = try f.push("c1", "r2", .setProperty(name: "Status", value: .string("Todo")))
    #expect(loud.pages.keys.sorted() == [id("r2"), id("tasks")])
    #expect(try f.snapshot("tasks")?.rows == [id("r2"), id("r3"), id("r1")])
    try f.push("c1", "r3", .deletePage)
    #expect(try f.snapshot("tasks")?.rows == [id("r2"), id("r1")])
    try f.push("c1", "tasks", .setView(filter: nil, sort: ViewSort(property: "Points", descending: true)))
    #expect(try f.snapshot("tasks")?.rows == [id("r1"), id("r2")])
  }

  /// Found by `make faults` (`--seed 200 --steps 400 --devices 4`): a page created with a database parent is a
  /// row, but the database's time did not move, so devices keeping the database offline never listed it.
  @Test(arguments: StoreEngine.tested) func aPageCreatedInADatabaseMovesTheDatabaseTime(engine: StoreEngine)
    throws
  {
    let f = try StoreFixture(engine)
    try f.push("c1", "tasks", .createDatabase(parent: nil, title: "Tasks"))
    let before = try #require(try f.snapshot("tasks")).lastUpdatedTime
    let made = try f.push("c1", "p", .createPage(parent: id("tasks"), title: "a page as a row"))
    #expect(made.pages.keys.sorted() == [id("p"), id("tasks")])
    let tasks = try #require(try f.snapshot("tasks"))
    #expect(tasks.rows == [id("p")])
    #expect(tasks.lastUpdatedTime > before)
  }

  @Test(arguments: StoreEngine.tested) func blocksKeepTheirOrderThroughManyInsertsAtOnePlace(
    engine: StoreEngine
  ) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    try f.push("c1", "p", .addBlock(block: id("first"), type: "text", text: "", after: nil, attributes: [:]))
    try f.push(
      "c1", "p", .addBlock(block: id("last"), type: "text", text: "", after: id("first"), attributes: [:]))
    // Each new block goes right after "first": halving the same gap 80 times forces a renumbering.
    var expected = [id("first")]
    for i in 0..<80 {
      try f.push(
        "c1", "p", .addBlock(block: id("n\(i)"), type: "text", text: "", after: id("first"), attributes: [:]))
      expected.insert(id("n\(i)"), at: 1)
    }
    expected.append(id("last"))
    #expect(try f.snapshot("p")?.blocks.map(\.id) == expected)
    try f.push("c1", "p", .moveBlock(block: id("last"), after: nil))
    try f.push("c1", "p", .deleteBlock(block: id("n0")))
    let blocks = try #require(try f.snapshot("p")).blocks.map(\.id)
    #expect(blocks.first == id("last"))
    #expect(!blocks.contains(id("n0")))
    #expect(blocks.count == 81)
  }

  /// BlockPlacement's rule for `after`, applied by the store: after a deleted block, where that block was;
  /// after a block the page does not have, last. Neither is refused: the text typed is kept in the page.
  @Test(arguments: StoreEngine.tested) func aBlockPlacedAfterADeletedOrUnknownBlockIsKept(engine: StoreEngine)
    throws
  {
    let f = try StoreFixture(engine)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    var after: EntityID?
    for name in ["a", "b", "c"] {
      try f.push(
        "c1", "p", .addBlock(block: id(name), type: "text", text: name, after: after, attributes: [:]))
      after = id(name)
    }
    try f.push("c2", "p", .deleteBlock(block: id("b")))
    let placed = try f.push(
      "c1", "p", .addBlock(block: id("x"), type: "text", text: "x", after: id("b"), attributes: [:]))
    #expect(placed.results.map(\.status) == [.applied])
    #expect(try f.snapshot("p")?.blocks.map(\.id) == [id("a"), id("x"), id("c")])
    try f.push(
      "c1", "p", .addBlock(block: id("y"), type: "text", text: "y", after: id("ghost"), attributes: [:]))
    try f.push("c1", "p", .moveBlock(block: id("a"), after: id("ghost")))
    #expect(try f.snapshot("p")?.blocks.map(\.id) == [id("x"), id("c"), id("y"), id("a")])
  }

  @Test(arguments: StoreEngine.tested) func deltasCarryOnlyWhatChangedUntilTheLogIsPruned(engine: StoreEngine)
    throws
  {
    let f = try StoreFixture(engine)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    try f.push("c1", "p", .setProperty(name: "a", value: .number(1)))
    try f.push("c1", "p", .addBlock(block: id("b1"), type: "text", text: "one", after: nil, attributes: [:]))
    let since = f.store.sequence
    try f.push("c1", "p", .setProperty(name: "b", value: .bool(true)))
    try f.push("c1", "p", .setProperty(name: "a", value: nil))
    try f.push("c1", "p", .editBlock(block: id("b1"), text: "uno", attributes: nil))
    let delta = try #require(
      try f.store.delta(of: id("p"), since: since, workspaces: [StoreFixture.workspace]))
    #expect(!delta.full)
    #expect(delta.properties == ["a": PropertyValue?.none, "b": PropertyValue?.some(.bool(true))])
    #expect(delta.blocks.map(\.text) == ["uno"])
    #expect(delta.lastUpdatedTime == f.store.sequence)
    #expect(delta.page.title == "P")
    // Nothing changed since now: an empty delta.
    let none = try #require(
      try f.store.delta(of: id("p"), since: f.store.sequence, workspaces: [StoreFixture.workspace]))
    #expect(none.properties.isEmpty && none.blocks.isEmpty && !none.full)
    // Once the log no longer reaches back, the answer is the whole page.
    #expect(try f.store.pruneLog(keepingSequences: 1) > 0)
    let full = try #require(
      try f.store.delta(of: id("p"), since: since, workspaces: [StoreFixture.workspace]))
    #expect(full.full)
    #expect(full.page.properties == ["b": .bool(true)])
    #expect(full.page.blocks.map(\.text) == ["uno"])
  }

  @Test(arguments: StoreEngine.tested) func aDeltaHeaderCarriesInlineDatabasesOnlyWhenTheyChanged(
    engine: StoreEngine
  ) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "home", .createPage(parent: nil, title: "Home"))
    try f.push("c1", "tasks", .createDatabase(parent: id("home"), title: "Tasks"))
    let since = f.store.sequence
    try f.push("c1", "home", .setTitle("Home 2"))
    let unchanged = try #require(
      try f.store.delta(of: id("home"), since: since, workspaces: [StoreFixture.workspace]))
    #expect(unchanged.page.databases == nil, "absent, not [], when the databases did not change")
    try f.push("c1", "notes", .createDatabase(parent: id("home"), title: "Notes"))
    let changed = try #require(
      try f.store.delta(of: id("home"), since: since, workspaces: [StoreFixture.workspace]))
    #expect(changed.page.databases == [id("tasks"), id("notes")])
  }

  @Test(arguments: StoreEngine.tested) func catchUpReportsOnlyChangedPagesAndHidesOthers(engine: StoreEngine)
    throws
  {
    let f = try StoreFixture(engine)
    for page in ["p1", "p2", "p3"] { try f.push("c1", page, .createPage(parent: nil, title: page)) }
    try f.push(
      "c9", [f.mutation("c9", "x", .createPage(parent: nil, title: "X"))], user: "bob",
      workspace: StoreFixture.other, workspaces: [StoreFixture.other])
    let mark = f.store.sequence
    try f.push("c1", "p2", .setTitle("changed"))
    let known: [EntityID: UInt64] = [
      id("p1"): mark, id("p2"): mark, id("p3"): mark, id("x"): 0, id("never"): 0,
    ]
    let answer = try f.store.changedPages(
      since: known, workspaces: [StoreFixture.workspace], clientEpoch: f.store.epoch)
    #expect(answer.changed == [id("p2"): f.store.sequence])
    #expect(answer.gone == [id("never"), id("x")])
    // Another epoch: the client's times mean nothing here, every visible page is reported.
    let restored = try f.store.changedPages(
      since: known, workspaces: [StoreFixture.workspace], clientEpoch: "other-epoch")
    #expect(Set(restored.changed.keys) == [id("p1"), id("p2"), id("p3")])
  }

  @Test(arguments: StoreEngine.tested) func pagesChangedArePaginatedInChangeOrder(engine: StoreEngine) throws
  {
    let f = try StoreFixture(engine)
    for i in 0..<3 { try f.push("c1", "p\(i)", .createPage(parent: nil, title: "\(i)")) }
    // The cursor a pull hands out (a sequence on SQLite, a transaction horizon on PostgreSQL).
    let cursor = f.store.syncCursor
    for i in 3..<5 { try f.push("c1", "p\(i)", .createPage(parent: nil, title: "\(i)")) }
    let first = try f.store.pagesChanged(after: 0, workspaces: [StoreFixture.workspace], offset: 0, limit: 2)
    let second = try f.store.pagesChanged(after: 0, workspaces: [StoreFixture.workspace], offset: 2, limit: 2)
    let third = try f.store.pagesChanged(after: 0, workspaces: [StoreFixture.workspace], offset: 4, limit: 2)
    #expect(first.pages == [id("p0"), id("p1")] && first.hasMore)
    #expect(second.pages == [id("p2"), id("p3")] && second.hasMore)
    #expect(third.pages == [id("p4")] && !third.hasMore)
    let after = try f.store.pagesChanged(
      after: cursor, workspaces: [StoreFixture.workspace], offset: 0, limit: 10
    ).pages
    // PostgreSQL's cursor may bring a page again (a transaction of another database on the server, still running,
    // holds the horizon back), never skip one.
    #expect(
      engine == .sqlite ? after == [id("p3"), id("p4")] : after.suffix(2) == [id("p3"), id("p4")], "\(after)")
    #expect(
      try f.store.pagesChanged(after: 0, workspaces: [StoreFixture.other], offset: 0, limit: 10).pages.isEmpty
    )
  }

  @Test(arguments: StoreEngine.tested) func theEpochAndSequenceSurviveReopening(engine: StoreEngine) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    let reopened = try PageStore(connection: f.file.open())
    #expect(reopened.epoch == f.store.epoch)
    #expect(reopened.sequence == 1)
    #expect(f.store.epoch.utf8.count == 32)
    reopened.connection.close()
  }
}

@Suite struct PageStoreFileTests {
  @Test func aNewStoreIsMigratedWALAndIntactAsTheSQLiteCLISeesIt() throws {
    let file = TemporaryDatabase()
    defer { file.remove() }
    let path = file.path
    let connection = try SQLiteConnection(path: path)
    try connection.configure(synchronous: .full)
    let store = try PageStore(connection: connection)
    let batch = MutationBatch(
      client: id("c"), workspace: id("w"),
      mutations: [
        Mutation(
          id: 1, page: id("p"), time: HLCTimestamp(millis: 1), action: .createPage(parent: nil, title: "P"))
      ])
    _ = try connection.transaction(writing: true) {
      try store.apply(batch, user: id("u"), workspaces: [id("w")], nowMillis: 1)
    }
    let loop = try Loop()
    var output = ""
    _ = try ProcessRun(
      loop: loop, "sqlite3",
      [
        path,
        "PRAGMA user_version; PRAGMA journal_mode; PRAGMA integrity_check; SELECT title FROM page; SELECT value FROM meta WHERE key = 'sequence';",
      ]
    ) { output = $0.output.string }
    try loop.runUntilDone()
    try loop.close()
    #expect(output == "6\nwal\nok\nP\n1\n")
    var info = stat()
    #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
    connection.close()
  }
}
