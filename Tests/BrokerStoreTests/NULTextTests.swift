import BrokerStore
import EventLoopTestKit
import RichText
import SQLiteStore
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// U+0000 in a text or string value: SQLite keeps it, PostgreSQL's `text` refuses it (the whole batch failed there
/// with a 500). Both engines now reject such a mutation alike, before the store: `invalid_value` with a message
/// naming NUL (docs/protocol.md, "Rejection reasons"), and the rest of the batch applies.
@Suite struct NULTextTests {
  @Test(arguments: StoreEngine.tested) func aNULInAnyStoredStringIsRejectedAlikeOnBothEngines(
    engine: StoreEngine
  ) throws {
    let database = try TestStoreDatabase(engine)
    let store = try PageStore(connection: try database.open())
    defer {
      store.connection.close()
      database.remove()
    }
    let workspace = id("ws1")
    var next: UInt64 = 0
    func mutation(_ page: String, _ action: MutationAction) -> Mutation {
      next += 1
      return Mutation(id: next, page: id(page), time: HLCTimestamp(millis: 1000 + next), action: action)
    }
    func push(_ mutations: [Mutation]) throws -> BatchOutcome {
      try store.connection.transaction(writing: true) {
        try store.apply(
          MutationBatch(client: id("c1"), workspace: workspace, mutations: mutations), user: id("alice"),
          workspaces: [workspace], nowMillis: 2000)
      }
    }
    let setup = try push([
      mutation("p", .createPage(parent: nil, title: "P")),
      mutation("db", .createDatabase(parent: nil, title: "DB")),
      mutation("p", .addBlock(block: id("b1"), type: "text", text: "hello", after: nil, attributes: [:])),
    ])
    #expect(setup.results.map(\.status) == [.applied, .applied, .applied])
    var device = TextDocument(text: "hello", client: "")
    let splice = try device.splice(at: 5, delete: 0, insert: "a\u{0}b", client: "c1")
    let mark = try device.mark(
      from: 0, to: 3, type: .link, value: "https://x/\u{0}", client: "c1",
      time: MarkTime(millis: 5, counter: 0))
    let nul = "x\u{0}y"
    let bad: [(String, MutationAction)] = [
      ("n1", .createPage(parent: nil, title: nul)),
      ("n2", .createDatabase(parent: nil, title: nul)),
      ("r1", .createRow(database: id("db"), title: "R", properties: ["s": .string(nul)])),
      ("r2", .createRow(database: id("db"), title: "R", properties: [nul: .number(1)])),
      ("p", .setTitle(nul)),
      ("p", .setProperty(name: nul, value: .bool(true))),
      ("p", .setProperty(name: "s", value: .string(nul))),
      ("p", .setProperty(name: "l", value: .list(["ok", nul]))),
      ("p", .addBlock(block: id("b2"), type: "text", text: nul, after: nil, attributes: [:])),
      ("p", .addBlock(block: id("b3"), type: "text", text: "t", after: nil, attributes: ["k": nul])),
      ("p", .addBlock(block: id("b4"), type: "text", text: "t", after: nil, attributes: [nul: "v"])),
      ("p", .editBlock(block: id("b1"), text: nul, attributes: nil)),
      ("p", .editBlock(block: id("b1"), text: nil, attributes: ["k": nul])),
      ("p", .spliceText(block: id("b1"), ops: TextOps(splice))),
      ("p", .markText(block: id("b1"), ops: TextOps(mark))),
      ("db", .setView(filter: ViewFilter(property: "s", value: .string(nul)), sort: nil)),
      ("db", .setView(filter: nil, sort: ViewSort(property: nul))),
    ]
    let rejected = bad.map { mutation($0.0, $0.1) }
    let outcome = try push(rejected + [mutation("p", .setTitle("still applied"))])
    for (result, (page, action)) in zip(outcome.results, bad) {
      #expect(result.status == .rejected, "\(page) \(action.typeName): \(result)")
      #expect(result.reason == .invalidValue, "\(page) \(action.typeName): \(result)")
      #expect(result.message == Mutation.nulMessage, "\(page) \(action.typeName): \(result)")
    }
    #expect(outcome.results.last?.status == .applied)
    #expect(outcome.results.count == bad.count + 1)
    // Nothing with a NUL was stored; the rejections (with their message) were.
    let title = try store.connection.query("SELECT title FROM page WHERE id = 'p'")
    #expect(title == [[.text("still applied")]])
    let blocks = try store.connection.query("SELECT id, text FROM block ORDER BY id")
    #expect(blocks == [[.text("b1"), .text("hello")]])
    let rejections = try store.connection.query("SELECT COUNT(*) FROM rejection WHERE message IS NOT NULL")
    #expect(rejections == [[.integer(Int64(bad.count))]])
  }
}
