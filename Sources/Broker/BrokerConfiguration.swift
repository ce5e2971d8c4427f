import EventLoop
import SyncModel
import TOMLConfig
import Web

/// Everything `pagesync-broker` reads from its TOML file. Every key, with its default, is documented in
/// `config/pagesync-broker.toml`.
public struct BrokerConfiguration: Sendable, Equatable {
  /// `[server] listen`: where HTTP and WebSocket are served.
  public var listen = SocketAddress.inet(host: "127.0.0.1", port: 7700)
  /// `[server.tls] cert`, `key`: the certificate chain (PEM, the server's certificate first) and its private key;
  /// when set, `listen` speaks TLS only. Both files are read again on SIGHUP.
  public var tlsCertificateFile: String?
  public var tlsKeyFile: String?
  /// `[store] path`: the SQLite file.
  public var storePath = "var/broker.sqlite"
  /// `[store] url`: a PostgreSQL store (`postgres://USER@HOST:PORT/DB`, any URL libpq takes) instead of the
  /// SQLite file; nil for SQLite. The broker opens `readers + 2` connections to it (the writer, each reader
  /// thread, the health check).
  public var storeURL: String?
  /// `[store] synchronous`: `full` (each group commit survives power loss: the default) or `normal` (survives a
  /// crash of the process, not of the machine; several times faster).
  public var synchronous = "full"
  /// `[store] log_retention`: batches the change log keeps; deltas from older times become snapshots.
  public var logRetention = 100_000
  /// `[store] readers`: threads that read pages for answers, each with a read-only connection, so that big
  /// reads neither wait behind group commits nor hold them up; 0 reads on the writer thread.
  public var readers = 2
  /// `[store] writer_cache_rows`: page rows, client rows and property stamps, each, the SQLite writer keeps
  /// between batches (each a few hundred bytes) so that the next batch need not read them again; past it, that
  /// part starts over; 0 keeps none. PostgreSQL keeps none (other brokers write the same rows).
  public var writerCacheRows = 10_000
  /// `[store] checkpoint_pages`: WAL pages after which they are copied back into the SQLite file (a checkpoint);
  /// the writer does it itself past four times this, should the checkpointer fall behind.
  public var checkpointPages = 1000
  /// `[store] checkpointer`: checkpoints on a thread and connection of their own (true), or inside the writer's
  /// commits as SQLite does by default (false).
  public var checkpointer = true
  /// `[[auth.tokens]]`: who may do what. Empty means no authentication, allowed only on a loopback address.
  public var tokens: [TokenGrant] = []
  /// `[[auth.jwt]]`: issuers whose JSON Web Tokens are accepted (JWTConfiguration.swift).
  public var jwt: [JWTConfiguration] = []
  public var limits = BrokerLimits()
  /// `[log] level`.
  public var logLevel = "info"
  /// `[stream] ping_interval` seconds: a silent device is pinged after this, and dropped if still silent after
  /// as long again.
  public var pingIntervalSeconds = 30
  /// `[bus]`: Redis between brokers; nil (no `[bus]` table) for one broker (BusConfiguration.swift).
  public var bus: BusConfiguration?

  public init() {}

  /// The workspace every request may use when no tokens are configured.
  public static let defaultWorkspace = try! EntityID(validating: "default")
}

/// One bearer token: the user it stands for and the workspaces it may read and write.
public struct TokenGrant: Sendable, Equatable {
  public var token: String
  public var user: EntityID
  public var workspaces: Set<EntityID>

  public init(token: String, user: EntityID, workspaces: Set<EntityID>) {
    self.token = token
    self.user = user
    self.workspaces = workspaces
  }
}

