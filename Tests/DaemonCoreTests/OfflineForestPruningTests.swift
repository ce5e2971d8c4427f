import DaemonCore
import DaemonCoreTestKit
import SyncModel
import Testing

/// Refetched pages whose children changed: the forest deletes exactly the rows that no longer belong, with their
/// descendants in that tree, adds the new ones, and reports only pages that lost (gained) their last (first) row.
@Suite struct OfflineForestPruningTests {
  /// D (toggled) has rows X and Y; X has an inline database E with row Z; Z is also a favorite.
  static func forestWithNestedRows() -> (OfflineForest, MapStructure) {
    var structure = MapStructure()
    structure.database("D", rows: ["X", "Y"])
    structure.page("X", inline: ["E"])
    structure.page("Y")
    structure.database("E", rows: ["Z"])
    structure.page("Z")
    var forest = OfflineForest()
    _ = forest.add(.toggled, origin: id("D"), structure: structure)
    _ = forest.add(.favorite, origin: id("Z"), structure: structure)
    return (forest, structure)
  }

  static let rowsUnderX = [
    row("D", "X", "E", .toggled), row("D", "D", "X", .toggled), row("D", "E", "Z", .toggled),
  ]

  @Test func deletedRowTakesItsDescendantsRows() {
    var (forest, structure) = Self.forestWithNestedRows()
    structure.rows[id("D")] = ids("Y")
    structure.kinds[id("X")] = nil
    let change = forest.refresh(id("D"), structure: structure)
    #expect(change == ForestChange(deletedActions: Self.rowsUnderX, removedPages: ids("E", "X")))
    #expect(forest.offlinePages == Set(ids("D", "Y", "Z")))
    #expect(forest.reasons(for: id("Z")) == [row("Z", nil, "Z", .favorite)])
    #expect(forest.invariantViolation() == nil)
  }

