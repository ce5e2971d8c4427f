import BrokerCore
import BrokerStore
import ByteBuffers
import EventLoop
import FoundationEssentials
import Logging
import PostgresStore
import Prometheus
import SQLiteStore
import StrictJSON
import SyncModel
import SyncProtocol
import Web

/// The page store as the writer thread owns it. Jobs capture the box; only the writer thread touches the store.
final class StoreBox: @unchecked Sendable {
  // @unchecked: used only inside SQLiteWriter jobs, which all run on the writer's one thread.
  let store: PageStore
  /// The writer's store as a reader, for answers when there are no reader threads (`[store] readers = 0`).
  lazy var reader = PageReader(store: store)
  init(_ store: PageStore) { self.store = store }
}

/// The broker: HTTP and WebSocket on one loop, the page store on a writer thread with group commit, and the
/// channel index that turns each commit into notifications.
///
/// ```
///  POST /v1/batch ──▶ writer thread: apply in the group's transaction ──COMMIT──▶ loop: answer, then publish
///                                                                                    │
///  /v1/stream sockets ◀── "changed" frames ◀── per-device coalescing queues ◀───────┘ (flushed once per turn)
/// ```
///
/// Threading: everything here runs on `loop`'s thread except the store, which only the writer thread uses.
public final class BrokerServer {
  public let loop: Loop
  public internal(set) var configuration: BrokerConfiguration
  public var logger: Logger
  let writer: StoreWriter<any StoreConnection>
  /// Copies the SQLite store's write-ahead log into its file off the writer's commits (`[store] checkpointer`);
  /// nil on PostgreSQL, in memory, or when the writer checkpoints itself.
  private(set) var checkpointer: SQLiteCheckpointer?
  let storeBox: StoreBox
  /// The threads that read pages for answers (`[store] readers`), each with a read-only connection of its own;
  /// nil when reads run on the writer thread.
  let readers: SQLiteReaderPool<PageReader>?
  /// `GET /healthz`'s reader of the store, beside the writer (not in its queue).
  let healthCheck: StoreHealthCheck
  public let epoch: String
  let http: HTTPServer
  /// `[server.tls]`'s certificate and key as read at start (or at the last reload that could read them).
  var tls: TLSServerContext?
  var authenticator: Authenticator
  let json = JSONBodies()

  // Device streams (BrokerServer+Streams.swift).
  /// The notification fan-out: subscriptions, queues, workspaces and the dirty list, without I/O.
  var fanOut = FanOut()
  /// Subscriptions per user across their streams (`[limits] subscriptions_per_user`).
  var subscriptionQuota = SubscriptionQuota()
  /// Open device streams by subscriber id (dense: the fan-out reuses the ids of closed streams).
  var sessions: ContiguousArray<StreamSession?> = []
  /// Open device streams.
  public internal(set) var streamCount = 0
  /// The workspaces of the pages `subscribe` frames name (from the index, else the store).
  lazy var pageWorkspaces = PageWorkspaceLookup(loop: loop, writer: writer, storeBox: storeBox) {
    [unowned self] pages in self.withFanOut { $0.knownKeys(of: pages.lazy.map(\.rawValue)) }
  }
  var nextConnection: UInt64 = 1
  /// The dirty list taken by the last flush (kept to reuse its storage).
  var flushing = ContiguousArray<SubscriberID>()
  /// Where a flush drains a queue before writing it (kept to reuse its storage).
  var drainBuffer: [(page: PageKey, lastUpdatedTime: UInt64)] = []
  /// The last one-page `changed` frame, encoded (`changedFrame`).
  var lastChangedFrame: (page: PageKey, time: UInt64, frame: ByteBuffer)?
  var flushWakeup: Wakeup?
  /// How commits reach devices on other brokers: Redis with `[bus]`, else nothing beyond this fan-out.
  let bus: any BrokerBus
  /// The bus's catch-ups of every device (BrokerServer+Bus.swift): one at a time, a second apart; one asked for
  /// meanwhile is owed.
  var busCatchUps = (running: false, owed: false, startedAt: UInt64(0), later: LoopTimer?.none)
  private var pruneTimer: LoopTimer?
  private(set) var stopping = false
  /// Log lines of what any client can cause at will: one refusal, one bad request a `logThrottleInterval`.
  private var refusalLog = LogThrottle(interval: BrokerServer.logThrottleInterval)
  private var badRequestLog = LogThrottle(interval: BrokerServer.logThrottleInterval)
  static let logThrottleInterval: UInt64 = 10_000

