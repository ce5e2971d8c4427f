import ByteBuffers
import DaemonCore
import DaemonStore
import EventLoop
import Logging
import SyncModel
import SyncProtocol
import Web

/// The daemon's local API: HTTP+JSON on a Unix socket, for `pagesync` and any app on the device
/// (docs/protocol.md, "The daemon's local API"). Edits commit locally and return at once; reads come from the
/// local store, or through from the broker while connected. Loop thread only.
final class LocalAPI {
  let driver: SyncDriver
  let server: HTTPServer
  let json = JSONBodies()
  var logger: Logger { driver.logger }
  var store: LocalStore { driver.store }
  /// `POST /v1/sync` requests waiting for their outcome (LocalAPI+Sync.swift).
  var syncs: [SyncRequestID: PendingSync] = [:]
  var lastSyncID: UInt64 = 0
  /// How long `POST /v1/sync` may take before it answers 504, ms.
  let syncTimeout: UInt64
  /// `GET /v1/offline` answers waiting for their client to read what was written (`OfflineListStream`).
  private(set) var offlineListsWaiting = 0

  /// The default `syncTimeout`: two minutes.
  static let defaultSyncTimeout: UInt64 = 120_000

  init(driver: SyncDriver, syncTimeout: UInt64 = LocalAPI.defaultSyncTimeout) {
    self.driver = driver
    self.syncTimeout = syncTimeout
    let router = HTTPRouter()
    var configuration = HTTPServerConfiguration()
    configuration.limits.maxBodyBytes = 8 << 20
    configuration.maxConnections = 256
    // `pagesync sync` waits for the broker; the idle timeout must not cut it.
    configuration.idleTimeout = syncTimeout + 10_000
    server = HTTPServer(loop: driver.loop, configuration: configuration, router: router)
    server.onEvent = { [weak self] event in
      self?.logger.info("local API event", metadata: ["event": "\(event)"])
    }
    route(router)
    driver.onSyncAnswer = { [weak self] request, outcome in self?.syncAnswered(request, outcome) }
  }

  /// Listens on the configured Unix socket (a stale socket file is replaced).
  func listen() throws {
    try server.listen(
      on: .unix(path: driver.configuration.socketPath), unixSocketMode: driver.configuration.socketMode)
  }

  /// Stops accepting and answers waiting syncs 503.
  func close() {
    // The change streams first: an open stream is an answer never finished, which would hold its connection.
    driver.changes.close()
    // The server first: it then closes each connection once its answers are written. Answered first, a waiting
    // sync's connection had nothing pending and was closed at once, its 503 unsent.
    server.close()
    answerWaitingSyncs(HTTPResponseError(.serviceUnavailable, "the daemon is stopping"))
  }

  // MARK: Routes

  private func route(_ router: HTTPRouter) {
    add(router, .GET, "/v1/status") { [unowned self] _, responder in respond(responder) { try status() } }
    add(router, .POST, "/v1/pages") { [unowned self] request, responder in
      respond(responder, status: .created) { try create(request) }
    }
    for method in [HTTPMethod.GET, .PATCH, .DELETE, .POST, .PUT] {
      add(router, method, "/v1/pages/*") { [unowned self] request, responder in pages(request, responder) }
    }
    for method in [HTTPMethod.PATCH, .DELETE, .POST] {
      add(router, method, "/v1/blocks/*") { [unowned self] request, responder in
        respond(responder) { try block(request) }
      }
    }
    add(router, .GET, "/v1/offline") { [unowned self] _, responder in offlineList(responder) }
    for (path, reason) in [("/v1/offline/*", OfflineReason.toggled), ("/v1/favorites/*", .favorite)] {
      for method in [HTTPMethod.PUT, .DELETE] {
        add(router, method, path) { [unowned self] request, responder in
          changeReason(reason, request, responder)
        }
      }
    }
    add(router, .POST, "/v1/visits/*") { [unowned self] request, responder in
      changeReason(.recent, request, responder)
    }
    add(router, .GET, "/v1/why/*") { [unowned self] request, responder in
      respond(responder) {
        let page = try pageID(request.path.dropFirst("/v1/why/".count))
        return try store.reasons(for: page).map(ReasonJSON.init)
      }
    }
    add(router, .GET, "/v1/conflicts") { [unowned self] _, responder in
      respond(responder) { try store.conflicts().map(ConflictJSON.init) }
    }
    add(router, .POST, "/v1/sync") { [unowned self] _, responder in startSync(responder) }
    add(router, .PUT, "/v1/token") { [unowned self] request, responder in
      respond(responder) { try handToken(request) }
    }
    add(router, .DELETE, "/v1/token") { [unowned self] _, responder in
      respond(responder) {
        driver.withdrawToken()
        return TokenAnswer(tokenSource: driver.tokens.origin)
      }
    }
    add(router, .GET, "/v1/events") { [unowned self] request, responder in
      driver.changes.open(request, responder)
    }
  }

