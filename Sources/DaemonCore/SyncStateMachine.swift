import SyncModel

/// The device daemon's sync loop as a value without I/O: it takes `SyncEvent`s and returns the `SyncAction`s the
/// wiring performs, whose results come back as events.
///
///     idle ──start──▶ connecting ──opened──▶ subscribing ──subscribed──▶ catchingUp ──answer──▶ fetching ──▶ live
///                       ▲   │ failed             │                          │ (nothing changed: straight to live)
///                       │   ▼                    └── closed, at any point from subscribing to live ──┐
///                  disconnected ◀──── schedule a reconnect to the next broker: BrokerFailover, full jitter ◀┘
///     any state ──stop──▶ stopped (closeConnection, cancelTimer; then nothing, whatever comes)
///
/// - Catch-up: the whole offline set is subscribed on each connection, and the catch-up request goes only after
///   `subscribed`, so no change falls between them (docs/protocol.md, "Catch-up and fetch").
/// - Fetches: changed and poked pages wait in one pending map (page → newest known `lastUpdatedTime`), fetched in
///   batches of `maxPagesPerFetch`, one batch at a time. A poke for a page already pending only raises its time;
///   one for a page in the batch in flight is dropped unless newer; a `refetch` (a page settled by a push's
///   answer) is not: it is fetched again after that batch. Pokes that come before `live` stay pending
///   and are fetched after the catch-up's pages; pokes for pages not offline are ignored. Pending pages survive a
///   lost connection (the next catch-up would find them anyway). Pages a fetch reports failed are fetched again
///   at the next heartbeat, after the next catch-up, or at once when poked; a page fetched is no longer failed.
/// - Pushes: only while `live`, one in flight. A push cut by a lost connection counts as unanswered and is sent
///   again once live (the broker applies each mutation exactly once). A retryable failure is pushed again at the
///   next heartbeat or once live after a reconnect, whichever comes first: no timer of its own, and new local
///   edits do not hammer a failing broker in between.
/// - Timers: one (`scheduleTimer` replaces the previous): the reconnect delay while disconnected, the heartbeat
///   while live, none in between. An idle live daemon schedules nothing but its heartbeat: no polling.
/// - Pages added to the offline set while connected are subscribed at once and fetched (from whatever is current)
///   after their `subscribed`; pages removed are unsubscribed. While disconnected only the set changes.
/// - Sync requests (`pagesync sync`): see SyncStateMachine+SyncRequests.swift. They ride on the states above and
///   add one catch-up check of their own; their answers come after the actions of the event that decides them.
///
/// Owned by the daemon's loop thread. Times are milliseconds on the injected clock; events that carry `now` use
/// it, the others read `clock`.
public struct SyncStateMachine<Random: RandomNumberGenerator & Sendable>: Sendable {
  /// What the one timer is for.
  enum TimerPurpose: Sendable, Equatable {
    case reconnect
    case heartbeat
  }

  struct Timer: Sendable, Equatable {
    var purpose: TimerPurpose
    var at: UInt64
  }

  public private(set) var state: SyncState = .idle
  /// The pages kept offline, as last told.
  public private(set) var offlinePages: Set<EntityID>
  /// Which broker of the list to try next and when (`BrokerFailover`: the reconnect backoff, per round).
  public private(set) var failover: BrokerFailover
  /// The reconnect policy and its count of failed rounds.
  public var backoff: ReconnectBackoff { failover.backoff }
  /// The index in `[broker] url` of the broker the daemon is on, or is trying next.
  public var broker: Int { failover.current }
  /// Time between heartbeats while live, ms (`[sync] heartbeat_interval`).
  public private(set) var heartbeatInterval: UInt64
  /// The most pages in one `fetch`.
  public private(set) var maxPagesPerFetch: Int

