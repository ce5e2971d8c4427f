import SyncModel

/// Why the local store refused a call, or what it found wrong in its own file (a store that fails the checks was
/// not written by this code, or was damaged): reported, never guessed at.
public enum LocalStoreError: Error, Equatable, Sendable, CustomStringConvertible {
  /// A row holds a value this code never writes (table, column, and the value).
  case corruptValue(table: String, column: String, value: String)
  /// A `sync_meta` key that `init` always writes is missing.
  case missingMeta(String)
  /// `recentOrder` names a page that has no `offline_page` row: a recent origin is always offline.
  case recentPageNotOffline(EntityID)
  /// `recordEdit` was given a mutation that breaks a rule on its own (`Mutation.validate()`): the broker would
  /// reject it with this reason, so it is refused before anything is written or queued.
  case invalidMutation(RejectionReason)
  /// A create names a page id that the local store already holds (live or deleted): the broker would reject it
  /// as `already_exists`, so the daemon answers 409 at once.
  case pageExists(EntityID)
  /// An `addBlock` names a block id that the local store already holds: the broker would reject it as
  /// `already_exists`.
  case blockExists(EntityID)
  /// A text edit names a block that is not stored here.
  case unknownBlock(EntityID)
  /// A text edit's positions or mark are wrong (the text's own message: a position outside the text, a link
  /// without a URL, ...).
  case invalidTextEdit(String)
  /// A mark on a block whose text state has not arrived since the upgrade to CRDT text (or whose text shows a
  /// whole-text edit from before it): it can be marked once the broker's state is here.
  case textNotMergeable(EntityID)
  /// A number to store is above what SQLite's signed 64-bit integers hold (what, and the number): a broker's
  /// time or mutation id that no real broker sends. Nothing of the call was stored.
  case numberOutOfRange(String, UInt64)

  public var description: String {
    switch self {
    case .corruptValue(let table, let column, let value):
      "the local store holds an invalid \(table).\(column): \(value.prefix(80))"
    case .missingMeta(let key): "the local store has no sync_meta \(key)"
    case .recentPageNotOffline(let page): "recent page \(page) has no offline_page row"
    case .invalidMutation(let reason): "the edit breaks a rule: \(reason)"
    case .pageExists(let page): "page \(page) already exists"
    case .blockExists(let block): "block \(block) already exists"
    case .unknownBlock(let block): "block \(block) is not stored on this device"
    case .invalidTextEdit(let why): why
    case .textNotMergeable(let block):
      "block \(block) cannot be marked until its text state arrives from the broker (run `pagesync sync`)"
    case .numberOutOfRange(let what, let value): "\(what) \(value) is above 2^63-1: it cannot be stored"
    }
  }
}
