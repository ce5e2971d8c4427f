/// One named action a client made, as it travels to the broker: not a row image but an intent that the broker
/// re-runs against current state (DESIGN.md, "Writes").
public struct Mutation: Hashable, Sendable {
  /// The client's mutation id: 1, 2, 3, ... with no gaps, per client.
  public var id: UInt64
  /// The page the mutation targets (for a block action, the block's page; for a create, the new page).
  public var page: EntityID
  /// When it was made, on the client's hybrid logical clock.
  public var time: HLCTimestamp
  public var action: MutationAction

  public init(id: UInt64, page: EntityID, time: HLCTimestamp, action: MutationAction) {
    self.id = id
    self.page = page
    self.time = time
    self.action = action
  }
}

/// What a mutation does. Each case names the fields it writes; every written field is a last-writer-wins
/// register on the broker.
public enum MutationAction: Hashable, Sendable {
  /// A page under `parent` (a page, or none for a top-level page).
  case createPage(parent: EntityID?, title: String)
  /// A database under `parent`; with a page parent it is inline in that page.
  case createDatabase(parent: EntityID?, title: String)
  /// A row (a page whose parent is `database`).
  case createRow(database: EntityID, title: String, properties: [String: PropertyValue])
  case setTitle(String)
  /// Sets a property, or removes it when `value` is nil.
  case setProperty(name: String, value: PropertyValue?)
  /// Adds a block after `after` (nil: first).
  case addBlock(block: EntityID, type: String, text: String, after: EntityID?, attributes: [String: String])
  /// Changes a block's text and/or attributes (nil: unchanged). The text is a whole-text replacement from a
  /// client that predates the text CRDT: the broker merges it as the minimal splices against its current text.
  case editBlock(block: EntityID, text: String?, attributes: [String: String]?)
  /// Splices in a block's text: CRDT insert runs (typed by the batch's client) and deleted ranges.
  case spliceText(block: EntityID, ops: TextOps)
  /// Sets or clears marks (bold, link, ...) in a block's text: CRDT mark operations.
  case markText(block: EntityID, ops: TextOps)
  case moveBlock(block: EntityID, after: EntityID?)
  case deleteBlock(block: EntityID)
  /// Moves the page under another parent (nil: top level).
  case movePage(parent: EntityID?)
  case deletePage
  /// Sets the database's current view: an optional filter (property = value) and sort.
  case setView(filter: ViewFilter?, sort: ViewSort?)

  /// The wire name of the action (`type` in JSON).
  public var typeName: String {
    switch self {
    case .createPage: "create_page"
    case .createDatabase: "create_database"
    case .createRow: "create_row"
    case .setTitle: "set_title"
    case .setProperty: "set_property"
    case .addBlock: "add_block"
    case .editBlock: "edit_block"
    case .spliceText: "splice_text"
    case .markText: "mark_text"
    case .moveBlock: "move_block"
    case .deleteBlock: "delete_block"
    case .movePage: "move_page"
    case .deletePage: "delete_page"
    case .setView: "set_view"
    }
  }
}

/// A database view's filter: rows whose `property` equals `value`.
public struct ViewFilter: Hashable, Sendable, Codable {
  public var property: String
  public var value: PropertyValue
  public init(property: String, value: PropertyValue) {
    self.property = property
    self.value = value
  }
}

/// A database view's sort order.
public struct ViewSort: Hashable, Sendable, Codable {
  public var property: String
  public var descending: Bool
  public init(property: String, descending: Bool = false) {
    self.property = property
    self.descending = descending
  }
}

