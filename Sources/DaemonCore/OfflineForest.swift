import SyncModel

/// The device's offline forest: which pages are kept offline, and why (Notion's offline trees).
///
/// Every active (origin, reason) is one tree. Its rows are what a walk of the structure from the origin reaches:
///
///     origin ──(kind page)──▶ its inline databases ──(kind database)──▶ their first `databaseRowLimit` rows in
///     view ──(a row is a page)──▶ its inline databases ──▶ …        (unknown kind: no descendants yet)
///
/// The walk is breadth first and takes every page once: a page reached again (a cycle in stale local data, or a
/// page listed in two places) keeps the row of its first, shallowest path, so `from` is its parent on that path.
/// The offline set is the set of impacted pages: a page is offline iff at least one row impacts it, so it leaves
/// only with its last reason.
///
/// The forest is a value without I/O. Each operation reads the structure it is given, updates the forest, and
/// returns the minimal `ForestChange` to write; the caller writes it to `offline_action` / `offline_page` in the
/// same transaction that stores whatever made it (a toggle, a visit, a refetched page). The structure must be the
/// local store as of that transaction. Operations only walk the trees they touch: `refresh` costs the size of the
/// trees through the refetched pages, not of the forest. Owned by the daemon's loop thread.
public struct OfflineForest: Sendable {
  /// An offline tree's identity: one origin and one reason.
  struct TreeKey: Hashable, Comparable, Sendable {
    var origin: EntityID
    var type: OfflineReason

    static func < (lhs: TreeKey, rhs: TreeKey) -> Bool {
      lhs.origin != rhs.origin ? lhs.origin < rhs.origin : lhs.type < rhs.type
    }
  }

  /// How many rows in view of an offline database are inherited (`[offline] database_row_limit`).
  public internal(set) var databaseRowLimit: Int
  /// How many recently visited pages are kept offline (`[offline] recent_limit`).
  public internal(set) var recentLimit: Int
  /// The origins of `recent` trees, most recently visited first; at most `recentLimit`.
  public internal(set) var recentOrder: [EntityID] = []

  /// Every tree: impacted page → `from`, for every row but the origin's own (whose `from` is nil). The origin is
  /// never a key of its own tree's map; an active tree with no descendants is an empty map.
  var trees: [TreeKey: [EntityID: EntityID]] = [:]
  /// Impacted page → the trees with a row for it; never an empty set. Its keys are the offline set.
  var treesByPage: [EntityID: TreeKeys] = [:]

  /// An empty forest.
  public init(databaseRowLimit: Int = 50, recentLimit: Int = 20) {
    precondition(databaseRowLimit >= 0 && recentLimit >= 0, "offline limits must not be negative")
    self.databaseRowLimit = databaseRowLimit
    self.recentLimit = recentLimit
  }

  // MARK: Reading

  /// Every row, as `offline_action` holds them. Built on each call: O(rows).
  public var actions: Set<OfflineAction> {
    var rows = Set<OfflineAction>(minimumCapacity: trees.reduce(0) { $0 + $1.value.count + 1 })
    for (key, parents) in trees {
      rows.insert(OfflineAction(origin: key.origin, from: nil, impacted: key.origin, type: key.type))
      for (impacted, from) in parents {
        rows.insert(OfflineAction(origin: key.origin, from: from, impacted: impacted, type: key.type))
      }
    }
    return rows
  }

  /// The offline set, as `offline_page` holds it. Built on each call: O(pages).
  public var offlinePages: Set<EntityID> { Set(treesByPage.keys) }

  /// How many pages are offline.
  public var offlinePageCount: Int { treesByPage.count }

  /// Whether a page is in the offline set.
  public func isOffline(_ page: EntityID) -> Bool { treesByPage[page] != nil }

  /// The rows that keep `page` offline (`pagesync why`), by origin then reason; empty if it is not offline.
  public func reasons(for page: EntityID) -> [OfflineAction] {
    guard let keys = treesByPage[page] else { return [] }
    return keys.sorted().map { key in
      OfflineAction(
        origin: key.origin, from: key.origin == page ? nil : trees[key]?[page], impacted: page, type: key.type
      )
    }
  }

  /// The origins kept offline for `reason`, sorted by id (`recentOrder` has the recent ones by recency).
  public func origins(_ reason: OfflineReason) -> [EntityID] {
    trees.keys.filter { $0.type == reason }.map(\.origin).sorted()
  }

  // MARK: Reasons

  /// Makes `origin` offline for `reason`, with everything it inherits.
  ///
  /// Adding `recent` is `visit(origin)`. Adding a reason already there walks its tree again, so it also catches up
  /// with the structure; with an unchanged structure the change is empty.
  public mutating func add(
    _ reason: OfflineReason, origin: EntityID, structure: some OfflineStructure
  ) -> ForestChange {
    if reason == .recent { return visit(origin, structure: structure) }
    var recorder = ChangeRecorder()
    let key = TreeKey(origin: origin, type: reason)
    setTree(key, to: walk(from: origin, structure: structure), recording: &recorder)
    return recorder.finish(treesByPage)
  }

