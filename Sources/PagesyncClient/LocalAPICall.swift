import FoundationEssentials

/// A request of the daemon's local API and the type of its answer: `client.send(.status)` is a `DaemonStatus`,
/// `client.send(.editPage("home", title: "Home"))` an `EditResult`.
///
/// The builders below make every request docs/protocol.md lists ("The daemon's local API"); `request` is the
/// untyped request they make, for a caller that wants the answer's bytes too (as `pagesync --json` does). Ids
/// are sent as given (what an id cannot hold is escaped in paths): the daemon refuses a bad one with a 400 that
/// names it.
public struct LocalAPICall<Answer: Decodable & Sendable>: Sendable {
  public var request: LocalAPIRequest

  public init(_ request: LocalAPIRequest) {
    self.request = request
  }

  /// The answer's JSON as `Answer`; `invalidAnswer` names the request and what is missing or of the wrong type.
  func decode(_ answer: LocalAPIAnswer) throws(PagesyncClientError) -> Answer {
    do {
      return try JSONDecoder().decode(Answer.self, from: Data(answer.body))
    } catch let error as DecodingError {
      throw .invalidAnswer("\(request.method) \(request.path): \(LocalAPICall.describe(error))")
    } catch {
      throw .invalidAnswer("\(request.method) \(request.path): \(error)")
    }
  }

  private static func describe(_ error: DecodingError) -> String {
    func path(_ context: DecodingError.Context) -> String {
      let names = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
      return names.isEmpty ? "the answer" : names.joined(separator: ".")
    }
    switch error {
    case .keyNotFound(let key, let context):
      let parent = path(context)
      return "\"\(key.stringValue)\" is missing" + (parent == "the answer" ? "" : " in \(parent)")
    case .valueNotFound(_, let context): return "\(path(context)) is null"
    case .typeMismatch(let type, let context): return "\(path(context)) is not a \(type)"
    case .dataCorrupted(let context): return "\(path(context)): \(context.debugDescription)"
    @unknown default: return "\(error)"
    }
  }
}

/// Where `addBlock` puts the new block among the page's blocks.
public enum BlockPosition: Equatable, Sendable {
  /// After the page's last block stored on the device (every editor appends).
  case last
  /// Before every other block.
  case first
  /// Right after the block with this id.
  case after(String)
}

/// A database view's filter: rows whose `property` equals `value`.
public struct ViewFilter: Equatable, Sendable {
  public var property: String
  public var value: JSONValue
  public init(property: String, value: JSONValue) {
    self.property = property
    self.value = value
  }
}

/// A database view's order: by `property`, ascending unless `descending`.
public struct ViewSort: Equatable, Sendable {
  public var property: String
  public var descending: Bool
  public init(property: String, descending: Bool = false) {
    self.property = property
    self.descending = descending
  }
}

// MARK: - The daemon and its sync

extension LocalAPICall where Answer == DaemonStatus {
  /// `GET /v1/status`: the connection, the queue, the offline set's size, the last sync.
  public static var status: Self { Self(LocalAPIRequest(.GET, "/v1/status")) }
}

extension LocalAPICall where Answer == SyncResult {
  /// `POST /v1/sync`: pushes the queue, then catches up; answers when done (waits up to
  /// `LocalAPIRequest.syncTimeoutSeconds`). A daemon without its broker answers 503.
  public static var sync: Self {
    Self(LocalAPIRequest(.POST, "/v1/sync", timeoutSeconds: LocalAPIRequest.syncTimeoutSeconds))
  }
}

extension LocalAPICall where Answer == TokenHanded {
  /// `PUT /v1/token`: hands the daemon the bearer token the app's user signed in with. The daemon keeps it in
  /// memory only and presents it to the broker (reconnecting if it differs from the one in use) until the broker
  /// refuses it; a token that is empty, too long or not visible ASCII is refused 400.
  public static func setToken(_ token: String) -> Self {
    Self(LocalAPIRequest(.PUT, "/v1/token", body: .object(["token": .string(token)])))
  }

  /// `DELETE /v1/token`: withdraws the token `setToken` handed (the user signed out); the daemon goes back to its
  /// configured token, reconnecting if the connection used the withdrawn one.
  public static var clearToken: Self { Self(LocalAPIRequest(.DELETE, "/v1/token")) }
}