  /// Counters for tests, logs and metrics (plain: the loop thread owns them; `/metrics` reads them).
  public internal(set) var batchesApplied = 0
  /// The broker's hybrid logical clock: its wall clock merged with every mutation time it applied. Sent on every
  /// JSON answer as `Pagesync-Clock`, so a device whose clock lags stamps its next edits after what the broker has
  /// seen (docs/protocol.md, "Conventions"). Not persisted: after a restart it starts from the wall clock.
  var clock = HybridLogicalClock()
  public internal(set) var notificationsSent = 0
  /// The sequence of the newest batch published to the channel index (a catch-up answered from the index
  /// reports it).
  var publishedSequence: UInt64
  /// Catch-ups answered from the channel index rather than the store.
  public internal(set) var catchUpsFromIndex = 0
  /// Notifications folded into one already pending for the same page and device.
  public var notificationsCoalesced: Int { fanOut.coalescedCount }
  /// `GET /metrics`.
  public let metrics: BrokerMetrics
  /// When the server was made: wall clock (seconds since 1970) for `/metrics` and the status page, the loop's
  /// monotonic clock (ms) for the uptime.
  let startTimeSeconds = Date().timeIntervalSince1970
  let startedAtLoopTime: UInt64
  /// Where `start` listens (the real port when 0 was asked for); nil until then.
  public private(set) var boundAddress: SocketAddress?
  /// `GET /status`'s rates: samples of the counters, one a second (BrokerServer+Status.swift).
  var statusWindow = CounterWindow(
    span: BrokerServer.statusWindowSpan, capacity: Int(BrokerServer.statusWindowSpan / 1000) + 2)
  var statusTimer: LoopTimer?
  /// When the idle broker gives memory back (BrokerServer+Memory.swift); looked at on each status sample.
  var idleMemory = IdleMemoryStateMachine(quietMillis: BrokerServer.idleMemoryQuietMillis, work: 0)
  /// Whether a `returnMemory` is under way (its SQLite parts run on the store's threads).
  var returningMemory = false
  /// Times memory was given back (start-up included), and the mappings the last one paged out: for tests.
  var memoryReturns = 0
  var pagedOutMappings = 0

