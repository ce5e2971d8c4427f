import SyncModel

/// What one `OfflineForest` operation changed: the minimal writes to `offline_action` and `offline_page`.
///
/// Minimal means: every deleted row existed before, every inserted row did not, no row is both, and a page is in
/// `addedPages` (`removedPages`) only if it was not (was) in the offline set before the operation and is (is not)
/// after it. Apply `deletedActions` before `insertedActions`: a row whose `from` changed (its page moved within a
/// tree) is one delete and one insert of the same (origin, impacted, type).
///
/// Order is deterministic: trees in the order the operation handled them; within a tree, deletions by impacted
/// id, insertions in walk order (a parent before its children, so `addedPages` is also a good download order).
public struct ForestChange: Equatable, Sendable {
  /// Rows to insert into `offline_action`.
  public var insertedActions: [OfflineAction]
  /// Rows to delete from `offline_action`.
  public var deletedActions: [OfflineAction]
  /// Pages that entered the offline set: subscribe to their channels and download them.
  public var addedPages: [EntityID]
  /// Pages that left the offline set: unsubscribe, and drop their local data unless they hold unsent mutations
  /// (the caller decides).
  public var removedPages: [EntityID]

  public init(
    insertedActions: [OfflineAction] = [], deletedActions: [OfflineAction] = [], addedPages: [EntityID] = [],
    removedPages: [EntityID] = []
  ) {
    self.insertedActions = insertedActions
    self.deletedActions = deletedActions
    self.addedPages = addedPages
    self.removedPages = removedPages
  }

  /// Whether there is nothing to write.
  public var isEmpty: Bool {
    insertedActions.isEmpty && deletedActions.isEmpty && addedPages.isEmpty && removedPages.isEmpty
  }
}