extension LocalAPICall where Answer == [Conflict] {
  /// `GET /v1/conflicts`: the mutations the broker rejected, kept for recovery.
  public static var conflicts: Self { Self(LocalAPIRequest(.GET, "/v1/conflicts")) }
}

// MARK: - Pages

extension LocalAPICall where Answer == Page {
  /// `GET /v1/pages/ID`: the page as stored locally, or read through from the broker while connected. Offline,
  /// a page that is not complete offline is a 503.
  public static func page(_ id: String) -> Self {
    Self(LocalAPIRequest(.GET, "/v1/pages/\(pathSegment(id))"))
  }
}

extension LocalAPICall where Answer == EditResult {
  /// `POST /v1/pages` of a page: top level without `parent`.
  public static func createPage(id: String, parent: String? = nil, title: String? = nil) -> Self {
    create(kind: "page", id: id, parent: parent, title: title)
  }

  /// `POST /v1/pages` of a database: inline in `parent`, or top level without.
  public static func createDatabase(id: String, parent: String? = nil, title: String? = nil) -> Self {
    create(kind: "database", id: id, parent: parent, title: title)
  }

  /// `POST /v1/pages` of a row of `database`, with its properties (none: the member is left out).
  public static func createRow(
    database: String, id: String, title: String? = nil, properties: [String: JSONValue] = [:]
  ) -> Self {
    var body: [String: JSONValue] = [
      "kind": .string("row"), "id": .string(id), "database": .string(database),
    ]
    if let title { body["title"] = .string(title) }
    if !properties.isEmpty { body["properties"] = .object(properties) }
    return Self(LocalAPIRequest(.POST, "/v1/pages", body: .object(body)))
  }

  /// `PATCH /v1/pages/ID`: a new title and/or properties; a property set to `.null` is removed. Give at least
  /// one change (the daemon answers 400 to none).
  public static func editPage(_ id: String, title: String? = nil, properties: [String: JSONValue] = [:])
    -> Self
  {
    var body: [String: JSONValue] = [:]
    if let title { body["title"] = .string(title) }
    if !properties.isEmpty { body["properties"] = .object(properties) }
    return Self(LocalAPIRequest(.PATCH, "/v1/pages/\(pathSegment(id))", body: .object(body)))
  }

  /// `DELETE /v1/pages/ID`: a page, a database or a row.
  public static func deletePage(_ id: String) -> Self {
    Self(LocalAPIRequest(.DELETE, "/v1/pages/\(pathSegment(id))"))
  }

  /// `PUT /v1/pages/ID/view`: a database's view, replaced whole (nil clears the filter or the order).
  public static func setView(of database: String, filter: ViewFilter? = nil, sort: ViewSort? = nil) -> Self {
    let filterValue: JSONValue =
      filter.map { .object(["property": .string($0.property), "value": $0.value]) } ?? .null
    let sortValue: JSONValue =
      sort.map { .object(["property": .string($0.property), "descending": .bool($0.descending)]) } ?? .null
    return Self(
      LocalAPIRequest(
        .PUT, "/v1/pages/\(pathSegment(database))/view",
        body: .object(["filter": filterValue, "sort": sortValue])))
  }

  private static func create(kind: String, id: String, parent: String?, title: String?) -> Self {
    // Absent, not null: a member is sent only when given (docs/protocol.md).
    var body: [String: JSONValue] = ["kind": .string(kind), "id": .string(id)]
    if let parent { body["parent"] = .string(parent) }
    if let title { body["title"] = .string(title) }
    return Self(LocalAPIRequest(.POST, "/v1/pages", body: .object(body)))
  }
}

// MARK: - Blocks

extension LocalAPICall where Answer == EditResult {
  /// `POST /v1/pages/PAGE/blocks`. `type` nil is the daemon's default, `text`.
  public static func addBlock(
    to page: String, id: String, text: String, type: String? = nil, position: BlockPosition = .last,
    attributes: [String: String] = [:]
  ) -> Self {
    var body: [String: JSONValue] = ["id": .string(id), "text": .string(text)]
    if let type { body["type"] = .string(type) }
    switch position {
    case .last: break
    case .first: body["first"] = .bool(true)
    case .after(let block): body["after"] = .string(block)
    }
    if !attributes.isEmpty { body["attributes"] = .object(attributes.mapValues(JSONValue.string)) }
    return Self(LocalAPIRequest(.POST, "/v1/pages/\(pathSegment(page))/blocks", body: .object(body)))
  }

