import EventLoopTestKit
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

@Suite struct BlockPlacementTests {
  private func slots(_ pairs: [(String, Double)]) -> [BlockPlacement.Slot] {
    pairs.map { BlockPlacement.Slot(id: id($0.0), position: $0.1) }
  }

  @Test func nilIsFirstAKnownBlockIsFollowedAnUnknownOneMeansLast() {
    let page = slots([("a", 1), ("b", 2), ("c", 4)])
    #expect(BlockPlacement.place(after: nil, among: page).position < 1)
    #expect(BlockPlacement.place(after: id("a"), among: page).position == 1.5)
    #expect(BlockPlacement.place(after: id("b"), among: page).position == 3)
    #expect(BlockPlacement.place(after: id("c"), among: page).position > 4)
    #expect(BlockPlacement.place(after: id("ghost"), among: page).position > 4)
    #expect(BlockPlacement.place(after: id("ghost"), among: page).renumbered == [])
  }

  @Test func theFirstBlockOfAnEmptyPageNeedsNoNeighbour() {
    let first = BlockPlacement.place(after: nil, among: [])
    let orphan = BlockPlacement.place(after: id("gone"), among: [])
    #expect(first.position.isFinite && orphan.position.isFinite)
    #expect(first.renumbered.isEmpty && orphan.renumbered.isEmpty)
  }

  @Test func aGapTooSmallToSplitRenumbersThePageInItsOrder() {
    let page = slots([("a", 1), ("b", 1 + 1e-12), ("c", 3)])
    let decision = BlockPlacement.place(after: id("a"), among: page)
    #expect(decision.renumbered == slots([("a", 1), ("b", 2), ("c", 3)]))
    #expect(decision.position == 1.5)
  }

  /// Random placements against a model that keeps the page as an array: sorting the blocks by their positions
  /// (then ids, as the stores read them) always gives the model's order, through any number of renumberings.
  @Test(arguments: [1, 2, 3] as [UInt64]) func positionsAlwaysGiveTheModelsOrder(seed: UInt64) {
    var random = SplitMix64(seed: 0xB10C_0000 + seed)
    var page: [BlockPlacement.Slot] = []
    var model: [EntityID] = []
    var renumberings = 0
    for step in 0..<1_500 {
      let block = id("b\(step)")
      let roll = random.next() % 10
      // Mostly after the first block placed (which halves one gap again and again), sometimes first, after a
      // random block, or after one the page does not have.
      let after: EntityID? =
        roll == 0 || model.isEmpty
        ? nil
        : roll == 1 ? id("ghost") : roll < 6 ? id("b0") : model[Int(random.next() % UInt64(model.count))]
      let decision = BlockPlacement.place(after: after, among: page)
      if !decision.renumbered.isEmpty {
        renumberings += 1
        page = decision.renumbered
      }
      page.append(BlockPlacement.Slot(id: block, position: decision.position))
      page.sort { ($0.position, $0.id.rawValue) < ($1.position, $1.id.rawValue) }
      let index =
        after.flatMap { model.firstIndex(of: $0) }.map { $0 + 1 } ?? (after == nil ? 0 : model.count)
      model.insert(block, at: index)
      #expect(page.map(\.id) == model, "step \(step): after \(after?.rawValue ?? "nil")")
      if page.map(\.id) != model { return }
    }
    #expect(renumberings > 0, "the run never exercised a renumbering")
  }
}
