import EventLoop
import Logging
import SQLiteStore
import ServiceManager
import TOMLConfig
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// What `pagesync-broker` does once its arguments are parsed: load and validate the configuration, then run
/// until SIGTERM or SIGINT, and drain. Under systemd (`Type=notify`) it tells the service manager when it is
/// ready, how it is doing, that its loop still turns (the watchdog) and when it stops (docs/operations.md).
public enum BrokerMain {
  /// The configuration in `path`, or the embedded defaults when nil. Errors name the file, line and key.
  public static func loadConfiguration(path: String?) throws -> BrokerConfiguration {
    guard let path else { return BrokerConfiguration() }
    var configuration = try BrokerConfiguration.parse(ConfigReader(contentsOf: path))
    try configuration.loadJWTKeys()
    // A pair that cannot serve is refused here, at start, by --check-config and by a reload (which then keeps
    // the running pair).
    do {
      _ = try configuration.makeTLSContext(reusingTicketKeysOf: nil)
    } catch {
      throw ConfigError(file: path, line: nil, key: "server.tls", message: error.message)
    }
    return configuration
  }

  /// Runs the broker on the calling thread until SIGTERM or SIGINT; returns once drained. SIGHUP reloads
  /// `configPath` (docs/operations.md, "Reloading").
  public static func run(_ configuration: BrokerConfiguration, configPath: String? = nil) throws {
    // A peer that closes while we write must not kill the process.
    signal(SIGPIPE, SIG_IGN)
    // Logs go to stderr (the journal under systemd); stdout stays free for tools.
    LoggingSystem.bootstrap(StreamLogHandler.standardError)
    var logger = Logger(label: "pagesync.broker")
    logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .info
    // Only the fault-injection suite sets this (docs/architecture.md, "Testing"); never a config file.
    if let armed = try TestCrashPoint.armFromEnvironment() {
      logger.warning("TEST HOOK: a crash point is armed", metadata: ["crashAt": "\(armed)"])
    }
    do {
      try FileSystem.makeParentDirectories(of: configuration.storePath)
    } catch {
      throw ConfigError(file: configuration.storePath, line: nil, key: "store.path", message: "\(error)")
    }
    let loop = try Loop()
    let broker = try BrokerServer(loop: loop, configuration: configuration, logger: logger)
    let address = try broker.start()
    // Listening, and the store opened and migrated (BrokerServer.init): only now may systemd start what needs us.
    let notifier = ServiceNotifier()
    for problem in notifier.environment.problems {
      logger.warning("systemd environment ignored", metadata: ["reason": "\(problem)"])
    }
    notifier.ready(status: status(of: broker, listeningOn: address))
    if let error = notifier.lastError {
      logger.warning("could not notify systemd", metadata: ["error": "\(error)"])
    }
    notifier.startUpdates(loop: loop) { status(of: broker, listeningOn: address) }
    var watchers: [SignalWatcher] = []
    for signum in [SIGTERM, SIGINT] {
      watchers.append(
        try SignalWatcher(loop: loop, signal: signum) { received in
          logger.info("signal received, draining", metadata: ["signal": "\(received)"])
          notifier.stopping(status: "draining \(broker.connectionCount) connections")
          for watcher in watchers { watcher.close() }
          broker.shutdown {
            logger.info("stopped")
          }
        })
    }
    // The units' ExecReload sends SIGHUP: RELOADING=1, the new file validated whole, then applied or refused.
    watchers.append(
      try SignalWatcher(loop: loop, signal: SIGHUP) { _ in
        notifier.reloading(status: "reloading the configuration")
        let outcome = ReloadPlan.reload(
          from: configPath, logger: { broker.logger }, load: loadConfiguration(path:), apply: broker.reload)
        notifier.ready(status: "\(outcome); " + status(of: broker, listeningOn: address))
      })
    loop.run()
    loop.closeAllHandles()
    loop.run()
    notifier.close()
    try? loop.close()
  }

  /// The `STATUS=` line `systemctl status` shows: where the broker listens and its live figures.
  static func status(of broker: BrokerServer, listeningOn address: SocketAddress) -> String {
    "listening on \(address): \(broker.connectionCount) connections, \(broker.streamCount) device streams, "
      + "\(broker.subscriptionCount) subscriptions, \(broker.batchesApplied) batches applied"
  }
}