  private var random: Random
  private let clock: @Sendable () -> UInt64
  private var timer: Timer?
  /// Pages to fetch, with the newest `lastUpdatedTime` known.
  private var pending: [EntityID: UInt64] = [:]
  /// The batch being fetched (or every page, for `refetchAll`); nil when no fetch is outstanding.
  private var inFlight: [EntityID: UInt64]?
  /// Pages a fetch failed, fetched again at the next heartbeat or catch-up.
  private var failed: [EntityID: UInt64] = [:]
  /// The outstanding `subscribe`s on this connection, oldest first; the first is the whole set.
  private var subscribesAwaiting: [[EntityID]] = []
  /// Mutations are queued and not yet answered.
  private var pushWanted = false
  private var pushInFlight = false
  /// A retryable push failure waits for the next heartbeat or connection.
  private var pushDeferred = false
  /// Sync requests not answered yet, oldest first.
  var syncRequests: [SyncRequest] = []

  public init(
    offlinePages: Set<EntityID>, backoff: ReconnectBackoff, heartbeatInterval: UInt64, maxPagesPerFetch: Int,
    random: Random, clock: @escaping @Sendable () -> UInt64, brokerCount: Int = 1
  ) {
    precondition(heartbeatInterval > 0 && maxPagesPerFetch > 0, "heartbeat and fetch batch must be positive")
    self.offlinePages = offlinePages
    failover = BrokerFailover(brokerCount: brokerCount, backoff: backoff)
    self.heartbeatInterval = heartbeatInterval
    self.maxPagesPerFetch = maxPagesPerFetch
    self.random = random
    self.clock = clock
  }

  /// New settings from a configuration reload. The backoff keeps its attempt count (a device that keeps failing
  /// does not start over at the base delay); the new heartbeat interval applies from the next timer scheduled,
  /// the new fetch size from the next fetch.
  public mutating func reconfigure(
    backoff new: ReconnectBackoff, heartbeatInterval: UInt64, maxPagesPerFetch: Int
  ) {
    precondition(heartbeatInterval > 0 && maxPagesPerFetch > 0, "heartbeat and fetch batch must be positive")
    failover.backoff.base = new.base
    failover.backoff.cap = new.cap
    failover.backoff.resetAfter = new.resetAfter
    self.heartbeatInterval = heartbeatInterval
    self.maxPagesPerFetch = maxPagesPerFetch
  }

  /// Whether the stream is open (subscribing, catching up, fetching or live).
  public var isConnected: Bool {
    switch state {
    case .subscribing, .catchingUp, .fetching, .live: true
    case .idle, .disconnected, .connecting, .stopped: false
    }
  }

  /// Whether everything known is done: live, nothing to fetch or being fetched, no subscription awaiting its
  /// answer, no push in flight or wanted (a deferred one counts as wanted).
  public var isSettled: Bool {
    state == .live && pending.isEmpty && inFlight == nil && subscribesAwaiting.isEmpty && !pushWanted
      && !pushInFlight
  }

  /// Whether a retryable push failure waits for the next heartbeat or connection.
  public var isPushDeferred: Bool { pushDeferred }

  /// Pages that a fetch failed and that wait for the next heartbeat or catch-up.
  public var failedPages: Set<EntityID> { Set(failed.keys) }

  /// Takes one event; returns what to do, in order: the event's own actions, then the answers and checks of sync
  /// requests it made due.
  public mutating func handle(_ event: SyncEvent) -> [SyncAction] {
    if state == .stopped { return [] }
    let actions = transition(event)
    return actions + advanceSyncRequests()
  }

