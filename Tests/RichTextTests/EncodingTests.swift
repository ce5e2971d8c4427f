import RichText
import SeededRandom
import Testing

/// The binary state and update forms: round trips, and inputs a store or a peer could get wrong, which must be
/// refused with `TextError.malformed`, never crash.
@Suite struct EncodingTests {
  /// A document with a bit of everything: several replicas, non-ASCII text, deletions (tombstones), marks of
  /// several types and a removal, and a run and a mark waiting for characters it does not have.
  static func richDocument() throws -> TextDocument {
    var a = TextDocument(text: "Grüße, 世界 😀!", client: "base")
    var b = a
    _ = try a.splice(at: 6, delete: 1, insert: " dear", client: "A")
    _ = try b.splice(at: 0, delete: 0, insert: "¡", client: "B")
    let t = MarkTime(millis: 5, counter: 1)
    _ = try a.mark(from: 0, to: 5, type: .bold, value: nil, client: "A", time: t)
    _ = try a.mark(from: 2, to: 9, type: .link, value: "https://ex.ample/ü", client: "A", time: t)
    _ = try a.mark(from: 1, to: 3, type: .bold, value: nil, remove: true, client: "B", time: t)
    a.merge(b)
    _ = try a.splice(at: 3, delete: 4, insert: "", client: "B")
    // Waiting: a run after a character of C's the document has not received, and a mark on it.
    a.apply(typed("later", by: "D", after: id("C", 3), before: nil))
    a.apply(
      TextUpdate(marks: [
        MarkOperation(
          type: .italic, value: nil, remove: false, start: .before(id("C", 0)), end: .end, client: "C",
          time: t)
      ]))
    return a
  }

  @Test func stateRoundTrips() throws {
    let document = try Self.richDocument()
    #expect(document.hasPendingOperations)
    #expect(!document.marks.isEmpty)
    expectRoundTrips(document)
    let decoded = try TextDocument(encoded: document.encoded())
    #expect(decoded.encoded().count == document.encoded().count)
    #expect(try TextDocument(encoded: decoded.encoded()).text == document.text)
    // The empty document, and no bytes at all.
    expectRoundTrips(TextDocument())
    #expect(try TextDocument(encoded: []).text == "")
    #expect(try TextDocument(encoded: TextDocument().encoded()).count == 0)
  }

  /// The deleted text itself is not in the state: only its ids and origins.
  @Test func stateHoldsNoDeletedText() throws {
    var document = TextDocument(text: "keep SECRET keep", client: "base")
    _ = try document.splice(at: 5, delete: 7, insert: "", client: "A")
    let bytes = document.encoded()
    #expect(!String(decoding: bytes, as: UTF8.self).contains("SECRET"))
    #expect(try TextDocument(encoded: bytes).text == "keep keep")
  }

  @Test func updatesRoundTrip() throws {
    var document = TextDocument(text: "abc", client: "base")
    let updates = [
      try document.splice(at: 1, delete: 1, insert: "ẞ😀", client: "zoë"),
      try document.mark(
        from: 0, to: 2, type: .color, value: "#ff0000", client: "zoë",
        time: MarkTime(millis: 1 << 40, counter: 7)),
      try Self.richDocument().update(),
      try Self.richDocument().update(since: 0),
      TextUpdate(deletes: [DeletedRange(client: "x", counter: 4, length: 2, seq: 99)]),
      TextUpdate(),
    ]
    for update in updates {
      #expect(try TextCodec.decodeUpdate(TextCodec.encode(update)) == update)
    }
    // A state read as an update is the document's update.
    let rich = try Self.richDocument()
    var fresh = TextDocument()
    fresh.apply(try TextCodec.decodeUpdate(rich.encoded()))
    #expect(fresh.text == rich.text)
    #expect(fresh.marks == rich.marks)
  }

  /// `apply(encoded:)` adopts a state into an empty document and merges it into one with text.
  @Test func applyEncodedAdoptsOrMerges() throws {
    let rich = try Self.richDocument()
    var empty = TextDocument()
    try empty.apply(encoded: rich.encoded())
    #expect(empty.text == rich.text)
    var other = TextDocument(text: "Grüße, 世界 😀!", client: "base")
    let typed = try other.splice(at: 0, delete: 0, insert: ">", client: "E")
    try other.apply(encoded: rich.encoded())
    var expected = rich
    expected.apply(typed)
    #expect(other.text == expected.text)
    #expect(other.marks == expected.marks)
  }

