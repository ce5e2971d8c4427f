import FoundationEssentials
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

@Suite struct EntityIDTests {
  @Test(arguments: ["a", "A-b_9", String(repeating: "x", count: 64), "0f8e2c1a-9b7d-4e6f-8a5b-3c2d1e0f9a8b"])
  func acceptsWellFormedIDs(_ text: String) throws {
    #expect(try EntityID(validating: text).rawValue == text)
    let fromBytes = try Array(text.utf8).withUnsafeBufferPointer { bytes throws(SyncModelError) in
      try EntityID(validatingUTF8: bytes)
    }
    #expect(fromBytes.rawValue == text)
  }

  @Test(arguments: ["", String(repeating: "x", count: 65), "a b", "a/b", "é", "a.b", "a\u{0}"])
  func refusesMalformedIDsNamingTheRule(_ text: String) {
    #expect(throws: SyncModelError.invalidID(text)) { try EntityID(validating: text) }
    #expect(throws: SyncModelError.invalidID(text)) {
      try Array(text.utf8).withUnsafeBufferPointer { bytes throws(SyncModelError) in
        try EntityID(validatingUTF8: bytes)
      }
    }
    #expect(SyncModelError.invalidID(text).description.contains("1 to 64"))
  }

  @Test func longMalformedIDsAreQuotedUpTo80CharactersEitherWay() {
    let text = String(repeating: "\u{E9}", count: 100)
    let expected = SyncModelError.invalidID(String(repeating: "\u{E9}", count: 80))
    #expect(throws: expected) { try EntityID(validating: text) }
    #expect(throws: expected) {
      try Array(text.utf8).withUnsafeBufferPointer { bytes throws(SyncModelError) in
        try EntityID(validatingUTF8: bytes)
      }
    }
  }

  @Test func randomIDsAreValidUUIDShapedAndDistinct() {
    let ids = (0..<1000).map { _ in EntityID.random() }
    #expect(Set(ids).count == 1000)
    for id in ids {
      #expect(EntityID.isValid(id.rawValue))
      #expect(id.rawValue.utf8.count == 36)
      #expect(Array(id.rawValue)[14] == "4")
    }
  }

  @Test func decodingValidates() {
    #expect(throws: DecodingError.self) {
      try JSONDecoder().decode([EntityID].self, from: Data(#"["ok","not ok"]"#.utf8))
    }
  }
}

