import SyncModel

/// The JSON messages of the broker's HTTP and WebSocket API. docs/protocol.md describes each with examples.
public enum BrokerProtocol {
  /// `POST /v1/catchup`: the client's `lastDownloadedTimestamp` of each page it holds.
  public struct CatchUpRequest: Codable, Sendable {
    /// The epoch the client's times come from (nil: the client has none yet).
    public var epoch: String?
    public var pages: [EntityID: UInt64]

    public init(epoch: String? = nil, pages: [EntityID: UInt64]) {
      self.epoch = epoch
      self.pages = pages
    }
  }

  public struct CatchUpResponse: Codable, Sendable {
    public var epoch: String
    /// The client's epoch is not ours (the store was replaced or restored): its times mean nothing here, and every
    /// page it may see is in `changed`.
    public var epochChanged: Bool
    /// The broker's current sequence: a watermark for the next catch-up.
    public var sequence: UInt64
    /// Pages whose `lastUpdatedTime` is newer than the client's, with that time.
    public var changed: [EntityID: UInt64]
    /// Pages the client may not see: deleted from its workspaces' reach, or never there.
    public var gone: [EntityID]

    public init(
      epoch: String, epochChanged: Bool, sequence: UInt64, changed: [EntityID: UInt64], gone: [EntityID]
    ) {
      self.epoch = epoch
      self.epochChanged = epochChanged
      self.sequence = sequence
      self.changed = changed
      self.gone = gone
    }
  }

  /// `POST /v1/fetch`: deltas for many pages since the client's times, `limit` per request in page-id order;
  /// `cursor` continues after the last page of the previous answer.
  public struct FetchRequest: Codable, Sendable {
    public var epoch: String?
    public var pages: [EntityID: UInt64]
    public var limit: Int?
    public var cursor: EntityID?

    public init(epoch: String? = nil, pages: [EntityID: UInt64], limit: Int? = nil, cursor: EntityID? = nil) {
      self.epoch = epoch
      self.pages = pages
      self.limit = limit
      self.cursor = cursor
    }
  }

  public struct FetchResponse: Codable, Sendable {
    public var epoch: String
    public var deltas: [PageDelta]
    public var gone: [EntityID]
    /// Send the same request with this cursor for the next pages; nil when this was the last.
    public var nextCursor: EntityID?

    public init(epoch: String, deltas: [PageDelta], gone: [EntityID], nextCursor: EntityID? = nil) {
      self.epoch = epoch
      self.deltas = deltas
      self.gone = gone
      self.nextCursor = nextCursor
    }
  }

  /// What a device sends on `/v1/stream`.
  public struct ClientMessage: Codable, Sendable {
    /// `subscribe` or `unsubscribe`.
    public var op: String
    public var pages: [String]?

    public init(op: String, pages: [String]? = nil) {
      self.op = op
      self.pages = pages
    }
  }

  /// The answer to `subscribe`.
  public struct Subscribed: Codable, Sendable {
    public var op = "subscribed"
    /// Subscriptions added by this message.
    public var added: Int
    /// The connection's subscriptions now.
    public var total: Int
    /// Ids refused: malformed, another workspace's, or past the connection's limit.
    public var denied: [String]

    public init(added: Int, total: Int, denied: [String]) {
      self.added = added
      self.total = total
      self.denied = denied
    }
  }

  public struct Unsubscribed: Codable, Sendable {
    public var op = "unsubscribed"
    public var removed: Int
    public var total: Int

    public init(removed: Int, total: Int) {
      self.removed = removed
      self.total = total
    }
  }

  /// Pages that changed, each with its new `lastUpdatedTime`, coalesced: a page appears once with its newest time.
  public struct Changed: Codable, Sendable {
    public var op = "changed"
    public var pages: [String: UInt64]

    public init(pages: [String: UInt64]) {
      self.pages = pages
    }
  }

  /// Subscriptions the broker withdrew because the device's token may no longer see those pages (its workspaces
  /// were narrowed by a configuration reload). The pages are no longer notified.
  public struct Revoked: Codable, Sendable {
    public var op = "revoked"
    public var revokedPages: [String]
    public var total: Int

    public init(revokedPages: [String], total: Int) {
      self.revokedPages = revokedPages
      self.total = total
    }
  }

  /// A message the broker could not act on; the connection stays open.
  public struct StreamError: Codable, Sendable {
    public var op = "error"
    public var code: Int
    public var message: String

    public init(code: Int, message: String) {
      self.code = code
      self.message = message
    }
  }

  /// `GET /healthz`.
  public struct Health: Codable, Sendable {
    public var status: String
    public var epoch: String
    public var sequence: UInt64

    public init(status: String, epoch: String, sequence: UInt64) {
      self.status = status
      self.epoch = epoch
      self.sequence = sequence
    }
  }

  /// `GET /v1/sync` (the seed guide's pull).
  public struct SyncPull: Codable, Sendable {
    public var changes: [PageSnapshot]
    public var page: Int
    public var limit: Int
    public var hasMore: Bool
    /// The newest sequence: the client's next `mutationsSince`.
    public var latest: UInt64
    public var epoch: String
    /// With `hasMore`: the `offset` of the next request. An answer cut short by `[limits] answer_bytes` holds
    /// fewer than `limit` pages, and only this continues it without a gap (`page + 1` would skip the rest).
    public var nextOffset: Int?

    public init(
      changes: [PageSnapshot], page: Int, limit: Int, hasMore: Bool, latest: UInt64, epoch: String,
      nextOffset: Int? = nil
    ) {
      self.changes = changes
      self.page = page
      self.limit = limit
      self.hasMore = hasMore
      self.latest = latest
      self.epoch = epoch
      self.nextOffset = nextOffset
    }
  }

  /// `GET /v1/sync?metadataOnly=true`.
  public struct SyncMetadata: Codable, Sendable {
    public var hasChanges: Bool
    public var latest: UInt64
    public var epoch: String

    public init(hasChanges: Bool, latest: UInt64, epoch: String) {
      self.hasChanges = hasChanges
      self.latest = latest
      self.epoch = epoch
    }
  }
}
