/// Tokens verified already, by their SHA-256, until their end of validity: a reconnecting device costs a hash
/// and a lookup, not a signature check. At most `capacity` entries: when full, the oldest inserted one makes
/// room.
///
/// Threading: one thread (the broker's loop). The clock is an argument, so tests need no sleeps.
public struct JWTCache<Value> {
  public let capacity: Int
  private var entries: [[UInt8]: (value: Value, expiresAt: Int64, serial: UInt64)] = [:]
  /// Keys in insertion order with the serial they were inserted with (a key re-inserted later has a newer
  /// serial, so its old place in the ring does not evict it).
  private var ring: [(key: [UInt8], serial: UInt64)] = []
  private var head = 0
  private var nextSerial: UInt64 = 0

  public init(capacity: Int) {
    precondition(capacity >= 0, "negative cache capacity")
    self.capacity = capacity
  }

  public var count: Int { entries.count }

  /// The value cached for `digest` if it is still valid at `now`; an expired entry is dropped.
  public mutating func value(for digest: [UInt8], now: Int64) -> Value? {
    guard let entry = entries[digest] else { return nil }
    guard now < entry.expiresAt else {
      entries[digest] = nil
      return nil
    }
    return entry.value
  }

  /// Keeps `value` for `digest` until `expiresAt` (Unix seconds).
  public mutating func insert(_ value: Value, for digest: [UInt8], expiresAt: Int64, now: Int64) {
    guard capacity > 0, now < expiresAt else { return }
    if entries[digest] == nil {
      while entries.count >= capacity { evictOldest() }
    }
    nextSerial += 1
    entries[digest] = (value, expiresAt, nextSerial)
    ring.append((digest, nextSerial))
    // Entries dropped on lookup leave their place in the ring: compact it so that it stays within twice the
    // capacity (amortized: at most once per `capacity` inserts).
    if ring.count - head > 2 * capacity {
      ring = ring[head...].filter { entries[$0.key]?.serial == $0.serial }
      head = 0
    } else if head > 1024 && head * 2 > ring.count {
      ring.removeFirst(head)
      head = 0
    }
  }

  /// Forgets every entry (the keys or the policies changed).
  public mutating func removeAll() {
    entries.removeAll()
    ring.removeAll()
    head = 0
  }

  private mutating func evictOldest() {
    while head < ring.count {
      let (key, serial) = ring[head]
      head += 1
      if entries[key]?.serial == serial {
        entries[key] = nil
        return
      }
    }
    // Every ring entry was stale: cannot happen while entries is non-empty, but stay bounded regardless.
    entries.removeAll()
  }
}
