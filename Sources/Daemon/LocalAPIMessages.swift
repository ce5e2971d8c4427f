import ByteBuffers
import DaemonCore
import DaemonStore
import RichText
import SyncModel

// The JSON answers of the local API (docs/protocol.md, "The daemon's local API"). Field names are the contract
// of DESIGN.md's command line: `pagesync --json` prints them as they are.

/// `GET /v1/status`. Times are Unix milliseconds, `null` when never (a field that is always there is easier on
/// scripts than one that comes and goes).
struct StatusJSON: Encodable {
  var connected: Bool
  var state: String
  var pendingMutations: Int
  var failedMutations: Int
  var offlinePages: Int
  /// Offline pages the broker said this device may not see.
  var missingPages: Int
  var lastSuccessfulSync: UInt64?
  var lastSyncAttempt: UInt64?
  var fetchedPages: Int
  var clientId: String
  var workspace: String
  var broker: String
  var lastError: String?
  /// Where the token in use comes from: `api` (PUT /v1/token), `token`, `token_file`, `token_command`, `none`.
  var tokenSource: String
  /// Why there is no usable token, or why the broker refused the last one; nil once a token is accepted.
  var tokenProblem: String?
  /// Since the daemon started (docs/operations.md, "Metrics").
  var counters: SyncCounters
  var bytesReceived: Int
  var bytesSent: Int

  private enum CodingKeys: String, CodingKey {
    case connected, state, pendingMutations, failedMutations, offlinePages, missingPages, lastSuccessfulSync,
      lastSyncAttempt
    case fetchedPages, clientId, workspace, broker, lastError, tokenSource, tokenProblem
    case batchesPushed, mutationsPushed, mutationsRejected, pushFailures, catchUpRequests, fetchRequests
    case notificationsReceived, reconnects, streamsOpened, tokenRefusals, tokenFailures, bytesReceived,
      bytesSent
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(connected, forKey: .connected)
    try container.encode(state, forKey: .state)
    try container.encode(pendingMutations, forKey: .pendingMutations)
    try container.encode(failedMutations, forKey: .failedMutations)
    try container.encode(offlinePages, forKey: .offlinePages)
    try container.encode(missingPages, forKey: .missingPages)
    try container.encode(lastSuccessfulSync, forKey: .lastSuccessfulSync)
    try container.encode(lastSyncAttempt, forKey: .lastSyncAttempt)
    try container.encode(fetchedPages, forKey: .fetchedPages)
    try container.encode(clientId, forKey: .clientId)
    try container.encode(workspace, forKey: .workspace)
    try container.encode(broker, forKey: .broker)
    try container.encode(lastError, forKey: .lastError)
    try container.encode(tokenSource, forKey: .tokenSource)
    try container.encode(tokenProblem, forKey: .tokenProblem)
    try container.encode(counters.batchesPushed, forKey: .batchesPushed)
    try container.encode(counters.mutationsPushed, forKey: .mutationsPushed)
    try container.encode(counters.mutationsRejected, forKey: .mutationsRejected)
    try container.encode(counters.pushFailures, forKey: .pushFailures)
    try container.encode(counters.catchUpRequests, forKey: .catchUpRequests)
    try container.encode(counters.fetchRequests, forKey: .fetchRequests)
    try container.encode(counters.notificationsReceived, forKey: .notificationsReceived)
    try container.encode(counters.reconnects, forKey: .reconnects)
    try container.encode(counters.streamsOpened, forKey: .streamsOpened)
    try container.encode(counters.tokenRefusals, forKey: .tokenRefusals)
    try container.encode(counters.tokenFailures, forKey: .tokenFailures)
    try container.encode(bytesReceived, forKey: .bytesReceived)
    try container.encode(bytesSent, forKey: .bytesSent)
  }
}

/// What `PUT /v1/token` and `DELETE /v1/token` answer: where the token in use now comes from (`api` after a PUT).
struct TokenAnswer: Encodable {
  var tokenSource: String
}

