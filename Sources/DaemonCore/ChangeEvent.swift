import SyncModel

/// One event of the daemon's change stream (`GET /v1/events`, `pagesync watch`; docs/protocol.md, "The change
/// stream"). Emitted only after what it reports is committed to the local store.
public enum ChangeEvent: Equatable, Sendable {
  /// Where a page's new local copy came from.
  public enum Source: String, Sendable {
    /// An edit made on this device.
    case local
    /// A download from the broker.
    case remote
  }

  /// A page's local copy changed: a local edit committed, or a download stored. `lastDownloadedTimestamp` is the
  /// broker's `lastUpdatedTime` of the newest download stored (nil: never downloaded); `deleted` when the page is
  /// gone (deleted here, or gone from the broker).
  case page(id: EntityID, lastDownloadedTimestamp: UInt64?, source: Source, deleted: Bool = false)
  /// A page entered (`available`) or left the offline set; `missing` when it left because the broker says it
  /// does not exist.
  case offline(id: EntityID, available: Bool, missing: Bool = false)
  /// The sync state changed: the machine's state, whether the device stream is open, the queue's length.
  case sync(state: String, connected: Bool, pendingMutations: Int)
  /// The broker rejected a mutation; it is kept for recovery (`pagesync conflicts`).
  case conflict(mutationId: UInt64, page: EntityID, reason: String)
  /// Events were lost to this reader: re-read what is shown.
  case reset(reason: String)

  /// The coalescing key: a reader behind gets only the newest event of each key. A rejection and a reset have
  /// none (each is news of its own).
  public var key: ChangeEventKey? {
    switch self {
    case .page(let id, _, _, _): .page(id)
    case .offline(let id, _, _): .offline(id)
    case .sync: .sync
    case .conflict, .reset: nil
    }
  }

  /// The event's name in the stream (`event:` and the JSON's `type`).
  public var type: String {
    switch self {
    case .page: "page"
    case .offline: "offline"
    case .sync: "sync"
    case .conflict: "conflict"
    case .reset: "reset"
    }
  }
}

/// What `ChangeEvent`s coalesce by.
public enum ChangeEventKey: Hashable, Sendable {
  case page(EntityID)
  case offline(EntityID)
  case sync
}
