import Prometheus
import SyncModel
import Web

/// The broker's Prometheus metrics (`GET /metrics`, docs/operations.md "Metrics").
///
/// Each `BrokerServer` has its own `PrometheusCollectorRegistry`: nothing is bootstrapped process-wide
/// (`MetricsSystem.bootstrap` may run once per process, and tests run several brokers in one).
///
/// Cost on the hot paths: figures the loop already keeps as plain `Int`s (batches, notifications sent and
/// coalesced, bytes on the wire, responses by status) and the gauges are read only when scraped, and the
/// counters are advanced by the difference since the last scrape. Per-request figures (catch-ups, fetches,
/// mutations of a batch) are one relaxed atomic add each; the commit histogram takes one uncontended lock per
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
    public var bytesReceived = 0
    public var bytesSent = 0
    public var responses = HTTPStatusCounts()

    public init() {}
  }

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
  private let catchUpRequests: Counter
  private let fetchRequests: Counter
  private var refused: [Int: Counter] = [:]
  private let bytesReceived: Counter
  private let bytesSent: Counter
  /// The figures as of the last scrape: counters advance by the difference.
  private var exported = Figures()

  static let rejectionsName = "pagesync_broker_mutations_rejected_total"
  static let rejectionsHelp = "Mutations the broker refused, by reason (docs/protocol.md, Rejection reasons)."
  static let refusedName = "pagesync_broker_http_refused_total"
  static let refusedHelp =
    "HTTP requests answered with a 4xx or 5xx status, by status (includes refused WebSocket upgrades, "
    + "unparsable requests and connections over the limit)."

  public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
    self.registry = registry
    connections = registry.makeGauge(
      name: "pagesync_broker_connections", help: "Open client connections: HTTP and device streams.")
    deviceStreams = registry.makeGauge(
      name: "pagesync_broker_device_streams", help: "Open device streams (/v1/stream WebSockets).")
    subscriptions = registry.makeGauge(
      name: "pagesync_broker_subscriptions", help: "Page subscriptions across every device stream.")
    batchesApplied = registry.makeCounter(
      name: "pagesync_broker_batches_applied_total",
      help: "Batches committed and answered 200 (a re-sent batch answered from the record included).")
    mutationsApplied = registry.makeCounter(
      name: "pagesync_broker_mutations_applied_total", help: "Mutations applied (first time they were seen).")
    mutationsDuplicate = registry.makeCounter(
      name: "pagesync_broker_mutations_duplicate_total",
      help: "Mutations re-sent after they were applied, answered without applying them again.")
    notificationsSent = registry.makeCounter(
      name: "pagesync_broker_notifications_sent_total",
      help: "Page notifications written to device streams (one per page of a changed frame).")
    notificationsCoalesced = registry.makeCounter(
      name: "pagesync_broker_notifications_coalesced_total",
      help: "Notifications folded into one already pending for the same page and device.")
    commitDuration = registry.makeDurationHistogram(
      name: "pagesync_broker_batch_commit_seconds", buckets: Self.commitBuckets,
      help: "Time from a batch's submission to the SQLite writer until its group commit completed.")
    catchUpRequests = registry.makeCounter(
      name: "pagesync_broker_catchup_requests_total", help: "Authorized POST /v1/catchup requests.")
    fetchRequests = registry.makeCounter(
      name: "pagesync_broker_fetch_requests_total", help: "Authorized POST /v1/fetch requests.")
    bytesReceived = registry.makeCounter(
      name: "pagesync_broker_received_bytes_total", help: "Bytes read from client connections.")
    bytesSent = registry.makeCounter(
      name: "pagesync_broker_sent_bytes_total", help: "Bytes written to client connections.")
    // Every known reason from the start, so that rates work before the first rejection.
    for reason in RejectionReason.all { _ = rejectionCounter(reason.name) }
  }

  // MARK: Recording (loop thread)

  /// A batch's mutations, after its commit.
  public func mutations(applied: Int, duplicates: Int, rejected: some Sequence<RejectionReason>) {
    if applied > 0 { mutationsApplied.increment(by: Int64(applied)) }
    if duplicates > 0 { mutationsDuplicate.increment(by: Int64(duplicates)) }
    for reason in rejected { rejectionCounter(reason.name).increment() }
  }

  /// A batch's group commit completed, `duration` after its submission.
  public func batchCommitted(after duration: Duration) { commitDuration.record(duration) }

  public func catchUpRequested() { catchUpRequests.increment() }

  public func fetchRequested() { fetchRequests.increment() }

  // MARK: Scraping

  /// Brings the metrics up to `figures` and renders the Prometheus text exposition (format 0.0.4).
  public func exposition(_ figures: Figures) -> [UInt8] {
    update(figures)
    return registry.emitToBuffer()
  }

  /// Sets the gauges and advances the counters kept elsewhere to `figures` (totals since start; a total that
  /// went down, which would be a bug, advances nothing).
  func update(_ figures: Figures) {
    connections.set(Int64(figures.connections))
    deviceStreams.set(Int64(figures.deviceStreams))
    subscriptions.set(Int64(figures.subscriptions))
    advance(batchesApplied, exported.batchesApplied, figures.batchesApplied)
    advance(notificationsSent, exported.notificationsSent, figures.notificationsSent)
    advance(notificationsCoalesced, exported.notificationsCoalesced, figures.notificationsCoalesced)
    advance(bytesReceived, exported.bytesReceived, figures.bytesReceived)
    advance(bytesSent, exported.bytesSent, figures.bytesSent)
    for (code, count) in figures.responses.seen(in: 400...599) {
      let counter =
        refused[code]
        ?? {
          let made = registry.makeCounter(
            name: Self.refusedName, labels: [("status", String(code))], help: Self.refusedHelp)
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

  private func rejectionCounter(_ reason: String) -> Counter {
    if let counter = rejections[reason] { return counter }
    let counter = registry.makeCounter(
      name: Self.rejectionsName, labels: [("reason", reason)], help: Self.rejectionsHelp)
    rejections[reason] = counter
    return counter
  }

  /// The `Content-Type` of the exposition.
  public static let contentType = "text/plain; version=0.0.4; charset=utf-8"
}
