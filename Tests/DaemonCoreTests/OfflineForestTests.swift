import DaemonCore
import DaemonCoreTestKit
import SyncModel
import Testing

/// Reasons, inheritance, limits and recents, each with the exact rows the store gets.
@Suite struct OfflineForestTests {
  /// The Notion post's example: database D with rows X and Y is toggled; X is also a favorite; toggling D off
  /// keeps X through its favorite row.
  @Test func notionExampleKeepsTheFavoriteRowWhenTheToggleGoes() {
    var structure = MapStructure()
    structure.database("D", rows: ["X", "Y"])
    structure.page("X")
    structure.page("Y")
    var forest = OfflineForest()

    let toggled = forest.add(.toggled, origin: id("D"), structure: structure)
    #expect(
      toggled
        == ForestChange(
          insertedActions: [
            row("D", nil, "D", .toggled), row("D", "D", "X", .toggled), row("D", "D", "Y", .toggled),
          ],
          addedPages: ids("D", "X", "Y")))

    let favorite = forest.add(.favorite, origin: id("X"), structure: structure)
    #expect(favorite == ForestChange(insertedActions: [row("X", nil, "X", .favorite)]))
    #expect(forest.reasons(for: id("X")) == [row("D", "D", "X", .toggled), row("X", nil, "X", .favorite)])

