import DaemonCore
import DaemonStore
import EventLoop
import Logging
import SyncModel
import TOMLConfig
import Web

/// Runs the `SyncStateMachine` against the real world: performs its actions on the broker link, the local store,
/// the offline set and the loop's timer, and feeds their results back as events. Owns the store, the offline set
/// and the machine; the local API (`LocalAPI`) edits through the store and asks for syncs with events. Loop thread
/// only.
///
/// - **Generations.** Every connection gets a number; answers (stream frames, HTTP answers) of an older one are
///   not fed to the machine (it has moved on), though their data is still stored: a delta or a batch
///   acknowledgement is true whenever it arrives.
/// - **Re-entrancy.** Events raised while actions are being performed are queued and handled after, in order, so
///   the machine always sees one event at a time.
///
/// The aspects: the device stream (SyncDriver+Stream.swift), catch-up and fetches (SyncDriver+Fetch.swift), pushes
/// (SyncDriver+Push.swift), reloading (SyncDriver+Reload.swift), pages the broker says are missing
/// (SyncDriver+Missing.swift).
final class SyncDriver {
  let loop: Loop
  var configuration: DaemonConfiguration
  var logger: Logger {
    didSet { offlineSet.logger = logger }
  }
  let store: LocalStore
  let offlineSet: OfflineSet
  private(set) var machine: SyncStateMachine<SystemRandomNumberGenerator>
  let link: any BrokerLink
  private let timer: LoopTimer
  /// Which token connections present, and when to read the source again (SyncDriver+Token.swift).
  var tokens: TokenStateMachine
  /// Reads `token_file`, runs `token_command`.
  let tokenReader: TokenSourceReader
  /// The token the link presents now (empty: none).
  var linkToken: String

  /// The open device stream of the current connection.
  var stream: (any BrokerStream)?
  /// The current connection's number (see the type's documentation).
  var generation = 0
  /// For each `subscribe` action on this connection, oldest first: `subscribed` answers still expected (a large
  /// set goes in several frames).
  var subscribeAnswersAwaited: [Int] = []
  /// The epoch the broker gave in a catch-up whose `refetchAll` is not finished: stored once every page is.
  var epochToAdopt: String?
  private var eventQueue: [SyncEvent] = []
  private var handlingEvent = false
  /// Page downloads (a delta or a snapshot each) since the daemon started (`fetchedPages`).
  var fetchedPages = 0
  /// What the daemon did since it started, for `status` (plain counters: loop thread).
  var counters = SyncCounters()
  /// Bytes of device streams already closed.
  var closedStreamBytes = (received: 0, sent: 0)
  /// Why the last connection attempt or request failed, for `status` and `sync` errors.
  var lastError: String?
  /// The newest broker clock seen (`Pagesync-Clock`) within `[sync] clock_ahead_seconds` of the wall clock:
  /// local edits are stamped after it.
  private(set) var observedClock = HLCTimestamp.zero
  /// The last broker clock refused for being too far ahead (logged once, not at every answer).
  private var refusedClock: HLCTimestamp?
  /// Called with each sync request's outcome (`answerSync`): the local API answers its `POST /v1/sync`.
  var onSyncAnswer: ((SyncRequestID, SyncOutcome) -> Void)?
  /// Whether a batch was sent and its answer not yet handled.
  var pushInFlight = false
  /// Set by `stop` while it waits for the push in flight.
  var onPushSettled: (() -> Void)?
  /// The change stream (`GET /v1/events`): what changed, published after each commit (SyncDriver+Changes.swift).
  let changes: ChangeStream
  /// The queue's length as last published, nil when an edit or an answer may have changed it.
  var publishedPending: Int?
  /// The fetch under way, while its answers come (SyncDriver+Fetch.swift); weak: the link's completion owns it.
  weak var fetchRound: FetchRound?
  /// Fires once a burst of work is over, to give the memory it freed back to the system (SyncDriver+Memory.swift).
  let memoryTimer: LoopTimer
  /// How many times memory was given back (tests).
  var memoryReturns = 0
  /// How many file mappings the last return of memory asked the kernel to page out (-1: /proc/self/maps could
  /// not be read) (tests).
  var pagedOutMappings = 0
  /// How long after the last burst of work the memory is given back: long enough that a sync's fetch rounds are
  /// over, short enough that an idle daemon is small a second after going idle. Tests shorten it.
  var memoryReturnDelayMillis: UInt64 = 1_000
  /// How often, at most, a burst of work that goes on pages its code out before it is over (SyncDriver+Memory.swift):
  /// long enough that a page-out (a few milliseconds, and the minor faults that bring back what still runs) costs
  /// nothing measurable, short enough that a first sync's peak holds only the code of its last half second. Tests change it.
  var burstPageOutIntervalMillis: UInt64 = 500
  /// When the code was last paged out (the loop's clock): at the start (`start()`), then during and after bursts.
  var lastCodePageOutMillis: UInt64 = 0
  /// How many times the code was paged out, at the end of a burst or during one (tests).
  var codePageOuts = 0

