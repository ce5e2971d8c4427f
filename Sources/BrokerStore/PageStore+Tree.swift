import SQLiteStore
import SyncModel

/// The page tree's two rules, no cycles and at most `maxTreeDepth` pages from a top-level page down to any page,
/// each decided with bounded work.
///
/// - Depth: a walk up from the new parent, in one recursive query, that stops after `maxTreeDepth` pages. A
///   parent that deep (or under a cycle an older broker let in) takes no child: `too_deep`.
/// - Cycles: the same walk. A move makes a cycle exactly when the page is among its new parent's ancestors; with
///   the depth bounded, the walk sees all of them (it used to give up after 10,000 and let the move through).
/// - The moved subtree: every page keeps its `height` (0 for a page without children, else 1 + the greatest
///   height of its children, deleted children included), so a move knows how deep the subtree reaches without
///   reading it: the new parent's depth + 1 + the page's height must stay within the limit. A create or a move
///   refreshes the heights of the pages above the old and new parent, one page at a time up while they change
///   (at most `maxTreeDepth` pages each).
///
/// Every page walked is the batch's work (`BatchWork.perPage`), charged before the mutation writes; every height
/// refreshed (`BatchWork.perHeight`) is counted after it wrote, against the mutations after it.
extension ApplyContext {
  /// The height of a page in a cycle left by an older broker (it has no top): "deeper than any limit".
  static let heightOfACycle: Int64 = 1 << 31

  /// How many pages are on the way from `page` up to its top-level page, `page` included (a top-level page is
  /// 1); nil when that is more than the store's limit, or the walk went round a cycle. `found`: whether `mover`
  /// is among those pages, i.e. whether `page` is `mover` or lies under it.
  mutating func depth(of page: EntityID, lookingFor mover: EntityID?) throws -> (depth: Int?, found: Bool) {
    let limit = store.maxTreeDepth
    let statement = try connection.statement(
      """
      WITH RECURSIVE up(id, parent, n) AS (
        SELECT id, parent_id, 1 FROM page WHERE id = ?1
        UNION ALL
        SELECT page.id, page.parent_id, up.n + 1 FROM page JOIN up ON page.id = up.parent WHERE up.n <= ?2
      )
      SELECT coalesce(max(n), 0), coalesce(max(CASE WHEN id = ?3 THEN 1 ELSE 0 END), 0) FROM up
      """)
    try statement.bind([
      .text(page.rawValue), .integer(Int64(limit)), mover.map { .text($0.rawValue) } ?? .null,
    ])
    defer { statement.reset() }
    guard try statement.step() else { return (nil, false) }
    let walked = Int(statement.int64(0))
    let found = statement.int64(1) != 0
    statement.reset()
    try charge(walked * BatchWork.perPage)
    return (walked <= limit ? walked : nil, found)
  }

  /// The stored height of `page` (0 if it has none).
  func height(of page: EntityID) throws -> Int64 {
    let statement = try connection.statement("SELECT height FROM page WHERE id = ?")
    try statement.bind([.text(page.rawValue)])
    defer { statement.reset() }
    return try statement.step() ? max(statement.int64(0), 0) : 0
  }

  /// Brings the heights of `page` and the pages above it up to date after its children changed: each is
  /// computed again from its children, going up while it changes, at most `maxTreeDepth` + 1 pages (more is
  /// only possible in a tree an older broker let grow deeper, or round a cycle; heights there stay as they were,
  /// which can only make moves in that tree refused more often).
  mutating func refreshHeights(from page: EntityID?) throws {
    let read = try connection.statement(
      """
      SELECT height, parent_id, (SELECT max(child.height) FROM page AS child WHERE child.parent_id = page.id)
      FROM page WHERE id = ?
      """)
    let write = try connection.statement("UPDATE page SET height = ? WHERE id = ?")
    var current = page
    var steps = 0
    while let id = current, steps <= store.maxTreeDepth {
      steps += 1
      account(BatchWork.perHeight)
      try read.bind([.text(id.rawValue)])
      guard try read.step() else {
        read.reset()
        return
      }
      let stored = read.int64(0)
      let parent = read.string(1).map(EntityID.init(trusted:))
      let computed = read.isNull(2) ? 0 : min(read.int64(2) + 1, Self.heightOfACycle)
      read.reset()
      if computed == stored { return }
      try write.bind([.integer(computed), .text(id.rawValue)])
      _ = try write.step()
      write.reset()
      current = parent
    }
  }

  /// Refuses a page under `parent` (nil: at the top) whose subtree is `height` high if the tree would be deeper
  /// than the limit, and a move of `mover` under its own subtree.
  mutating func checkPlace(under parent: EntityID?, height: Int64, mover: EntityID?) throws {
    guard let parent else {
      if height + 1 > Int64(store.maxTreeDepth) { throw Rejection(.tooDeep) }
      return
    }
    let (depth, found) = try depth(of: parent, lookingFor: mover)
    if found { throw Rejection(.invalidParent) }
    guard let depth, Int64(depth) + 1 + height <= Int64(store.maxTreeDepth) else { throw Rejection(.tooDeep) }
  }
}

extension PageStore {
  /// Gives every page its height when some have none (-1: the column was just added by migration 4, or a
  /// broker of an earlier version inserted the page since): from the leaves up, in memory, two integers a page.
  /// Pages in a cycle an older broker let in get `heightOfACycle`. Once, at open, in one transaction.
  static func backfillHeights(_ connection: any StoreConnection) throws {
    guard try !connection.query("SELECT 1 FROM page WHERE height < 0 LIMIT 1").isEmpty else { return }
    try connection.transaction(writing: true) {
      // By id, not SQLite's rowid: the same code runs on PostgreSQL.
      var index: [String: Int] = [:]
      var rowids: [String] = []
      var parentRowids: [String?] = []
      for row in try connection.query(
        "SELECT page.id, parent.id FROM page LEFT JOIN page AS parent ON parent.id = page.parent_id")
      {
        guard case .text(let rowid) = row[0] else { continue }
        index[rowid] = rowids.count
        rowids.append(rowid)
        if case .text(let parent) = row[1] {
          parentRowids.append(parent)
        } else {
          parentRowids.append(nil)
        }
      }
      let parents = parentRowids.map { $0.flatMap { index[$0] } }
      var children = [Int](repeating: 0, count: rowids.count)
      for parent in parents { if let parent { children[parent] += 1 } }
      var heights = [Int64](repeating: -1, count: rowids.count)
      var ready = children.indices.filter { children[$0] == 0 }
      for leaf in ready { heights[leaf] = 0 }
      while let page = ready.popLast() {
        guard let parent = parents[page] else { continue }
        heights[parent] = max(heights[parent], heights[page] + 1)
        children[parent] -= 1
        if children[parent] == 0 { ready.append(parent) }
      }
      let write = try connection.statement("UPDATE page SET height = ? WHERE id = ?")
      for (offset, rowid) in rowids.enumerated() {
        // A page whose children never all got a height is in a cycle (its descendants outside it have one).
        let height = children[offset] > 0 ? ApplyContext.heightOfACycle : heights[offset]
        try write.bind([.integer(height), .text(rowid)])
        _ = try write.step()
        write.reset()
      }
    }
  }
}