/// What an edit queued.
struct EditAnswer: Encodable {
  var id: String
  /// For block edits: the block's page.
  var page: String?
  var mutationIds: [UInt64]
}

/// What a change of reason left.
struct ReasonAnswer: Encodable {
  var id: String
  var offlinePages: Int
}

/// One `offline_action` row: `{"origin", "from", "type"}`, `from` null for the origin's own row.
struct ReasonJSON: Encodable {
  var origin: String
  var from: String?
  var type: String

  init(_ action: OfflineAction) {
    origin = action.origin.rawValue
    from = action.from?.rawValue
    type = action.type.rawValue
  }

  private enum CodingKeys: String, CodingKey { case origin, from, type }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(origin, forKey: .origin)
    try container.encode(from, forKey: .from)
    try container.encode(type, forKey: .type)
  }
}

/// `GET /v1/offline`'s body, written straight as bytes: byte for byte what `JSONEncoder` (sorted keys) writes
/// for `[OfflineEntryJSON]`, without its intermediate tree, which for 10,000 offline pages took the daemon's
/// resident memory from 23 to 38 MB for as long as it lasted (scripts/idle-daemon.py lists the set).
enum OfflineListJSON {
  /// Entries per chunk of the streamed answer, and per read of the store (`forEachOfflineListPage`).
  static let entriesPerChunk = 256

  /// The body as one array of bytes (tests compare it with `JSONEncoder`'s): what the chunks of `Writer`
  /// add up to.
  static func bytes(_ entries: [OfflineEntry]) -> [UInt8] {
    var writer = Writer()
    var out: [UInt8] = []
    var next = 0
    while next < entries.count {
      let end = min(next + entriesPerChunk, entries.count)
      out += writer.chunk(entries[next..<end]).readableBytesArray
      next = end
    }
    out += writer.end().readableBytesArray
    return out
  }

  /// Writes the body one chunk at a time, as the store reads the entries: the answer is streamed
  /// (`Transfer-Encoding: chunked`), never whole in memory (10,000 entries are 1.5 MB, and were two copies of it
  /// at once, with every entry and its row, the peak of an idle daemon's day).
  struct Writer {
    private var written = 0
    /// Whether the opening `[` was written.
    private var opened = false
    private var out: [UInt8] = []

    /// The bytes of `entries`, after those of the chunks before (the opening `[` with the first).
    mutating func chunk(_ entries: some Collection<OfflineEntry>) -> ByteBuffer {
      out.removeAll(keepingCapacity: true)
      out.reserveCapacity(entries.count * 160 + 1)
      if !opened { out.append(UInt8(ascii: "[")) }
      opened = true
      for entry in entries {
        if written > 0 { out.append(UInt8(ascii: ",")) }
        OfflineListJSON.append(entry, to: &out)
        written += 1
      }
      return ByteBuffer(bytes: out)
    }

    /// The body's last bytes: `]`, or the whole `[]` when no chunk was written.
    func end() -> ByteBuffer {
      ByteBuffer(bytes: Array((opened ? "]" : "[]").utf8))
    }
  }

