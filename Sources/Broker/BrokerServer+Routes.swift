import BrokerCore
import BrokerStore
import ByteBuffers
import FoundationEssentials
import SQLiteStore
import SyncModel
import SyncProtocol
import Web

extension BrokerServer {
  func addRoutes(_ router: HTTPRouter) {
    router.add(.GET, "/healthz") { [unowned self] _, responder in self.health(responder) }
    // No token: counts and timings only, no page data (docs/operations.md, "Metrics").
    router.add(.GET, "/metrics") { [unowned self] _, responder in
      let body = self.metrics.exposition(self.metricsFigures)
      responder.respond(
        HTTPResponse(
          status: .ok, headers: ["Content-Type": BrokerMetrics.contentType], body: ByteBuffer(bytes: body)))
    }
    // The same rule as /metrics: the same figures, for people (docs/operations.md, "Status page").
    router.add(.GET, "/status") { [unowned self] _, responder in responder.respond(self.statusResponse()) }
    router.add(.POST, "/v1/batch") { [unowned self] request, responder in
      self.authorized(request, responder) { grant in
        self.pushBatch(request, grant, responder, mustPullAfter: nil)
      }
    }
    router.add(.POST, "/v1/catchup") { [unowned self] request, responder in
      self.authorized(request, responder) { grant in self.catchUp(request, grant, responder) }
    }
    router.add(.POST, "/v1/fetch") { [unowned self] request, responder in
      self.authorized(request, responder) { grant in self.fetch(request, grant, responder) }
    }
    router.add(.GET, "/v1/pages/*") { [unowned self] request, responder in
      self.authorized(request, responder) { grant in self.page(request, grant, responder) }
    }
    router.add(.GET, "/v1/sync") { [unowned self] request, responder in
      self.authorized(request, responder) { grant in self.syncPull(request, grant, responder) }
    }
    router.add(.POST, "/v1/sync") { [unowned self] request, responder in
      self.authorized(request, responder) { grant in
        guard let text = request.head.queryValue("lastMutationAt"), let since = UInt64(text) else {
          responder.respond(
            HTTPResponseError(.badRequest, "lastMutationAt must be a sequence number").response)
          return
        }
        self.pushBatch(request, grant, responder, mustPullAfter: since)
      }
    }
    addStreamRoute(router)
  }

  /// The device stream's route, with the limits of the current configuration (registered again on reload, so
  /// streams opened after it get the new limits).
  func addStreamRoute(_ router: HTTPRouter) {
    var stream = WebSocketConfiguration()
    stream.maxFramePayload = configuration.limits.frameBytes
    stream.maxMessageSize = configuration.limits.frameBytes
    stream.pingInterval = UInt64(configuration.pingIntervalSeconds) * 1000
    stream.pongTimeout = UInt64(configuration.pingIntervalSeconds) * 1000
    stream.maxQueuedBytes = configuration.limits.queuedBytesPerConnection
    stream.messageTimeout = UInt64(configuration.limits.frameSeconds) * 1000
    stream.messageTimeoutReason = BrokerProtocol.StreamCloseReason.frameTimeout.reason
    stream.writeStallTimeout = UInt64(configuration.limits.writeStallSeconds) * 1000
    router.webSocket(
      "/v1/stream",
      WebSocketRoute(
        configuration: stream,
        shouldAccept: { [unowned self] request in
          if self.isStopping {
            let reason = BrokerProtocol.StreamCloseReason.shuttingDown.reason
            return .reject(HTTPResponseError(.serviceUnavailable, reason).response)
          }
          switch self.authenticator.authenticate(request.head) {
          case .success: return .accept()
          case .failure(let refusal):
            self.metrics.authRefused(refusal.reason)
            return .reject(refusal.response)
          }
        },
        onOpen: { [unowned self] socket in self.openStream(socket) }))
  }

  var isStopping: Bool { stopping }

  /// Runs `body` with the request's grant, or answers 401.
  func authorized(_ request: HTTPRequest, _ responder: HTTPResponder, _ body: (Grant) -> Void) {
    switch authenticator.authenticate(request.head) {
    case .success(let grant): body(grant)
    case .failure(let refusal):
      metrics.authRefused(refusal.reason)
      responder.respond(refusal.response)
    }
  }

