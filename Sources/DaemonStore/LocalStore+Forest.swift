import DaemonCore
import SQLiteStore
import SyncModel

/// One page of the offline set, as `GET /v1/offline` and `pagesync offline list` show it.
public struct OfflineEntry: Hashable, Sendable {
  public var id: EntityID
  /// The `offline_action` rows that keep it offline, by origin then reason (toggled, favorite, recent).
  public var reasons: [OfflineAction]
  /// The broker's `lastUpdatedTime` of the last download stored (0: never downloaded).
  public var lastDownloadedTimestamp: UInt64
  /// Whether a download of it is stored: a page is shown offline only when complete, never half a page.
  public var complete: Bool
  /// Whether the broker said this device may not see it (it does not exist, or is another workspace's): it
  /// stays in the set, incomplete, until the user removes its reason or the broker has it after all.
  public var missing: Bool

  public init(
    id: EntityID, reasons: [OfflineAction], lastDownloadedTimestamp: UInt64, complete: Bool,
    missing: Bool = false
  ) {
    self.id = id
    self.reasons = reasons
    self.lastDownloadedTimestamp = lastDownloadedTimestamp
    self.complete = complete
    self.missing = missing
  }
}

extension LocalStore {
  /// Writes one `OfflineForest` change in one transaction: the deleted `offline_action` rows first (a row whose
  /// `from` changed is a delete and an insert of the same key), then the inserted ones; new offline pages get an
  /// `offline_page` row (`complete = 0` until downloaded), removed ones lose theirs; `recent_rank` is rewritten
  /// from `recentOrder` (the forest's `recentOrder`, most recent first).
  ///
  /// Local copies of removed pages are not dropped here: the daemon decides (they may hold unsent mutations).
  public func applyForestChange(_ change: ForestChange, recentOrder: [EntityID]) throws {
    try connection.transaction(.immediate) {
      for action in change.deletedActions {
        try connection.execute(
          """
          DELETE FROM offline_action WHERE origin_page_id = ? AND impacted_page_id = ? AND type = ?
          """, [.text(action.origin.rawValue), .text(action.impacted.rawValue), .text(action.type.rawValue)])
      }
      for action in change.insertedActions {
        try connection.execute(
          """
          INSERT INTO offline_action (origin_page_id, from_page_id, impacted_page_id, type) VALUES (?, ?, ?, ?)
          """,
          [
            .text(action.origin.rawValue), action.from.map { .text($0.rawValue) } ?? .null,
            .text(action.impacted.rawValue), .text(action.type.rawValue),
          ])
      }
      for page in change.removedPages {
        try connection.execute("DELETE FROM offline_page WHERE page_id = ?", [.text(page.rawValue)])
      }
      for page in change.addedPages {
        try connection.execute(
          "INSERT INTO offline_page (page_id) VALUES (?) ON CONFLICT (page_id) DO NOTHING",
          [.text(page.rawValue)])
      }
      try connection.execute("UPDATE offline_page SET recent_rank = NULL WHERE recent_rank IS NOT NULL", [])
      for (rank, page) in recentOrder.enumerated() {
        try connection.execute(
          "UPDATE offline_page SET recent_rank = ? WHERE page_id = ?",
          [.integer(Int64(rank)), .text(page.rawValue)])
        if connection.changes != 1 { throw LocalStoreError.recentPageNotOffline(page) }
      }
    }
  }

  /// The rows `OfflineForest.restore` needs: every `offline_action` row, and the recent origins, most recent
  /// first.
  public func loadForestRows() throws -> (actions: [OfflineAction], recentOrder: [EntityID]) {
    let table = "offline_action"
    let actions = try connection.query(
      "SELECT origin_page_id, from_page_id, impacted_page_id, type FROM offline_action ORDER BY rowid"
    ).map { row in
      guard case .text(let type) = row[3], let reason = OfflineReason(rawValue: type) else {
        throw LocalStoreError.corruptValue(table: table, column: "type", value: "\(row[3])")
      }
      return OfflineAction(
        origin: try entityID(row[0], table: table, column: "origin_page_id"),
        from: try optionalEntityID(row[1], table: table, column: "from_page_id"),
        impacted: try entityID(row[2], table: table, column: "impacted_page_id"), type: reason)
    }
    let recent = try connection.query(
      "SELECT page_id FROM offline_page WHERE recent_rank IS NOT NULL ORDER BY recent_rank"
    ).map { try entityID($0[0], table: "offline_page", column: "page_id") }
    return (actions, recent)
  }

