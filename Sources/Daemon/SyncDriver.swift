import DaemonCore
import DaemonStore
import EventLoop
import FoundationEssentials
import Logging
import StrictJSON
import SyncModel
import SyncProtocol
import TOMLConfig
import Web

/// Runs the `SyncStateMachine` against the real world: performs its actions on the broker link, the local store
/// and the loop's timer, and feeds their results back as events. Owns the store, the offline forest and the
/// machine; the local API (`LocalAPI`) calls into it. Loop thread only.
///
/// - **Generations.** Every connection gets a number; answers (stream messages, HTTP answers) of an older one are
///   not fed to the machine (it has moved on), though their data is still stored: a delta or a batch
///   acknowledgement is true whenever it arrives.
/// - **Re-entrancy.** Events raised while actions are being performed are queued and handled after, in order, so
///   the machine always sees one event at a time.
final class SyncDriver {
  let loop: Loop
  private(set) var configuration: DaemonConfiguration
  private(set) var logger: Logger
  let store: LocalStore
  private(set) var forest: OfflineForest
  private(set) var machine: SyncStateMachine<SystemRandomNumberGenerator>
  let link: BrokerLink
  let json = JSONBodies()
  private let timer: LoopTimer

  private var stream: WebSocket?
  private var generation = 0
  /// For each `subscribe` action on this connection, oldest first: `subscribed` answers still expected (a large
  /// set goes in several frames).
  private var subscribeAnswersAwaited: [Int] = []
  /// The epoch the broker gave in a catch-up whose `refetchAll` is not finished: stored once every page is.
  private var epochToAdopt: String?
  private var eventQueue: [SyncEvent] = []
  private var handlingEvent = false
  /// Page downloads (a delta or a snapshot each) since the daemon started (`fetchedPages`).
  private(set) var fetchedPages = 0
  /// What the daemon did since it started, for `status` (plain counters: loop thread).
  private(set) var counters = SyncCounters()
  /// Bytes of device streams already closed.
  private var closedStreamBytes = (received: 0, sent: 0)
  /// Why the last connection attempt or request failed, for `status` and `sync` errors.
  private(set) var lastError: String?
  /// The newest broker clock seen (`Pagesync-Clock`): local edits are stamped after it.
  private(set) var observedClock = HLCTimestamp.zero
  /// Called after every event is handled (the local API checks its waiting `sync` requests).
  var onProgress: (() -> Void)?
  /// Whether a batch was sent and its answer not yet handled.
  private var pushInFlight = false
  /// Set by `stop` while it waits for the push in flight.
  private var onPushSettled: (() -> Void)?

  /// Ids per `subscribe` frame: 5,000 ids of up to 64 bytes stay under the broker's default 4 MiB frame limit.
  static let idsPerFrame = 5_000

  init(loop: Loop, configuration: DaemonConfiguration, logger: Logger) throws {
    self.loop = loop
    self.configuration = configuration
    self.logger = logger
    try FileSystem.makeParentDirectories(of: configuration.storePath)
    store = try LocalStore(path: configuration.storePath)
    let rows = try store.loadForestRows()
    var (forest, trimmed) = try OfflineForest.restore(
      actions: rows.actions, recentOrder: rows.recentOrder, databaseRowLimit: configuration.databaseRowLimit,
      recentLimit: configuration.recentLimit)
    try store.applyForestChange(trimmed, recentOrder: forest.recentOrder)
    // The limits may differ from those the rows were written with, and pages may have been stored since: walk
    // every tree again against the local store.
    let walked = try store.readingStructure { forest.refreshAll(structure: $0) }
    try store.applyForestChange(walked, recentOrder: forest.recentOrder)
    _ = try store.dropLocalCopies(trimmed.removedPages + walked.removedPages)
    self.forest = forest
    link = BrokerLink(
      loop: loop, url: configuration.brokerURL, token: configuration.token,
      timeoutMillis: UInt64(configuration.requestTimeoutSeconds) * 1000)
    timer = LoopTimer(loop: loop)
    machine = SyncStateMachine(
      offlinePages: forest.offlinePages, backoff: configuration.backoff,
      heartbeatInterval: UInt64(configuration.heartbeatSeconds) * 1000,
      maxPagesPerFetch: configuration.fetchBatch, random: SystemRandomNumberGenerator(),
      clock: { [loop] in loop.now })
    link.onClock = { [unowned self] time in observedClock = max(observedClock, time) }
  }

