import DaemonCore
import DaemonStore
import EventLoop
import SyncModel
import TOMLConfig
import Web

/// Everything `pagesyncd` reads from its TOML file. Every key, with its default, is documented in
/// `config/pagesyncd.toml`.
public struct DaemonConfiguration: Sendable, Equatable {
  /// `[broker] url`: the brokers' base URLs, one string or an array of at most `BrokerFailover.maxBrokers`, each
  /// `http://` or `https://` (TLS, the broker verified against the system's trust store or `ca_file`, its name
  /// against that URL's host). The daemon is on one at a time and fails over to the next when it is lost
  /// (`BrokerFailover`). Never empty.
  public var brokerURLs = [try! HTTPURL(parsing: "http://127.0.0.1:7700")]
  /// `[broker] ca_file`: the CA certificates (PEM) to trust for an `https://` broker instead of the system's
  /// store (a private CA); nil: the system's.
  public var caFile: String?
  /// `[broker] token`: the bearer token; empty when the broker has no tokens (loopback only).
  public var token = ""
  /// `[broker] token_file`: a file whose first line is the token, read at the first connection and again when
  /// the broker refuses it (or on a reload). Exclusive with `token` and `token_command`.
  public var tokenFile: String?
  /// `[broker] token_command`: a program and its arguments (no shell) whose first line of output is the token,
  /// run when a token is needed. Exclusive with `token` and `token_file`.
  public var tokenCommand: [String]?
  /// `[broker] token_command_timeout`: seconds `token_command` may run before it is killed (a failure).
  public var tokenCommandTimeoutSeconds = 10
  /// `[broker] token_max_bytes`: the longest token taken from any source (the file, the command's output,
  /// `PUT /v1/token`).
  public var tokenMaxBytes = 16_384
  /// `[broker] workspace`: where pages created without a parent go.
  public var workspace = try! EntityID(validating: "default")
  /// `[store] path`: the local SQLite file (created owner-only).
  public var storePath = "var/pagesyncd.sqlite"
  /// `[store] cache_kib`: the most memory SQLite's page cache holds (KiB). SQLite's own default, 2 MiB, was the
  /// largest part of the heap at a first sync's peak; reads past it come from the file (the OS's cache).
  public var storeCacheKiB = LocalStore.defaultCacheKiB
  /// `[api] socket`: the Unix socket of the local API.
  public var socketPath = "var/pagesyncd.sock"
  /// `[api] socket_mode`: the socket file's permissions (0600: only the owner may use the API).
  public var socketMode: UInt32 = 0o600
  /// `[api] events_kept`: the change stream's window, in events: a reader resumes (`Last-Event-ID`) from any of
  /// them.
  public var eventsKept = 10_000
  /// `[api] event_streams`: change streams (`GET /v1/events`) open at once.
  public var eventStreams = 64
  /// `[offline] database_row_limit`: rows in view of an offline database that are kept offline with it.
  public var databaseRowLimit = 50
  /// `[offline] recent_limit`: recently visited pages kept offline.
  public var recentLimit = 20
  /// `[sync] backoff_base_ms`, `backoff_cap_ms`, `backoff_reset_ms`: reconnect delays (full jitter).
  public var backoffBase: UInt64 = 500
  public var backoffCap: UInt64 = 60_000
  public var backoffReset: UInt64 = 30_000
  /// `[sync] heartbeat_interval`: seconds between heartbeats while connected (retries of failed fetches and
  /// pushes ride on it; the WebSocket pings with the same period).
  public var heartbeatSeconds = 30
  /// `[sync] fetch_batch`: pages per fetch request.
  public var fetchBatch = 100
  /// `[sync] push_batch`: mutations per pushed batch (at most the broker's `[limits] batch_mutations`).
  public var pushBatch = 100
  /// `[sync] request_timeout`: seconds to wait for a broker answer before giving the connection up.
  public var requestTimeoutSeconds = 30
  /// `[sync] clock_ahead_seconds`: how far ahead of the device's wall clock a broker's clock (`Pagesync-Clock`)
  /// may be and still be merged, and the device's own clock be (`ClockBound`); the broker's
  /// `[limits] clock_ahead_seconds`, a day by default, rejects mutation times further ahead of its wall clock.
  public var clockAheadSeconds = 86_400
  /// `[log] level`.
  public var logLevel = "info"

