import BrokerStore
import EventLoopTestKit
import RichText
import SQLiteStore
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// A page store on a fresh file with a `page_bytes` of its own, and helpers to push batches as a client would.
private final class SizeFixture {
  let file: TestStoreDatabase
  var store: PageStore
  var nextID: [String: UInt64] = [:]
  var wall: UInt64 = 1_000_000

  static let workspace = id("ws1")

  init(_ engine: StoreEngine, pageBytes: Int) throws {
    file = try TestStoreDatabase(engine)
    var limits = MutationLimits()
    limits.maxPageBytes = pageBytes
    store = try PageStore(connection: try file.open(), limits: limits)
  }

  deinit {
    store.connection.close()
    file.remove()
  }

  func mutation(_ client: String, _ page: String, _ action: MutationAction) -> Mutation {
    let next = (nextID[client] ?? 0) + 1
    nextID[client] = next
    wall += 1
    return Mutation(id: next, page: id(page), time: HLCTimestamp(millis: wall), action: action)
  }

  @discardableResult
  func push(_ client: String, _ mutations: [Mutation]) throws -> BatchOutcome {
    let batch = MutationBatch(client: id(client), workspace: Self.workspace, mutations: mutations)
    return try store.connection.transaction(writing: true) {
      try store.apply(batch, user: id("alice"), workspaces: [Self.workspace], nowMillis: wall)
    }
  }

  @discardableResult
  func push(_ client: String, _ page: String, _ action: MutationAction) throws -> BatchOutcome {
    try push(client, [mutation(client, page, action)])
  }

  func addBlock(_ page: String, _ block: String, _ text: String) -> MutationAction {
    .addBlock(block: id(block), type: "text", text: text, after: nil, attributes: [:])
  }

  func size(_ page: String) throws -> Int { try store.storedBytes(of: id(page)) }

  /// Every row a mutation may write, and the sequence.
  func dump() throws -> [[SQLiteValue]] {
    try ["page", "property", "block", "change_log"].flatMap { table in
      try store.connection.query("SELECT * FROM \(table) ORDER BY 1, 2")
    } + [[.integer(Int64(store.sequence))]]
  }

  /// The size of every page as a store opened on the file counts it from the rows (what an upgraded store
  /// does), after forgetting the sizes the batches kept.
  func recount() throws -> [String: Int] {
    try store.connection.execute("UPDATE page SET stored_bytes = NULL")
    let limits = store.limits
    store.connection.close()
    store = try PageStore(connection: try file.open(), limits: limits)
    var sizes: [String: Int] = [:]
    for row in try store.connection.query("SELECT id, stored_bytes FROM page") {
      if case .text(let page) = row[0], case .integer(let bytes) = row[1] { sizes[page] = Int(bytes) }
    }
    return sizes
  }

  func sizes() throws -> [String: Int] {
    var sizes: [String: Int] = [:]
    for row in try store.connection.query("SELECT id FROM page") {
      if case .text(let page) = row[0] { sizes[page] = try size(page) }
    }
    return sizes
  }
}

/// Text of `count` bytes that zlib cannot shrink much (the CRDT state deflates its text).
private func noise(_ count: Int, seed: UInt64) -> String {
  var random = SplitMix64(seed: seed)
  let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ")
  return String((0..<count).map { _ in letters[Int(random.next() % UInt64(letters.count))] })
}