  /// The store read on a connection of its own (`StoreHealthCheck`), never through the writer's queue, where a
  /// read splits a group commit; 503 when that read fails or the writer's last transaction failed.
  private func health(_ responder: HTTPResponder) {
    healthCheck.check { [unowned self] result in
      switch result {
      case .success(let sequence):
        if let failure = self.writer.lastTransactionFailure {
          responder.respond(
            HTTPResponseError(.serviceUnavailable, "store not writable: the last commit failed: \(failure)")
              .response)
        } else {
          responder.respond(
            self.jsonResponse(BrokerProtocol.Health(status: "ok", epoch: self.epoch, sequence: sequence)))
        }
      case .failure(let error):
        responder.respond(HTTPResponseError(.serviceUnavailable, "store unavailable: \(error)").response)
      }
    }
  }

  // MARK: Writes

  /// Applies a batch on the writer thread and answers only after its group committed; then notifies.
  /// `mustPullAfter`: the seed guide's `lastMutationAt` — 409 if a page the client may see changed since.
  private func pushBatch(
    _ request: HTTPRequest, _ grant: Grant, _ responder: HTTPResponder, mustPullAfter: UInt64?
  ) {
    guard let batch = decodeBody(MutationBatch.self, request, orAnswer: responder) else { return }
    guard batch.mutations.count <= configuration.limits.batchMutations else {
      responder.respond(
        HTTPResponseError(
          .payloadTooLarge, "a batch may carry at most \(configuration.limits.batchMutations) mutations"
        )
        .response)
      return
    }
    let box = storeBox
    let now = UInt64(Date().timeIntervalSince1970 * 1000)
    let submitted = ContinuousClock.now
    writer.submit(
      on: loop,
      { _ -> Result<BatchOutcome, PushRefusal> in
        if let since = mustPullAfter {
          let newer = try box.store.pagesChanged(
            after: since, workspaces: grant.workspaces, offset: 0, limit: 1)
          if !newer.pages.isEmpty { return .failure(.mustPull(latest: box.store.syncCursor)) }
        }
        do {
          return .success(
            try box.store.apply(batch, user: grant.user, workspaces: grant.workspaces, nowMillis: now))
        } catch let error as BatchError {
          return .failure(.batch(error))
        }
      },
      timedCompletion: { [unowned self] result, timings in
        if case .success = result {
          self.metrics.batchCommitted(after: ContinuousClock.now - submitted)
          // The same batches as the line above: every one whose job ran to its end in a committed group.
          if let timings { self.metrics.writerPhases(timings) }
        }
        switch result {
        case .success(.success(let outcome)):
          self.batchesApplied += 1
          self.countMutations(outcome)
          // Only times the store accepted: a rejected one (`clock_ahead` above all) must not move the clock. The
          // results are the batch's mutations' in order, the first ones if the work budget left the rest.
          var newestApplied: HLCTimestamp?
          for (mutation, result) in zip(batch.mutations, outcome.results)
          where result.status == .applied && result.mutationId == mutation.id {
            newestApplied = max(newestApplied ?? mutation.time, mutation.time)
          }
          if let newest = newestApplied {
            self.clock.observe(newest, physicalMillis: UInt64(Date().timeIntervalSince1970 * 1000))
          }
          responder.respond(self.jsonResponse(outcome))
          // Out now: queueing the notifications below to every subscriber takes longer than writing the answer,
          // and the writer waits for this answer, not for them (docs/benchmarks.md, "B1 at low rates").
          responder.flush()
          // Only what this batch changed: a re-sent batch names pages at their current time but changed nothing.
          if let sequence = outcome.sequence {
            self.publishedSequence = max(self.publishedSequence, sequence)
            self.publish(
              outcome.pages.filter { $0.value == sequence }, workspaces: outcome.workspaces,
              sequence: sequence)
          }
        case .success(.failure(let refusal)):
          responder.respond(refusal.response)
        case .failure(let error):
          self.logger.error(
            "batch failed", metadata: ["broker.client": "\(batch.client)", "error": "\(error)"])
          // A store that cannot be reached (PostgreSQL restarting) committed nothing: try again later.
          let status: HTTPStatus =
            error is any StoreUnavailableError ? .serviceUnavailable : .internalServerError
          responder.respond(HTTPResponseError(status, "the batch could not be stored: \(error)").response)
        }
      })
  }

  private func countMutations(_ outcome: BatchOutcome) {
    var applied = 0
    var duplicates = 0
    var rejected: [RejectionReason] = []
    for result in outcome.results {
      switch result.status {
      case .applied: applied += 1
      case .duplicate: duplicates += 1
      case .rejected: rejected.append(result.reason ?? RejectionReason(code: 0, name: "unknown"))
      }
    }
    metrics.mutations(applied: applied, duplicates: duplicates, rejected: rejected)
  }