  /// Opens the store at `configuration.storePath` and restores the offline set. `link` defaults to the brokers
  /// at `configuration.brokerURLs` (failing over between them); tests pass a scripted one.
  init(
    loop: Loop, configuration: DaemonConfiguration, logger: Logger, link: (any BrokerLink)? = nil
  ) throws {
    self.loop = loop
    self.configuration = configuration
    self.logger = logger
    try FileSystem.makeParentDirectories(of: configuration.storePath)
    store = try LocalStore(path: configuration.storePath, cacheKiB: configuration.storeCacheKiB)
    offlineSet = try OfflineSet(
      store: store, databaseRowLimit: configuration.databaseRowLimit, recentLimit: configuration.recentLimit,
      logger: logger)
    tokens = TokenStateMachine(source: configuration.tokenSource)
    tokenReader = TokenSourceReader(loop: loop)
    // The configured `token` until the machine says otherwise (a file or command is read at the first attempt).
    linkToken = configuration.tokenFile == nil && configuration.tokenCommand == nil ? configuration.token : ""
    self.link =
      try link
      ?? FailoverBrokerLink(
        loop: loop, urls: configuration.brokerURLs, token: linkToken,
        timeoutMillis: UInt64(configuration.requestTimeoutSeconds) * 1000, caFile: configuration.caFile)
    timer = LoopTimer(loop: loop)
    memoryTimer = LoopTimer(loop: loop)
    lastCodePageOutMillis = loop.now
    changes = ChangeStream(
      loop: loop, eventsKept: configuration.eventsKept, maxStreams: configuration.eventStreams,
      firstID: WallClock.millis() * 1000)
    machine = SyncStateMachine(
      offlinePages: offlineSet.offlinePages, backoff: configuration.backoff,
      heartbeatInterval: UInt64(configuration.heartbeatSeconds) * 1000,
      maxPagesPerFetch: configuration.fetchBatch, random: SystemRandomNumberGenerator(),
      clock: { [loop] in loop.now }, brokerCount: self.link.brokerCount)
    store.clockBound = configuration.clockBound
    self.link.onClock = { [unowned self] time in observe(brokerClock: time, nowMillis: WallClock.millis()) }
  }

  /// Merges a broker's clock (`Pagesync-Clock`) into `observedClock` if it is within `[sync]
  /// clock_ahead_seconds` of the wall clock at `nowMillis`: one further ahead would stamp every later edit too
  /// far ahead for the broker (`clock_ahead`), so it is refused and logged.
  func observe(brokerClock time: HLCTimestamp, nowMillis: UInt64) {
    guard configuration.clockBound.admits(time, at: nowMillis) else {
      if refusedClock != time {
        refusedClock = time
        logger.warning(
          "the broker's clock is further ahead than [sync] clock_ahead_seconds allows: not merged",
          metadata: ["clock": "\(time)", "now": "\(nowMillis)"])
      }
      return
    }
    observedClock = max(observedClock, time)
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
    // Startup ran code once and for all (the command line's and the configuration's parsers, the store's
    // migrations): 11 MB of the program's text was resident a second after the start, the peak of a first sync.
    pageOutCode()
  }

  /// Stops syncing: closes the stream and the timer, then the store. Sync requests still waiting are answered
  /// `stopped`.
  ///
  /// A push in flight is waited for, at most `drainMillis`, so that its answer is recorded and the store closes
  /// with nothing unsettled; one not answered by then is sent again at the next start (the broker applies each
  /// mutation once). `then` runs once the store is closed.
  func stop(drainMillis: UInt64 = 5_000, then: @escaping () -> Void = {}) {
    handle(.stop)
    tokenReader.cancel()
    timer.close()
    memoryTimer.close()
    changes.close()
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
    publishSyncState()
  }

