import DaemonCore
import RichText
import SQLiteStore
import SyncModel

/// The local header fields an edit's side effects depend on.
struct LocalHeader: Equatable {
  var kind: String
  var parent: EntityID?
  var deleted: Bool

  var isDatabase: Bool { kind == "database" }
}

/// The mutation types that can change a database's rows (`local_page.parent` is the database), and those that
/// can change a page's inline databases: what a rebase looks for among other pages' pending mutations.
private let rowChangingTypes = "'create_page', 'create_row', 'move_page', 'delete_page', 'set_property'"
private let databaseChangingTypes = "'create_database', 'move_page', 'delete_page'"

extension LocalStore {
  /// Applies a mutation's effect to the local copy, as the broker would apply it to current state, so the user
  /// sees the edit before it is pushed. Called by `recordEdit` (after its checks) and again, in id order, by
  /// `applyDelta` for the pending mutations of a page it just stored (the rebase). The caller holds the
  /// transaction.
  ///
  /// Only local copies are touched: an action on a page with no `local_page` row changes nothing locally
  /// (creates insert it). A create of a page already stored does nothing (`recordEdit` refused it before; in a
  /// rebase the broker's copy stands). Block actions name the block's page: a block of another page is left
  /// alone (the broker will reject `unknown_block`). After the action the page is `pending`, and the lists other
  /// pages keep about it follow: a database's parent page lists it in `databases` (`reconcileDatabases`), a
  /// row's database has it in `rows` as its view says (`refreshRows`). Those other pages stay `synced`: the
  /// edit is not theirs.
  func applyLocally(_ mutation: Mutation) throws {
    let page = SQLiteValue.text(mutation.page.rawValue)
    let before = try localHeader(mutation.page)
    func insert(kind: String, parent: EntityID?, title: String, properties: [String: PropertyValue]) throws {
      // What the broker's whole page of a new page holds: no inline databases; a database has the default view
      // and no rows.
      let isDatabase = kind == "database"
      try connection.execute(
        """
        INSERT INTO local_page (id, kind, parent, title, properties, databases, view, rows, sync_status)
        VALUES (?, ?, ?, ?, ?, '[]', ?, ?, 'pending')
        ON CONFLICT (id) DO NOTHING
        """,
        [
          page, .text(kind), parent.map { .text($0.rawValue) } ?? .null, .text(title),
          .text(try json(properties)), isDatabase ? .text(try json(ViewState())) : .null,
          isDatabase ? .text("[]") : .null,
        ])
    }
    switch mutation.action {
    case .createPage(let parent, let title):
      try insert(kind: "page", parent: parent, title: title, properties: [:])
    case .createDatabase(let parent, let title):
      try insert(kind: "database", parent: parent, title: title, properties: [:])
    case .createRow(let database, let title, let properties):
      try insert(kind: "page", parent: database, title: title, properties: properties)
    case .setTitle(let title):
      try connection.execute("UPDATE local_page SET title = ? WHERE id = ?", [.text(title), page])
    case .setProperty(let name, let value):
      if let current = try connection.query("SELECT properties FROM local_page WHERE id = ?", [page]).first {
        var properties = try decode(
          [String: PropertyValue].self, current[0], table: "local_page", column: "properties")
        properties[name] = value
        try connection.execute(
          "UPDATE local_page SET properties = ? WHERE id = ?", [.text(try json(properties)), page])
      }
    case .addBlock(let block, let type, let text, let after, let attributes):
      guard before != nil else { break }
      let position = try localPosition(after: after, on: mutation.page, excluding: block)
      // An upsert: in a rebase the block may be there already (from the broker, or still from this edit). Its
      // first text has the ids the broker gives it; a state already here (the broker's, with later edits) keeps
      // them and everything after.
      try connection.execute(
        """
        INSERT INTO local_block (id, page_id, type, text, attributes, position, deleted, crdt, marks, legacy_text)
        VALUES (?, ?, ?, ?, ?, ?, 0, ?, '[]', 0)
        ON CONFLICT (id) DO UPDATE SET page_id = excluded.page_id, type = excluded.type,
          text = CASE WHEN local_block.crdt IS NULL THEN excluded.text ELSE local_block.text END,
          marks = CASE WHEN local_block.crdt IS NULL THEN excluded.marks ELSE local_block.marks END,
          crdt = coalesce(local_block.crdt, excluded.crdt),
          attributes = excluded.attributes, position = excluded.position, deleted = 0
        """,
        [
          .text(block.rawValue), page, .text(type), .text(text), .text(try json(attributes)),
          .real(position), .blob(TextDocument(text: text, client: initialTextClient).encoded()),
        ])
    case .editBlock(let block, let text, let attributes):
      if let text {
        // A whole-text edit queued before the CRDT (new edits are splices): shown as it is until the broker
        // merges it.
        try connection.execute(
          "UPDATE local_block SET text = ?, legacy_text = 1 WHERE id = ? AND page_id = ?",
          [.text(text), .text(block.rawValue), page])
      }
      if let attributes {
        try connection.execute(
          "UPDATE local_block SET attributes = ? WHERE id = ? AND page_id = ?",
          [.text(try json(attributes)), .text(block.rawValue), page])
      }
    case .spliceText(let block, let ops), .markText(let block, let ops):
      try applyTextLocally(ops, to: block, on: mutation.page)
    case .moveBlock(let block, let after):
      guard
        try !connection.query(
          "SELECT 1 FROM local_block WHERE id = ? AND page_id = ?", [.text(block.rawValue), page]
        ).isEmpty
      else { break }
      let position = try localPosition(after: after, on: mutation.page, excluding: block)
      try connection.execute(
        "UPDATE local_block SET position = ? WHERE id = ?", [.real(position), .text(block.rawValue)])
    case .deleteBlock(let block):
      // Locally a deleted block is simply gone (the broker keeps the tombstone, for deltas).
      try connection.execute(
        "DELETE FROM local_block WHERE id = ? AND page_id = ?", [.text(block.rawValue), page])
    case .movePage(let parent):
      try connection.execute(
        "UPDATE local_page SET parent = ? WHERE id = ?", [parent.map { .text($0.rawValue) } ?? .null, page])
    case .deletePage:
      try connection.execute("UPDATE local_page SET deleted = 1 WHERE id = ?", [page])
    case .setView(let filter, let sort):
      if before?.isDatabase == true {
        try refreshRows(of: mutation.page, setting: ViewState(filter: filter, sort: sort))
      }
    }
    try connection.execute("UPDATE local_page SET sync_status = 'pending' WHERE id = ?", [page])
    try applyDerivedEffects(of: mutation, before: before)
  }