  private mutating func transition(_ event: SyncEvent) -> [SyncAction] {
    switch event {
    case .start:
      guard state == .idle else { return [] }
      state = .connecting
      return [.openConnection]
    case .timerFired(let now):
      return timerFired(now: now)
    case .reconnectNow:
      return reconnectNow()
    case .connectionOpened(let now):
      guard state == .connecting else { return [] }
      failover.connected(at: now)
      state = .subscribing
      let pages = offlinePages.sorted()
      subscribesAwaiting = [pages]
      return [.subscribe(pages: pages)]
    case .connectionFailed(let now, _):
      guard state == .connecting || isConnected else { return [] }
      return disconnect(now: now, brokerLost: true)
    case .connectionClosed(let now, _, let brokerLost):
      guard state == .connecting || isConnected else { return [] }
      return disconnect(now: now, brokerLost: brokerLost)
    case .subscribed:
      return subscribed()
    case .catchUpAnswered(let changed, let gone, let epochChanged):
      return catchUpAnswered(changed: changed, gone: gone, epochChanged: epochChanged)
    case .fetched(let fetchedPages, let failedPages):
      return fetched(fetchedPages, failed: failedPages)
    case .poked(let page, let time):
      return poked(page, lastUpdatedTime: time)
    case .refetch(let pages):
      for (page, time) in pages where offlinePages.contains(page) && state != .idle {
        pending[page] = max(pending[page] ?? 0, failed.removeValue(forKey: page) ?? 0, time)
      }
      return state == .live ? fetchNextBatch() : []
    case .mutationsQueued:
      pushWanted = true
      return pushIfDue()
    case .pushAnswered(let moreQueued):
      guard pushInFlight else { return [] }
      pushInFlight = false
      pushWanted = moreQueued
      return pushIfDue()
    case .pushFailed(let retryable):
      guard pushInFlight else { return [] }
      pushInFlight = false
      pushWanted = retryable
      pushDeferred = retryable
      return []
    case .offlineSetChanged(let added, let removed):
      return offlineSetChanged(added: added, removed: removed)
    case .syncRequested, .syncCheckAnswered, .syncCheckFailed, .syncTimedOut:
      return syncRequestEvent(event)
    case .stop:
      var actions: [SyncAction] = []
      if state == .connecting || isConnected { actions.append(.closeConnection) }
      if timer != nil { actions.append(.cancelTimer) }
      actions += syncRequests.map { .answerSync($0.id, .stopped) }
      syncRequests = []
      state = .stopped
      timer = nil
      return actions
    }
  }

  // MARK: Transitions

  /// While disconnected, connect at once instead of waiting out the backoff delay.
  mutating func reconnectNow() -> [SyncAction] {
    guard state == .disconnected else { return [] }
    timer = nil
    state = .connecting
    return [.cancelTimer, .openConnection]
  }

  private mutating func poked(_ page: EntityID, lastUpdatedTime time: UInt64) -> [SyncAction] {
    note(page, changedAt: time)
    return state == .live ? fetchNextBatch() : []
  }

  /// An offline page changed as of `time`: pending, unless the batch in flight already asks for that time. A
  /// page whose fetch failed is fetched now rather than at the heartbeat, with the newer of both times.
  mutating func note(_ page: EntityID, changedAt time: UInt64) {
    guard offlinePages.contains(page), state != .idle else { return }
    let known = max(time, failed.removeValue(forKey: page) ?? 0)
    if let sent = inFlight?[page], sent >= known { return }
    pending[page] = max(pending[page] ?? 0, known)
  }

  private mutating func timerFired(now: UInt64) -> [SyncAction] {
    // A timer not due yet, or replaced since, is stale: the wiring's one timer is the last one scheduled.
    guard let due = timer, now >= due.at else { return [] }
    timer = nil
    switch due.purpose {
    case .reconnect:
      guard state == .disconnected else { return [] }
      state = .connecting
      return [.openConnection]
    case .heartbeat:
      guard state == .live else { return [] }
      var actions = schedule(.heartbeat, at: now + heartbeatInterval)
      pushDeferred = false
      actions += pushIfDue()
      Self.merge(&pending, failed)
      failed = [:]
      actions += fetchNextBatch()
      return actions
    }
  }

  private mutating func disconnect(now: UInt64, brokerLost: Bool) -> [SyncAction] {
    state = .disconnected
    // What was in flight is unanswered: fetch it (and what failed) after the next catch-up, push it again.
    if let batch = inFlight { Self.merge(&pending, batch.filter { offlinePages.contains($0.key) }) }
    Self.merge(&pending, failed)
    inFlight = nil
    failed = [:]
    subscribesAwaiting = []
    pushInFlight = false
    pushDeferred = false
    // The next broker of the list (the same one when there is one, or when the broker was not the problem),
    // after the backoff's delay.
    let delay = failover.lost(at: now, using: &random, moveOn: brokerLost)
    return schedule(.reconnect, at: now + delay)
  }

  private mutating func subscribed() -> [SyncAction] {
    guard isConnected, !subscribesAwaiting.isEmpty else { return [] }
    let pages = subscribesAwaiting.removeFirst()
    if state == .subscribing {
      state = .catchingUp
      return [.sendCatchUp]
    }
    // Pages added while connected: fetch what is current now that their changes will be notified.
    for page in pages where offlinePages.contains(page) && inFlight?[page] == nil {
      pending[page] = pending[page] ?? 0
    }
    return state == .live ? fetchNextBatch() : []
  }

