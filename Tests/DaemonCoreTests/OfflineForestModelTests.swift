import DaemonCore
import DaemonCoreTestKit
import EventLoopTestKit
import SyncModel
import Testing

/// Thousands of random operations on a random, randomly changing structure, checked after every step against a
/// reference model that recomputes every tree from scratch: the rows, the offline set, the recent order, and the
/// returned change as a faithful, minimal diff of the rows.
@Suite struct OfflineForestModelTests {
  /// The obviously correct forest: which (origin, reason) pairs are active, walked from scratch on every check.
  struct Model {
    var rowLimit: Int
    var recentLimit: Int
    /// Active toggled and favorite origins.
    var origins: Set<OfflineAction> = []  // rows (origin, nil, origin, type): an origin and its reason
    /// Recent origins, most recent first.
    var recent: [EntityID] = []

    mutating func visit(_ page: EntityID) {
      guard recentLimit > 0 else { return }
      recent.removeAll { $0 == page }
      recent.insert(page, at: 0)
      if recent.count > recentLimit { recent.removeLast(recent.count - recentLimit) }
    }

    /// Every row every active tree should have, walking the structure level by level, each page once.
    func rows(_ structure: MapStructure) -> Set<OfflineAction> {
      let roots = origins.map { ($0.origin, $0.type) } + recent.map { ($0, OfflineReason.recent) }
      var rows: Set<OfflineAction> = []
      for (origin, type) in roots {
        rows.insert(OfflineAction(origin: origin, from: nil, impacted: origin, type: type))
        var seen = [origin]
        var level = [origin]
        while !level.isEmpty {
          var next: [EntityID] = []
          for page in level {
            var children: [EntityID] = []
            if structure.kinds[page] == .page { children = structure.inline[page] ?? [] }
            if structure.kinds[page] == .database {
              children = Array((structure.rows[page] ?? []).prefix(rowLimit))
            }
            for child in children where !seen.contains(child) {
              seen.append(child)
              next.append(child)
              rows.insert(OfflineAction(origin: origin, from: page, impacted: child, type: type))
            }
          }
          level = next
        }
      }
      return rows
    }
  }

  static let pages: [EntityID] = (0..<40).map { id("n\($0)") }

