import SyncModel

/// Why `OfflineForest.restore` refused the rows read back from the local store.
public enum OfflineForestError: Error, Equatable, Sendable, CustomStringConvertible {
  /// `from` is nil on a row that is not the origin's own, or set on the origin's own row.
  case malformedRow(OfflineAction)
  /// Two rows of one tree (origin and type) impact the same page.
  case duplicateRow(OfflineAction)
  /// A tree has rows but none for the origin itself.
  case missingOriginRow(origin: EntityID, type: OfflineReason)
  /// A row's chain of `from` pages does not lead back to its origin within its tree.
  case detachedRow(OfflineAction)
  /// The recent order lists a page twice, or does not name exactly the origins of `recent` rows.
  case recentOrderMismatch

  public var description: String {
    switch self {
    case .malformedRow(let row):
      "offline_action row \(row): from must be null exactly for the origin's own row"
    case .duplicateRow(let row): "offline_action row \(row): its page already has a row in that tree"
    case .missingOriginRow(let origin, let type):
      "offline tree (\(origin), \(type.rawValue)) has no origin row"
    case .detachedRow(let row): "offline_action row \(row): its from chain does not lead back to the origin"
    case .recentOrderMismatch: "the recent order does not match the origins of the recent rows"
    }
  }
}