@Suite struct HybridLogicalClockTests {
  @Test func stampsNeverGoBackwardsWhateverTheWallClockDoes() {
    var clock = HybridLogicalClock()
    // A trace of wall-clock readings: forwards, stuck, backwards (NTP step), forwards again.
    let wall: [UInt64] = [1000, 1000, 1000, 1005, 990, 990, 1003, 1010, 1010]
    let stamps = wall.map { clock.now(physicalMillis: $0) }
    #expect(
      stamps == [
        HLCTimestamp(millis: 1000, counter: 0), HLCTimestamp(millis: 1000, counter: 1),
        HLCTimestamp(millis: 1000, counter: 2), HLCTimestamp(millis: 1005, counter: 0),
        HLCTimestamp(millis: 1005, counter: 1), HLCTimestamp(millis: 1005, counter: 2),
        HLCTimestamp(millis: 1005, counter: 3), HLCTimestamp(millis: 1010, counter: 0),
        HLCTimestamp(millis: 1010, counter: 1),
      ])
    #expect(zip(stamps, stamps.dropFirst()).allSatisfy { $0 < $1 })
  }

  @Test func observingARemoteTimeOrdersLaterLocalStampsAfterIt() {
    var clock = HybridLogicalClock()
    _ = clock.now(physicalMillis: 100)
    // A device whose clock is a week behind sees an edit stamped by a correct clock.
    let remote = HLCTimestamp(millis: 600_000_000, counter: 4)
    let merged = clock.observe(remote, physicalMillis: 200)
    #expect(merged == HLCTimestamp(millis: 600_000_000, counter: 5))
    #expect(clock.now(physicalMillis: 201) > remote)
    // An older remote time changes nothing but the counter.
    let before = clock.last
    clock.observe(HLCTimestamp(millis: 5), physicalMillis: 202)
    #expect(clock.last > before)
    // A wall clock ahead of everything wins.
    #expect(clock.observe(remote, physicalMillis: 700_000_000) == HLCTimestamp(millis: 700_000_000))
  }

  @Test func counterOverflowAdvancesTheMilliseconds() {
    var clock = HybridLogicalClock(last: HLCTimestamp(millis: 7, counter: .max))
    #expect(clock.now(physicalMillis: 7) == HLCTimestamp(millis: 8, counter: 0))
  }

  /// A device may send any time: the largest one is merged without a trap (it was an overflow) and stays.
  @Test func theLargestTimeIsItsOwnSuccessor() {
    let largest = HLCTimestamp(millis: .max, counter: .max)
    var clock = HybridLogicalClock()
    #expect(clock.observe(largest, physicalMillis: 1) == largest)
    #expect(clock.now(physicalMillis: 2) == largest)
    var justBefore = HybridLogicalClock(last: HLCTimestamp(millis: .max, counter: .max - 1))
    #expect(justBefore.now(physicalMillis: 0) == largest)
  }

  @Test func wireFormIsMillisColonCounter() throws {
    let stamp = HLCTimestamp(millis: 1_732_244_000_123, counter: 7)
    #expect(stamp.description == "1732244000123:7")
    #expect(try HLCTimestamp(parsing: "1732244000123:7") == stamp)
    let json = try JSONEncoder().encode([stamp])
    #expect(String(decoding: json, as: UTF8.self) == #"["1732244000123:7"]"#)
    #expect(try JSONDecoder().decode([HLCTimestamp].self, from: json) == [stamp])
  }

  @Test func theLargestTimesParse() throws {
    #expect(
      try HLCTimestamp(parsing: "18446744073709551615:4294967295")
        == HLCTimestamp(millis: .max, counter: .max))
    #expect(try HLCTimestamp(parsing: "0:0") == HLCTimestamp(millis: 0, counter: 0))
    #expect(try HLCTimestamp(parsing: "007:01") == HLCTimestamp(millis: 7, counter: 1))
  }

  @Test(arguments: [
    "", "1", "1:", ":1", "1:2:3", "-1:2", "1:-2", "a:1", "1:99999999999", " 1:2", "1:2 ", "+1:2", "1::2",
    "18446744073709551616:0", "1:4294967296", "\u{661}:2", "1:2\u{0}",
  ])
  func refusesMalformedTimestamps(_ text: String) {
    #expect(throws: SyncModelError.invalidTimestamp(text)) { try HLCTimestamp(parsing: text) }
    #expect(throws: SyncModelError.invalidTimestamp(text)) {
      try Array(text.utf8).withUnsafeBufferPointer { bytes throws(SyncModelError) in
        try HLCTimestamp(parsingUTF8: bytes)
      }
    }
  }

  /// The batch reader parses times from their bytes: the same times as from a string.
  @Test(arguments: ["1732244000123:7", "18446744073709551615:4294967295", "0:0", "007:01", "1:4294967295"])
  func parsesTheSameTimesFromBytes(_ text: String) throws {
    let fromBytes = try Array(text.utf8).withUnsafeBufferPointer { bytes throws(SyncModelError) in
      try HLCTimestamp(parsingUTF8: bytes)
    }
    #expect(try fromBytes == HLCTimestamp(parsing: text))
  }

  @Test func lastWriterWinsOrdersByTimeThenClient() {
    let early = LWWStamp(time: HLCTimestamp(millis: 1), client: id("zzz"))
    let lateA = LWWStamp(time: HLCTimestamp(millis: 2), client: id("a"))
    let lateB = LWWStamp(time: HLCTimestamp(millis: 2), client: id("b"))
    #expect(early < lateA)
    #expect(lateA < lateB)
    #expect([lateB, early, lateA].max() == lateB)
  }
}

@Suite struct PropertyValueTests {
  @Test func jsonRoundTripsEveryKind() throws {
    let values: [String: PropertyValue] = [
      "s": .string("text"), "n": .number(2.5), "b": .bool(true), "l": .list(["a", "b"]), "zero": .number(0),
    ]
    let json = try JSONEncoder().encode(values)
    #expect(try JSONDecoder().decode([String: PropertyValue].self, from: json) == values)
  }

  @Test func booleansAreNotNumbers() throws {
    #expect(try JSONDecoder().decode(PropertyValue.self, from: Data("true".utf8)) == .bool(true))
    #expect(try JSONDecoder().decode(PropertyValue.self, from: Data("1".utf8)) == .number(1))
  }

