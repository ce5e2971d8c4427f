import SyncModel

/// Sync requests (`POST /v1/sync`, `pagesync sync`): "push, then catch up; return when done, fail if the broker is
/// unreachable" (DESIGN.md), as events of the machine rather than a second machine in the wiring.
///
///     syncRequested ──▶ waiting ──settled──▶ checking ──syncCheckAnswered──▶ settling ──settled──▶ answerSync(synced)
///                          │     (checkForChanges)   │  (its pages poked)        │          (or pagesNotFetched)
///                          └──── disconnected: unreachable · push deferred: pushFailed ────┘
///                                                    └── syncCheckFailed: checkFailed
///     any phase ── syncTimedOut: timedOut · stop: stopped
///
/// - `syncRequested` while disconnected reconnects at once (as `reconnectNow`); in any other state it waits for
///   what is under way.
/// - *Settled* is `isSettled`: live, nothing pending, being fetched or subscribed, no push in flight or wanted.
///   Waiting for it first means the queue is pushed and what the connection's catch-up and pokes named is
///   fetched; the extra check then finds what changed since (pokes may be coalesced or in flight), and the answer
///   waits until that is fetched too.
/// - While `checking`, the connection may come and go: the check's answer is used whenever it comes (its pages
///   are pending until the next `live`), and the request is judged again after it.
/// - A request is answered once, with the first outcome that applies after an event, and then forgotten: a late
///   `syncCheckAnswered` or `syncTimedOut` for it changes nothing.
extension SyncStateMachine {
  /// Where one sync request is.
  enum SyncRequestPhase: Sendable, Equatable {
    /// Waiting for the connection and for everything known to be done.
    case waiting
    /// Its catch-up check is out.
    case checking
    /// Waiting for what the check found to be fetched.
    case settling
  }

  struct SyncRequest: Sendable, Equatable {
    var id: SyncRequestID
    var phase = SyncRequestPhase.waiting
  }

  /// The sync requests not answered yet, oldest first.
  public var waitingSyncRequests: [SyncRequestID] { syncRequests.map(\.id) }

  /// The events of sync requests (`syncRequested`, `syncCheckAnswered`, `syncCheckFailed`, `syncTimedOut`).
  mutating func syncRequestEvent(_ event: SyncEvent) -> [SyncAction] {
    switch event {
    case .syncRequested(let id):
      guard !syncRequests.contains(where: { $0.id == id }) else { return [] }
      syncRequests.append(SyncRequest(id: id))
      return reconnectNow()
    case .syncCheckAnswered(let id, let changed):
      guard let index = syncRequests.firstIndex(where: { $0.id == id && $0.phase == .checking }) else {
        return []
      }
      syncRequests[index].phase = .settling
      // What the check found is fetched as pokes are (only offline pages, the newest time kept), in batches.
      for (page, time) in changed { note(page, changedAt: time) }
      return state == .live ? fetchNextBatch() : []
    case .syncCheckFailed(let id, let failure):
      guard syncRequests.contains(where: { $0.id == id && $0.phase == .checking }) else { return [] }
      return answerSync(id, .checkFailed(failure))
    case .syncTimedOut(let id):
      return answerSync(id, .timedOut)
    default:
      return []
    }
  }

  /// Judges every request not `checking` against the state after an event: answers those that are decided,
  /// sends the check of those that were waiting and are now settled.
  mutating func advanceSyncRequests() -> [SyncAction] {
    guard !syncRequests.isEmpty else { return [] }
    var actions: [SyncAction] = []
    var remaining: [SyncRequest] = []
    for var request in syncRequests {
      switch outcome(of: request) {
      case .some(let outcome):
        actions.append(.answerSync(request.id, outcome))
      case .none where request.phase == .waiting && isSettled:
        request.phase = .checking
        actions.append(.checkForChanges(request.id))
        remaining.append(request)
      case .none:
        remaining.append(request)
      }
    }
    syncRequests = remaining
    return actions
  }

  /// Answers the request `id` with `outcome` if it is still waiting; nothing otherwise.
  mutating func answerSync(_ id: SyncRequestID, _ outcome: SyncOutcome) -> [SyncAction] {
    guard let index = syncRequests.firstIndex(where: { $0.id == id }) else { return [] }
    syncRequests.remove(at: index)
    return [.answerSync(id, outcome)]
  }

  /// The outcome `request` has now, nil while it must wait (or its check is out).
  private func outcome(of request: SyncRequest) -> SyncOutcome? {
    guard request.phase != .checking else { return nil }
    if state == .disconnected { return .unreachable }
    if isPushDeferred { return .pushFailed }
    guard request.phase == .settling, isSettled else { return nil }
    let failed = failedPages.count
    return failed == 0 ? .synced : .pagesNotFetched(failed)
  }
}
