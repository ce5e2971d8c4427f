import SyncModel

/// A walked tree: its pages in walk order, and the page each was reached from.
///
/// The map is the tree's row map as `OfflineForest.trees` keeps it (every page but the origin → its `from`), so a
/// walk becomes the tree without a second map; it is also what the walk checks "reached already" against. The
/// order is only the ids (16 bytes a page). A walk of 10,201 pages held 32-byte (page, from) steps (524 KB), a set
/// of the pages reached, and then a second map built from the steps; now 262 KB of ids and the map
/// (scripts/idle-daemon.py: the forest's growth is the peak of a first sync).
struct WalkedTree: Sendable {
  /// The pages, origin first, breadth first: parents before their children.
  var order: [EntityID]
  /// Every page but the origin → the page it was reached from.
  var parents: [EntityID: EntityID]

  var origin: EntityID { order[0] }
}

extension OfflineForest {
  /// The rows a tree rooted at `origin` should have now: breadth first, each page once, origin first, parents
  /// before children. Terminates on any structure, cyclic or not: a page is expanded at most once.
  func walk(from origin: EntityID, structure: some OfflineStructure) -> WalkedTree {
    var tree = WalkedTree(order: [origin], parents: [:])
    var next = 0
    while next < tree.order.count {
      let page = tree.order[next]
      next += 1
      let children: [EntityID]
      switch structure.kind(of: page) {
      case .page: children = structure.inlineDatabases(of: page)
      case .database:
        children = Array(structure.rowsInView(of: page, limit: databaseRowLimit).prefix(databaseRowLimit))
      case nil: children = []
      }
      for child in children where child != origin && tree.parents[child] == nil {
        tree.parents[child] = page
        tree.order.append(child)
      }
    }
    return tree
  }
}
