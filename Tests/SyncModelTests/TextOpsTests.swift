import FoundationEssentials
import RichText
import StrictJSON
import StrictJSONTestKit
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// Text updates made on a block's first text, as a device makes them.
private enum Updates {
  static let base = TextDocument(text: "The quick fox jumps.", client: "")

  static func splice(
    at position: Int = 10, delete: Int = 0, insert: String = "brown ", client: String = "laptop"
  ) -> TextUpdate {
    var document = base
    return try! document.splice(at: position, delete: delete, insert: insert, client: client)
  }

  static func mark(
    _ type: MarkType = .bold, value: String? = nil, remove: Bool = false, counter: UInt32 = 0
  ) -> TextUpdate {
    var document = base
    return try! document.mark(
      from: 4, to: 9, type: type, value: value, remove: remove, client: "laptop",
      time: MarkTime(millis: 1_732_244_000_123, counter: counter))
  }

  /// A tombstone run: the characters' ids and origins without their text (as in a whole state).
  static func tombstone() -> InsertRun {
    var run = splice().runs[0]
    run.text = nil
    return run
  }
}

@Suite struct TextMutationValidationTests {
  private func check(
    _ action: MutationAction, _ expected: RejectionReason?, _ limits: MutationLimits = MutationLimits(),
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    #expect(
      Mutation(id: 1, page: id("p"), time: .zero, action: action).validate(limits) == expected, "\(action)",
      sourceLocation: sourceLocation)
  }

  private func splice(_ update: TextUpdate) -> MutationAction {
    .spliceText(block: id("b"), ops: TextOps(update))
  }
  private func mark(_ update: TextUpdate) -> MutationAction {
    .markText(block: id("b"), ops: TextOps(update))
  }

  @Test func realSplicesAndMarksAreValid() {
    check(splice(Updates.splice()), nil)
    check(splice(Updates.splice(at: 4, delete: 6, insert: "")), nil)
    check(splice(Updates.splice(at: 0, delete: 3, insert: "A")), nil)
    check(mark(Updates.mark()), nil)
    check(mark(Updates.mark(.link, value: "https://example.com")), nil)
    check(mark(Updates.mark(.link, remove: true)), nil)
  }

  /// A splice carries runs and deletions only, each run with its text; a mark carries mark operations only;
  /// neither is empty.
  @Test func eachTypeCarriesItsOwnOperationsOnly() {
    var withMarks = Updates.splice()
    withMarks.marks = Updates.mark().marks
    check(splice(withMarks), .invalidValue)
    check(splice(Updates.mark()), .invalidValue)
    check(splice(TextUpdate()), .invalidValue)
    check(splice(TextUpdate(runs: [Updates.tombstone()])), .invalidValue)
    var someTombstones = Updates.splice()
    someTombstones.runs.append(Updates.tombstone())
    check(splice(someTombstones), .invalidValue)

    var withRuns = Updates.mark()
    withRuns.runs = Updates.splice().runs
    check(mark(withRuns), .invalidValue)
    var withDeletes = Updates.mark()
    withDeletes.deletes = Updates.splice(delete: 2, insert: "").deletes
    check(mark(withDeletes), .invalidValue)
    check(mark(Updates.splice()), .invalidValue)
    check(mark(TextUpdate()), .invalidValue)
    // Bytes that are no update at all (only `TextOps(bytes:)` can hold them: the JSON readers refuse them).
    check(.spliceText(block: id("b"), ops: TextOps(bytes: [1, 2, 9])), .invalidValue)
    check(.markText(block: id("b"), ops: TextOps(bytes: [])), .invalidValue)
  }

  /// At most `maxTextOps` runs and deletions (or mark operations) in one mutation.
  @Test func tooManyOperationsAreTooLarge() {
    var limits = MutationLimits()
    limits.maxTextOps = 3
    let runs = Updates.splice().runs[0]
    let deletes = Updates.splice(at: 0, delete: 1, insert: "").deletes[0]
    check(splice(TextUpdate(runs: [runs, runs], deletes: [deletes])), nil, limits)
    check(splice(TextUpdate(runs: [runs, runs], deletes: [deletes, deletes])), .tooLarge, limits)
    check(splice(TextUpdate(deletes: [deletes, deletes, deletes, deletes])), .tooLarge, limits)
    let marks = (0..<4).map { Updates.mark(counter: $0).marks[0] }
    check(mark(TextUpdate(marks: Array(marks.prefix(3)))), nil, limits)
    check(mark(TextUpdate(marks: marks)), .tooLarge, limits)
  }

  /// The inserted text (UTF-8 bytes, over all runs) and a mark's value within `maxTextBytes`.
  @Test func textOverTheByteLimitIsTooLarge() {
    var limits = MutationLimits()
    limits.maxTextBytes = 8
    check(splice(Updates.splice(insert: "ééé12")), nil, limits)  // 8 bytes, 5 scalars
    check(splice(Updates.splice(insert: "ééé123")), .tooLarge, limits)
    check(splice(Updates.splice(insert: "éééé1")), .tooLarge, limits)
    let two = Updates.splice(insert: "1234")
    check(splice(TextUpdate(runs: two.runs + two.runs)), nil, limits)
    check(splice(TextUpdate(runs: two.runs + two.runs + two.runs)), .tooLarge, limits)
    check(mark(Updates.mark(.link, value: "https:/")), nil, limits)
    check(mark(Updates.mark(.link, value: "https://")), nil, limits)
    check(mark(Updates.mark(.link, value: "https://x")), .tooLarge, limits)
  }
}