  /// Brings the lists other pages keep about a mutation's page in line: the parent pages whose `databases` list
  /// a database (old and new parent), and the databases whose `rows` list a row (old and new parent). Only for
  /// the actions that can change those lists, and for `setProperty` only when the database's view reads that
  /// property.
  private func applyDerivedEffects(of mutation: Mutation, before: LocalHeader?) throws {
    guard let after = try localHeader(mutation.page) else { return }
    var readProperty: String?
    switch mutation.action {
    case .createPage, .createDatabase, .createRow, .movePage, .deletePage: break
    case .setProperty(let name, _): readProperty = name
    default: return
    }
    var parents: [EntityID] = []
    for parent in [before?.parent, after.parent] {
      if let parent, !parents.contains(parent) { parents.append(parent) }
    }
    for parent in parents {
      if after.isDatabase {
        // This edit is not in the queue yet (it is written last): name it.
        try reconcileDatabases(of: parent, editing: mutation.page)
      } else {
        try refreshRows(of: parent, onlyIfViewReads: readProperty)
      }
    }
  }

  /// The rebase's part for other pages' pending edits: once the broker's copy of `page` is stored, the lists it
  /// holds about other pages are brought in line with those pages' unsent edits (a database created, moved or
  /// deleted here; a row created, moved, deleted or re-valued here). The queries start from the queue, which is
  /// small: a catch-up of thousands of pages with nothing pending costs a queue scan per page, not a scan of
  /// `local_page`.
  func rebaseDerivedLists(of page: EntityID) throws {
    guard let header = try localHeader(page) else { return }
    if !header.isDatabase {
      try reconcileDatabases(of: page)
      return
    }
    let id = SQLiteValue.text(page.rawValue)
    let rows =
      try connection.query("SELECT coalesce(rows, '[]') FROM local_page WHERE id = ?", [id]).first?
      .first ?? .text("[]")
    let affected = try !connection.query(
      """
      SELECT 1 FROM local_page
      WHERE id IN (SELECT page_id FROM mutation_queue WHERE status = 'pending' AND type IN (\(rowChangingTypes)))
        AND (parent = ? OR id IN (SELECT value FROM json_each(?)))
      LIMIT 1
      """, [id, rows]
    ).isEmpty
    if affected { try refreshRows(of: page) }
  }

