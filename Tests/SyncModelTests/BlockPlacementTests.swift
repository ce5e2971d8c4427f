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

  @Test func aGapTooSmallToSplitSpreadsOnlyTheBlocksAroundIt() {
    let page = slots([("z", -5), ("a", 1), ("b", 1 + 1e-12), ("c", 3)])
    let decision = BlockPlacement.place(after: id("a"), among: page)
    // a, the new block and b share a small range around 1, spread evenly over it; z and c keep their places.
    #expect(decision.renumbered.map(\.id) == [id("a"), id("b")])
    let a = decision.renumbered[0].position
    let b = decision.renumbered[1].position
    #expect(a < decision.position && decision.position < b)
    #expect(b - decision.position == decision.position - a)
    #expect(a > -5 && b < 3)
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
        let moved = Dictionary(uniqueKeysWithValues: decision.renumbered.map { ($0.id, $0.position) })
        for index in page.indices { page[index].position = moved[page[index].id] ?? page[index].position }
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

  /// A page that counts the blocks the rule reads.
  private final class CountingPage: BlockPlacement.Page {
    typealias Failure = Never
    var blocks: [BlockPlacement.Slot] = []
    var read = 0

    func slot(_ id: EntityID) -> BlockPlacement.Slot? {
      read += 1
      return blocks.first { $0.id == id }
    }
    func slot(after slot: BlockPlacement.Slot?) -> BlockPlacement.Slot? {
      read += 1
      guard let slot else { return blocks.first }
      guard let index = blocks.firstIndex(where: { $0.id == slot.id }), index + 1 < blocks.count else {
        return nil
      }
      return blocks[index + 1]
    }
    func lastSlot() -> BlockPlacement.Slot? {
      read += 1
      return blocks.last
    }
    func slots(in range: Range<Double>, limit: Int) -> [BlockPlacement.Slot] {
      let found = Array(blocks.lazy.filter { range.contains($0.position) }.prefix(limit))
      read += found.count + 1
      return found
    }
  }

  /// The cost of a placement does not grow with the page: 3,000 blocks typed one after the other in the middle
  /// of a page of 2,000 (each right after the one before: the gap to the next block halves every time), and
  /// 3,000 placed at random, read a few dozen blocks and move a few each on average. Renumbering the whole page when
  /// a gap ran out moved 2,000 blocks every ~30 placements (over 200,000 for the first run alone).
  @Test func aPlacementReadsAndMovesFewBlocksWhateverThePageSize() {
    let page = CountingPage()
    page.blocks = (0..<2_000).map { BlockPlacement.Slot(id: id("b\($0)"), position: Double($0 + 1)) }
    var moved = 0
    func place(_ block: EntityID, after: EntityID?) {
      let decision = BlockPlacement.place(after: after, in: page)
      moved += decision.renumbered.count
      let changes = Dictionary(uniqueKeysWithValues: decision.renumbered.map { ($0.id, $0.position) })
      for index in page.blocks.indices {
        page.blocks[index].position = changes[page.blocks[index].id] ?? page.blocks[index].position
      }
      page.blocks.append(BlockPlacement.Slot(id: block, position: decision.position))
      page.blocks.sort { ($0.position, $0.id.rawValue) < ($1.position, $1.id.rawValue) }
    }
    var after = id("b1000")
    for step in 0..<3_000 {
      place(id("t\(step)"), after: after)
      after = id("t\(step)")
    }
    #expect(moved < 3_000 * 15, "moved \(moved) blocks for 3,000 placements")
    #expect(page.read < 3_000 * 50, "read \(page.read) blocks for 3,000 placements")
    var random = SplitMix64(seed: 0xB10C_5EED)
    (moved, page.read) = (0, 0)
    for step in 0..<3_000 {
      let target = page.blocks[Int(random.next() % UInt64(page.blocks.count))].id
      place(id("r\(step)"), after: target)
    }
    #expect(moved < 3_000 * 15, "moved \(moved) blocks for 3,000 placements")
    #expect(page.read < 3_000 * 50, "read \(page.read) blocks for 3,000 placements")
    let expectedOrder = page.blocks.map(\.id)
    #expect(Set(expectedOrder).count == 8_000)
  }
}
