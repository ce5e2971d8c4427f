import FoundationEssentials

/// One event of the daemon's change stream (`GET /v1/events`; docs/protocol.md): what changed, with the event's
/// id and its JSON as the daemon sent it.
public struct PagesyncEvent: Equatable, Sendable {
  /// The event's id: decimal, increasing within a daemon run and across restarts. The snapshot of the sync state
  /// that starts a fresh stream has the newest id (its position); a resumed stream's snapshot has none (nil).
  public var id: UInt64?
  /// What happened.
  public var change: Change
  /// The event's `data`: one JSON object, exactly as the daemon sent it (what `pagesync watch --json` prints).
  public var json: String

  public init(id: UInt64?, change: Change, json: String) {
    self.id = id
    self.change = change
    self.json = json
  }

  /// What an event says happened. Unknown types never reach an app: the stream skips them.
  public enum Change: Equatable, Sendable {
    /// A page's local copy changed: a local edit committed, or a fetched copy was stored.
    case page(PageChanged)
    /// A page entered or left the offline set.
    case offline(OfflineChanged)
    /// The sync state changed (also the snapshot at the start of each stream).
    case sync(SyncChanged)
    /// The broker rejected a mutation (it is kept: `LocalAPICall.conflicts`).
    case conflict(MutationRejected)
    /// Events were lost (the daemon restarted, or the app fell too far behind): re-read what is shown.
    case reset(StreamReset)
  }

  /// `{"type": "page", "id", "lastDownloadedTimestamp", "source", "deleted"?}`.
  public struct PageChanged: Decodable, Equatable, Sendable {
    /// The page's id.
    public var id: String
    /// The broker sequence the local copy is at; nil when it was never downloaded (made on this device).
    public var lastDownloadedTimestamp: UInt64?
    /// `local` (an edit on this device) or `remote` (a copy fetched from the broker); opaque.
    public var source: String
    /// Whether the page was deleted.
    public var deleted: Bool

    private enum CodingKeys: String, CodingKey { case id, lastDownloadedTimestamp, source, deleted }

    public init(id: String, lastDownloadedTimestamp: UInt64?, source: String, deleted: Bool = false) {
      self.id = id
      self.lastDownloadedTimestamp = lastDownloadedTimestamp
      self.source = source
      self.deleted = deleted
    }

    public init(from decoder: any Decoder) throws {
      let container = try decoder.container(keyedBy: CodingKeys.self)
      id = try container.decode(String.self, forKey: .id)
      lastDownloadedTimestamp = try container.decodeIfPresent(UInt64.self, forKey: .lastDownloadedTimestamp)
      source = try container.decode(String.self, forKey: .source)
      deleted = try container.decodeIfPresent(Bool.self, forKey: .deleted) ?? false
    }
  }

  /// `{"type": "offline", "id", "available", "missing"?}`.
  public struct OfflineChanged: Decodable, Equatable, Sendable {
    public var id: String
    /// true: the page entered the offline set; false: it left.
    public var available: Bool
    /// The broker says it does not exist (or is another workspace's): not available, though its reasons stay
    /// until they are removed; `available: true` follows if it appears.
    public var missing: Bool

    private enum CodingKeys: String, CodingKey { case id, available, missing }

    public init(id: String, available: Bool, missing: Bool = false) {
      self.id = id
      self.available = available
      self.missing = missing
    }

    public init(from decoder: any Decoder) throws {
      let container = try decoder.container(keyedBy: CodingKeys.self)
      id = try container.decode(String.self, forKey: .id)
      available = try container.decode(Bool.self, forKey: .available)
      missing = try container.decodeIfPresent(Bool.self, forKey: .missing) ?? false
    }
  }

  /// `{"type": "sync", "state", "connected", "pendingMutations"}`.
  public struct SyncChanged: Decodable, Equatable, Sendable {
    /// The daemon's state name (`offline`, `connecting`, `catchingUp`, `live`, ...): opaque.
    public var state: String
    public var connected: Bool
    public var pendingMutations: Int

    public init(state: String, connected: Bool, pendingMutations: Int) {
      self.state = state
      self.connected = connected
      self.pendingMutations = pendingMutations
    }
  }

  /// `{"type": "conflict", "mutationId", "page", "reason"}`.
  public struct MutationRejected: Decodable, Equatable, Sendable {
    public var mutationId: UInt64
    public var page: String
    /// The rejection's name (`page_deleted`, ...).
    public var reason: String

    public init(mutationId: UInt64, page: String, reason: String) {
      self.mutationId = mutationId
      self.page = page
      self.reason = reason
    }
  }

  /// `{"type": "reset", "reason"}`.
  public struct StreamReset: Decodable, Equatable, Sendable {
    /// Why events were lost, in the daemon's words.
    public var reason: String

    public init(reason: String) { self.reason = reason }
  }

  /// Why a stream's event is not one of the contract's.
  struct DecodingFailure: Error, Equatable, CustomStringConvertible {
    var description: String
  }

  /// The event that `event` carries; nil for a type this client does not know (skipped, as the contract asks
  /// of readers). A known type whose data is not the contract's JSON, or an id that is not a decimal number,
  /// is a `DecodingFailure` naming the event.
  init?(_ event: ServerSentEvent) throws(DecodingFailure) {
    let label = event.id.map { "event \($0)" } ?? "the unnumbered event"
    var id: UInt64?
    if let text = event.id {
      guard let number = UInt64(text) else {
        throw DecodingFailure(description: "\(label): its id is not a decimal number")
      }
      id = number
    }
    let data = Data(event.data.utf8)
    let type: String
    do {
      type = try JSONDecoder().decode(TypeField.self, from: data).type
    } catch {
      throw DecodingFailure(description: "\(label): its data is not a JSON object with a \"type\": \(error)")
    }
    // The `event:` line and the JSON's `type` are the same by contract; the JSON is what is read.
    func read<T: Decodable>(_: T.Type) throws(DecodingFailure) -> T {
      do {
        return try JSONDecoder().decode(T.self, from: data)
      } catch let error as DecodingError {
        throw DecodingFailure(description: "\(label) (\(type)): \(PagesyncEvent.describe(error))")
      } catch {
        throw DecodingFailure(description: "\(label) (\(type)): \(error)")
      }
    }
    let change: Change
    switch type {
    case "page": change = .page(try read(PageChanged.self))
    case "offline": change = .offline(try read(OfflineChanged.self))
    case "sync": change = .sync(try read(SyncChanged.self))
    case "conflict": change = .conflict(try read(MutationRejected.self))
    case "reset": change = .reset(try read(StreamReset.self))
    default: return nil
    }
    self.init(id: id, change: change, json: event.data)
  }

  private struct TypeField: Decodable {
    var type: String
  }

  private static func describe(_ error: DecodingError) -> String {
    switch error {
    case .keyNotFound(let key, _): "\"\(key.stringValue)\" is missing"
    case .valueNotFound(_, let context), .typeMismatch(_, let context):
      "\"\(context.codingPath.map(\.stringValue).joined(separator: "."))\" is null or of the wrong type"
    case .dataCorrupted(let context): context.debugDescription
    @unknown default: "\(error)"
    }
  }
}
