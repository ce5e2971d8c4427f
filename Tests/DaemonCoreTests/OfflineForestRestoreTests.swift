import DaemonCore
import DaemonCoreTestKit
import SyncModel
import Testing

/// Reloading the forest from the store's rows, and changing the limits at run time.
@Suite struct OfflineForestRestoreTests {
  static func sample() -> (OfflineForest, MapStructure) {
    var structure = MapStructure()
    structure.page("P", inline: ["D"])
    structure.database("D", rows: ["X", "Y", "Z"])
    var forest = OfflineForest(databaseRowLimit: 50, recentLimit: 3)
    _ = forest.add(.toggled, origin: id("P"), structure: structure)
    _ = forest.add(.favorite, origin: id("X"), structure: structure)
    for page in ["Y", "D", "Z"] { _ = forest.visit(id(page), structure: structure) }
    return (forest, structure)
  }

  @Test func restoredForestBehavesLikeTheOriginal() throws {
    var (forest, structure) = Self.sample()
    let result = try OfflineForest.restore(
      actions: Array(forest.actions), recentOrder: forest.recentOrder, databaseRowLimit: 50, recentLimit: 3)
    var restored = result.forest
    #expect(result.change.isEmpty)
    #expect(restored.actions == forest.actions)
    #expect(restored.offlinePages == forest.offlinePages)
    #expect(restored.recentOrder == ids("Z", "D", "Y"))
    #expect(restored.invariantViolation() == nil)
    #expect(restored.refreshAll(structure: structure).isEmpty)

    structure.rows[id("D")] = ids("X")
    #expect(restored.refresh(id("D"), structure: structure) == forest.refresh(id("D"), structure: structure))
    #expect(restored.visit(id("Q"), structure: structure) == forest.visit(id("Q"), structure: structure))
  }

  /// Rows written under a larger `recent_limit`: the oldest recents go at once, and their rows are in the change.
  @Test func restoreUnderALowerRecentLimitDropsTheOldest() throws {
    let (forest, _) = Self.sample()
    let (restored, change) = try OfflineForest.restore(
      actions: forest.actions, recentOrder: forest.recentOrder, recentLimit: 1)
    #expect(restored.recentOrder == ids("Z"))
    #expect(
      change
        == ForestChange(
          deletedActions: [
            row("Y", nil, "Y", .recent), row("D", nil, "D", .recent), row("D", "D", "X", .recent),
            row("D", "D", "Y", .recent), row("D", "D", "Z", .recent),
          ]))
    #expect(restored.invariantViolation() == nil)
  }

  @Test func restoreRefusesInconsistentRows() {
    func refusal(_ rows: [OfflineAction], recent: [String] = []) -> OfflineForestError? {
      do {
        _ = try OfflineForest.restore(actions: rows, recentOrder: recent.map(id))
        return nil
      } catch {
        return error
      }
    }
    let root = row("D", nil, "D", .toggled)
    #expect(refusal([root, row("D", nil, "X", .toggled)]) == .malformedRow(row("D", nil, "X", .toggled)))
    #expect(refusal([row("D", "P", "D", .toggled)]) == .malformedRow(row("D", "P", "D", .toggled)))
    #expect(refusal([root, root]) == .duplicateRow(root))
    #expect(
      refusal([root, row("D", "D", "X", .toggled), row("D", "E", "X", .toggled)])
        == .duplicateRow(row("D", "E", "X", .toggled)))
    #expect(refusal([row("D", "D", "X", .toggled)]) == .missingOriginRow(origin: id("D"), type: .toggled))
    #expect(refusal([root, row("D", "Q", "X", .toggled)]) == .detachedRow(row("D", "Q", "X", .toggled)))
    #expect(
      refusal([root, row("D", "Y", "X", .toggled), row("D", "X", "Y", .toggled)])
        == .detachedRow(row("D", "Y", "X", .toggled)))
    #expect(refusal([row("A", nil, "A", .recent)]) == .recentOrderMismatch)
    #expect(refusal([row("A", nil, "A", .recent)], recent: ["A", "A"]) == .recentOrderMismatch)
    #expect(refusal([root], recent: ["D"]) == .recentOrderMismatch)
    #expect(refusal([root, row("D", "D", "X", .toggled)]) == nil)
  }

  @Test func reconfigureAppliesNewLimits() {
    var (forest, structure) = Self.sample()
    let change = forest.reconfigure(databaseRowLimit: 1, recentLimit: 2, structure: structure)
    #expect(
      change
        == ForestChange(
          deletedActions: [
            row("Y", nil, "Y", .recent), row("D", "D", "Y", .recent), row("D", "D", "Z", .recent),
            row("P", "D", "Y", .toggled), row("P", "D", "Z", .toggled),
          ], removedPages: ids("Y")))
    #expect(forest.recentOrder == ids("Z", "D"))
    #expect(forest.databaseRowLimit == 1 && forest.recentLimit == 2)
    // Z's own recent tree stays: a limit on rows in view does not drop an origin.
    #expect(forest.offlinePages == Set(ids("P", "D", "X", "Z")))
    #expect(forest.invariantViolation() == nil)
    #expect(forest.reconfigure(databaseRowLimit: 1, recentLimit: 2, structure: structure).isEmpty)
  }
}
