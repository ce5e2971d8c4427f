import DaemonCore
import DaemonCoreTestKit
import SyncModel
import Testing

@Suite struct RebaseDecisionTests {
  private func at(_ page: String, parent: String?, deleted: Bool = false) -> Rebase.Placement {
    Rebase.Placement(id: id(page), parent: parent.map(id), deleted: deleted)
  }

  @Test func aDatabaseMadeOrMovedHereIsAppendedOnceAndTheBrokersOrderStays() {
    let listed = ids("d1", "d2")
    let edited = [at("d3", parent: "P"), at("d2", parent: "P"), at("d3", parent: "P")]
    #expect(Rebase.inlineDatabases(of: id("P"), listed: listed, edited: edited) == ids("d1", "d2", "d3"))
  }

  @Test func aDatabaseDeletedOrMovedAwayHereLeavesTheList() {
    let listed = ids("d1", "d2", "d3")
    let edited = [at("d1", parent: "P", deleted: true), at("d3", parent: "Q")]
    #expect(Rebase.inlineDatabases(of: id("P"), listed: listed, edited: edited) == ids("d2"))
    #expect(Rebase.inlineDatabases(of: id("P"), listed: [], edited: []) == [])
  }

  @Test func rowsAreRecomputedOnlyWhenEveryRowIsKnownHere() {
    let filtered = ViewState(filter: ViewFilter(property: "s", value: .string("x")))
    let stored = ids("r1", "r2")
    #expect(Rebase.canRecomputeRows(neverDownloaded: true, viewBefore: filtered, stored: nil, known: []))
    #expect(
      Rebase.canRecomputeRows(
        neverDownloaded: false, viewBefore: ViewState(), stored: stored, known: Set(stored)))
    // A row without a local copy, a filter (rows outside the view are not listed), no list at all: not exact.
    #expect(
      !Rebase.canRecomputeRows(
        neverDownloaded: false, viewBefore: ViewState(), stored: stored, known: [id("r1")]))
    #expect(
      !Rebase.canRecomputeRows(
        neverDownloaded: false, viewBefore: filtered, stored: stored, known: Set(stored)))
    #expect(!Rebase.canRecomputeRows(neverDownloaded: false, viewBefore: ViewState(), stored: nil, known: []))
  }

  @Test func otherwiseOnlyRowsDeletedOrMovedOutHereLeaveTheList() {
    let copies = [
      id("r1"): at("r1", parent: "D"), id("r2"): at("r2", parent: "D", deleted: true),
      id("r3"): at("r3", parent: "E"),
    ]
    let kept = Rebase.rowsStillIn(id("D"), stored: ids("r4", "r3", "r2", "r1"), copies: copies)
    #expect(kept == ids("r4", "r1"))
  }
}