/// Size limits on what one mutation may carry (the broker's `[limits]`).
public struct MutationLimits: Sendable, Equatable {
  public var maxTitleBytes = 1024
  public var maxTextBytes = 64 * 1024
  public var maxNameBytes = 128
  public var maxListItems = 256
  public var maxProperties = 128
  public var maxAttributes = 32
  /// Insert runs, deleted ranges and mark operations in one text mutation (`[limits] text_ops_per_mutation`).
  public var maxTextOps = 4096
  /// Characters one block's text may hold, deleted ones included: their ids stay for as long as a device may
  /// still refer to them (`[limits] text_characters_per_block`).
  public var maxTextCharacters = 1 << 20
  /// Bytes a page may hold as the broker stores it (`[limits] page_bytes`; `PageStore` says what counts): a
  /// mutation that would grow a page past it is rejected `too_large`. A page already larger stays readable, and
  /// may shrink.
  public var maxPageBytes = 16 << 20
  public init() {}
}

extension Mutation {
  /// The rejection message of a mutation that `holdsNUL` (docs/protocol.md, "Rejection reasons").
  public static let nulMessage =
    "a text, title, name or value holds U+0000 (NUL), which pagesync does not store (PostgreSQL's text cannot)"

  /// Whether a string this mutation would store (a title, a block's text or type, a property's or attribute's
  /// name or value, a list item, a splice's characters, a mark's value, a view's property or value) holds
  /// U+0000. SQLite keeps it, PostgreSQL's `text` refuses it: both engines reject it alike, before the store.
  public var holdsNUL: Bool {
    func nul(_ text: String) -> Bool { text.utf8.contains(0) }
    func nul(_ value: PropertyValue?) -> Bool {
      switch value {
      case .string(let text): nul(text)
      case .list(let items): items.contains(where: nul)
      case .number, .bool, nil: false
      }
    }
    func nul(_ attributes: [String: String]?) -> Bool {
      attributes?.contains { nul($0.key) || nul($0.value) } ?? false
    }
    switch action {
    case .createPage(_, let title), .createDatabase(_, let title), .setTitle(let title):
      return nul(title)
    case .createRow(_, let title, let properties):
      return nul(title) || properties.contains { nul($0.key) || nul($0.value) }
    case .setProperty(let name, let value):
      return nul(name) || nul(value)
    case .addBlock(_, let type, let text, _, let attributes):
      return nul(type) || nul(text) || nul(attributes)
    case .editBlock(_, let text, let attributes):
      return (text.map(nul) ?? false) || nul(attributes)
    case .spliceText(_, let ops), .markText(_, let ops):
      guard let update = try? ops.update() else { return false }
      return update.runs.contains { $0.text?.contains("\0") ?? false || nul($0.client) }
        || update.marks.contains { nul($0.value ?? "") || nul($0.client) }
    case .setView(let filter, let sort):
      return (filter.map { nul($0.property) || nul($0.value) } ?? false)
        || (sort.map { nul($0.property) } ?? false)
    case .moveBlock, .deleteBlock, .movePage, .deletePage:
      return false
    }
  }