  @Test(arguments: [1, 2, 3, 4] as [UInt64]) func randomOperationsMatchTheModel(seed: UInt64) {
    var random = SplitMix64(seed: 0x0FF1_1E00 + seed)
    func pick<T>(_ array: [T]) -> T { array[Int(random.next() % UInt64(array.count))] }
    func chance(_ percent: UInt64) -> Bool { random.next() % 100 < percent }
    func someIDs(_ most: Int) -> [EntityID] {
      (0..<Int(random.next() % UInt64(most + 1))).map { _ in pick(Self.pages) }
    }

    var structure = MapStructure()
    /// Changes one page's own data: its kind, or one of its lists (an edit, a view change, a deletion).
    func mutate(_ page: EntityID) {
      switch random.next() % 8 {
      case 0:
        structure.kinds[page] = pick([.page, .database, nil] as [PageKind?])
      case 1:
        structure.inline[page] = someIDs(2)
      case 2:
        structure.rows[page] = someIDs(6)
      case 3:
        // A new row in view, or a new inline database, somewhere in the list.
        let list = structure.kinds[page] == .database ? \MapStructure.rows : \MapStructure.inline
        var children = structure[keyPath: list][page] ?? []
        children.insert(pick(Self.pages), at: Int(random.next() % UInt64(children.count + 1)))
        structure[keyPath: list][page] = children
      case 4, 5:
        // A row deleted or filtered out, an inline database removed.
        let list = structure.kinds[page] == .database ? \MapStructure.rows : \MapStructure.inline
        var children = structure[keyPath: list][page] ?? []
        if !children.isEmpty { children.remove(at: Int(random.next() % UInt64(children.count))) }
        structure[keyPath: list][page] = children
      default:
        // The view's sort changed.
        structure.rows[page]?.shuffle(using: &random)
      }
    }
    for page in Self.pages {
      if chance(85) { structure.kinds[page] = chance(50) ? .page : .database }
      structure.inline[page] = someIDs(2)
      structure.rows[page] = someIDs(6)
    }

    var model = Model(rowLimit: 3 + Int(random.next() % 3), recentLimit: 3 + Int(random.next() % 4))
    var forest = OfflineForest(databaseRowLimit: model.rowLimit, recentLimit: model.recentLimit)
    var mirror: Set<OfflineAction> = []

    for step in 0..<3_000 {
      // A walk that does not stop on a cycle runs out of lookups and fails the step rather than hanging.
      structure.lookups.pages.removeAll(keepingCapacity: true)
      structure.lookupBudget = 100_000
      let before = forest.offlinePages
      let previous = (forest: forest, settings: forest.settings)
      let roll = random.next() % 100
      let page = pick(Self.pages)
      let reason = pick([OfflineReason.toggled, .favorite])
      var action = ""
      var change = ForestChange()
      switch roll {
      case 0..<14:
        action = "add \(reason) \(page)"
        change = forest.add(reason, origin: page, structure: structure)
        model.origins.insert(OfflineAction(origin: page, from: nil, impacted: page, type: reason))
      case 14..<32:
        // Mostly an active origin, sometimes one that is not.
        let origin = chance(70) ? (model.origins.randomElement(using: &random)?.origin ?? page) : page
        action = "remove \(reason) \(origin)"
        change = forest.remove(reason, origin: origin)
        model.origins.remove(OfflineAction(origin: origin, from: nil, impacted: origin, type: reason))
      case 32..<47:
        let visited = chance(40) ? (model.recent.randomElement(using: &random) ?? page) : page
        action = "visit \(visited)"
        change = forest.visit(visited, structure: structure)
        model.visit(visited)
      case 47..<50:
        let origin = model.recent.randomElement(using: &random) ?? page
        action = "remove recent \(origin)"
        change = forest.remove(.recent, origin: origin)
        model.recent.removeAll { $0 == origin }
      case 50..<75:
        action = "change \(page), refresh it"
        mutate(page)
        change = forest.refresh(page, structure: structure)
      case 75..<85:
        var changed: [EntityID] = []
        for _ in 0..<(2 + random.next() % 3) {
          let page = pick(Self.pages)
          mutate(page)
          changed.append(page)
        }
        action = "change \(changed), refresh them together"
        change = forest.refresh(changed, structure: structure)
      case 85..<90:
        action = "refresh \(page) unchanged"
        change = forest.refresh(page, structure: structure)
        #expect(change.isEmpty, "step \(step): \(action)")
      case 90..<93:
        let origin = model.origins.randomElement(using: &random)?.origin ?? page
        action = "add \(reason) \(origin) again"
        let first = forest.add(reason, origin: origin, structure: structure)
        #expect(forest.add(reason, origin: origin, structure: structure).isEmpty, "step \(step): \(action)")
        change = first
        model.origins.insert(OfflineAction(origin: origin, from: nil, impacted: origin, type: reason))
      case 93..<96:
        model.rowLimit = Int(random.next() % 6)
        model.recentLimit = Int(random.next() % 7)
        action = "reconfigure rows \(model.rowLimit) recent \(model.recentLimit)"
        change = forest.reconfigure(
          databaseRowLimit: model.rowLimit, recentLimit: model.recentLimit, structure: structure)
        if model.recent.count > model.recentLimit {
          model.recent.removeLast(model.recent.count - model.recentLimit)
        }
      default:
        action = "restore from the rows"
        do {
          let restored = try OfflineForest.restore(
            actions: Array(forest.actions).shuffled(using: &random), recentOrder: forest.recentOrder,
            databaseRowLimit: model.rowLimit, recentLimit: model.recentLimit)
          #expect(restored.change.isEmpty, "step \(step): \(action)")
          forest = restored.forest
        } catch {
          Issue.record("step \(step): restore refused the forest's own rows: \(error)")
        }
      }

      let context = "seed \(seed) step \(step): \(action)"
      if let violation = forest.invariantViolation() {
        Issue.record("\(context): \(violation)")
        return
      }
      let expected = model.rows(structure)
      let actual = forest.actions
      guard actual == expected else {
        Issue.record(
          "\(context): extra rows \(actual.subtracting(expected)), missing rows \(expected.subtracting(actual))"
        )
        return
      }
      let problems = apply(change, to: &mirror)
      #expect(problems.isEmpty, "\(context): \(problems)")
      #expect(mirror == actual, "\(context): the change is not the diff of the rows")
      let after = Set(expected.map(\.impacted))
      #expect(forest.offlinePages == after, "\(context)")
      #expect(forest.offlinePageCount == after.count, "\(context)")
      #expect(change.addedPages.count == Set(change.addedPages).count, "\(context): \(change.addedPages)")
      #expect(Set(change.addedPages) == after.subtracting(before), "\(context): added \(change.addedPages)")
      #expect(
        change.removedPages.count == Set(change.removedPages).count, "\(context): \(change.removedPages)")
      #expect(
        Set(change.removedPages) == before.subtracting(after), "\(context): removed \(change.removedPages)")
      #expect(forest.recentOrder == model.recent, "\(context)")
      let probe = pick(Self.pages)
      let reasons = forest.reasons(for: probe)
      #expect(reasons.count == Set(reasons).count, "\(context)")
      #expect(Set(reasons) == expected.filter { $0.impacted == probe }, "\(context): why \(probe)")
      #expect(forest.isOffline(probe) == after.contains(probe), "\(context)")

      // A write that failed: undoing the change gives back the forest before it (OfflineSet's commit).
      var reverted = forest
      reverted.revert(change, to: previous.settings)
      #expect(reverted.invariantViolation() == nil, "\(context): reverted")
      #expect(reverted.actions == previous.forest.actions, "\(context): reverted")
      #expect(reverted.offlinePages == previous.forest.offlinePages, "\(context): reverted")
      #expect(reverted.settings == previous.settings, "\(context): reverted")
      #expect(reverted.reasons(for: probe) == previous.forest.reasons(for: probe), "\(context): reverted")
    }
  }
}