  /// `GET /v1/offline`: streamed (`Transfer-Encoding: chunked`), `OfflineListJSON.entriesPerChunk` entries a
  /// chunk, each read from the store as the client takes the chunks before (`OfflineListStream`). An error reading
  /// the first chunk's entries is an error answer as for any request.
  private func offlineList(_ responder: HTTPResponder) {
    let first: [OfflineEntry]
    do {
      first = try store.offlineListPage(after: nil, limit: OfflineListJSON.entriesPerChunk)
    } catch {
      return responder.respond(errorResponse(error))
    }
    responder.startStreaming(HTTPResponseHead(status: .ok, headers: ["Content-Type": "application/json"]))
    OfflineListStream(
      store: store, responder: responder,
      onChunk: { [weak self] in self?.driver.memoryMayBeReturned() },
      onWaiting: { [weak self] delta in self?.offlineListsWaiting += delta }
    ).write(first)
  }

  /// Adds a route whose requests also count as work (`SyncDriver.memoryMayBeReturned`): once the local API has
  /// been quiet for a second, what its requests touched goes back to the system with the rest, as after a fetch
  /// (`GET /v1/offline` of 10,000 pages writes a large answer, and runs code nothing else runs).
  private func add(
    _ router: HTTPRouter, _ method: HTTPMethod, _ pattern: String, _ handler: @escaping HTTPHandler
  ) {
    router.add(method, pattern) { [unowned self] request, responder in
      handler(request, responder)
      driver.memoryMayBeReturned()
    }
  }

  /// Answers with `body()`'s value as JSON, or with the error it throws.
  func respond(
    _ responder: HTTPResponder, status: HTTPStatus = .ok, _ body: () throws -> some Encodable
  ) {
    do {
      responder.respond(json.response(try body(), status: status))
    } catch {
      responder.respond(errorResponse(error))
    }
  }

  func errorResponse(_ error: any Error) -> HTTPResponse {
    switch error {
    case let error as HTTPResponseError:
      return error.response
    case let error as LocalStoreError:
      switch error {
      case .invalidMutation(let reason):
        return HTTPResponseError(.badRequest, "the edit breaks a rule: \(Self.explain(reason))").response
      case .pageExists(let page):
        return HTTPResponseError(.conflict, "page \(page) already exists").response
      case .blockExists(let block):
        // The client's mistake, as for a page (found by FuzzLocalAPI: it was a 500 "local store error").
        return HTTPResponseError(.conflict, "block \(block) already exists").response
      case .unknownBlock(let block):
        return HTTPResponseError(.notFound, "block \(block) is not stored on this device").response
      case .invalidTextEdit(let why):
        return HTTPResponseError(.badRequest, why).response
      case .textNotMergeable:
        return HTTPResponseError(.conflict, error.description).response
      default:
        logger.error("local store error", metadata: ["error": "\(error)"])
        return HTTPResponseError(.internalServerError, "local store error: \(error)").response
      }
    default:
      logger.error("local API error", metadata: ["error": "\(error)"])
      return HTTPResponseError(.internalServerError, "\(error)").response
    }
  }

