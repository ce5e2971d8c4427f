import RichText
import Testing

/// Updates arriving out of order, more than once, or as a broker's catch-up.
@Suite struct DeliveryTests {
  /// A deletion that reaches an empty replica before the characters it deletes applies to them when they come
  /// (the first characters placed into an empty document included).
  @Test func aDeletionBeforeItsCharactersOnAnEmptyReplica() throws {
    var a = TextDocument()
    let typed = try a.splice(at: 0, delete: 0, insert: "xyz", client: "A")
    let deleted = try a.splice(at: 1, delete: 1, insert: "", client: "A")
    #expect(a.text == "xz")
    var b = TextDocument()
    b.apply(deleted)
    b.apply(typed)
    #expect(b.text == "xz")
    var c = TextDocument()
    c.apply(TextUpdate(runs: typed.runs, deletes: deleted.deletes))
    #expect(c.text == "xz")
    expectRoundTrips(c)
  }

  /// The same on a replica that already has text.
  @Test func aDeletionBeforeItsCharactersOnAReplicaWithText() throws {
    let base = TextDocument(text: "ab", client: "base")
    var a = base
    let typed = try a.splice(at: 1, delete: 0, insert: "xyz", client: "A")
    let deleted = try a.splice(at: 1, delete: 2, insert: "", client: "A")
    var b = base
    b.apply(deleted)
    #expect(b.text == "ab")
    b.apply(typed)
    #expect(b.text == "azb")
    #expect(b.text == a.text)
  }

  /// A run whose origin has not arrived waits (and is kept through an encoding round trip), then is placed
  /// when the origin comes.
  @Test func aRunWaitsForItsOrigin() throws {
    var a = TextDocument()
    let first = try a.splice(at: 0, delete: 0, insert: "ac", client: "A")
    let second = try a.splice(at: 1, delete: 0, insert: "b", client: "A")
    var b = TextDocument()
    b.apply(second)
    #expect(b.hasPendingOperations)
    #expect(b.text == "")
    b = try TextDocument(encoded: b.encoded())
    #expect(b.hasPendingOperations)
    b.apply(first)
    #expect(!b.hasPendingOperations)
    #expect(b.text == "abc")
  }

  /// Applying an update again, or a state that includes it, changes nothing.
  @Test func applyingTwiceChangesNothing() throws {
    var a = TextDocument(text: "hello", client: "base")
    let updates = [
      try a.splice(at: 5, delete: 0, insert: " world", client: "A"),
      try a.splice(at: 0, delete: 1, insert: "H", client: "A"),
      try a.mark(from: 0, to: 5, type: .bold, value: nil, client: "A", time: MarkTime(millis: 1, counter: 0)),
    ]
    var b = TextDocument(text: "hello", client: "base")
    for update in updates + updates.reversed() + updates { b.apply(update) }
    b.merge(a)
    b.apply(a.update())
    #expect(b.text == "Hello world")
    #expect(b.marks == a.marks)
    #expect(b.runCount == a.runCount)
  }

  /// What a broker sends a replica since a sequence is what that replica lacks.
  @Test func catchingUpSinceASequence() throws {
    let base = TextDocument(text: "base", client: "base")
    var a = base
    var broker = base
    broker.apply(try a.splice(at: 4, delete: 0, insert: " one", client: "A"), seq: 1)
    var late = broker
    broker.apply(try a.splice(at: 0, delete: 1, insert: "B", client: "A"), seq: 2)
    broker.apply(
      try a.mark(
        from: 0, to: 4, type: .italic, value: nil, client: "A", time: MarkTime(millis: 1, counter: 0)),
      seq: 3)
    let since = broker.update(since: 1)
    // Not the characters the late replica has (" one", sequence 1).
    #expect(since.insertedCount < broker.update().insertedCount)
    late.apply(since)
    #expect(late.text == "Base one")
    #expect(late.marks == a.marks)
    #expect(broker.update(since: 3).isEmpty)
  }
}