  // MARK: - Malformed input

  func expectMalformed(
    _ bytes: [UInt8], _ what: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    do {
      let document = try TextDocument(encoded: bytes)
      Issue.record("\(what): decoded as \(document.text.debugDescription)", sourceLocation: sourceLocation)
    } catch {
      guard case .malformed = error else {
        Issue.record("\(what): \(error)", sourceLocation: sourceLocation)
        return
      }
    }
  }

  func expectMalformedUpdate(
    _ bytes: [UInt8], _ what: String, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    do {
      let update = try TextCodec.decodeUpdate(bytes)
      Issue.record("\(what): decoded as \(update)", sourceLocation: sourceLocation)
    } catch {
      guard case .malformed = error else {
        Issue.record("\(what): \(error)", sourceLocation: sourceLocation)
        return
      }
    }
  }

  @Test func everyTruncationIsRefused() throws {
    let state = try Self.richDocument().encoded()
    for length in 1..<state.count { expectMalformed(Array(state[..<length]), "state cut at \(length)") }
    let update = TextCodec.encode(try Self.richDocument().update())
    for length in 0..<update.count {
      expectMalformedUpdate(Array(update[..<length]), "update cut at \(length)")
    }
  }

  @Test func trailingBytesAreRefused() throws {
    expectMalformed(try Self.richDocument().encoded() + [0], "state")
    expectMalformed(TextDocument().encoded() + [0, 0], "empty state")
    expectMalformedUpdate(TextCodec.encode(try Self.richDocument().update()) + [1], "update")
  }

  /// A state written by hand: `StateBytes` mirrors the format `encoded()` writes.
  @Test func handWrittenStateReads() throws {
    var state = StateBytes(clients: ["a", "b"])
    state.run(client: 0, counter: 0, length: 2)
    state.run(client: 1, counter: 0, length: 1, left: (0, 1))
    state.run(client: 0, counter: 2, length: 1, deleted: true, left: (1, 0))
    state.delete(client: 0, start: 2, length: 1)
    state.finish(text: "hi!")
    let document = try TextDocument(encoded: state.bytes)
    #expect(document.text == "hi!")
    #expect(document.totalCount == 4)
  }

  @Test func countsTooLargeAreRefused() throws {
    var clients = StateBytes.header()
    clients.varint(1 << 40)
    expectMalformed(clients.bytes, "2^40 replicas")
    var fewerNames = StateBytes.header()
    fewerNames.varint(3)
    fewerNames.string("a")
    expectMalformed(fewerNames.bytes, "3 replicas, 1 name")
    var runs = StateBytes(clients: ["a"])
    runs.varint((1 << 26) - 1)
    expectMalformed(runs.bytes, "2^26 runs announced, none there")
    var hugeRuns = StateBytes(clients: ["a"])
    hugeRuns.varint(1 << 62)
    expectMalformed(hugeRuns.bytes, "2^62 runs")
    var text = StateBytes(clients: ["a"])
    text.run(client: 0, counter: 0, length: 1)
    text.flushRuns()
    text.varint(1 << 29)
    text.bytes += Array("x".utf8)
    expectMalformed(text.bytes, "text longer than the input")
    var length = StateBytes(clients: ["a"])
    length.run(client: 0, counter: 0, length: 1 << 33)
    length.flushRuns()
    expectMalformed(length.bytes, "a run longer than 32 bits")
    var overflow = StateBytes(clients: ["a"])
    overflow.run(client: 0, counter: UInt32.max, length: 2)
    overflow.flushRuns()
    expectMalformed(overflow.bytes, "a run past the last counter")
    var visible = StateBytes(clients: ["a"])
    visible.run(client: 0, counter: 0, length: 1 << 31)
    visible.finish(text: "hi")
    expectMalformed(visible.bytes, "a visible run of 2^31 characters over 2 bytes of text")
    var varint = StateBytes(clients: ["a"])
    varint.bytes += Array(repeating: 0xFF, count: 11) + [0]
    expectMalformed(varint.bytes, "an endless varint")
    // Text and runs that disagree.
    var shortText = StateBytes(clients: ["a"])
    shortText.run(client: 0, counter: 0, length: 3)
    shortText.finish(text: "hi")
    expectMalformed(shortText.bytes, "text shorter than its runs")
    var longText = StateBytes(clients: ["a"])
    longText.run(client: 0, counter: 0, length: 1)
    longText.finish(text: "hi")
    expectMalformed(longText.bytes, "text longer than its runs")
  }

