import RichText
import Testing

@Suite struct RichTextSmokeTests {
  @Test func quickBrownFoxMergesBothWords() throws {
    let base = TextDocument(text: "The quick fox jumps.", client: "")
    var a = base
    var b = base
    let fromA = try a.splice(at: 10, delete: 0, insert: "brown ", client: "A")
    let fromB = try b.splice(at: 19, delete: 0, insert: " high", client: "B")
    a.apply(fromB)
    b.apply(fromA)
    #expect(a.text == "The quick brown fox jumps high.")
    #expect(b.text == "The quick brown fox jumps high.")
  }
}

@Suite struct TextDiffTests {
  @Test(arguments: [
    ("The quick fox jumps.", "The quick brown fox jumps."), ("abc", ""), ("", "xyz"), ("kitten", "sitting"),
    ("same", "same"), ("a b c d e", "e d c b a"), ("héllo wörld", "hello world!"),
  ])
  func splicesMakeTheNewText(old: String, new: String) {
    var document = TextDocument(text: old, client: "")
    _ = document.replaceText(with: new, client: "A")
    #expect(document.text == new)
  }

  @Test func oneInsertedWordIsOneSplice() {
    let splices = TextDiff.splices(
      from: Array("The quick fox jumps.".unicodeScalars),
      to: Array("The quick brown fox jumps.".unicodeScalars))
    #expect(splices == [TextDiff.Splice(at: 10, delete: 0, insert: Array("brown ".unicodeScalars))])
  }

  @Test func wholeTextEditsOnTwoReplicasMerge() {
    let base = TextDocument(text: "The quick fox jumps.", client: "")
    var a = base
    var b = base
    let fromA = a.replaceText(with: "The quick brown fox jumps.", client: "A")
    let fromB = b.replaceText(with: "The quick fox jumps high.", client: "B")
    a.apply(fromB)
    b.apply(fromA)
    #expect(a.text == "The quick brown fox jumps high.")
    #expect(b.text == a.text)
  }
}

@Suite struct HeldCharactersTests {
  @Test func countsSkippedCountersAndWaitingRuns() {
    var document = TextDocument(text: "abc", client: "")
    #expect(document.heldCharacters == 3)
    // A run far ahead of its replica's counters: the buffer holds room for everything below it.
    document.apply(
      TextUpdate(runs: [
        InsertRun(
          client: "x", counter: 1000, length: 2, left: CharacterID(client: "", counter: 2), right: nil,
          text: ["y", "z"])
      ]))
    #expect(document.heldCharacters == 3 + 1002)
    // A run whose origin never arrives waits, and is counted.
    document.apply(
      TextUpdate(runs: [
        InsertRun(
          client: "w", counter: 0, length: 4, left: CharacterID(client: "nobody", counter: 9), right: nil,
          text: ["a", "b", "c", "d"])
      ]))
    #expect(document.hasPendingOperations)
    #expect(document.heldCharacters == 3 + 1002 + 4)
  }
}
