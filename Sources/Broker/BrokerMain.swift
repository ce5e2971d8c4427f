import EventLoop
import Logging
import TOMLConfig

#if canImport(Glibc)
  import Glibc
#endif

/// What `pagesync-broker` does once its arguments are parsed: load and validate the configuration, then run
/// until SIGTERM or SIGINT, and drain.
public enum BrokerMain {
  /// The configuration in `path`, or the embedded defaults when nil. Errors name the file, line and key.
  public static func loadConfiguration(path: String?) throws -> BrokerConfiguration {
    guard let path else { return BrokerConfiguration() }
    return try BrokerConfiguration.parse(ConfigReader(contentsOf: path))
  }

  /// Runs the broker on the calling thread until SIGTERM or SIGINT; returns once drained.
  public static func run(_ configuration: BrokerConfiguration) throws {
    // A peer that closes while we write must not kill the process.
    signal(SIGPIPE, SIG_IGN)
    // Logs go to stderr (the journal under systemd); stdout stays free for tools.
    LoggingSystem.bootstrap(StreamLogHandler.standardError)
    var logger = Logger(label: "pagesync.broker")
    logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .info
    do {
      try FileSystem.makeParentDirectories(of: configuration.storePath)
    } catch {
      throw ConfigError(file: configuration.storePath, line: nil, key: "store.path", message: "\(error)")
    }
    let loop = try Loop()
    let broker = try BrokerServer(loop: loop, configuration: configuration, logger: logger)
    try broker.start()
    var watchers: [SignalWatcher] = []
    for signum in [SIGTERM, SIGINT] {
      watchers.append(
        try SignalWatcher(loop: loop, signal: signum) { received in
          logger.info("signal received, draining", metadata: ["signal": "\(received)"])
          for watcher in watchers { watcher.close() }
          broker.shutdown {
            logger.info("stopped")
          }
        })
    }
    loop.run()
    loop.closeAllHandles()
    loop.run()
    try? loop.close()
  }
}
