import SyncModel

/// Where the daemon's sync loop is (see `SyncStateMachine`'s diagram).
public enum SyncState: Sendable, Equatable {
  /// Built, not started yet.
  case idle
  /// No connection; a reconnect timer is scheduled.
  case disconnected
  /// `openConnection` was asked; waiting for it to open or fail.
  case connecting
  /// Connected; the whole offline set was subscribed; waiting for `subscribed`.
  case subscribing
  /// Subscribed; the catch-up request was sent; waiting for its answer.
  case catchingUp
  /// Fetching what the catch-up answer (and pokes since) said changed.
  case fetching
  /// Caught up: fetching only what pokes name, pushing local edits, a heartbeat scheduled.
  case live
  /// Stopped for good: every event is ignored.
  case stopped
}

/// What happened, fed to `SyncStateMachine.handle(_:)` by the daemon's wiring. Times are the wiring's clock, ms.
/// Answers (`subscribed`, `catchUpAnswered`, `fetched`, `pushAnswered`, `pushFailed`) belong to the current
/// connection: the wiring drops those of a connection it reported closed.
public enum SyncEvent: Sendable, Equatable {
  /// The daemon starts syncing.
  case start(now: UInt64)
  /// The timer last scheduled is due.
  case timerFired(now: UInt64)
  /// Someone wants to sync now (`pagesync sync`): while disconnected, reconnect at once instead of waiting out
  /// the backoff delay; in any other state, nothing changes.
  case reconnectNow
  /// The stream asked for by `openConnection` is open.
  case connectionOpened(now: UInt64)
  /// The stream asked for by `openConnection` could not be opened.
  case connectionFailed(now: UInt64, reason: String)
  /// The open stream was lost (or the broker closed it). `brokerLost`: false when the daemon closed it for a
  /// reason of its own (a new token, a refused one, its store): the next connection goes to the same broker.
  case connectionClosed(now: UInt64, reason: String, brokerLost: Bool = true)
  /// The broker answered the oldest outstanding `subscribe` with `subscribed`.
  case subscribed
  /// The catch-up answer: changed pages with their `lastUpdatedTime`, pages gone, and whether the epoch changed.
  case catchUpAnswered(changed: [EntityID: UInt64], gone: [EntityID], epochChanged: Bool)
  /// The outstanding fetch (or `refetchAll`) finished: pages stored, pages that could not be fetched.
  case fetched(pages: [EntityID], failed: [EntityID])
  /// The stream said a page changed, as of `lastUpdatedTime`.
  case poked(page: EntityID, lastUpdatedTime: UInt64)
  /// The local copies of these pages must be downloaded again, as of the `lastUpdatedTime` given (a push's answer
  /// settled them: their copy was the device's, not the broker's). Unlike a poke, a fetch of one already out does
  /// not count: it was asked for before, and its answer may be a delta merged into that copy; the page is fetched
  /// again after it. A poke of that time during the refetch is coalesced into it, as any.
  case refetch(pages: [EntityID: UInt64])
  /// A local edit was queued (the mutation queue is not empty).
  case mutationsQueued
  /// The broker answered the push in flight; `moreQueued`: mutations remain in the queue.
  case pushAnswered(moreQueued: Bool)
  /// The push in flight failed; `retryable`: the same mutations may be pushed again (a network error, 503),
  /// otherwise the wiring has set them aside and reports any others with `mutationsQueued`.
  case pushFailed(retryable: Bool)
  /// Pages entered or left the offline set (the `ForestChange` of an `OfflineForest` operation).
  case offlineSetChanged(added: [EntityID], removed: [EntityID])
  /// Someone asked to sync now (`POST /v1/sync`, `pagesync sync`): while disconnected, reconnect at once; once
  /// everything known is done, check the broker for changes (`checkForChanges`), fetch what it found, and answer
  /// with `answerSync` (see SyncStateMachine+SyncRequests.swift).
  case syncRequested(SyncRequestID)
  /// The broker answered a `checkForChanges`: the offline pages newer there than here, with their time.
  case syncCheckAnswered(SyncRequestID, changed: [EntityID: UInt64])
  /// A `checkForChanges` could not be made or answered.
  case syncCheckFailed(SyncRequestID, SyncCheckFailure)
  /// The wiring's deadline for a sync request passed.
  case syncTimedOut(SyncRequestID)
  /// The daemon stops syncing; sync requests still waiting are answered `stopped`.
  case stop
}

/// What the wiring must do, in order. Page lists are sorted, so traces are deterministic.
public enum SyncAction: Sendable, Equatable {
  /// Open the device stream; answer with `connectionOpened` or `connectionFailed`.
  case openConnection
  /// Close the device stream.
  case closeConnection
  /// Fire `timerFired` at this time; replaces the timer scheduled before (there is one timer).
  case scheduleTimer(at: UInt64)
  /// Cancel the timer.
  case cancelTimer
  /// Subscribe these pages on the stream; answer with `subscribed`.
  case subscribe(pages: [EntityID])
  /// Unsubscribe these pages on the stream (no answer expected).
  case unsubscribe(pages: [EntityID])
  /// Send one catch-up request built from the store's `{page: lastDownloadedTimestamp}`; answer with
  /// `catchUpAnswered`.
  case sendCatchUp
  /// Fetch these pages up to at least the given `lastUpdatedTime` (0: whatever is current); answer with
  /// `fetched`. At most `maxPagesPerFetch` pages.
  case fetch(pages: [EntityID: UInt64])
  /// Push the head of the mutation queue; answer with `pushAnswered` or `pushFailed`.
  case push
  /// Record `lastSuccessfulSync` = this time: nothing known to have changed is left unfetched.
  case markSynced(UInt64)
  /// Drop the local copies of pages the broker says are gone.
  case purge(pages: [EntityID])
  /// The broker's epoch changed: fetch every offline page whole; answer with `fetched`.
  case refetchAll
  /// Send one catch-up request, as `sendCatchUp` builds it, for a sync request; answer with `syncCheckAnswered`
  /// or `syncCheckFailed`. Not tied to the connection: its answer is reported whatever happened meanwhile.
  case checkForChanges(SyncRequestID)
  /// Answer a sync request; it is forgotten.
  case answerSync(SyncRequestID, SyncOutcome)
}

/// One `pagesync sync` request, numbered by the wiring.
public struct SyncRequestID: Hashable, Sendable, CustomStringConvertible {
  public var rawValue: UInt64

  public init(_ rawValue: UInt64) {
    self.rawValue = rawValue
  }

  public var description: String { "sync \(rawValue)" }
}

/// How a sync request ended.
public enum SyncOutcome: Sendable, Equatable {
  /// Done: what was queued is pushed, what the broker had newer is fetched, nothing is left to do.
  case synced
  /// There is no connection to the broker (a reconnect failed, or the connection was lost).
  case unreachable
  /// The push failed and waits for the next heartbeat or connection.
  case pushFailed
  /// This many offline pages could not be fetched; they are fetched again at the next heartbeat.
  case pagesNotFetched(Int)
  /// The extra catch-up check failed.
  case checkFailed(SyncCheckFailure)
  /// The wiring's deadline passed first.
  case timedOut
  /// The daemon stopped first.
  case stopped
}

/// Why a sync request's catch-up check failed.
public enum SyncCheckFailure: Sendable, Equatable {
  /// The broker could not be asked or did not answer usably.
  case broker(String)
  /// The local store could not say what to ask for.
  case localStore(String)
}
