import RichText
import SQLiteStore
import SyncModel

/// A mutation refused for its page only.
struct Rejection: Error {
  var reason: RejectionReason
  init(_ reason: RejectionReason) { self.reason = reason }
}

/// A broken rule of the store's own code, never the client's fault: the batch fails whole (HTTP 500).
enum PageStoreError: Error, CustomStringConvertible {
  /// A mutation was rejected after it had written: ApplyContext must decide rejections before writing.
  case rejectedAfterWriting(mutation: UInt64, reason: RejectionReason)
  /// A block's stored text state does not decode.
  case corruptText(String)

  var description: String {
    switch self {
    case .rejectedAfterWriting(let mutation, let reason):
      "mutation \(mutation) was rejected (\(reason.name)) after it had written: the batch was not applied"
    case .corruptText(let why): "a block's stored text state is corrupt: \(why)"
    }
  }
}

/// The columns of `page` a mutation works with.
struct PageRow {
  var id: EntityID
  var workspace: EntityID
  var kind: String
  var parent: EntityID?
  var parentStamp: String
  var titleStamp: String
  var deleted: Bool
  var deletedStamp: String
  var isDatabase: Bool { kind == "database" }
}

/// What one batch changed so far: fields per page, and the rows in view of each database it touched as they were
/// before the batch.
struct ChangeSet {
  var fields: [EntityID: Set<String>] = [:]
  var databasesBefore: [EntityID: [EntityID]] = [:]

  mutating func record(_ page: EntityID, _ field: String) { fields[page, default: []].insert(field) }

  mutating func merge(_ other: ChangeSet) {
    for (page, names) in other.fields { fields[page, default: []].formUnion(names) }
    for (database, rows) in other.databasesBefore where databasesBefore[database] == nil {
      databasesBefore[database] = rows
    }
  }
}

