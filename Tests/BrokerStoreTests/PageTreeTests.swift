import BrokerStore
import EventLoopTestKit
import RichText
import SQLiteStore
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

extension StoreFixture {
  /// Sends `actions` as one client's consecutive mutations, 1,000 a batch, each batch starting where the store's
  /// answer to the one before stopped (a batch cut by the work budget is continued); returns every answer's
  /// results in order, and how many batches it took.
  func pushAll(_ client: String, _ actions: [(page: String, action: MutationAction)]) throws -> (
    results: [MutationResult], batches: Int
  ) {
    let mutations = actions.map { mutation(client, $0.page, $0.action) }
    var results: [MutationResult] = []
    var batches = 0
    while results.count < mutations.count {
      let outcome = try push(client, Array(mutations[results.count...].prefix(1000)))
      batches += 1
      guard !outcome.results.isEmpty else { break }
      results += outcome.results
    }
    return (results, batches)
  }

  /// Each page's parent and stored height, from the store's table.
  func tree() throws -> [String: (parent: String?, height: Int64)] {
    var tree: [String: (parent: String?, height: Int64)] = [:]
    for row in try store.connection.query("SELECT id, parent_id, height FROM page") {
      guard case .text(let page) = row[0], case .integer(let height) = row[2] else { continue }
      let parent: String? = if case .text(let parent) = row[1] { parent } else { nil }
      tree[page] = (parent, height)
    }
    return tree
  }
}

/// A chain of `count` pages p0 ← p1 ← ... written straight into the store's file, as a broker before the depth
/// limit could let a client build it (heights -1: the store computes them when it opens).
private func writeLegacyChain(_ connection: any StoreConnection, count: Int, workspace: EntityID) throws {
  try connection.transaction(writing: true) {
    for index in 0..<count {
      try connection.execute(
        """
        INSERT INTO page (id, workspace_id, kind, parent_id, parent_stamp, title, title_stamp, deleted_stamp,
                          created_seq, last_updated, updated_at_ms, height)
        VALUES (?, ?, 'page', ?, '', 'P', '', '', 1, 1, 1, -1)
        """,
        [.text("p\(index)"), .text(workspace.rawValue), index == 0 ? .null : .text("p\(index - 1)")])
    }
  }
}

@Suite struct PageTreeTests {
  /// Issue #16, item 2: the cycle check gave up after 10,000 steps, and moving the root of a 10,003-deep chain
  /// under its leaf was applied, cutting 10,003 pages off every tree. Now the walk is exact: with a limit deep
  /// enough for the chain it finds the root among the leaf's ancestors (`invalid_parent`); with the default one
  /// it stops at 1,000 pages and refuses the move as `too_deep`. Either way nothing moves.
  @Test(arguments: StoreEngine.tested) func theRootOfA10003DeepChainCannotMoveUnderItsLeaf(
    engine: StoreEngine
  ) throws {
    let f = try StoreFixture(engine)
    try writeLegacyChain(f.store.connection, count: 10_003, workspace: StoreFixture.workspace)
    let store = try PageStore(connection: f.store.connection)
    let leaf = id("p10002")
    let batch = { (client: String, page: String, parent: EntityID) in
      MutationBatch(
        client: id(client), workspace: StoreFixture.workspace,
        mutations: [
          Mutation(id: 1, page: id(page), time: HLCTimestamp(millis: 5), action: .movePage(parent: parent))
        ])
    }
    let apply = { (batch: MutationBatch) in
      try store.connection.transaction(writing: true) {
        try store.apply(batch, user: id("alice"), workspaces: [StoreFixture.workspace], nowMillis: 10)
      }
    }
    store.maxTreeDepth = 20_000
    #expect(try apply(batch("c1", "p0", leaf)).results.map(\.reason) == [.invalidParent])
    #expect(try apply(batch("c2", "p5000", leaf)).results.map(\.reason) == [.invalidParent])
    store.maxTreeDepth = 1000
    #expect(try apply(batch("c3", "p0", leaf)).results.map(\.reason) == [.tooDeep])
    #expect(try store.snapshot(of: id("p0"), workspaces: [StoreFixture.workspace])?.parent == nil)
    #expect(try store.snapshot(of: id("p5000"), workspaces: [StoreFixture.workspace])?.parent == id("p4999"))
    // The heights the store gave the chain when it opened: the leaf 0, the root 10,002.
    let tree = try f.tree()
    #expect(tree["p10002"]?.height == 0 && tree["p0"]?.height == 10_002)
  }

