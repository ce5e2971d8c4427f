import SyncModel

/// Why an origin is kept offline: the three kinds of `offline_action.type`.
public enum OfflineReason: String, Sendable, CaseIterable, Comparable {
  /// The user turned on "available offline" for the page or database.
  case toggled
  /// The user favorited it.
  case favorite
  /// The user visited it recently (one of the `recentLimit` most recent visits).
  case recent

  /// Declaration order, so trees are processed and reported in a stable order.
  var rank: Int {
    switch self {
    case .toggled: 0
    case .favorite: 1
    case .recent: 2
    }
  }

  public static func < (lhs: OfflineReason, rhs: OfflineReason) -> Bool { lhs.rank < rhs.rank }
}

/// One reason a page is offline: a row of `offline_action(origin_page_id, from_page_id, impacted_page_id, type)`.
///
/// `impacted` is kept offline because `origin` was toggled, favorited or visited. `from` is the page through which
/// the offline tree reaches `impacted`: the page of an inline database, the database of a row. It is nil exactly
/// for the origin's own row (`impacted == origin`).
public struct OfflineAction: Hashable, Sendable, CustomStringConvertible {
  /// The root of the offline tree: what the user toggled, favorited or visited.
  public var origin: EntityID
  /// The parent of `impacted` in the tree; nil for the origin's own row.
  public var from: EntityID?
  /// The page or database kept offline.
  public var impacted: EntityID
  /// The reason the origin is offline.
  public var type: OfflineReason

  public init(origin: EntityID, from: EntityID?, impacted: EntityID, type: OfflineReason) {
    self.origin = origin
    self.from = from
    self.impacted = impacted
    self.type = type
  }

  public var description: String {
    "(\(origin), \(from?.description ?? "nil"), \(impacted), \(type.rawValue))"
  }
}
