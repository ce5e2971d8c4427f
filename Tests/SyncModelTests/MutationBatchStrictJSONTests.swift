import EventLoopTestKit
import FoundationEssentials
import RichText
import StrictJSON
import StrictJSONTestKit
import SyncModel
import Testing

/// Random batches: every action, ids of every shape, times up to the largest, text with every kind of
/// character, property values of every type (doubles from their whole range).
enum RandomBatch {
  static func make(using random: inout SplitMix64) -> MutationBatch {
    var next = [1, 41, UInt64.random(in: 1...UInt64.max / 2, using: &random), UInt64.max - 3].randomElement(
      using: &random)!
    let mutations = (0..<Int.random(in: 0...12, using: &random)).map { _ in
      defer { next &+= 1 }
      return Mutation(id: next, page: id(&random), time: time(&random), action: action(&random))
    }
    return MutationBatch(client: id(&random), workspace: id(&random), mutations: mutations)
  }

  static func id(_ random: inout SplitMix64) -> EntityID {
    switch Int.random(in: 0..<4, using: &random) {
    case 0: return EntityID.random()
    case 1:
      return try! EntityID(validating: ["p1", "home", "tasks", "b", "A-b_9"].randomElement(using: &random)!)
    default:
      let alphabet = Array("ABCXYZabcxyz0189-_")
      let count = Int.random(in: 1...64, using: &random)
      return try! EntityID(
        validating: String((0..<count).map { _ in alphabet.randomElement(using: &random)! }))
    }
  }

  static func time(_ random: inout SplitMix64) -> HLCTimestamp {
    let millis = [0, 1_732_244_000_123, UInt64.random(in: 0...UInt64.max, using: &random), UInt64.max]
      .randomElement(
        using: &random)!
    let counter = [0, 7, UInt32.random(in: 0...UInt32.max, using: &random), UInt32.max].randomElement(
      using: &random)!
    return HLCTimestamp(millis: millis, counter: counter)
  }

  static func text(_ random: inout SplitMix64) -> String {
    if Int.random(in: 0..<10, using: &random) == 0 {
      return String(
        repeating: JSONMutator.randomString(using: &random) + "x",
        count: Int.random(in: 10...300, using: &random))
    }
    return JSONMutator.randomString(using: &random)
  }

  static func number(_ random: inout SplitMix64) -> Double {
    switch Int.random(in: 0..<5, using: &random) {
    case 0: return Double(Int.random(in: -1000...1000, using: &random))
    case 1:
      return [0, -0.0, 5e-324, 1e-310, .greatestFiniteMagnitude, -2.5, 0.1, 1e22, 9_007_199_254_740_993]
        .randomElement(
          using: &random)!
    case 2: return Double.random(in: -1e9...1e9, using: &random)
    default:
      var double = Double.nan
      while !double.isFinite { double = Double(bitPattern: random.next()) }
      return double
    }
  }

  static func value(_ random: inout SplitMix64) -> PropertyValue {
    switch Int.random(in: 0..<4, using: &random) {
    case 0: return .string(text(&random))
    case 1: return .number(number(&random))
    case 2: return .bool(Bool.random(using: &random))
    default: return .list((0..<Int.random(in: 0...4, using: &random)).map { _ in text(&random) })
    }
  }

  static func maybe<T>(_ random: inout SplitMix64, _ make: (inout SplitMix64) -> T) -> T? {
    Bool.random(using: &random) ? make(&random) : nil
  }

  static func strings(_ random: inout SplitMix64) -> [String: String] {
    Dictionary((0..<Int.random(in: 0...3, using: &random)).map { _ in (text(&random), text(&random)) }) {
      a, _ in a
    }
  }

