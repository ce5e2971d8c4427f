import Broker
import SQLiteStore
import SyncModel
import SyncProtocol
import Testing
import Web

/// `BrokerMetrics` alone: what the exposition says after figures and events, without a server.
@Suite struct BrokerMetricsTests {
  /// The samples of an exposition, `name{labels}` → value, and its `# TYPE` lines.
  private func parse(_ bytes: [UInt8]) -> (samples: [String: Double], types: [String: String]) {
    var samples: [String: Double] = [:]
    var types: [String: String] = [:]
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
      if line.hasPrefix("# TYPE ") {
        let parts = line.split(separator: " ")
        types[String(parts[2])] = String(parts[3])
      } else if !line.hasPrefix("#") {
        let space = line.lastIndex(of: " ")!
        samples[String(line[..<space])] = Double(line[line.index(after: space)...])
      }
    }
    return (samples, types)
  }

  @Test func everyFamilyIsThereFromTheStartAtZero() {
    let metrics = BrokerMetrics()
    let (samples, types) = parse(metrics.exposition(BrokerMetrics.Figures()))
    #expect(types["pagesync_broker_connections"] == "gauge")
    #expect(types["pagesync_broker_batch_commit_seconds"] == "histogram")
    #expect(types["pagesync_broker_mutations_rejected_total"] == "counter")
    for (name, type) in types where type == "counter" {
      #expect(name.hasSuffix("_total"), "\(name)")
    }
    #expect(samples["pagesync_broker_batches_applied_total"] == 0)
    for reason in RejectionReason.all {
      #expect(samples["pagesync_broker_mutations_rejected_total{reason=\"\(reason.name)\"}"] == 0)
    }
    #expect(samples["pagesync_broker_batch_commit_seconds_count"] == 0)
    #expect(types["pagesync_broker_writer_phase_seconds"] == "histogram")
    for phase in WriterPhaseTally.phases {
      #expect(samples["pagesync_broker_writer_phase_seconds_count{phase=\"\(phase)\"}"] == 0, "\(phase)")
    }
    #expect(types["pagesync_broker_http_refused_total"] == nil, "a status appears once it was answered")
  }

  @Test func countersFollowTheLoopsTotalsAcrossScrapes() {
    let metrics = BrokerMetrics()
    var figures = BrokerMetrics.Figures()
    figures.connections = 3
    figures.deviceStreams = 2
    figures.subscriptions = 4031
    figures.batchesApplied = 5
    figures.notificationsSent = 7
    figures.notificationsCoalesced = 1
    figures.bytesReceived = 1000
    figures.bytesSent = 2000
    figures.responses.record(200)
    figures.responses.record(401)
    figures.responses.record(401)
    _ = metrics.exposition(figures)
    figures.connections = 1
    figures.batchesApplied = 8
    figures.bytesReceived = 1500
    figures.responses.record(401)
    figures.responses.record(503)
    let (samples, _) = parse(metrics.exposition(figures))
    // Totals, not the sum of what each scrape saw.
    #expect(samples["pagesync_broker_connections"] == 1)
    #expect(samples["pagesync_broker_device_streams"] == 2)
    #expect(samples["pagesync_broker_subscriptions"] == 4031)
    #expect(samples["pagesync_broker_batches_applied_total"] == 8)
    #expect(samples["pagesync_broker_notifications_sent_total"] == 7)
    #expect(samples["pagesync_broker_notifications_coalesced_total"] == 1)
    #expect(samples["pagesync_broker_received_bytes_total"] == 1500)
    #expect(samples["pagesync_broker_sent_bytes_total"] == 2000)
    #expect(samples["pagesync_broker_http_refused_total{status=\"401\"}"] == 3)
    #expect(samples["pagesync_broker_http_refused_total{status=\"503\"}"] == 1)
    #expect(samples["pagesync_broker_http_refused_total{status=\"200\"}"] == nil, "only 4xx and 5xx")
  }

  @Test func mutationsCommitsAndRequestsAreCounted() {
    let metrics = BrokerMetrics()
    metrics.mutations(applied: 3, duplicates: 1, rejected: [.unknownPage, .unknownPage, .tooLarge])
    metrics.mutations(
      applied: 0, duplicates: 0, rejected: [RejectionReason(code: 99, name: "from_the_future")])
    metrics.batchCommitted(after: .microseconds(700))
    metrics.batchCommitted(after: .milliseconds(30))
    metrics.catchUpRequested()
    metrics.fetchRequested()
    metrics.fetchRequested()
    let (samples, _) = parse(metrics.exposition(BrokerMetrics.Figures()))
    #expect(samples["pagesync_broker_mutations_applied_total"] == 3)
    #expect(samples["pagesync_broker_mutations_duplicate_total"] == 1)
    #expect(samples["pagesync_broker_mutations_rejected_total{reason=\"unknown_page\"}"] == 2)
    #expect(samples["pagesync_broker_mutations_rejected_total{reason=\"too_large\"}"] == 1)
    #expect(samples["pagesync_broker_mutations_rejected_total{reason=\"from_the_future\"}"] == 1)
    #expect(samples["pagesync_broker_batch_commit_seconds_count"] == 2)
    #expect(samples["pagesync_broker_batch_commit_seconds_bucket{le=\"0.0005\"}"] == 0)
    #expect(samples["pagesync_broker_batch_commit_seconds_bucket{le=\"0.001\"}"] == 1)
    #expect(samples["pagesync_broker_batch_commit_seconds_bucket{le=\"0.025\"}"] == 1)
    #expect(samples["pagesync_broker_batch_commit_seconds_bucket{le=\"0.05\"}"] == 2)
    #expect(samples["pagesync_broker_batch_commit_seconds_bucket{le=\"+Inf\"}"] == 2)
    #expect(abs((samples["pagesync_broker_batch_commit_seconds_sum"] ?? 0) - 0.0307) < 1e-9)
    #expect(samples["pagesync_broker_catchup_requests_total"] == 1)
    #expect(samples["pagesync_broker_fetch_requests_total"] == 2)
  }

  /// A committed batch's writer timings go to their phases' series, in buckets that tell tens of microseconds
  /// apart.
  @Test func writerPhasesAreRecordedEachInItsOwnSeries() {
    let metrics = BrokerMetrics()
    metrics.writerPhases(
      WriterTimings(
        queued: .microseconds(20), applied: .microseconds(80), committed: .milliseconds(2),
        handedBack: .microseconds(600)))
    metrics.writerPhases(
      WriterTimings(
        queued: .microseconds(40), applied: .microseconds(90), committed: .microseconds(300),
        handedBack: .microseconds(30)))
    let (samples, _) = parse(metrics.exposition(BrokerMetrics.Figures()))
    func bucket(_ phase: String, _ bound: String) -> Double? {
      samples["pagesync_broker_writer_phase_seconds_bucket{phase=\"\(phase)\",le=\"\(bound)\"}"]
    }
    for phase in WriterPhaseTally.phases {
      #expect(samples["pagesync_broker_writer_phase_seconds_count{phase=\"\(phase)\"}"] == 2, "\(phase)")
    }
    #expect(bucket("queued", "0.000025") == 1 && bucket("queued", "0.00005") == 2)
    #expect(bucket("applied", "0.00005") == 0 && bucket("applied", "0.0001") == 2)
    #expect(bucket("committed", "0.0005") == 1 && bucket("committed", "0.0025") == 2)
    #expect(bucket("handed_back", "0.00005") == 1 && bucket("handed_back", "0.001") == 2)
    let sum = samples["pagesync_broker_writer_phase_seconds_sum{phase=\"committed\"}"] ?? 0
    #expect(abs(sum - 0.0023) < 1e-9)
  }

  /// The `le` rule at the edges: a value equal to a bound counts in that bucket; one above every bound only in
  /// `+Inf`; a negative one (a clock that went back) as 0; an enormous one as a day, so that sums cannot overflow.
  @Test func aPhaseOnABoundCountsInItsBucketAndOneAboveEveryBoundOnlyInInf() {
    let metrics = BrokerMetrics()
    metrics.writerPhases(
      WriterTimings(
        queued: .microseconds(25), applied: .seconds(60), committed: .seconds(-1),
        handedBack: .seconds(Int64.max)))
    let (samples, _) = parse(metrics.exposition(BrokerMetrics.Figures()))
    func bucket(_ phase: String, _ bound: String) -> Double? {
      samples["pagesync_broker_writer_phase_seconds_bucket{phase=\"\(phase)\",le=\"\(bound)\"}"]
    }
    #expect(bucket("queued", "0.00001") == 0 && bucket("queued", "0.000025") == 1)
    #expect(bucket("applied", "5.0") == 0 && bucket("applied", "+Inf") == 1)
    #expect(bucket("committed", "0.00001") == 1)
    #expect(bucket("handed_back", "5.0") == 0 && bucket("handed_back", "+Inf") == 1)
    #expect(samples["pagesync_broker_writer_phase_seconds_sum{phase=\"applied\"}"] == 60)
    #expect(samples["pagesync_broker_writer_phase_seconds_sum{phase=\"handed_back\"}"] == 86_400)
    #expect(samples["pagesync_broker_writer_phase_seconds_sum{phase=\"committed\"}"] == 0)
  }

  @Test func streamErrorsAndClosesAreCountedByCode() {
    let metrics = BrokerMetrics()
    let (before, types) = parse(metrics.exposition(BrokerMetrics.Figures()))
    #expect(types["pagesync_broker_stream_errors_total"] == "counter")
    #expect(types["pagesync_broker_stream_closes_total"] == "counter")
    // Every catalogued error code, and every code the broker closes with, is there from the start.
    for code in BrokerProtocol.StreamErrorCode.allCases {
      #expect(before["pagesync_broker_stream_errors_total{code=\"\(code.rawValue)\"}"] == 0)
    }
    for reason in BrokerProtocol.StreamCloseReason.allCases {
      #expect(before["pagesync_broker_stream_closes_total{code=\"\(reason.code)\"}"] == 0)
    }
    metrics.streamErrorSent(.invalidMessage)
    metrics.streamErrorSent(.invalidMessage)
    metrics.streamErrorSent(.subscriptionNotChecked)
    metrics.streamClosed(code: 1001)
    metrics.streamClosed(code: 1006)
    metrics.streamClosed(code: 1006)
    let (samples, _) = parse(metrics.exposition(BrokerMetrics.Figures()))
    #expect(samples["pagesync_broker_stream_errors_total{code=\"4400\"}"] == 2)
    #expect(samples["pagesync_broker_stream_errors_total{code=\"4500\"}"] == 1)
    #expect(samples["pagesync_broker_stream_closes_total{code=\"1001\"}"] == 1)
    #expect(samples["pagesync_broker_stream_closes_total{code=\"1006\"}"] == 2, "a code appears once seen")
    #expect(samples["pagesync_broker_stream_closes_total{code=\"1008\"}"] == 0)
  }

  @Test func twoBrokersInOneProcessKeepTheirOwnFigures() {
    let first = BrokerMetrics()
    let second = BrokerMetrics()
    first.fetchRequested()
    #expect(parse(first.exposition(.init())).samples["pagesync_broker_fetch_requests_total"] == 1)
    #expect(parse(second.exposition(.init())).samples["pagesync_broker_fetch_requests_total"] == 0)
  }
}