  @Test func rowThatLeftTheViewTakesItsDescendantsRows() {
    var (forest, structure) = Self.forestWithNestedRows()
    // A filter now hides X; X itself is still known locally.
    structure.rows[id("D")] = ids("Y")
    let change = forest.refresh(id("D"), structure: structure)
    #expect(change == ForestChange(deletedActions: Self.rowsUnderX, removedPages: ids("E", "X")))

    // The filter is lifted: X and what it holds come back, parents first.
    structure.rows[id("D")] = ids("X", "Y")
    let back = forest.refresh(id("D"), structure: structure)
    #expect(
      back
        == ForestChange(
          insertedActions: [
            row("D", "D", "X", .toggled), row("D", "X", "E", .toggled), row("D", "E", "Z", .toggled),
          ],
          addedPages: ids("X", "E")))
    #expect(forest.invariantViolation() == nil)
  }

  @Test func removedInlineDatabaseTakesItsRows() {
    var (forest, structure) = Self.forestWithNestedRows()
    structure.inline[id("X")] = []
    // X is refetched, not D: the tree through X is walked from its origin D.
    let change = forest.refresh(id("X"), structure: structure)
    #expect(
      change
        == ForestChange(
          deletedActions: [row("D", "X", "E", .toggled), row("D", "E", "Z", .toggled)], removedPages: ids("E")
        ))
    #expect(forest.invariantViolation() == nil)
  }

  /// A refetch that finds new children extends every tree through the page, each with its own origin and type.
  @Test func newChildrenExtendEveryTreeThroughThePage() {
    var (forest, structure) = Self.forestWithNestedRows()
    _ = forest.visit(id("X"), structure: structure)
    structure.page("X", inline: ["E", "F"])
    structure.database("F", rows: ["Z", "W"])
    let change = forest.refresh(id("X"), structure: structure)
    #expect(
      change
        == ForestChange(
          insertedActions: [
            row("D", "X", "F", .toggled), row("D", "F", "W", .toggled), row("X", "X", "F", .recent),
            row("X", "F", "W", .recent),
          ], addedPages: ids("F", "W")))
    // Z was already reached through E: it keeps that row, once per tree.
    #expect(forest.reasons(for: id("Z")).count == 3)
    #expect(forest.invariantViolation() == nil)
  }

  /// A page not downloaded yet is offline on its own row; its descendants come with the refresh that finds it.
  @Test func unknownPageGetsItsDescendantsWhenKnown() {
    var structure = MapStructure()
    // Lists left from an older copy do not count while the page itself is unknown.
    structure.rows[id("U")] = ids("old")
    structure.inline[id("U")] = ids("older")
    var forest = OfflineForest()
    let change = forest.add(.toggled, origin: id("U"), structure: structure)
    #expect(change == ForestChange(insertedActions: [row("U", nil, "U", .toggled)], addedPages: ids("U")))
    structure.database("U", rows: ["R"])
    let known = forest.refresh(id("U"), structure: structure)
    #expect(known == ForestChange(insertedActions: [row("U", "U", "R", .toggled)], addedPages: ids("R")))
  }

  /// A page moved within a tree keeps its place in the offline set: its row is replaced (delete before insert),
  /// and no page is reported.
  @Test func pageMovedWithinATreeChangesItsFrom() {
    var structure = MapStructure()
    structure.page("P", inline: ["A", "B"])
    structure.database("A", rows: ["X"])
    structure.database("B")
    var forest = OfflineForest()
    _ = forest.add(.toggled, origin: id("P"), structure: structure)
    structure.rows[id("A")] = []
    structure.rows[id("B")] = ids("X")
    let change = forest.refresh(ids("A", "B"), structure: structure)
    #expect(
      change
        == ForestChange(
          insertedActions: [row("P", "B", "X", .toggled)], deletedActions: [row("P", "A", "X", .toggled)]))
    #expect(forest.invariantViolation() == nil)
  }

  /// Stale local data can make the structure cyclic (a page whose inline database lists that page as a row):
  /// the walk takes each page once and stops.
  @Test func cyclesInTheStructureDoNotLoop() {
    var structure = MapStructure()
    structure.page("P", inline: ["D"])
    structure.database("D", rows: ["P", "Q"])
    structure.page("Q", inline: ["D", "Q"])
    structure.lookupBudget = 1_000
    var forest = OfflineForest()
    let change = forest.add(.toggled, origin: id("P"), structure: structure)
    #expect(
      change.insertedActions == [
        row("P", nil, "P", .toggled), row("P", "P", "D", .toggled), row("P", "D", "Q", .toggled),
      ])
    let fromD = forest.add(.favorite, origin: id("D"), structure: structure)
    #expect(
      fromD.insertedActions == [
        row("D", nil, "D", .favorite), row("D", "D", "P", .favorite), row("D", "D", "Q", .favorite),
      ])
    #expect(forest.refresh(id("Q"), structure: structure).isEmpty)
    #expect(forest.invariantViolation() == nil)
    #expect(structure.lookups.pages.count < 20)
  }

  /// A refresh reads only the trees through the refetched page, however large the forest.
  @Test func refreshWalksOnlyTheTreesThroughThePage() {
    var structure = MapStructure()
    var forest = OfflineForest()
    for n in 0..<2_000 {
      structure.page("p\(n)", inline: ["d\(n)"])
      structure.database("d\(n)", rows: ["r\(n)"])
      _ = forest.add(.toggled, origin: id("p\(n)"), structure: structure)
    }
    #expect(forest.offlinePageCount == 6_000)
    structure.lookups.pages = []
    structure.rows[id("d7")] = []
    let change = forest.refresh(id("d7"), structure: structure)
    #expect(
      change == ForestChange(deletedActions: [row("p7", "d7", "r7", .toggled)], removedPages: ids("r7")))
    #expect(structure.lookups.pages == ids("p7", "d7"))
    #expect(forest.invariantViolation() == nil)
  }
}