  private static func append(_ entry: OfflineEntry, to out: inout [UInt8]) {
    out.append(contentsOf: #"{"complete":"#.utf8)
    out.append(contentsOf: (entry.complete ? "true" : "false").utf8)
    out.append(contentsOf: #","id":"#.utf8)
    JSONText.appendString(entry.id.rawValue, to: &out)
    out.append(contentsOf: #","lastDownloadedTimestamp":"#.utf8)
    JSONText.appendNumber(entry.lastDownloadedTimestamp, to: &out)
    out.append(contentsOf: #","missing":"#.utf8)
    out.append(contentsOf: (entry.missing ? "true" : "false").utf8)
    out.append(contentsOf: #","reasons":["#.utf8)
    for (number, reason) in entry.reasons.enumerated() {
      if number > 0 { out.append(UInt8(ascii: ",")) }
      out.append(contentsOf: #"{"from":"#.utf8)
      if let from = reason.from {
        JSONText.appendString(from.rawValue, to: &out)
      } else {
        out.append(contentsOf: "null".utf8)
      }
      out.append(contentsOf: #","origin":"#.utf8)
      JSONText.appendString(reason.origin.rawValue, to: &out)
      out.append(contentsOf: #","type":"#.utf8)
      JSONText.appendString(reason.type.rawValue, to: &out)
      out.append(UInt8(ascii: "}"))
    }
    out.append(contentsOf: "]}".utf8)
  }
}

/// One entry of `GET /v1/offline`.
struct OfflineEntryJSON: Encodable {
  var id: String
  var reasons: [ReasonJSON]
  var lastDownloadedTimestamp: UInt64
  var complete: Bool
  /// The broker said this device may not see it (it does not exist, or is another workspace's).
  var missing: Bool

  init(_ entry: OfflineEntry) {
    id = entry.id.rawValue
    reasons = entry.reasons.map(ReasonJSON.init)
    lastDownloadedTimestamp = entry.lastDownloadedTimestamp
    complete = entry.complete
    missing = entry.missing
  }
}

/// One rejected mutation, kept for recovery.
struct ConflictJSON: Encodable {
  var mutationId: UInt64
  var page: String
  var type: String
  /// The rejection's name (`page_deleted`, …).
  var reason: String
  var code: Int
  var message: String
  var createdAt: UInt64

  init(_ conflict: MutationConflict) {
    mutationId = conflict.mutationId
    page = conflict.page.rawValue
    type = conflict.type
    reason = conflict.reason.name
    code = conflict.reason.code
    message = conflict.message ?? conflict.reason.description
    createdAt = conflict.createdAt
  }
}

/// `POST /v1/sync`.
struct SyncAnswer: Encodable {
  var pushed: Int
  var fetched: Int
  var pendingMutations: Int
  var failedMutations: Int
}

/// A page as `show` prints it, from the local store or read through from the broker.
struct PageJSON: Encodable {
  struct Block: Encodable {
    var id: String
    var type: String
    var text: String
    /// `[{"type", "start", "end", "value"?}]`, sorted by start then type (DESIGN, `show`).
    var marks: [TextMark]
    var attributes: [String: String]
  }

  var id: String
  var kind: String
  var title: String
  var parent: String?
  var deleted: Bool
  var properties: [String: PropertyValue]
  var blocks: [Block]
  var databases: [String]
  var rows: [String]?
  var view: ViewState?
  var lastUpdatedTime: UInt64
  var source: String
  var syncStatus: String

  init(_ page: LocalPage, source: String) {
    id = page.id.rawValue
    kind = page.kind.rawValue
    title = page.title
    parent = page.parent?.rawValue
    deleted = page.deleted
    properties = page.properties
    blocks = page.blocks.map {
      Block(id: $0.id.rawValue, type: $0.type, text: $0.text, marks: $0.marks, attributes: $0.attributes)
    }
    databases = page.databases.map(\.rawValue)
    rows = page.kind == .database ? (page.rows ?? []).map(\.rawValue) : nil
    view = page.view
    lastUpdatedTime = page.lastUpdatedTime
    self.source = source
    syncStatus = page.syncStatus.rawValue
  }

  init(_ page: PageSnapshot) {
    id = page.id.rawValue
    kind = page.kind
    title = page.title
    parent = page.parent?.rawValue
    deleted = page.deleted
    properties = page.properties
    blocks = page.blocks.filter { !$0.deleted }.sorted { $0.position < $1.position }.map {
      Block(
        id: $0.id.rawValue, type: $0.type, text: $0.text, marks: $0.marks ?? [], attributes: $0.attributes)
    }
    databases = (page.databases ?? []).map(\.rawValue)
    rows = page.kind == "database" ? (page.rows ?? []).map(\.rawValue) : nil
    view = page.view
    lastUpdatedTime = page.lastUpdatedTime
    source = "broker"
    syncStatus = "synced"
  }
}
