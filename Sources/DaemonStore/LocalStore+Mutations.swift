import BrokerStore
import SQLiteStore
import SyncModel

/// A mutation the broker rejected, kept in the queue for recovery (`pagesync conflicts`).
public struct MutationConflict: Hashable, Sendable {
  public var mutationId: UInt64
  public var page: EntityID
  public var reason: RejectionReason

  public init(mutationId: UInt64, page: EntityID, reason: RejectionReason) {
    self.mutationId = mutationId
    self.page = page
    self.reason = reason
  }
}

extension LocalStore {
  /// Records a local edit: in ONE transaction, stamps the hybrid logical clock (persisted), takes the next
  /// mutation id, applies the action to the local copy of `page`, and appends the mutation to `mutation_queue`.
  /// When it returns, the edit survives kill -9 and power loss; when it throws, none of it happened.
  ///
  /// Applied to the local copy now: creates (a `local_page` row, kind and parent and title; a row also gets its
  /// properties), `setTitle`, `setProperty`, `movePage` and `deletePage`, each only if the page is stored
  /// locally (creates insert it). Left for the daemon issue: block actions and `setView` (positions and rows in
  /// view need the page's blocks and the view's evaluation); the queued mutation carries them to the broker, and
  /// the next delta brings them back. Every page the edit touched locally is marked `sync_status = 'pending'`.
  public func recordEdit(page: EntityID, action: MutationAction, nowMillis: UInt64) throws -> Mutation {
    try connection.transaction(.immediate) {
      var clock = HybridLogicalClock(last: try clockValue())
      let time = clock.now(physicalMillis: nowMillis)
      try setMeta("hlc", time.description)
      guard let id = try metaNumber("next_mutation_id") else {
        throw LocalStoreError.missingMeta("next_mutation_id")
      }
      try setMeta("next_mutation_id", String(id + 1))
      let mutation = Mutation(id: id, page: page, time: time, action: action)
      try applyLocally(mutation)
      try connection.execute(
        """
        INSERT INTO mutation_queue (id, type, page_id, data, created_at_ms, status) VALUES (?, ?, ?, ?, ?, 'pending')
        """,
        [
          .integer(Int64(id)), .text(action.typeName), .text(page.rawValue), .text(try json(mutation)),
          .integer(Int64(nowMillis)),
        ])
      return mutation
    }
  }

  private func applyLocally(_ mutation: Mutation) throws {
    let page = SQLiteValue.text(mutation.page.rawValue)
    func insert(kind: String, parent: EntityID?, title: String, properties: [String: PropertyValue]) throws {
      try connection.execute(
        """
        INSERT INTO local_page (id, kind, parent, title, properties, sync_status) VALUES (?, ?, ?, ?, ?, 'pending')
        ON CONFLICT (id) DO NOTHING
        """,
        [
          page, .text(kind), parent.map { .text($0.rawValue) } ?? .null, .text(title),
          .text(try json(properties)),
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
    case .movePage(let parent):
      try connection.execute(
        "UPDATE local_page SET parent = ? WHERE id = ?", [parent.map { .text($0.rawValue) } ?? .null, page])
    case .deletePage:
      try connection.execute("UPDATE local_page SET deleted = 1 WHERE id = ?", [page])
    case .addBlock, .editBlock, .moveBlock, .deleteBlock, .setView:
      break
    }
    try connection.execute("UPDATE local_page SET sync_status = 'pending' WHERE id = ?", [page])
  }

  /// Up to `limit` queued mutations still to send, in id order (rejected ones are not resent).
  public func pendingMutations(limit: Int) throws -> [Mutation] {
    try connection.query(
      "SELECT data FROM mutation_queue WHERE status = 'pending' ORDER BY id LIMIT ?", [.integer(Int64(limit))]
    ).map { try decode(Mutation.self, $0[0], table: "mutation_queue", column: "data") }
  }

  /// Applies the broker's answer to a batch, in one transaction: applied and duplicate mutations leave the
  /// queue; rejected ones stay, with status `rejected` and the reason (never dropped: they are the user's work,
  /// kept for recovery). Pages with no pending mutation left become `synced`. `lastSuccessfulSync` and
  /// `lastMutationAt` become `nowMillis`, `epoch` the broker's.
  public func acknowledge(_ outcome: BatchOutcome, nowMillis: UInt64) throws {
    try connection.transaction(.immediate) {
      for result in outcome.results {
        let id = SQLiteValue.integer(Int64(result.mutationId))
        switch result.status {
        case .applied, .duplicate:
          try connection.execute("DELETE FROM mutation_queue WHERE id = ?", [id])
        case .rejected:
          let reason = result.reason ?? .invalidValue
          try connection.execute(
            """
            UPDATE mutation_queue SET status = 'rejected', rejection_code = ?, rejection_name = ?, last_error = ?
            WHERE id = ?
            """, [.integer(Int64(reason.code)), .text(reason.name), .text(reason.description), id])
        }
      }
      try connection.execute(
        """
        UPDATE local_page SET sync_status = 'synced' WHERE sync_status = 'pending'
        AND NOT EXISTS (SELECT 1 FROM mutation_queue WHERE page_id = local_page.id AND status = 'pending')
        """, [])
      try setMeta("lastSuccessfulSync", String(nowMillis))
      if !outcome.results.isEmpty { try setMeta("lastMutationAt", String(nowMillis)) }
      try setMeta("epoch", outcome.epoch)
    }
  }

  /// The rejected mutations, in id order.
  public func conflicts() throws -> [MutationConflict] {
    try connection.query(
      "SELECT id, page_id, rejection_code, rejection_name FROM mutation_queue WHERE status = 'rejected' ORDER BY id"
    ).map { row in
      guard case .integer(let id) = row[0], case .integer(let code) = row[2], case .text(let name) = row[3]
      else {
        throw LocalStoreError.corruptValue(table: "mutation_queue", column: "rejection", value: "\(row)")
      }
      return MutationConflict(
        mutationId: UInt64(id), page: try entityID(row[1], table: "mutation_queue", column: "page_id"),
        reason: RejectionReason(code: Int(code), name: name))
    }
  }
}
