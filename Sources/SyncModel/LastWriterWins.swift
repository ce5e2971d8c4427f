/// The conflict rule for every field that is a register (a title, a property, a block's text, attributes,
/// position and deleted flag, a page's parent and deleted flag, a database's view): the write with the newest
/// `LWWStamp` (HLC time, then client id) wins, whatever order writes arrive in. The stores keep each field's
/// stamp beside it as `LWWStamp.sortKey`, which sorts as the stamps do, and ask `replaces` before writing.
public enum LastWriterWins {
  /// Whether a write stamped `incoming` (a `sortKey`) replaces the value stamped `current` (nil or
  /// `LWWStamp.origin`: nobody wrote it yet). Only a strictly newer stamp does: the same mutation applied again
  /// changes nothing.
  public static func replaces(_ incoming: String, over current: String?) -> Bool {
    incoming > (current ?? LWWStamp.origin)
  }
}

extension LWWStamp {
  /// A text form that sorts, as bytes, the way the stamps do: milliseconds and counter zero-padded to a fixed
  /// width, then the client id (ASCII, so its bytes sort as `EntityID`s do; a prefix first).
  public var sortKey: String {
    // Written digit by digit into one buffer: every mutation applied makes one (a tenth of the store's own work
    // per one-mutation batch when built from padded `String`s).
    let clientBytes = client.rawValue.utf8
    return String(unsafeUninitializedCapacity: 32 + clientBytes.count) { buffer in
      func put(_ value: UInt64, width: Int, at start: Int) {
        var rest = value
        for index in stride(from: start + width - 1, through: start, by: -1) {
          buffer[index] = UInt8(ascii: "0") + UInt8(rest % 10)
          rest /= 10
        }
      }
      put(time.millis, width: 20, at: 0)
      buffer[20] = UInt8(ascii: ":")
      put(UInt64(time.counter), width: 10, at: 21)
      buffer[31] = UInt8(ascii: "@")
      var index = 32
      for byte in clientBytes {
        buffer[index] = byte
        index += 1
      }
      return index
    }
  }

  /// The stamp below every real one (for fields nobody has written).
  public static let origin = ""
}

extension PropertyValue {
  /// The order of a view's sort: numbers numerically, strings and lists by their UTF-8, false before true; values
  /// of different kinds by kind (bool, number, string, list).
  public func sortsBefore(_ other: PropertyValue) -> Bool {
    switch (self, other) {
    case (.number(let x), .number(let y)): return x < y
    case (.string(let x), .string(let y)): return x.utf8.lexicographicallyPrecedes(y.utf8)
    case (.bool(let x), .bool(let y)): return !x && y
    case (.list(let x), .list(let y)):
      return x.joined(separator: "\u{0}").utf8.lexicographicallyPrecedes(y.joined(separator: "\u{0}").utf8)
    default: return kindRank < other.kindRank
    }
  }

  private var kindRank: Int {
    switch self {
    case .bool: 0
    case .number: 1
    case .string: 2
    case .list: 3
    }
  }
}

extension ViewState {
  /// A database's rows in view under this view (docs/protocol.md, "Databases and views"): the rows passing the
  /// filter (the property equals the value), sorted by the sort property (`PropertyValue.sortsBefore`, reversed
  /// when descending), rows lacking it last; rows that tie, and every row when there is no sort, keep their
  /// creation order. `rows` are the database's live rows in creation order, each with (at least) the properties
  /// the view reads. The broker computes `rows` with it; the device recomputes them after a local edit.
  public func rowsInView(_ rows: [(id: EntityID, properties: [String: PropertyValue])]) -> [EntityID] {
    var kept: [(created: Int, id: EntityID, value: PropertyValue?)] = []
    kept.reserveCapacity(rows.count)
    for (created, row) in rows.enumerated() {
      if let filter, row.properties[filter.property] != filter.value { continue }
      kept.append((created, row.id, sort.flatMap { row.properties[$0.property] }))
    }
    if let sort {
      kept.sort { a, b in
        switch (a.value, b.value) {
        case (nil, nil): return a.created < b.created
        case (nil, _): return false
        case (_, nil): return true
        case (let x?, let y?):
          if x == y { return a.created < b.created }
          return sort.descending ? y.sortsBefore(x) : x.sortsBefore(y)
        }
      }
    }
    return kept.map(\.id)
  }
}
