import BrokerStore
import SQLiteStore
import SyncModel

extension LocalStore {
  /// Stores a downloaded delta, in one transaction with the page's `offline_page` bookkeeping
  /// (`last_downloaded_timestamp = delta.lastUpdatedTime`, `complete = 1`; a page not in the offline set has
  /// no such row and only its copy is stored).
  ///
  /// `full`: the local page and its blocks are replaced. Otherwise the header (kind, parent, title, deleted,
  /// and databases, view and rows when the delta carries them) is overwritten, properties merged (nil removes),
  /// blocks upserted (deleted ones removed). The page stays `pending` while it has queued mutations: their
  /// effect is re-applied by the broker's next answer (rebasing local edits is the daemon issue's).
  public func applyDelta(_ delta: PageDelta) throws {
    try connection.transaction(.immediate) {
      let id = SQLiteValue.text(delta.id.rawValue)
      let snapshot = delta.page
      var properties: [String: PropertyValue]
      if delta.full {
        properties = snapshot.properties
        try connection.execute("DELETE FROM local_block WHERE page_id = ?", [id])
      } else {
        properties =
          try connection.query("SELECT properties FROM local_page WHERE id = ?", [id]).first.map {
            try decode([String: PropertyValue].self, $0[0], table: "local_page", column: "properties")
          } ?? [:]
        for (name, value) in delta.properties { properties[name] = value }
      }
      func optionalJSON<T: Encodable>(_ value: T?) throws -> SQLiteValue {
        try value.map { .text(try json($0)) } ?? .null
      }
      // A partial delta leaves absent list fields as they were (COALESCE); a full one sets them all.
      let keep = delta.full ? "excluded" : "local_page"
      try connection.execute(
        """
        INSERT INTO local_page (id, workspace, kind, parent, title, deleted, properties, databases, view, rows,
          last_updated, sync_status)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
          CASE WHEN EXISTS (SELECT 1 FROM mutation_queue WHERE page_id = ?1 AND status = 'pending')
          THEN 'pending' ELSE 'synced' END)
        ON CONFLICT (id) DO UPDATE SET workspace = excluded.workspace, kind = excluded.kind,
          parent = excluded.parent, title = excluded.title, deleted = excluded.deleted,
          properties = excluded.properties,
          databases = CASE WHEN excluded.databases IS NULL THEN \(keep).databases ELSE excluded.databases END,
          view = CASE WHEN excluded.view IS NULL THEN \(keep).view ELSE excluded.view END,
          rows = CASE WHEN excluded.rows IS NULL THEN \(keep).rows ELSE excluded.rows END,
          last_updated = excluded.last_updated, sync_status = excluded.sync_status
        """,
        [
          id, .text(snapshot.workspace.rawValue), .text(snapshot.kind),
          snapshot.parent.map { .text($0.rawValue) } ?? .null, .text(snapshot.title),
          .integer(snapshot.deleted ? 1 : 0), .text(try json(properties)),
          try optionalJSON(snapshot.databases),
          try optionalJSON(snapshot.view), try optionalJSON(snapshot.rows),
          .integer(Int64(delta.lastUpdatedTime)),
        ])
      for block in delta.full ? snapshot.blocks : delta.blocks {
        if block.deleted {
          try connection.execute("DELETE FROM local_block WHERE id = ?", [.text(block.id.rawValue)])
          continue
        }
        try connection.execute(
          """
          INSERT OR REPLACE INTO local_block (id, page_id, type, text, attributes, position, deleted)
          VALUES (?, ?, ?, ?, ?, ?, 0)
          """,
          [
            .text(block.id.rawValue), id, .text(block.type), .text(block.text),
            .text(try json(block.attributes)),
            .real(block.position),
          ])
      }
      try connection.execute(
        "UPDATE offline_page SET last_downloaded_timestamp = ?, complete = 1 WHERE page_id = ?",
        [.integer(Int64(delta.lastUpdatedTime)), id])
    }
  }
}