  @Test(arguments: ["null", "{}", "[1,2]", "[\"a\",null]"])
  func otherJSONIsRefused(_ json: String) {
    #expect(throws: DecodingError.self) {
      try JSONDecoder().decode(PropertyValue.self, from: Data(json.utf8))
    }
  }

  @Test func commandLineValuesFollowTheJSONRule() {
    #expect(PropertyValue(commandLineText: "42") == .number(42))
    #expect(PropertyValue(commandLineText: "-1.5") == .number(-1.5))
    #expect(PropertyValue(commandLineText: "true") == .bool(true))
    #expect(PropertyValue(commandLineText: #"["x","y"]"#) == .list(["x", "y"]))
    #expect(PropertyValue(commandLineText: "Done") == .string("Done"))
    #expect(PropertyValue(commandLineText: "null") == .string("null"))
    #expect(PropertyValue(commandLineText: #""quoted""#) == .string(#""quoted""#))
    #expect(PropertyValue(commandLineText: "{\"a\":1}") == .string("{\"a\":1}"))
    #expect(PropertyValue(commandLineText: "") == .string(""))
  }
}

@Suite struct MutationTests {
  static let time = HLCTimestamp(millis: 1_732_244_000_123, counter: 1)
  static let actions: [MutationAction] = [
    .createPage(parent: nil, title: "Home"),
    .createPage(parent: id("home"), title: "Child"),
    .createDatabase(parent: id("home"), title: "Tasks"),
    .createRow(
      database: id("tasks"), title: "Row", properties: ["Status": .string("Todo"), "Points": .number(3)]),
    .setTitle("Renamed ✓"),
    .setProperty(name: "Done", value: .bool(true)),
    .setProperty(name: "Done", value: nil),
    .addBlock(
      block: id("b1"), type: BlockType.todo, text: "buy milk", after: nil, attributes: ["checked": "false"]),
    .addBlock(block: id("b2"), type: BlockType.text, text: "", after: id("b1"), attributes: [:]),
    .editBlock(block: id("b1"), text: "buy oat milk", attributes: nil),
    .editBlock(block: id("b1"), text: nil, attributes: ["checked": "true"]),
    .moveBlock(block: id("b2"), after: nil),
    .deleteBlock(block: id("b2")),
    .movePage(parent: id("other")),
    .movePage(parent: nil),
    .deletePage,
    .setView(
      filter: ViewFilter(property: "Status", value: .string("Todo")),
      sort: ViewSort(property: "Points", descending: true)),
    .setView(filter: nil, sort: nil),
  ]

  @Test func everyActionRoundTripsThroughJSON() throws {
    for (i, action) in MutationTests.actions.enumerated() {
      let mutation = Mutation(id: UInt64(i + 1), page: id("page"), time: MutationTests.time, action: action)
      let json = try JSONEncoder().encode(mutation)
      let decoded = try JSONDecoder().decode(Mutation.self, from: json)
      #expect(decoded == mutation, "\(String(decoding: json, as: UTF8.self))")
      #expect(String(decoding: json, as: UTF8.self).contains("\"type\":\"\(action.typeName)\""))
      #expect(mutation.validate() == nil, "\(action) should be valid")
    }
  }

