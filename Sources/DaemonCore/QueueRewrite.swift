import RichText
import SyncModel

/// Queued mutations made ready to be sent again under new ids, in the order they were made: what the device does
/// when the broker rejected some `clock_ahead` (they get fresh times, `ClockBound.restampTime`), or answered that
/// their ids were used by another copy of this device's store (`id_reused`: they go under a new client id).
/// Pure: the store reads the rows, and writes back what this returns.
public enum QueueRewrite {
  /// A new client id for the mutations: the characters they type in block text, and their marks, go with them.
  public struct Rename: Sendable, Equatable {
    public var from: EntityID
    public var to: EntityID

    public init(from: EntityID, to: EntityID) {
      self.from = from
      self.to = to
    }
  }

  /// `mutations` (in queue order, made by client `client`) numbered `firstID`, `firstID + 1`, ...; `times[i]`,
  /// when given, is mutation `i`'s new time (its marks are stamped with it too). With `rename` (whose `from` is
  /// `client`), every text operation's characters typed under `rename.from` from that block's threshold on
  /// (`thresholds`) are given to `rename.to`, numbered from 0 (`TextUpdate.renaming`), and so are its marks.
  public static func rewrite(
    _ mutations: [Mutation], firstID: UInt64, times: [HLCTimestamp?], client: EntityID, rename: Rename?
  ) -> [Mutation] {
    let limits = rename.map { thresholds(of: mutations, client: $0.from.rawValue) } ?? [:]
    return mutations.enumerated().map { index, mutation in
      var mutation = mutation
      mutation.id = firstID + UInt64(index)
      let time = index < times.count ? times[index] : nil
      if let time { mutation.time = time }
      func rewritten(_ block: EntityID, _ ops: TextOps) -> TextOps {
        guard var update = try? ops.update() else { return ops }  // validated when it was recorded
        if let rename {
          update = update.renaming(
            rename.from.rawValue, from: limits[block] ?? .max, to: rename.to.rawValue)
        }
        if let time {
          let owner = (rename?.to ?? client).rawValue
          update = update.stampingMarks(
            of: owner, at: MarkTime(millis: time.millis, counter: time.counter))
        }
        return TextOps(update)
      }
      switch mutation.action {
      case .spliceText(let block, let ops) where rename != nil || time != nil:
        mutation.action = .spliceText(block: block, ops: rewritten(block, ops))
      case .markText(let block, let ops) where rename != nil || time != nil:
        mutation.action = .markText(block: block, ops: rewritten(block, ops))
      default: break
      }
      return mutation
    }
  }

  /// Per block, the first counter of `client`'s characters typed by `mutations` (their `splice_text` runs): from
  /// there on, the block's characters of `client` are these mutations' own. A block they type nothing in has
  /// none (only their marks move).
  public static func thresholds(of mutations: [Mutation], client: String) -> [EntityID: UInt32] {
    var result: [EntityID: UInt32] = [:]
    for mutation in mutations {
      guard case .spliceText(let block, let ops) = mutation.action, let update = try? ops.update() else {
        continue
      }
      for run in update.runs where run.client == client {
        result[block] = min(result[block] ?? .max, run.counter)
      }
    }
    return result
  }
}
