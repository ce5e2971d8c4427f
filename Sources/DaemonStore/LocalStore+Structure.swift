import DaemonCore
import SQLiteStore
import SyncModel

/// The local store is the structure `OfflineForest` walks: kinds, inline databases and rows in view of the
/// local copies (`local_page`), as of the current transaction.
///
/// `OfflineStructure`'s methods cannot throw. Answering a failed read with "unknown" is not harmless: a walk
/// that sees no inline databases or no rows computes a change that removes them from the offline set. So each
/// method records the first error it hits (and answers nil or []), and `readingStructure` throws it after the
/// operation: run forest operations through it, and write the change only if it returns; if it throws (or the
/// write does), revert the forest by the change (what `OfflineSet` does), or work on a copy and drop it.
///
///     let before = forest.settings
///     var change = ForestChange()
///     do {
///       try store.readingStructure { change = forest.refresh(page, structure: $0) }
///       try store.applyForestChange(change, recentOrder: forest.recentOrder)
///     } catch {
///       forest.revert(change, to: before)
///     }
///
/// Called directly (outside `readingStructure`), a failed read answers nil or []; the error is dropped at the
/// next `readingStructure`.
extension LocalStore: OfflineStructure {
  /// The page's kind; nil when no local copy is stored, or the copy is deleted (a deleted page or database has
  /// no descendants).
  public func kind(of page: EntityID) -> PageKind? {
    recordingStructureError(nil) {
      guard
        case .text(let text)? = try connection.query(
          "SELECT kind FROM local_page WHERE id = ? AND deleted = 0", [.text(page.rawValue)]
        ).first?.first
      else { return nil }
      guard let kind = PageKind(rawValue: text) else {
        throw LocalStoreError.corruptValue(table: "local_page", column: "kind", value: text)
      }
      return kind
    }
  }

  /// The page's `databases` (its inline databases, in the broker's order), without those whose local copy is
  /// deleted (deleted here and not pushed yet, or deleted in a download the list has not caught up with).
  public func inlineDatabases(of page: EntityID) -> [EntityID] {
    recordingStructureError([]) {
      guard
        let value = try connection.query(
          "SELECT databases FROM local_page WHERE id = ?", [.text(page.rawValue)]
        ).first?.first, value != .null, value != .text("[]")  // most pages hold no database
      else { return [] }
      let databases = try decodeIDs(value, table: "local_page", column: "databases")
      let deleted = Set(
        try connection.query(
          "SELECT id FROM local_page WHERE deleted = 1 AND id IN (SELECT value FROM json_each(?))", [value]
        ).map { try entityID($0[0], table: "local_page", column: "id") })
      return databases.filter { !deleted.contains($0) }
    }
  }

  /// The first `limit` of the database's stored `rows` (its rows in view, in view order); [] when it has none
  /// stored.
  public func rowsInView(of database: EntityID, limit: Int) -> [EntityID] {
    recordingStructureError([]) {
      guard
        let value = try connection.query(
          "SELECT rows FROM local_page WHERE id = ?", [.text(database.rawValue)]
        ).first?.first, value != .null
      else { return [] }
      return Array(try decodeIDs(value, table: "local_page", column: "rows").prefix(limit))
    }
  }

  /// Runs `operation` (forest operations given this store as their structure) and throws the first error any of
  /// its structure reads hit; returns the operation's result when every read succeeded. See the extension's
  /// documentation for how to use it with a copy of the forest.
  public func readingStructure<T>(_ operation: (LocalStore) throws -> T) throws -> T {
    structureReadError = nil
    defer { structureReadError = nil }
    // One read transaction for the whole walk: one snapshot, and one WAL read lock rather than one per query
    // (a walk of 10,000 pages made 30,000 fcntl calls).
    let result =
      try connection.isInTransaction
      ? operation(self) : connection.transaction(.deferred) { try operation(self) }
    if let error = structureReadError { throw error }
    return result
  }

  private func recordingStructureError<T>(_ fallback: T, _ read: () throws -> T) -> T {
    do {
      return try read()
    } catch {
      if structureReadError == nil { structureReadError = error }
      return fallback
    }
  }
}