  /// Removes `reason` from `origin`: deletes exactly the rows of that origin and type. Pages they impacted stay
  /// offline if another row still impacts them. Removing `recent` also forgets the visit. Reads no structure: the
  /// rows to delete are the tree's own.
  public mutating func remove(_ reason: OfflineReason, origin: EntityID) -> ForestChange {
    if reason == .recent, let position = recentOrder.firstIndex(of: origin) {
      recentOrder.remove(at: position)
    }
    var recorder = ChangeRecorder()
    setTree(TreeKey(origin: origin, type: reason), to: nil, recording: &recorder)
    return recorder.finish(treesByPage)
  }

  /// Records a visit: `page` becomes the most recent `recent` origin (its tree is walked again), and the oldest
  /// one beyond `recentLimit` loses its `recent` rows. With `recentLimit` 0, visits keep nothing.
  public mutating func visit(_ page: EntityID, structure: some OfflineStructure) -> ForestChange {
    guard recentLimit > 0 else { return ForestChange() }
    if let position = recentOrder.firstIndex(of: page) { recentOrder.remove(at: position) }
    recentOrder.insert(page, at: 0)
    var recorder = ChangeRecorder()
    setTree(
      TreeKey(origin: page, type: .recent), to: walk(from: page, structure: structure), recording: &recorder)
    trimRecent(recording: &recorder)
    return recorder.finish(treesByPage)
  }

  // MARK: Pruning

  /// A page or database was refetched: its kind, inline databases or rows in view may have changed. Walks again
  /// every tree that has a row for it and applies the difference (rows that left, rows that entered, rows whose
  /// `from` changed). A page in no tree changes nothing.
  public mutating func refresh(_ page: EntityID, structure: some OfflineStructure) -> ForestChange {
    refresh(CollectionOfOne(page), structure: structure)
  }

  /// Several pages were refetched together (a catch-up): like `refresh(_:structure:)` for each, but each tree
  /// through any of them is walked once.
  public mutating func refresh(
    _ pages: some Sequence<EntityID>, structure: some OfflineStructure
  ) -> ForestChange {
    // Trees that do not reach a refetched page never read its data, so they cannot change.
    var keys = Set<TreeKey>()
    for page in pages {
      if let through = treesByPage[page] { keys.formUnion(through) }
    }
    return rewalk(keys.sorted(), structure: structure)
  }

  /// Walks every tree again: after restoring the forest, or whenever the structure may have changed unseen.
  public mutating func refreshAll(structure: some OfflineStructure) -> ForestChange {
    rewalk(trees.keys.sorted(), structure: structure)
  }

  /// Applies new limits (a configuration reload): recent origins beyond `recentLimit` are dropped, oldest first,
  /// and if `databaseRowLimit` changed every tree is walked again.
  public mutating func reconfigure(
    databaseRowLimit: Int, recentLimit: Int, structure: some OfflineStructure
  ) -> ForestChange {
    precondition(databaseRowLimit >= 0 && recentLimit >= 0, "offline limits must not be negative")
    var recorder = ChangeRecorder()
    self.recentLimit = recentLimit
    // Trim first, so no tree is walked and then dropped in the same change.
    trimRecent(recording: &recorder)
    if databaseRowLimit != self.databaseRowLimit {
      self.databaseRowLimit = databaseRowLimit
      rewalk(trees.keys.sorted(), structure: structure, recording: &recorder)
    }
    return recorder.finish(treesByPage)
  }

  // MARK: Internals

  private mutating func rewalk(_ keys: [TreeKey], structure: some OfflineStructure) -> ForestChange {
    var recorder = ChangeRecorder()
    rewalk(keys, structure: structure, recording: &recorder)
    return recorder.finish(treesByPage)
  }

  private mutating func rewalk(
    _ keys: [TreeKey], structure: some OfflineStructure, recording recorder: inout ChangeRecorder
  ) {
    // The trees of one origin (toggled and favorite, say) have the same shape: walk it once.
    var walks: [EntityID: WalkedTree] = [:]
    for key in keys {
      let walked = walks[key.origin] ?? walk(from: key.origin, structure: structure)
      walks[key.origin] = walked
      setTree(key, to: walked, recording: &recorder)
    }
  }

  mutating func trimRecent(recording recorder: inout ChangeRecorder) {
    while recentOrder.count > recentLimit {
      let oldest = recentOrder.removeLast()
      setTree(TreeKey(origin: oldest, type: .recent), to: nil, recording: &recorder)
    }
  }

