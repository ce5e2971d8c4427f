import RichText
import SQLiteStore
import SyncModel

extension PageStore {
  /// A database's rows in view: live rows that pass the view's filter, in its sort order (creation order by
  /// default and for ties; rows lacking the sort property last).
  public func rowsInView(of database: EntityID) throws -> [EntityID] {
    let view = try connection.query(
      "SELECT filter, sort FROM view WHERE database_id = ?", [.text(database.rawValue)]
    )
    .first
    let filter: ViewFilter? = view.flatMap {
      if case .text(let t) = $0[0] { decode(ViewFilter.self, t) } else { nil }
    }
    let sort: ViewSort? = view.flatMap {
      if case .text(let t) = $0[1] { decode(ViewSort.self, t) } else { nil }
    }
    var rows: [(id: EntityID, properties: [String: PropertyValue])] = []
    let names = Array(Set([filter?.property, sort?.property].compactMap { $0 }))
    // One query for the rows, in creation order, and the (at most two) properties the view reads: a LEFT JOIN
    // yields a row per (page, property) pair, ordered by page, which is folded below.
    let marks = names.isEmpty ? "NULL" : Array(repeating: "?", count: names.count).joined(separator: ", ")
    for row in try connection.query(
      """
      SELECT p.id, pr.name, pr.value FROM page p
      LEFT JOIN property pr ON pr.page_id = p.id AND pr.value IS NOT NULL AND pr.name IN (\(marks))
      WHERE p.parent_id = ? AND p.deleted = 0 ORDER BY p.created_seq, p.id
      """, names.map { .text($0) } + [.text(database.rawValue)])
    {
      guard case .text(let id) = row[0] else { continue }
      if rows.last?.id.rawValue != id { rows.append((EntityID(trusted: id), [:])) }
      if case .text(let name) = row[1], case .text(let json) = row[2],
        let value = decode(PropertyValue.self, json)
      {
        rows[rows.count - 1].properties[name] = value
      }
    }
    return ViewState(filter: filter, sort: sort).rowsInView(rows)
  }

  /// The page as a client downloads it, if it exists in `workspaces`.
  public func snapshot(of id: EntityID, workspaces: Set<EntityID>) throws -> PageSnapshot? {
    guard var page = try snapshotHeader(of: id, workspaces: workspaces) else { return nil }
    try forEachBlock(of: id, .live) { page.blocks.append($0) }
    return page
  }

  /// The page as a client downloads it, without its blocks (`forEachBlock(of:_:_:)` with `.live` gives them),
  /// if it exists in `workspaces`.
  public func snapshotHeader(of id: EntityID, workspaces: Set<EntityID>) throws -> PageSnapshot? {
    guard
      let row = try connection.query(
        "SELECT workspace_id, kind, parent_id, title, deleted, last_updated FROM page WHERE id = ?",
        [.text(id.rawValue)]
      ).first,
      case .text(let workspace) = row[0], workspaces.contains(EntityID(trusted: workspace)),
      case .text(let kind) = row[1], case .text(let title) = row[3], case .integer(let deleted) = row[4],
      case .integer(let lastUpdated) = row[5]
    else { return nil }
    let parent: EntityID? = if case .text(let p) = row[2] { EntityID(trusted: p) } else { nil }
    var properties: [String: PropertyValue] = [:]
    for property in try connection.query(
      "SELECT name, value FROM property WHERE page_id = ? AND value IS NOT NULL", [.text(id.rawValue)])
    {
      if case .text(let name) = property[0], case .text(let json) = property[1],
        let value = decode(PropertyValue.self, json)
      {
        properties[name] = value
      }
    }
    let databases = try connection.query(
      "SELECT id FROM page WHERE parent_id = ? AND kind = 'database' AND deleted = 0 ORDER BY created_seq, id",
      [.text(id.rawValue)]
    ).compactMap { if case .text(let d) = $0[0] { EntityID(trusted: d) } else { nil } }
    var view: ViewState?
    var rows: [EntityID]?
    if kind == "database" {
      let stored = try connection.query(
        "SELECT filter, sort FROM view WHERE database_id = ?", [.text(id.rawValue)]
      )
      .first
      view = ViewState(
        filter: stored.flatMap { if case .text(let t) = $0[0] { decode(ViewFilter.self, t) } else { nil } },
        sort: stored.flatMap { if case .text(let t) = $0[1] { decode(ViewSort.self, t) } else { nil } })
      rows = try rowsInView(of: id)
    }
    return PageSnapshot(
      id: id, workspace: EntityID(trusted: workspace), kind: kind, parent: parent, title: title,
      deleted: deleted != 0,
      properties: properties, blocks: [], databases: databases, view: view, rows: rows,
      lastUpdatedTime: UInt64(lastUpdated))
  }

