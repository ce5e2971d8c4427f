import EventLoop
import LoadCore
import Web

extension LoadRunner {
  /// Runs `body` against brokers started as `settings.cluster` says (PostgreSQL, Redis, several brokers): writers
  /// on broker 1, device streams on the last broker, so with two brokers every delivery crosses the bus. The
  /// report gains `cluster`: each process's CPU over the run and per delivered notification.
  func withCluster(extraLimits: String, _ body: @escaping Body<BrokerEndpoint>) throws -> ReportValue {
    guard !settings.tls else {
      throw LoadError.invalidOption("--tls is not supported with --store/--brokers/--bus")
    }
    let directory = try ScratchDirectory()
    defer { directory.remove() }
    let synchronous = settings.synchronous
    let servers = ClusterServers(loop: loop, settings: settings.cluster, directory: directory) { n, tables in
      """
      [server]
      listen = "127.0.0.1:0"
      \(tables)\(tables.contains("path =") ? "synchronous = \"\(synchronous)\"\n" : "")[log]
      level = "info"
      [limits]
      # Every simulated device connects from 127.0.0.1.
      connections_per_peer = 1000000

      """ + extraLimits
    }
    let report = try drive(server: servers) { [self] addresses, done in
      let parsed = addresses.split(separator: ",").compactMap { try? SocketAddress(parsing: String($0)) }
      guard let writers = parsed.first, let streams = parsed.last else {
        return done(.failure(.serverFailed("the brokers logged addresses that do not parse: \(addresses)")))
      }
      var endpoint = BrokerEndpoint(
        address: writers, token: settings.token, workspace: settings.workspace, tls: nil)
      endpoint.streamAddress = streams
      body(endpoint, ServerProbe(pid: servers.brokerPID(settings.cluster.brokers)), done)
    }
    guard let cluster = servers.report() else { return report }
    return Self.adding(cluster: cluster, to: report)
  }

  /// `report` with `cluster`, each process's CPU also per delivered notification (B1's `delivery.frames` times
  /// the subscribers each frame reaches is not needed: a frame is one delivered notification; B3's
  /// `delivery.notifications`).
  static func adding(cluster: ReportValue, to report: ReportValue) -> ReportValue {
    guard case .object(var fields) = report, case .object(var clusterFields) = cluster else { return report }
    let delivered = (report["delivery.frames"] ?? report["delivery.notifications"])?.numeric ?? 0
    if delivered > 0, let processes = cluster["processes"], case .object(let list) = processes {
      var perDelivery: [(String, ReportValue)] = list.compactMap { name, value in
        value["cpu_seconds"]?.numeric.map { (name, .number($0 / delivered * 1e6)) }
      }
      perDelivery.append(("all", .number(perDelivery.compactMap { $0.1.numeric }.reduce(0, +))))
      clusterFields.append(("delivered", .int(Int(delivered))))
      clusterFields.append(("cpu_us_per_delivery", .object(perDelivery)))
    }
    fields.append(("cluster", .object(clusterFields)))
    return .object(fields)
  }
}
