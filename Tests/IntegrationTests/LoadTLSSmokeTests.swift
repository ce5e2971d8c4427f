import Foundation
import Testing

/// `--tls` (docs/benchmarks.md, "TLS"): both servers over TLS with a CA the run makes, the harness verifying
/// them; correctness and the handshakes counted, never a time.
extension LoadSmokeTests {
  /// `compare B1 --tls`: both sides deliver everything, and every connection of each was a TLS handshake (a side
  /// that ran in plain text, or a server that did not speak TLS, fails here).
  @Test(.enabled(if: LoadSmokeTests.hasRedis, "redis-server is not installed (.ci/run installs it)"))
  func compareOverTLSDeliversEverythingOnBothSides() throws {
    let run = try report(["compare", "B1", "--tls", "--subscribers", "20", "--rate", "50", "--seconds", "1"])
    let pagesync = try #require(run["pagesync"] as? [String: Any])
    let redis = try #require(run["redis"] as? [String: Any])
    checkFanOut(pagesync, subscribers: 20, batches: 50)
    checkFanOut(redis, subscribers: 20, batches: 50)
    for side in [pagesync, redis] {
      #expect(bool(side, "tls.enabled") == true)
      // 20 device streams (or SUBSCRIBE connections) and 4 writers (or publishers), each a handshake.
      #expect((int(side, "tls.handshakes") ?? 0) >= 24, "\(side)")
    }
  }

  /// `run B4 --tls`: the storm's catch-ups are exact, and every one of its 40 connections (a stream and a
  /// catch-up connection per device) resumed a session from before the drop instead of a full handshake.
  @Test func reconnectStormOverTLSResumesEveryHandshake() throws {
    let run = try report([
      "run", "B4", "--tls", "--devices", "20", "--pages-per-device", "50", "--pool", "200",
      "--changed-percent", "5", "--seed", "3",
    ])
    #expect(int(run, "catchup.exact_devices") == 20, "\(run)")
    #expect(int(run, "storm_tls.handshakes") == 40)
    #expect(int(run, "storm_tls.resumed") == 40, "\(run)")
    #expect(bool(run, "ok") == true)
  }

  /// Without `--tls` the report says so: no handshake counted.
  @Test func aPlainRunReportsNoTLS() throws {
    let run = try report(["run", "B6", "--connections", "20", "--settle-seconds", "0"])
    #expect(bool(run, "tls.enabled") == false)
    #expect(int(run, "tls.handshakes") == 0)
  }
}