  public init() {}
}

extension DaemonConfiguration {
  /// The first URL of `[broker] url` (the one tried first); setting it makes it the only one.
  public var brokerURL: HTTPURL {
    get { brokerURLs[0] }
    set { brokerURLs = [newValue] }
  }

  /// Parses and validates a configuration file's text. Errors name the file, line and key.
  public static func parse(_ text: String, file: String) throws(ConfigError) -> DaemonConfiguration {
    try parse(ConfigReader(text: text, file: file))
  }

  /// Validates a parsed configuration file. Errors name the file, line and key.
  public static func parse(_ reader: ConfigReader) throws(ConfigError) -> DaemonConfiguration {
    var configuration = DaemonConfiguration()
    let document = reader.document

    let broker = try document.table("broker")
    configuration.brokerURLs = try parseBrokerURLs(broker, default: configuration.brokerURL)
    configuration.caFile = try broker.optionalString("ca_file")
    if let caFile = configuration.caFile {
      if caFile.isEmpty { throw broker.error("ca_file", "must not be empty") }
      if !configuration.brokerURLs.contains(where: \.isSecure) {
        throw broker.error("ca_file", "needs an https:// url (a plain http:// broker is not verified)")
      }
    }
    configuration.token = try broker.string("token", default: "")
    if configuration.token.contains(where: { $0 == " " || $0 == "\r" || $0 == "\n" }) {
      throw broker.error("token", "must not contain spaces or line breaks")
    }
    try parseTokenSource(broker, into: &configuration)
    let workspace = try broker.string("workspace", default: configuration.workspace.rawValue)
    guard let workspaceID = try? EntityID(validating: workspace) else {
      throw broker.error("workspace", "must be an id (1 to 64 of A-Z a-z 0-9 _ -)")
    }
    configuration.workspace = workspaceID
    try broker.rejectUnknownKeys()

    let store = try document.table("store")
    configuration.storePath = try store.string("path", default: configuration.storePath)
    if configuration.storePath.isEmpty { throw store.error("path", "must not be empty") }
    configuration.storeCacheKiB = try store.int(
      "cache_kib", default: configuration.storeCacheKiB, range: 64...1_048_576)
    try store.rejectUnknownKeys()

    let api = try document.table("api")
    configuration.socketPath = try api.string("socket", default: configuration.socketPath)
    if configuration.socketPath.isEmpty { throw api.error("socket", "must not be empty") }
    // sockaddr_un holds 108 bytes with the terminating NUL.
    if configuration.socketPath.utf8.count > 107 {
      throw api.error("socket", "must be at most 107 bytes long")
    }
    let mode = try api.string("socket_mode", default: "0600")
    guard mode.count >= 3, mode.count <= 4, let value = UInt32(mode, radix: 8), value <= 0o777 else {
      throw api.error("socket_mode", "must be an octal mode such as \"0600\" (got \"\(mode)\")")
    }
    configuration.socketMode = value
    configuration.eventsKept = try api.int(
      "events_kept", default: configuration.eventsKept, range: 100...1_000_000)
    // The local API takes 256 connections: some must stay for requests.
    configuration.eventStreams = try api.int(
      "event_streams", default: configuration.eventStreams, range: 1...200)
    try api.rejectUnknownKeys()

    let offline = try document.table("offline")
    configuration.databaseRowLimit = try offline.int(
      "database_row_limit", default: configuration.databaseRowLimit, range: 0...10_000)
    configuration.recentLimit = try offline.int(
      "recent_limit", default: configuration.recentLimit, range: 0...10_000)
    try offline.rejectUnknownKeys()

    let sync = try document.table("sync")
    configuration.backoffBase = UInt64(
      try sync.int("backoff_base_ms", default: Int(configuration.backoffBase), range: 1...3_600_000))
    configuration.backoffCap = UInt64(
      try sync.int("backoff_cap_ms", default: Int(configuration.backoffCap), range: 1...86_400_000))
    if configuration.backoffCap < configuration.backoffBase {
      throw sync.error("backoff_cap_ms", "must not be below backoff_base_ms (\(configuration.backoffBase))")
    }
    configuration.backoffReset = UInt64(
      try sync.int("backoff_reset_ms", default: Int(configuration.backoffReset), range: 0...86_400_000))
    configuration.heartbeatSeconds = try sync.int(
      "heartbeat_interval", default: configuration.heartbeatSeconds, range: 1...3600)
    configuration.fetchBatch = try sync.int("fetch_batch", default: configuration.fetchBatch, range: 1...1000)
    configuration.pushBatch = try sync.int(
      "push_batch", default: configuration.pushBatch, range: 1...1_000_000)
    configuration.requestTimeoutSeconds = try sync.int(
      "request_timeout", default: configuration.requestTimeoutSeconds, range: 1...3600)
    configuration.clockAheadSeconds = try sync.int(
      "clock_ahead_seconds", default: configuration.clockAheadSeconds, range: 1...315_360_000)
    try sync.rejectUnknownKeys()

    let log = try document.table("log")
    configuration.logLevel = try log.choice(
      "level", default: "info", from: ["trace", "debug", "info", "notice", "warning", "error", "critical"])
    try log.rejectUnknownKeys()

    try document.rejectUnknownKeys()
    return configuration
  }