  /// The kind, parent and deleted flag of a local copy; nil when there is none.
  func localHeader(_ page: EntityID) throws -> LocalHeader? {
    guard
      let row = try connection.query(
        "SELECT kind, parent, deleted FROM local_page WHERE id = ?", [.text(page.rawValue)]
      ).first
    else { return nil }
    guard case .text(let kind) = row[0], case .integer(let deleted) = row[2] else {
      throw LocalStoreError.corruptValue(table: "local_page", column: "kind, deleted", value: "\(row)")
    }
    return LocalHeader(
      kind: kind, parent: try optionalEntityID(row[1], table: "local_page", column: "parent"),
      deleted: deleted != 0)
  }

  /// Where a block goes `after` another among the page's local blocks: `BlockPlacement`'s rule, the broker's.
  /// The device keeps no tombstones, so a block placed after one deleted here goes last until the broker's delta
  /// gives its final position. A renumbering the rule calls for is written first.
  private func localPosition(after: EntityID?, on page: EntityID, excluding block: EntityID) throws -> Double
  {
    let blocks = try connection.query(
      "SELECT id, position FROM local_block WHERE page_id = ? AND deleted = 0 AND id != ? ORDER BY position, id",
      [.text(page.rawValue), .text(block.rawValue)]
    ).map { row -> BlockPlacement.Slot in
      let position: Double
      switch row[1] {
      case .real(let value): position = value
      case .integer(let value): position = Double(value)
      default:
        throw LocalStoreError.corruptValue(table: "local_block", column: "position", value: "\(row[1])")
      }
      return BlockPlacement.Slot(
        id: try entityID(row[0], table: "local_block", column: "id"), position: position)
    }
    let decision = BlockPlacement.place(after: after, among: blocks)
    for slot in decision.renumbered {
      try connection.execute(
        "UPDATE local_block SET position = ? WHERE id = ?", [.real(slot.position), .text(slot.id.rawValue)])
    }
    return decision.position
  }

