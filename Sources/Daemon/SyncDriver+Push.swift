import DaemonCore
import DaemonStore
import SyncModel

/// Pushing the mutation queue, one batch in flight, and recording the broker's answer. Loop thread only.
extension SyncDriver {
  func push() {
    let current = generation
    let mutations: [Mutation]
    do {
      mutations = try store.pendingMutations(limit: configuration.pushBatch)
    } catch {
      logger.error("cannot read the mutation queue", metadata: ["error": "\(error)"])
      handle(.pushFailed(retryable: true))
      return
    }
    guard !mutations.isEmpty else {
      handle(.pushAnswered(moreQueued: false))
      return
    }
    let batch = MutationBatch(
      client: store.clientID, workspace: configuration.workspace, mutations: mutations)
    pushInFlight = true
    link.push(batch) { [weak self] result in
      guard let self else { return }
      pushInFlight = false
      // Once the answer is recorded (whatever it was), a stop waiting for it may close the store.
      defer {
        if let settled = onPushSettled {
          onPushSettled = nil
          settled()
        }
      }
      switch result {
      case .success(let outcome): pushAnswered(outcome, sent: mutations.map(\.id), generation: current)
      case .failure(let error):
        counters.pushFailures += 1
        // Refused for its token: the mutations stay queued, untouched, and go once a fresh token is accepted.
        if refusedToken(error, generation: current) { return }
        lastError = "push failed: \(error)"
        logger.warning("push failed", metadata: ["error": "\(error)", "mutations": "\(mutations.count)"])
        record { try store.markPushFailed(ids: mutations.map(\.id), error: error.description) }
        guard current == generation else { return }
        handle(.pushFailed(retryable: error.isRetryable))
      }
    }
  }

  /// Records the outcome (applied and duplicate mutations leave the queue, rejected ones stay as conflicts, but
  /// `clock_ahead` ones go again with a fresh time and `id_reused` ones under a new client id: `LocalStore.settle`)
  /// whatever connection it belongs to; tells the machine only if it is the current one's.
  private func pushAnswered(_ outcome: BatchOutcome, sent: [UInt64], generation current: Int) {
    counters.batchesPushed += 1
    counters.mutationsPushed += outcome.results.count
    var more = false
    var settlement = Settlement()
    do {
      settlement = try store.settle(outcome, sent: sent, nowMillis: WallClock.millis())
      more = try store.status().pendingMutations > 0
    } catch {
      logger.error("cannot record the broker's answer", metadata: ["error": "\(error)"])
    }
    let settled = settlement.settled
    publishedPending = nil
    if let change = settlement.clientChange {
      logger.warning(
        """
        another copy of this device's store used the same mutation ids (a store restored from a backup, a cloned \
        image): the queued edits go again under a new client id
        """,
        metadata: [
          "previousClient": "\(change.previous)", "client": "\(change.current)",
          "mutations": "\(change.renumbered)",
        ])
    }
    if settlement.restamped > 0 {
      logger.warning(
        "the broker rejected mutations stamped too far ahead (clock_ahead): sent again with a fresh time",
        metadata: ["count": "\(settlement.restamped)"])
    }
    // Edited pages with nothing left to push: their copy is ours, not the broker's. Download them whole (an
    // edit that lost or was rejected changed nothing there, so no notification would come); local copies of
    // pages not offline were kept only for their mutations.
    offlineSet.dropCopiesNotKept(settled)
    let recovered =
      settlement.restamped
      + (settlement.clientChange == nil
        ? 0
        : outcome.results.count {
          $0.reason == .idReused
        })
    let rejected = outcome.results.count { $0.status == .rejected } - recovered
    counters.mutationsRejected += max(rejected, 0)
    if rejected > 0 {
      logger.warning(
        "the broker rejected mutations; kept for recovery (pagesync conflicts)",
        metadata: ["count": "\(rejected)"])
      publishConflicts(among: sent)
    }
    guard current == generation else {
      publishSyncState()
      return
    }
    var refetch: [EntityID: UInt64] = [:]
    for page in settled where offlineSet.isOffline(page) { refetch[page] = max(outcome.pages[page] ?? 1, 1) }
    if !refetch.isEmpty { handle(.refetch(pages: refetch)) }
    handle(.pushAnswered(moreQueued: more))
  }
}