  /// `[broker] url`: one URL or an array of 1 to `BrokerFailover.maxBrokers` distinct ones, each `http://` or
  /// `https://`; an error names the element (`url[2]`) of an array.
  private static func parseBrokerURLs(
    _ broker: ConfigTable, default fallback: HTTPURL
  ) throws(ConfigError) -> [HTTPURL] {
    let (texts, isArray) = try broker.stringOrArray("url", default: fallback.description)
    if texts.isEmpty { throw broker.error("url", "must list at least one broker URL") }
    if texts.count > BrokerFailover.maxBrokers {
      throw broker.error(
        "url", "must list at most \(BrokerFailover.maxBrokers) broker URLs (this file lists \(texts.count))")
    }
    var urls: [HTTPURL] = []
    for (index, text) in texts.enumerated() {
      let name = isArray ? "url[\(index)]" : "url"
      let url: HTTPURL
      do {
        url = try HTTPURL(parsing: text)
      } catch {
        throw broker.error("url", isArray ? "\(name): \(error.reason)" : error.reason)
      }
      if url.scheme != "http" && url.scheme != "https" {
        throw broker.error(
          "url", isArray ? "\(name) must be an http:// or https:// URL" : "must be an http:// or https:// URL"
        )
      }
      if let first = urls.firstIndex(of: url) {
        throw broker.error("url", "\(name) repeats url[\(first)] (\(url))")
      }
      urls.append(url)
    }
    return urls
  }

  /// `[broker] token_file`, `token_command`, `token_command_timeout`, `token_max_bytes`: at most one of
  /// `token`, `token_file` and `token_command`.
  private static func parseTokenSource(
    _ broker: ConfigTable, into configuration: inout DaemonConfiguration
  ) throws(ConfigError) {
    let set = ["token", "token_file", "token_command"].filter { broker.contains($0) }
    if set.count > 1 {
      throw broker.error(
        set[1],
        "set only one of token, token_file and token_command (this file sets \(set.joined(separator: ", ")))")
    }
    if let file = try broker.optionalString("token_file") {
      if file.isEmpty { throw broker.error("token_file", "must not be empty") }
      configuration.tokenFile = file
    }
    if broker.contains("token_command") {
      let argv = try broker.stringArray("token_command", default: [])
      guard let program = argv.first, !program.isEmpty else {
        throw broker.error("token_command", "must name a program: [\"PROGRAM\", \"ARG\", …]")
      }
      configuration.tokenCommand = argv
    }
    configuration.tokenCommandTimeoutSeconds = try broker.int(
      "token_command_timeout", default: configuration.tokenCommandTimeoutSeconds, range: 1...600)
    configuration.tokenMaxBytes = try broker.int(
      "token_max_bytes", default: configuration.tokenMaxBytes, range: 64...1_048_576)
    if !configuration.token.isEmpty,
      let problem = BearerToken.problem(with: configuration.token, maxBytes: configuration.tokenMaxBytes)
    {
      throw broker.error("token", "is not a usable bearer token: \(problem)")
    }
  }