  /// `PATCH /v1/blocks/ID`: the whole new text, queued as the fewest splices against the local text, so that
  /// an edit made offline merges with the others'.
  public static func editBlock(_ id: String, text: String) -> Self {
    Self(LocalAPIRequest(.PATCH, "/v1/blocks/\(pathSegment(id))", body: .object(["text": .string(text)])))
  }

  /// `POST /v1/blocks/ID/splice`: delete `delete` Unicode scalars at `at` (from 0), then insert `insert` there.
  public static func spliceBlock(_ id: String, at: Int, delete: Int = 0, insert: String = "") -> Self {
    let body: JSONValue = .object([
      "at": .integer(Int64(at)), "delete": .integer(Int64(delete)), "insert": .string(insert),
    ])
    return Self(LocalAPIRequest(.POST, "/v1/blocks/\(pathSegment(id))/splice", body: body))
  }

  /// `POST /v1/blocks/ID/marks`: sets (or with `remove`, removes) a mark over the scalars `from..<to`. `type`
  /// is `bold`, `italic`, `underline`, `strike`, `code`, `link` or `color`; `link` and `color` need `value`.
  public static func markBlock(
    _ id: String, from: Int, to: Int, type: String, value: String? = nil, remove: Bool = false
  ) -> Self {
    var body: [String: JSONValue] = [
      "from": .integer(Int64(from)), "to": .integer(Int64(to)), "type": .string(type),
      "remove": .bool(remove),
    ]
    if let value { body["value"] = .string(value) }
    return Self(LocalAPIRequest(.POST, "/v1/blocks/\(pathSegment(id))/marks", body: .object(body)))
  }

  /// `DELETE /v1/blocks/ID`.
  public static func deleteBlock(_ id: String) -> Self {
    Self(LocalAPIRequest(.DELETE, "/v1/blocks/\(pathSegment(id))"))
  }
}

// MARK: - The offline set

extension LocalAPICall where Answer == [OfflineEntry] {
  /// `GET /v1/offline`: every offline page, why, how fresh, complete or not; by id.
  public static var offlinePages: Self { Self(LocalAPIRequest(.GET, "/v1/offline")) }
}

extension LocalAPICall where Answer == [OfflineReason] {
  /// `GET /v1/why/ID`: the rows that keep the page offline (empty: it is not offline).
  public static func why(_ id: String) -> Self { Self(LocalAPIRequest(.GET, "/v1/why/\(pathSegment(id))")) }
}

extension LocalAPICall where Answer == OfflineSetResult {
  /// `PUT /v1/offline/ID`: keep the page offline (toggled), with its inline databases and their first rows.
  public static func addOffline(_ id: String) -> Self {
    Self(LocalAPIRequest(.PUT, "/v1/offline/\(pathSegment(id))"))
  }

  /// `DELETE /v1/offline/ID`: stop keeping it offline by toggle (404 if it was not toggled).
  public static func removeOffline(_ id: String) -> Self {
    Self(LocalAPIRequest(.DELETE, "/v1/offline/\(pathSegment(id))"))
  }

  /// `PUT /v1/favorites/ID`: favorites are kept offline.
  public static func addFavorite(_ id: String) -> Self {
    Self(LocalAPIRequest(.PUT, "/v1/favorites/\(pathSegment(id))"))
  }

  /// `DELETE /v1/favorites/ID` (404 if it was not a favorite).
  public static func removeFavorite(_ id: String) -> Self {
    Self(LocalAPIRequest(.DELETE, "/v1/favorites/\(pathSegment(id))"))
  }

  /// `POST /v1/visits/ID`: the most recently visited pages are kept offline.
  public static func visit(_ id: String) -> Self {
    Self(LocalAPIRequest(.POST, "/v1/visits/\(pathSegment(id))"))
  }
}

/// `id` as one path segment: the bytes an id may hold (`A-Z a-z 0-9 _ -`) as they are, any other
/// percent-encoded, so that no id can reach another path.
func pathSegment(_ id: String) -> String {
  var out = ""
  for byte in id.utf8 {
    switch byte {
    case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
      out.unicodeScalars.append(Unicode.Scalar(byte))
    default:
      let hex = String(byte, radix: 16, uppercase: true)
      out += "%" + (hex.count == 1 ? "0" + hex : hex)
    }
  }
  return out
}