  @Test(arguments: StoreEngine.tested)
  func aPageDeeperThanTheLimitIsRefusedOnCreateAndMoveCountingTheWholeSubtree(engine: StoreEngine) throws {
    let f = try StoreFixture(engine)
    f.store.maxTreeDepth = 5
    // a1 ← a2 ← a3 ← a4 ← a5: five deep, the limit.
    let chain = (1...5).map {
      ("a\($0)", MutationAction.createPage(parent: $0 == 1 ? nil : id("a\($0 - 1)"), title: "A"))
    }
    #expect(try f.pushAll("c1", chain).results.allSatisfy { $0.status == .applied })
    #expect(
      try f.push("c1", "a6", .createPage(parent: id("a5"), title: "A6")).results.map(\.reason) == [.tooDeep])
    #expect(
      try f.push("c1", "d6", .createDatabase(parent: id("a5"), title: "D")).results.map(\.reason) == [
        .tooDeep
      ])
    try f.push("c1", "db", .createDatabase(parent: id("a3"), title: "DB"))
    #expect(
      try f.push("c1", "r5", .createRow(database: id("db"), title: "R", properties: [:])).results.map(
        \.status)
        == [.applied])
    #expect(
      try f.push("c1", "r6", .createPage(parent: id("r5"), title: "R6")).results.map(\.reason) == [.tooDeep])
    // b1 ← b2 ← b3: a subtree three deep. Under a2 its leaf is 5 deep; under a3 it would be 6.
    try f.pushAll(
      "c1", (1...3).map { ("b\($0)", .createPage(parent: $0 == 1 ? nil : id("b\($0 - 1)"), title: "B")) })
    #expect(try f.push("c1", "b1", .movePage(parent: id("a3"))).results.map(\.reason) == [.tooDeep])
    #expect(try f.push("c1", "b1", .movePage(parent: id("a2"))).results.map(\.status) == [.applied])
    #expect(try f.snapshot("b1")?.parent == id("a2"))
    // Its leaf moved to the top, b1's subtree is two deep: under a3 it fits.
    #expect(try f.push("c1", "b3", .movePage(parent: nil)).results.map(\.status) == [.applied])
    #expect(try f.push("c1", "b1", .movePage(parent: id("a3"))).results.map(\.status) == [.applied])
    #expect(try f.push("c1", "b3", .movePage(parent: id("b2"))).results.map(\.reason) == [.tooDeep])
  }

  /// A cycle an older broker let in (pages with no top) is "deeper than any limit": nothing is created or moved
  /// under it, its pages cannot move, and no walk goes round it for ever. A page hanging from it can leave.
  @Test(arguments: StoreEngine.tested) func aCycleFromAnOlderBrokerTakesNoPagesAndStopsEveryWalk(
    engine: StoreEngine
  ) throws {
    let f = try StoreFixture(engine)
    try writeLegacyChain(f.store.connection, count: 4, workspace: StoreFixture.workspace)
    try f.store.connection.execute("UPDATE page SET parent_id = 'p3' WHERE id = 'p0'")
    let store = try PageStore(connection: f.store.connection)
    let tree = try f.tree()
    #expect((0..<3).allSatisfy { tree["p\($0)"]!.height >= 1 << 31 })
    #expect(tree["p3"]!.height >= 1 << 31)
    let fixture = f
    func push(_ page: String, _ action: MutationAction) throws -> [MutationResult] {
      let mutation = fixture.mutation("c1", page, action)
      let batch = MutationBatch(client: id("c1"), workspace: StoreFixture.workspace, mutations: [mutation])
      return try store.connection.transaction(writing: true) {
        try store.apply(
          batch, user: id("alice"), workspaces: [StoreFixture.workspace], nowMillis: fixture.wall)
      }.results
    }
    #expect(try push("x", .createPage(parent: id("p2"), title: "X")).map(\.reason) == [.tooDeep])
    #expect(try push("y", .createPage(parent: nil, title: "Y")).map(\.status) == [.applied])
    #expect(try push("y", .movePage(parent: id("p1"))).map(\.reason) == [.tooDeep])
    #expect(try push("p1", .movePage(parent: id("y"))).map(\.reason) == [.tooDeep])
    #expect(try push("p1", .movePage(parent: nil)).map(\.reason) == [.tooDeep])
  }

  /// Random creates and moves in a small forest, each checked against a model that knows only parents: the
  /// store accepts exactly the moves that make no cycle and keep every page within the limit, and the heights it
  /// keeps are always those of its tree.
  @Test(arguments: StoreEngine.tested, [1, 2, 3] as [UInt64])
  func heightsFollowEveryCreateAndMove(engine: StoreEngine, seed: UInt64) throws {
    let f = try StoreFixture(engine)
    let limit = 6
    f.store.maxTreeDepth = limit
    var random = SplitMix64(seed: 0x7EE0_0000 + seed)
    var parents: [String: String?] = [:]
    func depth(_ page: String) -> Int {
      var depth = 0
      var current: String? = page
      while let page = current {
        depth += 1
        current = parents[page]!
      }
      return depth
    }
    func height(_ page: String) -> Int64 {
      let children = parents.filter { $0.value == page }.map(\.key)
      return children.map { height($0) + 1 }.max() ?? 0
    }
    for step in 0..<400 {
      let pages = parents.keys.sorted()
      let target: String? =
        pages.isEmpty || random.next() % 5 == 0 ? nil : pages[Int(random.next() % UInt64(pages.count))]
      if pages.count < 12 || random.next() % 3 == 0 {
        let page = "n\(step)"
        let fits = target.map { depth($0) + 1 <= limit } ?? true
        let results = try f.push("c1", page, .createPage(parent: target.map(id), title: "N")).results
        #expect(
          results.map(\.reason) == [fits ? nil : .tooDeep],
          "step \(step): create \(page) under \(target ?? "-")")
        if fits { parents[page] = .some(target) }
      } else {
        let page = pages[Int(random.next() % UInt64(pages.count))]
        guard parents[page]! != target else { continue }
        var cycle = false
        var current = target
        while let ancestor = current {
          if ancestor == page { cycle = true }
          current = parents[ancestor]!
        }
        let fits = (target.map(depth) ?? 0) + 1 + Int(height(page)) <= limit
        let expected: RejectionReason? = cycle ? .invalidParent : fits ? nil : .tooDeep
        let results = try f.push("c1", page, .movePage(parent: target.map(id))).results
        #expect(results.map(\.reason) == [expected], "step \(step): move \(page) under \(target ?? "-")")
        if expected == nil { parents[page] = .some(target) }
      }
      let stored = try f.tree()
      for page in parents.keys
      where stored[page]?.height != height(page) || stored[page]?.parent != parents[page]! {
        Issue.record(
          "step \(step): \(page) is stored as \(String(describing: stored[page])), the model says height \(height(page))"
        )
        return
      }
    }
  }
}

