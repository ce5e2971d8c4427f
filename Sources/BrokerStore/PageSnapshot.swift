import SyncModel

/// A page as the broker holds it, in full: what a client stores when it downloads the page.
public struct PageSnapshot: Hashable, Sendable, Codable {
  public var id: EntityID
  public var workspace: EntityID
  /// `page` or `database`.
  public var kind: String
  public var parent: EntityID?
  public var title: String
  public var deleted: Bool
  public var properties: [String: PropertyValue]
  /// Live blocks, in order.
  public var blocks: [BlockState]
  /// Databases whose parent is this page (inline in it), in creation order. Always in a whole page; in a delta's
  /// header only when they changed, so that an empty list always means "none" and never "unchanged".
  public var databases: [EntityID]?
  /// For a database: its current view.
  public var view: ViewState?
  /// For a database: its rows in view, in view order.
  public var rows: [EntityID]?
  /// The sequence of the last batch that changed the page.
  public var lastUpdatedTime: UInt64
}

/// One block of a page.
public struct BlockState: Hashable, Sendable, Codable {
  public var id: EntityID
  public var type: String
  public var text: String
  public var attributes: [String: String]
  /// Orders the page's blocks (ascending); only the order is meaningful.
  public var position: Double
  /// A deleted block appears only in deltas, so the client removes it.
  public var deleted: Bool
}

/// A database's current view.
public struct ViewState: Hashable, Sendable, Codable {
  public var filter: ViewFilter?
  public var sort: ViewSort?
}

/// What changed in a page since a time: the current value of every field that changed, or the whole page when
/// the change log no longer reaches back that far (`full`).
public struct PageDelta: Hashable, Sendable, Codable {
  public var id: EntityID
  /// The time the delta is relative to.
  public var since: UInt64
  public var lastUpdatedTime: UInt64
  /// True when `page` is a snapshot to replace the client's copy; false when only the fields below changed.
  public var full: Bool
  /// The page's header fields (always present: id, kind, parent, title, deleted) and, when `full`, everything.
  public var page: PageSnapshot
  /// Properties that changed (nil: removed). Empty when `full`.
  public var properties: [String: PropertyValue?]
  /// Blocks that changed, deleted ones included. Empty when `full`.
  public var blocks: [BlockState]
}

/// How the broker answered one mutation.
public struct MutationResult: Hashable, Sendable, Codable {
  public enum Status: String, Hashable, Sendable, Codable {
    /// Applied now (its fields may have lost to newer writes: last writer wins).
    case applied
    /// Applied before: this is a re-send.
    case duplicate
    /// Refused; `reason` says why. The client keeps it for recovery.
    case rejected
  }

  public var mutationId: UInt64
  public var page: EntityID
  public var status: Status
  public var reason: RejectionReason?
}

/// The answer to a batch.
public struct BatchOutcome: Hashable, Sendable, Codable {
  public var results: [MutationResult]
  /// Every page (and database) the batch changed, with its new `lastUpdatedTime`; also, for a re-sent batch,
  /// the current time of the pages it names.
  public var pages: [EntityID: UInt64]
  /// The sequence the batch got, nil when it changed nothing.
  public var sequence: UInt64?
  /// The client's last applied mutation id after the batch.
  public var lastMutationId: UInt64
  /// The store's epoch.
  public var epoch: String
  /// The workspace of each page in `pages` (for notifying only those who may see it; not sent to the client).
  public var workspaces: [EntityID: EntityID] = [:]

  private enum CodingKeys: String, CodingKey {
    case results, pages, sequence, lastMutationId, epoch
  }
}

/// Why a whole batch was refused (as opposed to one mutation).
public enum BatchError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The first mutation id is not the client's last applied id + 1 (a gap): the client must resend from there.
  case gap(expected: UInt64, received: UInt64)
  /// Mutation ids are not consecutive.
  case nonConsecutiveIDs
  /// The client id belongs to another user.
  case clientOfAnotherUser
  /// The batch's workspace is not one the token may write.
  case workspaceForbidden(EntityID)
  /// More mutations than the limit.
  case tooManyMutations(limit: Int)

  public var description: String {
    switch self {
    case .gap(let expected, let received):
      "mutation ids must continue from \(expected); the batch starts at \(received)"
    case .nonConsecutiveIDs: "mutation ids in a batch must be consecutive and ascending"
    case .clientOfAnotherUser: "this client id belongs to another user"
    case .workspaceForbidden(let workspace): "workspace \(workspace) is not one this token may write"
    case .tooManyMutations(let limit): "a batch may carry at most \(limit) mutations"
    }
  }
}
