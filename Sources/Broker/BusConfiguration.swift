import EventLoop
import TOMLConfig

/// `[bus]`: the bus between brokers (docs/operations.md, "Several brokers"). Without the table the bus is the
/// broker's own fan-out (one broker, as always); with `url = "redis://HOST:PORT"` it is Redis pub/sub.
/// Every key needs a restart.
public struct BusConfiguration: Sendable, Equatable {
  /// `url`: `redis://HOST:PORT` (port 6379 when left out).
  public var address: SocketAddress
  /// `buffer_bytes`: the most bytes queued toward Redis; a message past it is dropped (logged, counted) and the
  /// other brokers are told to make their devices catch up (`resync`) once there is room.
  public var bufferBytes = 8 << 20
  /// `message_bytes`: the largest bus message sent (a batch's pages split across several) or accepted.
  public var messageBytes = 1 << 20
  /// `backoff_base_ms`, `backoff_cap_ms`, `backoff_reset_ms`: retries of a lost Redis connection (full jitter).
  public var backoffBase: UInt64 = 100
  public var backoffCap: UInt64 = 5_000
  public var backoffReset: UInt64 = 10_000
  /// `connect_timeout_ms`: how long opening and subscribing may take before the attempt counts as failed.
  public var connectTimeout: UInt64 = 5_000
  /// `ping_interval_ms`: both connections are pinged this often; one that has not answered by the next ping is
  /// lost (a Redis that vanished without closing the connection, a partition).
  public var pingInterval: UInt64 = 5_000

  public init(address: SocketAddress) { self.address = address }

  /// Reads `[bus]` of `document`; nil when the file has no such table.
  static func parse(_ document: ConfigTable) throws(ConfigError) -> BusConfiguration? {
    guard document.contains("bus") else { return nil }
    let bus = try document.table("bus")
    guard let url = try bus.optionalString("url") else {
      throw bus.error("url", "is required in [bus] (redis://HOST:PORT); leave [bus] out for one broker")
    }
    guard url.hasPrefix("redis://") else {
      throw bus.error("url", "must be redis://HOST:PORT (got \"\(url)\")")
    }
    var hostPort = String(url.dropFirst("redis://".count))
    if hostPort.hasSuffix("/") { hostPort.removeLast() }
    guard !hostPort.isEmpty, !hostPort.contains("/"), !hostPort.contains("@") else {
      throw bus.error("url", "must be redis://HOST:PORT, without user, password or database (got \"\(url)\")")
    }
    let hasPort = hostPort.hasPrefix("[") ? hostPort.contains("]:") : hostPort.contains(":")
    if !hasPort { hostPort += ":6379" }
    var configuration: BusConfiguration
    do {
      let address = try SocketAddress(parsing: hostPort)
      guard case .inet(_, let port) = address, port > 0 else {
        throw bus.error("url", "must name a TCP host and port (got \"\(url)\")")
      }
      configuration = BusConfiguration(address: address)
    } catch let error as SocketAddress.ParseError {
      throw bus.error("url", "\(error)")
    } catch {
      throw error as! ConfigError
    }
    configuration.bufferBytes = try bus.int(
      "buffer_bytes", default: configuration.bufferBytes, range: 65_536...1 << 30)
    configuration.messageBytes = try bus.int(
      "message_bytes", default: configuration.messageBytes, range: 1024...64 << 20)
    configuration.backoffBase = UInt64(
      try bus.int("backoff_base_ms", default: Int(configuration.backoffBase), range: 1...60_000))
    configuration.backoffCap = UInt64(
      try bus.int("backoff_cap_ms", default: Int(configuration.backoffCap), range: 1...3_600_000))
    if configuration.backoffCap < configuration.backoffBase {
      throw bus.error("backoff_cap_ms", "must not be below backoff_base_ms (\(configuration.backoffBase))")
    }
    configuration.backoffReset = UInt64(
      try bus.int("backoff_reset_ms", default: Int(configuration.backoffReset), range: 1...3_600_000))
    configuration.connectTimeout = UInt64(
      try bus.int("connect_timeout_ms", default: Int(configuration.connectTimeout), range: 100...600_000))
    configuration.pingInterval = UInt64(
      try bus.int("ping_interval_ms", default: Int(configuration.pingInterval), range: 100...600_000))
    try bus.rejectUnknownKeys()
    return configuration
  }
}
