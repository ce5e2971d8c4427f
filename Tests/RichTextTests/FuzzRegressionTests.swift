import RichText
import Testing

/// What `FuzzTextOps` (Fuzz/) found, each kept as the smallest case that shows it. Their inputs are in
/// Fuzz/Corpus/FuzzTextOps (regression-*.bin).
@Suite struct FuzzRegressionTests {
  /// A deletion received before the characters it deletes is applied when they arrive, also when they are the
  /// first characters of an empty document (that path returned before looking at the known deletions: the
  /// characters stayed visible, the replica diverged, and its state no longer decoded).
  @Test func aDeletionThatArrivesFirstDeletesTheFirstTextOfAnEmptyDocument() throws {
    var author = TextDocument()
    let typed = try author.splice(at: 0, delete: 0, insert: "b bbc", client: "B")
    let replaced = try author.splice(at: 1, delete: 4, insert: " a", client: "B")
    #expect(author.text == "b a")

    var late = TextDocument()
    late.apply(replaced)
    #expect(late.hasPendingOperations)
    late.apply(typed)
    #expect(late.text == "b a")
    #expect(!late.hasPendingOperations)
    #expect(try TextDocument(encoded: late.encoded()).text == "b a")

    var deletionOnly = TextDocument()
    deletionOnly.apply(TextUpdate(deletes: replaced.deletes))
    deletionOnly.apply(typed)
    #expect(deletionOnly.text == "b")
    #expect(try TextDocument(encoded: deletionOnly.encoded()).text == "b")
  }

  /// A mark the broker makes itself carries the broker's sequence, so a device's delta since an earlier
  /// sequence carries it (`seq` was dropped: the mark had sequence 0 and no delta ever carried it).
  @Test func aMarkMadeWithASequenceIsInTheDeltasAfterIt() throws {
    var hub = TextDocument(text: "hello world", client: "", seq: 1)
    var device = hub
    _ = try hub.mark(
      from: 0, to: 5, type: .bold, value: nil, client: "@broker", time: MarkTime(millis: 9, counter: 0),
      seq: 2)
    #expect(hub.markOperations.map(\.seq) == [2])
    let delta = hub.update(since: 1)
    #expect(delta.marks.count == 1)
    #expect(hub.update(since: 2).isEmpty)
    device.apply(delta)
    #expect(device.marks == [TextMark(type: "bold", start: 0, end: 5)])
    #expect(device.marks == hub.marks)
  }

  /// An update whose characters wait for an origin, delivered again (a retried delta, or inside whole states
  /// traded back and forth), waits once: the state does not grow (before, each delivery added a copy, and
  /// trading whole states doubled them).
  @Test func operationsThatWaitAreKeptOnceHoweverOftenTheyArrive() throws {
    var author = TextDocument()
    let first = try author.splice(at: 0, delete: 0, insert: "abc", client: "A")
    let second = try author.splice(at: 3, delete: 0, insert: "def", client: "A")
    let bold = try author.mark(
      from: 1, to: 5, type: .bold, value: nil, client: "A", time: MarkTime(millis: 1, counter: 0))
    var waiting = TextDocument()
    waiting.apply(TextUpdate(runs: second.runs, marks: bold.marks))
    let once = waiting.encoded()
    waiting.apply(TextUpdate(runs: second.runs, marks: bold.marks))
    #expect(waiting.encoded() == once)
    var other = TextDocument()
    for _ in 0..<6 {
      other.apply(waiting.update())
      waiting.apply(other.update())
    }
    #expect(waiting.encoded() == once)
    #expect(waiting.update().runs.count == 1)
    #expect(waiting.update().marks.count == 1)
    waiting.apply(first)
    #expect(!waiting.hasPendingOperations)
    #expect(waiting.text == "abcdef")
    #expect(waiting.marks == [TextMark(type: "bold", start: 1, end: 5)])
  }