  /// Starts syncing. Mutations left in the queue by the last run (stopped, crashed or killed before they were
  /// answered) are pushed once connected, as if just edited.
  func start() {
    handle(.start(now: loop.now))
    let pending = (try? store.status().pendingMutations) ?? 0
    if pending > 0 {
      logger.info("mutations queued by the last run will be pushed", metadata: ["mutations": "\(pending)"])
      handle(.mutationsQueued)
    }
  }

  /// Stops syncing: closes the stream and the timer, then the store.
  ///
  /// A push in flight is waited for, at most `drainMillis`, so that its answer is recorded and the store closes
  /// with nothing unsettled; one not answered by then is sent again at the next start (the broker applies each
  /// mutation once). `then` runs once the store is closed.
  func stop(drainMillis: UInt64 = 5_000, then: @escaping () -> Void = {}) {
    handle(.stop)
    timer.close()
    let finish = { [self] in
      link.close()
      store.close()
      then()
    }
    guard pushInFlight else {
      finish()
      return
    }
    logger.info("stopping: waiting for the push in flight", metadata: ["timeoutMs": "\(drainMillis)"])
    let deadline = LoopTimer(loop: loop)
    onPushSettled = { [logger] in
      deadline.close()
      logger.info("stopping: the push in flight was answered")
      finish()
    }
    deadline.start(after: drainMillis) { [weak self, logger] in
      guard let self, onPushSettled != nil else { return }
      onPushSettled = nil
      deadline.close()
      logger.warning(
        "stopping: the push in flight was not answered in time; it is sent again at the next start")
      finish()
    }
  }

  // MARK: Reloading

  /// Takes over a new configuration (SIGHUP). The keys that need a restart keep their running values and are
  /// returned as such; the others apply without dropping anything: backoff, heartbeat and batch sizes from their
  /// next use, new offline limits at once (the forest is walked again, the offline set follows), and a new token
  /// by reopening the stream with it (the broker authorizes a stream once, when it opens).
  func reload(_ new: DaemonConfiguration) -> ReloadPlan {
    var plan = configuration.reloadPlan(to: new)
    let old = configuration
    var next = old.reloaded(from: new)
    if old.databaseRowLimit != next.databaseRowLimit || old.recentLimit != next.recentLimit {
      do {
        try reshapeForest(databaseRowLimit: next.databaseRowLimit, recentLimit: next.recentLimit)
      } catch {
        logger.error(
          "the new offline limits could not be applied; the old ones stay", metadata: ["error": "\(error)"])
        next.databaseRowLimit = old.databaseRowLimit
        next.recentLimit = old.recentLimit
        plan.applied.removeAll { $0.hasPrefix("offline.") }
      }
    }
    configuration = next
    logger.logLevel = Logger.Level(rawValue: next.logLevel) ?? .info
    machine.reconfigure(
      backoff: next.backoff, heartbeatInterval: UInt64(next.heartbeatSeconds) * 1000,
      maxPagesPerFetch: next.fetchBatch)
    link.update(token: next.token, timeoutMillis: UInt64(next.requestTimeoutSeconds) * 1000)
    if old.token != next.token || old.workspace != next.workspace || old.pushBatch != next.pushBatch {
      // A batch the broker refused for its token, workspace or size may pass now.
      handle(.mutationsQueued)
    }
    if old.token != next.token {
      if machine.state != .disconnected && machine.state != .idle && machine.state != .stopped {
        dropConnection("the token changed; reconnecting with the new one", generation: generation)
      }
      handle(.reconnectNow)
    }
    return plan
  }

  /// Rebuilds the forest under new limits, as at start-up: the stored rows with the recent visits trimmed, then
  /// every tree walked again; the differences are written and the machine told.
  private func reshapeForest(databaseRowLimit: Int, recentLimit: Int) throws {
    let rows = try store.loadForestRows()
    var (next, trimmed) = try OfflineForest.restore(
      actions: rows.actions, recentOrder: rows.recentOrder, databaseRowLimit: databaseRowLimit,
      recentLimit: recentLimit)
    let walked = try store.readingStructure { next.refreshAll(structure: $0) }
    forest = next
    applyForestChange(trimmed)
    applyForestChange(walked)
  }

