import RichText
import Testing

/// Peritext marks: which side each type grows on, how conflicting operations of one type resolve, how the
/// marks read, and what happens at a boundary whose character was deleted.
@Suite struct MarkTests {
  let t1 = MarkTime(millis: 1, counter: 0)
  let t2 = MarkTime(millis: 2, counter: 0)
  let t3 = MarkTime(millis: 3, counter: 0)

  func bold(_ start: Int, _ end: Int) -> TextMark { TextMark(type: "bold", start: start, end: end) }
  func link(_ start: Int, _ end: Int, _ url: String = "u") -> TextMark {
    TextMark(type: "link", start: start, end: end, value: url)
  }

  /// Text typed right after a bold range is bold; typed right before it, it is not.
  @Test func boldGrowsAtItsEndOnly() throws {
    var document = TextDocument(text: "abcd", client: "base")
    _ = try document.mark(from: 1, to: 3, type: .bold, value: nil, client: "A", time: t1)
    #expect(document.marks == [bold(1, 3)])
    _ = try document.splice(at: 3, delete: 0, insert: "X", client: "A")
    #expect(document.text == "abcXd")
    #expect(document.marks == [bold(1, 4)])
    _ = try document.splice(at: 1, delete: 0, insert: "Y", client: "A")
    #expect(document.text == "aYbcXd")
    #expect(document.marks == [bold(2, 5)])
  }

  /// Bold over the whole text grows with text typed at the end.
  @Test func boldToTheEndGrowsAtTheEnd() throws {
    var document = TextDocument(text: "ab", client: "base")
    _ = try document.mark(from: 0, to: 2, type: .bold, value: nil, client: "A", time: t1)
    _ = try document.splice(at: 2, delete: 0, insert: "cd", client: "A")
    #expect(document.marks == [bold(0, 4)])
  }

