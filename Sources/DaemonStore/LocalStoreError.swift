import SyncModel

/// What the local store found wrong in its own file (a store that fails these was not written by this code, or
/// was damaged): reported, never guessed at.
public enum LocalStoreError: Error, Equatable, Sendable, CustomStringConvertible {
  /// A row holds a value this code never writes (table, column, and the value).
  case corruptValue(table: String, column: String, value: String)
  /// A `sync_meta` key that `init` always writes is missing.
  case missingMeta(String)
  /// `recentOrder` names a page that has no `offline_page` row: a recent origin is always offline.
  case recentPageNotOffline(EntityID)

  public var description: String {
    switch self {
    case .corruptValue(let table, let column, let value):
      "the local store holds an invalid \(table).\(column): \(value.prefix(80))"
    case .missingMeta(let key): "the local store has no sync_meta \(key)"
    case .recentPageNotOffline(let page): "recent page \(page) has no offline_page row"
    }
  }
}
