// The answer to a batch of mutations: what the broker's store returns and sends, and what the daemon records.

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
  /// For some rejections, what was wrong in words, naming the limit (`too_large` past `[limits] page_bytes`).
  /// Absent otherwise, and from an older broker.
  public var message: String?

  public init(
    mutationId: UInt64, page: EntityID, status: Status, reason: RejectionReason? = nil, message: String? = nil
  ) {
    self.mutationId = mutationId
    self.page = page
    self.status = status
    self.reason = reason
    self.message = message
  }
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

  public init(
    results: [MutationResult], pages: [EntityID: UInt64], sequence: UInt64?, lastMutationId: UInt64,
    epoch: String, workspaces: [EntityID: EntityID] = [:]
  ) {
    self.results = results
    self.pages = pages
    self.sequence = sequence
    self.lastMutationId = lastMutationId
    self.epoch = epoch
    self.workspaces = workspaces
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
