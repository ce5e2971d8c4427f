extension BrokerConfiguration {
  /// Every key of the configuration with its value as the file would write it, for the status page
  /// (`GET /status`), which anyone who reaches the port may read: no token appears, nor which users and
  /// workspaces the tokens stand for (as `/metrics`, the page names none); `auth.tokens` says only how many.
  ///
  /// One line per key of config/pagesync-broker.toml, in its order (`BrokerStatusPageTests` checks that none is
  /// missing).
  /// `[[auth.jwt]]` as the status page shows it: how many issuers and their algorithms; no key, file, issuer
  /// or audience.
  var jwtDisplay: String {
    guard !jwt.isEmpty else { return "none" }
    let algorithms = jwt.map { $0.policy.algorithms.map(\.rawValue).sorted().joined(separator: ", ") }
    return "\(jwt.count) \(jwt.count == 1 ? "issuer" : "issuers") (" + algorithms.joined(separator: "; ")
      + ")"
  }

  public var displayedKeys: [(key: String, value: String)] {
    func quoted(_ text: String) -> String { "\"\(text)\"" }
    let users = Set(tokens.map(\.user)).count
    let auth =
      tokens.isEmpty
      ? "none: loopback only, every request as user local"
      : "\(tokens.count) \(tokens.count == 1 ? "token" : "tokens") for \(users) "
        + "\(users == 1 ? "user" : "users") (tokens, users and workspaces not shown)"
    return [
      ("server.listen", quoted(listen.description)),
      ("server.tls.cert", tlsCertificateFile.map(quoted) ?? "none (plain HTTP)"),
      ("server.tls.key", tlsKeyFile.map(quoted) ?? "none"),
      // `[store] url` is shown here, in place of the path it replaces (the sample file comments it out).
      (
        "store.path",
        storeURL.map { "none: PostgreSQL, url = \(quoted(Self.withoutPassword($0)))" } ?? quoted(storePath)
      ),
      ("store.synchronous", quoted(synchronous)),
      ("store.log_retention", "\(logRetention)"),
      ("store.readers", "\(readers)"),
      ("store.writer_cache_rows", "\(writerCacheRows)"),
      ("store.checkpointer", "\(checkpointer)"),
      ("store.checkpoint_pages", "\(checkpointPages)"),
      ("auth.tokens", auth),
      ("auth.jwt", jwtDisplay),
      ("limits.connections", "\(limits.connections)"),
      ("limits.connections_per_peer", "\(limits.connectionsPerPeer)"),
      ("limits.subscriptions_per_connection", "\(limits.subscriptionsPerConnection)"),
      ("limits.subscriptions_per_user", "\(limits.subscriptionsPerUser)"),
      ("limits.frame_bytes", "\(limits.frameBytes)"),
      ("limits.body_bytes", "\(limits.bodyBytes)"),
      ("limits.batch_mutations", "\(limits.batchMutations)"),
      ("limits.pending_bytes_per_connection", "\(limits.pendingBytesPerConnection)"),
      ("limits.queued_bytes_per_connection", "\(limits.queuedBytesPerConnection)"),
      ("limits.request_seconds", "\(limits.requestSeconds)"),
      ("limits.frame_seconds", "\(limits.frameSeconds)"),
      ("limits.write_stall_seconds", "\(limits.writeStallSeconds)"),
      ("limits.clock_ahead_seconds", "\(limits.clockAheadSeconds)"),
      ("limits.mutation_digests_per_client", "\(limits.mutationDigestsPerClient)"),
      ("limits.text_ops_per_mutation", "\(limits.textOpsPerMutation)"),
      ("limits.text_characters_per_block", "\(limits.textCharactersPerBlock)"),
      ("limits.page_bytes", "\(limits.pageBytes)"),
      ("limits.answer_bytes", "\(limits.answerBytes)"),
      ("limits.tree_depth", "\(limits.treeDepth)"),
      ("limits.batch_work", "\(limits.batchWork)"),
      ("limits.token_bytes", "\(limits.tokenBytes)"),
      ("limits.jwt_cache_entries", "\(limits.jwtCacheEntries)"),
      ("log.level", quoted(logLevel)),
      ("stream.ping_interval", "\(pingIntervalSeconds)"),
    ] + busDisplay
  }

  /// `[bus]`'s keys when there is a bus (the sample file shows them as an example, indented: they have no default
  /// without the table).
  private var busDisplay: [(key: String, value: String)] {
    guard let bus else { return [] }
    return [
      ("bus.url", "\"redis://\(bus.address)\""),
      ("bus.buffer_bytes", "\(bus.bufferBytes)"),
      ("bus.message_bytes", "\(bus.messageBytes)"),
      ("bus.backoff_base_ms", "\(bus.backoffBase)"),
      ("bus.backoff_cap_ms", "\(bus.backoffCap)"),
      ("bus.backoff_reset_ms", "\(bus.backoffReset)"),
      ("bus.connect_timeout_ms", "\(bus.connectTimeout)"),
      ("bus.ping_interval_ms", "\(bus.pingInterval)"),
    ]
  }
}

extension BrokerConfiguration {
  /// A store URL as shown (in `--check-config`, logs): a password in it (`user:secret@`) replaced by `***`.
  public static func withoutPassword(_ url: String) -> String {
    let bytes = Array(url.utf8)
    guard let scheme = bytes.firstIndex(of: UInt8(ascii: "/")), scheme + 1 < bytes.count,
      bytes[scheme + 1] == UInt8(ascii: "/"),
      let at = bytes[(scheme + 2)...].firstIndex(of: UInt8(ascii: "@")),
      let colon = bytes[(scheme + 2)..<at].firstIndex(of: UInt8(ascii: ":"))
    else { return url }
    return String(decoding: bytes[..<colon], as: UTF8.self) + ":***"
      + String(decoding: bytes[at...], as: UTF8.self)
  }
}