/// `[limits] page_bytes` (issue #16 item 3): a mutation that would grow a page past it is rejected `too_large`
/// with words that name the limit, whichever way it grows the page; a page already larger stays readable and
/// may shrink.
@Suite struct PageSizeTests {
  @Test(arguments: StoreEngine.tested) func aPagesSizeIsItsTitlePropertiesAndBlocksAsStored(
    engine: StoreEngine
  ) throws {
    let f = try SizeFixture(engine, pageBytes: 1 << 20)
    try f.push("c1", "p", .createPage(parent: nil, title: "Hé"))  // 3 bytes
    #expect(try f.size("p") == 3)
    try f.push("c1", "p", .setProperty(name: "Status", value: .string("Done")))  // 6 + "\"Done\"" 6
    #expect(try f.size("p") == 3 + 12)
    let added = try f.push("c1", "p", f.addBlock("p", "b1", "hello"))
    let state = TextDocument(text: "hello", client: "", seq: try #require(added.sequence)).encoded()
    // id, type, text, attributes `{}`, marks `[]`, state.
    let block = 2 + 4 + 5 + 2 + 2 + state.count
    #expect(try f.size("p") == 3 + 12 + block)
    // A property set to null holds nothing; a deleted block keeps its id, type and an empty state.
    try f.push("c1", "p", .setProperty(name: "Status", value: nil))
    try f.push("c1", "p", .deleteBlock(block: id("b1")))
    #expect(try f.size("p") == 3 + 2 + 4 + 2 + 2 + TextDocument().encoded().count)
    let row = try f.store.connection.query("SELECT text, attributes, marks FROM block WHERE id = 'b1'")
    #expect(row == [[.text(""), .text("{}"), .text("[]")]])
  }

  /// What batches keep is what a recount from the rows finds, through every kind of mutation that grows or
  /// shrinks a page, applied or rejected.
  @Test(arguments: StoreEngine.tested) func theSizeBatchesKeepIsWhatARecountFinds(engine: StoreEngine) throws
  {
    let f = try SizeFixture(engine, pageBytes: 40_000)
    try f.push("c1", "p", .createPage(parent: nil, title: "Page"))
    try f.push("c1", "db", .createDatabase(parent: id("p"), title: "Tasks"))
    try f.push(
      "c1",
      [
        f.mutation("c1", "r1", .createRow(database: id("db"), title: "Row", properties: ["s": .string("a")])),
        f.mutation("c1", "p", f.addBlock("p", "b1", noise(9_000, seed: 1))),
        f.mutation("c1", "p", f.addBlock("p", "b2", "short")),
        f.mutation("c1", "p", .setTitle("A longer title")),
        f.mutation("c1", "p", .setProperty(name: "n", value: .number(3))),
        f.mutation("c1", "p", .setProperty(name: "l", value: .list(["x", "y"]))),
        f.mutation(
          "c1", "p", .editBlock(block: id("b2"), text: "short, then longer", attributes: ["k": "v"])),
      ])
    var device = TextDocument(text: "short, then longer", client: "")
    let splice = try device.splice(at: 5, delete: 13, insert: "!", client: "c2")
    let mark = try device.mark(
      from: 0, to: 3, type: .bold, value: nil, client: "c2", time: MarkTime(millis: 5, counter: 0))
    try f.push(
      "c2",
      [
        f.mutation("c2", "p", .spliceText(block: id("b2"), ops: TextOps(splice))),
        f.mutation("c2", "p", .markText(block: id("b2"), ops: TextOps(mark))),
        f.mutation("c2", "p", .setProperty(name: "n", value: nil)),
        f.mutation("c2", "p", .deleteBlock(block: id("b1"))),
        f.mutation("c2", "r1", .setProperty(name: "s", value: .string("longer value"))),
        // Rejected: their growth must not count.
        f.mutation("c2", "p", f.addBlock("p", "b3", noise(40_000, seed: 2))),
        f.mutation("c2", "p", .setTitle(noise(1_025, seed: 3))),
      ])
    let kept = try f.sizes()
    #expect(kept["p"]! > 0 && kept.count == 3)
    #expect(try f.recount() == kept)
  }

  @Test(arguments: StoreEngine.tested) func addingBlocksPastPageBytesIsRejectedTooLargeNamingTheLimit(
    engine: StoreEngine
  ) throws {
    let limit = 64 * 1024
    let f = try SizeFixture(engine, pageBytes: limit)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    var added = 0
    var outcome = try f.push("c1", "p", f.addBlock("p", "b0", noise(20_000, seed: 0)))
    while outcome.results[0].status == .applied && added < 10 {
      added += 1
      #expect(try f.size("p") <= limit)
      outcome = try f.push("c1", "p", f.addBlock("p", "b\(added)", noise(20_000, seed: UInt64(added))))
    }
    #expect(added >= 1)
    let result = outcome.results[0]
    #expect(result.status == .rejected && result.reason == .tooLarge)
    let message = try #require(result.message)
    #expect(message.contains("[limits] page_bytes") && message.contains("\(limit)"), "\(message)")
    #expect(message.contains("page p"), "\(message)")
    // A rejected mutation writes nothing.
    let before = try f.dump()
    let again = try f.push("c1", "p", f.addBlock("p", "b\(added)", noise(20_000, seed: UInt64(added))))
    #expect(again.results.map(\.reason) == [.tooLarge])
    #expect(try f.dump() == before)
    // Several mutations of one batch add up: each fits alone, not both.
    let sizeBefore = try f.size("p")
    let room = limit - sizeBefore
    let pair = try f.push(
      "c1",
      [
        f.mutation("c1", "p", .setProperty(name: "a", value: .string(noise(room / 2 + 100, seed: 10)))),
        f.mutation("c1", "p", .setProperty(name: "b", value: .string(noise(room / 2 + 100, seed: 11)))),
      ])
    #expect(pair.results.map(\.status) == [.applied, .rejected])
    #expect(try f.size("p") == sizeBefore + 1 + room / 2 + 100 + 2)
    // Deleting a block makes room: the block refused now fits.
    try f.push("c1", "p", .deleteBlock(block: id("b0")))
    #expect(
      try f.push("c1", "p", f.addBlock("p", "again", noise(20_000, seed: 99))).results.map(\.status)
        == [.applied])
  }

