import Prometheus
import SQLiteStore
import SyncModel
import SyncProtocol
import Web

/// The broker's Prometheus metrics (`GET /metrics`, docs/operations.md "Metrics").
///
/// Each `BrokerServer` has its own `PrometheusCollectorRegistry`: nothing is bootstrapped process-wide
/// (`MetricsSystem.bootstrap` may run once per process, and tests run several brokers in one).
///
/// Cost on the hot paths: figures the loop already keeps as plain `Int`s (batches, notifications sent and
/// coalesced, bytes on the wire, responses by status) and the gauges are read only when scraped, and the
/// counters are advanced by the difference since the last scrape. Per-request figures (catch-ups, fetches,
/// mutations of a batch, stream errors and closes) are one relaxed atomic add each; the commit histogram takes one uncontended lock per
/// batch. Publishing to thousands of subscribers touches no metric at all.
///
/// Threading: the broker's loop thread.
public final class BrokerMetrics {
  public let registry: PrometheusCollectorRegistry

  /// What the loop counts itself, read at scrape time.
  public struct Figures: Sendable, Equatable {
    public var connections = 0
    public var deviceStreams = 0
    public var subscriptions = 0
    public var batchesApplied = 0
    public var notificationsSent = 0
    public var notificationsCoalesced = 0
    public var catchUpsFromIndex = 0
    public var subscribeStoreReads = 0
    public var bytesReceived = 0
    public var bytesSent = 0
    public var responses = HTTPStatusCounts()
    /// Jobs submitted to the SQLite writer whose answer has not reached the loop yet (`SQLiteWriter`
    /// `pendingCompletions`): waiting, in the group being committed, or committed and on their way back.
    public var writerJobs = 0
    /// The store's database file and its write-ahead log, in bytes (0 for an in-memory store).
    public var storeBytes = 0
    public var storeWALBytes = 0
    /// Checkpoints of the SQLite store: by the checkpointer's thread, and by the writer itself (the checkpointer
    /// behind, or `[store] checkpointer = false`: then the writer's are not counted, SQLite runs them unseen).
    public var checkpointsByCheckpointer = 0
    public var checkpointsByWriter = 0
    /// When the broker started, in seconds since 1970.
    public var startTimeSeconds = 0.0
    /// The bus between brokers (in-process: connected, all zero).
    var bus = BusFigures()

    public init() {}
  }

  /// Upper bounds of the writer-phase buckets: finer at the bottom than the commit's, as a hand-off between
  /// threads takes tens of microseconds when a core is free.
  public static let phaseBuckets: [Duration] =
    [.microseconds(10), .microseconds(25), .microseconds(50), .microseconds(100)] + commitBuckets

  /// Upper bounds of the commit-latency buckets: from a fast `synchronous = normal` commit to a stalled disk.
  public static let commitBuckets: [Duration] = [
    .microseconds(250), .microseconds(500), .milliseconds(1), .microseconds(2500), .milliseconds(5),
    .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
    .milliseconds(500), .seconds(1), .microseconds(2_500_000), .seconds(5),
  ]

  private let connections: Gauge
  private let deviceStreams: Gauge
  private let subscriptions: Gauge
  private let batchesApplied: Counter
  private let mutationsApplied: Counter
  private let mutationsDuplicate: Counter
  private var rejections: [String: Counter] = [:]
  private let notificationsSent: Counter
  private let notificationsCoalesced: Counter
  private let commitDuration: DurationHistogram
  /// `writer_phase_seconds`, by phase (`WriterTimings`), rendered after the registry's families.
  public private(set) var phases = WriterPhaseTally()
  private let catchUpRequests: Counter
  private let catchUpsFromIndex: Counter
  private let subscribeStoreReads: Counter
  private let fetchRequests: Counter
  private var refused: [Int: Counter] = [:]
  private var streamErrors: [BrokerProtocol.StreamErrorCode: Counter] = [:]
  private var streamCloses: [UInt16: Counter] = [:]
  private var authRefusals: [String: Counter] = [:]
  private let bytesReceived: Counter
  private let bytesSent: Counter
  private let writerJobs: Gauge
  private let storeBytes: Gauge
  private let storeWALBytes: Gauge
  private let checkpointsByCheckpointer: Counter
  private let checkpointsByWriter: Counter
  private let startTime: Gauge
  private let busConnected: Gauge
  private let busChannels: Gauge
  private let busPublished: Counter
  private let busReceived: Counter
  private let busRefused: Counter
  private let busDropped: Counter
  private let busReconnects: Counter
  private let busCatchUps: Counter
  /// Every commit `commitDuration` recorded, in numbers the loop can read (the status page's commit latency).
  public private(set) var commits = CommitTally()
  /// The figures as of the last scrape: counters advance by the difference.
  private var exported = Figures()