/// `[limits]`: bounds that keep one client from taking the broker.
public struct BrokerLimits: Sendable, Equatable {
  /// Open connections (HTTP and WebSocket) at most.
  public var connections = 10_000
  /// Open connections from one IP address at most, so that one client cannot take every connection (checked
  /// at accept, before authentication). Devices behind one NAT share an address: raise it for them.
  public var connectionsPerPeer = 1_000
  /// Pages one WebSocket may be subscribed to.
  public var subscriptionsPerConnection = 100_000
  /// Pages the streams of one user (one token's user, however many connections) may be subscribed to together.
  public var subscriptionsPerUser = 1_000_000
  /// Largest WebSocket message (a 10,000-page subscription is about 400 KB).
  public var frameBytes = 4 << 20
  /// Largest HTTP request body.
  public var bodyBytes = 8 << 20
  /// Mutations in one batch.
  public var batchMutations = 1_000
  /// Bytes queued to one WebSocket before the broker stops writing to it and lets notifications coalesce.
  public var pendingBytesPerConnection = 256 * 1024
  /// Bytes queued to one connection (HTTP answers, a stream's answers to its frames) beyond which the broker stops
  /// reading it until the queue is written.
  public var queuedBytesPerConnection = 4 << 20
  /// Seconds a WebSocket frame (or fragmented message) may take from its first byte to its last (close 1008).
  public var frameSeconds = 30
  /// Seconds an HTTP request may take from its first byte to its last (408).
  public var requestSeconds = 10
  /// Seconds a connection's peer may take no byte of what is queued for it before it is dropped.
  public var writeStallSeconds = 60
  /// Seconds a mutation's time may be ahead of the broker's wall clock (`clock_ahead` beyond).
  public var clockAheadSeconds = 86_400
  /// Each client's newest mutation ids whose content digest is kept, to tell a re-send (`duplicate`) from an id
  /// that another copy of the device's store used for another mutation (`id_reused`). 0 records and checks none.
  public var mutationDigestsPerClient = 10_000
  /// Insert runs, deleted ranges and mark operations in one `splice_text` or `mark_text` (`too_large` beyond).
  public var textOpsPerMutation = 4096
  /// Characters one block's text may hold, deleted ones included (`too_large` beyond): a deleted character keeps
  /// its id, which a device offline for a long time may still refer to.
  public var textCharactersPerBlock = 1 << 20
  /// Bytes one page may hold as stored (`too_large` beyond; `PageStore+Size.swift` says what counts). 16 MiB: a
  /// page's answer (about 4/3 of it: its CRDT states go in base64) stays well under the 64 MiB the daemon accepts
  /// in one answer, and room for hundreds of full 64 KiB blocks or thousands of ordinary ones.
  public var pageBytes = 16 << 20
  /// Bytes of pages a fetch or pull answer carries before it stops and says where to continue (its first page
  /// goes whatever its size).
  public var answerBytes = 16 << 20
  /// Pages from a top-level page down to any page, both counted (`too_deep` beyond, on create and on move, the
  /// whole moved subtree counted). Every walk up a tree (the cycle check) stops there.
  public var treeDepth = 1_000
  /// Work one batch may do (`BrokerStore.BatchWork` units, about a microsecond each): a mutation that would take
  /// its batch past it waits for the client's next batch, so one batch holds the store's one writer thread for
  /// about this long at most.
  public var batchWork = 100_000
  /// Bytes a bearer token may have (a longer one is refused as `malformed` before any parsing).
  public var tokenBytes = 8192
  /// Verified JSON Web Tokens kept (by their SHA-256, until their `exp`) so that a reconnect costs a lookup; 0
  /// verifies every request.
  public var jwtCacheEntries = 100_000

  public init() {}
}

extension BrokerConfiguration {
  /// Parses and validates a configuration file's text. Errors name the file, line and key.
  public static func parse(_ text: String, file: String) throws(ConfigError) -> BrokerConfiguration {
    try parse(ConfigReader(text: text, file: file))
  }

