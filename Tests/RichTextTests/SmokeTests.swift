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