  /// A block's text grows through the CRDT (`splice_text`, `mark_text`) and through an old client's whole
  /// text (`edit_block`): past `page_bytes` each is rejected and writes nothing; a splice that shrinks applies.
  @Test(arguments: StoreEngine.tested) func textGrowthPastPageBytesIsRejectedAndShrinkingIsNot(
    engine: StoreEngine
  ) throws {
    let f = try SizeFixture(engine, pageBytes: 1 << 20)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    let first = noise(40_000, seed: 1)
    try f.push("c1", "p", f.addBlock("p", "b", first))
    try f.push("c1", "p", f.addBlock("p", "c", noise(15_000, seed: 2)))
    let room = 5_000
    let limit = try f.size("p") + room
    f.store.limits.maxPageBytes = limit
    var device = TextDocument(text: first, client: "")
    let grows = try device.splice(at: 10, delete: 0, insert: noise(room + 1, seed: 3), client: "laptop")
    let before = try f.dump()
    let outcomes = try f.push(
      "laptop",
      [
        f.mutation("laptop", "p", .spliceText(block: id("b"), ops: TextOps(grows))),
        f.mutation(
          "laptop", "p", .editBlock(block: id("c"), text: noise(15_000 + room + 1, seed: 2), attributes: nil)),
      ])
    #expect(outcomes.results.map(\.reason) == [.tooLarge, .tooLarge])
    #expect(outcomes.results.allSatisfy { $0.message?.contains("[limits] page_bytes") == true })
    #expect(outcomes.sequence == nil)
    #expect(try f.dump() == before)
    // Shrinking a page over nothing: deleting most of the text applies, and then the growth fits.
    var shrinker = TextDocument(text: first, client: "")
    let shrinks = try shrinker.splice(at: 0, delete: 30_000, insert: "", client: "phone")
    #expect(
      try f.push("phone", "p", .spliceText(block: id("b"), ops: TextOps(shrinks))).results.map(\.status)
        == [.applied])
    #expect(try f.size("p") < limit - 25_000)
    #expect(
      try f.push("laptop", "p", .spliceText(block: id("b"), ops: TextOps(grows))).results.map(\.status)
        == [.applied])
  }

  @Test(arguments: StoreEngine.tested) func titlesPropertiesAndRowsCountToo(engine: StoreEngine) throws {
    let limit = 64 * 1024
    let f = try SizeFixture(engine, pageBytes: limit)
    try f.push("c1", "db", .createDatabase(parent: nil, title: "DB"))
    // A row's properties count at its creation.
    let big = (0..<4).reduce(into: [String: PropertyValue]()) {
      $0["p\($1)"] = .string(noise(20_000, seed: UInt64($1)))
    }
    let row = try f.push("c1", "r1", .createRow(database: id("db"), title: "Row", properties: big))
    #expect(row.results.map(\.reason) == [.tooLarge])
    #expect(try f.store.snapshot(of: id("r1"), workspaces: [SizeFixture.workspace]) == nil)
    var three = big
    three["p3"] = nil
    #expect(
      try f.push("c1", "r1", .createRow(database: id("db"), title: "Row", properties: three)).results.map(
        \.status) == [.applied])
    // Up to the limit, not past it: a property, then a title.
    let room = limit - (try f.size("r1"))
    let fits = try f.push(
      "c1", "r1", .setProperty(name: "x", value: .string(noise(room - 1 - 2 - 10, seed: 9))))
    #expect(fits.results.map(\.status) == [.applied])
    let title = try f.push("c1", "r1", .setTitle(noise(200, seed: 5)))
    #expect(title.results.map(\.reason) == [.tooLarge])
    #expect(try f.size("r1") <= limit)
    // Replacing a value by a shorter one is fine however full the page.
    #expect(
      try f.push("c1", "r1", .setProperty(name: "x", value: .string("small"))).results.map(\.status)
        == [.applied])
  }

  /// A mutation rejected after it recorded a change to another page (a database made under a page records the
  /// page's "databases" before its own size is checked) leaves that page unchanged: no new time, not in the
  /// answer, no sequence taken.
  @Test(arguments: StoreEngine.tested) func aRejectedMutationChangesNoOtherPage(engine: StoreEngine) throws {
    let f = try SizeFixture(engine, pageBytes: 64)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    let before = try f.store.connection.query("SELECT last_updated FROM page WHERE id = 'p'")
    let sequence = f.store.sequence
    let outcome = try f.push(
      "c1", "db", .createDatabase(parent: id("p"), title: String(repeating: "d", count: 65)))
    #expect(outcome.results.map(\.reason) == [.tooLarge])
    #expect(outcome.pages.isEmpty && outcome.sequence == nil)
    #expect(try f.store.connection.query("SELECT last_updated FROM page WHERE id = 'p'") == before)
    #expect(f.store.sequence == sequence)
  }

  /// A page stored before the limit (or before it was lowered) stays readable and editable in every way that
  /// does not grow it.
  @Test(arguments: StoreEngine.tested) func aPageAlreadyOverTheLimitStaysReadableAndMayShrink(
    engine: StoreEngine
  ) throws {
    let f = try SizeFixture(engine, pageBytes: 1 << 20)
    try f.push("c1", "p", .createPage(parent: nil, title: "A title"))
    for n in 0..<4 { try f.push("c1", "p", f.addBlock("p", "b\(n)", noise(30_000, seed: UInt64(n)))) }
    f.store.limits.maxPageBytes = 64 * 1024
    #expect(try f.size("p") > 64 * 1024)
    let page = try #require(try f.store.snapshot(of: id("p"), workspaces: [SizeFixture.workspace]))
    #expect(page.blocks.count == 4)
    let outcome = try f.push(
      "c1",
      [
        f.mutation("c1", "p", .setTitle("T")),
        f.mutation("c1", "p", .moveBlock(block: id("b0"), after: id("b3"))),
        f.mutation("c1", "p", .deleteBlock(block: id("b1"))),
        f.mutation("c1", "p", .setTitle("A longer title than before")),
        f.mutation("c1", "p", f.addBlock("p", "new", "x")),
      ])
    #expect(outcome.results.map(\.status) == [.applied, .applied, .applied, .rejected, .rejected])
  }

  /// A re-sent rejected mutation is rejected again with the same words.
  @Test(arguments: StoreEngine.tested) func aResentRejectionKeepsItsMessage(engine: StoreEngine) throws {
    let f = try SizeFixture(engine, pageBytes: 64 * 1024)
    try f.push("c1", "p", .createPage(parent: nil, title: "P"))
    let batch = [f.mutation("c1", "p", f.addBlock("p", "b", noise(65_000, seed: 1)))]
    let first = try f.push("c1", batch)
    let again = try f.push("c1", batch)
    #expect(first.results.map(\.reason) == [.tooLarge])
    #expect(again.results == first.results)
    #expect(again.results[0].message?.contains("[limits] page_bytes") == true)
  }
}