    let off = forest.remove(.toggled, origin: id("D"))
    #expect(
      off
        == ForestChange(
          deletedActions: [
            row("D", nil, "D", .toggled), row("D", "D", "X", .toggled), row("D", "D", "Y", .toggled),
          ],
          removedPages: ids("D", "Y")))
    #expect(forest.actions == [row("X", nil, "X", .favorite)])
    #expect(forest.offlinePages == [id("X")])
    #expect(forest.reasons(for: id("Y")).isEmpty)
    #expect(forest.invariantViolation() == nil)
  }

  /// A page brings its inline databases, a database its rows, a row its own inline databases, and so on; `from`
  /// is always the parent in the tree. A row not downloaded yet is offline without descendants.
  @Test func inheritanceIsRecursiveWithTheTreeParentAsFrom() {
    var structure = MapStructure()
    structure.page("P", inline: ["DB1", "DB2"])
    structure.database("DB1", rows: ["R1", "R2"])
    structure.database("DB2")
    structure.page("R1", inline: ["DB3"])
    structure.database("DB3", rows: ["R3"])
    structure.page("R3")
    // R2 is unknown: not downloaded yet.
    var forest = OfflineForest()

    let change = forest.add(.toggled, origin: id("P"), structure: structure)
    #expect(
      change.insertedActions == [
        row("P", nil, "P", .toggled), row("P", "P", "DB1", .toggled), row("P", "P", "DB2", .toggled),
        row("P", "DB1", "R1", .toggled), row("P", "DB1", "R2", .toggled), row("P", "R1", "DB3", .toggled),
        row("P", "DB3", "R3", .toggled),
      ])
    #expect(change.addedPages == ids("P", "DB1", "DB2", "R1", "R2", "DB3", "R3"))
    #expect(change.deletedActions.isEmpty && change.removedPages.isEmpty)

    // R2 arrives: a database row with an inline database of its own.
    structure.page("R2", inline: ["DB4"])
    structure.database("DB4", rows: ["R4"])
    let arrived = forest.refresh(id("R2"), structure: structure)
    #expect(
      arrived
        == ForestChange(
          insertedActions: [row("P", "R2", "DB4", .toggled), row("P", "DB4", "R4", .toggled)],
          addedPages: ids("DB4", "R4")))
    #expect(forest.invariantViolation() == nil)
  }

  /// Only the first `databaseRowLimit` rows in view are inherited; when the view order changes, a refresh of the
  /// database brings the row that entered the first 50 and drops the one that left.
  @Test func rowLimitFollowsTheViewOrder() {
    var structure = MapStructure()
    let rows = (1...51).map { "r\($0)" }
    structure.database("D", rows: rows)
    var forest = OfflineForest(databaseRowLimit: 50)

    let change = forest.add(.toggled, origin: id("D"), structure: structure)
    #expect(change.insertedActions.count == 51)
    #expect(forest.isOffline(id("r50")))
    #expect(!forest.isOffline(id("r51")))
    #expect(forest.offlinePageCount == 51)

    structure.database("D", rows: ["r51"] + rows.dropLast())
    let reordered = forest.refresh(id("D"), structure: structure)
    #expect(
      reordered
        == ForestChange(
          insertedActions: [row("D", "D", "r51", .toggled)], deletedActions: [row("D", "D", "r50", .toggled)],
          addedPages: ids("r51"), removedPages: ids("r50")))
    #expect(forest.invariantViolation() == nil)
  }

  /// Removing one reason deletes exactly that origin's rows of that type; pages other trees hold stay.
  @Test func removingOneReasonKeepsPagesHeldByOthers() {
    var structure = MapStructure()
    structure.page("P", inline: ["D"])
    structure.database("D", rows: ["X"])
    var forest = OfflineForest()
    _ = forest.add(.toggled, origin: id("P"), structure: structure)
    _ = forest.add(.favorite, origin: id("P"), structure: structure)
    _ = forest.add(.toggled, origin: id("D"), structure: structure)
    #expect(forest.actions.count == 3 + 3 + 2)

    let unfavorite = forest.remove(.favorite, origin: id("P"))
    #expect(
      unfavorite
        == ForestChange(
          deletedActions: [
            row("P", "P", "D", .favorite), row("P", nil, "P", .favorite), row("P", "D", "X", .favorite),
          ]
        ))
    #expect(forest.offlinePages == Set(ids("P", "D", "X")))

    let untoggle = forest.remove(.toggled, origin: id("P"))
    #expect(untoggle.removedPages == ids("P"))
    #expect(untoggle.deletedActions.count == 3)
    #expect(forest.actions == [row("D", nil, "D", .toggled), row("D", "D", "X", .toggled)])
    #expect(forest.reasons(for: id("X")) == [row("D", "D", "X", .toggled)])

    // A reason that is not there removes nothing.
    #expect(forest.remove(.favorite, origin: id("D")).isEmpty)
    #expect(forest.remove(.toggled, origin: id("nowhere")).isEmpty)
    #expect(forest.invariantViolation() == nil)
  }

  /// Visits keep the `recentLimit` most recent origins; visiting again moves a page to the front; the next new
  /// visit drops the oldest one's rows, and its pages only if nothing else holds them.
  @Test func recentVisitsAreAnLRUWithTheLimit() {
    var structure = MapStructure()
    for name in ["A", "B", "C", "E"] { structure.page(name) }
    structure.database("D", rows: ["A", "Y"])
    var forest = OfflineForest(recentLimit: 3)

    for name in ["A", "B", "C"] {
      #expect(forest.visit(id(name), structure: structure).addedPages == ids(name))
    }
    #expect(forest.recentOrder == ids("C", "B", "A"))
    #expect(forest.visit(id("A"), structure: structure).isEmpty)
    #expect(forest.recentOrder == ids("A", "C", "B"))

    // The fourth distinct page drops B, the least recent.
    let fourth = forest.visit(id("D"), structure: structure)
    #expect(
      fourth
        == ForestChange(
          insertedActions: [
            row("D", nil, "D", .recent), row("D", "D", "A", .recent), row("D", "D", "Y", .recent),
          ],
          deletedActions: [row("B", nil, "B", .recent)], addedPages: ids("D", "Y"), removedPages: ids("B")))
    #expect(forest.recentOrder == ids("D", "A", "C"))

    // C is also a favorite: when it falls out of the recents it stays offline.
    _ = forest.add(.favorite, origin: id("C"), structure: structure)
    let fifth = forest.visit(id("E"), structure: structure)
    #expect(
      fifth
        == ForestChange(
          insertedActions: [row("E", nil, "E", .recent)], deletedActions: [row("C", nil, "C", .recent)],
          addedPages: ids("E")))
    #expect(forest.recentOrder == ids("E", "D", "A"))
    #expect(forest.origins(.recent) == ids("A", "D", "E"))

    // Adding `recent` is a visit; removing it forgets the visit.
    #expect(forest.add(.recent, origin: id("A"), structure: structure).isEmpty)
    #expect(forest.recentOrder == ids("A", "E", "D"))
    let forgotten = forest.remove(.recent, origin: id("E"))
    #expect(forgotten == ForestChange(deletedActions: [row("E", nil, "E", .recent)], removedPages: ids("E")))
    #expect(forest.recentOrder == ids("A", "D"))
    #expect(forest.invariantViolation() == nil)

    var none = OfflineForest(recentLimit: 0)
    #expect(none.visit(id("A"), structure: structure).isEmpty)
    #expect(none.recentOrder.isEmpty && none.actions.isEmpty)
  }

  /// The default limits are the design's: 50 rows in view, 20 recents.
  @Test func defaultLimits() {
    var structure = MapStructure()
    let pages = (0..<21).map { "p\($0)" }
    for page in pages { structure.page(page) }
    var forest = OfflineForest()
    #expect(forest.databaseRowLimit == 50 && forest.recentLimit == 20)
    for page in pages { _ = forest.visit(id(page), structure: structure) }
    #expect(forest.recentOrder.count == 20)
    #expect(!forest.isOffline(id("p0")))
    #expect(forest.recentOrder.first == id("p20"))
  }

  /// The same add twice writes nothing the second time; so does a refresh with nothing changed.
  @Test func changesAreMinimal() {
    var structure = MapStructure()
    structure.page("P", inline: ["D"])
    structure.database("D", rows: ["X", "Y"])
    var forest = OfflineForest()
    #expect(!forest.add(.toggled, origin: id("P"), structure: structure).isEmpty)
    #expect(forest.add(.toggled, origin: id("P"), structure: structure).isEmpty)
    #expect(forest.refresh(id("D"), structure: structure).isEmpty)
    #expect(forest.refresh(ids("P", "D", "X", "elsewhere"), structure: structure).isEmpty)
    #expect(forest.refreshAll(structure: structure).isEmpty)
    // A second reason on pages already offline adds rows but no pages.
    let favorite = forest.add(.favorite, origin: id("D"), structure: structure)
    #expect(favorite.insertedActions.count == 3)
    #expect(favorite.addedPages.isEmpty)
  }

  /// `pagesync why`: every row that keeps a page offline, by origin then reason.
  @Test func reasonsListEveryRowForThePage() {
    var structure = MapStructure()
    structure.database("D", rows: ["X"])
    structure.page("X")
    var forest = OfflineForest()
    _ = forest.visit(id("X"), structure: structure)
    _ = forest.add(.favorite, origin: id("X"), structure: structure)
    _ = forest.add(.toggled, origin: id("X"), structure: structure)
    _ = forest.add(.favorite, origin: id("D"), structure: structure)
    #expect(
      forest.reasons(for: id("X")) == [
        row("D", "D", "X", .favorite), row("X", nil, "X", .toggled), row("X", nil, "X", .favorite),
        row("X", nil, "X", .recent),
      ])
    #expect(forest.origins(.favorite) == ids("D", "X"))
  }

  /// A first sync grows one tree by thousands of pages at once (scripts/idle-daemon.py: 5,000 rows a step): the
  /// change holds room for its rows and no more, rather than the next power of two, and never two rooms at once
  /// while it grows.
  @Test func aTreeThatGrowsByThousandsOfPagesHoldsRoomForItsRowsOnly() {
    var structure = MapStructure()
    let databases = (0..<60).map { "d\($0)" }
    structure.page("root", inline: databases)
    for database in databases { structure.database(database, rows: (0..<50).map { "\(database)-r\($0)" }) }
    var forest = OfflineForest()

    let first = forest.add(.toggled, origin: id("root"), structure: MapStructure(kinds: [id("root"): .page]))
    #expect(first.insertedActions.count == 1)
    let grown = forest.refresh(id("root"), structure: structure)
    #expect(grown.insertedActions.count == 60 + 60 * 50)
    #expect(grown.insertedActions.capacity <= grown.insertedActions.count + 1, "room for 4,096 rows")
    #expect(grown.addedPages.count == 60 + 60 * 50)
    #expect(forest.offlinePageCount == 1 + 60 + 60 * 50)
  }
}