  /// Which blocks of a page a reader wants.
  public enum BlockSelection: Hashable, Sendable {
    /// The live blocks, each with its whole CRDT state (a snapshot's).
    case live
    /// These blocks, deleted ones included, each with the update of its text since `since` (a delta's).
    case changed(Set<String>, since: UInt64)
  }

  /// Calls `body` with each selected block of `page`, in order, one at a time: a page's blocks are never all
  /// in memory at once, so an answer can be written as they are read (`Broker.PageAnswerWriter`). Each live
  /// block carries its text's CRDT: the whole state, or with `.changed` the update since then (what a device
  /// that has everything up to `since` lacks).
  public func forEachBlock(
    of page: EntityID, _ selection: BlockSelection, _ body: (BlockState) throws -> Void
  ) throws {
    let columns = "id, type, text, attributes, position, deleted, marks, crdt"
    switch selection {
    case .live:
      let statement = try connection.statement(
        "SELECT \(columns) FROM block WHERE page_id = ? AND deleted = 0 ORDER BY position, id")
      try statement.bind([.text(page.rawValue)])
      try statement.eachRow { row in
        if let block = blockState(row, since: nil) { try body(block) }
      }
    case .changed(let ids, let since):
      guard !ids.isEmpty else { return }
      // The order first, from the ids and positions alone; then each block, whole, by its id.
      var ordered: [String] = []
      for row in try connection.query(
        "SELECT id FROM block WHERE page_id = ? ORDER BY position, id", [.text(page.rawValue)])
      {
        if case .text(let id) = row[0], ids.contains(id) { ordered.append(id) }
      }
      let statement = try connection.statement("SELECT \(columns) FROM block WHERE id = ?")
      for id in ordered {
        try statement.bind([.text(id)])
        defer { statement.reset() }
        if try statement.step(), let block = blockState(statement, since: since) { try body(block) }
      }
    }
  }

  /// The block on `row` (the columns of `forEachBlock`), or nil if the row is not one this store wrote.
  private func blockState(_ row: any StoreStatement, since: UInt64?) -> BlockState? {
    guard let id = row.string(0), let type = row.string(1), let text = row.string(2),
      let attributes = row.string(3), let marks = row.string(6)
    else { return nil }
    let deleted = row.int64(5) != 0
    return BlockState(
      id: EntityID(trusted: id), type: type, text: text,
      attributes: decode([String: String].self, attributes) ?? [:], position: row.double(4),
      deleted: deleted, marks: decode([TextMark].self, marks) ?? [],
      crdt: deleted ? nil : PageStore.crdt(row.column(7), text: .text(text), since: since))
  }

  /// What changed in the page since `since`, if the page exists in `workspaces`: the changed fields when the
  /// change log reaches back that far, else (or from time 0, or from another epoch) the whole page.
  public func delta(of id: EntityID, since: UInt64, workspaces: Set<EntityID>) throws -> PageDelta? {
    guard let (header, blocks) = try deltaHeader(of: id, since: since, workspaces: workspaces) else {
      return nil
    }
    var delta = header
    if delta.full {
      try forEachBlock(of: id, blocks) { delta.page.blocks.append($0) }
    } else {
      try forEachBlock(of: id, blocks) { delta.blocks.append($0) }
    }
    return delta
  }

