import DaemonCore
import SyncModel

/// An id from a literal the tests know to be valid.
func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

/// The local store's structure as plain dictionaries, editable between forest operations. Counts lookups, so
/// tests can see which pages an operation read.
struct MapStructure: OfflineStructure {
  var kinds: [EntityID: PageKind] = [:]
  var inline: [EntityID: [EntityID]] = [:]
  var rows: [EntityID: [EntityID]] = [:]
  /// Every page whose kind was asked, in order (a class so the forest's non-mutating calls can record).
  let lookups = LookupLog()
  /// After this many lookups every page reads as unknown, so a walk that would never end stops, and fails its
  /// test instead of hanging it.
  var lookupBudget = Int.max

  final class LookupLog {
    var pages: [EntityID] = []
  }

  /// A page with inline databases.
  mutating func page(_ page: String, inline databases: [String] = []) {
    kinds[id(page)] = .page
    inline[id(page)] = databases.map(id)
  }

  /// A database with rows in view.
  mutating func database(_ database: String, rows inView: [String] = []) {
    kinds[id(database)] = .database
    rows[id(database)] = inView.map(id)
  }

  func kind(of page: EntityID) -> PageKind? {
    lookups.pages.append(page)
    return lookups.pages.count > lookupBudget ? nil : kinds[page]
  }
  func inlineDatabases(of page: EntityID) -> [EntityID] { inline[page] ?? [] }
  func rowsInView(of database: EntityID, limit: Int) -> [EntityID] { rows[database] ?? [] }
}

/// A row, written as the tests' tables are: origin, from (nil for the origin's own row), impacted, type.
func row(_ origin: String, _ from: String?, _ impacted: String, _ type: OfflineReason) -> OfflineAction {
  OfflineAction(origin: id(origin), from: from.map(id), impacted: id(impacted), type: type)
}

func ids(_ texts: String...) -> [EntityID] { texts.map(id) }

/// Applies a change to a copy of the rows the way SQLite would, and says what was not minimal: a deleted row that
/// was not there, an inserted row that already was, a row both deleted and inserted.
func apply(_ change: ForestChange, to rows: inout Set<OfflineAction>) -> [String] {
  var problems: [String] = []
  for both in Set(change.insertedActions).intersection(change.deletedActions) {
    problems.append("both deleted and inserted \(both)")
  }
  for deleted in change.deletedActions where rows.remove(deleted) == nil {
    problems.append("deleted \(deleted), which was not there")
  }
  for inserted in change.insertedActions where !rows.insert(inserted).inserted {
    problems.append("inserted \(inserted), which was already there")
  }
  return problems
}