  @Test func decodesTheDocumentedShape() throws {
    let json =
      #"{"id":8,"page":"p1","time":"1732244000123:1","type":"set_property","name":"Status","value":"Done"}"#
    let mutation = try JSONDecoder().decode(Mutation.self, from: Data(json.utf8))
    #expect(
      mutation
        == Mutation(
          id: 8, page: id("p1"), time: MutationTests.time,
          action: .setProperty(name: "Status", value: .string("Done"))))
  }

  @Test(arguments: [
    (#"{"id":1,"page":"p1","time":"1:0","type":"explode"}"#, "unknown mutation type"),
    (#"{"id":1,"page":"p 1","time":"1:0","type":"delete_page"}"#, "invalid id"),
    (#"{"id":1,"page":"p1","time":"yesterday","type":"delete_page"}"#, "invalid HLC timestamp"),
    (#"{"id":1,"page":"p1","time":"1:0","type":"set_title"}"#, "title"),
    (#"{"id":-1,"page":"p1","time":"1:0","type":"delete_page"}"#, "id"),
  ])
  func malformedMutationsFailNamingTheProblem(json: String, mention: String) {
    do {
      _ = try JSONDecoder().decode(Mutation.self, from: Data(json.utf8))
      Issue.record("decoded \(json)")
    } catch {
      #expect("\(error)".contains(mention), "\(error)")
    }
  }

  @Test func validationRefusesWhatBreaksTheRulesWithStableReasons() {
    var limits = MutationLimits()
    limits.maxTitleBytes = 10
    limits.maxListItems = 2
    let p = id("p")
    func check(_ action: MutationAction, _ expected: RejectionReason?, id: UInt64 = 1) {
      #expect(
        Mutation(id: id, page: p, time: .zero, action: action).validate(limits) == expected, "\(action)")
    }
    check(.setTitle("short"), nil)
    check(.setTitle("much too long"), .tooLarge)
    check(.setTitle("ok"), .invalidValue, id: 0)
    check(.setProperty(name: "", value: .bool(true)), .invalidValue)
    check(.setProperty(name: "n", value: .number(.infinity)), .invalidValue)
    check(.setProperty(name: "l", value: .list(["a", "b", "c"])), .tooLarge)
    check(.createRow(database: p, title: "", properties: [:]), .invalidParent)
    check(.movePage(parent: p), .invalidParent)
    check(.createPage(parent: p, title: ""), .invalidParent)
    check(.addBlock(block: id("b"), type: "Not Valid", text: "", after: nil, attributes: [:]), .invalidValue)
    check(.editBlock(block: id("b"), text: nil, attributes: nil), .invalidValue)
    check(.moveBlock(block: id("b"), after: id("b")), .invalidValue)
    check(.setView(filter: ViewFilter(property: "", value: .bool(true)), sort: nil), .invalidValue)
  }

  @Test func rejectionCodesAreUniqueAndStable() {
    #expect(Set(RejectionReason.all.map(\.code)).count == RejectionReason.all.count)
    #expect(Set(RejectionReason.all.map(\.name)).count == RejectionReason.all.count)
    // The catalogue is a wire contract: these must never change.
    #expect(RejectionReason.unknownPage.code == 1)
    #expect(RejectionReason.forbidden.code == 2)
    #expect(RejectionReason.unknownBlock.code == 9)
  }

  @Test func batchesKnowWhetherTheirIDsAreConsecutive() {
    func batch(_ ids: [UInt64]) -> MutationBatch {
      MutationBatch(
        client: id("c"), workspace: id("w"),
        mutations: ids.map { Mutation(id: $0, page: id("p"), time: .zero, action: .deletePage) })
    }
    #expect(batch([4, 5, 6]).hasConsecutiveIDs)
    #expect(batch([]).hasConsecutiveIDs)
    #expect(!batch([4, 6]).hasConsecutiveIDs)
    #expect(!batch([5, 4]).hasConsecutiveIDs)
    // The largest id has no successor (this overflowed and killed the broker).
    #expect(!batch([.max, 1]).hasConsecutiveIDs)
    #expect(!batch([.max, 0]).hasConsecutiveIDs)
    #expect(batch([.max - 1, .max]).hasConsecutiveIDs)
  }
}

/// `JSONText`, the writer of the hot answers: the same text as `String` and `JSONEncoder` for every value.
@Suite struct JSONTextTests {
  private func number(_ value: some BinaryInteger) -> String {
    var out: [UInt8] = []
    JSONText.appendNumber(value, to: &out)
    return String(decoding: out, as: UTF8.self)
  }

  @Test func numbersAreWrittenAsStringWritesThem() {
    let unsigned: [UInt64] = [0, 1, 9, 10, 99, 100, 4_294_967_295, 1 << 53 + 1, UInt64.max - 1, UInt64.max]
    for value in unsigned { #expect(number(value) == String(value)) }
    let signed: [Int64] = [0, -1, -9, -10, 12_345, Int64.max, Int64.min, Int64.min + 1]
    for value in signed { #expect(number(value) == String(value)) }
    #expect(number(Int8.min) == "-128")
    #expect(number(UInt8.max) == "255")
    var random = SystemRandomNumberGenerator()
    for _ in 0..<1000 {
      let value =
        UInt64.random(in: 0...UInt64.max, using: &random) >> UInt64.random(in: 0...63, using: &random)
      #expect(number(value) == String(value))
      #expect(
        number(-Int64(truncatingIfNeeded: value >> 1)) == String(-Int64(truncatingIfNeeded: value >> 1)))
    }
  }

  @Test func stringsAreEscapedAsJSONEncoderEscapesThem() throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.withoutEscapingSlashes]
    for text in [
      "", "plain-id_09", "a/b", "quote\"back\\slash", "\u{0}\u{1f}\n\r\t\u{8}\u{c}", "é✓😀", "\u{7f}",
    ] {
      var out: [UInt8] = []
      JSONText.appendString(text, to: &out)
      #expect(
        String(decoding: out, as: UTF8.self) == String(decoding: try encoder.encode(text), as: UTF8.self))
    }
  }

  @Test func idsSortInByteOrder() {
    let ids = ["b", "a", "B", "_", "-", "0", "a0", "a-", "A_", "zz", "z"].map {
      try! EntityID(validating: $0)
    }
    #expect(
      ids.sorted().map(\.rawValue)
        == ids.map(\.rawValue).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
  }
}
