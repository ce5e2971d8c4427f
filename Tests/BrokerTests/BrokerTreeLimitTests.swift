import Testing
import Web

@testable import Broker

@Suite struct BrokerTreeLimitTests {
  private struct Answer: Decodable {
    struct Result: Decodable {
      var mutationId: UInt64
      var status: String
      var reason: Reason?
    }
    struct Reason: Decodable, Equatable {
      var code: Int
      var name: String
    }
    var results: [Result]
    var lastMutationId: UInt64
  }

  /// `[limits] tree_depth` and `batch_work` reach the store at start and on a reload (live keys): a page below
  /// the limit is `too_deep` (code 11), and a batch past the budget is answered in part.
  @Test func treeDepthAndBatchWorkApplyAtStartAndOnReload() throws {
    let harness = try BrokerHarness { $0.limits.treeDepth = 3 }
    try harness.commit(
      client: "c1",
      [
        .create("a", title: "A"), .createUnder("b", parent: "a", title: "B"),
        .createUnder("c", parent: "b", title: "C"),
      ])
    let refused = harness.pushBatch(client: "c1", [.createUnder("d", parent: "c", title: "D")])
    try harness.run(until: { refused.response != nil })
    let answer = try harness.decode(Answer.self, try #require(refused.response))
    #expect(answer.results.map(\.reason) == [Answer.Reason(code: 11, name: "too_deep")])

    var wider = harness.broker.configuration
    wider.limits.treeDepth = 10
    wider.limits.batchWork = 1_000
    let plan = harness.broker.reload(wider)
    #expect(plan.applied == ["limits.tree_depth", "limits.batch_work"])
    // 400 pages under c, each walking 3 pages up and refreshing c's height (about 6 units): a budget of 1,000
    // takes some of them, not all.
    let edits = (0..<400).map { BrokerHarness.Edit.createUnder("e\($0)", parent: "c", title: "E") }
    let partial = harness.pushBatch(client: "c2", edits)
    try harness.run(until: { partial.response != nil })
    let cut = try harness.decode(Answer.self, try #require(partial.response))
    #expect(cut.results.count > 100 && cut.results.count < 400)
    #expect(cut.results.allSatisfy { $0.status == "applied" })
    #expect(cut.lastMutationId == UInt64(cut.results.count))
    try harness.shutDown()
  }
}
