import DaemonStore
import SyncModel
import SyncProtocol

/// Whether a page exists for this device, as the broker said (`SyncDriver.checkPageExists`).
enum PageExistence: Equatable {
  /// The broker has it, or this device stores a copy (downloaded, or made here).
  case exists
  /// The broker says this device may not see it: it never existed, or it is another workspace's.
  case missing
  /// Not known: the broker is unreachable or did not answer (why).
  case unchecked(String)
}

/// Pages the broker says this device may not see: purged and marked missing when it says so, unmarked when a
/// download of them is stored, and checked before the user adds a reason for one. Loop thread only.
///
/// Every "offline page found missing" goes through `pagesFoundMissing`, and every "found after all" through
/// `missingPagesFound`, each after the store's transaction committed.
extension SyncDriver {
  /// Pages the broker says this device may not see — a catch-up's or a fetch's `gone`, a `revoked` frame — in
  /// one transaction: their local copies purged (not those holding unsent edits), the offline ones marked
  /// missing (`LocalStore.purge`). Their reasons stay: what becomes of them is the user's call.
  func pagesGone(_ pages: [EntityID]) {
    guard !pages.isEmpty else { return }
    var purge = LocalStore.Purge()
    record { purge = try store.purge(pages, nowMillis: WallClock.millis()) }
    publishGone(purge.dropped)
    pagesFoundMissing(purge.foundMissing)
  }

  /// Offline pages newly marked missing, the mark committed: `offline list` shows them `missing`, `status`
  /// counts them.
  func pagesFoundMissing(_ pages: [EntityID]) {
    guard let first = pages.first else { return }
    for page in pages { changes.publish(.offline(id: page, available: false, missing: true)) }
    logger.warning(
      "offline pages missing on the broker: they do not exist, or this device may not see them",
      metadata: ["count": "\(pages.count)", "first": "\(first)"])
  }

  /// Pages marked missing whose download was stored (which cleared the mark, in the same transaction): the
  /// broker has them after all (made since, or access given back).
  func missingPagesFound(_ pages: [EntityID]) {
    guard let first = pages.first else { return }
    for page in pages { changes.publish(.offline(id: page, available: true)) }
    logger.info(
      "offline pages missing before are on the broker now",
      metadata: ["count": "\(pages.count)", "first": "\(first)"])
  }

  /// Whether `page` exists for this device, before the local API adds a reason for it: a page stored here
  /// exists; otherwise, while connected, one `POST /v1/catchup` for it alone (its `gone` is exactly "may not
  /// see": never existed, or another workspace's; a few bytes either way, unlike reading the page). Disconnected,
  /// or when the check fails, `unchecked`: the reason is then taken as asked, and a page that turns out missing
  /// is marked so when the broker next says it.
  func checkPageExists(_ page: EntityID, completion: @escaping (PageExistence) -> Void) {
    do {
      if try store.hasLocalCopy(page) { return completion(.exists) }
    } catch {
      logger.error("local store error", metadata: ["error": "\(error)"])
    }
    guard isConnected else { return completion(.unchecked(lastError ?? "not connected")) }
    counters.catchUpRequests += 1
    // No epoch: the question is only whether the page may be seen, not what changed since a time.
    let current = generation
    link.catchUp(BrokerProtocol.CatchUpRequest(epoch: nil, pages: [page: 0])) { [weak self] result in
      switch result {
      case .success(let answer): completion(answer.gone.contains(page) ? .missing : .exists)
      case .failure(let error):
        _ = self?.refusedToken(error, generation: current)
        completion(.unchecked("checking page \(page) failed: \(error)"))
      }
    }
  }
}
