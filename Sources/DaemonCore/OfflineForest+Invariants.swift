import SyncModel

extension OfflineForest {
  /// Checks the forest's invariants; returns a description of the first violation, or nil. O(rows). Tests call
  /// it after every step; the daemon may call it in debug builds.
  ///
  /// - every tree's `from` chains lead back to its origin, and the origin has no row but its own;
  /// - the page index is exactly the impacted pages of the trees (a page is offline iff a row impacts it);
  /// - `recentOrder` names each `recent` origin once, and no more than `recentLimit` of them.
  public func invariantViolation() -> String? {
    guard databaseRowLimit >= 0, recentLimit >= 0 else { return "negative limit" }
    var expected: [EntityID: TreeKeys] = [:]
    for key in trees.keys.sorted() {
      let parents = trees[key]!
      if let from = parents[key.origin] {
        return "tree (\(key.origin), \(key.type.rawValue)) has a second origin row from \(from)"
      }
      if let row = Self.detachedRow(in: key, parents) { return "row \(row) is detached from its origin" }
      expected[key.origin, default: []].insert(key)
      for page in parents.keys { expected[page, default: []].insert(key) }
    }
    if expected != treesByPage {
      let page = Set(expected.keys).union(treesByPage.keys).sorted().first {
        expected[$0] != treesByPage[$0]
      }!
      return "page index for \(page) is \(treesByPage[page].map { $0.sorted() } ?? []), rows say "
        + "\(expected[page].map { $0.sorted() } ?? [])"
    }
    let recentOrigins = Set(trees.keys.filter { $0.type == .recent }.map(\.origin))
    if Set(recentOrder) != recentOrigins || recentOrder.count != recentOrigins.count {
      return "recent order \(recentOrder) does not match the recent origins \(recentOrigins.sorted())"
    }
    if recentOrder.count > recentLimit {
      return "\(recentOrder.count) recent origins, more than the limit \(recentLimit)"
    }
    return nil
  }

  /// The first row (by impacted id) whose `from` chain does not reach the origin of its tree, if any.
  static func detachedRow(in key: TreeKey, _ parents: [EntityID: EntityID]) -> OfflineAction? {
    var attached: Set<EntityID> = [key.origin]
    for page in parents.keys.sorted() {
      var chain: [EntityID] = []
      var current = page
      // A chain longer than the tree has a cycle.
      while !attached.contains(current), chain.count <= parents.count, let from = parents[current] {
        chain.append(current)
        current = from
      }
      guard attached.contains(current) else {
        return OfflineAction(origin: key.origin, from: parents[page], impacted: page, type: key.type)
      }
      attached.formUnion(chain)
    }
    return nil
  }
}
