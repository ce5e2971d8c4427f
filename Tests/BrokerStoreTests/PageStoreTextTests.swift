import BrokerStore
import EventLoopTestKit
import RichText
import SQLiteStore
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// A page store on a fresh file with page `p` and its block `b` holding `text`, and what devices do: each
/// keeps the block's text as the broker's first text (`TextDocument(text:client:"")`, the ids every replica
/// derives) and pushes its CRDT updates as `splice_text` and `mark_text`.
private final class TextFixture {
  let file: TestStoreDatabase
  let store: PageStore
  var nextID: [String: UInt64] = [:]
  var wall: UInt64 = 1_000_000
  let first: String

  static let workspace = id("ws1")

  init(
    _ engine: StoreEngine, text: String = "The quick fox jumps.", limits: MutationLimits = MutationLimits()
  ) throws {
    file = try TestStoreDatabase(engine)
    let connection = try file.open()
    store = try PageStore(connection: connection, limits: limits)
    first = text
    try push("setup", "p", .createPage(parent: nil, title: "P"))
    try push("setup", "p", .addBlock(block: id("b"), type: "text", text: text, after: nil, attributes: [:]))
  }

  deinit {
    store.connection.close()
    file.remove()
  }

  /// The block as a device that has synced it knows it.
  var device: TextDocument { TextDocument(text: first, client: "") }

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

  func splice(_ client: String, _ update: TextUpdate) -> Mutation {
    mutation(client, "p", .spliceText(block: id("b"), ops: TextOps(update)))
  }

  func mark(_ client: String, _ update: TextUpdate) -> Mutation {
    mutation(client, "p", .markText(block: id("b"), ops: TextOps(update)))
  }

  /// Block `b` as a snapshot carries it.
  func block() throws -> BlockState {
    try #require(try store.snapshot(of: id("p"), workspaces: [Self.workspace])?.blocks.first)
  }

