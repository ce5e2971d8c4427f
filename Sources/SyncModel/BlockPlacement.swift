/// Where a block goes in its page: the one rule the broker applies to `add_block` and `move_block`, and the
/// device applies to its local copy (and again in a rebase), so that both put a block in the same place.
///
/// A page's blocks are ordered by `position` (a `Double`; ties by id); only the order means anything. A block
/// placed `after` another goes midway between that block and the next one; when the two are too close to split
/// (about 50 halvings of one gap), every block of the page is renumbered 1, 2, 3, ... first.
///
/// The rule for `after`:
/// - nil: first in the page;
/// - a block among `blocks`, live or deleted: just after it (a block placed after one that another device
///   deleted meanwhile stays where its writer put it, instead of being refused and lost from the page);
/// - anything else (a block the caller does not know, of another page, or the block being placed itself): last.
///
/// The broker passes the page's blocks with their tombstones; the device keeps no tombstones, so a block placed
/// there after one deleted locally goes last until the broker's answer gives its final position.
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

  /// Where to put the block, and the renumbering to write first when there was no room.
  public struct Decision: Equatable, Sendable {
    /// The new block's position.
    public var position: Double
    /// New positions of the page's other blocks (in the order given, i.e. page order), when they had to be
    /// renumbered; empty otherwise.
    public var renumbered: [Slot]
  }

  /// The smallest gap that is still split; below it the page is renumbered.
  static let minimumGap = 1e-9

  /// Decides where a block goes `after` another among `blocks`, which are the page's other blocks in page order
  /// (by position, then id), without the block being placed.
  public static func place(after: EntityID?, among blocks: [Slot]) -> Decision {
    var blocks = blocks
    let index: Int
    if let after {
      index = blocks.firstIndex { $0.id == after }.map { $0 + 1 } ?? blocks.count
    } else {
      index = 0
    }
    func gap() -> (low: Double, high: Double) {
      let low = index > 0 ? blocks[index - 1].position : (blocks.first?.position ?? 1) - 2
      let high = index < blocks.count ? blocks[index].position : low + 2
      return (low, high)
    }
    var (low, high) = gap()
    var renumbered: [Slot] = []
    if !(high - low >= minimumGap) {
      for i in blocks.indices { blocks[i].position = Double(i + 1) }
      renumbered = blocks
      (low, high) = gap()
    }
    return Decision(position: (low + high) / 2, renumbered: renumbered)
  }
}
