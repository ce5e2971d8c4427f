import EventLoop
import EventLoopTestKit
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `GET /metrics` of a real broker process: scraped around known traffic (batches with an applied, a re-sent and
/// a rejected mutation, a device stream that receives the notifications, refused requests, a catch-up and a
/// fetch) by Python/broker_metrics.py, which parses the exposition strictly and checks each figure moved by
/// exactly what was done.
@Suite(.serialized) struct BrokerMetricsIntegrationTests {
  @Test func metricsMoveByWhatTheBrokerDid() throws {
    try expectBrokerScriptPasses("broker_metrics.py", [TestTokens.alice])
  }

  /// curl, a client nobody here wrote, gets the exposition without a token from a broker that has tokens.
  @Test func curlScrapesWithoutAToken() throws {
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    let broker = try BrokerProcess(loop: loop, directory: directory)
    var answer: ProcessRun?
    broker.whenListening { base in
      answer = try? ProcessRun(
        loop: loop, "curl", ["-s", "-i", "--max-time", "10", "\(base)/metrics"]
      ) { _ in broker.stop { _, _ in } }
    }
    try loop.runUntilDone(timeout: 60_000)
    try loop.close()
    let text = answer?.output.string ?? ""
    #expect(text.hasPrefix("HTTP/1.1 200"), "\(text)\n\(broker.log)")
    #expect(text.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"))
    #expect(text.contains("# TYPE pagesync_broker_batches_applied_total counter\n"))
    #expect(text.contains("\npagesync_broker_batches_applied_total 0\n"))
    #expect(text.contains("# TYPE pagesync_broker_batch_commit_seconds histogram\n"))
    #expect(text.contains(#"pagesync_broker_mutations_rejected_total{reason="unknown_page"} 0"#))
  }
}

/// A client that floods the broker with connections and pipelined requests cannot starve another: the per-peer
/// limit (Python/broker_flood.py, the flooder on 127.0.0.1, the other client on 127.0.0.2).
@Suite(.serialized) struct BrokerFloodIntegrationTests {
  @Test func oneFloodingClientDoesNotStarveAnother() throws {
    let perPeer = 20
    try expectBrokerScriptPasses(
      "broker_flood.py", [TestTokens.alice, TestTokens.bob, "\(perPeer)"],
      extraConfig: "[limits]\nconnections = \(perPeer * 4)\nconnections_per_peer = \(perPeer)\n",
      timeout: 90_000)
  }
}
