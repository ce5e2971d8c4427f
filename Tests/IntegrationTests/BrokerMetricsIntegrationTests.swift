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
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    let broker = try BrokerProcess(loop: loop, directory: directory)
    var script: ProcessRun?
    var stopped: (Int64, Int32)?
    broker.whenListening { base in
      do {
        script = try ProcessRun(
          loop: loop, "python3", [integrationResource("Python/broker_metrics.py"), base, TestTokens.alice]
        ) { _ in broker.stop { stopped = ($0, $1) } }
      } catch {
        Issue.record("python3: \(error)")
        broker.stop { _, _ in }
      }
    }
    try loop.runUntilDone(timeout: 60_000)
    try loop.close()
    #expect(
      script?.status == 0, "\(script?.output.string ?? "")\(script?.errorOutput.string ?? "")\n\(broker.log)")
    #expect(script?.output.string.hasSuffix("ALL OK\n") == true)
    #expect(stopped?.0 == 0, "SIGTERM drains and exits 0: \(broker.log)")
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
    let loop = try Loop()
    let directory = ScratchDirectory()
    defer { directory.remove() }
    let perPeer = 20
    let broker = try BrokerProcess(
      loop: loop, directory: directory,
      extraConfig: "[limits]\nconnections = \(perPeer * 4)\nconnections_per_peer = \(perPeer)\n")
    var script: ProcessRun?
    var stopped: (Int64, Int32)?
    broker.whenListening { base in
      do {
        script = try ProcessRun(
          loop: loop, "python3",
          [
            integrationResource("Python/broker_flood.py"), base, TestTokens.alice, TestTokens.bob,
            "\(perPeer)",
          ]
        ) { _ in broker.stop { stopped = ($0, $1) } }
      } catch {
        Issue.record("python3: \(error)")
        broker.stop { _, _ in }
      }
    }
    try loop.runUntilDone(timeout: 90_000)
    try loop.close()
    #expect(
      script?.status == 0, "\(script?.output.string ?? "")\(script?.errorOutput.string ?? "")\n\(broker.log)")
    #expect(script?.output.string.hasSuffix("ALL OK\n") == true)
    #expect(stopped?.0 == 0, "SIGTERM drains and exits 0: \(broker.log)")
  }
}
