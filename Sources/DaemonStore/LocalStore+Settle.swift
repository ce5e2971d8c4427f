import DaemonCore
import RichText
import SQLiteStore
import SyncModel

/// What `settle` did with a batch's answer, beyond the queue rows it removed or kept.
public struct Settlement: Equatable, Sendable {
  /// The pages to download whole again (see `LocalStore.settle`).
  public var settled: [EntityID] = []
  /// Mutations rejected `clock_ahead` that go again with a fresh time.
  public var restamped = 0
  /// Mutations rejected `clock_ahead` kept as conflicts: a fresh time would not be earlier (the device's wall
  /// clock itself is ahead of the broker's).
  public var keptAhead = 0
  /// The client id was replaced (the broker answered `id_reused`).
  public var clientChange: ClientChange?

  public init() {}
}

/// A new client id for this device, and the mutations that go with it.
public struct ClientChange: Equatable, Sendable {
  /// The client id the broker found used by another copy of this store.
  public var previous: EntityID
  /// The new one.
  public var current: EntityID
  /// Queued mutations numbered again under it, from 1.
  public var renumbered: Int
}

extension LocalStore {
  /// `settle` without the batch (its ids are taken from the answer).
  @discardableResult
  public func acknowledge(_ outcome: BatchOutcome, nowMillis: UInt64) throws -> [EntityID] {
    try settle(outcome, sent: [], nowMillis: nowMillis).settled
  }

