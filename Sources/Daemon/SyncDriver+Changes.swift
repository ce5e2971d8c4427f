import DaemonCore
import SyncModel

/// What the driver tells the change stream (`changes`), always after the store committed it. Loop thread only.
extension SyncDriver {
  /// A local edit of `page` committed with its queued mutations: tells the stream, then lets the machine push.
  func editCommitted(_ page: EntityID, deleted: Bool) {
    let downloaded = (try? store.offlineEntry(page))??.lastDownloadedTimestamp
    changes.publish(
      .page(
        id: page, lastDownloadedTimestamp: downloaded.flatMap { $0 > 0 ? $0 : nil }, source: .local,
        deleted: deleted))
    mutationsQueued()
  }

  /// Pages that entered and left the offline set.
  func publishOfflineChange(_ change: ForestChange) {
    for page in change.addedPages { changes.publish(.offline(id: page, available: true)) }
    for page in change.removedPages { changes.publish(.offline(id: page, available: false)) }
  }

  /// Pages whose local copy was dropped because the broker says they are gone.
  func publishGone(_ pages: [EntityID]) {
    for page in pages {
      changes.publish(.page(id: page, lastDownloadedTimestamp: nil, source: .remote, deleted: true))
    }
  }

  /// The rejections among the mutations `sent` that are kept as conflicts (not those sent again).
  func publishConflicts(among sent: [UInt64]) {
    guard let first = sent.min() else { return }
    let ids = Set(sent)
    do {
      for conflict in try store.conflicts(from: first) where ids.contains(conflict.mutationId) {
        changes.publish(
          .conflict(mutationId: conflict.mutationId, page: conflict.page, reason: conflict.reason.name))
      }
    } catch {
      logger.error("cannot read the conflicts for the change stream", metadata: ["error": "\(error)"])
    }
  }

  /// The sync state, if it changed: the machine's state, the connection, the queue's length (counted again
  /// only after something may have changed it: `publishedPending` is nil).
  func publishSyncState() {
    let pending: Int
    if let known = publishedPending {
      pending = known
    } else {
      do {
        pending = try store.pendingMutationCount()
      } catch {
        logger.error("cannot count the mutation queue", metadata: ["error": "\(error)"])
        return
      }
      publishedPending = pending
    }
    changes.publish(.sync(state: "\(machine.state)", connected: isConnected, pendingMutations: pending))
  }
}
