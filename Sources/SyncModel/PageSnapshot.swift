import RichText

// Pages as they travel: what the broker holds and sends (a whole page, or a delta since a time), and what the
// device stores. Shared by both stores and the protocol, so neither side depends on the other's code.

/// A page as the broker holds it, in full: what a client stores when it downloads the page.
public struct PageSnapshot: Hashable, Sendable, Codable {
  public var id: EntityID
  public var workspace: EntityID
  /// `page` or `database`.
  public var kind: String
  public var parent: EntityID?
  public var title: String
  public var deleted: Bool
  public var properties: [String: PropertyValue]
  /// Live blocks, in order.
  public var blocks: [BlockState]
  /// Databases whose parent is this page (inline in it), in creation order. Always in a whole page; in a delta's
  /// header only when they changed, so that an empty list always means "none" and never "unchanged".
  public var databases: [EntityID]?
  /// For a database: its current view.
  public var view: ViewState?
  /// For a database: its rows in view, in view order.
  public var rows: [EntityID]?
  /// The sequence of the last batch that changed the page.
  public var lastUpdatedTime: UInt64

  public init(
    id: EntityID, workspace: EntityID, kind: String, parent: EntityID?, title: String, deleted: Bool,
    properties: [String: PropertyValue], blocks: [BlockState], databases: [EntityID]?, view: ViewState?,
    rows: [EntityID]?, lastUpdatedTime: UInt64
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
  }
}

/// One block of a page.
public struct BlockState: Hashable, Sendable, Codable {
  public var id: EntityID
  public var type: String
  /// The visible text (what the CRDT state below renders to).
  public var text: String
  /// The marks in force over `text`, sorted by start then type (absent from an older broker: none).
  public var marks: [TextMark]?
  /// The text's CRDT: in a whole page, the block's whole state (`TextDocument.encoded()`); in a delta, the
  /// update since the delta's `since` (what a device that has everything up to then lacks). Absent from an older
  /// broker, and for a deleted block.
  public var crdt: TextOps?
  public var attributes: [String: String]
  /// Orders the page's blocks (ascending); only the order is meaningful.
  public var position: Double
  /// A deleted block appears only in deltas, so the client removes it.
  public var deleted: Bool

  public init(
    id: EntityID, type: String, text: String, attributes: [String: String], position: Double, deleted: Bool,
    marks: [TextMark]? = nil, crdt: TextOps? = nil
  ) {
    self.id = id
    self.type = type
    self.text = text
    self.marks = marks
    self.crdt = crdt
    self.attributes = attributes
    self.position = position
    self.deleted = deleted
  }
}

/// A database's current view.
public struct ViewState: Hashable, Sendable, Codable {
  public var filter: ViewFilter?
  public var sort: ViewSort?

  public init(
    filter: ViewFilter? = nil, sort: ViewSort? = nil
  ) {
    self.filter = filter
    self.sort = sort
  }
}

/// What changed in a page since a time: the current value of every field that changed, or the whole page when
/// the change log no longer reaches back that far (`full`).
public struct PageDelta: Hashable, Sendable, Codable {
  public var id: EntityID
  /// The time the delta is relative to.
  public var since: UInt64
  public var lastUpdatedTime: UInt64
  /// True when `page` is a snapshot to replace the client's copy; false when only the fields below changed.
  public var full: Bool
  /// The page's header fields (always present: id, kind, parent, title, deleted) and, when `full`, everything.
  public var page: PageSnapshot
  /// Properties that changed (nil: removed). Empty when `full`.
  public var properties: [String: PropertyValue?]
  /// Blocks that changed, deleted ones included. Empty when `full`.
  public var blocks: [BlockState]

  public init(
    id: EntityID, since: UInt64, lastUpdatedTime: UInt64, full: Bool, page: PageSnapshot,
    properties: [String: PropertyValue?], blocks: [BlockState]
  ) {
    self.id = id
    self.since = since
    self.lastUpdatedTime = lastUpdatedTime
    self.full = full
    self.page = page
    self.properties = properties
    self.blocks = blocks
  }
}