  /// A rejection reason with what it means (docs/protocol.md, "Rejection reasons"): `too_large (4): ...`.
  static func explain(_ reason: RejectionReason) -> String {
    let meaning =
      switch reason {
      case .invalidValue:
        "an empty name, a bad block type, an edit with nothing to change, or a U+0000 (NUL) character in a "
          + "text, title, name or value"
      case .tooLarge:
        "a title over 1 KiB, a text or value over 64 KiB, a name over 128 bytes, a list over 256 items, "
          + "over 128 properties or 32 attributes"
      case .invalidParent: "a page cannot be its own parent"
      case .tooDeep:
        "a page more than the broker's [limits] tree_depth (1,000) pages below the top of its tree"
      default: "see docs/protocol.md, \"Rejection reasons\""
      }
    return "\(reason): \(meaning)"
  }

  // MARK: Status

  private func status() throws -> StatusJSON {
    let counts = try store.status()
    let bytes = driver.brokerBytes
    return StatusJSON(
      connected: driver.isConnected, state: "\(driver.machine.state)",
      pendingMutations: counts.pendingMutations,
      failedMutations: counts.failedMutations, offlinePages: counts.offlinePages,
      missingPages: counts.missingPages,
      lastSuccessfulSync: counts.lastSuccessfulSync, lastSyncAttempt: counts.lastSyncAttempt,
      fetchedPages: driver.fetchedPages, clientId: store.clientID.rawValue,
      workspace: driver.configuration.workspace.rawValue, broker: driver.brokerURL.description,
      lastError: driver.lastError, tokenSource: driver.tokens.origin, tokenProblem: driver.tokens.problem,
      counters: driver.counters, bytesReceived: bytes.received,
      bytesSent: bytes.sent)
  }

  // MARK: The token

  /// `PUT /v1/token {"token": "…"}`: an app on the device hands the daemon the token its user signed in with.
  /// Kept in memory only (never stored, never logged); it wins over `[broker]`'s until the broker refuses it.
  private func handToken(_ request: HTTPRequest) throws -> TokenAnswer {
    struct Body: Decodable { var token: String }
    let token = try json.decode(Body.self, request).get().token
    if let problem = BearerToken.problem(with: token, maxBytes: driver.configuration.tokenMaxBytes) {
      throw HTTPResponseError(.badRequest, "invalid token: \(problem)")
    }
    driver.hand(token: token)
    return TokenAnswer(tokenSource: driver.tokens.origin)
  }

  // MARK: The offline set

  /// Adds or removes a reason. A reason is added only for a page that may exist: while the broker is reachable,
  /// one it says this device may not see (never existed, another workspace's) is refused 404 with nothing
  /// recorded. Unreachable, the reason is taken as asked; if the broker later says the page is missing, it
  /// stays in the offline set marked `missing` until its reason is removed (SyncDriver+Missing.swift).
  private func changeReason(_ reason: OfflineReason, _ request: HTTPRequest, _ responder: HTTPResponder) {
    let prefix = reason == .toggled ? "/v1/offline/" : reason == .favorite ? "/v1/favorites/" : "/v1/visits/"
    let page: EntityID
    do {
      page = try pageID(request.path.dropFirst(prefix.count))
    } catch {
      return responder.respond(errorResponse(error))
    }
    guard request.method != .DELETE else {
      return respond(responder) {
        if !driver.offlineSet.hasReason(reason, origin: page) {
          let what = reason == .toggled ? "toggled offline" : "a favorite"
          throw HTTPResponseError(.notFound, "page \(page) is not \(what)")
        }
        return try addOrRemove(reason, page, add: false)
      }
    }
    driver.checkPageExists(page) { [weak self] existence in
      guard let self else { return }
      respond(responder) {
        if existence == .missing { throw HTTPResponseError(.notFound, "page \(page) not found") }
        return try addOrRemove(reason, page, add: true)
      }
    }
  }