@Suite struct BatchWorkTests {
  /// One batch cannot hold the writer for long: once its work reaches the budget the store takes none of its
  /// later mutations, answers the first ones (`lastMutationId` the last of them), and the client's next batch
  /// goes on from there. Nothing is applied twice or lost, and nothing of a mutation not answered is stored.
  @Test(arguments: StoreEngine.tested) func aBatchOverItsBudgetIsAnsweredInPartAndTheRestFollows(
    engine: StoreEngine
  ) throws {
    let f = try StoreFixture(engine)
    try f.pushAll(
      "c0", (0..<20).map { ("p\($0)", .createPage(parent: $0 == 0 ? nil : id("p\($0 - 1)"), title: "P")) })
    f.store.maxBatchWork = 200
    // Each page under the chain's leaf walks 20 pages up (20 units), and the first refreshes 21 heights (63).
    let mutations = (0..<10).map { f.mutation("c1", "q\($0)", .createPage(parent: id("p19"), title: "Q")) }
    let first = try f.push("c1", mutations)
    #expect(first.results.count > 1 && first.results.count < 10)
    #expect(first.results.allSatisfy { $0.status == .applied })
    #expect(first.lastMutationId == UInt64(first.results.count))
    for (index, mutation) in mutations.enumerated() {
      #expect(try (f.snapshot(mutation.page.rawValue) != nil) == (index < first.results.count))
    }
    // The whole batch again, as a client that lost the answer would send it: the first ones are duplicates.
    let second = try f.push("c1", mutations)
    #expect(second.results.prefix(first.results.count).allSatisfy { $0.status == .duplicate })
    #expect(second.results.count > first.results.count)
    var last = second.lastMutationId
    while last < 10 {
      last = try f.push("c1", Array(mutations[Int(last)...])).lastMutationId
    }
    #expect(try (0..<10).allSatisfy { try f.snapshot("q\($0)")?.parent == id("p19") })
    #expect(try f.tree()["p19"]?.height == 1)
  }

