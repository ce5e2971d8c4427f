import SQLiteStore
import SyncModel

/// A mutation the broker rejected, kept in the queue for recovery (`pagesync conflicts`).
public struct MutationConflict: Hashable, Sendable {
  /// The client mutation id (its id consumed on the broker: it is never resent).
  public var mutationId: UInt64
  /// The page it targeted (for a block action, the block's page).
  public var page: EntityID
  /// Why the broker refused it.
  public var reason: RejectionReason
  /// The action's wire name (`set_title`, `add_block`, ...), so the user sees what was lost.
  public var type: String
  /// The last error recorded for it (`last_error`: the rejection, or an earlier push failure), nil if none.
  public var message: String?
  /// When the edit was made (Unix milliseconds, the device's clock: for display only).
  public var createdAt: UInt64

  public init(
    mutationId: UInt64, page: EntityID, reason: RejectionReason, type: String, message: String?,
    createdAt: UInt64
  ) {
    self.mutationId = mutationId
    self.page = page
    self.reason = reason
    self.type = type
    self.message = message
    self.createdAt = createdAt
  }
}

extension LocalStore {
  /// Records a local edit: in ONE transaction, stamps the hybrid logical clock (persisted), takes the next
  /// mutation id, applies the action to the local copy of `page`, and appends the mutation to `mutation_queue`.
  /// When it returns, the edit survives kill -9 and power loss; when it throws, none of it happened.
  ///
  /// Refused first, with nothing written (not even the clock or the id counter): a mutation that breaks a rule
  /// on its own (`Mutation.validate()`, `LocalStoreError.invalidMutation`), a create whose page id is already
  /// stored here, live or deleted (`pageExists`: the broker would reject `already_exists`), an `addBlock` whose
  /// block id is already stored here (`blockExists`). Everything else is the broker's to decide: the local copy
  /// shows the edit, and a rejection comes back as a conflict.
  ///
  /// The local effect (see `applyLocally`) covers every action: creates insert the page (a database inline in a
  /// page is listed in the page's `databases`; a row enters its database's `rows`), titles, properties, moves and
  /// deletes change the stored copy, block actions change `local_block` (positions between the neighbours, as
  /// the broker computes them), and `setView` stores the view and recomputes the database's `rows` when every
  /// row is known here (else the next delta brings them). Every page the edit touched is marked
  /// `sync_status = 'pending'`.
  public func recordEdit(page: EntityID, action: MutationAction, nowMillis: UInt64) throws -> Mutation {
    try recordEdits(page: page, actions: [action], nowMillis: nowMillis)[0]
  }

  /// Records several edits of one page as one: the same as `recordEdit` for each action, in order, all in ONE
  /// transaction (an `edit --title T --set A=1` is queued whole or not at all). Each action gets its own mutation
  /// id and HLC time. `observed`: the newest time seen from the broker; the stamps come after it (the HLC merge
  /// of DESIGN's "Conflicts"), so a device whose wall clock lags cannot lose to edits it has already seen.
  public func recordEdits(
    page: EntityID, actions: [MutationAction], nowMillis: UInt64, observed: HLCTimestamp = .zero
  ) throws -> [Mutation] {
    try recordEdits(
      page: page, makers: actions.map { action in { _ in action } }, nowMillis: nowMillis, observed: observed)
  }

  /// `recordEdits` with each action made in the transaction, from the mutation's time (a mark's CRDT operation
  /// carries it) and the state as stored then (a splice's CRDT operations are made on it). A maker that returns
  /// nil records nothing.
  func recordEdits(
    page: EntityID, makers: [(HLCTimestamp) throws -> MutationAction?], nowMillis: UInt64,
    observed: HLCTimestamp
  ) throws -> [Mutation] {
    try connection.transaction(.immediate) {
      // A clock (stored, or seen from the broker) further ahead than the broker accepts would only stamp edits
      // it rejects `clock_ahead`: the wall clock instead (`ClockBound`).
      var clock = HybridLogicalClock(last: clockBound.sane(try clockValue(), at: nowMillis))
      if observed > clock.last, clockBound.admits(observed, at: nowMillis) {
        clock.observe(observed, physicalMillis: nowMillis)
      }
      guard var id = try metaNumber("next_mutation_id") else {
        throw LocalStoreError.missingMeta("next_mutation_id")
      }
      let base = try mutationIDBase()
      guard id > base, id < UInt64(Int64.max) - UInt64(makers.count) else {
        throw LocalStoreError.corruptValue(table: "sync_meta", column: "next_mutation_id", value: "\(id)")
      }
      var mutations: [Mutation] = []
      for maker in makers {
        let time = clock.now(physicalMillis: nowMillis)
        guard let action = try maker(time) else { continue }
        // The row's id goes on growing on this device; the broker's is counted from the client id's first.
        let mutation = Mutation(id: id - base, page: page, time: time, action: action)
        if let reason = mutation.validate() { throw LocalStoreError.invalidMutation(reason) }
        switch action {
        case .createPage, .createDatabase, .createRow:
          if try !connection.query("SELECT 1 FROM local_page WHERE id = ?", [.text(page.rawValue)]).isEmpty {
            throw LocalStoreError.pageExists(page)
          }
        case .addBlock(let block, _, _, _, _):
          if try !connection.query("SELECT 1 FROM local_block WHERE id = ?", [.text(block.rawValue)]).isEmpty
          {
            throw LocalStoreError.blockExists(block)
          }
        default: break
        }
        try applyLocally(mutation)
        try connection.execute(
          """
          INSERT INTO mutation_queue (id, type, page_id, data, created_at_ms, status) VALUES (?, ?, ?, ?, ?, 'pending')
          """,
          [
            .integer(Int64(id)), .text(action.typeName), .text(page.rawValue), .text(try json(mutation)),
            .integer(Int64(nowMillis)),
          ])
        // A test hook: the local copy edited and the mutation queued, the id and clock not yet advanced.
        TestCrashPoint.reach("edit", inTransaction: true)
        mutations.append(mutation)
        id += 1
      }
      try setMeta("hlc", clock.last.description)
      try setMeta("next_mutation_id", String(id))
      return mutations
    }
  }

