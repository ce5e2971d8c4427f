import DaemonCore
import SQLiteStore
import SyncModel

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
}