  /// However little the budget, a batch's first mutation runs, whatever it costs: every batch makes progress.
  /// The budget counts from there. Here each page under the root walks 1 page up (1 unit) and refreshes the
  /// root's height (3): the first of a batch runs, the second's walk fits a budget of 1 unit, the third's does
  /// not. Five pages take three batches.
  @Test(arguments: StoreEngine.tested) func theFirstMutationOfABatchAlwaysRunsAndTheBudgetCountsFromIt(
    engine: StoreEngine
  ) throws {
    let f = try StoreFixture(engine)
    f.store.maxBatchWork = 1
    try f.push("c1", "root", .createPage(parent: nil, title: "R"))
    let (results, batches) = try f.pushAll(
      "c1", (0..<5).map { ("c\($0)", .createPage(parent: id("root"), title: "C")) })
    #expect(results.map(\.status) == Array(repeating: .applied, count: 5))
    #expect(batches == 3)
  }

  /// A database's rows in view are read once before a batch first touches it and once after, however many of
  /// the batch's mutations touch it (they were read again for each: a batch of 1,000 property edits on the rows
  /// of a 10,000-row database took 22 s).
  @Test(arguments: StoreEngine.tested) func aDatabaseIsReadOnceABatchHoweverManyMutationsTouchIt(
    engine: StoreEngine
  ) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "db", .createDatabase(parent: nil, title: "DB"))
    try f.push("c1", "db", .setView(filter: nil, sort: ViewSort(property: "n")))
    try f.pushAll(
      "c1",
      (0..<200).map {
        ("r\($0)", .createRow(database: id("db"), title: "R", properties: ["n": .number(Double($0))]))
      })
    f.store.maxBatchWork = 1_000
    let edits = (0..<100).map {
      ("r\($0)", MutationAction.setProperty(name: "n", value: .number(Double(1000 - $0))))
    }
    let (results, batches) = try f.pushAll("c1", edits)
    #expect(batches == 1)
    #expect(results.count == 100 && results.allSatisfy { $0.status == .applied })
    #expect(try f.snapshot("db")?.rows?.first == id("r100"))
    #expect(try f.snapshot("db")?.rows?.last == id("r0"))
    // A second database of 200 rows: a batch that edits a row of each stops before the second (its rows would
    // take the batch past the budget), and the edit left for the next batch wrote nothing.
    try f.push("c1", "db2", .createDatabase(parent: nil, title: "DB2"))
    f.store.maxBatchWork = 100_000
    try f.pushAll(
      "c1", (0..<200).map { ("s\($0)", .createRow(database: id("db2"), title: "S", properties: [:])) })
    f.store.maxBatchWork = 1_000
    let both = [
      f.mutation("c1", "r5", .setTitle("first")),
      f.mutation("c1", "r6", .setProperty(name: "n", value: .number(-1))),
      f.mutation("c1", "s5", .setProperty(name: "n", value: .number(-1))),
      f.mutation("c1", "r7", .setProperty(name: "n", value: .number(-2))),
    ]
    let outcome = try f.push("c1", both)
    #expect(outcome.results.map(\.status) == [.applied, .applied])
    #expect(try f.snapshot("s5")?.properties["n"] == nil)
    // The next batch starts with it; the one after it goes back to the first database: left again.
    #expect(try f.push("c1", Array(both[2...])).results.map(\.status) == [.applied])
    #expect(try f.push("c1", Array(both[3...])).results.map(\.status) == [.applied])
    #expect(try f.snapshot("s5")?.properties["n"] == .number(-1))
  }

  /// A text edit counts the size of the block it changes: a batch of splices on a block of 60,000 characters
  /// stops after a few (each inflates, changes and deflates the whole text).
  @Test(arguments: StoreEngine.tested) func textEditsCountTheSizeOfTheirBlock(engine: StoreEngine) throws {
    let f = try StoreFixture(engine)
    let text = String(repeating: "0123456789", count: 6_000)
    try f.push("c1", "page", .createPage(parent: nil, title: "P"))
    try f.push(
      "c1", "page", .addBlock(block: id("big"), type: "text", text: text, after: nil, attributes: [:]))
    f.store.maxBatchWork = 10_000
    var document = TextDocument(text: text, client: "")
    let edits = (0..<20).map { index in
      let update = document.replaceText(with: "\(index)" + text, client: "c1")
      return f.mutation("c1", "page", .spliceText(block: id("big"), ops: TextOps(update)))
    }
    let outcome = try f.push("c1", edits)
    #expect(outcome.results.count > 1 && outcome.results.count < 10)
    #expect(outcome.results.allSatisfy { $0.status == .applied })
  }

  /// A placement reads only the blocks around it, and moves few: in a page of 3,000 blocks a batch of 200
  /// placements (at random, and each after the one before in the middle of the page) fits a budget of 10,000
  /// units. Reading the whole page for each, as before, was 3,000 units a placement.
  @Test(arguments: StoreEngine.tested) func placementsInALargePageReadFewBlocks(engine: StoreEngine) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "page", .createPage(parent: nil, title: "P"))
    try f.pushAll(
      "c1",
      (0..<3_000).map {
        (
          "page",
          .addBlock(
            block: id("b\($0)"), type: "text", text: "", after: $0 == 0 ? nil : id("b\($0 - 1)"),
            attributes: [:])
        )
      })
    f.store.maxBatchWork = 10_000
    var random = SplitMix64(seed: 0xB10C)
    var actions: [(page: String, action: MutationAction)] = []
    var after = id("b1500")
    for index in 0..<100 {
      actions.append(
        ("page", .addBlock(block: id("t\(index)"), type: "text", text: "", after: after, attributes: [:])))
      after = id("t\(index)")
      let target = id("b\(random.next() % 3_000)")
      actions.append(
        ("page", .addBlock(block: id("r\(index)"), type: "text", text: "", after: target, attributes: [:])))
    }
    let (results, batches) = try f.pushAll("c1", actions)
    #expect(batches == 1)
    #expect(results.allSatisfy { $0.status == .applied })
    let order = try #require(try f.snapshot("page")).blocks.map(\.id)
    let typed = (0..<100).map { id("t\($0)") }
    let start = try #require(order.firstIndex(of: id("b1500")))
    #expect(Array(order[(start + 1)...].prefix(100)) == typed)
  }

  /// The store places blocks as `BlockPlacement.place(after:among:)` does on the whole page (tombstones
  /// included): reading the page through its index changes no decision.
  @Test(arguments: StoreEngine.tested, [1, 2] as [UInt64])
  func theStorePlacesBlocksAsTheRuleDoesOnTheWholePage(engine: StoreEngine, seed: UInt64) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "page", .createPage(parent: nil, title: "P"))
    var random = SplitMix64(seed: 0x5107_0000 + seed)
    var model: [BlockPlacement.Slot] = []
    var deleted: Set<EntityID> = []
    func positions() throws -> [String: Double] {
      var found: [String: Double] = [:]
      for row in try f.store.connection.query("SELECT id, position FROM block WHERE page_id = 'page'") {
        if case .text(let block) = row[0], case .real(let position) = row[1] { found[block] = position }
      }
      return found
    }
    for step in 0..<300 {
      let roll = random.next() % 10
      let after: EntityID? =
        model.isEmpty || roll == 0
        ? nil
        : roll == 1
          ? id("ghost")
          : roll < 6
            ? model[0].id
            : model[Int(random.next() % UInt64(model.count))].id
      let live = model.filter { !deleted.contains($0.id) }
      let moving = roll == 9 && live.count > 2
      let block = moving ? live[Int(random.next() % UInt64(live.count))].id : id("b\(step)")
      // A block moved after itself is rejected `invalid_value` (Mutation.validate).
      if moving && after == block { continue }
      let others = model.filter { $0.id != block }
      let decision = BlockPlacement.place(after: after, among: others)
      if moving {
        try f.push("c1", "page", .moveBlock(block: block, after: after))
      } else {
        try f.push(
          "c1", "page", .addBlock(block: block, type: "text", text: "", after: after, attributes: [:]))
      }
      if random.next() % 7 == 0, let victim = model.randomElement(using: &random) {
        try f.push("c1", "page", .deleteBlock(block: victim.id))
        deleted.insert(victim.id)
      }
      let moved = Dictionary(uniqueKeysWithValues: decision.renumbered.map { ($0.id, $0.position) })
      model = others.map { BlockPlacement.Slot(id: $0.id, position: moved[$0.id] ?? $0.position) }
      model.append(BlockPlacement.Slot(id: block, position: decision.position))
      model.sort { ($0.position, $0.id.rawValue) < ($1.position, $1.id.rawValue) }
      let stored = try positions()
      guard model.allSatisfy({ stored[$0.id.rawValue] == $0.position }) && stored.count == model.count else {
        Issue.record("step \(step): the store's positions differ from the rule's")
        return
      }
    }
  }
}
