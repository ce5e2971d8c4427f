import DaemonCore
import DaemonCoreTestKit
import DaemonStore
import EventLoopTestKit
import Logging
import SQLiteStore
import SyncModel
import Testing

@testable import Daemon

/// The offline set: the forest and its rows kept equal, whatever fails, and the local copies no reason keeps
/// dropped.
@Suite struct DaemonOfflineSetTests {
  let file = TemporaryDatabase()
  let logger = Logger(label: "test.offline-set") { _ in SwiftLogNoOpLogHandler() }

  /// The store's `offline_action` rows are the forest's, and the forest is sound.
  func expectAgreement(
    _ set: OfflineSet, _ store: LocalStore, sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    #expect(Set(try store.loadForestRows().actions) == set.forest.actions, sourceLocation: sourceLocation)
    #expect(try store.status().offlinePages == set.offlinePageCount, sourceLocation: sourceLocation)
    #expect(set.forest.invariantViolation() == nil, sourceLocation: sourceLocation)
  }

  @Test func restoringUnderALowerRecentLimitKeepsTheLatestVisitsAndDropsTheOthersCopies() throws {
    defer { file.remove() }
    let store = try LocalStore(path: file.path)
    defer { store.close() }
    try storePages(
      store, [Broker.page("r1", time: 1), Broker.page("r2", time: 1), Broker.page("r3", time: 1)])
    let first = try OfflineSet(store: store, databaseRowLimit: 50, recentLimit: 3, logger: logger)
    for page in ["r1", "r2", "r3"] { _ = try first.changeReason(.recent, origin: id(page), add: true) }
    #expect(first.offlinePages == Set(ids("r1", "r2", "r3")))

    let restored = try OfflineSet(store: store, databaseRowLimit: 50, recentLimit: 1, logger: logger)
    #expect(restored.offlinePages == [id("r3")])
    #expect(restored.forest.recentOrder == [id("r3")])
    try expectAgreement(restored, store)
    #expect(try store.localPage(id("r1")) == nil && store.localPage(id("r2")) == nil)
    #expect(try store.localPage(id("r3")) != nil)
  }

  @Test func aChangeIsWrittenWithTheForestAndAFailedReadOrWriteChangesNeither() throws {
    defer { file.remove() }
    let store = try LocalStore(path: file.path)
    defer { store.close() }
    try storePages(store, [Broker.page("a", time: 1), Broker.database("D", time: 1, rows: ["r1"])])
    let set = try OfflineSet(store: store, databaseRowLimit: 50, recentLimit: 20, logger: logger)
    let added = try set.changeReason(.toggled, origin: id("a"), add: true)
    #expect(added.addedPages == [id("a")] && set.hasReason(.toggled, origin: id("a")))
    try expectAgreement(set, store)
    let before = set.forest.actions

    // A write that fails: the forest keeps its old rows.
    let other = try SQLiteConnection(path: file.path, mode: .readWrite)
    try other.configure()
    try other.execute(
      "CREATE TRIGGER refuse BEFORE INSERT ON offline_action BEGIN SELECT RAISE(ABORT, 'refused'); END", [])
    #expect(throws: (any Error).self) { try set.changeReason(.favorite, origin: id("a"), add: true) }
    #expect(set.forest.actions == before && !set.hasReason(.favorite, origin: id("a")))
    // A visit's recent order goes back too: the forest is changed in place and reverted by the change.
    #expect(throws: (any Error).self) { try set.changeReason(.recent, origin: id("a"), add: true) }
    #expect(set.forest.actions == before && set.forest.recentOrder.isEmpty)
    try expectAgreement(set, store)
    try other.execute("DROP TRIGGER refuse", [])

    // A structure read that fails (a database's rows unreadable): the walk's change is neither kept nor written.
    try other.execute("UPDATE local_page SET rows = 'not JSON' WHERE id = 'D'", [])
    other.close()
    #expect(throws: (any Error).self) { try set.changeReason(.toggled, origin: id("D"), add: true) }
    #expect(set.forest.actions == before && !set.isOffline(id("D")))
    try expectAgreement(set, store)
  }

  @Test func reshapingUnderALowerRowLimitDropsTheRowsBeyondIt() throws {
    defer { file.remove() }
    let store = try LocalStore(path: file.path)
    defer { store.close() }
    try toggleOffline(store, ["D"])
    try storePages(
      store,
      [
        Broker.database("D", time: 1, rows: ["r1", "r2", "r3"]), Broker.page("r1", time: 1),
        Broker.page("r2", time: 1), Broker.page("r3", time: 1),
      ])
    let set = try OfflineSet(store: store, databaseRowLimit: 50, recentLimit: 20, logger: logger)
    #expect(set.offlinePages == Set(ids("D", "r1", "r2", "r3")))
    let change = try set.reshape(databaseRowLimit: 1, recentLimit: 20)
    #expect(change.removedPages.sorted() == ids("r2", "r3") && change.addedPages.isEmpty)
    try expectAgreement(set, store)
    #expect(try store.localPage(id("r2")) == nil && store.localPage(id("r1")) != nil)
  }

  @Test func pruningDropsTheCopiesOfFetchedPagesThatNoReasonKeeps() throws {
    defer { file.remove() }
    let store = try LocalStore(path: file.path)
    defer { store.close() }
    try toggleOffline(store, ["a"])
    try storePages(store, [Broker.page("a", time: 1), Broker.page("read", time: 1)])
    let set = try OfflineSet(store: store, databaseRowLimit: 50, recentLimit: 20, logger: logger)
    let change = set.prune(afterFetching: ids("a", "read"))
    #expect(change.isEmpty)
    #expect(try store.localPage(id("read")) == nil, "read through, not offline: no copy kept")
    #expect(try store.localPage(id("a")) != nil)
  }
}