extension PageStore {
  /// Applies `batch` for `user`, who may write `workspaces`, inside the caller's transaction.
  ///
  /// Exactly once: mutations at or below the client's last applied id are acknowledged as duplicates and not
  /// applied again; the new last id is written in the same transaction as the effects. A batch that starts past
  /// the next id is refused whole (`gap`), as is one whose client id belongs to another user.
  ///
  /// A re-send is told from a reused id by the digest kept of what the id carried (`mutation_digest`, the
  /// client's newest `digestsPerClient`): a mutation at or below the last id whose content differs is
  /// `id_reused` (two copies of one device's store numbered different edits alike; `duplicate` would make the
  /// device drop an edit never applied), and so is every later one of the batch but a matching re-send, none
  /// applied and none of their ids consumed: the device sends them again under a new client id.
  public func apply(
    _ batch: MutationBatch, user: EntityID, workspaces: Set<EntityID>, nowMillis: UInt64
  ) throws -> BatchOutcome {
    guard batch.mutations.count <= maxMutationsPerBatch else {
      throw BatchError.tooManyMutations(limit: maxMutationsPerBatch)
    }
    guard workspaces.contains(batch.workspace) else { throw BatchError.workspaceForbidden(batch.workspace) }
    guard batch.hasConsecutiveIDs else { throw BatchError.nonConsecutiveIDs }
    let client = try connection.query(
      "SELECT user_id, last_mutation_id, recent_digests FROM client WHERE id = ?",
      [.text(batch.client.rawValue)]
    ).first
    if let client, client[0] != .text(user.rawValue) { throw BatchError.clientOfAnotherUser }
    let last: UInt64 = if case .integer(let value)? = client?[1] { UInt64(value) } else { 0 }
    if let first = batch.mutations.first, first.id > last + 1 {
      throw BatchError.gap(expected: last + 1, received: first.id)
    }

    // A time far ahead would win every last-writer-wins field it touches for as long: refused.
    let (latestTime, overflow) = nowMillis.addingReportingOverflow(maxClockAheadMillis)
    let latest = overflow ? UInt64.max : latestTime
    let seq = try metaNumber("sequence") + 1
    var results: [MutationResult] = []
    var changes = ChangeSet()
    var context = ApplyContext(
      store: self, batch: batch, workspaces: workspaces, seq: seq, nowMillis: nowMillis)
    var reused = false
    var digests = ClientDigests(client: batch.client, last: last, recentDigests: client?[2])
    for mutation in batch.mutations {
      // Ids start at 1: an id 0 is not a re-send of anything (every client's last id is at least 0), so it is
      // rejected, never acknowledged as a duplicate that the client would then drop.
      if mutation.id == 0 {
        results.append(
          MutationResult(mutationId: 0, page: mutation.page, status: .rejected, reason: .invalidValue))
        continue
      }
      if mutation.id <= last {
        // Another mutation under a used id: not a re-send. Without a digest (older than the kept ones) it is
        // taken for one, as before digests were kept.
        let known = digestsPerClient == 0 ? nil : try digests.digest(of: mutation.id, in: self)
        if known.map({ $0 != ClientDigests.stored(mutation.contentDigest) }) ?? reused {
          reused = true
          results.append(
            MutationResult(mutationId: mutation.id, page: mutation.page, status: .rejected, reason: .idReused)
          )
          continue
        }
        // A re-sent rejection is rejected again, with its reason: `duplicate` would read as applied.
        if let reason = try rejection(of: mutation.id, client: batch.client) {
          results.append(
            MutationResult(mutationId: mutation.id, page: mutation.page, status: .rejected, reason: reason))
        } else {
          results.append(MutationResult(mutationId: mutation.id, page: mutation.page, status: .duplicate))
        }
        continue
      }
      if reused {
        // After a reused id, the batch's new ids are that other copy's numbering too: none is consumed.
        results.append(
          MutationResult(mutationId: mutation.id, page: mutation.page, status: .rejected, reason: .idReused))
        continue
      }
      // Every id consumed from here on (applied or rejected) keeps what it carried.
      if digestsPerClient > 0 { try digests.record(mutation.contentDigest, of: mutation.id, in: self) }
      if mutation.time.millis > latest {
        try recordRejection(of: mutation.id, client: batch.client, reason: .clockAhead)
        results.append(
          MutationResult(mutationId: mutation.id, page: mutation.page, status: .rejected, reason: .clockAhead)
        )
        continue
      }
      if let reason = mutation.validate(limits) {
        try recordRejection(of: mutation.id, client: batch.client, reason: reason)
        results.append(
          MutationResult(mutationId: mutation.id, page: mutation.page, status: .rejected, reason: reason))
        continue
      }
      // No savepoint per mutation: ApplyContext decides every rejection before the mutation's first write, so a
      // rejected mutation leaves nothing to undo. (A savepoint would copy every page the mutation touches into
      // the sub-journal: a sixth of the writer's time in W1.) If that rule is ever broken, the batch fails whole
      // and the writer's savepoint for the job undoes it, rather than a half-applied mutation being committed.
      let changesBefore = connection.totalChanges
      do {
        context.changes = ChangeSet()
        try context.apply(mutation)
        changes.merge(context.changes)
        results.append(MutationResult(mutationId: mutation.id, page: mutation.page, status: .applied))
      } catch let rejection as Rejection {
        guard connection.totalChanges == changesBefore else {
          throw PageStoreError.rejectedAfterWriting(mutation: mutation.id, reason: rejection.reason)
        }
        try recordRejection(of: mutation.id, client: batch.client, reason: rejection.reason)
        results.append(
          MutationResult(
            mutationId: mutation.id, page: mutation.page, status: .rejected, reason: rejection.reason))
      }
    }
    let newLast = reused ? last : max(last, batch.mutations.last?.id ?? last)
    try digests.save(last: newLast, keep: digestsPerClient, in: self)
    try connection.execute(
      """
      INSERT INTO client (id, user_id, last_mutation_id, recent_digests) VALUES (?, ?, ?, ?)
      ON CONFLICT (id) DO UPDATE SET last_mutation_id = excluded.last_mutation_id,
        recent_digests = excluded.recent_digests
      """,
      [
        .text(batch.client.rawValue), .text(user.rawValue), .integer(Int64(newLast)),
        digests.recentDigests(last: newLast),
      ])

    // A database whose rows in view changed changes too.
    for (database, before) in changes.databasesBefore where try rowsInView(of: database) != before {
      changes.record(database, "rows")
    }
    var pages: [EntityID: UInt64] = [:]
    if !changes.fields.isEmpty {
      try setMeta("sequence", String(seq))
      let touch = try connection.cachedStatement(
        "UPDATE page SET last_updated = ?, updated_at_ms = ? WHERE id = ?")
      let log = try connection.cachedStatement(
        "INSERT OR IGNORE INTO change_log (page_id, seq, field) VALUES (?, ?, ?)")
      for (page, fields) in changes.fields {
        try touch.bind([.integer(Int64(seq)), .integer(Int64(nowMillis)), .text(page.rawValue)])
        _ = try touch.step()
        for field in fields {
          try log.bind([.text(page.rawValue), .integer(Int64(seq)), .text(field)])
          _ = try log.step()
        }
        pages[page] = seq
      }
    }
    // A re-sent batch answers with the pages' current times, as the first answer did (or later ones).
    for result in results where result.status == .duplicate && pages[result.page] == nil {
      if let row = try loadPage(result.page), workspaces.contains(row.workspace) {
        pages[result.page] = try lastUpdated(of: result.page)
      }
    }
    var pageWorkspaces: [EntityID: EntityID] = [:]
    for page in pages.keys {
      if let workspace = context.knownWorkspaces[page] {
        pageWorkspaces[page] = workspace
      } else if let row = try loadPage(page) {
        pageWorkspaces[page] = row.workspace
      }
    }
    return BatchOutcome(
      results: results, pages: pages, sequence: changes.fields.isEmpty ? nil : seq, lastMutationId: newLast,
      epoch: epoch, workspaces: pageWorkspaces)
  }

