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
    guard let text = readFile(path) else {
      throw ConfigError(
        file: path, line: nil, key: "", message: "cannot read the file: \(String(cString: strerror(errno)))")
    }
    return try BrokerConfiguration.parse(text, file: path)
  }

  /// Runs the broker on the calling thread until SIGTERM or SIGINT; returns once drained.
  public static func run(_ configuration: BrokerConfiguration) throws {
    // A peer that closes while we write must not kill the process.
    signal(SIGPIPE, SIG_IGN)
    // Logs go to stderr (the journal under systemd); stdout stays free for tools.
    LoggingSystem.bootstrap(StreamLogHandler.standardError)
    var logger = Logger(label: "pagesync.broker")
    logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .info
    try makeParentDirectory(of: configuration.storePath)
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

  static func readFile(_ path: String) -> String? {
    guard let file = fopen(path, "rb") else { return nil }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = fread(&chunk, 1, chunk.count, file)
      if count > 0 { bytes.append(contentsOf: chunk[0..<count]) }
      if count < chunk.count { break }
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// Creates the directories above `path` (like `mkdir -p`), owner-only.
  static func makeParentDirectory(of path: String) throws {
    var components = path.split(separator: "/", omittingEmptySubsequences: false).dropLast()
    var current = path.hasPrefix("/") ? "" : "."
    if path.hasPrefix("/") { components = components.dropFirst() }
    for component in components where !component.isEmpty {
      current += "/" + component
      if mkdir(current, 0o700) != 0 && errno != EEXIST {
        throw ConfigError(
          file: path, line: nil, key: "store.path",
          message: "cannot create \(current): \(String(cString: strerror(errno)))")
      }
    }
  }
}
