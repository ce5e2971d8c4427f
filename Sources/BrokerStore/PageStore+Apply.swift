import RichText
import SQLiteStore
import SyncModel

/// A mutation refused for its page only.
struct Rejection: Error {
  var reason: RejectionReason
  /// What was wrong in words, naming the limit, when the reason alone does not say (`MutationResult.message`).
  var message: String?
  init(_ reason: RejectionReason, message: String? = nil) {
    self.reason = reason
    self.message = message
  }
}

/// A broken rule of the store's own code, never the client's fault: the batch fails whole (HTTP 500).
enum PageStoreError: Error, CustomStringConvertible {
  /// A mutation was rejected after it had written: ApplyContext must decide rejections before writing.
  case rejectedAfterWriting(mutation: UInt64, reason: RejectionReason)
  /// A block's stored text state does not decode.
  case corruptText(String)
  /// A mutation's work was charged after it had written: ApplyContext must charge before writing.
  case budgetSpentAfterWriting(UInt64)

  var description: String {
    switch self {
    case .rejectedAfterWriting(let mutation, let reason):
      "mutation \(mutation) was rejected (\(reason.name)) after it had written: the batch was not applied"
    case .corruptText(let why): "a block's stored text state is corrupt: \(why)"
    case .budgetSpentAfterWriting(let mutation):
      "mutation \(mutation) ran out of the batch's work budget after it had written: the batch was not applied"
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
  /// The title's length in UTF-8 bytes (its share of the page's stored size).
  var titleBytes: Int
  var deleted: Bool
  var deletedStamp: String
  var isDatabase: Bool { kind == "database" }
}

/// What one batch changed: fields per page. What a mutation records is pending until the mutation is kept (it
/// applied) or dropped (it was rejected or postponed): a list, not a set of sets per mutation, which cost a
/// twentieth of the writer's instructions per one-mutation batch in allocations and hashing (callgrind).
struct ChangeSet {
  private(set) var fields: [EntityID: Set<String>] = [:]
  private var pending: [(page: EntityID, field: String)] = []

  mutating func record(_ page: EntityID, _ field: String) { pending.append((page, field)) }

  /// What the mutation recorded becomes the batch's.
  mutating func keepMutation() {
    for (page, field) in pending { fields[page, default: []].insert(field) }
    pending.removeAll(keepingCapacity: true)
  }

  /// What the mutation recorded is forgotten.
  mutating func dropMutation() { pending.removeAll(keepingCapacity: true) }
}

extension PageStore {
  /// Applies `batch` for `user`, who may write `workspaces`, inside the caller's transaction.
  ///
  /// Exactly once: mutations at or below the client's last applied id are acknowledged as duplicates and not
  /// applied again; the new last id is written in the same transaction as the effects. A batch that starts past
  /// the next id is refused whole (`gap`), as is one whose client id belongs to another user.
  ///
  /// Bounded work: a mutation whose work (`BatchWork`: what depends on the data, such as pages walked up a tree
  /// or a database's rows) would take the batch's past `maxBatchWork` is not applied, and neither is any after
  /// it. The answer then covers the mutations before it, and `lastMutationId` is the last of them: the client
  /// sends the others again, in a batch of their own, as it would after a lost answer. Work is charged before a
  /// mutation writes (as rejections are decided), so a mutation left out leaves nothing behind. The budget
  /// counts from the end of the batch's first mutation that does any work, which always runs: every batch makes
  /// progress, and a batch's work is at most its first mutation's plus the budget.
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
    // Before anything is read: batches of one workspace are serialised until commit (PostgreSQL; SQLite's one
    // writer already is), so that the sequence taken below is in commit order within the workspace; and batches
    // of one client, so that two in different workspaces neither read the same last id nor wait on its row.
    try connection.lockForBatch(workspace: batch.workspace.rawValue, client: batch.client.rawValue)
    let client = try clientRow(batch.client)
    if let client, client.user != user.rawValue { throw BatchError.clientOfAnotherUser }
    let last = client?.last ?? 0
    if let first = batch.mutations.first, first.id > last + 1 {
      throw BatchError.gap(expected: last + 1, received: first.id)
    }

    // A time far ahead would win every last-writer-wins field it touches for as long: refused.
    let (latestTime, overflow) = nowMillis.addingReportingOverflow(maxClockAheadMillis)
    let latest = overflow ? UInt64.max : latestTime
    let seq = try nextSequence()
    var results: [MutationResult] = []
    var context = ApplyContext(
      store: self, batch: batch, workspaces: workspaces, seq: seq, nowMillis: nowMillis)
    var reused = false
    var digests = ClientDigests(client: batch.client, last: last, recentDigests: client?.recentDigests)
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
        if let rejected = try rejection(of: mutation.id, client: batch.client) {
          results.append(
            MutationResult(
              mutationId: mutation.id, page: mutation.page, status: .rejected, reason: rejected.reason,
              message: rejected.message))
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
        // The one rule whose reason alone does not say what is wrong gets a message naming it.
        let message = reason == .invalidValue && mutation.holdsNUL ? Mutation.nulMessage : nil
        try recordRejection(of: mutation.id, client: batch.client, reason: reason, message: message)
        results.append(
          MutationResult(
            mutationId: mutation.id, page: mutation.page, status: .rejected, reason: reason, message: message)
        )
        continue
      }
      // No savepoint per mutation: ApplyContext decides every rejection before the mutation's first write, so a
      // rejected mutation leaves nothing to undo. (A savepoint would copy every page the mutation touches into
      // the sub-journal: a sixth of the writer's time in W1.) If that rule is ever broken, the batch fails whole
      // and the writer's savepoint for the job undoes it, rather than a half-applied mutation being committed.
      let changesBefore = connection.totalChanges
      defer { context.endMutation() }
      do {
        try context.apply(mutation)
        context.changes.keepMutation()
        context.growth.keepMutation()
        results.append(MutationResult(mutationId: mutation.id, page: mutation.page, status: .applied))
      } catch is WorkBudgetSpent {
        context.changes.dropMutation()
        // Left, with every mutation after it, for the client's next batch.
        guard connection.totalChanges == changesBefore else {
          throw PageStoreError.budgetSpentAfterWriting(mutation.id)
        }
        break
      } catch let rejection as Rejection {
        guard connection.totalChanges == changesBefore else {
          throw PageStoreError.rejectedAfterWriting(mutation: mutation.id, reason: rejection.reason)
        }
        context.changes.dropMutation()
        context.growth.dropMutation()
        try recordRejection(
          of: mutation.id, client: batch.client, reason: rejection.reason, message: rejection.message)
        results.append(
          MutationResult(
            mutationId: mutation.id, page: mutation.page, status: .rejected, reason: rejection.reason,
            message: rejection.message))
      }
    }
    // A reused id consumes none; a batch answered in part (the work budget), only those it answered.
    let newLast = reused ? last : max(last, results.last?.mutationId ?? last)
    try digests.save(last: newLast, keep: digestsPerClient, in: self)
    let row = ClientRow(
      user: user.rawValue, last: newLast, recentDigests: digests.recentDigests(last: newLast))
    if defersGroupWrites {
      jobWrites.clients[batch.client] = row
    } else {
      try connection.execute(
        Self.clientUpsertSQL,
        [.text(batch.client.rawValue), .text(row.user), .integer(Int64(row.last)), row.recentDigests])
    }

    // A database whose rows in view changed changes too.
    var changes = context.changes
    for (database, before) in context.databasesBefore where try rowsInView(of: database) != before {
      changes.record(database, "rows")
    }
    changes.keepMutation()
    // Each page row is written once: a changed page's growth goes with its new time (below).
    var growth = context.growth.batch
    try writeGrowth(growth.filter { changes.fields[$0.key] == nil })
    var pages: [EntityID: UInt64] = [:]
    if !changes.fields.isEmpty {
      if defersGroupWrites {
        jobWrites.sequence = seq
      } else if connection.engine == .sqlite {
        try setMeta("sequence", String(seq))
      }
      let touch = try connection.statement(
        connection.engine == .sqlite
          ? """
          UPDATE page SET last_updated = ?, updated_at_ms = ?, stored_bytes = coalesce(stored_bytes, 0) + ?
          WHERE id = ?
          """
          : """
          UPDATE page SET last_updated = ?, updated_at_ms = ?, stored_bytes = coalesce(stored_bytes, 0) + ?,
            change_xid = pg_current_xact_id()
          WHERE id = ?
          """
      )
      let log = try connection.statement(
        "INSERT INTO change_log (page_id, seq, field) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
      for (page, fields) in changes.fields {
        let grown = growth.removeValue(forKey: page) ?? 0
        try touch.bind([
          .integer(Int64(seq)), .integer(Int64(nowMillis)), .integer(Int64(grown)), .text(page.rawValue),
        ])
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

  /// The client's row: as this writer group's batches left it (`defersGroupWrites`), or as stored.
  func clientRow(_ client: EntityID) throws -> ClientRow? {
    if let kept = jobWrites.clients[client] ?? groupWrites.clients[client] ?? writerCache.clients[client] {
      return kept
    }
    guard
      let row = try connection.query(
        "SELECT user_id, last_mutation_id, recent_digests FROM client WHERE id = ?", [.text(client.rawValue)]
      ).first
    else { return nil }
    let user: String = if case .text(let user) = row[0] { user } else { "" }
    let last: UInt64 = if case .integer(let value) = row[1] { UInt64(value) } else { 0 }
    let stored = ClientRow(user: user, last: last, recentDigests: row[2])
    // Read inside a group, the row is still the last committed one: a group writes client rows only at its end.
    if defersGroupWrites && writerCacheRows > 0 {
      if writerCache.clients.count >= writerCacheRows { writerCache.clients.removeAll(keepingCapacity: true) }
      writerCache.clients[client] = stored
    }
    return stored
  }

  /// Keeps why a mutation was rejected, in the batch's transaction, for a re-send of it.
  func recordRejection(
    of mutation: UInt64, client: EntityID, reason: RejectionReason, message: String? = nil
  ) throws {
    try connection.execute(
      """
      INSERT INTO rejection (client_id, mutation_id, code, message) VALUES (?, ?, ?, ?)
      ON CONFLICT (client_id, mutation_id) DO UPDATE SET code = excluded.code, message = excluded.message
      """,
      [
        .text(client.rawValue), .integer(Int64(mutation)), .integer(Int64(reason.code)),
        message.map { .text($0) } ?? .null,
      ])
  }

  /// Why the client's mutation was rejected, if it was.
  func rejection(of mutation: UInt64, client: EntityID) throws -> Rejection? {
    guard
      let row = try connection.query(
        "SELECT code, message FROM rejection WHERE client_id = ? AND mutation_id = ?",
        [.text(client.rawValue), .integer(Int64(mutation))]
      ).first, case .integer(let code) = row[0]
    else { return nil }
    let reason =
      RejectionReason.all.first { $0.code == Int(code) }
      ?? RejectionReason(code: Int(code), name: "unknown_\(code)")
    let message: String? = if case .text(let message) = row[1] { message } else { nil }
    return Rejection(reason, message: message)
  }

  func loadPage(_ id: EntityID) throws -> PageRow? {
    if defersGroupWrites, let kept = writerCache.pages[id] { return kept }
    let statement = try connection.statement(
      """
      SELECT workspace_id, kind, parent_id, parent_stamp, title_stamp, deleted, deleted_stamp,
        length(CAST(title AS BLOB))
      FROM page WHERE id = ?
      """)
    try statement.bind([.text(id.rawValue)])
    defer { statement.reset() }
    guard try statement.step() else { return nil }
    let row = PageRow(
      id: id, workspace: EntityID(trusted: statement.string(0) ?? ""), kind: statement.string(1) ?? "page",
      parent: statement.string(2).map(EntityID.init(trusted:)), parentStamp: statement.string(3) ?? "",
      titleStamp: statement.string(4) ?? "", titleBytes: Int(statement.int64(7)),
      deleted: statement.int64(5) != 0,
      deletedStamp: statement.string(6) ?? "")
    cachePage(row)
    return row
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

/// The batch's work budget would be spent by this mutation: it and the mutations after it wait for the next batch.
struct WorkBudgetSpent: Error {}

/// Runs one mutation against the store and records what it changed.
///
/// The rule: every `Rejection` and every `WorkBudgetSpent` is thrown before the mutation's first write (checks
/// and charges first, then writes), so a rejected or postponed mutation needs no rollback.
/// `apply(_:user:workspaces:nowMillis:)` verifies it each time.
struct ApplyContext {
  let store: PageStore
  let batch: MutationBatch
  let workspaces: Set<EntityID>
  let seq: UInt64
  let nowMillis: UInt64
  var changes = ChangeSet()
  /// How much the batch grew each page (`PageStore+Size.swift`).
  var growth = PageGrowth()
  /// The rows in view of each database the batch touched, as they were before the batch first touched it (kept
  /// for the whole batch: each is read once before and once after the batch, however many of its mutations
  /// touch it).
  var databasesBefore: [EntityID: [EntityID]] = [:]
  /// The work the batch did so far, in `BatchWork` units.
  private(set) var work = 0
  /// The work of the batch's first mutation that did any, once it is done: the budget counts from there.
  private var firstWork: Int?
  /// The workspace of every page this batch read or created (a page never changes workspace), so that the
  /// batch's answer need not read them again.
  var knownWorkspaces: [EntityID: EntityID] = [:]

  var connection: any StoreConnection { store.connection }

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

  /// Adds `units` to the batch's work, before the work is done where it can be; throws `WorkBudgetSpent` if
  /// that takes the work done after the batch's first working mutation past the budget. The first such mutation
  /// may do any amount (so that every batch makes progress), and what it paid for stays paid: a database of
  /// 100,000 rows it read does not leave the rest of the batch, which may touch only that database, unable to
  /// do anything (each mutation would then need a batch, and a read of the database, of its own).
  /// Called before the mutation's first write only.
  mutating func charge(_ units: Int) throws {
    work += units
    if let firstWork, work - firstWork > store.maxBatchWork { throw WorkBudgetSpent() }
  }

  /// Ends a mutation: the first one that did any work sets where the budget counts from.
  mutating func endMutation() {
    if firstWork == nil && work > 0 { firstWork = work }
  }

  /// Counts work done after the mutation's first write (heights refreshed): it is bounded by the depth limit,
  /// and counts against the mutations that come after.
  mutating func account(_ units: Int) { work += units }

  /// Remembers a database's rows in view before the batch first touches them. Its rows are the batch's work
  /// twice over (read now, and again at the end of the batch), charged before they are read; a database the
  /// batch touched already costs nothing more.
  mutating func touchDatabase(_ id: EntityID?) throws {
    guard let id, databasesBefore[id] == nil else { return }
    guard let row = try store.loadPage(id), row.isDatabase else { return }
    let count = try connection.statement("SELECT count(*) FROM page WHERE parent_id = ?")
    try count.bind([.text(id.rawValue)])
    let rows = try count.step() ? Int(count.int64(0)) : 0
    count.reset()
    try charge(2 * rows * BatchWork.perDatabaseRow)
    databasesBefore[id] = try store.rowsInView(of: id)
  }

  mutating func apply(_ mutation: Mutation) throws {
    let stamp = LWWStamp(time: mutation.time, client: batch.client).sortKey
    let page = mutation.page
    switch mutation.action {
    case .createPage(let parent, let title):
      try create(page, kind: "page", parent: parent, title: title, bytes: title.utf8.count, stamp: stamp)
    case .createDatabase(let parent, let title):
      try create(page, kind: "database", parent: parent, title: title, bytes: title.utf8.count, stamp: stamp)
      try connection.execute(
        "INSERT INTO view (database_id, filter, sort, stamp) VALUES (?, NULL, NULL, ?)",
        [.text(page.rawValue), .text(stamp)])
    case .createRow(let database, let title, let properties):
      let parent = try writablePage(database)
      guard parent.isDatabase else { throw Rejection(.notADatabase) }
      try touchDatabase(database)
      let values = properties.map { (name: $0.key, json: store.json($0.value)) }
      let bytes = values.reduce(title.utf8.count) { $0 + $1.name.utf8.count + $1.json.utf8.count }
      try create(page, kind: "page", parent: database, title: title, bytes: bytes, stamp: stamp)
      for (name, json) in values {
        try connection.execute(
          "INSERT INTO property (page_id, name, value, stamp) VALUES (?, ?, ?, ?)",
          [.text(page.rawValue), .text(name), .text(json), .text(stamp)])
        store.cacheProperty(
          PropertyKey(page: page, name: name),
          PropertyState(stamp: stamp, bytes: name.utf8.count + json.utf8.count))
      }
    case .setTitle(let title):
      let row = try writablePage(page)
      if LastWriterWins.replaces(stamp, over: row.titleStamp) {
        let bytes = title.utf8.count
        try grow(page, by: bytes - row.titleBytes)
        try connection.execute(
          "UPDATE page SET title = ?, title_stamp = ? WHERE id = ?",
          [.text(title), .text(stamp), .text(page.rawValue)])
        store.updateCachedPage(page) {
          $0.titleStamp = stamp
          $0.titleBytes = bytes
        }
        changes.record(page, "title")
      }
    case .setProperty(let name, let value):
      let row = try writablePage(page)
      let key = PropertyKey(page: page, name: name)
      let current = try store.propertyState(key)
      if let current, !LastWriterWins.replaces(stamp, over: current.stamp) { return }
      let json = value.map { store.json($0) }
      let bytes = json.map { name.utf8.count + $0.utf8.count } ?? 0
      try touchDatabase(row.parent)
      try grow(page, by: bytes - (current?.bytes ?? 0))
      try connection.execute(
        """
        INSERT INTO property (page_id, name, value, stamp) VALUES (?, ?, ?, ?)
        ON CONFLICT (page_id, name) DO UPDATE SET value = excluded.value, stamp = excluded.stamp
        """,
        [.text(page.rawValue), .text(name), json.map { .text($0) } ?? .null, .text(stamp)])
      store.cacheProperty(key, PropertyState(stamp: stamp, bytes: bytes))
      changes.record(page, "property:" + name)
    case .addBlock(let block, let type, let text, let after, let attributes):
      _ = try writablePage(page)
      if try !connection.query("SELECT 1 FROM block WHERE id = ?", [.text(block.rawValue)]).isEmpty {
        throw Rejection(.alreadyExists)
      }
      // Its first text is deflated into a state and written twice (text and state), as an edit of that size.
      try charge(text.utf8.count / BatchWork.textBytesPerUnit)
      // The first text: ids every replica derives from it (`initialTextClient`), stamped with this batch.
      let state = TextDocument(text: text, client: initialTextClient, seq: seq).encoded()
      let attributesJSON = store.json(attributes)
      // Checked before `positionAfter`, which may write (a renumbering). Marks start as `[]`.
      try grow(
        page,
        by: block.rawValue.utf8.count + type.utf8.count + text.utf8.count + attributesJSON.utf8.count + 2
          + state.count)
      let position = try positionAfter(after, on: page, excluding: block)
      try connection.execute(
        """
        INSERT INTO block (id, page_id, type, text, text_stamp, attributes, attributes_stamp, position,
                           position_stamp, deleted, deleted_stamp, crdt)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)
        """,
        [
          .text(block.rawValue), .text(page.rawValue), .text(type), .text(text), .text(stamp),
          .text(attributesJSON), .text(stamp), .real(position), .text(stamp), .text(stamp), .blob(state),
        ])
      changes.record(page, "block:" + block.rawValue)
    case .editBlock(let block, let text, let attributes):
      _ = try writablePage(page)
      let stamps = try liveBlock(block, on: page)
      // The text of a client that predates the CRDT is merged, never last-writer-wins (DESIGN, "Rich text
      // merges"). Every check comes before anything is written: a text too large, a page grown too large.
      let newText = try text.flatMap { try replacedText(of: block, on: page, with: $0) }
      var newAttributes: String?
      var growth = newText?.growth ?? 0
      if let attributes, LastWriterWins.replaces(stamp, over: stamps.attributes) {
        let json = store.json(attributes)
        let old = try connection.query(
          "SELECT length(CAST(attributes AS BLOB)) FROM block WHERE id = ?", [.text(block.rawValue)])
        let oldBytes = if case .integer(let bytes)? = old.first?.first { Int(bytes) } else { 0 }
        growth += json.utf8.count - oldBytes
        newAttributes = json
      }
      try grow(page, by: growth)
      if let newText { try writeText(newText, of: block, on: page) }
      if let newAttributes {
        try connection.execute(
          "UPDATE block SET attributes = ?, attributes_stamp = ? WHERE id = ?",
          [.text(newAttributes), .text(stamp), .text(block.rawValue)])
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
        // Nothing can edit or restore a deleted block (`liveBlock`), and a delta carries only its id: its text,
        // attributes, marks and state go, and with them their room in the page (`PageStore+Size.swift`).
        let before = try store.storedBytes(ofBlock: block)
        let type = try connection.query("SELECT type FROM block WHERE id = ?", [.text(block.rawValue)])
        let typeBytes = if case .text(let name)? = type.first?.first { name.utf8.count } else { 0 }
        let after =
          block.rawValue.utf8.count + typeBytes + "{}".utf8.count + "[]".utf8.count
          + PageStore.emptyTextState.count
        growth.add(page, after - before)  // never refused: deleting makes room
        try connection.execute(
          """
          UPDATE block SET deleted = 1, deleted_stamp = ?, text = '', attributes = '{}', marks = '[]', crdt = ?
          WHERE id = ?
          """,
          [.text(stamp), .blob(PageStore.emptyTextState), .text(block.rawValue)])
        changes.record(page, "block:" + block.rawValue)
      }
    case .movePage(let parent):
      let row = try writablePage(page)
      guard LastWriterWins.replaces(stamp, over: row.parentStamp), parent != row.parent else { return }
      if let parent {
        let target = try writablePage(parent)
        guard target.workspace == row.workspace else { throw Rejection(.invalidParent) }
        if row.isDatabase && target.isDatabase { throw Rejection(.invalidParent) }
      }
      // No cycles (the new parent is not the page or under it), and the moved subtree within the depth limit.
      try checkPlace(under: parent, height: try height(of: page), mover: page)
      try touchDatabase(row.parent)
      try touchDatabase(parent)
      store.forgetPage(page)
      try connection.execute(
        "UPDATE page SET parent_id = ?, parent_stamp = ? WHERE id = ?",
        [parent.map { .text($0.rawValue) } ?? .null, .text(stamp), .text(page.rawValue)])
      try refreshHeights(from: parent)
      try refreshHeights(from: row.parent)
      changes.record(page, "parent")
      if row.isDatabase {
        if let old = row.parent { changes.record(old, "databases") }
        if let parent { changes.record(parent, "databases") }
      }
    case .deletePage:
      let row = try writablePage(page)
      guard LastWriterWins.replaces(stamp, over: row.deletedStamp) else { return }
      try touchDatabase(row.parent)
      store.forgetPage(page)
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

  /// Creates a page holding `bytes` (its title's, and a row's properties'), after every check.
  private mutating func create(
    _ id: EntityID, kind: String, parent: EntityID?, title: String, bytes: Int, stamp: String
  ) throws {
    if try store.loadPage(id) != nil { throw Rejection(.alreadyExists) }
    var workspace = batch.workspace
    if let parent {
      let parentRow = try writablePage(parent)
      // A database's parent is a page; a page's parent is a page or (as a row) a database.
      if kind == "database" && parentRow.isDatabase { throw Rejection(.invalidParent) }
      // A page made in a database is one of its rows: the database's rows in view may change.
      if parentRow.isDatabase { try touchDatabase(parent) }
      workspace = parentRow.workspace
      try checkPlace(under: parent, height: 0, mover: nil)
      if kind == "database" { changes.record(parent, "databases") }
    }
    try grow(id, by: bytes)
    try connection.execute(
      """
      INSERT INTO page (id, workspace_id, kind, parent_id, parent_stamp, title, title_stamp, deleted, deleted_stamp,
                        created_seq, last_updated, updated_at_ms, height)
      VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, 0)
      """,
      [
        .text(id.rawValue), .text(workspace.rawValue), .text(kind),
        parent.map { .text($0.rawValue) } ?? .null,
        .text(stamp), .text(title), .text(stamp), .text(stamp), .integer(Int64(seq)), .integer(Int64(seq)),
        .integer(Int64(nowMillis)),
      ])
    try refreshHeights(from: parent)
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
  /// blocks with their tombstones; the blocks it moves to make room are written first, and are in the delta.
  /// Reads and moves O(log n) blocks of a page of n, amortised (`BlockPlacement`); each is a unit of work.
  private mutating func positionAfter(_ after: EntityID?, on page: EntityID, excluding block: EntityID) throws
    -> Double
  {
    let blocks = StoredBlocks(connection: connection, page: page, excluding: block)
    let decision = try BlockPlacement.place(after: after, in: blocks)
    try charge((blocks.read + decision.renumbered.count) * BatchWork.perBlock)
    let move = try connection.statement("UPDATE block SET position = ? WHERE id = ?")
    for slot in decision.renumbered {
      try move.bind([.real(slot.position), .text(slot.id.rawValue)])
      _ = try move.step()
      move.reset()
      changes.record(page, "block:" + slot.id.rawValue)
    }
    return decision.position
  }
}