  /// Keeps why a mutation was rejected, in the batch's transaction, for a re-send of it.
  func recordRejection(of mutation: UInt64, client: EntityID, reason: RejectionReason) throws {
    try connection.execute(
      "INSERT OR REPLACE INTO rejection (client_id, mutation_id, code) VALUES (?, ?, ?)",
      [.text(client.rawValue), .integer(Int64(mutation)), .integer(Int64(reason.code))])
  }

  /// Why the client's mutation was rejected, if it was.
  func rejection(of mutation: UInt64, client: EntityID) throws -> RejectionReason? {
    guard
      case .integer(let code)? = try connection.query(
        "SELECT code FROM rejection WHERE client_id = ? AND mutation_id = ?",
        [.text(client.rawValue), .integer(Int64(mutation))]
      ).first?.first
    else { return nil }
    return RejectionReason.all.first { $0.code == Int(code) }
      ?? RejectionReason(code: Int(code), name: "unknown_\(code)")
  }

  func loadPage(_ id: EntityID) throws -> PageRow? {
    let statement = try connection.cachedStatement(
      """
      SELECT workspace_id, kind, parent_id, parent_stamp, title_stamp, deleted, deleted_stamp
      FROM page WHERE id = ?
      """)
    try statement.bind([.text(id.rawValue)])
    defer { statement.reset() }
    guard try statement.step() else { return nil }
    return PageRow(
      id: id, workspace: EntityID(trusted: statement.string(0) ?? ""), kind: statement.string(1) ?? "page",
      parent: statement.string(2).map(EntityID.init(trusted:)), parentStamp: statement.string(3) ?? "",
      titleStamp: statement.string(4) ?? "", deleted: statement.int64(5) != 0,
      deletedStamp: statement.string(6) ?? "")
  }

  func lastUpdated(of page: EntityID) throws -> UInt64 {
    guard
      case .integer(let value)? = try connection.query(
        "SELECT last_updated FROM page WHERE id = ?", [.text(page.rawValue)]
      ).first?.first
    else { return 0 }
    return UInt64(value)
  }
}

extension EntityID {
  /// An id read back from our own store, validated when it was written.
  init(trusted rawValue: String) {
    // Ids in the store were validated on the way in; a corrupt one still must not crash the broker.
    self = (try? EntityID(validating: rawValue)) ?? (try! EntityID(validating: "invalid"))
  }
}

