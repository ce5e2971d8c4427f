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
  private var logger: Logger { driver.logger }
  private var store: LocalStore { driver.store }
  /// `POST /v1/sync` requests in progress.
  private var syncs: [SyncRequest] = []

  /// How long `POST /v1/sync` may take before it answers 504.
  static let syncTimeout: UInt64 = 120_000

  init(driver: SyncDriver) {
    self.driver = driver
    let router = HTTPRouter()
    var configuration = HTTPServerConfiguration()
    configuration.limits.maxBodyBytes = 8 << 20
    configuration.maxConnections = 256
    // `pagesync sync` waits for the broker; the idle timeout must not cut it.
    configuration.idleTimeout = LocalAPI.syncTimeout + 10_000
    server = HTTPServer(loop: driver.loop, configuration: configuration, router: router)
    server.onEvent = { [weak self] event in
      self?.logger.info("local API event", metadata: ["event": "\(event)"])
    }
    route(router)
    driver.onProgress = { [weak self] in self?.advanceSyncs() }
  }

  /// Listens on the configured Unix socket (a stale socket file is replaced).
  func listen() throws {
    try server.listen(
      on: .unix(path: driver.configuration.socketPath), unixSocketMode: driver.configuration.socketMode)
  }

  /// Stops accepting and answers waiting syncs.
  func close() {
    for request in syncs {
      request.finish(.failure(HTTPResponseError(.serviceUnavailable, "the daemon is stopping")))
    }
    syncs = []
    server.close()
  }

  // MARK: Routes

  private func route(_ router: HTTPRouter) {
    router.add(.GET, "/v1/status") { [unowned self] _, responder in respond(responder) { try status() } }
    router.add(.POST, "/v1/pages") { [unowned self] request, responder in
      respond(responder, status: .created) { try create(request) }
    }
    for method in [HTTPMethod.GET, .PATCH, .DELETE, .POST, .PUT] {
      router.add(method, "/v1/pages/*") { [unowned self] request, responder in pages(request, responder) }
    }
    for method in [HTTPMethod.PATCH, .DELETE] {
      router.add(method, "/v1/blocks/*") { [unowned self] request, responder in
        respond(responder) { try block(request) }
      }
    }
    router.add(.GET, "/v1/offline") { [unowned self] _, responder in
      respond(responder) { try store.offlineList().map(OfflineEntryJSON.init) }
    }
    for (path, reason) in [("/v1/offline/*", OfflineReason.toggled), ("/v1/favorites/*", .favorite)] {
      for method in [HTTPMethod.PUT, .DELETE] {
        router.add(method, path) { [unowned self] request, responder in
          respond(responder) { try changeReason(reason, request) }
        }
      }
    }
    router.add(.POST, "/v1/visits/*") { [unowned self] request, responder in
      respond(responder) { try changeReason(.recent, request) }
    }
    router.add(.GET, "/v1/why/*") { [unowned self] request, responder in
      respond(responder) {
        let page = try pageID(request.path.dropFirst("/v1/why/".count))
        return try store.reasons(for: page).map(ReasonJSON.init)
      }
    }
    router.add(.GET, "/v1/conflicts") { [unowned self] _, responder in
      respond(responder) { try store.conflicts().map(ConflictJSON.init) }
    }
    router.add(.POST, "/v1/sync") { [unowned self] _, responder in startSync(responder) }
  }

  /// Answers with `body()`'s value as JSON, or with the error it throws.
  private func respond(
    _ responder: HTTPResponder, status: HTTPStatus = .ok, _ body: () throws -> some Encodable
  ) {
    do {
      responder.respond(json.response(try body(), status: status))
    } catch {
      responder.respond(errorResponse(error))
    }
  }

  private func errorResponse(_ error: any Error) -> HTTPResponse {
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
      case .invalidValue: "an empty name, a bad block type, or an edit with nothing to change"
      case .tooLarge:
        "a title over 1 KiB, a text or value over 64 KiB, a name over 128 bytes, a list over 256 items, "
          + "over 128 properties or 32 attributes"
      case .invalidParent: "a page cannot be its own parent"
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
      lastSuccessfulSync: counts.lastSuccessfulSync, lastSyncAttempt: counts.lastSyncAttempt,
      fetchedPages: driver.fetchedPages, clientId: store.clientID.rawValue,
      workspace: driver.configuration.workspace.rawValue, broker: driver.configuration.brokerURL.description,
      lastError: driver.lastError, counters: driver.counters, bytesReceived: bytes.received,
      bytesSent: bytes.sent)
  }

  // MARK: Edits

  private struct CreateBody: Decodable {
    var kind: String
    var id: String
    var parent: String?
    var database: String?
    var title: String?
    var properties: [String: PropertyValue]?
  }

  private func create(_ request: HTTPRequest) throws -> EditAnswer {
    let body = try json.decode(CreateBody.self, request).get()
    let page = try pageID(body.id, field: "id")
    let parent = try body.parent.map { try pageID($0, field: "parent") }
    let action: MutationAction
    switch body.kind {
    case "page": action = .createPage(parent: parent, title: body.title ?? "")
    case "database": action = .createDatabase(parent: parent, title: body.title ?? "")
    case "row":
      guard let name = body.database else {
        throw HTTPResponseError(.badRequest, "a row needs \"database\"")
      }
      let database = try pageID(name, field: "database")
      try requireAvailable(database)
      action = .createRow(database: database, title: body.title ?? "", properties: body.properties ?? [:])
    default:
      throw HTTPResponseError(.badRequest, "unknown kind \"\(body.kind)\": page, database or row")
    }
    if let parent { try requireAvailable(parent) }
    return try edit(page, [action])
  }

  private struct EditBody: Decodable {
    var title: String?
    var properties: [String: PropertyValue?]?
  }

  private struct BlockBody: Decodable {
    var id: String
    var text: String
    var type: String?
    var after: String?
    var attributes: [String: String]?
  }

  private struct ViewBody: Decodable {
    var filter: ViewFilter?
    var sort: ViewSort?
  }

  /// `/v1/pages/ID`, `/v1/pages/ID/blocks`, `/v1/pages/ID/view`.
  private func pages(_ request: HTTPRequest, _ responder: HTTPResponder) {
    let parts = request.path.dropFirst("/v1/pages/".count).split(
      separator: "/", omittingEmptySubsequences: false)
    do {
      let page = try pageID(parts[0])
      switch (parts.count, parts.dropFirst().first, request.method) {
      case (1, _, .GET): show(page, responder)
      case (1, _, .PATCH):
        respond(responder) {
          let body = try json.decode(EditBody.self, request).get()
          var actions: [MutationAction] = []
          if let title = body.title { actions.append(.setTitle(title)) }
          for (name, value) in (body.properties ?? [:]).sorted(by: { $0.key < $1.key }) {
            actions.append(.setProperty(name: name, value: value))
          }
          guard !actions.isEmpty else {
            throw HTTPResponseError(.badRequest, "nothing to change: give \"title\" or \"properties\"")
          }
          return try edit(page, actions)
        }
      case (1, _, .DELETE): respond(responder) { try edit(page, [.deletePage]) }
      case (2, "blocks", .POST):
        respond(responder, status: .created) {
          let body = try json.decode(BlockBody.self, request).get()
          let block = try pageID(body.id, field: "id")
          let after = try body.after.map { try pageID($0, field: "after") }
          var answer = try edit(
            page,
            [
              .addBlock(
                block: block, type: body.type ?? "text", text: body.text, after: after,
                attributes: body.attributes ?? [:])
            ])
          answer.id = block.rawValue
          answer.page = page.rawValue
          return answer
        }
      case (2, "view", .PUT):
        respond(responder) {
          let body = try json.decode(ViewBody.self, request).get()
          return try edit(page, [.setView(filter: body.filter, sort: body.sort)])
        }
      case (1, _, _), (2, "blocks", _), (2, "view", _):
        let allowed = parts.count == 1 ? "GET, PATCH, DELETE" : parts[1] == "blocks" ? "POST" : "PUT"
        responder.respond(
          HTTPResponseError(
            .methodNotAllowed, "\(request.method) is not allowed here", headers: ["Allow": allowed]
          )
          .response)
      default:
        responder.respond(HTTPResponseError(.notFound, "no such path: \(request.path)").response)
      }
    } catch {
      responder.respond(errorResponse(error))
    }
  }

  /// `PATCH` / `DELETE /v1/blocks/ID`: the block's page is the one stored locally.
  private func block(_ request: HTTPRequest) throws -> EditAnswer {
    let block = try pageID(request.path.dropFirst("/v1/blocks/".count), field: "block id")
    guard let page = try store.pageOfBlock(block) else {
      throw HTTPResponseError(.notFound, "block \(block) is not stored on this device")
    }
    let action: MutationAction
    if request.method == .DELETE {
      action = .deleteBlock(block: block)
    } else {
      struct Body: Decodable { var text: String }
      action = .editBlock(block: block, text: try json.decode(Body.self, request).get().text, attributes: nil)
    }
    var answer = try edit(page, [action])
    answer.id = block.rawValue
    answer.page = page.rawValue
    return answer
  }

  /// Commits `actions` on `page` locally (with their queued mutations, in one transaction), then lets the
  /// driver push.
  private func edit(_ page: EntityID, _ actions: [MutationAction]) throws -> EditAnswer {
    let isCreate: Bool
    switch actions.first {
    case .createPage, .createDatabase, .createRow: isCreate = true
    default: isCreate = false
    }
    if !isCreate { try requireAvailable(page) }
    let mutations = try store.recordEdits(
      page: page, actions: actions, nowMillis: WallClock.millis(), observed: driver.observedClock)
    driver.mutationsQueued()
    return EditAnswer(id: page.rawValue, page: nil, mutationIds: mutations.map(\.id))
  }

  /// Offline, only what is stored here can be edited: 503 otherwise.
  private func requireAvailable(_ page: EntityID) throws {
    guard !driver.isConnected, try !store.hasLocalCopy(page) else { return }
    throw HTTPResponseError(
      .serviceUnavailable,
      "page \(page) is not available offline and the broker is unreachable (\(driver.lastError ?? "not connected"))"
    )
  }

  // MARK: Show

  private func show(_ page: EntityID, _ responder: HTTPResponder) {
    do {
      let entry = try store.offlineEntry(page)
      let local = try store.localPage(page)
      if let local, entry?.complete == true {
        responder.respond(json.response(PageJSON(local, source: "local")))
        return
      }
      guard driver.isConnected else {
        // Not offline: a page made or edited here, still held for its unsent mutations, is whole.
        if let local, entry == nil, local.syncStatus == .pending {
          responder.respond(json.response(PageJSON(local, source: "local")))
          return
        }
        let why = entry == nil ? "is not available offline" : "is not complete offline yet"
        throw HTTPResponseError(
          .serviceUnavailable,
          "page \(page) \(why) and the broker is unreachable (\(driver.lastError ?? "not connected"))")
      }
      driver.link.get("/v1/pages/\(page)", as: PageSnapshot.self) { [weak self] result in
        guard let self else { return }
        switch result {
        case .success(let snapshot):
          responder.respond(json.response(PageJSON(snapshot)))
        case .failure(.status(404, _)):
          if let local, local.syncStatus == .pending {
            responder.respond(json.response(PageJSON(local, source: "local")))
          } else {
            responder.respond(HTTPResponseError(.notFound, "page \(page) not found").response)
          }
        case .failure(let error):
          responder.respond(HTTPResponseError(.badGateway, "reading page \(page) through: \(error)").response)
        }
      }
    } catch {
      responder.respond(errorResponse(error))
    }
  }

  // MARK: The offline set

  private func changeReason(_ reason: OfflineReason, _ request: HTTPRequest) throws -> ReasonAnswer {
    let prefix = reason == .toggled ? "/v1/offline/" : reason == .favorite ? "/v1/favorites/" : "/v1/visits/"
    let page = try pageID(request.path.dropFirst(prefix.count))
    let add = request.method != .DELETE
    if !add && !driver.forest.origins(reason).contains(page) {
      let what = reason == .toggled ? "toggled offline" : "a favorite"
      throw HTTPResponseError(.notFound, "page \(page) is not \(what)")
    }
    try driver.changeReason(reason, origin: page, add: add)
    return ReasonAnswer(id: page.rawValue, offlinePages: driver.forest.offlinePageCount)
  }

  // MARK: Sync

  private func startSync(_ responder: HTTPResponder) {
    do {
      let counts = try store.status()
      let request = SyncRequest(
        responder: responder, pendingAtStart: counts.pendingMutations, fetchedAtStart: driver.fetchedPages,
        timer: LoopTimer(loop: driver.loop))
      request.timer.start(after: Self.syncTimeout) { [weak self, weak request] in
        guard let self, let request else { return }
        request.finish(
          .failure(HTTPResponseError(.gatewayTimeout, "sync did not finish in \(Self.syncTimeout / 1000) s")))
        syncs.removeAll { $0 === request }
      }
      syncs.append(request)
      driver.handle(.reconnectNow)
      advanceSyncs()
    } catch {
      responder.respond(errorResponse(error))
    }
  }

  /// Moves each waiting sync on: connected → everything pushed and fetched → one catch-up check → its pages
  /// fetched → answered.
  private func advanceSyncs() {
    guard !syncs.isEmpty else { return }
    let machine = driver.machine
    for request in syncs {
      switch request.phase {
      case .connecting, .settling:
        if machine.state == .disconnected {
          request.finish(
            .failure(
              HTTPResponseError(
                .serviceUnavailable, "the broker is unreachable: \(driver.lastError ?? "not connected")")))
        } else if machine.isPushDeferred {
          request.finish(
            .failure(
              HTTPResponseError(.badGateway, "the push failed: \(driver.lastError ?? "unknown error")")))
        } else if machine.isSettled {
          if request.phase == .connecting {
            request.phase = .checking
            check(request)
          } else {
            request.finish(result(of: request))
          }
        }
      case .checking, .done:
        break
      }
    }
    syncs.removeAll { $0.phase == .done }
  }

  /// One catch-up request outside the machine's: pages changed since they were downloaded are poked, so the
  /// machine fetches them; the sync answers once it has settled again.
  private func check(_ request: SyncRequest) {
    let map: [EntityID: UInt64]
    let epoch: String?
    do {
      map = try store.catchUpMap()
      epoch = try store.epoch()
    } catch {
      request.finish(.failure(HTTPResponseError(.internalServerError, "local store error: \(error)")))
      return
    }
    driver.link.request(
      .POST, "/v1/catchup", body: BrokerProtocol.CatchUpRequest(epoch: epoch, pages: map),
      as: BrokerProtocol.CatchUpResponse.self
    ) { [weak self, weak request] result in
      guard let self, let request, request.phase == .checking else { return }
      switch result {
      case .failure(let error):
        request.finish(.failure(HTTPResponseError(.serviceUnavailable, "catch-up failed: \(error)")))
      case .success(let answer):
        request.phase = .settling
        for (page, time) in answer.changed.sorted(by: { $0.key < $1.key }) {
          driver.handle(.poked(page: page, lastUpdatedTime: time))
        }
        advanceSyncs()
      }
      syncs.removeAll { $0.phase == .done }
    }
  }

  private func result(of request: SyncRequest) -> Result<SyncAnswer, HTTPResponseError> {
    do {
      let counts = try store.status()
      let failedPages = driver.machine.failedPages
      if !failedPages.isEmpty {
        return .failure(
          HTTPResponseError(
            .badGateway,
            "\(failedPages.count) pages could not be fetched: \(driver.lastError ?? "unknown error")"))
      }
      return .success(
        SyncAnswer(
          pushed: max(0, request.pendingAtStart - counts.pendingMutations),
          fetched: driver.fetchedPages - request.fetchedAtStart, pendingMutations: counts.pendingMutations,
          failedMutations: counts.failedMutations))
    } catch {
      return .failure(HTTPResponseError(.internalServerError, "local store error: \(error)"))
    }
  }
}

/// One `POST /v1/sync` in progress.
final class SyncRequest {
  enum Phase {
    /// Waiting to be connected, and for what was queued and known to be pushed and fetched.
    case connecting
    /// The extra catch-up request is in flight.
    case checking
    /// Waiting for the pages it found to be fetched.
    case settling
    case done
  }

  let responder: HTTPResponder
  let pendingAtStart: Int
  let fetchedAtStart: Int
  let timer: LoopTimer
  var phase = Phase.connecting

  init(responder: HTTPResponder, pendingAtStart: Int, fetchedAtStart: Int, timer: LoopTimer) {
    self.responder = responder
    self.pendingAtStart = pendingAtStart
    self.fetchedAtStart = fetchedAtStart
    self.timer = timer
  }

  func finish(_ result: Result<SyncAnswer, HTTPResponseError>) {
    guard phase != .done else { return }
    phase = .done
    timer.close()
    switch result {
    case .success(let answer): responder.respond(JSONBodies().response(answer))
    case .failure(let error): responder.respond(error.response)
    }
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