  // MARK: Events

  /// Feeds one event to the machine and performs what it asks, in order.
  func handle(_ event: SyncEvent) {
    eventQueue.append(event)
    guard !handlingEvent else { return }
    handlingEvent = true
    while !eventQueue.isEmpty {
      let next = eventQueue.removeFirst()
      for action in machine.handle(next) { perform(action) }
    }
    handlingEvent = false
    onProgress?()
  }

  private func perform(_ action: SyncAction) {
    switch action {
    case .openConnection: openConnection()
    case .closeConnection:
      generation += 1
      stream?.close(code: .goingAway, reason: "the daemon is stopping")
      stream = nil
    case .scheduleTimer(let at):
      let now = loop.now
      timer.start(after: at > now ? at - now : 0) { [unowned self] in
        handle(.timerFired(now: loop.now))
      }
    case .cancelTimer: timer.stop()
    case .subscribe(let pages): subscribe(pages)
    case .unsubscribe(let pages):
      guard let stream else { return }
      for chunk in Self.chunks(pages) {
        link.send(BrokerProtocol.ClientMessage(op: "unsubscribe", pages: chunk.map(\.rawValue)), on: stream)
      }
    case .sendCatchUp: sendCatchUp()
    case .fetch(let pages): fetch(Array(pages.keys), refetchAll: false)
    case .refetchAll: fetch(forest.offlinePages.sorted(), refetchAll: true)
    case .push: push()
    case .markSynced:
      record { try store.markSynced(nowMillis: WallClock.millis()) }
    case .purge(let pages):
      logger.info("pages gone from the broker's reach", metadata: ["pages": "\(pages.count)"])
      record { _ = try store.purge(pages) }
    }
  }

  // MARK: The stream

  private func openConnection() {
    counters.connectionAttempts += 1
    generation += 1
    let current = generation
    record { try store.recordSyncAttempt(nowMillis: WallClock.millis()) }
    link.openStream(
      pingInterval: UInt64(configuration.heartbeatSeconds) * 1000, maxMessageSize: 64 << 20
    ) { [weak self] result in
      guard let self else { return }
      guard current == generation else {
        if case .success(let socket) = result { socket.close() }
        return
      }
      switch result {
      case .failure(let error):
        lastError = error.description
        logger.notice("cannot connect to the broker", metadata: ["error": "\(error)"])
        handle(.connectionFailed(now: loop.now, reason: error.description))
      case .success(let socket):
        stream = socket
        subscribeAnswersAwaited = []
        lastError = nil
        socket.onText = { [weak self] text in self?.received(text, generation: current) }
        counters.streamsOpened += 1
        socket.onClose = { [weak self, unowned socket] info in
          guard let self else { return }
          closedStreamBytes.received += socket.bytesReceived
          closedStreamBytes.sent += socket.bytesSent
          guard current == generation else { return }
          generation += 1
          stream = nil
          lastError = "the stream closed: \(info)"
          logger.notice("lost the broker stream", metadata: ["reason": "\(info)"])
          handle(.connectionClosed(now: loop.now, reason: info.description))
        }
        logger.info("connected to the broker", metadata: ["url": "\(configuration.brokerURL)"])
        handle(.connectionOpened(now: loop.now))
      }
    }
  }

  /// A connection's trouble that the machine must hear as a lost connection: close the stream and report it.
  private func dropConnection(_ reason: String, generation expected: Int) {
    guard expected == generation else { return }
    generation += 1
    lastError = reason
    logger.warning("dropping the broker connection", metadata: ["reason": "\(reason)"])
    stream?.close(code: .goingAway, reason: "")
    stream = nil
    handle(.connectionClosed(now: loop.now, reason: reason))
  }

  private func subscribe(_ pages: [EntityID]) {
    guard let stream else { return }
    let chunks = Self.chunks(pages)
    subscribeAnswersAwaited.append(chunks.count)
    for chunk in chunks {
      link.send(BrokerProtocol.ClientMessage(op: "subscribe", pages: chunk.map(\.rawValue)), on: stream)
    }
  }

  /// `pages` in frames of at most `idsPerFrame`; at least one frame, so an empty set is still answered.
  static func chunks(_ pages: [EntityID]) -> [ArraySlice<EntityID>] {
    guard !pages.isEmpty else { return [[]] }
    return stride(from: 0, to: pages.count, by: idsPerFrame).map {
      pages[$0..<min($0 + idsPerFrame, pages.count)]
    }
  }