  @Test func duplicateIdsAreRefused() throws {
    var twice = StateBytes(clients: ["a"])
    twice.run(client: 0, counter: 0, length: 2)
    twice.run(client: 0, counter: 1, length: 2, left: (0, 1))
    twice.finish(text: "abcd")
    expectMalformed(twice.bytes, "a's characters 1 given twice")
    var names = StateBytes(clients: ["a", "a"])
    names.finish(text: "")
    expectMalformed(names.bytes, "a replica named twice")
  }

  @Test func originsNamingAbsentCharactersAreRefused() throws {
    var left = StateBytes(clients: ["a", "b"])
    left.run(client: 0, counter: 0, length: 1)
    left.run(client: 1, counter: 0, length: 1, left: (0, 7))
    left.finish(text: "xy")
    expectMalformed(left.bytes, "a left origin a@7 absent")
    var right = StateBytes(clients: ["a", "b"])
    right.run(client: 0, counter: 0, length: 1, right: (1, 0))
    right.finish(text: "x")
    expectMalformed(right.bytes, "a right origin of a replica with no characters")
    var unknownClient = StateBytes(clients: ["a"])
    unknownClient.run(client: 0, counter: 0, length: 1, right: (5, 0))
    unknownClient.finish(text: "x")
    expectMalformed(unknownClient.bytes, "an origin naming replica 5 of 1")
    var previous = StateBytes(clients: ["a"])
    previous.run(client: 0, counter: 0, length: 1, flags: 4)
    previous.finish(text: "x")
    expectMalformed(previous.bytes, "'left is the previous counter' at counter 0")
  }

  @Test func inconsistentDeletionsAndUnknownCodesAreRefused() throws {
    var visibleDeleted = StateBytes(clients: ["a"])
    visibleDeleted.run(client: 0, counter: 0, length: 2)
    visibleDeleted.delete(client: 0, start: 1, length: 1)
    visibleDeleted.finish(text: "ab")
    expectMalformed(visibleDeleted.bytes, "a visible run inside a deleted range")
    var deleteClient = StateBytes(clients: ["a"])
    deleteClient.delete(client: 3, start: 0, length: 1)
    deleteClient.finish(text: "")
    expectMalformed(deleteClient.bytes, "a deletion of replica 3 of 1")
    var flags = StateBytes(clients: ["a"])
    flags.run(client: 0, counter: 0, length: 1, flags: 64)
    flags.finish(text: "x")
    expectMalformed(flags.bytes, "unknown run flags")
    expectMalformed([9, 1, 0, 0, 0, 0, 0, 0], "unknown version")
    expectMalformed([1, 7, 0, 0, 0, 0, 0, 0], "unknown kind")
    expectMalformedUpdate([1, 7, 0, 0, 0], "unknown kind")
    // Marks: an unknown type, unknown flags, an unknown anchor.
    for (what, tail) in [
      ("mark type 7", [7, 0, 0, 0]), ("mark flags 4", [0, 4, 0, 0]), ("anchor 3", [0, 0, 3, 0]),
    ] as [(String, [UInt8])] {
      var mark = StateBytes(clients: ["a"])
      mark.finish(text: "", marks: false)
      mark.varint(1)
      mark.string("a")
      mark.varint(1)
      mark.varint(0)
      mark.bytes += tail + [0]
      mark.varint(0)
      expectMalformed(mark.bytes, what)
    }
  }

