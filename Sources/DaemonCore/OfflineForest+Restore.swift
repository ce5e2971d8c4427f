import SyncModel

extension OfflineForest {
  /// Rebuilds the forest from the rows of `offline_action` and the stored order of recent visits.
  ///
  /// The rows are checked (each tree has its origin row, one row per page, `from` chains that lead back to the
  /// origin; `recentOrder` names exactly the `recent` origins): a store that fails is reported, not guessed at.
  /// If `recentLimit` is lower than when the rows were written, the oldest recent origins are dropped here and
  /// `change` holds their rows: write it. The structure is not read: if it may have changed since the rows were
  /// written, or `databaseRowLimit` differs from theirs, call `refreshAll` and write its change too.
  public static func restore(
    actions: some Sequence<OfflineAction>, recentOrder: [EntityID], databaseRowLimit: Int = 50,
    recentLimit: Int = 20
  ) throws(OfflineForestError) -> (forest: OfflineForest, change: ForestChange) {
    var forest = OfflineForest(databaseRowLimit: databaseRowLimit, recentLimit: recentLimit)
    var roots = Set<TreeKey>()
    for row in actions {
      let key = TreeKey(origin: row.origin, type: row.type)
      guard (row.from == nil) == (row.impacted == row.origin) else { throw .malformedRow(row) }
      if let from = row.from {
        guard forest.trees[key, default: [:]].updateValue(from, forKey: row.impacted) == nil else {
          throw .duplicateRow(row)
        }
      } else {
        guard roots.insert(key).inserted else { throw .duplicateRow(row) }
        if forest.trees[key] == nil { forest.trees[key] = [:] }
      }
      forest.treesByPage[row.impacted, default: []].insert(key)
    }
    for (key, parents) in forest.trees {
      guard roots.contains(key) else { throw .missingOriginRow(origin: key.origin, type: key.type) }
      if let row = detachedRow(in: key, parents) { throw .detachedRow(row) }
    }
    let recentOrigins = Set(forest.trees.keys.filter { $0.type == .recent }.map(\.origin))
    guard Set(recentOrder) == recentOrigins, recentOrder.count == recentOrigins.count else {
      throw .recentOrderMismatch
    }
    forest.recentOrder = recentOrder
    var recorder = ChangeRecorder()
    forest.trimRecent(recording: &recorder)
    return (forest, recorder.finish(forest.treesByPage))
  }
}