  struct StreamMessage: Codable {
    var op: String
    var pages: [String: UInt64]?
    var denied: [String]?
    var revokedPages: [String]?
    var code: Int?
    var message: String?
  }

  private func received(_ text: String, generation expected: Int) {
    guard expected == generation else { return }
    // Strict: a frame from the broker (or anyone on the path) must not be able to make the daemon trap.
    guard let message = try? StrictJSONDecoder().decode(StreamMessage.self, from: text) else {
      logger.warning("an unreadable stream message", metadata: ["message": "\(text.prefix(200))"])
      return
    }
    switch message.op {
    case "changed":
      counters.notificationsReceived += message.pages?.count ?? 0
      for (name, time) in message.pages ?? [:] {
        guard let page = try? EntityID(validating: name) else { continue }
        handle(.poked(page: page, lastUpdatedTime: time))
      }
    case "subscribed":
      if let denied = message.denied, !denied.isEmpty {
        logger.warning(
          "the broker denied subscriptions", metadata: ["count": "\(denied.count)", "first": "\(denied[0])"])
      }
      guard !subscribeAnswersAwaited.isEmpty else { return }
      subscribeAnswersAwaited[0] -= 1
      if subscribeAnswersAwaited[0] == 0 {
        subscribeAnswersAwaited.removeFirst()
        handle(.subscribed)
      }
    case "unsubscribed": break
    case "revoked":
      // The token may no longer see these pages (a reload on the broker narrowed it): the broker stopped
      // notifying them. Their local copies go, as for pages gone at a catch-up; edits still queued for them are
      // kept (and will be refused, then kept as conflicts), and their reasons stay, so access given back brings
      // them again at the next connection.
      let pages = (message.revokedPages ?? []).compactMap { try? EntityID(validating: $0) }
      logger.warning(
        "the broker revoked subscriptions: the token may no longer see these pages",
        metadata: ["count": "\(pages.count)", "first": "\(pages.first?.rawValue ?? "")"])
      record { _ = try store.purge(pages) }
    case "error":
      logger.warning(
        "the broker reported a stream error",
        metadata: ["code": "\(message.code ?? 0)", "message": "\(message.message ?? "")"])
    default:
      logger.debug("an unknown stream message", metadata: ["op": "\(message.op)"])
    }
  }

  // MARK: Catch-up and fetch

  private func sendCatchUp() {
    let current = generation
    let request: BrokerProtocol.CatchUpRequest
    do {
      request = BrokerProtocol.CatchUpRequest(epoch: try store.epoch(), pages: try store.catchUpMap())
    } catch {
      logger.error("cannot read the catch-up map", metadata: ["error": "\(error)"])
      dropConnection("local store error: \(error)", generation: current)
      return
    }
    counters.catchUpRequests += 1
    link.request(.POST, "/v1/catchup", body: request, as: BrokerProtocol.CatchUpResponse.self) {
      [weak self] result in
      guard let self, current == generation else { return }
      switch result {
      case .failure(let error):
        dropConnection("catch-up failed: \(error)", generation: current)
      case .success(let answer):
        logger.info(
          "caught up",
          metadata: [
            "changed": "\(answer.changed.count)", "gone": "\(answer.gone.count)",
            "epochChanged": "\(answer.epochChanged)",
          ])
        var requeued = 0
        if answer.epochChanged {
          epochToAdopt = answer.epoch
          // A replaced (restored) broker store may lack what it acknowledged: queue it again before the pages
          // gone there are purged and the others refetched, so their copies keep showing those edits.
          record { requeued = try store.requeueForRestoredBroker() }
          logger.warning(
            "the broker's store was replaced (new epoch): refetching every page, pushing again what it may lack",
            metadata: ["epoch": "\(answer.epoch)", "requeued": "\(requeued)"])
        } else if request.epoch == nil {
          record { try store.setEpoch(answer.epoch) }
        }
        handle(
          .catchUpAnswered(changed: answer.changed, gone: answer.gone, epochChanged: answer.epochChanged))
        if requeued > 0 { handle(.mutationsQueued) }
      }
    }
  }