  @Test func malformedUpdatesAreRefused() throws {
    func update(_ body: (inout StateBytes) -> Void) -> [UInt8] {
      var bytes = StateBytes(bytes: [1, 2])
      body(&bytes)
      return bytes.bytes
    }
    let run: (inout StateBytes, UInt64, UInt64, String) -> Void = { bytes, counter, length, text in
      bytes.varint(1)
      bytes.string("a")
      bytes.varint(counter)
      bytes.varint(length)
      bytes.bytes.append(0)
      bytes.string(text)
      bytes.varint(0)
      bytes.varint(0)
    }
    #expect(try TextCodec.decodeUpdate(update { run(&$0, 0, 2, "ok") }).insertedCount == 2)
    expectMalformedUpdate(update { run(&$0, 0, 3, "ok") }, "text shorter than the run")
    expectMalformedUpdate(update { run(&$0, 0, 0, "") }, "an empty run")
    expectMalformedUpdate(update { run(&$0, UInt64(UInt32.max), 2, "ok") }, "a run past the last counter")
    expectMalformedUpdate(update { run(&$0, 1 << 33, 2, "ok") }, "a counter beyond 32 bits")
    expectMalformedUpdate(update { $0.varint(1 << 30) }, "2^30 runs")
    expectMalformedUpdate(update { $0.varint(5) }, "5 runs, none there")
  }

  /// Damaged copies of a valid state and update: each is refused or reads as a document that works (reads,
  /// edits, encodes, merges); none crashes.
  @Test func damagedInputNeverCrashes() throws {
    let rich = try Self.richDocument()
    let state = rich.encoded()
    let update = TextCodec.encode(rich.update())
    var random = SplitMix64(seed: 42)
    var decoded = 0
    for round in 0..<3_000 {
      var bytes = round % 2 == 0 ? state : update
      for _ in 0..<random.int(1...3) {
        let at = random.int(0...(bytes.count - 1))
        switch random.int(0...2) {
        case 0: bytes[at] = UInt8(truncatingIfNeeded: random.next())
        case 1: bytes[at] ^= 1 << UInt8(random.int(0...7))
        default: bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: at)
        }
      }
      var document = TextDocument()
      do {
        try document.apply(encoded: bytes)
      } catch {
        guard case .malformed = error else {
          Issue.record("round \(round): \(error)")
          continue
        }
        continue
      }
      decoded += 1
      _ = document.text
      _ = document.marks
      expectRoundTrips(document)
      if document.count > 0 {
        _ = try document.splice(at: document.count / 2, delete: 1, insert: "✓", client: "fuzz")
        _ = try document.mark(
          from: 0, to: document.count, type: .bold, value: nil, client: "fuzz",
          time: MarkTime(millis: 9, counter: 9))
      }
      var merged = rich
      merged.merge(document)
      _ = merged.text
      _ = merged.marks
    }
    #expect(decoded > 0)
  }

  // MARK: - Positions out of range

  @Test func splicePositionsOutOfRangeThrow() throws {
    var document = TextDocument(text: "abc", client: "base")
    let before = document.encoded()
    #expect(throws: TextError.positionOutOfRange(-1, count: 3)) {
      try document.splice(at: -1, delete: 0, insert: "x", client: "A")
    }
    #expect(throws: TextError.positionOutOfRange(4, count: 3)) {
      try document.splice(at: 4, delete: 0, insert: "x", client: "A")
    }
    #expect(throws: TextError.rangeOutOfRange(2, 4, count: 3)) {
      try document.splice(at: 2, delete: 2, insert: "", client: "A")
    }
    #expect(throws: TextError.rangeOutOfRange(1, 0, count: 3)) {
      try document.splice(at: 1, delete: -1, insert: "", client: "A")
    }
    #expect(throws: TextError.positionOutOfRange(1, count: 0)) {
      var empty = TextDocument()
      _ = try empty.splice(at: 1, delete: 0, insert: "x", client: "A")
    }
    #expect(document.encoded() == before)
    // The edges themselves are fine.
    _ = try document.splice(at: 3, delete: 0, insert: "d", client: "A")
    _ = try document.splice(at: 0, delete: 4, insert: "", client: "A")
    #expect(document.text == "")
  }

  @Test func markRangesOutOfRangeOrInvalidThrow() throws {
    var document = TextDocument(text: "abc", client: "base")
    let before = document.encoded()
    let time = MarkTime(millis: 1, counter: 0)
    for (from, to) in [(-1, 2), (0, 4), (2, 2), (2, 1)] {
      #expect(throws: TextError.rangeOutOfRange(from, to, count: 3)) {
        try document.mark(from: from, to: to, type: .bold, value: nil, client: "A", time: time)
      }
    }
    #expect(throws: TextError.self) {
      var empty = TextDocument()
      _ = try empty.mark(from: 0, to: 0, type: .bold, value: nil, client: "A", time: time)
    }
    for type in [MarkType.link, .color] {
      #expect(throws: TextError.invalidMark("\(type.rawValue) needs a value")) {
        try document.mark(from: 0, to: 1, type: type, value: nil, client: "A", time: time)
      }
      #expect(throws: TextError.invalidMark("\(type.rawValue) needs a value")) {
        try document.mark(from: 0, to: 1, type: type, value: "", client: "A", time: time)
      }
    }
    for type in [MarkType.bold, .italic, .underline, .strike, .code] {
      #expect(throws: TextError.invalidMark("\(type.rawValue) takes no value")) {
        try document.mark(from: 0, to: 1, type: type, value: "x", client: "A", time: time)
      }
    }
    #expect(document.encoded() == before)
    // Removing a link needs no value.
    _ = try document.mark(from: 0, to: 3, type: .link, value: nil, remove: true, client: "A", time: time)
    #expect(document.marks == [])
  }
}

