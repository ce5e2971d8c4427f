// The typed answers of the daemon's local API (docs/protocol.md, "The daemon's local API"). Fields the contract
// (DESIGN.md's `--json` lists) promises are required: an answer without one is `invalidAnswer`; fields the
// daemon may leave out or that came later are optional. Unknown fields are ignored, so a newer daemon's
// answers still decode. Times are Unix milliseconds; `lastDownloadedTimestamp` is a broker sequence.

/// `GET /v1/status`.
public struct DaemonStatus: Decodable, Equatable, Sendable {
  /// Whether the daemon holds a live connection to the broker.
  public var connected: Bool
  /// The sync loop's state: `connecting`, `subscribing`, `catchingUp`, `fetching`, `live`, `disconnected`
  /// (opaque: more may come).
  public var state: String
  public var pendingMutations: Int
  /// Mutations the broker rejected, kept as conflicts.
  public var failedMutations: Int
  public var offlinePages: Int
  /// Offline pages the broker says do not exist (or are another workspace's); nil from a daemon before them.
  public var missingPages: Int?
  /// nil: never.
  public var lastSuccessfulSync: UInt64?
  public var lastSyncAttempt: UInt64?
  /// Page downloads since the daemon started.
  public var fetchedPages: Int
  public var clientId: String?
  public var workspace: String?
  public var broker: String?
  /// Why the last attempt to reach the broker failed, if it did.
  public var lastError: String?
  /// Where the token in use comes from: `api` (`setToken`), `token`, `token_file`, `token_command`, `none`; nil
  /// from a daemon before tokens.
  public var tokenSource: String?
  /// Why there is no usable token, or why the broker refused the last one; nil once one is accepted.
  public var tokenProblem: String?
  // Activity since the daemon started (docs/operations.md, "Metrics").
  public var batchesPushed: Int?
  public var mutationsPushed: Int?
  public var mutationsRejected: Int?
  public var pushFailures: Int?
  public var catchUpRequests: Int?
  public var fetchRequests: Int?
  public var notificationsReceived: Int?
  public var reconnects: Int?
  public var streamsOpened: Int?
  /// Times the broker refused the token; reads of `token_file` and runs of `token_command` that gave none.
  public var tokenRefusals: Int?
  public var tokenFailures: Int?
  public var bytesReceived: Int?
  public var bytesSent: Int?
}

/// What `PUT /v1/token` (`setToken`) and `DELETE /v1/token` (`clearToken`) answer.
public struct TokenHanded: Decodable, Equatable, Sendable {
  /// Where the token in use comes from now: `api` after `setToken`; after `clearToken`, the configured source
  /// (`token`, `token_file`, `token_command`, `none`).
  public var tokenSource: String
}

/// What an edit queued: every create, edit and delete of a page or block, and a view change.
public struct EditResult: Decodable, Equatable, Sendable {
  /// The page or block edited.
  public var id: String
  /// For a block: its page.
  public var page: String?
  /// The mutations queued, committed with the local copy before the answer; empty when the edit changed
  /// nothing.
  public var mutationIds: [UInt64]
}

/// What a change of the offline set left: adding or removing a toggle or a favorite, a visit.
public struct OfflineSetResult: Decodable, Equatable, Sendable {
  public var id: String
  /// Pages offline now.
  public var offlinePages: Int
}

/// One row of why a page is offline (`offline_action`).
public struct OfflineReason: Decodable, Equatable, Sendable {
  /// The page the reason was given to.
  public var origin: String
  /// The page it came through; nil for the origin's own row.
  public var from: String?
  /// `toggled`, `favorite`, `recent`, ... (opaque: more may come).
  public var type: String
}

/// One page of `GET /v1/offline`.
public struct OfflineEntry: Decodable, Equatable, Sendable {
  public var id: String
  public var reasons: [OfflineReason]
  /// The broker sequence the local copy is at.
  public var lastDownloadedTimestamp: UInt64?
  /// Whether the local copy is complete (a page that is not cannot be shown offline).
  public var complete: Bool
  /// Whether the broker says the page does not exist (or is another workspace's): its reasons stay until they
  /// are removed. nil from a daemon before it.
  public var missing: Bool?
}

/// `GET /v1/pages/ID`: a page or database as stored locally (or read through).
public struct Page: Decodable, Equatable, Sendable {
  /// A block of the page, in order.
  public struct Block: Decodable, Equatable, Sendable {
    public var id: String
    public var type: String
    public var text: String
    public var marks: [Mark]
    public var attributes: [String: String]?
  }

  /// A mark over a block's text: the Unicode scalars `start..<end`.
  public struct Mark: Decodable, Equatable, Sendable {
    /// `bold`, `italic`, `underline`, `strike`, `code`, `link`, `color`.
    public var type: String
    public var start: Int
    public var end: Int
    /// A link's URL, a color.
    public var value: String?
  }

  public var id: String
  /// `page` or `database`.
  public var kind: String
  public var title: String
  public var parent: String?
  public var deleted: Bool?
  /// Property values: a string, a number, a boolean or a list of strings.
  public var properties: [String: JSONValue]
  public var blocks: [Block]
  /// A database's rows in view, in view order.
  public var rows: [String]?
  /// The page's inline databases.
  public var databases: [String]?
  /// A database's view: `{"filter", "sort"}`.
  public var view: JSONValue?
  public var lastUpdatedTime: UInt64?
  /// `local` (the device's copy) or `broker` (read through).
  public var source: String?
  /// `synced` or `pending` (local edits not yet applied by the broker).
  public var syncStatus: String?
}

/// `POST /v1/sync`.
public struct SyncResult: Decodable, Equatable, Sendable {
  public var pushed: Int
  public var fetched: Int
  public var pendingMutations: Int
  public var failedMutations: Int
}

/// A mutation the broker rejected, kept for recovery (`GET /v1/conflicts`).
public struct Conflict: Decodable, Equatable, Sendable {
  public var mutationId: UInt64
  public var page: String
  /// The mutation's type (`set_title`, ...).
  public var type: String?
  /// The rejection's name (`page_deleted`, ...).
  public var reason: String
  /// The rejection's stable code (docs/protocol.md, "Rejection reasons").
  public var code: Int?
  public var message: String?
  public var createdAt: UInt64?
}
