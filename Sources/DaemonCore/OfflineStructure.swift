import SyncModel

/// Whether a page is a plain page or a database (the broker's `kind` column).
public enum PageKind: String, Sendable, CaseIterable {
  /// A page: its inline databases are inherited by its offline trees.
  case page
  /// A database: its first rows in view are inherited by its offline trees.
  case database
}

/// What the daemon's local store knows of the page hierarchy, read by `OfflineForest` while it walks a tree.
///
/// Implementations answer from local data only (no network); the forest calls them synchronously, only for pages
/// of the trees an operation touches, and never keeps the structure.
public protocol OfflineStructure {
  /// The kind of a page known locally; nil if it is not downloaded yet (it is offline, without descendants, until
  /// a later `OfflineForest.refresh` finds it known).
  func kind(of page: EntityID) -> PageKind?
  /// The inline databases of a page (its `child_database` blocks), in block order.
  func inlineDatabases(of page: EntityID) -> [EntityID]
  /// The first `limit` rows in view of a database, in view order. `limit` lets a store stop early
  /// (`LIMIT ?`); returning more is harmless, the forest takes the prefix.
  func rowsInView(of database: EntityID, limit: Int) -> [EntityID]
}