  /// Opens (and migrates) the store and prepares the server; nothing listens until `start`.
  /// `metricsRegistry`: where the broker's metrics go (a registry of its own unless given one).
  public init(
    loop: Loop, configuration: BrokerConfiguration, logger: Logger,
    metricsRegistry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()
  ) throws {
    self.loop = loop
    startedAtLoopTime = loop.now
    metrics = BrokerMetrics(registry: metricsRegistry)
    self.configuration = configuration
    self.logger = logger
    let connection = try Self.openStore(configuration)
    var limits = MutationLimits()
    limits.maxTextBytes = min(limits.maxTextBytes, configuration.limits.bodyBytes)
    limits.maxTextOps = configuration.limits.textOpsPerMutation
    limits.maxTextCharacters = configuration.limits.textCharactersPerBlock
    limits.maxPageBytes = configuration.limits.pageBytes
    let store = try PageStore(connection: connection, limits: limits)
    store.maxMutationsPerBatch = configuration.limits.batchMutations
    store.maxClockAheadMillis = UInt64(configuration.limits.clockAheadSeconds) * 1000
    store.maxTreeDepth = configuration.limits.treeDepth
    store.maxBatchWork = configuration.limits.batchWork
    store.digestsPerClient = UInt64(configuration.limits.mutationDigestsPerClient)
    store.writerCacheRows = configuration.writerCacheRows
    epoch = store.epoch
    publishedSequence = store.sequence
    storeBox = StoreBox(store)
    // The writer tells the store where its groups end, so that a group's batches write the sequence and each
    // client's row once (SQLite).
    store.defersWritesToGroupEnd()
    // Its jobs are functions of the store (what they change elsewhere, their completions change): a group may run
    // them without a savepoint each, and again with one if a job fails after writing (SQLite).
    // An in-memory store cannot be shared by connections: its reads and checkpoints stay on the writer.
    let path = configuration.storePath
    let shareable = !(path.isEmpty || path == ":memory:" || path.hasPrefix("file::memory:"))
    // Checkpoints off the writer's commits (SQLiteCheckpointer), once the file is migrated and in WAL mode.
    if configuration.checkpointer, shareable, let sqlite = connection as? SQLiteConnection {
      let checkpointer = try SQLiteCheckpointer(
        path: path, synchronous: configuration.synchronous == "full" ? .full : .normal,
        pages: configuration.checkpointPages, name: "broker-checkpointer")
      checkpointer.attach(to: sqlite)
      self.checkpointer = checkpointer
    } else if let sqlite = connection as? SQLiteConnection {
      try sqlite.execute("PRAGMA wal_autocheckpoint = \(configuration.checkpointPages)")
    }
    writer = StoreWriter(store: connection, name: "broker-writer", observer: store, jobsMayRunTwice: true)
    // After the writer's store migrated the file and gave it an epoch: readers only read.
    if let url = configuration.storeURL {
      // PostgreSQL: each reader thread opens a connection of its own on its first read.
      readers =
        configuration.readers > 0
        ? SQLiteReaderPool(
          path: BrokerConfiguration.withoutPassword(url), threads: configuration.readers,
          name: "broker-reader",
          open: {
            let connection = try PostgresConnection(url: url)
            return (connection, PageReader(store: try PageStore(reading: connection)))
          }) : nil
      healthCheck = StoreHealthCheck(loop: loop, connection: try PostgresConnection(url: url))
    } else {
      readers =
        configuration.readers > 0 && shareable
        ? SQLiteReaderPool(path: path, threads: configuration.readers, name: "broker-reader") { connection in
          PageReader(store: try PageStore(reading: connection))
        } : nil
      healthCheck = try StoreHealthCheck(loop: loop, path: configuration.storePath)
    }
    authenticator = Authenticator(
      tokens: configuration.tokens, jwt: configuration.jwt, limits: configuration.limits)
    var http = HTTPServerConfiguration()
    http.limits = HTTPParserLimits(maxHeaderBytes: 32 * 1024, maxBodyBytes: configuration.limits.bodyBytes)
    http.maxConnections = configuration.limits.connections
    http.maxConnectionsPerPeer = configuration.limits.connectionsPerPeer
    Self.applyConnectionLimits(configuration.limits, to: &http)
    http.serverName = "pagesync-broker"
    self.http = HTTPServer(loop: loop, configuration: http, router: HTTPRouter())
    tls = try configuration.makeTLSContext(reusingTicketKeysOf: nil)
    bus =
      configuration.bus.map {
        RedisBus(
          loop: loop, configuration: $0, origin: EntityID.random().rawValue, epoch: store.epoch,
          logger: logger)
      } ?? InProcessBus()
    addRoutes(self.http.router)
  }

  /// Starts listening; returns the bound address (with the real port when 0 was asked for).
  @discardableResult
  public func start() throws -> SocketAddress {
    let address = try http.listen(on: configuration.listen, tls: tls)
    boundAddress = address
    startServices()
    logger.info(
      "listening",
      metadata: [
        "broker.address": "\(address)", "broker.epoch": "\(epoch)",
        "broker.auth":
          "\(authenticator.isOpen ? "off (loopback)" : configuration.jwt.isEmpty ? "tokens" : "tokens, jwt")",
        "broker.tls": "\(tls.map { "on (\($0.certificateFile))" } ?? "off")",
      ])
    return address
  }

