/// The daemon's change stream without I/O: a window of the newest events, each with an id, from which a reader
/// resumes after any id it saw (`GET /v1/events`, `Last-Event-ID`).
///
/// - **Ids.** Strictly increasing from `firstID`, which the daemon derives from the wall clock so that a later run
///   starts above every id an earlier run gave out: an id from before a restart is then older than the window and
///   the reader is told it lost events, never handed events that are not the ones it missed.
/// - **Window.** At most `capacity` events are kept; the oldest go first. A reader whose position is no longer in
///   the window (or is not one this run gave out) gets `.lost`.
/// - **Coalescing.** Each event may have a key. Read from a position, an event is left out when a newer event in
///   the window has the same key: a reader behind hears only the newest state of each page, not its history.
///   Events without a key (a rejection) are all delivered.
///
/// Memory is `capacity` entries whatever the readers do: a slow reader holds a position, not a queue. An entry is
/// its id and its payload only (the key is the payload's, computed when a reader is behind), and the ring grows
/// to `capacity` and no further (an array doubling its way there kept 16,384 entries' room for 10,000).
public struct ChangeFeed<Key: Hashable, Payload> {
  public struct Entry {
    public let id: UInt64
    public let payload: Payload
  }

  /// What a reader at some position gets.
  public enum Reading {
    /// The events after the position, coalesced, oldest first (at most the limit asked for). Empty when the
    /// reader is up to date.
    case events([Entry])
    /// Events after the position are no longer kept (or the position is not from this run): the reader must
    /// start again from `newestID`.
    case lost
  }

  /// The most events kept.
  public let capacity: Int
  /// The id of the first event of this run.
  public let firstID: UInt64
  /// An event's coalescing key (nil: never coalesced).
  private let keyOf: (Payload) -> Key?
  /// A ring of the kept events: `ring[(start + i) % capacity]` is the i-th oldest.
  private var ring: [Entry] = []
  private var start = 0
  /// The id the next event gets.
  public private(set) var nextID: UInt64

  /// `key`: an event's coalescing key, from its payload (nil: the event is never coalesced).
  public init(capacity: Int, firstID: UInt64, key: @escaping (Payload) -> Key?) {
    precondition(capacity > 0, "a change feed keeps at least one event")
    precondition(firstID > 0, "0 is the position before every event")
    self.capacity = capacity
    self.firstID = firstID
    keyOf = key
    nextID = firstID
  }

  /// The id of the newest event, or the position just before the first (`firstID - 1`) while there is none.
  public var newestID: UInt64 { nextID - 1 }
  /// The id of the oldest event kept, nil while there is none.
  public var oldestID: UInt64? { ring.isEmpty ? nil : ring[start].id }
  /// How many events are kept.
  public var count: Int { ring.count }
  /// How many entries the ring has room for without growing (at most `capacity`, give or take the allocator's
  /// rounding).
  public var reservedCapacity: Int { ring.capacity }

  /// Adds an event; returns its id.
  @discardableResult
  public mutating func append(_ payload: Payload) -> UInt64 {
    let id = nextID
    nextID += 1
    let entry = Entry(id: id, payload: payload)
    if ring.count < capacity {
      if ring.count == ring.capacity {
        // Twice the room, as an array would take, but never past `capacity`.
        ring.reserveCapacity(min(capacity, max(16, ring.capacity * 2)))
      }
      ring.append(entry)
    } else {
      ring[start] = entry
      start = (start + 1) % capacity
    }
    return id
  }

  /// Whether a reader at `position` (the id of the last event it saw) can still be served from the window.
  public func canResume(after position: UInt64) -> Bool {
    if position == newestID { return true }
    guard position < newestID, let oldest = oldestID else { return false }
    // Every event after `position` is kept when the oldest kept is the one right after it or older.
    return position >= oldest - 1 && position >= firstID - 1
  }

  /// The events after `position`, coalesced, oldest first: at most `limit`. Coalescing looks at the whole
  /// window after `position`, so an event left out is always superseded by one that is delivered, in this call or
  /// a later one from the last id this call returned.
  public func read(after position: UInt64, limit: Int = Int.max) -> Reading {
    guard canResume(after: position) else { return .lost }
    guard position < newestID, let oldest = oldestID else { return .events([]) }
    let skip = Int(position + 1 - oldest)
    // Newest first, keeping the first of each key met: the newest of each key.
    var seen: Set<Key> = []
    var kept: [Int] = []
    var index = ring.count - 1
    while index >= skip {
      let entry = ring[(start + index) % capacity]
      if let key = keyOf(entry.payload) {
        if seen.insert(key).inserted { kept.append(index) }
      } else {
        kept.append(index)
      }
      index -= 1
    }
    var entries: [Entry] = []
    entries.reserveCapacity(min(kept.count, limit))
    for index in kept.reversed() {
      guard entries.count < limit else { break }
      entries.append(ring[(start + index) % capacity])
    }
    return .events(entries)
  }
}