  private func addOrRemove(_ reason: OfflineReason, _ page: EntityID, add: Bool) throws -> ReasonAnswer {
    try driver.changeReason(reason, origin: page, add: add)
    return ReasonAnswer(id: page.rawValue, offlinePages: driver.offlineSet.offlinePageCount)
  }
}

/// An id from a path or a body, or the 400 naming it.
func pageID(_ text: some StringProtocol, field: String = "id") throws -> EntityID {
  guard let id = try? EntityID(validating: String(text)) else {
    // At most 80 characters of it, as the broker does: the message names the id, it does not echo a flood.
    let shown = text.count > 80 ? "\(text.prefix(80))…" : String(text)
    throw HTTPResponseError(.badRequest, "invalid \(field) \"\(shown)\": ids are 1 to 64 of A-Z a-z 0-9 _ -")
  }
  return id
}

/// `GET /v1/offline` being written: a chunk of `OfflineListJSON.entriesPerChunk` entries, read from the store
/// (`LocalStore.offlineListPage`, the ids after the last one written), then the next as soon as the connection
/// holds less than `highWater` bytes the kernel has not taken. 10,000 entries written at once were all in the
/// connection's write queue (2.6 MB, more than the 1.5 MB answer: each chunk's buffer has room to spare) when
/// the client reads slower than the daemon writes; paced, at most `highWater` and a chunk.
///
/// Each chunk is read in a transaction of its own: entries are in id order and each once, each with the reasons
/// it had when read; a page that enters or leaves the set while the list is written may or may not be in it. A
/// store error after the first chunk cuts the answer short (the connection is closed without the last chunk: a
/// truncated answer, never a shorter list). Loop thread only.
final class OfflineListStream {
  /// Queued bytes above which the next chunk waits for the connection to drain.
  static let highWater = 64 << 10
  private let store: LocalStore
  private let responder: HTTPResponder
  private var json = OfflineListJSON.Writer()
  /// Called after each chunk written once the client has taken those before (work, for the memory's return).
  private let onChunk: () -> Void
  /// +1 when the stream starts waiting for the connection to drain, -1 when it stops (tests count them).
  private let onWaiting: (Int) -> Void
  private var waiting = false

  init(
    store: LocalStore, responder: HTTPResponder, onChunk: @escaping () -> Void,
    onWaiting: @escaping (Int) -> Void
  ) {
    self.store = store
    self.responder = responder
    self.onChunk = onChunk
    self.onWaiting = onWaiting
  }

  deinit {
    // The connection closed while the stream waited.
    if waiting { onWaiting(-1) }
  }

  /// Writes `entries` and, while the connection keeps up, the chunks after them; once it does not, goes on when
  /// it has drained.
  func write(_ entries: [OfflineEntry]) {
    var entries = entries
    while true {
      responder.writeChunk(json.chunk(entries))
      guard entries.count == OfflineListJSON.entriesPerChunk, let last = entries.last?.id else {
        responder.writeChunk(json.end())
        responder.finish()
        return
      }
      // The client went away: nothing more to read.
      guard responder.isAnswerWanted else { return }
      if responder.queuedBytes > Self.highWater {
        waiting = true
        onWaiting(1)
        responder.whenDrained { [self] in
          waiting = false
          onWaiting(-1)
          guard let next = try? store.offlineListPage(after: last, limit: OfflineListJSON.entriesPerChunk)
          else {
            return  // unfinished: the responder closes the connection
          }
          write(next)
          onChunk()
        }
        return
      }
      do {
        entries = try store.offlineListPage(after: last, limit: OfflineListJSON.entriesPerChunk)
      } catch {
        return
      }
    }
  }
}
