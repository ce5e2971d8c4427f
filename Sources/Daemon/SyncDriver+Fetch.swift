import DaemonCore
import SyncModel
import SyncProtocol

/// Catch-up and fetches: one catch-up per connection, sync requests' extra checks, and paginated fetches whose
/// deltas are stored as they come and whose pages are then pruned. Loop thread only.
extension SyncDriver {
  /// The catch-up of a connection, once the whole offline set is subscribed.
  func sendCatchUp() {
    let current = generation
    let request: BrokerProtocol.CatchUpRequest
    do {
      request = try catchUpRequest()
    } catch {
      logger.error("cannot read the catch-up map", metadata: ["error": "\(error)"])
      dropConnection("local store error: \(error)", generation: current, brokerLost: false)
      return
    }
    counters.catchUpRequests += 1
    link.catchUp(request) { [weak self] result in
      guard let self, current == generation else { return }
      switch result {
      case .failure(let error):
        if refusedToken(error, generation: current) { return }
        dropConnection("catch-up failed: \(error)", generation: current)
      case .success(let answer):
        caughtUp(answer, askedWithEpoch: request.epoch)
      }
    }
  }

  /// Every offline page with the time it was last downloaded, and the epoch those times come from.
  private func catchUpRequest() throws -> BrokerProtocol.CatchUpRequest {
    BrokerProtocol.CatchUpRequest(epoch: try store.epoch(), pages: try store.catchUpMap())
  }

  private func caughtUp(_ answer: BrokerProtocol.CatchUpResponse, askedWithEpoch epoch: String?) {
    logger.info(
      "caught up",
      metadata: [
        "changed": "\(answer.changed.count)", "gone": "\(answer.gone.count)",
        "epochChanged": "\(answer.epochChanged)",
      ])
    var requeued = 0
    if answer.epochChanged {
      epochToAdopt = answer.epoch
      // A replaced (restored) broker store may lack what it acknowledged: queue it again before the pages gone
      // there are purged and the others refetched, so their copies keep showing those edits.
      record { requeued = try store.requeueForRestoredBroker() }
      logger.warning(
        "the broker's store was replaced (new epoch): refetching every page, pushing again what it may lack",
        metadata: ["epoch": "\(answer.epoch)", "requeued": "\(requeued)"])
    } else if epoch == nil {
      record { try store.setEpoch(answer.epoch) }
    }
    handle(.catchUpAnswered(changed: answer.changed, gone: answer.gone, epochChanged: answer.epochChanged))
    if requeued > 0 { mutationsQueued() }
  }

  /// A sync request's check: one catch-up outside the connection's, whose changed pages the machine fetches.
  /// Its answer is reported whatever happened to the connection meanwhile (the machine decides what it means).
  func checkForChanges(_ id: SyncRequestID) {
    let request: BrokerProtocol.CatchUpRequest
    do {
      request = try catchUpRequest()
    } catch {
      handle(.syncCheckFailed(id, .localStore("local store error: \(error)")))
      return
    }
    counters.catchUpRequests += 1
    link.catchUp(request) { [weak self] result in
      guard let self else { return }
      switch result {
      case .failure(let error):
        _ = refusedToken(error, generation: generation)
        handle(.syncCheckFailed(id, .broker("catch-up failed: \(error)")))
      case .success(let answer): handle(.syncCheckAnswered(id, changed: answer.changed))
      }
    }
  }

  /// Fetches `pages` (paginated), stores each answer's deltas as they come (one transaction per answer, a
  /// savepoint per delta), prunes the offline set by what they say, and reports `fetched`. `refetchAll`: every
  /// page whole (the broker's epoch changed).
  func fetch(_ pages: [EntityID], refetchAll: Bool) {
    var since: [EntityID: UInt64] = [:]
    do {
      if refetchAll {
        since.reserveCapacity(pages.count)
        for page in pages { since[page] = 0 }
      } else {
        since = try store.downloadTimes(of: pages)
      }
    } catch {
      logger.error("cannot read download times", metadata: ["error": "\(error)"])
      handle(.fetched(pages: [], failed: pages))
      return
    }
    let epoch = refetchAll ? nil : (try? store.epoch()) ?? nil
    let round = FetchRound(
      driver: self, generation: generation, pages: pages, since: since, epoch: epoch, refetchAll: refetchAll)
    fetchRound = round
    round.ask(cursor: nil)
  }

