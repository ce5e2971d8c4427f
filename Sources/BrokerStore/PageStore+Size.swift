import RichText
import SQLiteStore
import SyncModel

// A page's stored size, what `[limits] page_bytes` (`MutationLimits.maxPageBytes`) bounds.
//
// The measure: the bytes the page's content takes as the store holds it, which is also about what an answer
// carrying the page weighs (the CRDT state travels in base64, a third more; text JSON must escape, control
// characters, more):
//   - its title (UTF-8 bytes);
//   - each property that has a value: its name and its value's JSON;
//   - each block, deleted ones included: its id, type, text, attributes' JSON, marks' JSON and CRDT state.
// A deleted block keeps only its id, type and an empty state (`delete_block` clears the rest: nothing can edit or
// restore it), so deleting blocks makes room again. Not counted: ids and stamps of the page itself, its view
// (one filter and one sort, each within the mutation limits) and the lists of its rows and inline databases,
// which are other pages.
//
// `page.stored_bytes` holds it, kept by every batch that changes it (its growth is written once per page at the
// batch's end); NULL means "not counted yet", and `countPageSizes` counts those at open.

extension PageStore {
  /// A block row's size in SQL (the measure above), for a row of `block`.
  static let blockBytesSQL = """
    length(id) + length(CAST(type AS BLOB)) + length(CAST(text AS BLOB)) + length(CAST(attributes AS BLOB))
    + length(CAST(marks AS BLOB)) + coalesce(length(crdt), 0)
    """

  /// Counts the size of every page not counted yet (stored before sizes were kept). Once, at open, after the
  /// CRDT states were backfilled (they count).
  static func countPageSizes(_ connection: any StoreConnection) throws {
    guard
      try !connection.query("SELECT 1 FROM page WHERE stored_bytes IS NULL LIMIT 1").isEmpty
    else { return }
    try connection.transaction(writing: true) {
      try connection.execute(
        """
        UPDATE page SET stored_bytes = length(CAST(title AS BLOB))
          + coalesce((SELECT sum(length(CAST(name AS BLOB)) + length(CAST(value AS BLOB))) FROM property
                      WHERE page_id = page.id AND value IS NOT NULL), 0)
          + coalesce((SELECT sum(\(blockBytesSQL)) FROM block WHERE page_id = page.id), 0)
        WHERE stored_bytes IS NULL
        """)
    }
  }

  /// The page's stored size as of the last committed batch (0 for a page that does not exist).
  public func storedBytes(of page: EntityID) throws -> Int {
    let statement = try connection.statement("SELECT coalesce(stored_bytes, 0) FROM page WHERE id = ?")
    try statement.bind([.text(page.rawValue)])
    defer { statement.reset() }
    return try statement.step() ? Int(statement.int64(0)) : 0
  }

  /// A block row's stored size (0 if there is no such block).
  func storedBytes(ofBlock block: EntityID) throws -> Int {
    let statement = try connection.statement("SELECT \(Self.blockBytesSQL) FROM block WHERE id = ?")
    try statement.bind([.text(block.rawValue)])
    defer { statement.reset() }
    return try statement.step() ? Int(statement.int64(0)) : 0
  }

  /// Adds each page's growth to its stored size (the end of a batch).
  func writeGrowth(_ growth: [EntityID: Int]) throws {
    guard !growth.isEmpty else { return }
    let update = try connection.statement(
      "UPDATE page SET stored_bytes = coalesce(stored_bytes, 0) + ? WHERE id = ?")
    for (page, bytes) in growth {
      try update.bind([.integer(Int64(bytes)), .text(page.rawValue)])
      _ = try update.step()
      update.reset()
    }
  }

  /// The CRDT state a deleted block keeps (an empty text's).
  static let emptyTextState = TextDocument().encoded()
}

/// How much pages grew in a batch: the mutations applied so far, and the one being applied (dropped if it is
/// rejected, kept when it is applied).
struct PageGrowth {
  private(set) var batch: [EntityID: Int] = [:]
  private var mutation: [(page: EntityID, bytes: Int)] = []

  /// The growth counted for `page` so far, the current mutation's included.
  func pending(_ page: EntityID) -> Int {
    var total = batch[page] ?? 0
    for entry in mutation where entry.page == page { total += entry.bytes }
    return total
  }

  mutating func add(_ page: EntityID, _ bytes: Int) { mutation.append((page, bytes)) }

  /// The current mutation was applied: its growth counts.
  mutating func keepMutation() {
    for (page, bytes) in mutation { batch[page, default: 0] += bytes }
    mutation.removeAll(keepingCapacity: true)
  }

  /// The current mutation was rejected: it changed nothing.
  mutating func dropMutation() { mutation.removeAll(keepingCapacity: true) }
}

extension ApplyContext {
  /// Checks that `page` may grow by `bytes` and counts it; a shrink (or no change) always may, so a page larger
  /// than the limit (stored before it) can still be edited in every way that does not grow it. Call as the
  /// mutation's last check, right before its writes: the rejection must come before anything is written.
  mutating func grow(_ page: EntityID, by bytes: Int) throws {
    if bytes > 0 {
      let limit = store.limits.maxPageBytes
      let size = try store.storedBytes(of: page) + growth.pending(page) + bytes
      if size > limit {
        throw Rejection(
          .tooLarge,
          message: "page \(page) would hold \(size) bytes, over [limits] page_bytes (\(limit) bytes)")
      }
    }
    growth.add(page, bytes)
  }
}
