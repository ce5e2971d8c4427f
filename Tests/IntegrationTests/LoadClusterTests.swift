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

  /// Two brokers need one store and one bus they share: refused before anything starts, naming both options.
  @Test func twoBrokersWithoutASharedStoreAndBusAreRefused() throws {
    let run = try runToCompletion(builtProgram("pagesync-load"), ["run", "B1", "--brokers", "2", "--quiet"])
    #expect(run.status != 0)
    #expect(
      run.errorOutput.contains("--brokers 2 needs --store postgres and --bus redis"), "\(run.errorOutput)")
  }
}