  /// A delta without its blocks, and which blocks it carries (`forEachBlock(of:_:_:)` gives them: in
  /// `page.blocks` when `full`, else in `blocks`), if the page exists in `workspaces`.
  public func deltaHeader(of id: EntityID, since: UInt64, workspaces: Set<EntityID>) throws -> (
    delta: PageDelta, blocks: BlockSelection
  )? {
    guard let page = try snapshotHeader(of: id, workspaces: workspaces) else { return nil }
    let floor = try metaNumber("log_floor")
    if since == 0 || since < floor {
      return (
        PageDelta(
          id: id, since: since, lastUpdatedTime: page.lastUpdatedTime, full: true, page: page,
          properties: [:],
          blocks: []),
        .live
      )
    }
    let fields = Set(
      try connection.query(
        "SELECT DISTINCT field FROM change_log WHERE page_id = ? AND seq > ?",
        [.text(id.rawValue), .integer(Int64(clamping: since))]
      ).compactMap { if case .text(let f) = $0[0] { f } else { nil } })
    var properties: [String: PropertyValue?] = [:]
    var blockIDs: Set<String> = []
    for field in fields {
      if field.hasPrefix("property:") {
        let name = String(field.dropFirst("property:".count))
        properties[name] = .some(page.properties[name])
      } else if field.hasPrefix("block:") {
        blockIDs.insert(String(field.dropFirst("block:".count)))
      }
    }
    // The header travels whole; the bulky parts only when they changed.
    var header = page
    header.properties = [:]
    header.blocks = []
    // Unchanged databases are left out, not sent as []: docs/protocol.md promises `databases` "when they
    // changed", and a client that applied [] would drop the page's inline databases.
    if !fields.contains("databases") && !fields.contains("created") { header.databases = nil }
    if !fields.contains("rows") && !fields.contains("view") && !fields.contains("created") {
      header.rows = nil
    }
    return (
      PageDelta(
        id: id, since: since, lastUpdatedTime: page.lastUpdatedTime, full: false, page: header,
        properties: properties, blocks: []),
      .changed(blockIDs, since: since)
    )
  }

  /// Catch-up: of the pages in `since` (page → the client's lastDownloadedTimestamp), those whose
  /// `lastUpdatedTime` is newer, and those the client may not (or no longer) see — `gone` — indistinguishable
  /// from ones that never existed. With another epoch than ours every visible page is reported changed.
  public func changedPages(
    since: [EntityID: UInt64], workspaces: Set<EntityID>, clientEpoch: String?
  ) throws -> (changed: [EntityID: UInt64], gone: [EntityID]) {
    let sameEpoch = clientEpoch == nil || clientEpoch == epoch
    var changed: [EntityID: UInt64] = [:]
    var gone: [EntityID] = []
    let statement = try connection.statement("SELECT workspace_id, last_updated FROM page WHERE id = ?")
    for (page, timestamp) in since {
      try statement.bind([.text(page.rawValue)])
      defer { statement.reset() }
      guard try statement.step(), let workspace = statement.string(0),
        workspaces.contains(EntityID(trusted: workspace))
      else {
        gone.append(page)
        continue
      }
      let lastUpdated = UInt64(statement.int64(1))
      if !sameEpoch || lastUpdated > timestamp { changed[page] = lastUpdated }
    }
    return (changed, gone.sorted())
  }