/// Runs one mutation against the store and records what it changed.
///
/// The rule: every `Rejection` is thrown before the mutation's first write (checks first, then writes), so a
/// rejected mutation needs no rollback. `apply(_:user:workspaces:nowMillis:)` verifies it on every rejection.
struct ApplyContext {
  let store: PageStore
  let batch: MutationBatch
  let workspaces: Set<EntityID>
  let seq: UInt64
  let nowMillis: UInt64
  var changes = ChangeSet()
  /// The workspace of every page this batch read or created (a page never changes workspace), so that the
  /// batch's answer need not read them again.
  var knownWorkspaces: [EntityID: EntityID] = [:]

  var connection: SQLiteConnection { store.connection }

  init(store: PageStore, batch: MutationBatch, workspaces: Set<EntityID>, seq: UInt64, nowMillis: UInt64) {
    self.store = store
    self.batch = batch
    self.workspaces = workspaces
    self.seq = seq
    self.nowMillis = nowMillis
  }

  /// A page the client may see and write, not deleted. A page outside its workspaces is "unknown": its
  /// existence must not leak.
  mutating func writablePage(_ id: EntityID) throws -> PageRow {
    guard let row = try store.loadPage(id), workspaces.contains(row.workspace) else {
      throw Rejection(.unknownPage)
    }
    knownWorkspaces[id] = row.workspace
    if row.deleted { throw Rejection(.pageDeleted) }
    return row
  }

  /// Remembers a database's rows in view before the batch first touches them.
  mutating func touchDatabase(_ id: EntityID?) throws {
    guard let id, changes.databasesBefore[id] == nil else { return }
    guard let row = try store.loadPage(id), row.isDatabase else { return }
    changes.databasesBefore[id] = try store.rowsInView(of: id)
  }