  private mutating func catchUpAnswered(
    changed: [EntityID: UInt64], gone: [EntityID], epochChanged: Bool
  ) -> [SyncAction] {
    guard state == .catchingUp else { return [] }
    var actions: [SyncAction] = []
    if !gone.isEmpty {
      actions.append(.purge(pages: gone.sorted()))
      for page in gone {
        pending[page] = nil
        failed[page] = nil
      }
    }
    state = .fetching
    if epochChanged {
      // Every page comes whole: pokes already pending are fetched after it, as their times may be newer.
      inFlight = [:]
      actions.append(.refetchAll)
      return actions
    }
    Self.merge(&pending, changed.filter { offlinePages.contains($0.key) })
    return actions + fetchNextBatch()
  }

  private mutating func fetched(_ fetchedPages: [EntityID], failed failedPages: [EntityID]) -> [SyncAction] {
    guard isConnected, let batch = inFlight else { return [] }
    inFlight = nil
    // A page fetched is as new as the broker had it: whatever failed for it before is done.
    for page in fetchedPages { failed[page] = nil }
    for page in failedPages where offlinePages.contains(page) {
      failed[page] = max(failed[page] ?? 0, batch[page] ?? 0)
    }
    // While live, the end of a fetch that leaves nothing outstanding is a completed sync.
    let wasLive = state == .live
    let actions = fetchNextBatch()
    return wasLive && actions.isEmpty && pending.isEmpty ? markSyncedIfComplete(now: clock()) : actions
  }

  private mutating func offlineSetChanged(added: [EntityID], removed: [EntityID]) -> [SyncAction] {
    let removedSet = Set(removed)
    let newlyAdded = Set(added).subtracting(offlinePages).subtracting(removedSet).sorted()
    let gone = removedSet.intersection(offlinePages).sorted()
    offlinePages.formUnion(newlyAdded)
    offlinePages.subtract(gone)
    for page in gone {
      pending[page] = nil
      failed[page] = nil
    }
    guard isConnected else { return [] }
    var actions: [SyncAction] = []
    if !newlyAdded.isEmpty {
      subscribesAwaiting.append(newlyAdded)
      actions.append(.subscribe(pages: newlyAdded))
    }
    if !gone.isEmpty { actions.append(.unsubscribe(pages: gone)) }
    return actions
  }

  // MARK: Helpers

  /// The next batch if none is in flight; once nothing is left while fetching, goes live.
  mutating func fetchNextBatch() -> [SyncAction] {
    guard state == .fetching || state == .live, inFlight == nil else { return [] }
    if !pending.isEmpty {
      let pages = pending.keys.sorted().prefix(maxPagesPerFetch)
      var batch: [EntityID: UInt64] = [:]
      for page in pages { batch[page] = pending.removeValue(forKey: page) }
      // A dictionary keeps its capacity when emptied: after a first sync of 10,000 pages, 0.4 MB for nothing.
      if pending.isEmpty { pending = [:] }
      inFlight = batch
      return [.fetch(pages: batch)]
    }
    guard state == .fetching else { return [] }
    state = .live
    let now = clock()
    return markSyncedIfComplete(now: now) + schedule(.heartbeat, at: now + heartbeatInterval) + pushIfDue()
  }

  /// `markSynced` unless a page is left to fetch again.
  private func markSyncedIfComplete(now: UInt64) -> [SyncAction] {
    failed.isEmpty ? [.markSynced(now)] : []
  }

  private mutating func pushIfDue() -> [SyncAction] {
    guard state == .live, pushWanted, !pushInFlight, !pushDeferred else { return [] }
    pushInFlight = true
    return [.push]
  }

  private mutating func schedule(_ purpose: TimerPurpose, at time: UInt64) -> [SyncAction] {
    timer = Timer(purpose: purpose, at: time)
    return [.scheduleTimer(at: time)]
  }

  private static func merge(_ target: inout [EntityID: UInt64], _ source: [EntityID: UInt64]) {
    target.merge(source) { max($0, $1) }
  }
}
