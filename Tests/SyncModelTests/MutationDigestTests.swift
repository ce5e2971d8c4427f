import RichText
import StrictJSON
import SyncModel
import Testing

/// `Mutation.contentDigest`, which the broker keeps per client and mutation id to tell a re-send from another
/// mutation under a used id (`id_reused`). Stored values must stay valid: the function never changes.
@Suite struct MutationDigestTests {
  static func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

  static let title = Mutation(
    id: 7, page: id("home"), time: HLCTimestamp(millis: 1_732_244_000_123, counter: 7),
    action: .setTitle("Home"))

  /// Pinned: a digest written by one version is compared by the next. If this fails, the function changed, and
  /// every kept digest would call re-sends `id_reused` (the device would send them again under a new client id:
  /// applied twice). Change it only with a new table.
  @Test func theDigestOfAKnownMutationIsPinned() {
    #expect(Self.title.contentDigest == 0xd757_f26b_85d4_31c6)
  }

  /// The id is not part of it, nor how the JSON was written: member order, spacing, escapes, number spellings.
  @Test func theSameContentWrittenOtherwiseHasTheSameDigest() throws {
    var renumbered = Self.title
    renumbered.id = 8
    #expect(renumbered.contentDigest == Self.title.contentDigest)
    let plain = #"{"id":7,"page":"home","time":"1732244000123:7","type":"set_title","title":"Home"}"#
    let other =
      #"{ "title" : "H\u006fme", "type":"set_title", "time":"1732244000123:7", "page":"ho\u006de", "id":7.0e0 }"#
    let first = try JSONReader.decode(Mutation.self, from: plain)
    let second = try JSONReader.decode(Mutation.self, from: other)
    #expect(first.contentDigest == Self.title.contentDigest && second.contentDigest == first.contentDigest)

    let properties = #"{"a": 1, "b": ["x"], "c": -0, "d": true}"#
    let reordered = #"{"d": true, "c": 0e5, "b": ["x"], "a": 1.0}"#
    func row(_ json: String) throws -> Mutation {
      try JSONReader.decode(
        Mutation.self,
        from: #"{"id":1,"page":"r","time":"1:0","type":"create_row","database":"db","title":"","properties":"#
          + json + "}")
    }
    #expect(try row(properties).contentDigest == (try row(reordered)).contentDigest)
  }

  /// Every field counts: a change to any one of them is another mutation.
  @Test func everyFieldChangesTheDigest() throws {
    let time = HLCTimestamp(millis: 5, counter: 1)
    func m(_ action: MutationAction, page: String = "p", time: HLCTimestamp = time) -> Mutation {
      Mutation(id: 1, page: Self.id(page), time: time, action: action)
    }
    let update = TextUpdate(runs: [
      InsertRun(client: "c", counter: 0, length: 1, left: nil, right: nil, text: ["x"])
    ])
    let mutations: [Mutation] = [
      m(.setTitle("a")), m(.setTitle("a"), page: "q"),
      m(.setTitle("a"), time: HLCTimestamp(millis: 5, counter: 2)),
      m(.setTitle("a"), time: HLCTimestamp(millis: 6, counter: 1)), m(.setTitle("b")), m(.setTitle("")),
      m(.createPage(parent: nil, title: "a")), m(.createPage(parent: Self.id("x"), title: "a")),
      m(.createDatabase(parent: nil, title: "a")),
      m(.createRow(database: Self.id("d"), title: "a", properties: [:])),
      m(.createRow(database: Self.id("d"), title: "a", properties: ["k": .number(1)])),
      m(.createRow(database: Self.id("d"), title: "a", properties: ["k": .number(2)])),
      m(.createRow(database: Self.id("d"), title: "a", properties: ["k": .string("1")])),
      m(.setProperty(name: "k", value: nil)), m(.setProperty(name: "k", value: .bool(true))),
      m(.setProperty(name: "k", value: .bool(false))), m(.setProperty(name: "k", value: .list(["a", "b"]))),
      m(.setProperty(name: "k", value: .list(["ab"]))),
      m(.addBlock(block: Self.id("b"), type: "text", text: "t", after: nil, attributes: [:])),
      m(.addBlock(block: Self.id("b"), type: "text", text: "t", after: Self.id("a"), attributes: [:])),
      m(.addBlock(block: Self.id("b"), type: "text", text: "t", after: nil, attributes: ["k": "v"])),
      m(.editBlock(block: Self.id("b"), text: nil, attributes: nil)),
      m(.editBlock(block: Self.id("b"), text: "", attributes: nil)),
      m(.editBlock(block: Self.id("b"), text: nil, attributes: [:])),
      m(.spliceText(block: Self.id("b"), ops: TextOps(update))),
      m(.markText(block: Self.id("b"), ops: TextOps(update))),
      m(.spliceText(block: Self.id("b"), ops: TextOps(TextUpdate()))),
      m(.moveBlock(block: Self.id("b"), after: nil)), m(.moveBlock(block: Self.id("b"), after: Self.id("a"))),
      m(.deleteBlock(block: Self.id("b"))), m(.movePage(parent: nil)), m(.movePage(parent: Self.id("x"))),
      m(.deletePage), m(.setView(filter: nil, sort: nil)),
      m(.setView(filter: ViewFilter(property: "k", value: .string("v")), sort: nil)),
      m(.setView(filter: nil, sort: ViewSort(property: "k"))),
      m(.setView(filter: nil, sort: ViewSort(property: "k", descending: true))),
    ]
    let digests = mutations.map(\.contentDigest)
    #expect(Set(digests).count == mutations.count, "\(mutations.count - Set(digests).count) collisions")
  }
}
