import DaemonStore
import RichText
import SyncModel
import Web

/// Pages and blocks: edits (committed locally with their queued mutations, then pushed behind) and `show` (the
/// local copy, or read through from the broker while connected). Loop thread only.
extension LocalAPI {
  private struct CreateBody: Decodable {
    var kind: String
    var id: String
    var parent: String?
    var database: String?
    var title: String?
    var properties: [String: PropertyValue]?
  }

  func create(_ request: HTTPRequest) throws -> EditAnswer {
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
    /// Put the block first (with neither, it goes last, as in every editor).
    var first: Bool?
    var attributes: [String: String]?
  }

  private struct ViewBody: Decodable {
    var filter: ViewFilter?
    var sort: ViewSort?
  }

  /// `/v1/pages/ID`, `/v1/pages/ID/blocks`, `/v1/pages/ID/view`.
  func pages(_ request: HTTPRequest, _ responder: HTTPResponder) {
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
          let after = try Self.placement(of: block, after: body.after, first: body.first == true)
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

  /// The `after` of a new block's `add_block`: the block named, nil (first) for `first`, and with neither the
  /// block itself, which the placement rule puts last (`BlockPlacement`: an id that is no block of the page, the
  /// block being placed among them). "Last" is then decided where the mutation applies — by the broker against
  /// the page as it is then, by this device against its copy — so the block is appended whether or not this
  /// device stores the page (without a copy there is no last block to name) and after blocks other devices
  /// appended meanwhile, as in every editor.
  static func placement(of block: EntityID, after: String?, first: Bool) throws -> EntityID? {
    switch (after, first) {
    case (.some, true):
      throw HTTPResponseError(.badRequest, "give \"after\" or \"first\", not both")
    case (.some(let name), false): return try pageID(name, field: "after")
    case (nil, true): return nil
    case (nil, false): return block
    }
  }

  /// `PATCH` / `DELETE /v1/blocks/ID`, `POST /v1/blocks/ID/splice`, `POST /v1/blocks/ID/marks`: the block's
  /// page is the one stored locally. A text (`PATCH {"text"}`) is merged as the fewest splices; a splice
  /// (`{"at", "delete", "insert"}`) and a mark (`{"from", "to", "type", "value", "remove"}`) count Unicode
  /// scalars; a position outside the text is a 400 that says so.
  func block(_ request: HTTPRequest) throws -> EditAnswer {
    let parts = request.path.dropFirst("/v1/blocks/".count).split(
      separator: "/", omittingEmptySubsequences: false)
    let block = try pageID(parts[0], field: "block id")
    guard let page = try store.pageOfBlock(block) else {
      throw HTTPResponseError(.notFound, "block \(block) is not stored on this device")
    }
    let edit: TextEdit?
    switch (parts.count, parts.count > 1 ? parts[1] : "", request.method) {
    case (1, _, .DELETE):
      edit = nil
    case (1, _, .PATCH):
      struct Body: Decodable { var text: String }
      edit = .replace(try json.decode(Body.self, request).get().text)
    case (2, "splice", .POST):
      struct Body: Decodable {
        var at: Int
        var delete: Int?
        var insert: String?
      }
      let body = try json.decode(Body.self, request).get()
      edit = .splice(at: body.at, delete: body.delete ?? 0, insert: body.insert ?? "")
    case (2, "marks", .POST):
      struct Body: Decodable {
        var from: Int
        var to: Int
        var type: String
        var value: String?
        var remove: Bool?
      }
      let body = try json.decode(Body.self, request).get()
      guard let type = MarkType(rawValue: body.type) else {
        let known = MarkType.allCases.map(\.rawValue).joined(separator: ", ")
        throw HTTPResponseError(.badRequest, "unknown mark type \"\(body.type.prefix(40))\": one of \(known)")
      }
      edit = .mark(from: body.from, to: body.to, type: type, value: body.value, remove: body.remove ?? false)
    case (1, _, _), (2, "splice", _), (2, "marks", _):
      let allowed = parts.count == 1 ? "PATCH, DELETE" : "POST"
      throw HTTPResponseError(
        .methodNotAllowed, "\(request.method) is not allowed here", headers: ["Allow": allowed])
    default:
      throw HTTPResponseError(.notFound, "no such path: \(request.path)")
    }
    var answer: EditAnswer
    if let edit {
      try requireAvailable(page)
      let mutation = try store.recordTextEdit(
        block: block, edit: edit, nowMillis: WallClock.millis(), observed: driver.observedClock)
      if mutation != nil { driver.editCommitted(page, deleted: false) }
      answer = EditAnswer(id: page.rawValue, page: nil, mutationIds: mutation.map { [$0.id] } ?? [])
    } else {
      answer = try self.edit(page, [.deleteBlock(block: block)])
    }
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
    let deleted = actions.contains {
      if case .deletePage = $0 { true } else { false }
    }
    driver.editCommitted(page, deleted: deleted)
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
      driver.link.page(page) { [weak self] result in
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
          // Refused for the token: the connection is dropped and the reconnect gets a fresh one.
          _ = driver.refusedToken(error, generation: driver.generation)
          responder.respond(HTTPResponseError(.badGateway, "reading page \(page) through: \(error)").response)
        }
      }
    } catch {
      responder.respond(errorResponse(error))
    }
  }
}