  /// The workspace and `lastUpdatedTime` of each of `pages`, in their order: nil for a page that does not exist
  /// (deleted pages exist).
  ///
  /// A device that comes back subscribes its whole offline set (10,000 pages is normal: C1 in
  /// docs/benchmarks.md), so this runs one lookup per page: in one read transaction (in autocommit mode each
  /// lookup would take and drop its own read lock, which cost more than the lookup), answered by position
  /// (no dictionary of ids), and with one `EntityID` per workspace rather than per page.
  public func workspacesAndTimes(of pages: [EntityID]) throws -> [PageFacts?] {
    let statement = try connection.statement("SELECT workspace_id, last_updated FROM page WHERE id = ?")
    return try connection.transaction(writing: false) {
      var answer: [PageFacts?] = []
      answer.reserveCapacity(pages.count)
      var workspace: EntityID?
      for page in pages {
        try statement.bind(text: page.rawValue)
        defer { statement.reset() }
        guard try statement.step() else {
          answer.append(nil)
          continue
        }
        let same = statement.withText(0) { bytes in
          workspace.map { bytes.elementsEqual($0.rawValue.utf8) } ?? false
        }
        if same != true {
          guard let text = statement.string(0) else {
            answer.append(nil)
            continue
          }
          workspace = EntityID(trusted: text)
        }
        answer.append(PageFacts(workspace: workspace!, lastUpdated: UInt64(clamping: statement.int64(1))))
      }
      return answer
    }
  }

  /// Of `pages`, those that exist outside `workspaces` (a subscription to them must be refused).
  public func pagesOutside(workspaces: Set<EntityID>, among pages: [EntityID]) throws -> [EntityID] {
    let statement = try connection.statement("SELECT workspace_id FROM page WHERE id = ?")
    // One read transaction for all the lookups (see `workspacesAndTimes`).
    return try connection.transaction(writing: false) {
      var outside: [EntityID] = []
      for page in pages {
        try statement.bind([.text(page.rawValue)])
        defer { statement.reset() }
        if try statement.step(), let workspace = statement.string(0),
          !workspaces.contains(EntityID(trusted: workspace))
        {
          outside.append(page)
        }
      }
      return outside
    }
  }

  /// Pages of `workspaces` changed after `sequence`, oldest change first, `limit` from `offset` (the seed guide's
  /// `GET /v1/sync`), and whether more follow.
  public func pagesChanged(
    after sequence: UInt64, workspaces: Set<EntityID>, offset: Int, limit: Int
  ) throws -> (pages: [EntityID], hasMore: Bool) {
    guard !workspaces.isEmpty else { return ([], false) }
    let marks = Array(repeating: "?", count: workspaces.count).joined(separator: ", ")
    let bindings: [SQLiteValue] =
      [.integer(Int64(clamping: sequence))] + workspaces.sorted().map { .text($0.rawValue) } + [
        .integer(Int64(limit + 1)), .integer(Int64(offset)),
      ]
    // PostgreSQL: `sequence` is a `syncCursor`, an xid; a page changed by a transaction at or above it is new.
    let sql =
      connection.engine == .sqlite
      ? """
      SELECT id FROM page WHERE last_updated > ? AND workspace_id IN (\(marks))
      ORDER BY last_updated, id LIMIT ? OFFSET ?
      """
      : """
      SELECT id FROM page WHERE change_xid >= ? AND workspace_id IN (\(marks))
      ORDER BY change_xid, id LIMIT ? OFFSET ?
      """
    let ids = try connection.query(
      sql, bindings
    ).compactMap { if case .text(let id) = $0[0] { EntityID(trusted: id) } else { nil } }
    return (Array(ids.prefix(limit)), ids.count > limit)
  }
}

/// A page's workspace and `lastUpdatedTime`, as the broker's channel index keeps them.
public struct PageFacts: Hashable, Sendable {
  public var workspace: EntityID
  public var lastUpdated: UInt64

  public init(workspace: EntityID, lastUpdated: UInt64) {
    self.workspace = workspace
    self.lastUpdated = lastUpdated
  }
}