  /// The first rule this mutation breaks on its own (before any state is consulted), or nil.
  public func validate(_ limits: MutationLimits = MutationLimits()) -> RejectionReason? {
    func tooBig(_ text: String, _ max: Int) -> Bool { text.utf8.count > max }
    func badName(_ name: String) -> RejectionReason? {
      if name.isEmpty { return .invalidValue }
      return tooBig(name, limits.maxNameBytes) ? .tooLarge : nil
    }
    func badValue(_ value: PropertyValue) -> RejectionReason? {
      switch value {
      case .string(let text): tooBig(text, limits.maxTextBytes) ? .tooLarge : nil
      case .number(let number): number.isFinite ? nil : .invalidValue
      case .bool: nil
      case .list(let items):
        items.count > limits.maxListItems || items.contains { tooBig($0, limits.maxTextBytes) }
          ? .tooLarge : nil
      }
    }
    func badAttributes(_ attributes: [String: String]) -> RejectionReason? {
      if attributes.count > limits.maxAttributes { return .tooLarge }
      for (name, value) in attributes {
        if let reason = badName(name) { return reason }
        if tooBig(value, limits.maxTextBytes) { return .tooLarge }
      }
      return nil
    }
    if id == 0 { return .invalidValue }
    if holdsNUL { return .invalidValue }
    switch action {
    case .createPage(let parent, let title), .createDatabase(let parent, let title):
      if parent == page { return .invalidParent }
      return tooBig(title, limits.maxTitleBytes) ? .tooLarge : nil
    case .createRow(let database, let title, let properties):
      if database == page { return .invalidParent }
      if tooBig(title, limits.maxTitleBytes) || properties.count > limits.maxProperties { return .tooLarge }
      for (name, value) in properties {
        if let reason = badName(name) ?? badValue(value) { return reason }
      }
      return nil
    case .setTitle(let title):
      return tooBig(title, limits.maxTitleBytes) ? .tooLarge : nil
    case .setProperty(let name, let value):
      return badName(name) ?? value.flatMap(badValue)
    case .addBlock(_, let type, let text, _, let attributes):
      if !BlockType.isValid(type) { return .invalidValue }
      if tooBig(text, limits.maxTextBytes) { return .tooLarge }
      return badAttributes(attributes)
    case .editBlock(_, let text, let attributes):
      if text == nil && attributes == nil { return .invalidValue }
      if let text, tooBig(text, limits.maxTextBytes) { return .tooLarge }
      return attributes.flatMap(badAttributes)
    case .spliceText(_, let ops):
      guard let update = try? ops.update(), update.marks.isEmpty,
        !update.runs.isEmpty || !update.deletes.isEmpty,
        update.runs.allSatisfy({ $0.text != nil })
      else { return .invalidValue }
      if update.runs.count + update.deletes.count > limits.maxTextOps { return .tooLarge }
      var bytes = 0
      for run in update.runs { for scalar in run.text ?? [] { bytes += UTF8.width(scalar) } }
      return bytes > limits.maxTextBytes ? .tooLarge : nil
    case .markText(_, let ops):
      guard let update = try? ops.update(), update.runs.isEmpty, update.deletes.isEmpty, !update.marks.isEmpty
      else { return .invalidValue }
      if update.marks.count > limits.maxTextOps { return .tooLarge }
      return update.marks.contains { tooBig($0.value ?? "", limits.maxTextBytes) } ? .tooLarge : nil
    case .moveBlock(let block, let after):
      return block == after ? .invalidValue : nil
    case .deleteBlock:
      return nil
    case .movePage(let parent):
      return parent == page ? .invalidParent : nil
    case .deletePage:
      return nil
    case .setView(let filter, let sort):
      if let filter, let reason = badName(filter.property) ?? badValue(filter.value) { return reason }
      if let sort, let reason = badName(sort.property) { return reason }
      return nil
    }
  }
}

/// Block types: `text`, `heading`, `todo`, `child_page`, `child_database`, and any other `[a-z_]{1,32}` a client
/// uses (kept as given).
public enum BlockType {
  public static let text = "text"
  public static let heading = "heading"
  public static let todo = "todo"
  public static let childPage = "child_page"
  /// Makes the database named in its `database` attribute inline in the block's page.
  public static let childDatabase = "child_database"

  public static func isValid(_ type: String) -> Bool {
    (1...32).contains(type.utf8.count) && type.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F }
  }
}

/// What a client pushes at once: its id, the workspace its new top-level pages go to, and mutations with
/// consecutive ids.
public struct MutationBatch: Hashable, Sendable, Codable {
  public var client: EntityID
  /// Where a page created with no parent goes; pages with a parent belong to their parent's workspace.
  public var workspace: EntityID
  public var mutations: [Mutation]

  public init(client: EntityID, workspace: EntityID, mutations: [Mutation]) {
    self.client = client
    self.workspace = workspace
    self.mutations = mutations
  }

  /// Whether the mutation ids are consecutive and ascending (the batch may start anywhere: the broker compares
  /// the first with the client's last applied id). An id of `UInt64.max` has no successor: it must be last.
  public var hasConsecutiveIDs: Bool {
    zip(mutations, mutations.dropFirst()).allSatisfy { $0.id != .max && $1.id == $0.id + 1 }
  }
}