  /// Starts what runs besides the listener: the flush of notifications at the end of each loop turn that
  /// queued some, the change log's pruning. `start` calls it; tests that drive the router in-process, with
  /// nothing listening, call it alone.
  func startServices() {
    flushWakeup = Wakeup(loop: loop) { [unowned self] in self.flushDirtySessions() }
    let timer = LoopTimer(loop: loop)
    timer.keepsLoopAlive = false
    timer.start(after: 60_000, repeatEvery: 60_000) { [unowned self] in self.pruneLog() }
    pruneTimer = timer
    startStatusSampling()
    startBus()
    http.onEvent = { [unowned self] event in self.log(event) }
    startIdleMemoryWatch()
  }

  /// Stops accepting, answers what is in flight, closes every device stream with 1001 (after sending what is
  /// pending), waits for the writer to finish its jobs, and calls `then`.
  public func shutdown(then: @escaping () -> Void) {
    guard !stopping else { return }
    stopping = true
    logger.info(
      "draining",
      metadata: ["broker.connections": "\(http.connectionCount)", "broker.streams": "\(streamCount)"])
    pruneTimer?.close()
    pruneTimer = nil
    statusTimer?.close()
    statusTimer = nil
    bus.close()
    busCatchUps.later?.close()
    busCatchUps.later = nil
    for case let session? in sessions {
      flush(session)
      session.close(.shuttingDown)
    }
    http.close { [unowned self] in
      // Every HTTP answer has been written; no job can arrive any more.
      self.readers?.shutdown()
      self.writer.shutdown()
      // After the writer: its last commits may still have woken it.
      self.checkpointer?.shutdown()
      self.healthCheck.close()
      self.flushWakeup?.close()
      self.flushWakeup = nil
      then()
    }
  }

  /// Subscriptions across every device stream.
  public var subscriptionCount: Int { fanOut.index.totalSubscriptions }
  /// Open connections, HTTP and WebSocket (what `[limits] connections` bounds).
  public var connectionCount: Int { http.openConnectionCount }

  /// What `/metrics` reads from the loop at scrape time.
  var metricsFigures: BrokerMetrics.Figures {
    var figures = BrokerMetrics.Figures()
    // An upgraded connection leaves the HTTP server's count and becomes a device stream.
    figures.connections = http.openConnectionCount
    figures.deviceStreams = streamCount
    figures.subscriptions = fanOut.index.totalSubscriptions
    figures.batchesApplied = batchesApplied
    figures.notificationsSent = notificationsSent
    figures.notificationsCoalesced = notificationsCoalesced
    figures.catchUpsFromIndex = catchUpsFromIndex
    figures.subscribeStoreReads = pageWorkspaces.pagesRead
    figures.bytesReceived = loop.streamBytesRead
    figures.bytesSent = loop.streamBytesWritten
    figures.responses = http.responseCounts
    figures.writerJobs = writer.pendingCompletions
    figures.checkpointsByCheckpointer = checkpointer?.checkpointsByCheckpointer ?? 0
    figures.checkpointsByWriter = checkpointer?.checkpointsByWriter ?? 0
    (figures.storeBytes, figures.storeWALBytes) = storeFileSizes()
    figures.startTimeSeconds = startTimeSeconds
    figures.bus = bus.figures
    return figures
  }

  // MARK: Maintenance

  private func pruneLog() {
    let keep = UInt64(configuration.logRetention)
    let box = storeBox
    writer.submit(
      on: loop, { _ in try box.store.pruneLog(keepingSequences: keep) },
      completion: { [logger] result in
        if case .failure(let error) = result {
          logger.error("change log pruning failed", metadata: ["error": "\(error)"])
        }
      })
  }

  /// The `[limits]` that bound one HTTP connection's time and queue (live: read at each use).
  static func applyConnectionLimits(_ limits: BrokerLimits, to http: inout HTTPServerConfiguration) {
    http.maxQueuedResponseBytes = limits.queuedBytesPerConnection
    http.requestReadTimeout = UInt64(limits.requestSeconds) * 1000
    http.writeStallTimeout = UInt64(limits.writeStallSeconds) * 1000
  }

