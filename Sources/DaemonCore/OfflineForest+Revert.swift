import SyncModel

extension OfflineForest {
  /// What an operation may change besides the rows: the recent order and the limits. Taken before an operation
  /// that may have to be reverted.
  public struct Settings: Equatable, Sendable {
    public let recentOrder: [EntityID]
    public let databaseRowLimit: Int
    public let recentLimit: Int
  }

  /// The recent order and limits now, for `revert(_:to:)`.
  public var settings: Settings {
    Settings(recentOrder: recentOrder, databaseRowLimit: databaseRowLimit, recentLimit: recentLimit)
  }

  /// Undoes an operation whose write failed: `change` is what the operation returned, `settings` what
  /// `settings` was before it. The forest becomes what it was before the operation.
  ///
  /// A change is a complete, minimal diff of the rows (`ForestChange`), so the forest before it is the forest
  /// after it less the inserted rows plus the deleted ones; a row whose `from` changed is one of each. Undoing
  /// instead of operating on a copy means an operation never holds two forests: a copy is shared with the forest
  /// it came from until written, and then each dictionary the operation touches is copied whole while the
  /// original stays (scripts/idle-daemon.py: the offline set's index held twice at the peak of a first sync).
  public mutating func revert(_ change: ForestChange, to settings: Settings) {
    // Inserted rows first: a tree made by the operation goes with its origin row, and a row whose `from` changed
    // is put back by its deleted row below.
    for row in change.insertedActions.reversed() {
      let key = TreeKey(origin: row.origin, type: row.type)
      if row.from == nil {
        trees[key] = nil
      } else {
        trees[key]?[row.impacted] = nil
      }
      treesByPage[row.impacted]?.remove(key)
      if treesByPage[row.impacted]?.isEmpty == true { treesByPage[row.impacted] = nil }
    }
    for row in change.deletedActions.reversed() {
      let key = TreeKey(origin: row.origin, type: row.type)
      if let from = row.from {
        trees[key, default: [:]][row.impacted] = from
      } else if trees[key] == nil {
        trees[key] = [:]
      }
      treesByPage[row.impacted, default: []].insert(key)
    }
    recentOrder = settings.recentOrder
    databaseRowLimit = settings.databaseRowLimit
    recentLimit = settings.recentLimit
  }
}