  /// Re-derives a local database's `rows` (and, with `setting`, stores a new view first).
  ///
  /// When every row of the database is known here, `rows` is computed as the broker does (docs/protocol.md):
  /// live rows (local pages whose parent is the database) passing the filter, sorted by the sort property
  /// (`PropertyValue` order, descending if asked), rows lacking it last, creation order for ties and by default.
  /// Every row is known when the database exists only here (never downloaded: its rows are the local ones), or
  /// when its view before this change has no filter (so its stored `rows` lists every live row) and each of those
  /// rows has a local copy. Creation order: the order of the stored `rows` when the view before had no sort
  /// (it is the broker's creation order), then the local rowid order (the order the copies were first stored
  /// here: exact for rows made here, an approximation for downloaded ones).
  ///
  /// Otherwise (rows outside the view or without a local copy), the order is left to the broker's next delta,
  /// and only what is certain is applied: rows deleted here, or moved out of the database here, leave `rows`.
  ///
  /// `onlyIfViewReads`: skip unless the current view filters or sorts by that property (a property edit).
  func refreshRows(of database: EntityID, setting newView: ViewState? = nil, onlyIfViewReads: String? = nil)
    throws
  {
    let id = SQLiteValue.text(database.rawValue)
    guard
      let row = try connection.query(
        "SELECT kind, view, rows, last_updated FROM local_page WHERE id = ?", [id]
      ).first, row[0] == .text("database")
    else { return }
    let oldView =
      row[1] == .null
      ? ViewState() : try decode(ViewState.self, row[1], table: "local_page", column: "view")
    if let property = onlyIfViewReads, oldView.filter?.property != property,
      oldView.sort?.property != property
    {
      return
    }
    let stored =
      row[2] == .null ? nil : try decode([EntityID].self, row[2], table: "local_page", column: "rows")
    guard case .integer(let lastUpdated) = row[3] else {
      throw LocalStoreError.corruptValue(table: "local_page", column: "last_updated", value: "\(row[3])")
    }
    let view = newView ?? oldView
    // The local copies of the rows the stored list names: are they all here, and where are they now?
    var listed: [EntityID: Rebase.Placement] = [:]
    if let stored {
      for found in try connection.query(
        "SELECT id, parent, deleted FROM local_page WHERE id IN (SELECT value FROM json_each(?))",
        [.text(try json(stored))])
      {
        let row = try entityID(found[0], table: "local_page", column: "id")
        listed[row] = Rebase.Placement(
          id: row, parent: try optionalEntityID(found[1], table: "local_page", column: "parent"),
          deleted: found[2] != .integer(0))
      }
    }
    var rows: [EntityID]?
    if Rebase.canRecomputeRows(
      neverDownloaded: lastUpdated == 0, viewBefore: oldView, stored: stored, known: Set(listed.keys))
    {
      var rank: [EntityID: Int] = [:]
      if oldView.sort == nil, let stored {
        for (index, row) in stored.enumerated() where rank[row] == nil { rank[row] = index }
      }
      var candidates: [(id: EntityID, created: (Int, Int64), properties: [String: PropertyValue])] = []
      for child in try connection.query(
        "SELECT id, properties, rowid FROM local_page WHERE parent = ? AND kind = 'page' AND deleted = 0",
        [id])
      {
        let row = try entityID(child[0], table: "local_page", column: "id")
        let properties = try decode(
          [String: PropertyValue].self, child[1], table: "local_page", column: "properties")
        guard case .integer(let rowid) = child[2] else { continue }
        candidates.append((row, (rank[row] ?? Int.max, rowid), properties))
      }
      candidates.sort { $0.created < $1.created }
      rows = view.rowsInView(candidates.map { ($0.id, $0.properties) })
    } else {
      rows = stored.map { Rebase.rowsStillIn(database, stored: $0, copies: listed) }
    }
    if let newView {
      try connection.execute("UPDATE local_page SET view = ? WHERE id = ?", [.text(try json(newView)), id])
    }
    if rows != stored {
      try connection.execute(
        "UPDATE local_page SET rows = ? WHERE id = ?", [try rows.map { .text(try json($0)) } ?? .null, id])
    }
  }

  /// Brings a local page's `databases` in line with the databases whose creation, move or deletion is still
  /// pending here (or that `editing`, the database of the edit being recorded, makes): one whose local parent is
  /// the page (and is live) is listed, appended in local creation order; one that left it or is deleted is not.
  /// Databases with no such pending edit keep the broker's answer.
  func reconcileDatabases(of page: EntityID, editing: EntityID? = nil) throws {
    let id = SQLiteValue.text(page.rawValue)
    guard
      let row = try connection.query("SELECT kind, databases FROM local_page WHERE id = ?", [id]).first,
      row[0] == .text("page")
    else { return }
    let stored =
      row[1] == .null ? nil : try decode([EntityID].self, row[1], table: "local_page", column: "databases")
    var edited: [Rebase.Placement] = []
    for found in try connection.query(
      """
      SELECT id, parent, deleted FROM local_page
      WHERE id IN (
          SELECT page_id FROM mutation_queue WHERE status = 'pending' AND type IN (\(databaseChangingTypes))
          UNION ALL SELECT ?3)
        AND kind = 'database' AND (parent = ?1 OR id IN (SELECT value FROM json_each(?2)))
      ORDER BY rowid
      """, [id, .text(try json(stored ?? [])), editing.map { .text($0.rawValue) } ?? .null])
    {
      edited.append(
        Rebase.Placement(
          id: try entityID(found[0], table: "local_page", column: "id"),
          parent: try optionalEntityID(found[1], table: "local_page", column: "parent"),
          deleted: found[2] != .integer(0)))
    }
    let list = Rebase.inlineDatabases(of: page, listed: stored ?? [], edited: edited)
    if list != (stored ?? []) {
      try connection.execute("UPDATE local_page SET databases = ? WHERE id = ?", [.text(try json(list)), id])
    }
  }
}
