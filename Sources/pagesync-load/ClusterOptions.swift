import ArgumentParser
import LoadCore
import LoadHarness

/// `--store`, `--brokers`, `--bus`: the broker side of a harness-started run as a cluster.
struct ClusterOptions: ParsableArguments {
  @Option(
    help: """
      Store of the harness-started brokers: sqlite (a file) or postgres (a PostgreSQL server the harness starts \
      in a temporary directory, synchronous_commit on, and stops by pid).
      """)
  var store = "sqlite"

  @Option(
    help: """
      Brokers the harness starts on one store (more than 1 needs --store postgres and --bus redis): writers use \
      broker 1, device streams the last, so every delivery crosses the bus.
      """)
  var brokers = 1

  @Option(help: "Bus of the harness-started brokers: local (in-process) or redis (a redis-server it starts).")
  var bus = "local"

  func cluster() throws -> ClusterSettings {
    var cluster = ClusterSettings()
    guard ["sqlite", "postgres"].contains(store) else { throw ValidationError("--store: sqlite or postgres") }
    guard ["local", "redis"].contains(bus) else { throw ValidationError("--bus: local or redis") }
    guard (1...8).contains(brokers) else { throw ValidationError("--brokers: 1 to 8") }
    cluster.postgres = store == "postgres"
    cluster.redisBus = bus == "redis"
    cluster.brokers = brokers
    guard brokers == 1 || (cluster.postgres && cluster.redisBus) else {
      throw ValidationError(
        "--brokers \(brokers) needs --store postgres and --bus redis (one store, one bus)")
    }
    return cluster
  }

  /// `common`'s settings with this cluster; refused with `--broker` (the harness starts no broker then).
  func settings(_ common: CommonOptions) throws -> RunSettings {
    var settings = common.settings
    settings.cluster = try cluster()
    guard settings.cluster.isPlain || common.broker == nil else {
      throw ValidationError("--store, --brokers and --bus are for a harness-started broker, not --broker")
    }
    return settings
  }
}

extension CompareCommand {
  /// `compare B1|B2|B3 --brokers N`: the scenario on one broker alone (same store, in-process bus), then on the
  /// cluster, with the same generator; ratios are the cluster's over one broker's.
  func compareCluster() throws {
    let cluster = try self.cluster.cluster()
    var alone = cluster
    alone.brokers = 1
    alone.redisBus = false
    var reports: [ReportValue] = []
    for setup in [alone, cluster] {
      var settings = try self.cluster.settings(common)
      settings.cluster = setup
      let runner = try LoadRunner(settings: settings)
      defer { Output.close(runner) }
      switch scenario {
      case .fanOut: reports.append(try runner.fanOut(sizes.fanOut(quick: common.quick)))
      case .spread: reports.append(try runner.fanOut(sizes.spread(quick: common.quick), scenario: "B2"))
      case .density: reports.append(try runner.density(density.density(sizes, quick: common.quick)))
      default: throw ValidationError("compare supports B1, B2 and B3")
      }
    }
    let names = ("brokers_\(self.cluster.brokers)", "broker_1")
    let report = Output.labelled(
      ComparisonReport.make(
        scenario: scenario.rawValue, pagesync: reports[1], redis: reports[0], names: names),
      common.label)
    Output.write(
      common.json
        ? report.json + "\n" : ComparisonReport.table(pagesync: reports[1], redis: reports[0], names: names))
    try Output.writeHTML(of: [report], to: common.html)
    let failed = reports.contains { report in
      report["ok"].map { if case .bool(false) = $0 { true } else { false } } == true
    }
    if failed { throw ExitCode(2) }
  }
}