  /// Text typed right after a link (or inline code) is not part of it, at either end; inside it, it is.
  @Test func linkAndCodeDoNotGrow() throws {
    var document = TextDocument(text: "abcd", client: "base")
    _ = try document.mark(from: 1, to: 3, type: .link, value: "u", client: "A", time: t1)
    _ = try document.mark(from: 1, to: 3, type: .code, value: nil, client: "A", time: t1)
    _ = try document.splice(at: 3, delete: 0, insert: "X", client: "A")
    _ = try document.splice(at: 1, delete: 0, insert: "Y", client: "A")
    _ = try document.splice(at: 3, delete: 0, insert: "Z", client: "A")
    #expect(document.text == "aYbZcXd")
    #expect(
      document.marks == [TextMark(type: "code", start: 2, end: 5), link(2, 5)])
  }

  /// The character just after a bold range is deleted, then text is typed where the range ends: it is still
  /// the end of the bold range, so the text is bold (the mark's end clings to the deleted character; the text
  /// must go before it).
  @Test func boldGrowsAtItsEndWhenTheNextCharacterIsDeleted() throws {
    var document = TextDocument(text: "abc", client: "base")
    _ = try document.mark(from: 0, to: 2, type: .bold, value: nil, client: "A", time: t1)
    _ = try document.splice(at: 2, delete: 1, insert: "", client: "A")
    #expect(document.marks == [bold(0, 2)])
    _ = try document.splice(at: 2, delete: 0, insert: "d", client: "A")
    #expect(document.text == "abd")
    #expect(document.marks == [bold(0, 3)])
    // Replacing the character after the range in one splice does the same.
    var replaced = TextDocument(text: "abc", client: "base")
    _ = try replaced.mark(from: 0, to: 2, type: .bold, value: nil, client: "A", time: t1)
    _ = try replaced.splice(at: 2, delete: 1, insert: "d", client: "A")
    #expect(replaced.marks == [bold(0, 3)])
  }

  /// The first character of a bold range is deleted, then text is typed where the range now starts: a mark
  /// never grows at its start, so the text is not bold.
  @Test func boldDoesNotGrowAtItsStartWhenItsFirstCharacterIsDeleted() throws {
    var document = TextDocument(text: "abc", client: "base")
    _ = try document.mark(from: 1, to: 3, type: .bold, value: nil, client: "A", time: t1)
    _ = try document.splice(at: 1, delete: 1, insert: "", client: "A")
    #expect(document.marks == [bold(1, 2)])
    _ = try document.splice(at: 1, delete: 0, insert: "x", client: "A")
    #expect(document.text == "axc")
    #expect(document.marks == [bold(2, 3)])
    // At the document's start as well.
    var atStart = TextDocument(text: "abc", client: "base")
    _ = try atStart.mark(from: 0, to: 3, type: .bold, value: nil, client: "A", time: t1)
    _ = try atStart.splice(at: 0, delete: 1, insert: "", client: "A")
    _ = try atStart.splice(at: 0, delete: 0, insert: "x", client: "A")
    #expect(atStart.text == "xbc")
    #expect(atStart.marks == [bold(1, 3)])
  }

  /// The last character of a link is deleted, then text is typed where the link now ends: a link does not
  /// grow, so the text is not linked.
  @Test func linkDoesNotGrowWhenItsLastCharacterIsDeleted() throws {
    var document = TextDocument(text: "abc", client: "base")
    _ = try document.mark(from: 0, to: 2, type: .link, value: "u", client: "A", time: t1)
    _ = try document.splice(at: 1, delete: 1, insert: "", client: "A")
    #expect(document.marks == [link(0, 1)])
    _ = try document.splice(at: 1, delete: 0, insert: "x", client: "A")
    #expect(document.text == "axc")
    #expect(document.marks == [link(0, 1)])
  }

  /// When both cannot hold: bold ends before deleted "b", a link ends after deleted "c"; text typed between
  /// "a" and "d" can be inside the bold (before "b") or outside the link (after "c"), not both. As in Peritext,
  /// not extending the link wins: the text is neither linked nor bold.
  @Test func aLinkEndingAtADeletedCharacterWinsOverGrowingBold() throws {
    var document = TextDocument(text: "abcd", client: "base")
    _ = try document.mark(from: 0, to: 1, type: .bold, value: nil, client: "A", time: t1)
    _ = try document.mark(from: 0, to: 3, type: .link, value: "u", client: "A", time: t1)
    _ = try document.splice(at: 1, delete: 2, insert: "", client: "A")
    #expect(document.marks == [bold(0, 1), link(0, 1)])
    _ = try document.splice(at: 1, delete: 0, insert: "x", client: "A")
    #expect(document.text == "axd")
    #expect(document.marks == [bold(0, 1), link(0, 1)])
  }

  /// Of two operations of one type over a character, the later clock reading wins, whatever the replicas'
  /// names; at the same reading, the greater replica name. A removal wins by leaving the text bare.
  @Test func conflictsResolveByTimeThenReplica() throws {
    var document = TextDocument(text: "abcdef", client: "base")
    _ = try document.mark(from: 0, to: 4, type: .color, value: "red", client: "B", time: t2)
    _ = try document.mark(from: 2, to: 6, type: .color, value: "blue", client: "A", time: t1)
    #expect(
      document.marks == [
        TextMark(type: "color", start: 0, end: 4, value: "red"),
        TextMark(type: "color", start: 4, end: 6, value: "blue"),
      ])
    _ = try document.mark(from: 0, to: 6, type: .bold, value: nil, client: "A", time: t3)
    _ = try document.mark(from: 1, to: 3, type: .bold, value: nil, remove: true, client: "B", time: t3)
    _ = try document.mark(from: 4, to: 5, type: .bold, value: nil, remove: true, client: "0", time: t3)
    #expect(
      document.marks == [
        bold(0, 1), TextMark(type: "color", start: 0, end: 4, value: "red"), bold(3, 6),
        TextMark(type: "color", start: 4, end: 6, value: "blue"),
      ])
  }

  /// The same conflicts applied on two replicas in opposite orders read the same.
  @Test func conflictsResolveTheSameInAnyOrder() throws {
    let base = TextDocument(text: "abcdef", client: "base")
    var a = base
    var b = base
    let fromA = try a.mark(from: 0, to: 4, type: .link, value: "x", client: "A", time: t2)
    let fromB = try b.mark(from: 2, to: 6, type: .link, value: "y", client: "B", time: t2)
    a.apply(fromB)
    b.apply(fromA)
    #expect(a.marks == [link(0, 2, "x"), link(2, 6, "y")])
    #expect(b.marks == a.marks)
  }

  /// Neighbouring stretches of one value read as one mark, whichever operations they come from; different
  /// values stay apart. Marks are sorted by start, then type.
  @Test func adjacentStretchesOfOneValueJoin() throws {
    var document = TextDocument(text: "abcdefgh", client: "base")
    _ = try document.mark(from: 0, to: 2, type: .italic, value: nil, client: "A", time: t1)
    _ = try document.mark(from: 2, to: 4, type: .italic, value: nil, client: "B", time: t2)
    _ = try document.mark(from: 4, to: 6, type: .color, value: "red", client: "A", time: t1)
    _ = try document.mark(from: 6, to: 8, type: .color, value: "red", client: "B", time: t2)
    _ = try document.mark(from: 1, to: 5, type: .underline, value: nil, client: "A", time: t3)
    _ = try document.mark(from: 0, to: 3, type: .strike, value: nil, client: "A", time: t3)
    _ = try document.mark(from: 3, to: 4, type: .color, value: "blue", client: "A", time: t3)
    #expect(
      document.marks == [
        TextMark(type: "italic", start: 0, end: 4), TextMark(type: "strike", start: 0, end: 3),
        TextMark(type: "underline", start: 1, end: 5),
        TextMark(type: "color", start: 3, end: 4, value: "blue"),
        TextMark(type: "color", start: 4, end: 8, value: "red"),
      ])
  }

  /// Deleting every character of a mark leaves nothing to read; the operation still holds (text typed there
  /// later, inside its anchors, takes it).
  @Test func aMarkOverDeletedTextReadsAsNothing() throws {
    var document = TextDocument(text: "abcd", client: "base")
    _ = try document.mark(from: 1, to: 3, type: .italic, value: nil, client: "A", time: t1)
    _ = try document.splice(at: 1, delete: 2, insert: "", client: "A")
    #expect(document.text == "ad")
    #expect(document.marks == [])
    #expect(document.markOperations.count == 1)
  }

  /// A mark whose characters have not arrived waits for them, and applies once they do.
  @Test func aMarkWaitsForItsCharacters() throws {
    var a = TextDocument(text: "ab", client: "base")
    var b = a
    let typed = try a.splice(at: 1, delete: 0, insert: "XYZ", client: "A")
    let marked = try a.mark(from: 2, to: 4, type: .bold, value: nil, client: "A", time: t1)
    b.apply(marked)
    #expect(b.hasPendingOperations)
    #expect(b.marks == [])
    expectRoundTrips(b)
    b.apply(typed)
    #expect(!b.hasPendingOperations)
    #expect(b.text == "aXYZb")
    #expect(b.marks == [bold(2, 4)])
    #expect(b.marks == a.marks)
  }

  /// A mark made concurrently with text typed at its end: on every replica, the text takes a growing mark and
  /// not a link.
  @Test func concurrentTypingAtAMarksEnd() throws {
    let base = TextDocument(text: "abc", client: "base")
    var a = base
    var b = base
    let marks = [
      try a.mark(from: 0, to: 2, type: .bold, value: nil, client: "A", time: t1),
      try a.mark(from: 0, to: 2, type: .link, value: "u", client: "A", time: t1),
    ]
    let typed = try b.splice(at: 2, delete: 0, insert: "X", client: "B")
    for update in marks { b.apply(update) }
    a.apply(typed)
    #expect(a.text == "abXc")
    #expect(a.marks == [bold(0, 3), link(0, 2)])
    #expect(b.marks == a.marks)
  }
}
