import SQLiteStore
import SyncModel

/// A page's blocks (tombstones included) as `BlockPlacement` reads them: from the index on (page, position),
/// without the block being placed. A placement reads its two neighbours and, when it must make room, the few
/// blocks around them, never the whole page. Every block read is one unit of the batch's work (`read`).
///
/// Threading: the writer thread's, inside the batch's transaction, like the store.
final class StoredBlocks: BlockPlacement.Page {
  typealias Failure = any Error
  let connection: any StoreConnection
  let page: EntityID
  let excluded: EntityID
  /// Blocks read so far (and one for each query that found none).
  private(set) var read = 0

  init(connection: any StoreConnection, page: EntityID, excluding block: EntityID) {
    self.connection = connection
    self.page = page
    excluded = block
  }

  func slot(_ id: EntityID) throws -> BlockPlacement.Slot? {
    guard id != excluded else { return nil }
    return try first(
      "SELECT id, position FROM block WHERE id = ?1 AND page_id = ?2",
      [.text(id.rawValue), .text(page.rawValue)])
  }

  func slot(after slot: BlockPlacement.Slot?) throws -> BlockPlacement.Slot? {
    guard let slot else {
      return try first(
        "SELECT id, position FROM block WHERE page_id = ?1 AND id != ?2 ORDER BY position, id LIMIT 1",
        [.text(page.rawValue), .text(excluded.rawValue)])
    }
    return try first(
      """
      SELECT id, position FROM block WHERE page_id = ?1 AND id != ?2 AND (position, id) > (?3, ?4)
      ORDER BY position, id LIMIT 1
      """,
      [.text(page.rawValue), .text(excluded.rawValue), .real(slot.position), .text(slot.id.rawValue)])
  }

  func lastSlot() throws -> BlockPlacement.Slot? {
    try first(
      "SELECT id, position FROM block WHERE page_id = ?1 AND id != ?2 ORDER BY position DESC, id DESC LIMIT 1",
      [.text(page.rawValue), .text(excluded.rawValue)])
  }

  func slots(in range: Range<Double>, limit: Int) throws -> [BlockPlacement.Slot] {
    try all(
      """
      SELECT id, position FROM block WHERE page_id = ?1 AND id != ?2 AND position >= ?3 AND position < ?4
      ORDER BY position, id LIMIT ?5
      """,
      [
        .text(page.rawValue), .text(excluded.rawValue), .real(range.lowerBound), .real(range.upperBound),
        .integer(Int64(min(limit, Int(Int64.max)))),
      ])
  }

  private func first(_ sql: String, _ bindings: [SQLiteValue]) throws -> BlockPlacement.Slot? {
    try all(sql, bindings).first
  }

  private func all(_ sql: String, _ bindings: [SQLiteValue]) throws -> [BlockPlacement.Slot] {
    let statement = try connection.statement(sql)
    try statement.bind(bindings)
    defer { statement.reset() }
    var slots: [BlockPlacement.Slot] = []
    while try statement.step() {
      slots.append(
        BlockPlacement.Slot(id: EntityID(trusted: statement.string(0) ?? ""), position: statement.double(1)))
    }
    read += max(slots.count, 1)
    return slots
  }
}