  // MARK: Reads

  private func catchUp(_ request: HTTPRequest, _ grant: Grant, _ responder: HTTPResponder) {
    metrics.catchUpRequested()
    // With a bus between brokers, commits of other brokers may be missing from the index (RedisBus.indexIsCurrent):
    // the store.
    guard bus.indexIsCurrent, let indexed = withChannels({ IndexedCatchUp.read(request, $0) }) else {
      // A page nobody follows (or an id the fast reader leaves to the decoder, or a bad body): the store.
      catchUpFromStore(request, grant, responder)
      return
    }
    // The index holds every page's newest time once each commit before this request has been published: a job
    // on the writer thread runs after those commits, and its completion reaches the loop after theirs.
    writer.read(
      on: loop, { _ in () },
      completion: { [unowned self] _ in
        if let answer = self.catchUpFromIndex(indexed, grant) {
          self.catchUpsFromIndex += 1
          // A large answer (a device's whole offline set changed, another epoch) is encoded off the loop.
          if answer.changed.count + answer.gone.count > Self.pagesEncodedOnTheLoop {
            self.readPages(
              { reader in ByteBuffer(bytes: try reader.encoder.encode(answer)) },
              completion: { [unowned self] result in self.answer(result, responder) })
          } else {
            responder.respond(self.jsonResponse(answer))
          }
        } else {
          // A page lost its last subscriber meanwhile, and its key may stand for another page now.
          self.catchUpFromStore(request, grant, responder)
        }
      })
  }

  /// The most pages a catch-up answered from the index is encoded with on the loop thread (~1 ms of work).
  static let pagesEncodedOnTheLoop = 4096

  /// A catch-up answered from what the channel index knows of each page, or nil if a key was released since the
  /// body was read.
  private func catchUpFromIndex(_ indexed: IndexedCatchUp, _ grant: Grant) -> BrokerProtocol.CatchUpResponse?
  {
    let sameEpoch = indexed.epoch == nil || indexed.epoch == epoch
    return withChannels { channels -> BrokerProtocol.CatchUpResponse? in
      guard channels.keyReleases == indexed.keyReleases else { return nil }
      var changed: [EntityID: UInt64] = [:]
      var gone: [EntityID] = []
      var visibility = WorkspaceVisibility(workspaces: grant.workspaceIDs)
      for (key, time) in indexed.entries {
        guard let facts = channels.facts(of: key) else { return nil }
        let maySee = visibility.maySee(facts.workspace, in: channels)
        guard !maySee || !sameEpoch || facts.lastUpdated > time else { continue }
        // Few pages get here (the changed, the gone): making their ids is cheap.
        guard let page = try? EntityID(validating: channels.pageID(for: key)) else { return nil }
        if !maySee {
          gone.append(page)
        } else {
          changed[page] = facts.lastUpdated
        }
      }
      return BrokerProtocol.CatchUpResponse(
        epoch: epoch, epochChanged: !sameEpoch, sequence: publishedSequence, changed: changed,
        gone: gone.sorted())
    }
  }

  private func catchUpFromStore(_ request: HTTPRequest, _ grant: Grant, _ responder: HTTPResponder) {
    guard let body = decodeBody(BrokerProtocol.CatchUpRequest.self, request, orAnswer: responder) else {
      return
    }
    readPages(
      { reader in try reader.catchUpAnswer(body, workspaces: grant.workspaces) },
      completion: { [unowned self] result in self.answer(result, responder) })
  }

  /// `POST /v1/fetch`: at most `limit` pages (1 to 1000) and `[limits] answer_bytes` of them an answer, built on
  /// a reader thread (`PageAnswerWriter`); `nextCursor` continues.
  private func fetch(_ request: HTTPRequest, _ grant: Grant, _ responder: HTTPResponder) {
    metrics.fetchRequested()
    guard let body = decodeBody(BrokerProtocol.FetchRequest.self, request, orAnswer: responder) else {
      return
    }
    let limit = min(max(body.limit ?? 100, 1), 1000)
    let maxBytes = configuration.limits.answerBytes
    readPages(
      { reader in
        try reader.fetchAnswer(body, workspaces: grant.workspaces, limit: limit, maxBytes: maxBytes)
      },
      completion: { [unowned self] result in self.answer(result, responder) })
  }