  /// The broker's state of block `b`, from a snapshot's `crdt`.
  func state() throws -> TextDocument {
    try TextDocument(encoded: #require(try block().crdt).bytes)
  }

  /// Every row of the tables a text mutation may write, and the sequence.
  func dump() throws -> [[SQLiteValue]] {
    try ["page", "block", "change_log"].flatMap { table in
      try store.connection.query("SELECT * FROM \(table) ORDER BY 1, 2")
    } + [[.integer(Int64(store.sequence))]]
  }
}

@Suite struct PageStoreTextTests {
  @Test(arguments: StoreEngine.tested) func aResentSpliceIsAppliedOnce(engine: StoreEngine) throws {
    let f = try TextFixture(engine)
    var laptop = f.device
    let batch = [f.splice("laptop", try laptop.splice(at: 10, delete: 0, insert: "brown ", client: "laptop"))]
    let first = try f.push("laptop", batch)
    #expect(first.results.map(\.status) == [.applied])
    let sequence = f.store.sequence
    let again = try f.push("laptop", batch)
    #expect(again.results.map(\.status) == [.duplicate])
    #expect(again.sequence == nil && f.store.sequence == sequence)
    #expect(try f.block().text == "The quick brown fox jumps.")
    #expect(try f.state().text == "The quick brown fox jumps.")
    // The same operations under a new id (a device that lost its answer and numbered them anew): the CRDT
    // keeps each character once.
    let renumbered = try f.push("laptop", [f.splice("laptop", try #require(batch[0].textUpdate))])
    #expect(renumbered.results.map(\.status) == [.applied])
    #expect(try f.block().text == "The quick brown fox jumps.")
    #expect(try f.state().text == laptop.text)
  }

  /// A device's update that refers to characters of another device's update the broker has not received yet:
  /// accepted and kept waiting in the state; both appear, once each, when the other arrives.
  @Test(arguments: StoreEngine.tested) func anUpdateAheadOfTheOneItBuildsOnWaitsForIt(engine: StoreEngine)
    throws
  {
    let f = try TextFixture(engine)
    var phone = f.device
    let brown = try phone.splice(at: 10, delete: 0, insert: "brown ", client: "phone")
    var laptop = f.device
    laptop.apply(brown)
    // After "brown ": the laptop's characters have the phone's as their left origin.
    let big = try laptop.splice(at: 16, delete: 0, insert: "big ", client: "laptop")
    #expect(big.runs.first?.left?.client == "phone")

    #expect(try f.push("laptop", [f.splice("laptop", big)]).results.map(\.status) == [.applied])
    #expect(try f.block().text == "The quick fox jumps.")
    #expect(try f.state().hasPendingOperations)

    #expect(try f.push("phone", [f.splice("phone", brown)]).results.map(\.status) == [.applied])
    #expect(try f.block().text == "The quick brown big fox jumps.")
    let state = try f.state()
    #expect(state.text == "The quick brown big fox jumps.")
    #expect(!state.hasPendingOperations)
    #expect(state.text == laptop.text)
  }

  /// Insert runs and mark operations must be the batch client's own: one that claims another client's ids is
  /// rejected (`invalid_value`) and writes nothing.
  @Test(arguments: StoreEngine.tested) func operationsClaimingAnotherClientAreRejectedAndWriteNothing(
    engine: StoreEngine
  ) throws {
    let f = try TextFixture(engine)
    var phone = f.device
    let claimed = try phone.splice(at: 0, delete: 0, insert: "Oh, ", client: "phone")
    let markedAsPhone = try phone.mark(
      from: 0, to: 3, type: .bold, value: nil, client: "phone", time: MarkTime(millis: 5, counter: 0))
    var mine = f.device
    var mixed = try mine.splice(at: 4, delete: 0, insert: "very ", client: "laptop")
    var other = f.device
    mixed.runs += try other.splice(at: 0, delete: 0, insert: "x", client: "phone").runs
    let before = try f.dump()
    let outcome = try f.push(
      "laptop", [f.splice("laptop", claimed), f.mark("laptop", markedAsPhone), f.splice("laptop", mixed)])
    #expect(outcome.results.map(\.reason) == [.invalidValue, .invalidValue, .invalidValue])
    #expect(outcome.sequence == nil)
    #expect(try f.dump() == before)
    // From its own client the same splice applies.
    #expect(try f.push("phone", [f.splice("phone", claimed)]).results.map(\.status) == [.applied])
    #expect(try f.block().text == "Oh, The quick fox jumps.")
  }

  /// A splice that would take the text past `maxTextBytes` (each mutation on its own is within it) is
  /// rejected (`too_large`) and writes nothing; up to the limit it applies.
  @Test(arguments: StoreEngine.tested) func aTextOverTheByteLimitIsTooLargeAndWritesNothing(
    engine: StoreEngine
  ) throws {
    var limits = MutationLimits()
    limits.maxTextBytes = 24
    let f = try TextFixture(engine, limits: limits)  // 20 bytes
    var laptop = f.device
    let tooMuch = try laptop.splice(at: 10, delete: 0, insert: "brüwn ", client: "laptop")  // 7 bytes
    let before = try f.dump()
    let rejected = try f.push("laptop", [f.splice("laptop", tooMuch)])
    #expect(rejected.results.map(\.reason) == [.tooLarge])
    #expect(try f.dump() == before)
    var phone = f.device
    let fits = try phone.splice(at: 10, delete: 0, insert: "bié", client: "phone")  // 4 bytes: 24 in all
    #expect(try f.push("phone", [f.splice("phone", fits)]).results.map(\.status) == [.applied])
    #expect(try f.block().text == "The quick biéfox jumps.")
    // At the limit, one more byte is too large.
    let one = try phone.splice(at: 0, delete: 0, insert: "x", client: "phone")
    #expect(try f.push("phone", [f.splice("phone", one)]).results.map(\.reason) == [.tooLarge])
    // Deleting makes room: four bytes in place of four.
    var again = f.device
    again.apply(fits)
    let swap = try again.splice(at: 10, delete: 3, insert: "brü", client: "laptop")
    #expect(try f.push("laptop", [f.splice("laptop", swap)]).results.map(\.status) == [.applied])
    #expect(try f.block().text == "The quick brüfox jumps.")
    #expect(try f.state().text == "The quick brüfox jumps.")
  }

  /// Runs far past a client's counters, each within the allowance on its own, would add up to more ids than a
  /// state may hold (`TextDocument.maxIdentifiers`): refused `too_large` before the state is stored, so the
  /// stored state always reads back and the block keeps taking edits.
  @Test(arguments: StoreEngine.tested) func countersClimbingPastWhatAStateHoldsAreTooLarge(
    engine: StoreEngine
  ) throws {
    var limits = MutationLimits()
    limits.maxTextBytes = 1 << 23
    // Only what a state may hold bounds the climb here (text_characters_per_block is tested on its own).
    limits.maxTextCharacters = 1 << 30
    let f = try TextFixture(engine, limits: limits)
    func far(_ counter: UInt32) -> TextUpdate {
      TextUpdate(runs: [
        InsertRun(
          client: "laptop", counter: counter, length: 1, left: CharacterID(client: "", counter: 19),
          right: nil,
          text: ["!"])
      ])
    }
    #expect(try f.push("laptop", [f.splice("laptop", far(1 << 23))]).results.map(\.status) == [.applied])
    #expect(try f.state().text == "The quick fox jumps.!")
    let before = try f.dump()
    let climbed = try f.push("laptop", [f.splice("laptop", far((1 << 23) + 1 + (1 << 23)))])
    #expect(climbed.results.map(\.reason) == [.tooLarge])
    #expect(try f.dump() == before)
    var phone = f.device
    let edit = try phone.splice(at: 0, delete: 4, insert: "", client: "phone")
    #expect(try f.push("phone", [f.splice("phone", edit)]).results.map(\.status) == [.applied])
    #expect(try f.state().text == "quick fox jumps.!")
  }

  /// A delta since a sequence carries the block's update since then (only the runs, deletions and marks that
  /// reached the broker after it); a snapshot carries the whole state.
  @Test(arguments: StoreEngine.tested) func aDeltaCarriesOnlyWhatChangedSinceItsSequenceASnapshotEverything(
    engine: StoreEngine
  ) throws {
    let f = try TextFixture(engine)
    var laptop = f.device
    let brown = try laptop.splice(at: 10, delete: 0, insert: "brown ", client: "laptop")
    try f.push("laptop", [f.splice("laptop", brown)])
    let since = f.store.sequence
    var phone = f.device
    phone.apply(brown)
    let high = try phone.splice(at: 25, delete: 1, insert: " high!", client: "phone")
    let bold = try phone.mark(
      from: 4, to: 9, type: .bold, value: nil, client: "phone", time: MarkTime(millis: 7, counter: 0))
    try f.push("phone", [f.splice("phone", high), f.mark("phone", bold)])

    let delta = try #require(
      try f.store.delta(of: id("p"), since: since, workspaces: [TextFixture.workspace]))
    #expect(!delta.full)
    let block = try #require(delta.blocks.first)
    #expect(block.text == "The quick brown fox jumps high!")
    let update = try #require(try block.crdt?.update())
    // The phone's run, its deletion (the tombstone of the "." it deleted) and its mark: nothing older.
    #expect(Set(update.runs.map(\.client)) == ["phone", ""])
    #expect(update.runs.filter { $0.client == "phone" }.map(\.text) == [Array(" high!".unicodeScalars)])
    #expect(update.runs.filter { $0.client == "" }.allSatisfy { $0.text == nil && $0.length == 1 })
    #expect(!update.runs.contains { $0.client == "laptop" })
    #expect(update.deletes.map(\.client) == [""])
    #expect(update.marks.map(\.client) == ["phone"])
    #expect(update.insertedCount < 10)
    // A device that had everything up to `since` gets the broker's text from it.
    var synced = f.device
    synced.apply(brown)
    synced.apply(update)
    #expect(synced.text == block.text)
    #expect(synced.marks == block.marks)

    let snapshot = try f.block()
    let whole = try TextDocument(encoded: #require(snapshot.crdt).bytes)
    #expect(whole.text == "The quick brown fox jumps high!")
    #expect(Set(whole.version.keys) == ["", "laptop", "phone"])
    #expect(whole.marks == snapshot.marks)
    #expect(try #require(snapshot.crdt).update().insertedCount == 20 + 6 + 6)
  }

  /// `edit_block` with a text, from a client that predates the CRDT, is merged as the fewest splices against
  /// the broker's text: a splice made concurrently (on the text before the edit) keeps its words, and so does
  /// an old client's edit made on a text that already had the splice.
  @Test(arguments: StoreEngine.tested) func anOldStyleWholeTextEditMergesWithAConcurrentSplice(
    engine: StoreEngine
  ) throws {
    let f = try TextFixture(engine)
    var laptop = f.device
    let brown = try laptop.splice(at: 10, delete: 0, insert: "brown ", client: "laptop")
    try f.push("old", "p", .editBlock(block: id("b"), text: "The quick fox jumps high.", attributes: nil))
    #expect(try f.block().text == "The quick fox jumps high.")
    #expect(try f.push("laptop", [f.splice("laptop", brown)]).results.map(\.status) == [.applied])
    #expect(try f.block().text == "The quick brown fox jumps high.")

    // The old client reads the merged text and edits it whole again; a device splices concurrently.
    var phone = try f.state()
    let red = try phone.splice(at: 0, delete: 3, insert: "A", client: "phone")
    try f.push(
      "old", "p", .editBlock(block: id("b"), text: "The quick brown fox jumps high, twice.", attributes: nil))
    try f.push("phone", [f.splice("phone", red)])
    #expect(try f.block().text == "A quick brown fox jumps high, twice.")
    #expect(try f.state().text == "A quick brown fox jumps high, twice.")
  }

  /// Marks are rendered for readers in the block's `marks` column (JSON) and in snapshots, and follow the
  /// text as it is edited.
  /// Operations that never find what they need (runs whose origin never arrives, marks whose anchors never do)
  /// count against `text_characters_per_block`: a client cannot make a block's state grow without bound by
  /// sending them, and past the bound its edits are `too_large`, writing nothing.
  @Test(arguments: StoreEngine.tested) func operationsWaitingForeverCountAgainstTheBlocksBound(
    engine: StoreEngine
  ) throws {
    var limits = MutationLimits()
    limits.maxTextCharacters = 45
    let f = try TextFixture(engine, limits: limits)
    let nowhere = CharacterID(client: "ghost", counter: 3)
    func orphan(_ counter: UInt32) -> TextUpdate {
      TextUpdate(runs: [
        InsertRun(
          client: "laptop", counter: counter, length: 10, left: nowhere, right: nil,
          text: Array("0123456789".unicodeScalars))
      ])
    }
    // The first text holds 20; each waiting run 10 more: two fit (40), the third passes 45.
    #expect(try f.push("laptop", [f.splice("laptop", orphan(0))]).results.map(\.status) == [.applied])
    #expect(try f.push("laptop", [f.splice("laptop", orphan(10))]).results.map(\.status) == [.applied])
    #expect(try f.state().hasPendingOperations)
    let before = try f.dump()
    #expect(try f.push("laptop", [f.splice("laptop", orphan(20))]).results.map(\.reason) == [.tooLarge])
    #expect(try f.dump() == before)
    // Marks anchored nowhere count too (one each).
    let marks = (0..<30).map { index in
      MarkOperation(
        type: .bold, value: nil, remove: false, start: .before(nowhere), end: .end, client: "laptop",
        time: MarkTime(millis: 100, counter: UInt32(index)))
    }
    #expect(
      try f.push("laptop", [f.mark("laptop", TextUpdate(marks: marks))]).results.map(\.reason) == [.tooLarge])
    #expect(try f.dump() == before)
  }

  @Test(arguments: StoreEngine.tested) func marksAreRenderedInTheMarksColumn(engine: StoreEngine) throws {
    let f = try TextFixture(engine)
    var laptop = f.device
    let bold = try laptop.mark(
      from: 4, to: 9, type: .bold, value: nil, client: "laptop", time: MarkTime(millis: 5, counter: 0))
    let link = try laptop.mark(
      from: 10, to: 13, type: .link, value: "https://example.com/fox", client: "laptop",
      time: MarkTime(millis: 6, counter: 0))
    try f.push("laptop", [f.mark("laptop", bold), f.mark("laptop", link)])
    let expected = [
      TextMark(type: "bold", start: 4, end: 9),
      TextMark(type: "link", start: 10, end: 13, value: "https://example.com/fox"),
    ]
    #expect(try f.block().marks == expected)
    func column() throws -> String {
      let row = try f.store.connection.query("SELECT marks FROM block WHERE id = 'b'")
      guard case .text(let json) = row.first?.first else { return "" }
      return json
    }
    #expect(try column().contains(#""type":"bold""#))
    #expect(try column().contains(#""start":10"#) && column().contains(#""end":13"#))
    #expect(try column().contains("example.com"))
    // Text typed at the end of the bold range is bold (bold grows), before the link's start is not linked.
    var phone = f.device
    phone.apply(bold)
    phone.apply(link)
    let typed = try phone.splice(at: 9, delete: 0, insert: "est", client: "phone")
    try f.push("phone", [f.splice("phone", typed)])
    #expect(try f.block().text == "The quickest fox jumps.")
    #expect(
      try f.block().marks == [
        TextMark(type: "bold", start: 4, end: 12),
        TextMark(type: "link", start: 13, end: 16, value: "https://example.com/fox"),
      ])
    #expect(try column().contains(#""end":12"#) && column().contains(#""start":13"#))
    // Removing the bold clears it from the column.
    let unbold = try laptop.mark(
      from: 0, to: 13, type: .bold, value: nil, remove: true, client: "laptop",
      time: MarkTime(millis: 9, counter: 0))
    try f.push("laptop", [f.mark("laptop", unbold)])
    #expect(
      try f.block().marks == [TextMark(type: "link", start: 13, end: 16, value: "https://example.com/fox")])
    #expect(try !column().contains("bold"))
  }
}

extension Mutation {
  /// The CRDT update a text mutation carries.
  fileprivate var textUpdate: TextUpdate? {
    switch action {
    case .spliceText(_, let ops), .markText(_, let ops): try? ops.update()
    default: nil
    }
  }
}