/// Both text mutations through JSON: `Codable` encodes them, and the broker's strict reader and `JSONDecoder`
/// both read back the same mutation.
@Suite struct TextMutationJSONTests {
  static let actions: [MutationAction] = [
    .spliceText(block: id("b1"), ops: TextOps(Updates.splice())),
    .spliceText(block: id("b1"), ops: TextOps(Updates.splice(at: 0, delete: 20, insert: "é🙂/+\u{0301}"))),
    .spliceText(block: id("b1"), ops: TextOps(bytes: Updates.base.encoded())),
    .markText(block: id("b2"), ops: TextOps(Updates.mark())),
    .markText(block: id("b2"), ops: TextOps(Updates.mark(.color, value: "#ff0000"))),
    .markText(block: id("b2"), ops: TextOps(Updates.mark(.link, remove: true))),
  ]

  @Test(arguments: actions)
  func roundTripsThroughBothDecoders(_ action: MutationAction) throws {
    let mutation = Mutation(
      id: 7, page: id("page"), time: HLCTimestamp(millis: 1_732_244_000_123), action: action)
    for formatting in [
      JSONEncoder.OutputFormatting(), [.sortedKeys, .withoutEscapingSlashes], [.prettyPrinted],
    ] {
      let encoder = JSONEncoder()
      encoder.outputFormatting = formatting
      let json = Array(try encoder.encode(mutation))
      let text = String(decoding: json, as: UTF8.self)
      #expect(
        text.contains("\"type\":\"\(action.typeName)\"") || text.contains("\"type\" : \"\(action.typeName)\"")
      )
      #expect(try JSONDecoder().decode(Mutation.self, from: Data(json)) == mutation, "\(text)")
      #expect(try JSONReader.decode(Mutation.self, from: json) == mutation, "\(text)")
      let batch = MutationBatch(client: id("laptop"), workspace: id("ws1"), mutations: [mutation])
      let batchJSON = Array(try encoder.encode(batch))
      #expect(DecodingAgreement.check(MutationBatch.self, batchJSON) == .bothAccepted)
      #expect(try JSONReader.decode(MutationBatch.self, from: batchJSON) == batch)
    }
    #expect(mutation.validate() == nil)
  }

  /// The ops travel as base64 of `TextCodec`'s binary form, which decodes back to the update.
  @Test func opsAreBase64OfTheBinaryForm() throws {
    struct Ops: Decodable { var ops: String }
    let update = Updates.splice()
    let json = try JSONEncoder().encode(
      Mutation(id: 1, page: id("p"), time: .zero, action: .spliceText(block: id("b"), ops: TextOps(update))))
    let ops = try JSONDecoder().decode(Ops.self, from: json).ops
    #expect(Base64.decode(ops) == TextCodec.encode(update))
    #expect(try TextCodec.decodeUpdate(#require(Base64.decode(ops))) == update)
  }
}

@Suite struct Base64Tests {
  /// RFC 4648 §10.
  @Test(arguments: [
    ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
    ("foobar", "Zm9vYmFy"),
  ])
  func rfc4648TestVectors(_ plain: String, _ encoded: String) {
    #expect(Base64.encode(Array(plain.utf8)) == encoded)
    #expect(Base64.decode(encoded) == Array(plain.utf8))
  }

  /// The whole alphabet, `+` and `/` included, and every byte value in every position of a group.
  @Test func everyByteRoundTrips() {
    #expect(Base64.encode([0x00, 0x10, 0x83, 0x10, 0x51, 0x87]) == "ABCDEFGH")
    #expect(Base64.encode([0xFB, 0xEF, 0xBE, 0xFF, 0xFF, 0xFF]) == "++++////")
    #expect(Base64.decode("++++////") == [0xFB, 0xEF, 0xBE, 0xFF, 0xFF, 0xFF])
    for length in 0...5 {
      for value in 0...255 {
        let bytes = (0..<length).map { UInt8(truncatingIfNeeded: value &* 31 &+ $0 &* 97) } + [UInt8(value)]
        #expect(Base64.decode(Base64.encode(bytes)) == bytes)
      }
    }
  }

  /// Bits that the padding drops must be zero: one spelling per byte string.
  @Test(arguments: ["Zh==", "Zv==", "Zm9=", "Zm+=", "Zm8/Zm9=", "AB==", "AAB="])
  func nonCanonicalPaddingBitsAreRefused(_ text: String) {
    #expect(Base64.decode(text) == nil)
  }

  @Test(arguments: ["Z", "Zg", "Zg=", "Zm9vY", "Zm9vYg", "Zm9vYg=", "Zm9vYmFyZ", "Zg===", "Zm9vYg==="])
  func wrongLengthsAreRefused(_ text: String) {
    #expect(Base64.decode(text) == nil)
  }

  /// Padding only at the very end, only the standard alphabet, no spaces or line breaks.
  @Test(arguments: [
    "Zg==Zg==", "Z===", "====", "=m9v", "Zm=v", "Zm9v!A==", "Zm9v\nYmFy", "Zm9v YmFy", "Zm9-", "Zm9_",
    "Zm9vYmF\u{00E9}",
  ])
  func othersThanTheAlphabetAndEndPaddingAreRefused(_ text: String) {
    #expect(Base64.decode(text) == nil)
  }

  /// `TextOps(base64:)` wants base64 of a well-formed update, and says which it is not.
  @Test func textOpsFromBase64() throws {
    let update = Updates.splice()
    #expect(try TextOps(base64: Base64.encode(TextCodec.encode(update))).update() == update)
    #expect(throws: SyncModelError.invalidTextOps("not base64")) { try TextOps(base64: "Zh==") }
    #expect(throws: SyncModelError.invalidTextOps("malformed text state: unknown version")) {
      try TextOps(base64: "Zm9v")
    }
  }
}