  /// One answer of a round: its deltas stored, then the next page asked for or the round finished.
  fileprivate func fetched(_ answer: BrokerProtocol.FetchResponse, in round: FetchRound, cursor: EntityID?) {
    for page in storeDeltas(answer.deltas) {
      round.stored.append(page)
      round.storedSet.insert(page)
    }
    round.gone += answer.gone
    if let next = answer.nextCursor, let cursor, next <= cursor {
      // Asking again from there would never end: an answer not understood.
      let problem = "the broker's nextCursor \(next) does not advance past \(cursor)"
      lastError = "fetch failed: \(problem)"
      logger.warning("fetch failed", metadata: ["error": "\(problem)", "pages": "\(round.pages.count)"])
      finish(round, failed: round.pages.filter { !round.storedSet.contains($0) })
    } else if let next = answer.nextCursor {
      round.ask(cursor: next)
    } else {
      let goneSet = Set(round.gone)
      finish(round, failed: round.pages.filter { !round.storedSet.contains($0) && !goneSet.contains($0) })
    }
  }

  fileprivate func fetchFailed(_ error: BrokerLinkError, in round: FetchRound) {
    if !refusedToken(error, generation: round.generation) { lastError = "fetch failed: \(error)" }
    logger.warning("fetch failed", metadata: ["error": "\(error)", "pages": "\(round.pages.count)"])
    finish(round, failed: round.pages.filter { !round.storedSet.contains($0) })
  }

  private func finish(_ round: FetchRound, failed: [EntityID]) {
    if fetchRound === round { fetchRound = nil }
    pagesGone(round.gone)
    if round.refetchAll, failed.isEmpty, let epoch = epochToAdopt {
      record { try store.setEpoch(epoch) }
      epochToAdopt = nil
    }
    // Before pruning, not after: a prune may grow the offline set by thousands of pages (the peak of a first
    // sync), and the code the round's answers ran (reading, storing) need not stay resident under it.
    memoryMayBeReturned()
    // Pruning changes the offline set whichever connection fetched: the machine hears of it either way.
    offlineSetChanged(offlineSet.prune(afterFetching: round.stored))
    guard round.generation == generation else { return }
    handle(.fetched(pages: round.stored, failed: failed))
  }

  /// Stores one answer's deltas in one transaction, a savepoint per delta; returns the pages stored. Pages that
  /// were marked missing and are stored now lose the mark in that transaction (`missingPagesFound`).
  private func storeDeltas(_ deltas: [PageDelta]) -> [EntityID] {
    var missing: Set<EntityID> = []
    record { missing = Set(try store.missingPages()) }
    let outcomes: [(any Error)?]
    do {
      outcomes = try store.applyDeltas(deltas)
    } catch {
      outcomes = Array(repeating: error, count: deltas.count)
    }
    var stored: [EntityID] = []
    for (delta, error) in zip(deltas, outcomes) {
      if let error {
        logger.error("cannot store a delta", metadata: ["page": "\(delta.id)", "error": "\(error)"])
      } else {
        fetchedPages += 1
        stored.append(delta.id)
        changes.publish(
          .page(
            id: delta.id, lastDownloadedTimestamp: delta.lastUpdatedTime, source: .remote,
            deleted: delta.page.deleted))
      }
    }
    if !missing.isEmpty { missingPagesFound(stored.filter { missing.contains($0) }) }
    return stored
  }
}

/// A fetch under way: what it asks and what its answers brought so far. Only the link's completion holds it while
/// a request is out, and the driver weakly, so it goes when its last answer is handled. (It replaced local
/// functions that captured themselves through the completion: a cycle that kept every round's maps alive, 0.4 MB
/// for each fetch of 10,000 pages.)
final class FetchRound {
  private weak var driver: SyncDriver?
  let generation: Int
  let pages: [EntityID]
  let since: [EntityID: UInt64]
  let epoch: String?
  let refetchAll: Bool
  var stored: [EntityID] = []
  var storedSet: Set<EntityID> = []
  var gone: [EntityID] = []

  init(
    driver: SyncDriver, generation: Int, pages: [EntityID], since: [EntityID: UInt64], epoch: String?,
    refetchAll: Bool
  ) {
    self.driver = driver
    self.generation = generation
    self.pages = pages
    self.since = since
    self.epoch = epoch
    self.refetchAll = refetchAll
  }

  /// Asks for the page of answers that starts at `cursor`.
  func ask(cursor: EntityID?) {
    guard let driver else { return }
    let request = BrokerProtocol.FetchRequest(
      epoch: epoch, pages: since, limit: driver.configuration.fetchBatch, cursor: cursor)
    driver.counters.fetchRequests += 1
    driver.link.fetch(request) { [self] result in
      guard let driver = self.driver else { return }
      switch result {
      case .failure(let error): driver.fetchFailed(error, in: self)
      case .success(let answer): driver.fetched(answer, in: self, cursor: cursor)
      }
    }
  }
}
