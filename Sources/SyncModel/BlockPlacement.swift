/// Where a block goes in its page: the one rule the broker applies to `add_block` and `move_block`, and the
/// device applies to its local copy (and again in a rebase), so that both put a block in the same place.
///
/// A page's blocks are ordered by `position` (a `Double`; ties by id); only the order means anything. A block
/// placed `after` another goes midway between that block and the next one.
///
/// The rule for `after`:
/// - nil: first in the page;
/// - a block among the page's blocks, live or deleted: just after it (a block placed after one that another
///   device deleted meanwhile stays where its writer put it, instead of being refused and lost from the page);
/// - anything else (a block the caller does not know, of another page, or the block being placed itself): last.
///
/// The broker passes the page's blocks with their tombstones; the device keeps no tombstones, so a block placed
/// there after one deleted locally goes last until the broker's answer gives its final position.
///
/// When the two neighbours are too close to split (`minimumGap`, about 30 halvings of the gap of 1 that blocks
/// appended one after the other get), the blocks around the place are spread out first, and only those: the
/// smallest aligned range of positions around it (of width `minimumGap` × 2^j, j = 1, 2, ...) that holds at
/// most (4/3)^j blocks, the new one counted, is spread evenly over its width (the list-labelling of Bender et
/// al., "Two simplified algorithms for maintaining order in a list", 2002). Larger ranges must be sparser, so a
/// range spread out leaves room in every range inside it: amortised, a placement moves O(log n) other blocks
/// of a page of n, and reads only them and its two neighbours (`place(after:in:)` asks the page for nothing
/// else). Renumbering the whole page instead, as this rule did before, cost every block of the page at every
/// ~30 placements at one place, and reading the whole page cost it at every one.
public enum BlockPlacement {
  /// A block already in the page, as the rule needs it.
  public struct Slot: Equatable, Sendable {
    public var id: EntityID
    public var position: Double

    public init(id: EntityID, position: Double) {
      self.id = id
      self.position = position
    }
  }

  /// Where to put the block, and the blocks to move first when there was no room.
  public struct Decision: Equatable, Sendable {
    /// The new block's position.
    public var position: Double
    /// New positions of some of the page's other blocks (in page order), when the gap had to be widened; empty
    /// otherwise. Their order does not change.
    public var renumbered: [Slot]
  }

  /// What the rule reads of a page: its blocks in page order (by position, then id), without the block being
  /// placed. The broker answers from its store's index, the device from an array (`place(after:among:)`).
  public protocol Page {
    associatedtype Failure: Error
    /// The block `id`, if the page has it.
    func slot(_ id: EntityID) throws(Failure) -> Slot?
    /// The block that follows `slot` in page order; with nil, the page's first block.
    func slot(after slot: Slot?) throws(Failure) -> Slot?
    /// The page's last block.
    func lastSlot() throws(Failure) -> Slot?
    /// The blocks whose position is in `range`, in page order; at most `limit` of them (the first ones).
    func slots(in range: Range<Double>, limit: Int) throws(Failure) -> [Slot]
  }

  /// The smallest gap that is still split; below it the blocks around it are spread out. A power of two
  /// (2^-30), so that the ranges of the spreading are exact.
  static let minimumGap = 1.0 / 1_073_741_824

  /// Decides where a block goes `after` another among `blocks`, which are the page's other blocks in page order
  /// (by position, then id), without the block being placed.
  public static func place(after: EntityID?, among blocks: [Slot]) -> Decision {
    place(after: after, in: ArrayPage(blocks: blocks))
  }

