import EventLoop
import Logging
import TOMLConfig

#if canImport(Glibc)
  import Glibc
#endif

/// What `pagesyncd` does once its arguments are parsed: load and validate the configuration, open the store,
/// serve the local API and sync until SIGTERM or SIGINT.
public enum DaemonMain {
  /// The configuration in `path`, or the embedded defaults when nil. Errors name the file, line and key.
  public static func loadConfiguration(path: String?) throws -> DaemonConfiguration {
    guard let path else { return DaemonConfiguration() }
    return try DaemonConfiguration.parse(ConfigReader(contentsOf: path))
  }

  /// Runs the daemon on the calling thread until SIGTERM or SIGINT.
  public static func run(_ configuration: DaemonConfiguration) throws {
    // A peer that closes while we write must not kill the process.
    signal(SIGPIPE, SIG_IGN)
    // Logs go to stderr (the journal under systemd); stdout stays free for tools.
    LoggingSystem.bootstrap(StreamLogHandler.standardError)
    var logger = Logger(label: "pagesync.daemon")
    logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .info
    try FileSystem.makeParentDirectories(of: configuration.socketPath)
    let loop = try Loop()
    let driver = try SyncDriver(loop: loop, configuration: configuration, logger: logger)
    let api = LocalAPI(driver: driver)
    try api.listen()
    logger.info(
      "pagesyncd started",
      metadata: [
        "socket": "\(configuration.socketPath)", "store": "\(configuration.storePath)",
        "broker": "\(configuration.brokerURL)", "client": "\(driver.store.clientID)",
        "offlinePages": "\(driver.forest.offlinePageCount)",
      ])
    driver.start()
    var watchers: [SignalWatcher] = []
    for signum in [SIGTERM, SIGINT] {
      watchers.append(
        try SignalWatcher(loop: loop, signal: signum) { received in
          logger.info("signal received, stopping", metadata: ["signal": "\(received)"])
          for watcher in watchers { watcher.close() }
          api.close()
          driver.stop()
        })
    }
    loop.run()
    loop.closeAllHandles()
    loop.run()
    try? loop.close()
    logger.info("stopped")
  }
}