  /// Validates a parsed configuration file. Errors name the file, line and key.
  public static func parse(_ reader: ConfigReader) throws(ConfigError) -> BrokerConfiguration {
    var configuration = BrokerConfiguration()
    let document = reader.document

    let server = try document.table("server")
    let listen = try server.string("listen", default: configuration.listen.description)
    do {
      configuration.listen = try SocketAddress(parsing: listen)
    } catch {
      throw server.error("listen", error.reason)
    }
    let tls = try server.table("tls")
    configuration.tlsCertificateFile = try tls.optionalString("cert")
    configuration.tlsKeyFile = try tls.optionalString("key")
    switch (configuration.tlsCertificateFile, configuration.tlsKeyFile) {
    case (nil, nil): break
    case (let cert?, let key?):
      if cert.isEmpty { throw tls.error("cert", "must not be empty") }
      if key.isEmpty { throw tls.error("key", "must not be empty") }
    case (nil, _): throw tls.error("cert", "is needed with key (the certificate chain, PEM)")
    case (_, nil): throw tls.error("key", "is needed with cert (the certificate's private key, PEM)")
    }
    try tls.rejectUnknownKeys()
    try server.rejectUnknownKeys()

    let store = try document.table("store")
    let path = try store.optionalString("path")
    configuration.storePath = path ?? configuration.storePath
    if configuration.storePath.isEmpty { throw store.error("path", "must not be empty") }
    if let url = try store.optionalString("url") {
      if path != nil {
        throw store.error(
          "url", "and [store] path are both set: path selects SQLite, url PostgreSQL; keep one")
      }
      guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") else {
        throw store.error("url", "must be a PostgreSQL URL: postgres://USER@HOST:PORT/DB")
      }
      configuration.storeURL = url
    }
    configuration.synchronous = try store.choice("synchronous", default: "full", from: ["full", "normal"])
    configuration.logRetention = try store.int(
      "log_retention", default: configuration.logRetention, range: 1...1_000_000_000)
    configuration.readers = try store.int("readers", default: configuration.readers, range: 0...64)
    configuration.writerCacheRows = try store.int(
      "writer_cache_rows", default: configuration.writerCacheRows, range: 0...10_000_000)
    configuration.checkpointPages = try store.int(
      "checkpoint_pages", default: configuration.checkpointPages, range: 100...1_000_000)
    configuration.checkpointer = try store.bool("checkpointer", default: configuration.checkpointer)
    try store.rejectUnknownKeys()

    let auth = try document.table("auth")
    var seen: Set<String> = []
    for entry in try auth.tables("tokens") {
      guard let token = try entry.optionalString("token") else { throw entry.error("token", "is required") }
      if token.utf8.count < 16 { throw entry.error("token", "must be at least 16 characters") }
      if !seen.insert(token).inserted { throw entry.error("token", "is listed twice") }
      guard let userText = try entry.optionalString("user") else { throw entry.error("user", "is required") }
      guard let user = try? EntityID(validating: userText) else {
        throw entry.error("user", "must be an id (1 to 64 of A-Z a-z 0-9 _ -)")
      }
      var workspaces: Set<EntityID> = []
      for name in try entry.stringArray("workspaces", default: []) {
        guard let workspace = try? EntityID(validating: name) else {
          throw entry.error("workspaces", "\"\(name)\" is not an id (1 to 64 of A-Z a-z 0-9 _ -)")
        }
        workspaces.insert(workspace)
      }
      try entry.rejectUnknownKeys()
      configuration.tokens.append(TokenGrant(token: token, user: user, workspaces: workspaces))
    }
    configuration.jwt = try parseJWT(auth)
    try auth.rejectUnknownKeys()

