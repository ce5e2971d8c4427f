/// Why the broker refused one mutation. The code is stable on the wire and never reused; the catalogue is
/// documented in docs/protocol.md. A rejection concerns that mutation's page only.
public struct RejectionReason: Hashable, Sendable, Codable, CustomStringConvertible {
  public var code: Int
  public var name: String

  public init(code: Int, name: String) {
    self.code = code
    self.name = name
  }

  public var description: String { "\(name) (\(code))" }

  /// The target page (or its database, parent or block) does not exist.
  public static let unknownPage = RejectionReason(code: 1, name: "unknown_page")
  /// The page belongs to a workspace the client may not write.
  public static let forbidden = RejectionReason(code: 2, name: "forbidden")
  /// A value breaks a rule (empty property name, bad view sort, non-finite number, ...).
  public static let invalidValue = RejectionReason(code: 3, name: "invalid_value")
  /// A title, text, property, list or batch is larger than the limits allow.
  public static let tooLarge = RejectionReason(code: 4, name: "too_large")
  /// The page was deleted.
  public static let pageDeleted = RejectionReason(code: 5, name: "page_deleted")
  /// A create names an id that is already taken by another entity.
  public static let alreadyExists = RejectionReason(code: 6, name: "already_exists")
  /// A move would make a page its own ancestor, or a parent is of the wrong kind.
  public static let invalidParent = RejectionReason(code: 7, name: "invalid_parent")
  /// A database action on a page that is not a database.
  public static let notADatabase = RejectionReason(code: 8, name: "not_a_database")
  /// The block does not exist on that page.
  public static let unknownBlock = RejectionReason(code: 9, name: "unknown_block")
  /// The mutation's time is further ahead of the broker's clock than `[limits] clock_ahead_seconds`: a time
  /// far in the future would win every last-writer-wins field it touches for as long.
  public static let clockAhead = RejectionReason(code: 10, name: "clock_ahead")
  /// A create or move would put a page (or, for a move, the deepest page of the moved subtree) deeper than
  /// `[limits] tree_depth` pages from the top of its tree, counting itself: every walk up or down a tree stays
  /// bounded, and so does the work of a batch.
  public static let tooDeep = RejectionReason(code: 11, name: "too_deep")
  /// The mutation's id is at or below the client's last applied id, and the broker applied (or rejected) another
  /// mutation under that id: two copies of one device's store (a backup restored, a cloned image) numbered
  /// different edits alike. Nothing of it was applied and its id is not consumed; the client sends it again under
  /// a new client id (docs/operations.md, "A restored or cloned device"). In a batch, every mutation after the
  /// first such one is answered the same, but a re-send the broker has with the same content (`duplicate`).
  public static let idReused = RejectionReason(code: 12, name: "id_reused")

  /// Every reason, by code.
  public static let all: [RejectionReason] = [
    .unknownPage, .forbidden, .invalidValue, .tooLarge, .pageDeleted, .alreadyExists, .invalidParent,
    .notADatabase, .unknownBlock, .clockAhead, .tooDeep, .idReused,
  ]
}
