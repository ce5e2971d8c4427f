import DaemonCore
import DaemonStore
import Logging
import SyncModel

/// The offline set: the `OfflineForest` in memory and its rows in the local store (`offline_action`,
/// `offline_page`), kept equal, and the local copies that no reason keeps any more, dropped.
///
/// Every operation runs on the forest inside `LocalStore.readingStructure` (the store's pages are the structure it
/// walks) and writes its `ForestChange` in one transaction; a read or a write that fails reverts the forest by the
/// change (`OfflineForest.revert`), so both the forest and the rows stay as they were, and the operation throws. Local copies
/// of the pages that left are dropped after the change is written, unless they hold unsent mutations
/// (`LocalStore.dropLocalCopies` decides); a failure there is logged, not thrown, since the change stands.
///
/// Each operation returns its `ForestChange`: the caller tells the sync state machine which pages entered or left
/// (`offlineSetChanged`), which subscribes and unsubscribes them. Loop thread only (it uses the store).
final class OfflineSet {
  private let store: LocalStore
  var logger: Logger
  /// The forest, always as the store's rows say.
  private(set) var forest: OfflineForest

  /// Restores the forest from the store's rows, as the daemon starts. The limits may differ from those the rows
  /// were written with (the oldest recent visits beyond `recentLimit` go) and pages may have been stored since:
  /// every tree is walked again and the differences are written. Throws if the rows are unsound or the store
  /// fails: the daemon must not run on an offline set it cannot trust.
  init(store: LocalStore, databaseRowLimit: Int, recentLimit: Int, logger: Logger) throws {
    self.store = store
    self.logger = logger
    let rows = try store.loadForestRows()
    var (forest, trimmed) = try OfflineForest.restore(
      actions: rows.actions, recentOrder: rows.recentOrder, databaseRowLimit: databaseRowLimit,
      recentLimit: recentLimit)
    try store.applyForestChange(trimmed, recentOrder: forest.recentOrder)
    let walked = try store.readingStructure { forest.refreshAll(structure: $0) }
    try store.applyForestChange(walked, recentOrder: forest.recentOrder)
    _ = try store.dropLocalCopies(trimmed.removedPages + walked.removedPages)
    self.forest = forest
  }

  // MARK: Reading

  /// The pages kept offline.
  var offlinePages: Set<EntityID> { forest.offlinePages }
  var offlinePageCount: Int { forest.offlinePageCount }
  func isOffline(_ page: EntityID) -> Bool { forest.isOffline(page) }
  /// Whether `origin` is kept offline for `reason` by the user's own choice (not as a descendant).
  func hasReason(_ reason: OfflineReason, origin: EntityID) -> Bool {
    forest.origins(reason).contains(origin)
  }

  // MARK: Reasons

  /// Adds or removes a reason for `origin` (the local API's `offline`, `favorite`; adding `recent` is a visit).
  func changeReason(_ reason: OfflineReason, origin: EntityID, add: Bool) throws -> ForestChange {
    try commit { forest, structure in
      guard add else { return forest.remove(reason, origin: origin) }
      return reason == .recent
        ? forest.visit(origin, structure: structure)
        : forest.add(reason, origin: origin, structure: structure)
    }
  }

  /// New limits from a configuration reload: the oldest recent visits beyond `recentLimit` leave, and with a new
  /// `databaseRowLimit` every tree is walked again.
  func reshape(databaseRowLimit: Int, recentLimit: Int) throws -> ForestChange {
    try commit { forest, structure in
      forest.reconfigure(databaseRowLimit: databaseRowLimit, recentLimit: recentLimit, structure: structure)
    }
  }

  // MARK: Pruning

  /// Pruning after a fetch stored `pages`: the trees through them are walked again against what was stored (rows
  /// that left a view, inline databases removed, new rows in view). Then fetched pages that are not offline (a
  /// read-through, or a page that left while its fetch was in flight) lose their copy. A structure read or a
  /// write that fails is logged and pruning waits for the next fetch of those pages: the change is then empty.
  func prune(afterFetching pages: [EntityID]) -> ForestChange {
    guard !pages.isEmpty else { return ForestChange() }
    var change = ForestChange()
    do {
      change = try commit { forest, structure in forest.refresh(pages, structure: structure) }
    } catch {
      logger.error(
        "cannot read the page structure; pruning waits for the next fetch", metadata: ["error": "\(error)"])
    }
    dropCopiesNotKept(pages)
    return change
  }

  /// Drops the local copies of those of `pages` that are not offline and hold no unsent mutation (pages edited
  /// here whose mutations are all acknowledged, pages read through).
  func dropCopiesNotKept(_ pages: [EntityID]) {
    let candidates = pages.filter { !forest.isOffline($0) }
    guard !candidates.isEmpty else { return }
    do {
      _ = try store.dropLocalCopies(candidates)
    } catch {
      logger.error("cannot drop local copies", metadata: ["error": "\(error)"])
    }
  }

  // MARK: Internals

  /// Runs `operation` on the forest with the store as its structure and writes its change; if a structure read
  /// or the write fails, reverts the forest (`OfflineForest.revert`) and throws. Then drops the local copies of the
  /// pages that left.
  ///
  /// The forest is changed in place and reverted on failure rather than changed as a copy kept on success: a
  /// copy held the whole offline set's index twice while a first sync grew it (0.3 MB at 5,000 pages, twice that
  /// at 10,000; docs/benchmarks.md, "The first sync's peak, round 15").
  private func commit(
    _ operation: (inout OfflineForest, LocalStore) -> ForestChange
  ) throws -> ForestChange {
    let before = forest.settings
    var change = ForestChange()
    do {
      try store.readingStructure { change = operation(&forest, $0) }
      // A visit to the most recent page changes no row but may reorder the recent ranks.
      if !change.isEmpty || forest.recentOrder != before.recentOrder {
        try store.applyForestChange(change, recentOrder: forest.recentOrder)
      }
    } catch {
      forest.revert(change, to: before)
      throw error
    }
    dropCopiesNotKept(change.removedPages)
    return change
  }
}