  /// Where the token comes from (`[broker] token`, `token_file` or `token_command`).
  public var tokenSource: TokenStateMachine.Source {
    if tokenFile != nil { return .file }
    if tokenCommand != nil { return .command }
    return .fixed(token)
  }

  /// The reconnect policy of `[sync]`.
  public var backoff: ReconnectBackoff {
    ReconnectBackoff(base: backoffBase, cap: backoffCap, resetAfter: backoffReset)
  }

  /// The bound of `[sync] clock_ahead_seconds`.
  public var clockBound: ClockBound {
    ClockBound(aheadMillis: UInt64(clockAheadSeconds) * 1000)
  }
}

extension DaemonConfiguration {
  /// What reloading from `self` to `new` does with each changed key (docs/operations.md, "Reloading").
  public func reloadPlan(to new: DaemonConfiguration) -> ReloadPlan {
    var plan = ReloadPlan()
    // The list is the failover's and the links' shape: a new one takes a restart (docs/operations.md).
    plan.restart("broker.url", brokerURLs, new.brokerURLs)
    plan.restart("broker.ca_file", caFile, new.caFile)
    plan.live("broker.token", token, new.token)
    plan.live("broker.token_file", tokenFile ?? "", new.tokenFile ?? "")
    plan.live("broker.token_command", tokenCommand ?? [], new.tokenCommand ?? [])
    plan.live("broker.token_command_timeout", tokenCommandTimeoutSeconds, new.tokenCommandTimeoutSeconds)
    plan.live("broker.token_max_bytes", tokenMaxBytes, new.tokenMaxBytes)
    plan.live("broker.workspace", workspace, new.workspace)
    plan.restart("store.path", storePath, new.storePath)
    plan.restart("store.cache_kib", storeCacheKiB, new.storeCacheKiB)
    plan.restart("api.socket", socketPath, new.socketPath)
    plan.restart("api.socket_mode", socketMode, new.socketMode)
    plan.restart("api.events_kept", eventsKept, new.eventsKept)
    plan.live("api.event_streams", eventStreams, new.eventStreams)
    plan.live("offline.database_row_limit", databaseRowLimit, new.databaseRowLimit)
    plan.live("offline.recent_limit", recentLimit, new.recentLimit)
    plan.live("sync.backoff_base_ms", backoffBase, new.backoffBase)
    plan.live("sync.backoff_cap_ms", backoffCap, new.backoffCap)
    plan.live("sync.backoff_reset_ms", backoffReset, new.backoffReset)
    plan.live("sync.heartbeat_interval", heartbeatSeconds, new.heartbeatSeconds)
    plan.live("sync.fetch_batch", fetchBatch, new.fetchBatch)
    plan.live("sync.push_batch", pushBatch, new.pushBatch)
    plan.live("sync.request_timeout", requestTimeoutSeconds, new.requestTimeoutSeconds)
    plan.live("sync.clock_ahead_seconds", clockAheadSeconds, new.clockAheadSeconds)
    plan.live("log.level", logLevel, new.logLevel)
    return plan
  }

  /// `new` with the keys that need a restart kept at their values in `self`: what a reload runs with.
  public func reloaded(from new: DaemonConfiguration) -> DaemonConfiguration {
    var next = new
    next.brokerURLs = brokerURLs
    next.caFile = caFile
    next.storePath = storePath
    next.storeCacheKiB = storeCacheKiB
    next.socketPath = socketPath
    next.socketMode = socketMode
    next.eventsKept = eventsKept
    return next
  }
}