  mutating func apply(_ mutation: Mutation) throws {
    let stamp = LWWStamp(time: mutation.time, client: batch.client).sortKey
    let page = mutation.page
    switch mutation.action {
    case .createPage(let parent, let title):
      try create(page, kind: "page", parent: parent, title: title, stamp: stamp)
    case .createDatabase(let parent, let title):
      try create(page, kind: "database", parent: parent, title: title, stamp: stamp)
      try connection.execute(
        "INSERT INTO view (database_id, filter, sort, stamp) VALUES (?, NULL, NULL, ?)",
        [.text(page.rawValue), .text(stamp)])
    case .createRow(let database, let title, let properties):
      let parent = try writablePage(database)
      guard parent.isDatabase else { throw Rejection(.notADatabase) }
      try touchDatabase(database)
      try create(page, kind: "page", parent: database, title: title, stamp: stamp)
      for (name, value) in properties {
        try connection.execute(
          "INSERT INTO property (page_id, name, value, stamp) VALUES (?, ?, ?, ?)",
          [.text(page.rawValue), .text(name), .text(store.json(value)), .text(stamp)])
      }
    case .setTitle(let title):
      let row = try writablePage(page)
      if LastWriterWins.replaces(stamp, over: row.titleStamp) {
        try connection.execute(
          "UPDATE page SET title = ?, title_stamp = ? WHERE id = ?",
          [.text(title), .text(stamp), .text(page.rawValue)])
        changes.record(page, "title")
      }
    case .setProperty(let name, let value):
      let row = try writablePage(page)
      let current = try connection.query(
        "SELECT stamp FROM property WHERE page_id = ? AND name = ?", [.text(page.rawValue), .text(name)]
      ).first?.first
      if case .text(let existing)? = current, !LastWriterWins.replaces(stamp, over: existing) { return }
      try touchDatabase(row.parent)
      try connection.execute(
        """
        INSERT INTO property (page_id, name, value, stamp) VALUES (?, ?, ?, ?)
        ON CONFLICT (page_id, name) DO UPDATE SET value = excluded.value, stamp = excluded.stamp
        """,
        [.text(page.rawValue), .text(name), value.map { .text(store.json($0)) } ?? .null, .text(stamp)])
      changes.record(page, "property:" + name)
    case .addBlock(let block, let type, let text, let after, let attributes):
      _ = try writablePage(page)
      if try !connection.query("SELECT 1 FROM block WHERE id = ?", [.text(block.rawValue)]).isEmpty {
        throw Rejection(.alreadyExists)
      }
      let position = try positionAfter(after, on: page, excluding: block)
      // The first text: ids every replica derives from it (`initialTextClient`), stamped with this batch.
      let document = TextDocument(text: text, client: initialTextClient, seq: seq)
      try connection.execute(
        """
        INSERT INTO block (id, page_id, type, text, text_stamp, attributes, attributes_stamp, position,
                           position_stamp, deleted, deleted_stamp, crdt)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)
        """,
        [
          .text(block.rawValue), .text(page.rawValue), .text(type), .text(text), .text(stamp),
          .text(store.json(attributes)), .text(stamp), .real(position), .text(stamp), .text(stamp),
          .blob(document.encoded()),
        ])
      changes.record(page, "block:" + block.rawValue)
    case .editBlock(let block, let text, let attributes):
      _ = try writablePage(page)
      let stamps = try liveBlock(block, on: page)
      // The text of a client that predates the CRDT is merged, never last-writer-wins (DESIGN, "Rich text
      // merges"). Checked before anything is written: a text too large throws first.
      if let text { try replaceText(of: block, on: page, with: text) }
      if let attributes, LastWriterWins.replaces(stamp, over: stamps.attributes) {
        try connection.execute(
          "UPDATE block SET attributes = ?, attributes_stamp = ? WHERE id = ?",
          [.text(store.json(attributes)), .text(stamp), .text(block.rawValue)])
        changes.record(page, "block:" + block.rawValue)
      }
    case .spliceText(let block, let ops), .markText(let block, let ops):
      try applyText(ops, to: block, on: page)
    case .moveBlock(let block, let after):
      _ = try writablePage(page)
      let stamps = try liveBlock(block, on: page)
      if LastWriterWins.replaces(stamp, over: stamps.position) {
        let position = try positionAfter(after, on: page, excluding: block)
        try connection.execute(
          "UPDATE block SET position = ?, position_stamp = ? WHERE id = ?",
          [.real(position), .text(stamp), .text(block.rawValue)])
        changes.record(page, "block:" + block.rawValue)
      }
    case .deleteBlock(let block):
      _ = try writablePage(page)
      let stamps = try liveBlock(block, on: page)
      if LastWriterWins.replaces(stamp, over: stamps.deleted) {
        try connection.execute(
          "UPDATE block SET deleted = 1, deleted_stamp = ? WHERE id = ?",
          [.text(stamp), .text(block.rawValue)])
        changes.record(page, "block:" + block.rawValue)
      }
    case .movePage(let parent):
      let row = try writablePage(page)
      guard LastWriterWins.replaces(stamp, over: row.parentStamp), parent != row.parent else { return }
      if let parent {
        let target = try writablePage(parent)
        guard target.workspace == row.workspace else { throw Rejection(.invalidParent) }
        if row.isDatabase && target.isDatabase { throw Rejection(.invalidParent) }
        // No cycles: the new parent must not be the page or one of its descendants.
        var ancestor: EntityID? = parent
        var steps = 0
        while let current = ancestor, steps < 10_000 {
          if current == page { throw Rejection(.invalidParent) }
          ancestor = try store.loadPage(current)?.parent
          steps += 1
        }
      }
      try touchDatabase(row.parent)
      try touchDatabase(parent)
      try connection.execute(
        "UPDATE page SET parent_id = ?, parent_stamp = ? WHERE id = ?",
        [parent.map { .text($0.rawValue) } ?? .null, .text(stamp), .text(page.rawValue)])
      changes.record(page, "parent")
      if row.isDatabase {
        if let old = row.parent { changes.record(old, "databases") }
        if let parent { changes.record(parent, "databases") }
      }
    case .deletePage:
      let row = try writablePage(page)
      guard LastWriterWins.replaces(stamp, over: row.deletedStamp) else { return }
      try touchDatabase(row.parent)
      try connection.execute(
        "UPDATE page SET deleted = 1, deleted_stamp = ? WHERE id = ?", [.text(stamp), .text(page.rawValue)])
      changes.record(page, "deleted")
      if row.isDatabase, let parent = row.parent { changes.record(parent, "databases") }
    case .setView(let filter, let sort):
      let row = try writablePage(page)
      guard row.isDatabase else { throw Rejection(.notADatabase) }
      let current = try connection.query(
        "SELECT stamp FROM view WHERE database_id = ?", [.text(page.rawValue)])
      if case .text(let existing)? = current.first?.first, !LastWriterWins.replaces(stamp, over: existing) {
        return
      }
      try touchDatabase(page)
      try connection.execute(
        """
        INSERT INTO view (database_id, filter, sort, stamp) VALUES (?, ?, ?, ?)
        ON CONFLICT (database_id) DO UPDATE SET filter = excluded.filter, sort = excluded.sort, stamp = excluded.stamp
        """,
        [
          .text(page.rawValue), filter.map { .text(store.json($0)) } ?? .null,
          sort.map { .text(store.json($0)) } ?? .null,
          .text(stamp),
        ])
      changes.record(page, "view")
    }
  }