  private func log(_ event: HTTPServerEvent) {
    switch event {
    case .acceptFailed(let error): logger.error("accept failed", metadata: ["error": "\(error)"])
    case .connectionRefused(let reason):
      guard let heldBack = refusalLog.admit(at: loop.now) else { return }
      logger.warning(
        "connection refused", metadata: ["reason": "\(reason)", "broker.not_logged": "\(heldBack)"])
    case .badRequest(let status, let message):
      guard let heldBack = badRequestLog.admit(at: loop.now) else { return }
      logger.info(
        "bad request",
        metadata: [
          "http.status": "\(status.code)", "reason": "\(message)", "broker.not_logged": "\(heldBack)",
        ])
    case .writeStalled(let queued):
      logger.info(
        "connection dropped: the peer read nothing for [limits] write_stall_seconds",
        metadata: ["http.queued_bytes": "\(queued)"])
    }
  }

  // MARK: Reads

  /// Runs `body` with a page reader off the loop thread: on a reader thread in a read transaction of its own
  /// (`readers`), else on the writer thread between its groups; then `completion` on the loop.
  func readPages<T: Sendable>(
    _ body: @escaping @Sendable (PageReader) throws -> T, completion: @escaping (Result<T, any Error>) -> Void
  ) {
    if let readers {
      readers.read(on: loop, body, completion: completion)
    } else {
      let box = storeBox
      writer.read(
        on: loop,
        { connection in
          // PostgreSQL: one snapshot for the whole read, as on a reader thread (the seed API's cursor is the
          // snapshot's, and must be that of the pages read). SQLite's reads between groups stay in autocommit.
          guard connection.engine == .postgres else { return try body(box.reader) }
          return try connection.transaction(writing: false) { try body(box.reader) }
        }, completion: completion)
    }
  }

  // MARK: JSON

  func encode<T: Encodable>(_ value: T) -> ByteBuffer { json.encode(value) }

  func jsonText<T: Encodable>(_ value: T) -> String { json.text(value) }

  func jsonResponse<T: Encodable>(_ value: T, status: HTTPStatus = .ok) -> HTTPResponse {
    clocked(json.response(value, status: status))
  }

  /// The answer to a batch, written by `BatchOutcome.jsonBytes` (the same bytes as the encoder, faster).
  func jsonResponse(_ outcome: BatchOutcome) -> HTTPResponse {
    clocked(HTTPResponse(status: .ok, headers: Self.jsonHeaders, body: ByteBuffer(bytes: outcome.jsonBytes)))
  }

  /// A JSON answer already encoded (off the loop thread), with the broker's clock.
  func jsonResponse(encoded body: ByteBuffer) -> HTTPResponse {
    clocked(HTTPResponse(status: .ok, headers: Self.jsonHeaders, body: body))
  }

  /// A JSON answer's headers, made (and checked for line breaks) once rather than per answer.
  private static let jsonHeaders: HTTPHeaders = ["Content-Type": "application/json"]

  /// `response` with the broker's clock (`Pagesync-Clock`).
  private func clocked(_ response: HTTPResponse) -> HTTPResponse {
    var response = response
    let now = UInt64(Date().timeIntervalSince1970 * 1000)
    response.head.headers.add(name: "Pagesync-Clock", value: clock.now(physicalMillis: now).description)
    return response
  }

  /// Decodes a request body with its strict reader (StrictJSON; the hot bodies); if it cannot, answers the 400
  /// naming what is wrong with it and returns nil.
  func decodeBody<T: JSONReadable>(_ type: T.Type, _ request: HTTPRequest, orAnswer responder: HTTPResponder)
    -> T?
  {
    switch json.read(type, request) {
    case .success(let value): return value
    case .failure(let error):
      responder.respond(error.response)
      return nil
    }
  }
}

extension BrokerServer {
  /// The writer's connection to the store `configuration` names: the SQLite file (`[store] path`), or PostgreSQL
  /// (`[store] url`). A PostgreSQL server that cannot be reached at start is an error (the store must be
  /// migrated and its epoch read before the broker answers); once started, a lost connection fails jobs with 503
  /// and is made again by the next one.
  static func openStore(_ configuration: BrokerConfiguration) throws -> any StoreConnection {
    if let url = configuration.storeURL { return try PostgresConnection(url: url) }
    let connection = try SQLiteConnection(path: configuration.storePath)
    try connection.configure(synchronous: configuration.synchronous == "full" ? .full : .normal)
    return connection
  }
}
