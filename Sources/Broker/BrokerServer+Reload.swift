import Logging
import TOMLConfig
import Web

extension BrokerServer {
  /// Takes over a new configuration (SIGHUP) without dropping a connection: the live keys apply at once (limits
  /// on the next request, frame and body limits and the ping interval on connections opened after), and the keys
  /// that need a restart keep their running values and are returned as such.
  ///
  /// Tokens: every device stream is authorized again under the new tokens. A stream whose token is gone is closed
  /// (1008, "token revoked"); one whose workspaces were narrowed stops being notified of the others at once and
  /// loses its subscriptions to their pages (`revoked`).
  @discardableResult
  public func reload(_ new: BrokerConfiguration) -> ReloadPlan {
    let plan = configuration.reloadPlan(to: new)
    let old = configuration
    configuration = old.reloaded(from: new)
    logger.logLevel = Logger.Level(rawValue: configuration.logLevel) ?? .info
    reloadTLS(old)
    http.configuration.maxConnections = configuration.limits.connections
    http.configuration.maxConnectionsPerPeer = configuration.limits.connectionsPerPeer
    Self.applyConnectionLimits(configuration.limits, to: &http.configuration)
    http.configuration.limits = HTTPParserLimits(
      maxHeaderBytes: http.configuration.limits.maxHeaderBytes, maxBodyBytes: configuration.limits.bodyBytes)
    if old.limits.frameBytes != configuration.limits.frameBytes
      || old.pingIntervalSeconds != configuration.pingIntervalSeconds
      || old.limits.queuedBytesPerConnection != configuration.limits.queuedBytesPerConnection
      || old.limits.frameSeconds != configuration.limits.frameSeconds
      || old.limits.writeStallSeconds != configuration.limits.writeStallSeconds
    {
      addStreamRoute(http.router)
    }
    if old.limits.batchMutations != configuration.limits.batchMutations
      || old.limits.clockAheadSeconds != configuration.limits.clockAheadSeconds
      || old.limits.mutationDigestsPerClient != configuration.limits.mutationDigestsPerClient
      || old.limits.textOpsPerMutation != configuration.limits.textOpsPerMutation
      || old.limits.textCharactersPerBlock != configuration.limits.textCharactersPerBlock
      || old.limits.pageBytes != configuration.limits.pageBytes
      || old.limits.treeDepth != configuration.limits.treeDepth
      || old.limits.batchWork != configuration.limits.batchWork
    {
      let box = storeBox
      let limit = configuration.limits.batchMutations
      let ahead = UInt64(configuration.limits.clockAheadSeconds) * 1000
      let digests = UInt64(configuration.limits.mutationDigestsPerClient)
      let textOps = configuration.limits.textOpsPerMutation
      let textCharacters = configuration.limits.textCharactersPerBlock
      let pageBytes = configuration.limits.pageBytes
      let treeDepth = configuration.limits.treeDepth
      let batchWork = configuration.limits.batchWork
      writer.submit(
        on: loop,
        { _ in
          box.store.maxMutationsPerBatch = limit
          box.store.maxClockAheadMillis = ahead
          box.store.digestsPerClient = digests
          box.store.limits.maxTextOps = textOps
          box.store.limits.maxTextCharacters = textCharacters
          box.store.limits.maxPageBytes = pageBytes
          box.store.maxTreeDepth = treeDepth
          box.store.maxBatchWork = batchWork
        }, completion: { (_: Result<Void, Error>) in })
    }
    if old.tokens != configuration.tokens || old.jwt != configuration.jwt
      || old.limits.tokenBytes != configuration.limits.tokenBytes
      || old.limits.jwtCacheEntries != configuration.limits.jwtCacheEntries
    {
      let previous = authenticator
      authenticator = Authenticator(
        tokens: configuration.tokens, jwt: configuration.jwt, limits: configuration.limits)
      // Verified JWTs stay verified unless a JWT setting changed (keys, policies, the cache's size).
      if old.jwt == configuration.jwt && old.limits.tokenBytes == configuration.limits.tokenBytes
        && old.limits.jwtCacheEntries == configuration.limits.jwtCacheEntries
      {
        authenticator.keepVerifiedTokens(of: previous)
      }
      authorizeStreamsAgain()
    }
    return plan
  }

  /// Reads `[server.tls]`'s pair again (a renewed certificate under the same names, or new names): new
  /// connections get it, open ones keep the session they have, and resumption tickets stay valid (the ticket
  /// keys carry over). A pair that cannot be read is logged with the file it names, and the running one stays.
  private func reloadTLS(_ old: BrokerConfiguration) {
    guard let running = tls, configuration.tlsCertificateFile != nil else { return }
    do {
      tls = try configuration.makeTLSContext(reusingTicketKeysOf: running)
      http.tls = tls
      logger.info(
        "TLS certificate read again",
        metadata: [
          "file": "\(configuration.tlsCertificateFile ?? "")", "key": "\(configuration.tlsKeyFile ?? "")",
        ])
    } catch {
      configuration.tlsCertificateFile = old.tlsCertificateFile
      configuration.tlsKeyFile = old.tlsKeyFile
      logger.error(
        "TLS certificate not reloaded: the running one stays", metadata: ["error": "\(error.message)"])
    }
  }

  private func authorizeStreamsAgain() {
    for case let session? in sessions {
      let result = session.socket.request.map { authenticator.authenticate($0.head) }
      if case .failure(let refusal)? = result, refusal.jwt == .expired {
        session.close(.tokenExpired)
        continue
      }
      guard case .success(let grant)? = result else {
        // Nothing more reaches it from now on, whatever the close handshake takes.
        session.grant.workspaces = []
        _ = withFanOut { $0.removeAllSubscriptions(of: session.id) }
        recountSubscriptions(of: session)
        session.close(.tokenRevoked)
        logger.notice(
          "stream closed: token revoked", metadata: ["broker.connection.id": "\(session.connection)"])
        continue
      }
      let narrowed = !grant.workspaces.isSuperset(of: session.grant.workspaces)
      session.grant = grant
      scheduleExpiry(of: session)
      withFanOut { $0.setWorkspaces(grant.workspaceIDs, of: session.id) }
      if narrowed { withdrawInaccessible(session) }
    }
    for case let session? in sessions { holdBusWorkspaces(of: session) }
  }
}