  /// Fetches `pages` (paginated), stores each answer's deltas as they come (one transaction per answer, a
  /// savepoint per delta), prunes the forest by
  /// what they say, and reports `fetched`. `refetchAll`: every page whole (the broker's epoch changed).
  private func fetch(_ pages: [EntityID], refetchAll: Bool) {
    let current = generation
    var since: [EntityID: UInt64] = [:]
    do {
      let downloaded = refetchAll ? [:] : try store.catchUpMap()
      for page in pages { since[page] = downloaded[page] ?? 0 }
    } catch {
      logger.error("cannot read download times", metadata: ["error": "\(error)"])
      handle(.fetched(pages: [], failed: pages))
      return
    }
    let epoch = refetchAll ? nil : (try? store.epoch()) ?? nil
    var stored: [EntityID] = []
    var storedSet: Set<EntityID> = []
    var gone: [EntityID] = []
    func page(cursor: EntityID?) {
      let request = BrokerProtocol.FetchRequest(
        epoch: epoch, pages: since, limit: configuration.fetchBatch, cursor: cursor)
      counters.fetchRequests += 1
      link.request(.POST, "/v1/fetch", body: request, as: BrokerProtocol.FetchResponse.self) {
        [weak self] result in
        guard let self else { return }
        switch result {
        case .failure(let error):
          lastError = "fetch failed: \(error)"
          logger.warning("fetch failed", metadata: ["error": "\(error)", "pages": "\(pages.count)"])
          finish(failed: pages.filter { !storedSet.contains($0) })
        case .success(let answer):
          // One transaction per answer (up to fetch_batch pages), a savepoint per delta.
          let outcomes: [(any Error)?]
          do {
            outcomes = try store.applyDeltas(answer.deltas)
          } catch {
            outcomes = Array(repeating: error, count: answer.deltas.count)
          }
          for (delta, error) in zip(answer.deltas, outcomes) {
            if let error {
              logger.error("cannot store a delta", metadata: ["page": "\(delta.id)", "error": "\(error)"])
            } else {
              fetchedPages += 1
              stored.append(delta.id)
              storedSet.insert(delta.id)
            }
          }
          gone += answer.gone
          if let next = answer.nextCursor {
            page(cursor: next)
          } else {
            let goneSet = Set(gone)
            finish(failed: pages.filter { !storedSet.contains($0) && !goneSet.contains($0) })
          }
        }
      }
    }
    func finish(failed: [EntityID]) {
      if !gone.isEmpty { record { _ = try store.purge(gone) } }
      if refetchAll, failed.isEmpty, let epoch = epochToAdopt {
        record { try store.setEpoch(epoch) }
        epochToAdopt = nil
      }
      pruneForest(after: stored)
      guard current == generation else { return }
      handle(.fetched(pages: stored, failed: failed))
    }
    page(cursor: nil)
  }

  /// Pruning: the refetched pages' trees are walked again against the stored data; the difference is written,
  /// the machine told, and local copies that no reason keeps are dropped.
  private func pruneForest(after pages: [EntityID]) {
    guard !pages.isEmpty else { return }
    var next = forest
    do {
      let change = try store.readingStructure { next.refresh(pages, structure: $0) }
      forest = next
      applyForestChange(change)
    } catch {
      logger.error(
        "cannot read the page structure; pruning waits for the next fetch", metadata: ["error": "\(error)"])
    }
    // Pages fetched for a read-through or that left the offline set while in flight keep no copy.
    record { _ = try store.dropLocalCopies(pages.filter { !forest.isOffline($0) }) }
  }

  // MARK: The offline set

  /// Writes a forest change, tells the machine, drops what no reason keeps any more.
  func applyForestChange(_ change: ForestChange) {
    guard !change.isEmpty else { return }
    record { try store.applyForestChange(change, recentOrder: forest.recentOrder) }
    if !change.removedPages.isEmpty { record { _ = try store.dropLocalCopies(change.removedPages) } }
    handle(.offlineSetChanged(added: change.addedPages, removed: change.removedPages))
  }

