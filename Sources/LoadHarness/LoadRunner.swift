import EventLoop
import LoadCore
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// What every run shares: where the target is (or that the harness starts it), and how it reports.
public struct RunSettings: Sendable {
  /// `http://HOST:PORT` of a running broker; nil starts one (the `pagesync-broker` beside this program).
  public var brokerURL: String?
  public var token: String?
  public var workspace = "default"
  /// `[store] synchronous` of a harness-started broker.
  public var synchronous = "full"
  /// Seeds the choices a scenario makes (which pages change): the same seed, the same workload.
  public var seed: UInt64 = 1
  /// Draw the live progress line on stderr.
  public var progress = true
  /// The most a run (start, load, drain, stop) may take before it fails as timed out.
  public var timeoutSeconds = 600
  /// TLS on both sides (`--tls`): a harness-started broker with `[server.tls]` and redis-server with
  /// `--tls-port`, both presenting a certificate of a CA made for the run, which the harness's clients verify.
  public var tls = false
  /// The CA to verify an `https://` `--broker` against (`--ca-file`); nil: the system's trust store.
  public var caFile: String?
  /// The broker side as a cluster (`--store`, `--brokers`, `--bus`): LoadRunner+Cluster.swift.
  public var cluster = ClusterSettings()

  public init() {}
}

/// A scenario's run on the loop: it opens what it needs, drives the load, closes all and completes once.
protocol ScenarioRun: AnyObject {
  func start(_ completion: @escaping (Result<ReportValue, LoadError>) -> Void)
}

/// Runs scenarios on one loop: starts the servers it needs, drives the load, stops them by pid.
///
/// Threading: call from a nonisolated context (not `@MainActor`): the loop's C callbacks are created here.
public final class LoadRunner {
  let settings: RunSettings
  let loop: Loop
  private let nonce: String
  /// The `--tls` run's CA and server pair, made on first use and removed by `close()`.
  private var certificates: RunCertificates?

  public init(settings: RunSettings) throws {
    self.settings = settings
    // A peer that resets a connection while we write must not kill the harness.
    signal(SIGPIPE, SIG_IGN)
    loop = try Loop()
    nonce = String(HostProcess.wallMillis() % 100_000_000, radix: 36)
  }

  /// Releases the loop. Every run closes what it opened, so this only fails on a harness bug (a handle left
  /// open), which it reports rather than leaking the loop (LeakSanitizer runs the smoke tests in `make sanitize`).
  public func close() throws {
    certificates?.remove()
    certificates = nil
    try loop.close()
  }

  /// The run's CA and server certificate (`--tls`), made once.
  private func runCertificates() throws(LoadError) -> RunCertificates {
    if let certificates { return certificates }
    let made = try RunCertificates()
    certificates = made
    return made
  }

  /// B1 or B2 (`options.pages`, `options.rising`) against the broker.
  public func fanOut(_ options: FanOutOptions, scenario: String = "B1") throws -> ReportValue {
    try onBroker { [self] endpoint, probe in
      let pages =
        options.pages == 1
        ? ["load-b1-s\(settings.seed)"] : (0..<options.pages).map { "load-b2-\(nonce)-\($0)" }
      let target = PagesyncFanOut(
        loop: loop, endpoint: endpoint, pages: pages, writers: options.writers, nonce: nonce)
      return fanOutRun(target: target, options: options, scenario: scenario, probe: probe)
    }
  }

  /// B1 or B2 against a harness-started redis-server, with the same generator (a channel per page).
  public func fanOutRedis(_ options: FanOutOptions, scenario: String = "B1") throws -> ReportValue {
    try onRedis { [self] address, tls, probe in
      let channels = options.pages == 1 ? ["load-b1"] : (0..<options.pages).map { "load-b2-\($0)" }
      let target = RedisFanOut(
        loop: loop, address: address, tls: tls, channels: channels, writers: options.writers)
      return fanOutRun(target: target, options: options, scenario: scenario, probe: probe)
    }
  }

  private func fanOutRun(target: FanOutTarget, options: FanOutOptions, scenario: String, probe: ServerProbe)
    -> FanOutRun
  {
    FanOutRun(
      loop: loop, target: target, options: options, scenario: scenario,
      stepping: FanOutRun.stepping(for: options), server: probe, progress: progressLine)
  }