  /// Applies the broker's answer to a batch (`sent`: the ids of the batch as sent, in order), in one
  /// transaction: applied and duplicate mutations leave the queue; rejected ones stay, with status `rejected`
  /// and the reason (never dropped: they are the user's work, kept for recovery). Pages with no pending mutation
  /// left become `synced`. `lastSuccessfulSync` and `lastMutationAt` become `nowMillis`; the broker's `epoch` is
  /// stored if none was.
  ///
  /// Two rejections are recovered from instead, in the same transaction, so that no edit is lost:
  ///
  /// - **`clock_ahead`**: the mutation's time was further ahead of the broker's clock than it accepts (a clock
  ///   poisoned by a broker's, a wall clock that was far ahead). If a fresh time from the device's clock made
  ///   sane (`ClockBound.restampTime`) is earlier, the mutation is queued again with it, after the batch's ids
  ///   (its own id is consumed), and every pending mutation after it follows with fresh times too, in order, so
  ///   that the device's later edits still come after it. Otherwise it is kept as a conflict.
  /// - **`id_reused`**: another copy of this store (restored from a backup, a cloned image) used the same ids
  ///   for other edits. The device takes a new random client id; every pending mutation from the first such one
  ///   on is numbered again from 1 under it (the queue's row ids go on after the last, `mutation_id_base` says by
  ///   how much they are ahead of the broker's), its text characters and marks renamed to the new client
  ///   (`QueueRewrite`), and the blocks' local states too; the kept acknowledged mutations (`sent_mutation`) are
  ///   dropped, being the old client's. The next push sends them.
  ///
  /// Returns, in `settled`, the pages whose local copy must be downloaded whole again: every page this device
  /// edited locally that has no pending mutation left. Its copy is the broker's state plus local edits, and an
  /// edit that lost (last writer wins) or was rejected changed nothing on the broker, so no notification would
  /// ever correct it. Their `last_downloaded_timestamp` is reset to 0 in the same transaction, so the next
  /// catch-up fetches them whole even if the daemon stops before it fetches them; they stay `complete`
  /// (showable) meanwhile.
  ///
  /// The same goes for the pages whose lists such an edit changed locally (a row's database's `rows`, a
  /// database's parent's `databases`), when they have nothing pending of their own: a rejected create leaves
  /// nothing on the broker, so nothing would ever take the row out of its database's local `rows`.
  ///
  /// And so for an offline page the batch edited that has no local copy and nothing pending left: a purge that
  /// skipped it for its pending mutations left it unmarked, and it is asked for again now so that the broker's
  /// `gone` marks it missing (`purge`), or its download is stored if the broker has it after all.
  ///
  /// Throws `numberOutOfRange` (nothing recorded) for a result id no queue row can have.
  public func settle(_ outcome: BatchOutcome, sent: [UInt64], nowMillis: UInt64) throws -> Settlement {
    var settlement = Settlement()
    var newClient: EntityID?
    try connection.transaction(.immediate) {
      let base = try mutationIDBase()
      func row(_ id: UInt64) throws -> UInt64 {
        let (row, overflow) = id.addingReportingOverflow(base)
        guard !overflow, row <= UInt64(Int64.max) else {
          throw LocalStoreError.numberOutOfRange("the broker's mutationId", id)
        }
        return row
      }
      var listHolders: [EntityID] = []
      // The pages the batch's mutations edited, in order: see the uncopied offline pages below.
      var edited: [EntityID] = []
      var reused: [UInt64] = []
      var ahead: [(row: UInt64, time: HLCTimestamp)] = []
      var batchEnd: UInt64 = 0
      for id in sent { batchEnd = max(batchEnd, try row(id)) }
      for result in outcome.results {
        let local = try row(result.mutationId)
        batchEnd = max(batchEnd, local)
        let id = try storedInteger(local, "the broker's mutationId")
        let stored = try connection.query(
          "SELECT data, status, page_id FROM mutation_queue WHERE id = ?", [id]
        ).first
        if let page = stored?[2] {
          let page = try entityID(page, table: "mutation_queue", column: "page_id")
          if !edited.contains(page) { edited.append(page) }
        }
        let mutation = try stored.map {
          try decode(Mutation.self, $0[0], table: "mutation_queue", column: "data")
        }
        if let mutation {
          for page in try pagesListing(mutation) where !listHolders.contains(page) {
            listHolders.append(page)
          }
        }
        switch result.status {
        case .applied, .duplicate:
          // Kept (the newest `keptAcknowledged`) for a broker store restored from an older copy: see
          // `requeueForRestoredBroker`.
          try connection.execute(
            """
            INSERT OR REPLACE INTO sent_mutation (id, type, page_id, data, created_at_ms)
            SELECT id, type, page_id, data, created_at_ms FROM mutation_queue WHERE id = ?
            """, [id])
          try connection.execute("DELETE FROM mutation_queue WHERE id = ?", [id])
        case .rejected:
          let reason = result.reason ?? .invalidValue
          let pending = stored?[1] == .text("pending")
          if reason == .idReused && pending {
            reused.append(local)
            continue
          }
          if reason == .clockAhead && pending, let mutation {
            var probe = HybridLogicalClock(last: try clockValue())
            if clockBound.restampTime(for: mutation.time, clock: &probe, at: nowMillis) != nil {
              ahead.append((local, mutation.time))
              continue
            }
            settlement.keptAhead += 1
          }
          try connection.execute(
            """
            UPDATE mutation_queue SET status = 'rejected', rejection_code = ?, rejection_name = ?, last_error = ?
            WHERE id = ?
            """,
            [
              .integer(Int64(reason.code)), .text(reason.name),
              // The broker's words when it gave some (the limit a `too_large` passed), after the reason.
              .text(result.message.map { "\(reason.description): \($0)" } ?? reason.description), id,
            ])
        }
      }
      if let first = (reused + ahead.map(\.row)).min() {
        let change = reused.isEmpty ? nil : EntityID.random()
        settlement.restamped = ahead.count
        try sendAgain(
          from: first, restampFrom: ahead.map(\.row).min(), after: batchEnd, newClient: change,
          nowMillis: nowMillis
        ) { settlement.clientChange = $0 }
        newClient = change
      }
      try connection.execute(
        "DELETE FROM sent_mutation WHERE id <= (SELECT max(id) FROM sent_mutation) - ?",
        [.integer(Int64(Self.keptAcknowledged))])
      // A test hook: the queue rows settled, the pages' sync status and download times not yet.
      TestCrashPoint.reach("acknowledge", inTransaction: true)
      var settled = try connection.query(
        """
        SELECT id FROM local_page WHERE sync_status = 'pending'
        AND NOT EXISTS (SELECT 1 FROM mutation_queue WHERE page_id = local_page.id AND status = 'pending')
        ORDER BY id
        """
      ).map { try entityID($0[0], table: "local_page", column: "id") }
      for page in listHolders where !settled.contains(page) {
        let id = SQLiteValue.text(page.rawValue)
        let settles = try !connection.query(
          """
          SELECT 1 FROM local_page WHERE id = ?1
          AND NOT EXISTS (SELECT 1 FROM mutation_queue WHERE page_id = ?1 AND status = 'pending')
          """, [id]
        ).isEmpty
        if settles { settled.append(page) }
      }
      // An offline page edited here that has no local copy (a purge skipped it while it held these mutations,
      // or it was never downloaded): with nothing pending left it must be asked for again too, or a page the
      // broker does not have would never be marked missing (the fetch's `gone` purges and marks it now).
      for page in edited where !settled.contains(page) {
        let id = SQLiteValue.text(page.rawValue)
        let uncopied = try !connection.query(
          """
          SELECT 1 FROM offline_page WHERE page_id = ?1
          AND NOT EXISTS (SELECT 1 FROM local_page WHERE id = ?1)
          AND NOT EXISTS (SELECT 1 FROM mutation_queue WHERE page_id = ?1 AND status = 'pending')
          """, [id]
        ).isEmpty
        if uncopied { settled.append(page) }
      }
      for page in settled {
        try connection.execute(
          "UPDATE local_page SET sync_status = 'synced' WHERE id = ?", [.text(page.rawValue)])
        try connection.execute(
          "UPDATE offline_page SET last_downloaded_timestamp = 0 WHERE page_id = ?", [.text(page.rawValue)])
      }
      try setMeta("lastSuccessfulSync", String(nowMillis))
      if !outcome.results.isEmpty { try setMeta("lastMutationAt", String(nowMillis)) }
      // Only a first contact adopts the epoch here. A different one is adopted by the catch-up's full refetch once
      // every page is fetched again: taken from a push answer, it would hide the change from the next catch-up
      // and leave pages fetched as deltas from another store's times.
      if try meta("epoch") == nil { try setMeta("epoch", outcome.epoch) }
      settlement.settled = settled
    }
    if let newClient { clientID = newClient }
    return settlement
  }