  /// A real text update: a splice (runs and deletions) or marks made on a small document, now and then a whole
  /// state; base64 with `+` and `/` in it often enough (escaped as `\/` by some of JSONEncoder's formats).
  static func textOps(_ random: inout SplitMix64, marks: Bool) -> TextOps {
    var document = TextDocument(text: "The quick fox jumps.", client: "")
    let client = ["A", "laptop", "b-9_"].randomElement(using: &random)!
    let count = document.count
    let from = Int.random(in: 0..<count, using: &random)
    let to = Int.random(in: (from + 1)...count, using: &random)
    let update: TextUpdate
    if marks {
      let type = MarkType.allCases.randomElement(using: &random)!
      let time = MarkTime(
        millis: UInt64.random(in: 0...UInt64.max, using: &random),
        counter: UInt32.random(in: 0...9, using: &random))
      update = try! document.mark(
        from: from, to: to, type: type, value: type.needsValue ? text(&random) + "v" : nil, client: client,
        time: time)
    } else {
      update = try! document.splice(
        at: from, delete: Int.random(in: 0...(count - from), using: &random), insert: text(&random) + "x",
        client: client)
    }
    if Int.random(in: 0..<8, using: &random) == 0 { return TextOps(bytes: document.encoded()) }
    return TextOps(update)
  }

  static func action(_ random: inout SplitMix64) -> MutationAction {
    switch Int.random(in: 0..<14, using: &random) {
    case 12: return .spliceText(block: id(&random), ops: textOps(&random, marks: false))
    case 13: return .markText(block: id(&random), ops: textOps(&random, marks: true))
    case 0: return .createPage(parent: maybe(&random, id), title: text(&random))
    case 1: return .createDatabase(parent: maybe(&random, id), title: text(&random))
    case 2:
      let properties = Dictionary(
        (0..<Int.random(in: 0...3, using: &random)).map { _ in (text(&random), value(&random)) }
      ) {
        a, _ in a
      }
      return .createRow(database: id(&random), title: text(&random), properties: properties)
    case 3: return .setTitle(text(&random))
    case 4: return .setProperty(name: text(&random), value: maybe(&random, value))
    case 5:
      return .addBlock(
        block: id(&random), type: ["text", "todo", "Bad Type", ""].randomElement(using: &random)!,
        text: text(&random),
        after: maybe(&random, id), attributes: strings(&random))
    case 6:
      return .editBlock(block: id(&random), text: maybe(&random, text), attributes: maybe(&random, strings))
    case 7: return .moveBlock(block: id(&random), after: maybe(&random, id))
    case 8: return .deleteBlock(block: id(&random))
    case 9: return .movePage(parent: maybe(&random, id))
    case 10: return .deletePage
    default:
      return .setView(
        filter: maybe(&random) { ViewFilter(property: text(&$0), value: value(&$0)) },
        sort: maybe(&random) { ViewSort(property: text(&$0), descending: Bool.random(using: &$0)) })
    }
  }

  /// `batch` as `JSONEncoder` writes it, in one of its formats.
  static func encoded(_ batch: MutationBatch, _ random: inout SplitMix64) -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [[], [.sortedKeys], [.prettyPrinted], [.withoutEscapingSlashes, .sortedKeys]]
      .randomElement(using: &random)!
    return Array(try! encoder.encode(batch))
  }
}

private func strict(_ bytes: [UInt8]) throws(JSONReadError) -> MutationBatch {
  try JSONReader.decode(MutationBatch.self, from: bytes)
}

/// The broker's batch reader (`MutationBatch: JSONReadable`) against `JSONDecoder`: the same batches from the
/// same bodies, the same refusals, and the same words for them.
@Suite struct MutationBatchStrictJSONTests {
  /// Random batches as `JSONEncoder` writes them, then written again with random spacing and escapes: both
  /// decoders read back the batch that was encoded.
  @Test func readsRandomBatchesBackAsJSONDecoderDoes() throws {
    var random = SplitMix64(seed: 0x5EED_0000_0000_0401)
    var actions = Set<String>()
    for round in 0..<600 {
      let batch = RandomBatch.make(using: &random)
      actions.formUnion(batch.mutations.map(\.action.typeName))
      let encoded = RandomBatch.encoded(batch, &random)
      let tree = try #require(TestJSON(parsing: encoded), "JSONEncoder's output is not strict JSON")
      let respaced = tree.text(TestJSON.Style(spacing: 0.3, escaping: 0.2), using: &random)
      for input in [encoded, respaced] {
        let decoded = try strict(input)
        #expect(decoded == batch, "round \(round)")
        #expect(DecodingAgreement.encoded(decoded) == DecodingAgreement.encoded(batch), "round \(round)")
        #expect(DecodingAgreement.check(MutationBatch.self, input) == .bothAccepted, "round \(round)")
      }
    }
    #expect(actions.count == 14)
  }

