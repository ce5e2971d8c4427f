import RichText
import SQLiteStore
import SyncModel

extension LocalStore {
  /// Stores a downloaded delta, in one transaction with the page's `offline_page` bookkeeping
  /// (`last_downloaded_timestamp = delta.lastUpdatedTime`, `complete = 1`, no longer missing; a page not in the
  /// offline set has no such row and only its copy is stored). A download time of 0 (`settle`: to be downloaded
  /// whole) stays 0 after a delta that is not `full`: it came from a fetch asked for before.
  ///
  /// `full`: the local page and its blocks are replaced. Otherwise the header (kind, parent, title, deleted,
  /// and databases, view and rows when the delta carries them) is overwritten, properties merged (nil removes),
  /// blocks upserted (deleted ones removed). A block's text is its CRDT: the delta's state or update merged into
  /// the local state (`mergedText`), so that this device's unsent splices and the broker's merge.
  ///
  /// Rebase: the page stays `pending` while it has queued mutations, and those mutations' local effects are
  /// re-applied on top of the broker's state, in id order, in the same transaction; so the local copy shows the
  /// broker's state plus this device's unsent edits (the broker will re-run them the same way: last writer
  /// wins). The lists this page holds about other pages follow their unsent edits too: a page's `databases`
  /// keeps a database created or moved here, a database's `rows` a row created, moved, deleted or re-valued
  /// here (`refreshRows`). Rejected mutations are not re-applied: the broker's state stands.
  public func applyDelta(_ delta: PageDelta) throws {
    try connection.transaction(.immediate) { try store(delta) }
  }

  /// Stores the deltas of one fetch answer as `applyDelta` does, but in ONE transaction (one fsync for the lot
  /// instead of one per page: a first download of 10,000 pages was 10,000 commits), each delta in its own
  /// savepoint, so one that cannot be stored is rolled back alone. Returns, in order, each delta's error or nil.
  public func applyDeltas(_ deltas: [PageDelta]) throws -> [(any Error)?] {
    try connection.transaction(.immediate) {
      try deltas.map { delta -> (any Error)? in
        do {
          try connection.savepoint("delta") { try store(delta) }
          return nil
        } catch let error as SQLiteError where !connection.isInTransaction {
          throw error  // the transaction itself is gone (a full disk, an I/O error): nothing was stored
        } catch {
          return error
        }
      }
    }
  }