  /// A version 1 state whose deleted ranges leave a tombstone out, and name an empty range with a sequence,
  /// reads as one whose tombstone is deleted and with no such range: version 2 says deletions by the tombstones
  /// and joins what is written to them, so the empty range's sequence came back on the tombstone's, and
  /// `encoded()` of the state read back differed (regression-version1-tombstone-outside-deletions.bin).
  @Test func aVersion1TombstoneOutsideItsDeletionsReadsAsDeleted() throws {
    let bytes: [UInt8] = [
      1, 1, 2, 0, 1, 67, 4, 0, 0, 2, 0, 0, 0, 5, 7, 1, 0, 2, 10, 0, 6, 0, 7, 0, 0, 6, 6, 14, 104, 195, 169,
      204,
      129, 195, 188, 32, 119, 195, 182, 114, 108, 100, 1, 0, 2, 0, 5, 0, 0,
    ]
    let document = try TextDocument(encoded: bytes)
    #expect(document.update().deletes == [DeletedRange(client: "", counter: 2, length: 5, seq: 0)])
    let encoded = document.encoded()
    let again = try TextDocument(encoded: encoded)
    #expect(again.encoded() == encoded)
    #expect(again.update() == document.update())
  }

  /// A state whose last run has a right origin (here its own first character: no edit makes one, but the
  /// decoder does not check where an origin is) is written again without trapping: version 2 looked for the
  /// origin among the runs after the last one, an empty range (regression-last-run-with-a-right-origin.bin).
  @Test func aLastRunWithARightOriginIsWrittenAgain() throws {
    let bytes: [UInt8] = [1, 1, 1, 0, 1, 0, 0, 120, 25, 0, 0, 0, 0, 0, 0, 0]
    let document = try TextDocument(encoded: bytes)
    #expect(document.update().runs.map(\.right) == [CharacterID(client: "", counter: 0)])
    let encoded = document.encoded()
    #expect(try TextDocument(encoded: encoded).encoded() == encoded)
  }

  /// States that name ids or runs their bytes cannot back are refused before anything is allocated for them
  /// (a 26-byte state naming counter 2^32 - 257 took 4 GiB; one claiming 2^26 runs reserved 2.5 GiB; a
  /// visible run of 2^32 - 1 characters reserved 16 GiB for its text).
  @Test(
    arguments: [
      // One tombstone run of replica A at counter 0xFFFF_FF00.
      [1, 1, 1, 1, 65, 1, 0, 128, 252, 255, 255, 31, 1, 1, 0, 1, 0, 128, 254, 255, 255, 15, 1, 0, 0, 0],
      // 2^26 runs, none there.
      [1, 1, 0, 128, 128, 128, 32],
      // One visible run of 2^32 - 1 characters with one byte of text.
      [1, 1, 1, 1, 65, 1, 0, 0, 255, 255, 255, 255, 15, 0, 1, 97, 0, 0, 0],
    ] as [[UInt8]])
  func statesBeyondTheirBytesAreRefused(_ bytes: [UInt8]) {
    #expect(throws: TextError.self) { try TextDocument(encoded: bytes) }
    #expect(throws: TextError.self) { try TextCodec.decodeUpdate(bytes) }
  }

  /// Up to `maxIdentifiers` ids a state reads back; one more is refused, however the ids are spread over
  /// replicas.
  @Test func aStateMayNameUpToMaxIdentifiers() throws {
    let limit = UInt32(TextDocument.maxIdentifiers)
    func state(_ ends: [UInt32]) -> [UInt8] {
      // Replicas A, B, ... each with one tombstone run ending at its `ends` value.
      var bytes: [UInt8] = [1, 1, UInt8(ends.count)]
      for index in ends.indices { bytes += [1, 65 + UInt8(index)] }
      bytes += varint(UInt64(ends.count))
      for (index, end) in ends.enumerated() { bytes += [UInt8(index), 0] + varint(UInt64(end)) + [1] }
      return bytes + [0, 0, 0, 0]
    }
    let whole = try TextDocument(encoded: state([limit]))
    #expect(whole.totalCount == Int(limit) && whole.count == 0)
    #expect(throws: TextError.malformed("more than \(limit) character ids")) {
      try TextDocument(encoded: state([limit + 1]))
    }
    #expect(try TextDocument(encoded: state([limit / 2, limit / 2])).totalCount == Int(limit))
    #expect(throws: TextError.self) { try TextDocument(encoded: state([limit / 2, limit / 2 + 1])) }
  }
}

private func varint(_ value: UInt64) -> [UInt8] {
  var value = value
  var bytes: [UInt8] = []
  while value >= 0x80 {
    bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
    value >>= 7
  }
  return bytes + [UInt8(value)]
}