  /// The same batches with their numbers written other ways (`41` as `4.1e1`, `0.41E+2`, `41.000`): read as
  /// `JSONDecoder` reads them, except an integer field's number that is not exactly a whole number below 2^53
  /// (JSONDecoder rounds or truncates it): refused, as docs/protocol.md says.
  @Test func readsRespelledNumbersAsJSONDecoderDoesOrRefusesInexactIntegers() throws {
    var random = SplitMix64(seed: 0x5EED_0000_0000_0402)
    var tally = DecodingAgreement.Tally()
    for _ in 0..<600 {
      let tree = try #require(
        TestJSON(parsing: RandomBatch.encoded(RandomBatch.make(using: &random), &random)))
      tally.add(
        DecodingAgreement.check(
          MutationBatch.self, tree.text(TestJSON.Style(respelling: 0.5), using: &random)))
    }
    #expect(tally.disagreements.isEmpty, "\(tally): \(tally.disagreements.prefix(3))")
    #expect(tally.accepted > 100 && tally.inexact > 20, "\(tally)")
  }

  /// Damaged batches (members removed, duplicated, renamed or retyped, numbers almost whole, bytes flipped,
  /// truncated, junk inserted): the two agree on every one, as `DecodingAgreement` defines it.
  @Test func agreesWithJSONDecoderOnDamagedBatches() throws {
    var random = SplitMix64(seed: 0x5EED_0000_0000_0403)
    var tally = DecodingAgreement.Tally()
    for _ in 0..<4000 {
      let tree = try #require(
        TestJSON(parsing: RandomBatch.encoded(RandomBatch.make(using: &random), &random)))
      tally.add(DecodingAgreement.check(MutationBatch.self, JSONMutator.mutate(tree, using: &random)))
    }
    #expect(tally.disagreements.isEmpty, "\(tally): \(tally.disagreements.prefix(5))")
    #expect(tally.accepted > 300 && tally.refused > 1000 && tally.notStrict > 1000, "\(tally)")
  }

  /// Batches with a trailing comma or a malformed number or string somewhere: all refused, with a syntax
  /// error, also where `JSONDecoder` accepts them (a member it does not decode, a trailing comma).
  @Test func refusesLaxJSONThatJSONDecoderAccepts() throws {
    var random = SplitMix64(seed: 0x5EED_0000_0000_0404)
    var tally = DecodingAgreement.Tally()
    for _ in 0..<1000 {
      let tree = try #require(
        TestJSON(parsing: RandomBatch.encoded(RandomBatch.make(using: &random), &random)))
      tally.add(DecodingAgreement.check(MutationBatch.self, JSONMutator.laxMutate(tree, using: &random)))
    }
    #expect(tally.disagreements.isEmpty, "\(tally): \(tally.disagreements.prefix(5))")
    #expect(tally.notStrict == 1000 && tally.notStrictButFoundationAccepted > 200, "\(tally)")
  }

  static let mutation = #"{"id":4,"page":"home","time":"1:0","#

  static func batch(_ mutations: String) -> String {
    #"{"client":"laptop","workspace":"ws1","mutations":["# + mutations + "]}"
  }

  /// Real text updates: a splice (its base64 has a `/`, written `\/` below too) and a mark.
  static let spliceOps: TextOps = {
    for insert in ["é?", "ü>", "x?>", "??", ">>>"] {
      var document = TextDocument(text: "ab", client: "")
      let ops = TextOps(try! document.splice(at: 1, delete: 1, insert: insert, client: "laptop"))
      if ops.base64.contains("/") { return ops }
    }
    preconditionFailure("no splice's base64 has a slash")
  }()
  static let markOps: TextOps = {
    var document = TextDocument(text: "ab", client: "")
    return TextOps(
      try! document.mark(
        from: 0, to: 2, type: .link, value: "https://example.com", client: "laptop",
        time: MarkTime(millis: 1, counter: 0)))
  }()
  static func text(_ type: String, _ ops: String) -> String {
    mutation + #""type":"\#(type)","block":"b","ops":\#(ops)}"#
  }

  /// Every error the broker reports for a batch, worded as `JSONDecoder` (through JSONBodies.describe) words
  /// it, path included, in the order its `init(from:)` meets them.
  @Test(arguments: [
    ("[]", "Expected to decode Dictionary<String, Any> but found an array instead."),
    (
      #"{"client":1,"workspace":"w","mutations":[]}"#,
      "at client: Expected to decode String but found number instead."
    ),
    (#"{"client":"c","workspace":"w"}"#, #"missing field "mutations""#),
    (#"{"mutations":[],"workspace":"w"}"#, #"missing field "client""#),
    (
      #"{"client":"c","workspace":null,"mutations":[]}"#,
      "at workspace: Cannot get value of type String -- found null value instead"
    ),
    (
      #"{"client":"c","workspace":"w","mutations":null}"#,
      "at mutations: Cannot get unkeyed decoding container -- found null value instead"
    ),
    (
      #"{"client":"c","workspace":"w","mutations":{}}"#,
      "at mutations: Expected to decode Array<Any> but found a dictionary instead."
    ),
    (
      #"{"client":"c d","workspace":"","mutations":[]}"#,
      #"at client: invalid id "c d": ids are 1 to 64 of A-Z a-z 0-9 _ -"#
    ),
    (
      #"{"client":"c","workspace":"","mutations":[]}"#,
      #"at workspace: invalid id "": ids are 1 to 64 of A-Z a-z 0-9 _ -"#
    ),
    (batch(mutation + #""type":"set_title"}"#), #"at mutations[0]: missing field "title""#),
    (batch(mutation + #""type":"dance"}"#), #"at mutations[0].type: unknown mutation type "dance""#),
    (
      batch(mutation + #""type":7}"#),
      "at mutations[0].type: Expected to decode String but found number instead."
    ),
    (batch(#"{"page":"home","time":"1:0","type":"delete_page"}"#), #"at mutations[0]: missing field "id""#),
    (
      batch(#"{"id":"4","page":"a b","type":"delete_page"}"#),
      "at mutations[0].id: Expected to decode UInt64 but found a string instead."
    ),
    (
      batch(#"{"id":4,"page":"a/b","time":"x","type":"delete_page"}"#),
      #"at mutations[0].page: invalid id "a/b": ids are 1 to 64 of A-Z a-z 0-9 _ -"#
    ),
    (
      batch(#"{"id":4,"page":null,"time":"1:0","type":"delete_page"}"#),
      "at mutations[0].page: Cannot get value of type String -- found null value instead"
    ),
    (
      batch(#"{"id":4,"page":"p","time":"yesterday","type":"delete_page"}"#),
      #"at mutations[0].time: invalid HLC timestamp "yesterday": expected MILLIS:COUNTER"#
    ),
    (
      batch(#"{"id":4,"page":"p","time":"1:4294967296","type":"delete_page"}"#),
      #"at mutations[0].time: invalid HLC timestamp "1:4294967296": expected MILLIS:COUNTER"#
    ),
    (
      batch(mutation + #""type":"delete_page"},5"#),
      "at mutations[1]: Expected to decode Dictionary<String, Any> but found number instead."
    ),
    (
      batch(mutation + #""type":"delete_page"},null"#),
      "at mutations[1]: Cannot get keyed decoding container -- found null value instead"
    ),
    (
      batch(mutation + #""type":"set_property","name":"n","value":{}}"#),
      "at mutations[0].value: a property value is a string, a number, a boolean or a list of strings"
    ),
    (
      batch(mutation + #""type":"set_property","name":"n","value":["a",1]}"#),
      "at mutations[0].value: a property value is a string, a number, a boolean or a list of strings"
    ),
    (batch(mutation + #""type":"set_property","value":1}"#), #"at mutations[0]: missing field "name""#),
    (
      batch(mutation + #""type":"create_row","database":"d","properties":{"a":null}}"#),
      "at mutations[0].properties.a: a property value is a string, a number, a boolean or a list of strings"
    ),
    (
      batch(mutation + #""type":"create_row","properties":{}}"#),
      #"at mutations[0]: missing field "database""#
    ),
    (
      batch(mutation + #""type":"add_block","block":"b","attributes":{"k":1}}"#),
      "at mutations[0].attributes.k: Expected to decode String but found number instead."
    ),
    (
      batch(mutation + #""type":"add_block","block":"b","after":"x y"}"#),
      #"at mutations[0].after: invalid id "x y": ids are 1 to 64 of A-Z a-z 0-9 _ -"#
    ),
    (batch(mutation + #""type":"edit_block","text":1}"#), #"at mutations[0]: missing field "block""#),
    (
      batch(mutation + #""type":"set_view","filter":{"property":"x"}}"#),
      #"at mutations[0].filter: missing field "value""#
    ),
    (
      batch(mutation + #""type":"set_view","filter":{"property":"x","value":null}}"#),
      "at mutations[0].filter.value: a property value is a string, a number, a boolean or a list of strings"
    ),
    (
      batch(mutation + #""type":"set_view","sort":{"property":"x"}}"#),
      #"at mutations[0].sort: missing field "descending""#
    ),
    (
      batch(mutation + #""type":"set_view","sort":{"property":"x","descending":null}}"#),
      "at mutations[0].sort.descending: Expected to decode Bool but found null instead."
    ),
    (
      batch(mutation + #""type":"set_view","sort":[]}"#),
      "at mutations[0].sort: Expected to decode Dictionary<String, Any> but found an array instead."
    ),
    (
      batch(mutation + #""type":"set_title","title":null}"#),
      "at mutations[0].title: Cannot get value of type String -- found null value instead"
    ),
    (
      batch(mutation + #""type":"delete_page"},{"id":5,"page":"p","time":"1:0","type":"set_title"}"#),
      #"at mutations[1]: missing field "title""#
    ),
    // Text updates: base64 of a well-formed TextCodec update, or refused with the codec's word for it.
    (batch(text("splice_text", #""not base64!""#)), "at mutations[0].ops: invalid text ops: not base64"),
    (batch(text("mark_text", #""Zm9v!A==""#)), "at mutations[0].ops: invalid text ops: not base64"),
    (
      batch(text("mark_text", #""Zm9v""#)),
      "at mutations[0].ops: invalid text ops: malformed text state: unknown version"
    ),
    (batch(text("splice_text", #""Zg=""#)), "at mutations[0].ops: invalid text ops: not base64"),
    (batch(text("splice_text", #""Zh==""#)), "at mutations[0].ops: invalid text ops: not base64"),
    (
      batch(text("splice_text", #""AAAA""#)),
      "at mutations[0].ops: invalid text ops: malformed text state: unknown version"
    ),
    (
      batch(text("mark_text", #""AQc=""#)),
      "at mutations[0].ops: invalid text ops: malformed text state: unknown kind"
    ),
    (
      batch(text("splice_text", #""""#)),
      "at mutations[0].ops: invalid text ops: malformed text state: truncated"
    ),
    (
      batch(text("mark_text", "\"" + String(markOps.base64.dropLast(4)) + "\"")),
      "at mutations[0].ops: invalid text ops: malformed text state: truncated"
    ),
    (
      batch(text("splice_text", "\"" + Base64.encode(spliceOps.bytes + [0]) + "\"")),
      "at mutations[0].ops: invalid text ops: malformed text state: trailing bytes"
    ),
    (batch(mutation + #""type":"splice_text","block":"b"}"#), #"at mutations[0]: missing field "ops""#),
    (batch(mutation + #""type":"mark_text","ops":"AQI="}"#), #"at mutations[0]: missing field "block""#),
    (
      batch(text("splice_text", "null")),
      "at mutations[0].ops: Cannot get value of type String -- found null value instead"
    ),
    (
      batch(text("mark_text", "null")),
      "at mutations[0].ops: Cannot get value of type String -- found null value instead"
    ),
    (
      batch(text("splice_text", "12")),
      "at mutations[0].ops: Expected to decode String but found number instead."
    ),
    (
      batch(text("mark_text", "[]")),
      "at mutations[0].ops: Expected to decode String but found an array instead."
    ),
  ])
  func wordsEachErrorAsJSONDecoderDoes(_ json: String, _ message: String) {
    #expect(
      DecodingAgreement.check(MutationBatch.self, bytes(json))
        == .bothRefused(foundation: message, strict: message))
  }

  /// Where `JSONDecoder` says only "The given data was not valid JSON." (a number that does not fit) or words
  /// it oddly, the strict reader names the place and the problem.
  @Test(arguments: [
    (
      batch(#"{"id":-1,"page":"p","time":"1:0","type":"delete_page"}"#),
      "at mutations[0].id: a number does not fit its field (negative, fractional or too large)"
    ),
    (
      batch(#"{"id":4.5,"page":"p","time":"1:0","type":"delete_page"}"#),
      "at mutations[0].id: a number does not fit its field (negative, fractional or too large)"
    ),
    (
      batch(#"{"id":18446744073709551616,"page":"p","time":"1:0","type":"delete_page"}"#),
      "at mutations[0].id: a number does not fit its field (negative, fractional or too large)"
    ),
    (
      batch(mutation + #""type":"set_property","name":"n","value":1e400}"#),
      "at mutations[0].value: the number 1e400 is out of a double's range"
    ),
  ])
  func namesThePlaceWhereJSONDecoderDoesNot(_ json: String, _ message: String) {
    guard
      case .bothRefused(let foundation, let strict) = DecodingAgreement.check(MutationBatch.self, bytes(json))
    else {
      Issue.record("not refused by both")
      return
    }
    #expect(strict == message)
    #expect(foundation != message)
  }

  /// What `JSONDecoder` lets through and the strict reader does not (docs/protocol.md, "Strict JSON").
  @Test(arguments: [
    (batch(mutation + #""type":"delete_page",}"#), "at mutations[0]: trailing comma before '}' (byte 106)"),
    (
      batch(mutation + #""type":"delete_page","x":01}"#),
      "at mutations[0].x: invalid number: a leading zero (byte 110)"
    ),
    (
      batch(mutation + #""type":"delete_page","title":"\ud800"}"#),
      #"at mutations[0].title: lone surrogate \ud800 in a string (byte 115)"#
    ),
    (
      batch(#"{"id":1.0000000000000000001,"page":"p","time":"1:0","type":"delete_page"}"#),
      "at mutations[0].id: an integer written with a fraction or an exponent must be exactly a whole number below 2^53 (1.0000000000000000001)"
    ),
    (
      batch(#"{"id":9007199254740993.0,"page":"p","time":"1:0","type":"delete_page"}"#),
      "at mutations[0].id: an integer written with a fraction or an exponent must be exactly a whole number below 2^53 (9007199254740993.0)"
    ),
  ])
  func refusesWhatJSONDecoderLetsThrough(_ json: String, _ message: String) {
    #expect((try? JSONDecoder().decode(MutationBatch.self, from: Data(json.utf8))) != nil)
    #expect(strictError(json)?.description == message)
  }

  /// `JSONDecoder` traps (SIGILL, in its Decimal fallback) on an integer written with a long fraction and an
  /// exponent: one such batch stopped the broker. The strict reader refuses it (JSONDecoder is not called here:
  /// it would stop the test run).
  @Test func refusesTheIntegerThatMadeJSONDecoderTrap() {
    let number = "9007199254740993" + String(repeating: "9", count: 300) + "e-300"
    let json = Self.batch(#"{"id":"# + number + #","page":"p","time":"1:0","type":"delete_page"}"#)
    let error = strictError(json)
    #expect(error?.kind == .inexactInteger)
    #expect(error?.path == [.key("mutations"), .index(0), .key("id")])
  }

  /// A member the action does not use is ignored even when it does not fit (as `init(from:)` ignores it), the
  /// first of duplicate members wins, keys may be escaped, and `null` is absent where the field is optional.
  @Test(arguments: [
    (mutation + #""type":"delete_page","title":5,"value":{},"block":"a b"}"#, MutationAction.deletePage),
    (mutation + #""type":"set_title","title":"A","title":5}"#, .setTitle("A")),
    (mutation + #""ty\u0070e":"set_title","titl\u0065":"\u0041"}"#, .setTitle("A")),
    (mutation + #""type":"set_property","name":"n","value":null}"#, .setProperty(name: "n", value: nil)),
    (mutation + #""type":"create_page","parent":null,"title":null}"#, .createPage(parent: nil, title: "")),
    (
      mutation + #""type":"create_row","database":"d","properties":{"a":1,"a":"x"}}"#,
      .createRow(database: try! EntityID(validating: "d"), title: "", properties: ["a": .number(1)])
    ),
    (
      mutation
        + #""type":"add_block","block":"b","blockType":null,"text":null,"after":null,"attributes":null}"#,
      .addBlock(block: try! EntityID(validating: "b"), type: "text", text: "", after: nil, attributes: [:])
    ),
    (
      mutation + #""type":"edit_block","block":"b","text":null,"attributes":{}}"#,
      .editBlock(block: try! EntityID(validating: "b"), text: nil, attributes: [:])
    ),
    (
      mutation + #""type":"set_view","filter":{"property":"p","value":[],"x":[1]},"sort":null}"#,
      .setView(filter: ViewFilter(property: "p", value: .list([])), sort: nil)
    ),
    (
      mutation + #""type":"set_view","sort":{"descending":true,"property":"p","property":1}}"#,
      .setView(filter: nil, sort: ViewSort(property: "p", descending: true))
    ),
    (
      text("splice_text", "\"" + spliceOps.base64 + "\""),
      .spliceText(block: try! EntityID(validating: "b"), ops: spliceOps)
    ),
    (
      text("splice_text", "\"" + spliceOps.base64.replacing("/", with: #"\/"#) + "\""),
      .spliceText(block: try! EntityID(validating: "b"), ops: spliceOps)
    ),
    (
      text("mark_text", "\"" + markOps.base64 + #"","ops":5,"text":null"#),
      .markText(block: try! EntityID(validating: "b"), ops: markOps)
    ),
    (
      mutation + #""type":"delete_block","block":"b","ops":"not base64!"}"#,
      .deleteBlock(block: try! EntityID(validating: "b"))
    ),
  ])
  func readsMembersAsInitFromDoes(_ json: String, _ action: MutationAction) throws {
    let input = bytes(Self.batch(json))
    #expect(DecodingAgreement.check(MutationBatch.self, input) == .bothAccepted)
    #expect(try strict(input).mutations.first?.action == action)
  }

  /// The id is decoded before the type is known to be bad, and every field in the order `init(from:)` decodes
  /// them, wherever they stand in the text.
  @Test func reportsTheFirstProblemInDecodingOrderNotTextOrder() {
    let json = Self.batch(#"{"type":"dance","time":"x","page":"a b"}"#)
    #expect(strictError(json)?.description == #"at mutations[0]: missing field "id""#)
    let second = Self.batch(#"{"type":"dance","time":"x","page":"a b","id":1}"#)
    #expect(
      strictError(second)?.description
        == #"at mutations[0].page: invalid id "a b": ids are 1 to 64 of A-Z a-z 0-9 _ -"#)
    // A syntax error anywhere comes first, as JSONDecoder parses the whole text before decoding.
    let third = Self.batch(#"{"id":"x"},{"id":01}"#)
    #expect(strictError(third)?.description == "at mutations[1].id: invalid number: a leading zero (byte 67)")
  }

  private func strictError(_ json: String) -> JSONReadError? {
    do throws(JSONReadError) {
      _ = try strict(bytes(json))
      return nil
    } catch {
      return error
    }
  }
}

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