  /// What catch-up asks the broker for: every offline page with the time it was last downloaded (0: never).
  public func catchUpMap() throws -> [EntityID: UInt64] {
    var map: [EntityID: UInt64] = [:]
    for row in try connection.query("SELECT page_id, last_downloaded_timestamp FROM offline_page") {
      guard case .integer(let time) = row[1], time >= 0 else {
        throw LocalStoreError.corruptValue(
          table: "offline_page", column: "last_downloaded_timestamp", value: "\(row[1])")
      }
      map[try entityID(row[0], table: "offline_page", column: "page_id")] = UInt64(time)
    }
    return map
  }

  /// The time each of `pages` was last downloaded (0: never, or not in the offline set), read page by page: what a
  /// fetch of a batch asks the broker from. Not `catchUpMap()` for the 100 pages of a batch: in a first sync of
  /// 10,000 pages, each batch read the whole set's 10,000 rows and map (1.3 MB at once, the heap's peak).
  public func downloadTimes(of pages: some Sequence<EntityID>) throws -> [EntityID: UInt64] {
    // One read transaction for the batch: one snapshot, one WAL read lock rather than one per page.
    func read() throws -> [EntityID: UInt64] {
      var times: [EntityID: UInt64] = [:]
      for page in pages {
        let row = try connection.query(
          "SELECT last_downloaded_timestamp FROM offline_page WHERE page_id = ?", [.text(page.rawValue)]
        ).first
        guard let value = row?[0] else {
          times[page] = 0
          continue
        }
        guard case .integer(let time) = value, time >= 0 else {
          throw LocalStoreError.corruptValue(
            table: "offline_page", column: "last_downloaded_timestamp", value: "\(value)")
        }
        times[page] = UInt64(time)
      }
      return times
    }
    return try connection.isInTransaction ? read() : connection.transaction(.deferred, read)
  }

  /// The offline set, by page id, each with its reasons and download state (one read transaction, so the list
  /// and the reasons agree).
  public func offlineList() throws -> [OfflineEntry] {
    try connection.transaction(.deferred) {
      var list: [OfflineEntry] = []
      while true {
        let page = try readOfflineListPage(after: list.last?.id, limit: 256)
        list += page
        if page.count < 256 { return list }
      }
    }
  }

  /// At most `limit` entries of the offline set, the first ones by page id after `after` (from the first when
  /// nil), as `offlineList()` has them, in one read transaction, so the entries and their reasons agree. Fewer than
  /// `limit`: the set has no more. `GET /v1/offline` reads the set this way, a chunk of its answer at a time as
  /// the client takes them, so that 10,000 entries, their rows and their answer are never all in memory.
  public func offlineListPage(after: EntityID?, limit: Int) throws -> [OfflineEntry] {
    try connection.transaction(.deferred) { try readOfflineListPage(after: after, limit: limit) }
  }