  /// B5 against the broker.
  public func slowConsumer(_ options: SlowConsumerOptions) throws -> ReportValue {
    try onBroker { [self] endpoint, probe in
      let target = PagesyncFanOut(
        loop: loop, endpoint: endpoint, pages: ["load-b5-\(nonce)"], writers: options.writers, nonce: nonce)
      return SlowConsumerRun(
        loop: loop, target: target, options: options, server: probe, progress: progressLine)
    }
  }

  /// B6 against the broker: raises this process's descriptor limit first (the broker it starts inherits it) and
  /// tells a harness-started broker to accept that many connections.
  public func idleDensity(_ options: IdleDensityOptions) throws -> ReportValue {
    let limit = DescriptorLimit.raiseToHard()
    let budget = ConnectionBudget.plan(
      requested: options.connections, descriptorLimit: limit.soft, reserve: options.reserve)
    guard budget.connections > 0 else { throw LoadError.invalidOption("no descriptors left for connections") }
    return try onBroker(extraLimits: "connections = \(budget.connections + options.reserve)\n") {
      [self] endpoint, probe in
      IdleDensityRun(
        loop: loop, endpoint: endpoint, options: options, budget: budget, descriptorLimit: limit,
        server: probe, progress: progressLine, nonce: nonce)
    }
  }

  /// W1 against the broker.
  public func writes(_ options: WriteOptions) throws -> ReportValue {
    try onBroker { [self] endpoint, probe in
      WriteRun(
        loop: loop, endpoint: endpoint, options: options, server: probe, progress: progressLine, nonce: nonce)
    }
  }

  /// C1 against the broker.
  public func catchUp(_ options: CatchUpOptions) throws -> ReportValue {
    try onBroker { [self] endpoint, probe in
      CatchUpRun(
        loop: loop, endpoint: endpoint, options: options, server: probe, progress: progressLine, nonce: nonce,
        seed: settings.seed)
    }
  }

  /// B3 against the broker (a harness-started one allows the connections and subscriptions it needs).
  public func density(_ options: DensityOptions) throws -> ReportValue {
    try runDensity(options, connectionsPerDevice: 1) { [self] endpoint, probe, layout in
      DensityRun(
        loop: loop,
        target: PagesyncDensity(
          loop: loop, endpoint: endpoint, layout: layout, writers: options.writers, nonce: nonce),
        options: options, layout: layout, server: probe, progress: progressLine)
    }
  }

  /// B3 against a harness-started redis-server, with the same generator.
  public func densityRedis(_ options: DensityOptions) throws -> ReportValue {
    guard let layout = options.layout else { throw LoadError.invalidOption("B3 sizes") }
    _ = DescriptorLimit.raiseToHard()
    return try onRedis { [self] address, tls, probe in
      DensityRun(
        loop: loop,
        target: RedisDensity(
          loop: loop, address: address, tls: tls, layout: layout, writers: options.writers),
        options: options, layout: layout, server: probe, progress: progressLine)
    }
  }

  /// B4 against the broker.
  public func reconnectStorm(_ options: ReconnectOptions) throws -> ReportValue {
    try runDensity(options.density, connectionsPerDevice: 2) { [self] endpoint, probe, layout in
      ReconnectRun(
        loop: loop, endpoint: endpoint, options: options, layout: layout, server: probe,
        progress: progressLine, nonce: nonce, seed: settings.seed)
    }
  }

  /// B7 against the broker.
  public func soak(_ options: SoakOptions) throws -> ReportValue {
    try runDensity(options.density, connectionsPerDevice: 2) { [self] endpoint, probe, layout in
      SoakRun(
        loop: loop, endpoint: endpoint, options: options, layout: layout, server: probe,
        progress: progressLine, nonce: nonce, seed: settings.seed)
    }
  }