    let limits = try document.table("limits")
    configuration.limits.connections = try limits.int(
      "connections", default: configuration.limits.connections, range: 1...1_000_000)
    configuration.limits.connectionsPerPeer = try limits.int(
      "connections_per_peer", default: configuration.limits.connectionsPerPeer, range: 1...1_000_000)
    configuration.limits.subscriptionsPerConnection = try limits.int(
      "subscriptions_per_connection", default: configuration.limits.subscriptionsPerConnection,
      range: 1...10_000_000)
    configuration.limits.subscriptionsPerUser = try limits.int(
      "subscriptions_per_user", default: configuration.limits.subscriptionsPerUser, range: 1...100_000_000)
    configuration.limits.frameBytes = try limits.int(
      "frame_bytes", default: configuration.limits.frameBytes, range: 1024...(1 << 30))
    configuration.limits.bodyBytes = try limits.int(
      "body_bytes", default: configuration.limits.bodyBytes, range: 1024...(1 << 30))
    configuration.limits.batchMutations = try limits.int(
      "batch_mutations", default: configuration.limits.batchMutations, range: 1...1_000_000)
    configuration.limits.pendingBytesPerConnection = try limits.int(
      "pending_bytes_per_connection", default: configuration.limits.pendingBytesPerConnection,
      range: 1024...(1 << 30))
    configuration.limits.queuedBytesPerConnection = try limits.int(
      "queued_bytes_per_connection", default: configuration.limits.queuedBytesPerConnection,
      range: (64 << 10)...(1 << 30))
    configuration.limits.frameSeconds = try limits.int(
      "frame_seconds", default: configuration.limits.frameSeconds, range: 1...3600)
    configuration.limits.requestSeconds = try limits.int(
      "request_seconds", default: configuration.limits.requestSeconds, range: 1...3600)
    configuration.limits.writeStallSeconds = try limits.int(
      "write_stall_seconds", default: configuration.limits.writeStallSeconds, range: 1...3600)
    configuration.limits.clockAheadSeconds = try limits.int(
      "clock_ahead_seconds", default: configuration.limits.clockAheadSeconds, range: 1...315_360_000)
    configuration.limits.mutationDigestsPerClient = try limits.int(
      "mutation_digests_per_client", default: configuration.limits.mutationDigestsPerClient,
      range: 0...10_000_000)
    configuration.limits.textOpsPerMutation = try limits.int(
      "text_ops_per_mutation", default: configuration.limits.textOpsPerMutation, range: 1...1_000_000)
    configuration.limits.textCharactersPerBlock = try limits.int(
      "text_characters_per_block", default: configuration.limits.textCharactersPerBlock,
      range: 1024...(1 << 24))
    configuration.limits.pageBytes = try limits.int(
      "page_bytes", default: configuration.limits.pageBytes, range: (64 << 10)...(1 << 30))
    configuration.limits.answerBytes = try limits.int(
      "answer_bytes", default: configuration.limits.answerBytes, range: (64 << 10)...(1 << 30))
    configuration.limits.treeDepth = try limits.int(
      "tree_depth", default: configuration.limits.treeDepth, range: 2...100_000)
    configuration.limits.batchWork = try limits.int(
      "batch_work", default: configuration.limits.batchWork, range: 1_000...100_000_000)
    configuration.limits.tokenBytes = try limits.int(
      "token_bytes", default: configuration.limits.tokenBytes, range: 256...65_536)
    configuration.limits.jwtCacheEntries = try limits.int(
      "jwt_cache_entries", default: configuration.limits.jwtCacheEntries, range: 0...10_000_000)
    try limits.rejectUnknownKeys()

    let log = try document.table("log")
    configuration.logLevel = try log.choice(
      "level", default: "info", from: ["trace", "debug", "info", "notice", "warning", "error", "critical"])
    try log.rejectUnknownKeys()

    let stream = try document.table("stream")
    configuration.pingIntervalSeconds = try stream.int(
      "ping_interval", default: configuration.pingIntervalSeconds, range: 1...3600)
    try stream.rejectUnknownKeys()

    configuration.bus = try BusConfiguration.parse(document)

    try document.rejectUnknownKeys()

    if configuration.tokens.isEmpty && configuration.jwt.isEmpty && !configuration.listen.isLoopback {
      throw server.error(
        "listen",
        "\(configuration.listen) is not a loopback address: configure [[auth.tokens]] or [[auth.jwt]] to serve it"
      )
    }
    return configuration
  }
}

extension BrokerConfiguration {
  /// The TLS context of `[server.tls]`, read from its files now; nil without TLS.
  public func makeTLSContext(reusingTicketKeysOf previous: TLSServerContext?) throws(TLSError)
    -> TLSServerContext?
  {
    guard let tlsCertificateFile, let tlsKeyFile else { return nil }
    return try TLSServerContext(
      certificateFile: tlsCertificateFile, keyFile: tlsKeyFile, reusingTicketKeysOf: previous)
  }