  static var rejections: MetricNameDescriptor {
    name(
      "mutations_rejected", "total",
      "Mutations the broker refused, by reason (docs/protocol.md, Rejection reasons).")
  }
  static var refused: MetricNameDescriptor {
    name(
      "http_refused", "total",
      "HTTP requests answered with a 4xx or 5xx status, by status (includes refused WebSocket upgrades, "
        + "unparsable requests and connections over the limit).")
  }

  static var streamErrors: MetricNameDescriptor {
    name(
      "stream_errors", "total",
      "Error messages sent on device streams, by code (docs/protocol.md, Stream error codes).")
  }
  static var authRefusals: MetricNameDescriptor {
    name(
      "auth_refusals", "total",
      "Requests and WebSocket upgrades refused with 401, by reason (docs/protocol.md, Authentication).")
  }
  static var streamCloses: MetricNameDescriptor {
    name(
      "stream_closes", "total",
      "Device streams closed, by WebSocket close code, whichever side closed (1006: the connection dropped).")
  }

  /// `pagesync_broker_METRIC_UNIT`.
  static func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
    MetricNameDescriptor(
      namespace: "pagesync", subsystem: "broker", metricName: metric, unitName: unit, helpText: help)
  }

  public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
    self.registry = registry
    connections = registry.makeGauge(
      descriptor: Self.name("connections", "", "Open client connections: HTTP and device streams."))
    deviceStreams = registry.makeGauge(
      descriptor: Self.name("device_streams", "", "Open device streams (/v1/stream WebSockets)."))
    subscriptions = registry.makeGauge(
      descriptor: Self.name("subscriptions", "", "Page subscriptions across every device stream."))
    batchesApplied = registry.makeCounter(
      descriptor: Self.name(
        "batches_applied", "total",
        "Batches committed and answered 200 (a re-sent batch answered from the record included)."))
    mutationsApplied = registry.makeCounter(
      descriptor: Self.name("mutations_applied", "total", "Mutations applied (first time they were seen)."))
    mutationsDuplicate = registry.makeCounter(
      descriptor: Self.name(
        "mutations_duplicate", "total",
        "Mutations re-sent after they were applied, answered without applying them again."))
    notificationsSent = registry.makeCounter(
      descriptor: Self.name(
        "notifications_sent", "total",
        "Page notifications written to device streams (one per page of a changed frame)."))
    notificationsCoalesced = registry.makeCounter(
      descriptor: Self.name(
        "notifications_coalesced", "total",
        "Notifications folded into one already pending for the same page and device."))
    commitDuration = registry.makeDurationHistogram(
      descriptor: Self.name(
        "batch_commit", "seconds",
        "Time from a batch's submission to the SQLite writer until its group commit completed."),
      buckets: Self.commitBuckets)
    catchUpRequests = registry.makeCounter(
      descriptor: Self.name("catchup_requests", "total", "Authorized POST /v1/catchup requests."))
    catchUpsFromIndex = registry.makeCounter(
      descriptor: Self.name(
        "catchups_from_index", "total",
        "Catch-ups answered from the pages the broker's channel index knows, without reading the store."))
    subscribeStoreReads = registry.makeCounter(
      descriptor: Self.name(
        "subscribe_store_reads", "pages_total",
        "Pages of subscribe frames whose workspace was read from the store (the index did not know it)."))
    fetchRequests = registry.makeCounter(
      descriptor: Self.name("fetch_requests", "total", "Authorized POST /v1/fetch requests."))
    bytesReceived = registry.makeCounter(
      descriptor: Self.name("received", "bytes_total", "Bytes read from client connections."))
    bytesSent = registry.makeCounter(
      descriptor: Self.name("sent", "bytes_total", "Bytes written to client connections."))
    writerJobs = registry.makeGauge(
      descriptor: Self.name(
        "writer_jobs", "",
        "Jobs submitted to the SQLite writer (batches, reads between groups) not answered yet."))
    storeBytes = registry.makeGauge(
      descriptor: Self.name("store", "bytes", "Size of the store's SQLite database file."))
    storeWALBytes = registry.makeGauge(
      descriptor: Self.name("store_wal", "bytes", "Size of the store's write-ahead log (the -wal file)."))
    let checkpoints = Self.name(
      "store_checkpoints", "total",
      "Checkpoints of the SQLite store's write-ahead log, by who ran them: the checkpointer's thread (the bulk), or "
        + "the writer (the last few pages, so that the log starts over; all of it past 4 x [store] checkpoint_pages)."
    )
    checkpointsByCheckpointer = registry.makeCounter(
      descriptor: checkpoints, labels: [("by", "checkpointer")])
    checkpointsByWriter = registry.makeCounter(descriptor: checkpoints, labels: [("by", "writer")])
    startTime = registry.makeGauge(
      descriptor: Self.name("start_time", "seconds", "When the broker started, in seconds since 1970 (UTC)."))
    busConnected = registry.makeGauge(
      descriptor: Self.name(
        "bus_connected", "",
        "1 while the bus is live ([bus]: subscribed to Redis; without [bus] always 1), else 0."))
    busChannels = registry.makeGauge(
      descriptor: Self.name(
        "bus_channels", "", "Bus channels this broker needs: its streams' workspaces and resync."))
    busPublished = registry.makeCounter(
      descriptor: Self.name("bus_published", "messages_total", "Messages this broker published to the bus."))
    busReceived = registry.makeCounter(
      descriptor: Self.name(
        "bus_received", "messages_total", "Messages received from the bus (this broker's own included)."))
    busRefused = registry.makeCounter(
      descriptor: Self.name(
        "bus_refused", "messages_total",
        "Messages from the bus that could not be read (another version, garbage, another store's epoch)."))
    busDropped = registry.makeCounter(
      descriptor: Self.name(
        "bus_dropped", "messages_total",
        "Messages of this broker not handed to the bus (not live, or over [bus] buffer_bytes): repaid by a resync."
      ))
    busReconnects = registry.makeCounter(
      descriptor: Self.name("bus_reconnects", "total", "Times the bus became live again after being lost."))
    busCatchUps = registry.makeCounter(
      descriptor: Self.name(
        "bus_catchups", "total",
        "Times this broker made all its devices catch up from the store (bus back, or another broker's resync)."
      ))
    // Every known reason and code from the start, so that rates work before the first of each.
    for reason in RejectionReason.all { _ = rejectionCounter(reason.name) }
    for code in BrokerProtocol.StreamErrorCode.allCases {
      streamErrors[code] = registry.makeCounter(
        descriptor: Self.streamErrors, labels: [("code", String(code.rawValue))])
    }
    for reason in BrokerProtocol.StreamCloseReason.allCases { _ = streamCloseCounter(reason.code) }
    for reason in AuthRefusal.reasons {
      authRefusals[reason] = registry.makeCounter(descriptor: Self.authRefusals, labels: [("reason", reason)])
    }
  }

  // MARK: Recording (loop thread)

  /// A batch's mutations, after its commit.
  public func mutations(applied: Int, duplicates: Int, rejected: some Sequence<RejectionReason>) {
    if applied > 0 { mutationsApplied.increment(by: Int64(applied)) }
    if duplicates > 0 { mutationsDuplicate.increment(by: Int64(duplicates)) }
    for reason in rejected { rejectionCounter(reason.name).increment() }
  }

  /// A batch's group commit completed, `duration` after its submission.
  public func batchCommitted(after duration: Duration) {
    commitDuration.record(duration)
    commits.record(duration)
  }

  /// One committed batch's time in the writer, by phase (`writer_phase_seconds`).
  public func writerPhases(_ timings: WriterTimings) { phases.record(timings) }

  public func catchUpRequested() { catchUpRequests.increment() }

  public func fetchRequested() { fetchRequests.increment() }

  /// An error message went out on a device stream.
  public func streamErrorSent(_ code: BrokerProtocol.StreamErrorCode) { streamErrors[code]?.increment() }

  /// A device stream closed with `code` (sent or received; 1006 when it dropped).
  public func streamClosed(code: UInt16) { streamCloseCounter(code).increment() }

  /// A request or upgrade was refused with 401 for `reason` (`AuthRefusal.reason`).
  public func authRefused(_ reason: String) { authRefusals[reason]?.increment() }

  // MARK: Scraping

  /// Brings the metrics up to `figures` and renders the Prometheus text exposition (format 0.0.4).
  public func exposition(_ figures: Figures) -> [UInt8] {
    update(figures)
    var buffer = registry.emitToBuffer()
    phases.render(into: &buffer, name: "pagesync_broker_writer_phase_seconds", help: Self.writerPhaseHelp)
    return buffer
  }

  static let writerPhaseHelp =
    "Where a committed batch's time went in the store writer: queued (submission to its group's BEGIN), "
    + "applied (BEGIN to COMMIT, its group's batches), committed (the COMMIT and its sync), handed_back "
    + "(COMMIT's return to the answer on the network thread)."

  /// Sets the gauges and advances the counters kept elsewhere to `figures` (totals since start; a total that
  /// went down, which would be a bug, advances nothing).
  func update(_ figures: Figures) {
    connections.set(Int64(figures.connections))
    deviceStreams.set(Int64(figures.deviceStreams))
    subscriptions.set(Int64(figures.subscriptions))
    writerJobs.set(Int64(figures.writerJobs))
    storeBytes.set(Int64(figures.storeBytes))
    storeWALBytes.set(Int64(figures.storeWALBytes))
    startTime.set(figures.startTimeSeconds)
    busConnected.set(Int64(figures.bus.connected ? 1 : 0))
    busChannels.set(Int64(figures.bus.channels))
    advance(busPublished, exported.bus.published, figures.bus.published)
    advance(busReceived, exported.bus.received, figures.bus.received)
    advance(busRefused, exported.bus.refused, figures.bus.refused)
    advance(busDropped, exported.bus.dropped, figures.bus.dropped)
    advance(busReconnects, exported.bus.reconnects, figures.bus.reconnects)
    advance(busCatchUps, exported.bus.catchUps, figures.bus.catchUps)
    advance(batchesApplied, exported.batchesApplied, figures.batchesApplied)
    advance(checkpointsByCheckpointer, exported.checkpointsByCheckpointer, figures.checkpointsByCheckpointer)
    advance(checkpointsByWriter, exported.checkpointsByWriter, figures.checkpointsByWriter)
    advance(notificationsSent, exported.notificationsSent, figures.notificationsSent)
    advance(notificationsCoalesced, exported.notificationsCoalesced, figures.notificationsCoalesced)
    advance(catchUpsFromIndex, exported.catchUpsFromIndex, figures.catchUpsFromIndex)
    advance(subscribeStoreReads, exported.subscribeStoreReads, figures.subscribeStoreReads)
    advance(bytesReceived, exported.bytesReceived, figures.bytesReceived)
    advance(bytesSent, exported.bytesSent, figures.bytesSent)
    for (code, count) in figures.responses.seen(in: 400...599) {
      let counter =
        refused[code]
        ?? {
          let made = registry.makeCounter(descriptor: Self.refused, labels: [("status", String(code))])
          refused[code] = made
          return made
        }()
      advance(counter, exported.responses[code], count)
    }
    exported = figures
  }

  private func advance(_ counter: Counter, _ before: Int, _ now: Int) {
    if now > before { counter.increment(by: Int64(now - before)) }
  }

  private func streamCloseCounter(_ code: UInt16) -> Counter {
    if let counter = streamCloses[code] { return counter }
    let counter = registry.makeCounter(descriptor: Self.streamCloses, labels: [("code", String(code))])
    streamCloses[code] = counter
    return counter
  }

  private func rejectionCounter(_ reason: String) -> Counter {
    if let counter = rejections[reason] { return counter }
    let counter = registry.makeCounter(descriptor: Self.rejections, labels: [("reason", reason)])
    rejections[reason] = counter
    return counter
  }

  /// The `Content-Type` of the exposition.
  public static let contentType = "text/plain; version=0.0.4; charset=utf-8"
}