  /// Raises the descriptor limit (the broker inherits it), sizes a harness-started broker's `[limits]` for
  /// `connectionsPerDevice` connections per device, and runs what `make` builds.
  private func runDensity(
    _ options: DensityOptions, connectionsPerDevice: Int,
    _ make: @escaping (BrokerEndpoint, ServerProbe, DensityLayout) -> ScenarioRun
  ) throws -> ReportValue {
    guard let layout = options.layout else {
      throw LoadError.invalidOption(
        "devices and pages must be positive, and a device's pages fit in the pool")
    }
    let descriptors = DescriptorLimit.raiseToHard().soft
    let connections = layout.devices * connectionsPerDevice + options.writers + 64
    guard connections + 64 <= descriptors else {
      throw LoadError.invalidOption(
        "\(connections) connections need more than the descriptor limit \(descriptors)")
    }
    let limits = """
      connections = \(connections)
      subscriptions_per_connection = \(max(100_000, layout.pagesPerDevice))
      frame_bytes = \(max(4 << 20, layout.pagesPerDevice * 128))

      """
    return try onBroker(extraLimits: limits) { endpoint, probe in
      make(endpoint, probe, layout)
    }
  }

  /// Runs the run `make` builds against the broker (`withBroker`), keeping it alive until it completes.
  private func onBroker(
    extraLimits: String = "", _ make: @escaping (BrokerEndpoint, ServerProbe) -> ScenarioRun
  ) throws -> ReportValue {
    try withBroker(extraLimits: extraLimits) { [self] endpoint, probe, done in
      launch(make(endpoint, probe), done)
    }
  }

  /// Runs the run `make` builds against a harness-started redis-server (`withRedis`).
  private func onRedis(
    _ make: @escaping (SocketAddress, TLSClientContext?, ServerProbe) -> ScenarioRun
  ) throws -> ReportValue {
    try withRedis { [self] address, tls, probe, done in launch(make(address, tls, probe), done) }
  }

  /// Starts `run` and keeps it alive until it completes.
  private func launch(_ run: ScenarioRun, _ done: @escaping (Result<ReportValue, LoadError>) -> Void) {
    run.start { result in withExtendedLifetime(run) { done(result) } }
  }

  /// A run's progress line on stderr (drawn unless `--quiet`).
  private var progressLine: ProgressLine { ProgressLine(enabled: settings.progress) }

  // MARK: Servers

  typealias Body<Target> = (Target, ServerProbe, @escaping (Result<ReportValue, LoadError>) -> Void) -> Void
  typealias RedisBody = (
    SocketAddress, TLSClientContext?, ServerProbe, @escaping (Result<ReportValue, LoadError>) -> Void
  ) -> Void

  /// Runs `body` against the broker at `settings.brokerURL`, or one started for it in a temporary directory.
  /// `extraLimits`: more `[limits]` keys for a harness-started broker (B6's `connections`).
  func withBroker(extraLimits: String = "", _ body: @escaping Body<BrokerEndpoint>) throws -> ReportValue {
    if let url = settings.brokerURL {
      let parsed: HTTPURL
      do { parsed = try HTTPURL(parsing: url) } catch { throw LoadError.invalidOption("--broker: \(error)") }
      var tls: TLSClientContext?
      if parsed.isSecure || settings.tls {
        do { tls = try TLSClientContext(caFile: settings.caFile) } catch {
          throw LoadError.invalidOption("--ca-file: \(error)")
        }
      }
      let endpoint = BrokerEndpoint(
        address: parsed.address, token: settings.token, workspace: settings.workspace, tls: tls)
      return ReportValue.withTLS(try drive { done in body(endpoint, ServerProbe(pid: nil), done) }, tls)
    }
    if !settings.cluster.isPlain { return try withCluster(extraLimits: extraLimits, body) }
    let directory = try ScratchDirectory()
    defer { directory.remove() }
    var tls: TLSClientContext?
    var serverTLS = ""
    if settings.tls {
      let certificates = try runCertificates()
      tls = try certificates.clientContext()
      serverTLS = """
        [server.tls]
        cert = "\(certificates.certificateFile)"
        key = "\(certificates.keyFile)"

        """
    }
    try directory.write(
      "broker.toml",
      """
      [server]
      listen = "127.0.0.1:0"
      \(serverTLS)[store]
      path = "\(directory.path)/broker.sqlite"
      synchronous = "\(settings.synchronous)"
      [log]
      level = "info"
      [limits]
      # Every simulated device connects from 127.0.0.1.
      connections_per_peer = 1000000

      """ + extraLimits)
    let server = try ManagedServer(
      loop: loop, name: "pagesync-broker", executable: HostProcess.siblingProgram("pagesync-broker"),
      arguments: ["--config", directory.path + "/broker.toml"],
      readiness: ManagedServer.brokerAddress)
    let report = try drive(server: server) { [self] address, done in
      guard let parsed = try? SocketAddress(parsing: address) else {
        return done(.failure(.serverFailed("the broker logged an address that does not parse: \(address)")))
      }
      let endpoint = BrokerEndpoint(
        address: parsed, token: settings.token, workspace: settings.workspace, tls: tls)
      body(endpoint, ServerProbe(pid: server.pid), done)
    }
    return ReportValue.withTLS(report, tls)
  }