  private func perform(_ action: SyncAction) {
    switch action {
    case .openConnection: openConnectionWithToken()
    case .closeConnection: closeConnection(reason: "the daemon is stopping")
    case .scheduleTimer(let at):
      let now = loop.now
      timer.start(after: at > now ? at - now : 0) { [unowned self] in
        handle(.timerFired(now: loop.now))
        // A heartbeat (or a reconnect attempt) is work too: the code it and the WebSocket ping before it ran goes
        // back at once (no timer of its own: an idle daemon wakes for its heartbeat and nothing else). Without it
        // an idle daemon kept 2.5 MB more (37 minor faults and their fault-around). At most every
        // `burstPageOutIntervalMillis`, as during a burst: reconnect attempts to a broker that is away can come
        // much faster than heartbeats, and each page-out costs the faults that bring the code back.
        if loop.now &- lastCodePageOutMillis >= burstPageOutIntervalMillis { returnMemory() }
      }
    case .cancelTimer: timer.stop()
    case .subscribe(let pages): subscribe(pages)
    case .unsubscribe(let pages): unsubscribe(pages)
    case .sendCatchUp: sendCatchUp()
    case .fetch(let pages): fetch(Array(pages.keys), refetchAll: false)
    case .refetchAll: fetch(offlineSet.offlinePages.sorted(), refetchAll: true)
    case .push: push()
    case .markSynced:
      record { try store.markSynced(nowMillis: WallClock.millis()) }
    case .purge(let pages):
      logger.info("pages gone from the broker's reach", metadata: ["pages": "\(pages.count)"])
      pagesGone(pages)
    case .checkForChanges(let request): checkForChanges(request)
    case .answerSync(let request, let outcome): onSyncAnswer?(request, outcome)
    }
  }

  /// The machine's settings from `configuration` (a reload): backoff, heartbeat, fetch size.
  func reconfigureMachine(_ configuration: DaemonConfiguration) {
    machine.reconfigure(
      backoff: configuration.backoff, heartbeatInterval: UInt64(configuration.heartbeatSeconds) * 1000,
      maxPagesPerFetch: configuration.fetchBatch)
  }

  // MARK: The offline set

  /// Adds or removes a reason (the local API's `offline`, `favorite`, `visit`); throws, changing nothing, if the
  /// store fails.
  func changeReason(_ reason: OfflineReason, origin: EntityID, add: Bool) throws {
    offlineSetChanged(try offlineSet.changeReason(reason, origin: origin, add: add))
  }

  /// Tells the machine which pages entered and left the offline set.
  func offlineSetChanged(_ change: ForestChange) {
    guard !change.addedPages.isEmpty || !change.removedPages.isEmpty else { return }
    publishOfflineChange(change)
    handle(.offlineSetChanged(added: change.addedPages, removed: change.removedPages))
  }

  // MARK: For the local API

  /// A local edit was committed: push it when the machine says.
  func mutationsQueued() {
    publishedPending = nil
    handle(.mutationsQueued)
  }

  /// Whether the device stream is open.
  var isConnected: Bool { machine.isConnected }

  /// The broker the daemon is on, or, while it is not connected, the one it tries next (`[broker] url`).
  var brokerURL: HTTPURL {
    let urls = configuration.brokerURLs
    return urls[min(machine.broker, urls.count - 1)]
  }

  /// Bytes read from and sent to the broker since the daemon started: the device streams and the HTTP
  /// connections (a stream being closed is counted once its close completes).
  var brokerBytes: (received: Int, sent: Int) {
    var total = link.requestBytes
    total.received += closedStreamBytes.received
    total.sent += closedStreamBytes.sent
    if let stream {
      total.received += stream.bytes.received
      total.sent += stream.bytes.sent
    }
    return total
  }

  // MARK: Helpers

  /// Runs a store write whose failure must not stop syncing: logs it.
  func record(_ body: () throws -> Void) {
    do { try body() } catch { logger.error("local store error", metadata: ["error": "\(error)"]) }
  }
}
