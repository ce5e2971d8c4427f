import EventLoop
import Logging
import SQLiteStore
import ServiceManager
import TOMLConfig
import Web

#if canImport(Glibc)
  import Glibc
#endif

/// What `pagesyncd` does once its arguments are parsed: load and validate the configuration, open the store,
/// serve the local API and sync until SIGTERM or SIGINT. Under systemd (`Type=notify`) it tells the service
/// manager when it is ready, how it is doing, that its loop still turns and when it stops (docs/operations.md).
public enum DaemonMain {
  /// The configuration in `path`, or the embedded defaults when nil. Errors name the file, line and key.
  public static func loadConfiguration(path: String?) throws -> DaemonConfiguration {
    guard let path else { return DaemonConfiguration() }
    let configuration = try DaemonConfiguration.parse(ConfigReader(contentsOf: path))
    // A CA file that cannot be read stops the daemon here (and --check-config), not at its first connection.
    if configuration.brokerURLs.contains(where: \.isSecure) {
      do {
        _ = try TLSClientContext(caFile: configuration.caFile)
      } catch {
        throw ConfigError(file: path, line: nil, key: "broker.ca_file", message: error.message)
      }
    }
    return configuration
  }

  /// Runs the daemon on the calling thread until SIGTERM or SIGINT. SIGHUP reloads `configPath`
  /// (docs/operations.md, "Reloading").
  public static func run(_ configuration: DaemonConfiguration, configPath: String? = nil) throws {
    // A peer that closes while we write must not kill the process.
    signal(SIGPIPE, SIG_IGN)
    // Logs go to stderr (the journal under systemd); stdout stays free for tools.
    LoggingSystem.bootstrap(StreamLogHandler.standardError)
    var logger = Logger(label: "pagesync.daemon")
    logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .info
    // Only the fault-injection suite sets this (docs/architecture.md, "Testing"); never a config file.
    if let armed = try TestCrashPoint.armFromEnvironment() {
      logger.warning("TEST HOOK: a crash point is armed", metadata: ["crashAt": "\(armed)"])
    }
    try FileSystem.makeParentDirectories(of: configuration.socketPath)
    let loop = try Loop()
    let driver = try SyncDriver(loop: loop, configuration: configuration, logger: logger)
    let api = LocalAPI(driver: driver)
    try api.listen()
    logger.info(
      "pagesyncd started",
      metadata: [
        "socket": "\(configuration.socketPath)", "store": "\(configuration.storePath)",
        "broker": "\(configuration.brokerURLs.map(\.description).joined(separator: " "))",
        "client": "\(driver.store.clientID)",
        "offlinePages": "\(driver.offlineSet.offlinePageCount)",
      ])
    driver.start()
    // The store is open and migrated and the local API listens: apps may use it from now on.
    let notifier = ServiceNotifier()
    for problem in notifier.environment.problems {
      logger.warning("systemd environment ignored", metadata: ["reason": "\(problem)"])
    }
    notifier.ready(status: status(of: driver))
    if let error = notifier.lastError {
      logger.warning("could not notify systemd", metadata: ["error": "\(error)"])
    }
    notifier.startUpdates(loop: loop) { status(of: driver) }
    var watchers: [SignalWatcher] = []
    for signum in [SIGTERM, SIGINT] {
      watchers.append(
        try SignalWatcher(loop: loop, signal: signum) { received in
          logger.info("signal received, stopping", metadata: ["signal": "\(received)"])
          // First: status updates read the store, which driver.stop() closes.
          notifier.stopping()
          for watcher in watchers { watcher.close() }
          api.close()
          // A push in flight is answered (or given up after 5 s) before the store closes.
          driver.stop()
        })
    }
    // The units' ExecReload sends SIGHUP: RELOADING=1, the new file validated whole, then applied or refused.
    watchers.append(
      try SignalWatcher(loop: loop, signal: SIGHUP) { _ in
        notifier.reloading(status: "reloading the configuration")
        let outcome = ReloadPlan.reload(
          from: configPath, logger: { driver.logger }, load: loadConfiguration(path:), apply: driver.reload)
        notifier.ready(status: "\(outcome); " + status(of: driver))
      })
    loop.run()
    loop.closeAllHandles()
    loop.run()
    notifier.close()
    try? loop.close()
    logger.info("stopped")
  }

  /// The `STATUS=` line `systemctl status` shows: the link to the broker and what waits in the store.
  static func status(of driver: SyncDriver) -> String {
    var link = "\(driver.isConnected ? "connected to" : "not connected to") \(driver.brokerURL)"
    if let problem = driver.tokens.problem { link += " (\(problem))" }
    do {
      let counts = try driver.store.status()
      return
        "\(link): \(driver.offlineSet.offlinePageCount) offline pages, \(counts.pendingMutations) pending "
        + "mutations, \(counts.failedMutations) rejected"
    } catch {
      return "\(link): store unreadable: \(error)"
    }
  }
}
