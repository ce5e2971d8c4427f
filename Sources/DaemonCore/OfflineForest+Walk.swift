import SyncModel

/// One row of a walked tree: a page, and the page it was reached from (nil for the origin).
struct WalkStep: Equatable, Sendable {
  var page: EntityID
  var from: EntityID?
}

extension OfflineForest {
  /// The rows a tree rooted at `origin` should have now: breadth first, each page once, origin first, parents
  /// before children. Terminates on any structure, cyclic or not: a page is expanded at most once.
  func walk(from origin: EntityID, structure: some OfflineStructure) -> [WalkStep] {
    var steps = [WalkStep(page: origin, from: nil)]
    var reached: Set<EntityID> = [origin]
    var next = 0
    while next < steps.count {
      let page = steps[next].page
      next += 1
      let children: [EntityID]
      switch structure.kind(of: page) {
      case .page: children = structure.inlineDatabases(of: page)
      case .database:
        children = Array(structure.rowsInView(of: page, limit: databaseRowLimit).prefix(databaseRowLimit))
      case nil: children = []
      }
      for child in children where reached.insert(child).inserted {
        steps.append(WalkStep(page: child, from: page))
      }
    }
    return steps
  }
}