  private func readOfflineListPage(after: EntityID?, limit: Int) throws -> [OfflineEntry] {
    precondition(limit > 0, "a page of the offline list holds at least one entry")
    let columns = """
      SELECT page_id, last_downloaded_timestamp, complete,
        EXISTS (SELECT 1 FROM missing_page WHERE missing_page.page_id = offline_page.page_id)
      FROM offline_page
      """
    // SQLite's text order (BINARY: by bytes) is `EntityID`'s: no re-sort needed, and `>` goes on after `after`.
    let rows =
      if let after {
        try connection.query(
          columns + " WHERE page_id > ? ORDER BY page_id LIMIT ?",
          [.text(after.rawValue), .integer(Int64(limit))])
      } else {
        try connection.query(columns + " ORDER BY page_id LIMIT ?", [.integer(Int64(limit))])
      }
    guard let firstRow = rows.first, let lastRow = rows.last else { return [] }
    let from = try entityID(firstRow[0], table: "offline_page", column: "page_id")
    let through = try entityID(lastRow[0], table: "offline_page", column: "page_id")
    // The reasons of these entries only: a range of the `impacted_page_id` index.
    var reasons: [EntityID: [OfflineAction]] = [:]
    for action in try offlineActions(impactingFrom: from, through: through) {
      reasons[action.impacted, default: []].append(action)
    }
    return try rows.map { row in
      let page = try entityID(row[0], table: "offline_page", column: "page_id")
      return try offlineEntry(page, row, reasons: reasons[page] ?? [])
    }
  }

  /// One page's offline entry, nil if it is not in the offline set.
  public func offlineEntry(_ page: EntityID) throws -> OfflineEntry? {
    try connection.transaction(.deferred) {
      guard
        let row = try connection.query(
          """
          SELECT page_id, last_downloaded_timestamp, complete,
            EXISTS (SELECT 1 FROM missing_page WHERE missing_page.page_id = offline_page.page_id)
          FROM offline_page WHERE page_id = ?
          """, [.text(page.rawValue)]
        ).first
      else { return nil }
      return try offlineEntry(page, row, reasons: try offlineActions(impacting: page))
    }
  }

  /// The `offline_action` rows that keep `page` offline (`pagesync why`), by origin then reason; empty if it is
  /// not offline. The same answer as `OfflineForest.reasons(for:)`, read from disk.
  public func reasons(for page: EntityID) throws -> [OfflineAction] {
    try offlineActions(impacting: page)
  }

  private func offlineEntry(_ page: EntityID, _ row: [SQLiteValue], reasons: [OfflineAction]) throws
    -> OfflineEntry
  {
    guard case .integer(let time) = row[1], time >= 0, case .integer(let complete) = row[2],
      case .integer(let missing) = row[3]
    else {
      throw LocalStoreError.corruptValue(
        table: "offline_page", column: "last_downloaded_timestamp, complete", value: "\(row)")
    }
    return OfflineEntry(
      id: page, reasons: reasons, lastDownloadedTimestamp: UInt64(time), complete: complete != 0,
      missing: missing != 0)
  }

  /// `offline_action` rows impacting `page`, sorted by origin, then reason.
  private func offlineActions(impacting page: EntityID) throws -> [OfflineAction] {
    try offlineActions(impactingFrom: page, through: page)
  }

  /// `offline_action` rows impacting a page from `from` through `through` (by id), sorted by impacted page,
  /// origin, then reason.
  private func offlineActions(impactingFrom from: EntityID, through: EntityID) throws -> [OfflineAction] {
    let table = "offline_action"
    let rows = try connection.query(
      """
      SELECT origin_page_id, from_page_id, impacted_page_id, type FROM offline_action
      WHERE impacted_page_id BETWEEN ? AND ?
      """, [.text(from.rawValue), .text(through.rawValue)])
    return try rows.map { row in
      guard case .text(let type) = row[3], let reason = OfflineReason(rawValue: type) else {
        throw LocalStoreError.corruptValue(table: table, column: "type", value: "\(row[3])")
      }
      return OfflineAction(
        origin: try entityID(row[0], table: table, column: "origin_page_id"),
        from: try optionalEntityID(row[1], table: table, column: "from_page_id"),
        impacted: try entityID(row[2], table: table, column: "impacted_page_id"), type: reason)
    }.sorted { a, b in
      if a.impacted != b.impacted { return a.impacted < b.impacted }
      return a.origin != b.origin ? a.origin < b.origin : a.type < b.type
    }
  }
}
