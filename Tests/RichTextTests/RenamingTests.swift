import RichText
import Testing

/// `TextUpdate.renaming`: a replica's characters from a counter on given to another replica name, everything
/// that refers to them following, so that a document rebuilt from the renamed state reads the same.
@Suite struct RenamingTests {
  @Test func aRenamedStateReadsTheSameAndSplitsWhatCrossesTheThreshold() throws {
    var document = TextDocument(text: "base", client: "")
    _ = try document.splice(at: 4, delete: 0, insert: "12", client: "old")  // old@0..1, before the copy
    _ = try document.splice(at: 6, delete: 0, insert: "XYZ", client: "old")  // old@2..4: one run with 0..1
    _ = try document.splice(at: 0, delete: 2, insert: "", client: "old")  // deletes ""@0..1
    _ = try document.splice(at: 3, delete: 3, insert: "", client: "old")  // deletes old@1..3: across 2
    _ = try document.mark(
      from: 0, to: 3, type: .bold, value: nil, remove: false, client: "old",
      time: MarkTime(millis: 1, counter: 0))
    let text = document.text
    let state = document.update()
    #expect(state.runs.contains { $0.client == "old" && $0.counter < 2 && $0.counter + $0.length > 2 })

    let renamed = state.renaming("old", from: 2, to: "new")
    #expect(!renamed.runs.contains { $0.client == "old" && $0.counter + $0.length > 2 })
    let moved = renamed.runs.filter { $0.client == "new" }.flatMap { $0.counter..<($0.counter + $0.length) }
    #expect(moved.sorted() == [0, 1, 2], "old@2..4 became new@0..2")
    #expect(renamed.deletes.contains { $0.client == "old" && $0.counter == 1 && $0.length == 1 })
    #expect(renamed.deletes.contains { $0.client == "new" && $0.counter == 0 && $0.length == 2 })
    #expect(renamed.marks.map(\.client) == ["new"])
    var rebuilt = TextDocument()
    rebuilt.apply(renamed)
    #expect(rebuilt.text == text && rebuilt.marks == document.marks)
    #expect(rebuilt.nextCounter(for: "new") == 3 && rebuilt.nextCounter(for: "old") == 2)
    // Marks kept as they are when asked (a device's own state).
    #expect(state.renaming("old", from: 2, to: "new", marks: false).marks.map(\.client) == ["old"])
    // A threshold past every character renames only the marks.
    #expect(state.renaming("old", from: .max, to: "new").runs == state.runs)
  }
}
