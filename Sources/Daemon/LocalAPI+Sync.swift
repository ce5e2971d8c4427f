import DaemonCore
import EventLoop
import Web

/// `POST /v1/sync`: the HTTP side of a sync request. The request becomes the machine's `syncRequested` event and
/// its `answerSync` outcome becomes the answer (SyncStateMachine+SyncRequests.swift decides when and what); all
/// this adds is the deadline and the figures of a `SyncAnswer`. Loop thread only.
///
/// | outcome | answer |
/// |---|---|
/// | `synced` | 200 `{"pushed", "fetched", "pendingMutations", "failedMutations"}` |
/// | `unreachable` | 503 the broker is unreachable: the last error |
/// | `pushFailed`, `pagesNotFetched` | 502 naming what failed and the last error |
/// | `checkFailed` | 503 (the broker) or 500 (the local store) with why |
/// | `timedOut` | 504 after `syncTimeout` |
/// | `stopped` | 503 the daemon is stopping |
extension LocalAPI {
  /// One `POST /v1/sync` waiting for its outcome.
  final class PendingSync {
    let responder: HTTPResponder
    /// Mutations queued when it came, and pages downloaded since the daemon started: `pushed` and `fetched` are
    /// counted from them.
    let pendingAtStart: Int
    let fetchedAtStart: Int
    let deadline: LoopTimer

    init(responder: HTTPResponder, pendingAtStart: Int, fetchedAtStart: Int, deadline: LoopTimer) {
      self.responder = responder
      self.pendingAtStart = pendingAtStart
      self.fetchedAtStart = fetchedAtStart
      self.deadline = deadline
    }
  }

  func startSync(_ responder: HTTPResponder) {
    let pendingAtStart: Int
    do {
      pendingAtStart = try store.status().pendingMutations
    } catch {
      responder.respond(errorResponse(error))
      return
    }
    lastSyncID += 1
    let id = SyncRequestID(lastSyncID)
    let deadline = LoopTimer(loop: driver.loop)
    syncs[id] = PendingSync(
      responder: responder, pendingAtStart: pendingAtStart, fetchedAtStart: driver.fetchedPages,
      deadline: deadline)
    deadline.start(after: syncTimeout) { [weak self] in self?.driver.handle(.syncTimedOut(id)) }
    driver.handle(.syncRequested(id))
  }

  /// The machine's outcome for a sync request: its HTTP answer.
  func syncAnswered(_ id: SyncRequestID, _ outcome: SyncOutcome) {
    guard let sync = syncs.removeValue(forKey: id) else { return }
    sync.deadline.close()
    sync.responder.respond(answer(outcome, sync))
  }

  /// Answers every waiting sync with `error` (the local API closes).
  func answerWaitingSyncs(_ error: HTTPResponseError) {
    for (_, sync) in syncs.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
      sync.deadline.close()
      sync.responder.respond(error.response)
    }
    syncs = [:]
  }

  private func answer(_ outcome: SyncOutcome, _ sync: PendingSync) -> HTTPResponse {
    let lastError = driver.lastError
    switch outcome {
    case .synced:
      do {
        let counts = try store.status()
        return json.response(
          SyncAnswer(
            pushed: max(0, sync.pendingAtStart - counts.pendingMutations),
            fetched: driver.fetchedPages - sync.fetchedAtStart, pendingMutations: counts.pendingMutations,
            failedMutations: counts.failedMutations))
      } catch {
        return HTTPResponseError(.internalServerError, "local store error: \(error)").response
      }
    case .unreachable:
      return HTTPResponseError(
        .serviceUnavailable, "the broker is unreachable: \(lastError ?? "not connected")"
      ).response
    case .pushFailed:
      return HTTPResponseError(.badGateway, "the push failed: \(lastError ?? "unknown error")").response
    case .pagesNotFetched(let count):
      return HTTPResponseError(
        .badGateway, "\(count) pages could not be fetched: \(lastError ?? "unknown error")"
      ).response
    case .checkFailed(.broker(let reason)):
      return HTTPResponseError(.serviceUnavailable, reason).response
    case .checkFailed(.localStore(let reason)):
      return HTTPResponseError(.internalServerError, reason).response
    case .timedOut:
      return HTTPResponseError(.gatewayTimeout, "sync did not finish in \(syncTimeout / 1000) s").response
    case .stopped:
      return HTTPResponseError(.serviceUnavailable, "the daemon is stopping").response
    }
  }
}
