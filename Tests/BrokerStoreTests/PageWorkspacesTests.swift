import BrokerStore
import StoreInterface
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// `workspacesAndTimes`: what a `subscribe` of pages the broker's index does not know reads from the store.
@Suite struct PageWorkspacesTests {
  /// Answered by position, each page with its own workspace and time even where the workspace changes from one
  /// page to the next (the reader keeps one `EntityID` per run of the same workspace), nil for a page that does
  /// not exist, and a page named twice answered twice.
  @Test(arguments: StoreEngine.tested) func eachPageIsAnsweredInTheOrderAskedWithItsOwnWorkspace(
    engine: StoreEngine
  ) throws {
    let f = try StoreFixture(engine)
    try f.push("c1", "a", .createPage(parent: nil, title: "A"))
    let b = try #require(try f.push("c1", "b", .createPage(parent: nil, title: "B")).pages[id("b")])
    let x = try #require(
      try f.push(
        "c2", [f.mutation("c2", "x", .createPage(parent: nil, title: "X"))], workspace: StoreFixture.other,
        workspaces: [StoreFixture.other]
      ).pages[id("x")])
    let a = try #require(try f.push("c1", "a", .setTitle("A again")).pages[id("a")])
    let answer = try f.store.workspacesAndTimes(of: [
      id("a"), id("x"), id("missing"), id("b"), id("x"), id("a"),
    ])
    let ws1 = StoreFixture.workspace
    let ws2 = StoreFixture.other
    #expect(Set([a, b, x]).count == 3)
    #expect(
      answer == [
        PageFacts(workspace: ws1, lastUpdated: a), PageFacts(workspace: ws2, lastUpdated: x), nil,
        PageFacts(workspace: ws1, lastUpdated: b),
        PageFacts(workspace: ws2, lastUpdated: x),
        PageFacts(workspace: ws1, lastUpdated: a),
      ])
    #expect(try f.store.workspacesAndTimes(of: []) == [])
  }
}