  /// Adds or removes a reason (the local API's `offline`, `favorite`, `visit`).
  func changeReason(_ reason: OfflineReason, origin: EntityID, add: Bool) throws {
    var next = forest
    let change = try store.readingStructure { structure in
      if !add { return next.remove(reason, origin: origin) }
      return reason == .recent
        ? next.visit(origin, structure: structure) : next.add(reason, origin: origin, structure: structure)
    }
    try store.applyForestChange(change, recentOrder: next.recentOrder)
    forest = next
    if !change.removedPages.isEmpty { record { _ = try store.dropLocalCopies(change.removedPages) } }
    handle(.offlineSetChanged(added: change.addedPages, removed: change.removedPages))
  }

  // MARK: Push

  private func push() {
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
    link.request(.POST, "/v1/batch", body: batch, as: BatchOutcome.self) { [weak self] result in
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
      case .success(let outcome):
        counters.batchesPushed += 1
        counters.mutationsPushed += outcome.results.count
        counters.mutationsRejected += outcome.results.count { $0.status == .rejected }
        var more = false
        var settled: [EntityID] = []
        do {
          settled = try store.acknowledge(outcome, nowMillis: WallClock.millis())
          more = try store.status().pendingMutations > 0
        } catch {
          logger.error("cannot record the broker's answer", metadata: ["error": "\(error)"])
        }
        // Edited pages with nothing left to push: their copy is ours, not the broker's. Download them whole
        // (an edit that lost or was rejected changed nothing there, so no notification would come); local
        // copies of pages not offline were kept only for their mutations.
        record { _ = try store.dropLocalCopies(settled.filter { !forest.isOffline($0) }) }
        let rejected = outcome.results.filter { $0.status == .rejected }
        if !rejected.isEmpty {
          logger.warning(
            "the broker rejected mutations; kept for recovery (pagesync conflicts)",
            metadata: ["count": "\(rejected.count)"])
        }
        guard current == generation else { return }
        for page in settled where forest.isOffline(page) {
          handle(.poked(page: page, lastUpdatedTime: max(outcome.pages[page] ?? 1, 1)))
        }
        handle(.pushAnswered(moreQueued: more))
      case .failure(let error):
        counters.pushFailures += 1
        lastError = "push failed: \(error)"
        logger.warning("push failed", metadata: ["error": "\(error)", "mutations": "\(mutations.count)"])
        record { try store.markPushFailed(ids: mutations.map(\.id), error: error.description) }
        guard current == generation else { return }
        handle(.pushFailed(retryable: error.isRetryable))
      }
    }
  }

  /// A local edit was committed: push it when the machine says.
  func mutationsQueued() { handle(.mutationsQueued) }

  /// Whether the device stream is open.
  var isConnected: Bool { machine.isConnected }

  /// Bytes read from and sent to the broker since the daemon started: the device streams and the HTTP
  /// connections (a stream being closed is counted once its close completes).
  var brokerBytes: (received: Int, sent: Int) {
    var total = link.httpBytes
    total.received += closedStreamBytes.received
    total.sent += closedStreamBytes.sent
    if let stream {
      total.received += stream.bytesReceived
      total.sent += stream.bytesSent
    }
    return total
  }

  // MARK: Helpers

  /// Runs a store write whose failure must not stop syncing: logs it.
  private func record(_ body: () throws -> Void) {
    do { try body() } catch { logger.error("local store error", metadata: ["error": "\(error)"]) }
  }
}

/// What the daemon did since it started (`GET /v1/status`, `pagesync status`; docs/operations.md, "Metrics").
struct SyncCounters: Sendable, Equatable {
  /// Device stream connections tried (the first, then one per reconnect).
  var connectionAttempts = 0
  /// Device streams that opened.
  var streamsOpened = 0
  /// Page notifications received on the stream (pages named in `changed` frames).
  var notificationsReceived = 0
  /// `POST /v1/catchup` requests sent.
  var catchUpRequests = 0
  /// `POST /v1/fetch` requests sent (each page of a paginated fetch is one).
  var fetchRequests = 0
  /// Batches the broker answered (`POST /v1/batch` with a 200).
  var batchesPushed = 0
  /// Mutations in those batches (applied, re-sent or rejected).
  var mutationsPushed = 0
  /// Mutations of those batches the broker rejected.
  var mutationsRejected = 0
  /// Pushes that failed (unreachable broker, an error status): their mutations stay queued.
  var pushFailures = 0

  /// Connection attempts after the first: each follows a lost stream or a failed attempt.
  var reconnects: Int { max(0, connectionAttempts - 1) }
}
