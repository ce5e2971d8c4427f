import DaemonCore
import RichText
import SQLiteStore
import SyncModel

/// A page as the local store holds it: what `GET /v1/pages/ID` and `pagesync show` answer from (the daemon adds
/// `source` and decides whether a page that is not complete offline may be shown).
public struct LocalPage: Hashable, Sendable {
  /// Whether the local copy matches the broker's, as far as this device knows.
  public enum SyncStatus: String, Hashable, Sendable {
    /// No unsent mutation targets the page.
    case synced
    /// The page holds edits made here that the broker has not acknowledged yet.
    case pending
  }

  public var id: EntityID
  /// The page's workspace; nil for a page made here and not downloaded since (the broker decides it).
  public var workspace: EntityID?
  public var kind: PageKind
  /// A page, a database (the page is a row), or nil at top level.
  public var parent: EntityID?
  public var title: String
  /// Deleted pages keep their copy until the daemon drops it, so the deletion can be shown.
  public var deleted: Bool
  public var properties: [String: PropertyValue]
  /// Live blocks, in position order.
  public var blocks: [LocalBlock]
  /// The databases inline in the page, in creation order (empty for none).
  public var databases: [EntityID]
  /// For a database: its current view (nil for a page).
  public var view: ViewState?
  /// For a database: its rows in view, in view order; nil for a page, or a database whose rows were never
  /// downloaded.
  public var rows: [EntityID]?
  /// The broker's `lastUpdatedTime` of the copy; 0 for a page made here and not downloaded since.
  public var lastUpdatedTime: UInt64
  public var syncStatus: SyncStatus

  public init(
    id: EntityID, workspace: EntityID?, kind: PageKind, parent: EntityID?, title: String, deleted: Bool,
    properties: [String: PropertyValue], blocks: [LocalBlock], databases: [EntityID], view: ViewState?,
    rows: [EntityID]?, lastUpdatedTime: UInt64, syncStatus: SyncStatus
  ) {
    self.id = id
    self.workspace = workspace
    self.kind = kind
    self.parent = parent
    self.title = title
    self.deleted = deleted
    self.properties = properties
    self.blocks = blocks
    self.databases = databases
    self.view = view
    self.rows = rows
    self.lastUpdatedTime = lastUpdatedTime
    self.syncStatus = syncStatus
  }
}

/// One live block of a local page (its position only orders the page's blocks, so it is not shown).
public struct LocalBlock: Hashable, Sendable {
  public var id: EntityID
  /// `text`, `heading`, `todo`, `child_page`, `child_database`, or another `[a-z_]{1,32}`.
  public var type: String
  public var text: String
  /// The marks over `text`, sorted by start then type.
  public var marks: [TextMark]
  public var attributes: [String: String]

  public init(id: EntityID, type: String, text: String, marks: [TextMark] = [], attributes: [String: String])
  {
    self.id = id
    self.type = type
    self.text = text
    self.marks = marks
    self.attributes = attributes
  }
}

extension LocalStore {
  /// The local copy of a page with its live blocks, nil if there is none. Reads what is stored, complete or not:
  /// the caller decides whether a page that is not complete offline may be shown (`offlineEntry`).
  public func localPage(_ id: EntityID) throws -> LocalPage? {
    try connection.transaction(.deferred) {
      let table = "local_page"
      let key = SQLiteValue.text(id.rawValue)
      guard
        let row = try connection.query(
          """
          SELECT workspace, kind, parent, title, deleted, properties, databases, view, rows, last_updated,
            sync_status
          FROM local_page WHERE id = ?
          """, [key]
        ).first
      else { return nil }
      guard case .text(let kindText) = row[1], let kind = PageKind(rawValue: kindText) else {
        throw LocalStoreError.corruptValue(table: table, column: "kind", value: "\(row[1])")
      }
      guard case .text(let title) = row[3], case .integer(let deleted) = row[4] else {
        throw LocalStoreError.corruptValue(
          table: table, column: "title, deleted", value: "\(row[3]), \(row[4])")
      }
      guard case .integer(let lastUpdated) = row[9], lastUpdated >= 0 else {
        throw LocalStoreError.corruptValue(table: table, column: "last_updated", value: "\(row[9])")
      }
      guard case .text(let statusText) = row[10], let status = LocalPage.SyncStatus(rawValue: statusText)
      else {
        throw LocalStoreError.corruptValue(table: table, column: "sync_status", value: "\(row[10])")
      }
      func optional<T: Decodable>(_ type: T.Type, _ value: SQLiteValue, _ column: String) throws -> T? {
        value == .null ? nil : try decode(type, value, table: table, column: column)
      }
      let blocks = try connection.query(
        """
        SELECT id, type, text, attributes, marks FROM local_block WHERE page_id = ? AND deleted = 0
        ORDER BY position, id
        """,
        [key]
      ).map { block in
        guard case .text(let type) = block[1], case .text(let text) = block[2] else {
          throw LocalStoreError.corruptValue(table: "local_block", column: "type, text", value: "\(block)")
        }
        return LocalBlock(
          id: try entityID(block[0], table: "local_block", column: "id"), type: type, text: text,
          marks: try decode([TextMark].self, block[4], table: "local_block", column: "marks"),
          attributes: try decode([String: String].self, block[3], table: "local_block", column: "attributes"))
      }
      return LocalPage(
        id: id, workspace: try optionalEntityID(row[0], table: table, column: "workspace"), kind: kind,
        parent: try optionalEntityID(row[2], table: table, column: "parent"), title: title,
        deleted: deleted != 0,
        properties: try decode([String: PropertyValue].self, row[5], table: table, column: "properties"),
        blocks: blocks, databases: try optional([EntityID].self, row[6], "databases") ?? [],
        view: try optional(ViewState.self, row[7], "view"),
        rows: try optional([EntityID].self, row[8], "rows"),
        lastUpdatedTime: UInt64(lastUpdated), syncStatus: status)
    }
  }

  /// The page a live local block belongs to, nil if no such block is stored here: how the daemon finds the page
  /// a block action targets (`PATCH /v1/blocks/ID`), since a mutation names the block's page.
  public func pageOfBlock(_ block: EntityID) throws -> EntityID? {
    guard
      let value = try connection.query(
        "SELECT page_id FROM local_block WHERE id = ? AND deleted = 0", [.text(block.rawValue)]
      ).first?.first
    else { return nil }
    return try entityID(value, table: "local_block", column: "page_id")
  }

  /// Whether a local copy of the page is stored (downloaded, or made or edited here), deleted or not: offline,
  /// only such pages can be edited (docs/protocol.md, "Availability").
  public func hasLocalCopy(_ page: EntityID) throws -> Bool {
    try !connection.query("SELECT 1 FROM local_page WHERE id = ?", [.text(page.rawValue)]).isEmpty
  }
}