  /// Up to `limit` queued mutations still to send, in id order (rejected ones are not resent).
  public func pendingMutations(limit: Int) throws -> [Mutation] {
    try connection.query(
      "SELECT data FROM mutation_queue WHERE status = 'pending' ORDER BY id LIMIT ?", [.integer(Int64(limit))]
    ).map { try decode(Mutation.self, $0[0], table: "mutation_queue", column: "data") }
  }

  /// Records a push that failed before the broker answered it (unreachable, 5xx, a refused batch): for each of
  /// these still pending mutations (`ids`: the batch's, as sent), `retry_count` + 1 and `last_error = error`, in
  /// one transaction. They stay pending and are sent again; the count and message are what `pagesync status` and
  /// the logs can show.
  public func markPushFailed(ids: [UInt64], error: String) throws {
    try connection.transaction(.immediate) {
      let base = try mutationIDBase()
      for id in ids {
        let (row, overflow) = id.addingReportingOverflow(base)
        guard !overflow else { continue }
        try connection.execute(
          """
          UPDATE mutation_queue SET retry_count = retry_count + 1, last_error = ? WHERE id = ? AND status = 'pending'
          """, [.text(error), try storedInteger(row, "a mutation id")])
      }
    }
  }

  /// How many acknowledged mutations the store keeps (the newest), to push again to a restored broker store.
  public static let keptAcknowledged = 10_000

  /// The broker's store was replaced (its epoch changed: a restore from an older copy, docs/operations.md):
  /// it may lack mutations it acknowledged before, which this device dropped from its queue. In one transaction,
  /// every kept acknowledged mutation (`sent_mutation`, the newest `keptAcknowledged`) goes back into the queue
  /// as pending, and so does every rejected one (the restored store may not hold that rejection, and its id must
  /// be sent for the ids after it to continue without a gap). The next push sends them again in id order: the
  /// broker answers `duplicate` (or the same rejection) for those it has, applies the others (last writer wins
  /// by their original HLC times), so nothing this device still holds is lost. Returns how many went back.
  ///
  /// Idempotent (a restart before the new epoch is adopted calls it again). Only a restore older than the
  /// kept window still loses edits: the push then gets a 409 (docs/operations.md, "What devices do"). Rejections
  /// of an earlier client id of this device (see `settle`) stay: their ids are not this client's.
  @discardableResult
  public func requeueForRestoredBroker() throws -> Int {
    try connection.transaction(.immediate) {
      try connection.execute(
        """
        UPDATE mutation_queue SET status = 'pending', rejection_code = NULL, rejection_name = NULL
        WHERE status = 'rejected' AND id > ?
        """, [try storedInteger(try mutationIDBase(), "mutation_id_base")])
      let rejected = connection.changes
      try connection.execute(
        """
        INSERT INTO mutation_queue (id, type, page_id, data, created_at_ms, status)
        SELECT id, type, page_id, data, created_at_ms, 'pending' FROM sent_mutation
        WHERE id NOT IN (SELECT id FROM mutation_queue)
        """, [])
      let sent = connection.changes
      try connection.execute("DELETE FROM sent_mutation", [])
      try connection.execute(
        """
        UPDATE local_page SET sync_status = 'pending'
        WHERE id IN (SELECT page_id FROM mutation_queue WHERE status = 'pending')
        """, [])
      return rejected + sent
    }
  }

  /// The pages whose lists (`rows`, `databases`) `mutation` may have changed locally: the parent it names and
  /// the local copy's parent.
  func pagesListing(_ mutation: Mutation) throws -> [EntityID] {
    var named: EntityID?
    switch mutation.action {
    case .createPage(let parent, _), .createDatabase(let parent, _), .movePage(let parent): named = parent
    case .createRow(let database, _, _): named = database
    case .deletePage, .setProperty: break
    default: return []
    }
    var pages = named.map { [$0] } ?? []
    if let parent = try localHeader(mutation.page)?.parent, parent != named { pages.append(parent) }
    return pages
  }

  /// The rejected mutations with ids from `first` on, in id order, with what `GET /v1/conflicts` shows of each
  /// (all of them by default; a batch's answer asks only from its first id, not for every conflict ever kept).
  public func conflicts(from first: UInt64 = 0) throws -> [MutationConflict] {
    try connection.query(
      """
      SELECT id, page_id, rejection_code, rejection_name, type, last_error, created_at_ms FROM mutation_queue
      WHERE status = 'rejected' AND id >= ? ORDER BY id
      """, [.integer(Int64(clamping: first))]
    ).map { row in
      guard case .integer(let id) = row[0], case .integer(let code) = row[2], case .text(let name) = row[3],
        case .text(let type) = row[4], case .integer(let createdAt) = row[6], id > 0, createdAt >= 0
      else {
        throw LocalStoreError.corruptValue(table: "mutation_queue", column: "rejection", value: "\(row)")
      }
      let message: String? = if case .text(let text) = row[5] { text } else { nil }
      return MutationConflict(
        mutationId: UInt64(id), page: try entityID(row[1], table: "mutation_queue", column: "page_id"),
        reason: RejectionReason(code: Int(code), name: name), type: type, message: message,
        createdAt: UInt64(createdAt))
    }
  }
}