  private mutating func create(_ id: EntityID, kind: String, parent: EntityID?, title: String, stamp: String)
    throws
  {
    if try store.loadPage(id) != nil { throw Rejection(.alreadyExists) }
    var workspace = batch.workspace
    if let parent {
      let parentRow = try writablePage(parent)
      // A database's parent is a page; a page's parent is a page or (as a row) a database.
      if kind == "database" && parentRow.isDatabase { throw Rejection(.invalidParent) }
      // A page made in a database is one of its rows: the database's rows in view may change.
      if parentRow.isDatabase { try touchDatabase(parent) }
      workspace = parentRow.workspace
      if kind == "database" { changes.record(parent, "databases") }
    }
    try connection.execute(
      """
      INSERT INTO page (id, workspace_id, kind, parent_id, parent_stamp, title, title_stamp, deleted, deleted_stamp,
                        created_seq, last_updated, updated_at_ms)
      VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)
      """,
      [
        .text(id.rawValue), .text(workspace.rawValue), .text(kind),
        parent.map { .text($0.rawValue) } ?? .null,
        .text(stamp), .text(title), .text(stamp), .text(stamp), .integer(Int64(seq)), .integer(Int64(seq)),
        .integer(Int64(nowMillis)),
      ])
    changes.record(id, "created")
    knownWorkspaces[id] = workspace
  }

  /// The stamps of a live block of `page`; unknown, deleted or elsewhere → `unknownBlock`.
  private func liveBlock(_ block: EntityID, on page: EntityID) throws -> (
    text: String, attributes: String, position: String, deleted: String
  ) {
    guard
      let row = try connection.query(
        "SELECT page_id, deleted, text_stamp, attributes_stamp, position_stamp, deleted_stamp FROM block WHERE id = ?",
        [.text(block.rawValue)]
      ).first,
      row[0] == .text(page.rawValue), row[1] == .integer(0),
      case .text(let text) = row[2], case .text(let attributes) = row[3], case .text(let position) = row[4],
      case .text(let deleted) = row[5]
    else { throw Rejection(.unknownBlock) }
    return (text, attributes, position, deleted)
  }

  /// Where a block goes `after` another (`BlockPlacement`'s rule, shared with the device), among the page's
  /// blocks with their tombstones; a renumbering it calls for is written first, and its blocks are in the delta.
  private mutating func positionAfter(_ after: EntityID?, on page: EntityID, excluding block: EntityID) throws
    -> Double
  {
    let blocks = try connection.query(
      "SELECT id, position FROM block WHERE page_id = ? AND id != ? ORDER BY position, id",
      [.text(page.rawValue), .text(block.rawValue)]
    ).compactMap { row -> BlockPlacement.Slot? in
      guard case .text(let id) = row[0], case .real(let position) = row[1] else { return nil }
      return BlockPlacement.Slot(id: EntityID(trusted: id), position: position)
    }
    let decision = BlockPlacement.place(after: after, among: blocks)
    for slot in decision.renumbered {
      try connection.execute(
        "UPDATE block SET position = ? WHERE id = ?", [.real(slot.position), .text(slot.id.rawValue)])
      changes.record(page, "block:" + slot.id.rawValue)
    }
    return decision.position
  }
}