  /// What reloading from `self` to `new` does with each changed key (docs/operations.md, "Reloading").
  public func reloadPlan(to new: BrokerConfiguration) -> ReloadPlan {
    var plan = ReloadPlan()
    plan.restart("server.listen", listen, new.listen)
    // TLS on or off changes what the listener speaks; a new pair (or the same files renewed) is read on reload.
    plan.restart("server.tls", tlsCertificateFile != nil, new.tlsCertificateFile != nil)
    plan.live("server.tls.cert", tlsCertificateFile, new.tlsCertificateFile)
    plan.live("server.tls.key", tlsKeyFile, new.tlsKeyFile)
    plan.restart("store.path", storePath, new.storePath)
    plan.restart("store.url", storeURL, new.storeURL)
    plan.restart("store.synchronous", synchronous, new.synchronous)
    plan.restart("store.readers", readers, new.readers)
    plan.restart("store.writer_cache_rows", writerCacheRows, new.writerCacheRows)
    plan.restart("store.checkpoint_pages", checkpointPages, new.checkpointPages)
    plan.restart("store.checkpointer", checkpointer, new.checkpointer)
    plan.live("store.log_retention", logRetention, new.logRetention)
    plan.live("auth.tokens", tokens, new.tokens)
    plan.live("auth.jwt", jwt, new.jwt)
    plan.live("limits.token_bytes", limits.tokenBytes, new.limits.tokenBytes)
    plan.live("limits.jwt_cache_entries", limits.jwtCacheEntries, new.limits.jwtCacheEntries)
    plan.live("limits.connections", limits.connections, new.limits.connections)
    plan.live("limits.connections_per_peer", limits.connectionsPerPeer, new.limits.connectionsPerPeer)
    plan.live("limits.clock_ahead_seconds", limits.clockAheadSeconds, new.limits.clockAheadSeconds)
    plan.live(
      "limits.mutation_digests_per_client", limits.mutationDigestsPerClient,
      new.limits.mutationDigestsPerClient)
    plan.live(
      "limits.subscriptions_per_connection", limits.subscriptionsPerConnection,
      new.limits.subscriptionsPerConnection)
    plan.live(
      "limits.subscriptions_per_user", limits.subscriptionsPerUser, new.limits.subscriptionsPerUser)
    plan.live("limits.frame_bytes", limits.frameBytes, new.limits.frameBytes)
    plan.live("limits.body_bytes", limits.bodyBytes, new.limits.bodyBytes)
    plan.live("limits.batch_mutations", limits.batchMutations, new.limits.batchMutations)
    plan.live("limits.text_ops_per_mutation", limits.textOpsPerMutation, new.limits.textOpsPerMutation)
    plan.live(
      "limits.text_characters_per_block", limits.textCharactersPerBlock, new.limits.textCharactersPerBlock)
    plan.live("limits.page_bytes", limits.pageBytes, new.limits.pageBytes)
    plan.live("limits.answer_bytes", limits.answerBytes, new.limits.answerBytes)
    plan.live("limits.tree_depth", limits.treeDepth, new.limits.treeDepth)
    plan.live("limits.batch_work", limits.batchWork, new.limits.batchWork)
    plan.live(
      "limits.pending_bytes_per_connection", limits.pendingBytesPerConnection,
      new.limits.pendingBytesPerConnection)
    plan.live(
      "limits.queued_bytes_per_connection", limits.queuedBytesPerConnection,
      new.limits.queuedBytesPerConnection)
    plan.live("limits.frame_seconds", limits.frameSeconds, new.limits.frameSeconds)
    plan.live("limits.request_seconds", limits.requestSeconds, new.limits.requestSeconds)
    plan.live("limits.write_stall_seconds", limits.writeStallSeconds, new.limits.writeStallSeconds)
    plan.live("log.level", logLevel, new.logLevel)
    plan.live("stream.ping_interval", pingIntervalSeconds, new.pingIntervalSeconds)
    plan.restart("bus", bus, new.bus)
    return plan
  }

  /// `new` with the keys that need a restart kept at their values in `self`: what a reload runs with.
  public func reloaded(from new: BrokerConfiguration) -> BrokerConfiguration {
    var next = new
    next.listen = listen
    if (tlsCertificateFile == nil) != (new.tlsCertificateFile == nil) {
      next.tlsCertificateFile = tlsCertificateFile
      next.tlsKeyFile = tlsKeyFile
    }
    next.storePath = storePath
    next.storeURL = storeURL
    next.synchronous = synchronous
    next.readers = readers
    next.writerCacheRows = writerCacheRows
    next.checkpointPages = checkpointPages
    next.checkpointer = checkpointer
    next.bus = bus
    return next
  }
}

extension SocketAddress {
  /// Whether only this machine can reach the address (127.0.0.0/8, ::1, localhost, a Unix socket).
  var isLoopback: Bool {
    switch self {
    case .unix: true
    case .inet(let host, _): host.hasPrefix("127.") || host == "::1" || host == "localhost"
    }
  }
}