  /// Queues again, in one go and in order, every pending mutation from row `first` on (inside the caller's
  /// transaction): from row `restampFrom` on with fresh times; under new ids after the batch (`after`: its last
  /// row, every id of which the broker consumed), or, with `newClient`, under that client from id 1 (the rows
  /// after every row there is, `mutation_id_base` moved to match) with their text renamed (see `settle`).
  private func sendAgain(
    from first: UInt64, restampFrom: UInt64?, after batchEnd: UInt64, newClient: EntityID?, nowMillis: UInt64,
    changed: (ClientChange) -> Void
  ) throws {
    let rows = try connection.query(
      """
      SELECT id, type, page_id, data, created_at_ms FROM mutation_queue WHERE status = 'pending' AND id >= ?
      ORDER BY id
      """, [try storedInteger(first, "a mutation id")])
    let mutations = try rows.map { try decode(Mutation.self, $0[3], table: "mutation_queue", column: "data") }
    var ids: [UInt64] = []
    for row in rows {
      guard case .integer(let id) = row[0], id > 0 else {
        throw LocalStoreError.corruptValue(table: "mutation_queue", column: "id", value: "\(row[0])")
      }
      ids.append(UInt64(id))
    }
    var clock = HybridLogicalClock(last: clockBound.sane(try clockValue(), at: nowMillis))
    let times: [HLCTimestamp?] = ids.map { id in
      guard let restampFrom, id >= restampFrom else { return nil }
      return clock.now(physicalMillis: nowMillis)
    }
    guard let next = try metaNumber("next_mutation_id") else {
      throw LocalStoreError.missingMeta("next_mutation_id")
    }
    var base = try mutationIDBase()
    var start = batchEnd + 1
    var rename: QueueRewrite.Rename?
    if let newClient {
      rename = QueueRewrite.Rename(from: clientID, to: newClient)
      start = max(next, (ids.last ?? 0) + 1)
      base = start - 1
    }
    let rewritten = QueueRewrite.rewrite(
      mutations, firstID: start - base, times: times, client: clientID, rename: rename)
    for id in ids {
      try connection.execute(
        "DELETE FROM mutation_queue WHERE id = ?", [try storedInteger(id, "a mutation id")])
    }
    for (index, (row, mutation)) in zip(rows, rewritten).enumerated() {
      try connection.execute(
        """
        INSERT INTO mutation_queue (id, type, page_id, data, created_at_ms, status) VALUES (?, ?, ?, ?, ?, 'pending')
        """,
        [
          try storedInteger(start + UInt64(index), "a mutation id"), row[1], row[2],
          .text(try json(mutation)),
          row[4],
        ])
    }
    try setMeta("next_mutation_id", String(max(next, start + UInt64(rows.count))))
    if restampFrom != nil { try setMeta("hlc", clock.last.description) }
    guard let rename else { return }
    try setMeta("client_id", rename.to.rawValue)
    try setMeta("mutation_id_base", String(base))
    let retired = try meta("retired_client_ids").map { $0 + " " } ?? ""
    try setMeta("retired_client_ids", retired + rename.from.rawValue)
    // The acknowledged mutations kept for a restored broker are the old client's: sent again under the new one
    // they would be new edits.
    try connection.execute("DELETE FROM sent_mutation", [])
    // The blocks' local states: the characters these mutations typed are the new client's now (their marks stay
    // as they are: the same marks come back under the new client when the page is downloaded again).
    for (block, threshold) in QueueRewrite.thresholds(of: mutations, client: rename.from.rawValue) {
      guard
        let stored = try connection.query(
          "SELECT crdt FROM local_block WHERE id = ?", [.text(block.rawValue)]
        )
        .first, let document = try document(stored[0])
      else { continue }
      var renamed = TextDocument()
      renamed.apply(
        document.update().renaming(
          rename.from.rawValue, from: threshold, to: rename.to.rawValue, marks: false))
      try writeText(renamed, of: block)
    }
    changed(ClientChange(previous: rename.from, current: rename.to, renumbered: rows.count))
  }
}