  private func store(_ delta: PageDelta) throws {
    do {
      let id = SQLiteValue.text(delta.id.rawValue)
      let lastUpdated = try storedInteger(delta.lastUpdatedTime, "page \(delta.id)'s lastUpdatedTime")
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
          lastUpdated,
        ])
      TestCrashPoint.reach("delta", inTransaction: true)  // a test hook: the page written, not its blocks
      for block in delta.full ? snapshot.blocks : delta.blocks {
        if block.deleted {
          try connection.execute("DELETE FROM local_block WHERE id = ?", [.text(block.id.rawValue)])
          continue
        }
        // The text: the broker's CRDT merged into the local state (which holds this device's unsent edits).
        let local =
          try connection.query("SELECT crdt FROM local_block WHERE id = ?", [.text(block.id.rawValue)]).first?
          .first ?? .null
        let text = try mergedText(of: block, local: local)
        try connection.execute(
          """
          INSERT OR REPLACE INTO local_block (id, page_id, type, text, attributes, position, deleted, crdt, marks,
            legacy_text)
          VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, 0)
          """,
          [
            .text(block.id.rawValue), id, .text(block.type), .text(text.text),
            .text(try json(block.attributes)),
            .real(block.position), text.crdt, .text(text.marks),
          ])
      }
      for row in try connection.query(
        "SELECT data FROM mutation_queue WHERE page_id = ? AND status = 'pending' ORDER BY id", [id])
      {
        try applyLocally(try decode(Mutation.self, row[0], table: "mutation_queue", column: "data"))
      }
      try rebaseDerivedLists(of: delta.id)
      // A download time of 0 asks for the page whole (`settle` set it: the copy is the device's own). A delta of
      // a fetch asked for before that is merged, but does not take the 0 away: only a whole page does.
      try connection.execute(
        """
        UPDATE offline_page SET complete = 1, last_downloaded_timestamp =
          CASE WHEN ?3 = 0 AND last_downloaded_timestamp = 0 THEN 0 ELSE ?1 END
        WHERE page_id = ?2
        """,
        [lastUpdated, id, .integer(delta.full ? 1 : 0)])
      // The broker has it (again: made since, or access given back): no longer missing.
      try connection.execute("DELETE FROM missing_page WHERE page_id = ?", [id])
    }
  }

  /// Drops the local copies (`local_page` row and blocks) of those of `pages` that are no longer in the offline
  /// set and hold no unsent (pending) mutation, in one transaction; returns the pages dropped, in the order
  /// given. DESIGN: a page that loses its last reason has its local data dropped unless it holds unsent
  /// mutations; the daemon calls this with a `ForestChange`'s `removedPages` once the change is written, and
  /// again for a page whose last pending mutation was acknowledged. Rejected mutations do not keep a copy: they
  /// are kept in the queue, with their data, for recovery.
  public func dropLocalCopies(_ pages: [EntityID]) throws -> [EntityID] {
    try connection.transaction(.immediate) {
      try pages.filter { page in
        let id = SQLiteValue.text(page.rawValue)
        let kept = try !connection.query(
          """
          SELECT 1 WHERE EXISTS (SELECT 1 FROM offline_page WHERE page_id = ?1)
            OR EXISTS (SELECT 1 FROM mutation_queue WHERE page_id = ?1 AND status = 'pending')
          """, [id]
        ).isEmpty
        return try !kept && dropCopy(id)
      }
    }
  }

  /// What `purge` did.
  public struct Purge: Equatable, Sendable {
    /// The pages whose local copy was dropped, in the order given.
    public var dropped: [EntityID] = []
    /// The offline pages marked missing that were not before, in the order given.
    public var foundMissing: [EntityID] = []

    public init(dropped: [EntityID] = [], foundMissing: [EntityID] = []) {
      self.dropped = dropped
      self.foundMissing = foundMissing
    }
  }

  /// For pages the broker says are gone (`gone` in a catch-up or fetch answer, or `revoked`: pages this device
  /// may not see, never existed or no longer reachable; a deleted page is a delta, not gone), in one
  /// transaction: their local copies are dropped unless they hold pending mutations (the user's work; the broker
  /// decides on them), and their `offline_page` rows become `complete = 0, last_downloaded_timestamp = 0`: not
  /// shown offline, downloaded whole if they come back. Their `offline_action` rows stay: the user asked for
  /// them, and only the user removes a reason.
  ///
  /// Those in the offline set are marked missing (`missing_page`, at `nowMillis`) unless they hold pending
  /// mutations (a page made here whose create is not pushed yet is not missing, only not there yet). The mark
  /// goes when a download of the page is stored (`applyDeltas`) or when it leaves the offline set.
  public func purge(_ pages: [EntityID], nowMillis: UInt64) throws -> Purge {
    let now = try storedInteger(nowMillis, "the time a page was found missing")
    return try connection.transaction(.immediate) {
      var purge = Purge()
      for page in pages {
        let id = SQLiteValue.text(page.rawValue)
        try connection.execute(
          "UPDATE offline_page SET complete = 0, last_downloaded_timestamp = 0 WHERE page_id = ?", [id])
        let pending = try !connection.query(
          "SELECT 1 FROM mutation_queue WHERE page_id = ? AND status = 'pending' LIMIT 1", [id]
        ).isEmpty
        if pending { continue }
        if try dropCopy(id) { purge.dropped.append(page) }
        try connection.execute(
          """
          INSERT INTO missing_page (page_id, found_at_ms) SELECT page_id, ?2 FROM offline_page WHERE page_id = ?1
          ON CONFLICT (page_id) DO NOTHING
          """, [id, now])
        if connection.changes > 0 { purge.foundMissing.append(page) }
      }
      return purge
    }
  }

  /// The offline pages marked missing (`purge`), by id.
  public func missingPages() throws -> [EntityID] {
    try connection.query("SELECT page_id FROM missing_page ORDER BY page_id").map {
      try entityID($0[0], table: "missing_page", column: "page_id")
    }
  }

  /// Deletes a page's local row and blocks; whether there was anything to delete.
  private func dropCopy(_ id: SQLiteValue) throws -> Bool {
    try connection.execute("DELETE FROM local_page WHERE id = ?", [id])
    var dropped = connection.changes > 0
    try connection.execute("DELETE FROM local_block WHERE page_id = ?", [id])
    dropped = dropped || connection.changes > 0
    return dropped
  }
}