/// The state format written by hand (what `TextDocument.encoded()` writes): version 1, kind 1, the replicas'
/// names, the runs (their count first), the visible text, the deletions, the marks, the waiting runs. Runs are
/// gathered by `run` and written by `flushRuns` (or `finish`, which writes the rest too).
struct StateBytes {
  var bytes: [UInt8]
  var runCount = 0
  var runBytes: [UInt8] = []
  var flushed = false
  var textBytes: [UInt8] = []
  var deletes: [(client: Int, start: UInt64, length: UInt64)] = []
  var previousEnd: [Int: Int64] = [:]

  init(bytes: [UInt8]) { self.bytes = bytes }

  static func header() -> StateBytes { StateBytes(bytes: [1, 1]) }

  /// The header and the names.
  init(clients: [String]) {
    self = .header()
    varint(UInt64(clients.count))
    for name in clients { string(name) }
  }

  mutating func varint(_ value: UInt64) {
    var value = value
    while value >= 0x80 {
      bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
      value >>= 7
    }
    bytes.append(UInt8(value))
  }

  mutating func string(_ text: String) {
    varint(UInt64(text.utf8.count))
    bytes += Array(text.utf8)
  }

  /// A run: replica number, counter as a zigzag step from the replica's previous run, length, flags (1 deleted,
  /// 2 has a left origin, 4 the left origin is the previous counter, 8 has a right origin), origins.
  mutating func run(
    client: Int, counter: UInt32, length: UInt64, deleted: Bool = false, left: (Int, UInt32)? = nil,
    right: (Int, UInt32)? = nil, flags extra: UInt8 = 0
  ) {
    var out = StateBytes(bytes: [])
    out.varint(UInt64(client))
    let step = Int64(counter) - (previousEnd[client] ?? 0)
    out.varint(UInt64(bitPattern: (step << 1) ^ (step >> 63)))
    previousEnd[client] = Int64(counter) + Int64(truncatingIfNeeded: length)
    out.varint(length)
    var flags: UInt8 = deleted ? 1 : 0
    if left != nil { flags |= 2 }
    if right != nil { flags |= 8 }
    out.bytes.append(flags | extra)
    if let left {
      out.varint(UInt64(left.0))
      out.varint(UInt64(left.1))
    }
    if let right {
      out.varint(UInt64(right.0))
      out.varint(UInt64(right.1))
    }
    runCount += 1
    runBytes += out.bytes
  }

  mutating func flushRuns() {
    varint(UInt64(runCount))
    bytes += runBytes
    flushed = true
  }

  mutating func text(_ text: String) { textBytes = Array(text.utf8) }

  mutating func delete(client: Int, start: UInt64, length: UInt64) { deletes.append((client, start, length)) }

  /// Writes the runs, the text, the deletions, then (unless `marks` is false, for the cases that write marks
  /// by hand) no marks and no waiting runs.
  mutating func finish(text: String? = nil, marks: Bool = true) {
    if let text { self.text(text) }
    if !flushed { flushRuns() }
    varint(UInt64(textBytes.count))
    bytes += textBytes
    varint(UInt64(deletes.count))
    var previous: [Int: UInt64] = [:]
    for entry in deletes {
      varint(UInt64(entry.client))
      varint(entry.start - (previous[entry.client] ?? 0))
      varint(entry.length)
      varint(0)
      previous[entry.client] = entry.start + entry.length
    }
    guard marks else { return }
    varint(0)
    varint(0)
  }
}
