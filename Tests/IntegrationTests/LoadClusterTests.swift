import EventLoop
import EventLoopTestKit
import Foundation
import Testing

/// `pagesync-load` with the broker side as a cluster it starts itself: PostgreSQL (`--store postgres`), Redis
/// (`--bus redis`), two brokers (`--brokers 2`: writers on broker 1, device streams on broker 2). Never skipped: a
/// machine without PostgreSQL or redis-server fails them (`.ci/run` installs both). Correctness only.
extension LoadSmokeTests {
  func number(_ report: [String: Any], _ path: String) -> Double? {
    var current: Any? = report
    for key in path.split(separator: ".") { current = (current as? [String: Any])?[String(key)] }
    return (current as? NSNumber)?.doubleValue
  }

  @Test func durableWritesOnPostgreSQLAreEveryOneAnswered() throws {
    let run = try report([
      "run", "W1", "--store", "postgres", "--rate", "100", "--seconds", "2", "--batch-size", "5",
    ])
    #expect(int(run, "batches.sent") == 200)
    #expect(int(run, "batches.acked") == 200)
    #expect(int(run, "batches.failed") == 0)
    #expect(bool(run, "ok") == true)
    let cluster = try #require(run["cluster"] as? [String: Any], "\(run)")
    #expect(cluster["setup"] as? String == "postgres")
    // The writes went to the PostgreSQL the harness started: its processes did the work.
    #expect((number(run, "cluster.processes.postgres.cpu_seconds") ?? 0) > 0, "\(cluster)")
  }

  /// Every frame crosses the bus: the subscribers are on broker 2, the writers on broker 1.
  @Test func fanOutThroughTwoBrokersAndRedisDeliversEveryFrame() throws {
    let run = try report([
      "compare", "B1", "--store", "postgres", "--brokers", "2", "--bus", "redis", "--subscribers", "50",
      "--rate", "100", "--seconds", "2",
    ])
    let cluster = try #require(run["brokers_2"] as? [String: Any], "\(run)")
    let alone = try #require(run["broker_1"] as? [String: Any], "\(run)")
    checkFanOut(cluster, subscribers: 50, batches: 200)
    checkFanOut(alone, subscribers: 50, batches: 200)
    #expect((cluster["cluster"] as? [String: Any])?["setup"] as? String == "postgres+2 brokers+redis bus")
    #expect((alone["cluster"] as? [String: Any])?["setup"] as? String == "postgres")
    #expect(number(cluster, "cluster.processes.redis-server.cpu_seconds") != nil, "\(cluster)")
    #expect(number(alone, "cluster.processes.pagesync-broker 2.cpu_seconds") == nil, "\(alone)")
    #expect((number(cluster, "cluster.cpu_us_per_delivery.pagesync-broker 2") ?? 0) > 0, "\(cluster)")
    #expect(run["ratios"] is [String: Any])
  }

  /// SIGTERM or SIGINT to `pagesync-load` mid-run (`Python/load_signal.py`, a cluster of PostgreSQL, Redis and
  /// two brokers): it exits non-zero saying `interrupted`, and every server it started is gone, PostgreSQL's
  /// directory removed. (They were all left running before.)
  @Test func aSignalMidRunStopsTheServersTheHarnessStarted() throws {
    let loop = try Loop()
    let binDirectory = String(builtProgram("").dropLast())
    var script: ProcessRun?
    script = try ProcessRun(
      loop: loop, "python3", [integrationResource("Python/load_signal.py"), binDirectory])
    // Two cluster start-ups of a few seconds each; this only catches a hung harness.
    try loop.runUntilDone(timeout: 300_000)
    try loop.close()
    let output = (script?.output.string ?? "") + (script?.errorOutput.string ?? "")
    #expect(script?.status == 0, "\(output)")
    #expect(script?.output.string.hasSuffix("ALL OK\n") == true, script?.status == 0 ? "\(output)" : "")
  }

  /// Two brokers need one store and one bus they share: refused before anything starts, naming both options.
  @Test func twoBrokersWithoutASharedStoreAndBusAreRefused() throws {
    let run = try runToCompletion(builtProgram("pagesync-load"), ["run", "B1", "--brokers", "2", "--quiet"])
    #expect(run.status != 0)
    #expect(
      run.errorOutput.contains("--brokers 2 needs --store postgres and --bus redis"), "\(run.errorOutput)")
  }
}
