import DaemonCore
import DaemonCoreTestKit
import SyncModel

/// A row, written as the tests' tables are: origin, from (nil for the origin's own row), impacted, type.
func row(_ origin: String, _ from: String?, _ impacted: String, _ type: OfflineReason) -> OfflineAction {
  OfflineAction(origin: id(origin), from: from.map(id), impacted: id(impacted), type: type)
}

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