  /// `GET /v1/pages/ID`: the whole page, built on a reader thread (`PageAnswerWriter`).
  private func page(_ request: HTTPRequest, _ grant: Grant, _ responder: HTTPResponder) {
    let text = String(request.path.dropFirst("/v1/pages/".count))
    guard let id = try? EntityID(validating: text) else {
      responder.respond(HTTPResponseError(.badRequest, "\"\(text.prefix(80))\" is not a page id").response)
      return
    }
    readPages(
      { reader in try reader.pageAnswer(id, workspaces: grant.workspaces) },
      completion: { [unowned self] result in
        switch result {
        case .success(let body?): responder.respond(self.jsonResponse(encoded: body))
        case .success(nil): responder.respond(HTTPResponseError(.notFound, "no page \(id)").response)
        case .failure(let error): responder.respond(self.readFailed(error, "the page could not be read"))
        }
      })
  }

  /// The seed guide's pull: pages changed after `mutationsSince`, `limit` per `page` (0-based; or from `offset`),
  /// oldest change first, at most `[limits] answer_bytes` of them; `nextOffset` continues.
  private func syncPull(_ request: HTTPRequest, _ grant: Grant, _ responder: HTTPResponder) {
    let head = request.head
    func number(_ name: String, _ fallback: Int, _ range: ClosedRange<Int>) -> Int? {
      guard let text = head.queryValue(name) else { return fallback }
      guard let value = Int(text), range.contains(value) else { return nil }
      return value
    }
    guard let since = number("mutationsSince", 0, 0...Int.max),
      let pageNumber = number("page", 0, 0...1_000_000),
      let limit = number("limit", 100, 1...1000),
      let offset = number("offset", pageNumber * limit, 0...1_000_000_000)
    else {
      responder.respond(
        HTTPResponseError(
          .badRequest, "mutationsSince, page, offset and limit must be numbers (limit 1 to 1000)"
        )
        .response)
      return
    }
    let maxBytes = configuration.limits.answerBytes
    if head.queryValue("metadataOnly") == "true" {
      readPages(
        { reader -> BrokerProtocol.SyncMetadata in
          let store = reader.store
          let found = try store.pagesChanged(
            after: UInt64(since), workspaces: grant.workspaces, offset: 0, limit: 1)
          return BrokerProtocol.SyncMetadata(
            hasChanges: !found.pages.isEmpty, latest: store.syncCursor, epoch: store.epoch)
        },
        completion: { [unowned self] result in
          switch result {
          case .success(let metadata): responder.respond(self.jsonResponse(metadata))
          case .failure(let error): responder.respond(self.readFailed(error, "the store could not be read"))
          }
        })
      return
    }
    readPages(
      { reader in
        try reader.syncPullAnswer(
          after: UInt64(since), workspaces: grant.workspaces, page: pageNumber, offset: offset, limit: limit,
          maxBytes: maxBytes)
      },
      completion: { [unowned self] result in self.answer(result, responder) })
  }

  /// An answer encoded off the loop, or the error that stopped it.
  private func answer(_ result: Result<ByteBuffer, any Error>, _ responder: HTTPResponder) {
    switch result {
    case .success(let body): responder.respond(jsonResponse(encoded: body))
    case .failure(let error): responder.respond(readFailed(error, "the store could not be read"))
    }
  }

  /// 503 when the readers are saturated or stopping (try again), else 500 (logged).
  private func readFailed(_ error: any Error, _ what: String) -> HTTPResponse {
    if let refusal = error as? SQLiteReaderPoolError {
      return HTTPResponseError(.serviceUnavailable, "\(what): \(refusal)").response
    }
    if error is any StoreUnavailableError {
      return HTTPResponseError(.serviceUnavailable, "\(what): \(error)").response
    }
    logger.error("read failed", metadata: ["error": "\(error)"])
    return HTTPResponseError(.internalServerError, "\(what): \(error)").response
  }
}

/// A batch refused whole, with its HTTP answer.
enum PushRefusal: Error, Sendable {
  case batch(BatchError)
  /// The seed guide's 409: pages changed after the client's `lastMutationAt`; it must pull first.
  case mustPull(latest: UInt64)

  var response: HTTPResponse {
    switch self {
    case .batch(let error):
      switch error {
      case .gap: HTTPResponseError(.conflict, error.description).response
      case .nonConsecutiveIDs: HTTPResponseError(.badRequest, error.description).response
      case .clientOfAnotherUser, .workspaceForbidden:
        HTTPResponseError(.forbidden, error.description).response
      case .tooManyMutations: HTTPResponseError(.payloadTooLarge, error.description).response
      }
    case .mustPull(let latest):
      HTTPResponseError(.conflict, "pages changed since lastMutationAt: pull first (latest is \(latest))")
        .response
    }
  }
}