  /// Runs `body` against a redis-server started on a free loopback port, without persistence. With `--tls` it
  /// speaks TLS only (`--port 0`, `--tls-port`), with the run's certificate, and asks clients for none.
  func withRedis(_ body: @escaping RedisBody) throws -> ReportValue {
    guard let port = HostProcess.freeLoopbackPort() else {
      throw LoadError.serverFailed("no free port for redis")
    }
    var listen = ["--port", String(port)]
    var tls: TLSClientContext?
    if settings.tls {
      let certificates = try runCertificates()
      tls = try certificates.clientContext()
      listen = [
        "--port", "0", "--tls-port", String(port), "--tls-cert-file", certificates.certificateFile,
        "--tls-key-file", certificates.keyFile, "--tls-ca-cert-file", certificates.caFile,
        "--tls-auth-clients", "no",
      ]
    }
    let server = try ManagedServer(
      loop: loop, name: "redis-server", executable: "redis-server",
      arguments: listen + [
        "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no",
        "--maxclients", "20000",
      ],
      readiness: { output in output.contains("Ready to accept connections") ? "127.0.0.1:\(port)" : nil })
    let report = try drive(server: server) { _, done in
      body(.inet(host: "127.0.0.1", port: port), tls, ServerProbe(pid: server.pid), done)
    }
    return ReportValue.withTLS(report, tls)
  }

  /// Runs the loop until `body` completes and, if the harness started it, the server has stopped.
  func drive(
    server: RunServer? = nil,
    _ body: @escaping (String, @escaping (Result<ReportValue, LoadError>) -> Void) -> Void
  ) throws -> ReportValue {
    var outcome: Result<ReportValue, LoadError>?
    // A bound on the whole run: a server that stops answering must not hang the harness (or CI).
    let watchdog = LoopTimer(loop: loop)
    var signals: [SignalWatcher] = []
    let finish: (Result<ReportValue, LoadError>) -> Void = { [loop] result in
      guard outcome == nil else { return }
      outcome = result
      watchdog.close()
      for watcher in signals { watcher.close() }
      signals = []
      if let server {
        server.stop { loop.stop() }
      } else {
        loop.stop()
      }
    }
    let limit = settings.timeoutSeconds
    watchdog.start(after: UInt64(limit) * 1000) { finish(.failure(.timedOut("no result within \(limit) s"))) }
    if let server {
      // Ctrl-C or a SIGTERM must not leave the servers the harness started (PostgreSQL, redis-server, brokers)
      // running: they are stopped by pid, as at the end of a run, and the run fails.
      for signal in [SIGINT, SIGTERM] {
        if let watcher = try? SignalWatcher(
          loop: loop, signal: signal,
          { number in
            finish(.failure(.interrupted("signal \(number): stopped the servers this run started")))
          })
        {
          signals.append(watcher)
        }
      }
      server.whenReady { ready in
        switch ready {
        case .failure(let error): finish(.failure(error))
        case .success(let address): body(address, finish)
        }
      }
    } else {
      body("", finish)
    }
    loop.run()
    // Whatever is still open (sockets closing, heartbeats) belongs to the finished run.
    loop.closeAllHandles()
    loop.runNoWait()
    guard let outcome else { throw LoadError.timedOut("the loop ended before the run completed") }
    return try outcome.get()
  }

  private func drive(_ body: @escaping (@escaping (Result<ReportValue, LoadError>) -> Void) -> Void) throws
    -> ReportValue
  {
    try drive(server: nil) { _, done in body(done) }
  }
}