  /// Decides where a block goes `after` another in `page`, reading only the blocks the decision needs.
  public static func place<P: Page>(after: EntityID?, in page: P) throws(P.Failure) -> Decision {
    let before: Slot?
    let next: Slot?
    if let after, let found = try page.slot(after) {
      before = found
      next = try page.slot(after: found)
    } else if after != nil {
      before = try page.lastSlot()
      next = nil
    } else {
      before = nil
      next = try page.slot(after: nil)
    }
    let low = before?.position ?? (next?.position ?? 1) - 2
    let high = next?.position ?? low + 2
    let middle = (low + high) / 2
    if high - low >= minimumGap && low < middle && middle < high {
      return Decision(position: middle, renumbered: [])
    }
    // No room: `before` (or, placed first, `next`) is in every range tried, so the new block's place in it is
    // known.
    let anchor = before ?? next!
    var width = minimumGap * 2
    var capacity = 4.0 / 3.0
    while anchor.position.isFinite && width < 1e300 {
      let start = (anchor.position / width).rounded(.down) * width
      let end = start + width
      let limit = Int(capacity.rounded(.down))
      if limit >= 2 {
        let inside = try page.slots(in: start..<end, limit: limit)
        if inside.count < limit, let decision = spread(inside, over: start..<end, after: before) {
          return decision
        }
      }
      width *= 2
      capacity *= 4.0 / 3.0
    }
    // Positions beyond 1e300 (never written by this rule): the whole page, 1, 2, 3, ...
    return spread(try page.slots(in: -Double.infinity..<Double.infinity, limit: Int.max), after: before)
  }

  /// The blocks of `inside` and the new one (just after `before`, or first if `before` is not among them)
  /// spread evenly over `range`; nil if the positions would not all differ (doubles too coarse there).
  private static func spread(_ inside: [Slot], over range: Range<Double>, after before: Slot?) -> Decision? {
    let count = inside.count + 1
    let step = (range.upperBound - range.lowerBound) / Double(count)
    var positions: [Double] = []
    positions.reserveCapacity(count)
    for index in 0..<count {
      positions.append(range.lowerBound + step * (Double(index) + 0.5))
    }
    guard positions[0] >= range.lowerBound, positions[count - 1] < range.upperBound,
      zip(positions, positions.dropFirst()).allSatisfy({ $0 < $1 })
    else { return nil }
    return decision(inside, positions, after: before)
  }

  /// The whole page renumbered 1, 2, 3, ..., the new block in its place.
  private static func spread(_ all: [Slot], after before: Slot?) -> Decision {
    decision(all, (0...all.count).map { Double($0 + 1) }, after: before)
  }

  /// `positions` given in order to the blocks of `slots` with the new block inserted just after `before` (first
  /// if `before` is not among them).
  private static func decision(_ slots: [Slot], _ positions: [Double], after before: Slot?) -> Decision {
    let insertion = before.flatMap { before in slots.firstIndex { $0.id == before.id } }.map { $0 + 1 } ?? 0
    var renumbered: [Slot] = []
    renumbered.reserveCapacity(slots.count)
    for (index, slot) in slots.enumerated() {
      let position = positions[index < insertion ? index : index + 1]
      if position != slot.position { renumbered.append(Slot(id: slot.id, position: position)) }
    }
    return Decision(position: positions[insertion], renumbered: renumbered)
  }
}

/// A page held whole, in page order: the device's local copy, and tests.
private struct ArrayPage: BlockPlacement.Page {
  typealias Failure = Never
  let blocks: [BlockPlacement.Slot]

  func slot(_ id: EntityID) -> BlockPlacement.Slot? { blocks.first { $0.id == id } }

  func slot(after slot: BlockPlacement.Slot?) -> BlockPlacement.Slot? {
    guard let slot else { return blocks.first }
    guard let index = blocks.firstIndex(where: { $0.id == slot.id }), index + 1 < blocks.count else {
      return nil
    }
    return blocks[index + 1]
  }

  func lastSlot() -> BlockPlacement.Slot? { blocks.last }

  func slots(in range: Range<Double>, limit: Int) -> [BlockPlacement.Slot] {
    // Page order is position order: the first block at or past the start, by binary search.
    var low = 0
    var high = blocks.count
    while low < high {
      let middle = (low + high) / 2
      if blocks[middle].position < range.lowerBound { low = middle + 1 } else { high = middle }
    }
    var found: [BlockPlacement.Slot] = []
    var index = low
    while index < blocks.count && blocks[index].position < range.upperBound && found.count < limit {
      found.append(blocks[index])
      index += 1
    }
    return found
  }
}