  /// Makes the rows of tree `key` those of `walked` (nil: no tree), recording the minimal difference.
  mutating func setTree(_ key: TreeKey, to walked: WalkedTree?, recording recorder: inout ChangeRecorder) {
    let old = trees[key]
    guard let walked else {
      guard let old else { return }
      var rows = old.map {
        OfflineAction(origin: key.origin, from: $0.value, impacted: $0.key, type: key.type)
      }
      rows.append(OfflineAction(origin: key.origin, from: nil, impacted: key.origin, type: key.type))
      rows.sort { $0.impacted < $1.impacted }
      for row in rows {
        recorder.deleted(row)
        unlink(row.impacted, from: key, recording: &recorder)
      }
      trees[key] = nil
      return
    }
    let new = walked.parents
    if let old {
      var deletions: [(row: OfflineAction, leaves: Bool)] = []
      for (page, from) in old where new[page] != from {
        let row = OfflineAction(origin: key.origin, from: from, impacted: page, type: key.type)
        deletions.append((row, new[page] == nil))
      }
      deletions.sort { $0.row.impacted < $1.row.impacted }
      for deletion in deletions {
        recorder.deleted(deletion.row)
        // A row whose `from` changed is replaced below; its page stays in the tree.
        if deletion.leaves { unlink(deletion.row.impacted, from: key, recording: &recorder) }
      }
    } else {
      recorder.inserted(OfflineAction(origin: key.origin, from: nil, impacted: key.origin, type: key.type))
      link(key.origin, to: key, recording: &recorder)
    }
    // Room for exactly this tree's new rows and pages: appended one by one, 5,000 rows (56 bytes each) grew the
    // array to room for 8,192, and each doubling held the old room and the new at once.
    var (rows, pages) = (walked.order.count - 1, walked.order.count - 1)
    if let old {
      (rows, pages) = (0, 0)
      for page in walked.order.dropFirst() {
        let before = old[page]
        if before != new[page] { rows += 1 }
        if before == nil { pages += 1 }
      }
    }
    recorder.reserve(insertions: rows, touches: pages)
    for page in walked.order.dropFirst() {
      let before = old?[page]
      let from = new[page]
      if before == from { continue }
      recorder.inserted(OfflineAction(origin: key.origin, from: from, impacted: page, type: key.type))
      if before == nil { link(page, to: key, recording: &recorder) }
    }
    trees[key] = new
  }

  private mutating func link(_ page: EntityID, to key: TreeKey, recording recorder: inout ChangeRecorder) {
    recorder.touch(page, wasOffline: treesByPage[page] != nil)
    treesByPage[page, default: []].insert(key)
  }

  private mutating func unlink(_ page: EntityID, from key: TreeKey, recording recorder: inout ChangeRecorder)
  {
    recorder.touch(page, wasOffline: treesByPage[page] != nil)
    treesByPage[page]?.remove(key)
    if treesByPage[page]?.isEmpty == true { treesByPage[page] = nil }
  }
}

/// Collects one operation's rows and the offline state of every page it touched, then reports the pages whose
/// membership changed.
struct ChangeRecorder {
  private var change = ForestChange()
  /// Pages touched, in the order first touched, with whether each was offline before the operation.
  private var touched: [(page: EntityID, wasOffline: Bool)] = []
  private var seen: Set<EntityID> = []

  mutating func inserted(_ row: OfflineAction) { change.insertedActions.append(row) }
  mutating func deleted(_ row: OfflineAction) { change.deletedActions.append(row) }

  mutating func touch(_ page: EntityID, wasOffline: Bool) {
    if seen.insert(page).inserted { touched.append((page, wasOffline)) }
  }

  /// Makes room for `insertions` more inserted rows and `touches` more pages touched, at once: exactly when one
  /// tree brings them, doubling when many small ones do (so an operation over many trees does not reallocate for
  /// each).
  mutating func reserve(insertions: Int, touches: Int) {
    func room(for more: Int, count: Int, capacity: Int) -> Int? {
      count + more > capacity ? Swift.max(count + more, count * 2) : nil
    }
    if let rows = room(
      for: insertions, count: change.insertedActions.count, capacity: change.insertedActions.capacity)
    {
      change.insertedActions.reserveCapacity(rows)
    }
    if let pages = room(for: touches, count: touched.count, capacity: touched.capacity) {
      touched.reserveCapacity(pages)
      seen.reserveCapacity(pages)
    }
  }

  /// The change, given the offline set after the operation.
  func finish(_ treesByPage: [EntityID: OfflineForest.TreeKeys]) -> ForestChange {
    var result = change
    for (page, wasOffline) in touched {
      let isOffline = treesByPage[page] != nil
      if isOffline && !wasOffline { result.addedPages.append(page) }
      if wasOffline && !isOffline { result.removedPages.append(page) }
    }
    return result
  }
}
