/// A hybrid logical clock reading: wall-clock milliseconds and a counter that orders events within one
/// millisecond (Kulkarni et al., "Logical Physical Clocks"). Ordered by milliseconds, then counter.
///
/// On the wire it is the string `MILLIS:COUNTER` (e.g. `"1732244000123:7"`): exact in every JSON reader,
/// unlike a 64-bit number in JavaScript.
public struct HLCTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
  /// Milliseconds since the Unix epoch, as far as any clock that contributed knew.
  public var millis: UInt64
  /// Events within the same millisecond.
  public var counter: UInt32

  public init(millis: UInt64, counter: UInt32 = 0) {
    self.millis = millis
    self.counter = counter
  }

  public static let zero = HLCTimestamp(millis: 0)

  /// Parses `MILLIS:COUNTER`.
  public init(parsing text: String) throws(SyncModelError) {
    let parsed =
      text.utf8.withContiguousStorageIfAvailable(HLCTimestamp.parse(utf8:))
      ?? Array(text.utf8).withUnsafeBufferPointer(HLCTimestamp.parse(utf8:))
    guard let parsed else { throw .invalidTimestamp(String(text.prefix(80))) }
    self = parsed
  }

  /// Parses the UTF-8 `bytes` of `MILLIS:COUNTER` (the broker's batch reader parses times where it reads them).
  public init(parsingUTF8 bytes: UnsafeBufferPointer<UInt8>) throws(SyncModelError) {
    guard let parsed = HLCTimestamp.parse(utf8: bytes) else {
      throw .invalidTimestamp(String(String(decoding: bytes, as: UTF8.self).prefix(80)))
    }
    self = parsed
  }

  private static func parse(utf8 bytes: UnsafeBufferPointer<UInt8>) -> HLCTimestamp? {
    // Every mutation of every batch comes through here: two runs of digits around one colon, each number
    // within its type, in one pass over each run.
    guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
      let millis = number(bytes[..<colon], limit: .max),
      let counter = number(bytes[(colon + 1)...], limit: UInt64(UInt32.max))
    else { return nil }
    return HLCTimestamp(millis: millis, counter: UInt32(counter))
  }

  /// The value of a non-empty run of decimal digits, if it is at most `limit`.
  private static func number(_ digits: Slice<UnsafeBufferPointer<UInt8>>, limit: UInt64) -> UInt64? {
    guard !digits.isEmpty else { return nil }
    var value: UInt64 = 0
    for byte in digits {
      let digit = byte &- UInt8(ascii: "0")
      guard digit < 10 else { return nil }
      let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
      let (sum, overflow2) = times10.addingReportingOverflow(UInt64(digit))
      guard !overflow1 && !overflow2 && sum <= limit else { return nil }
      value = sum
    }
    return value
  }

  public static func < (lhs: HLCTimestamp, rhs: HLCTimestamp) -> Bool {
    (lhs.millis, lhs.counter) < (rhs.millis, rhs.counter)
  }

  public var description: String { "\(millis):\(counter)" }
}

extension HLCTimestamp: Codable {
  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    let text = try container.decode(String.self)
    do {
      try self.init(parsing: text)
    } catch {
      throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(description)
  }
}

/// A hybrid logical clock. I/O-free: the caller passes the physical time, so it is tested with any clock.
///
/// `now` stamps a local event; `observe` merges a timestamp seen from elsewhere (a server time, another
/// device's edit) so that every later local stamp orders after it, whatever the local wall clock says. A
/// wall clock that goes backwards never makes stamps go backwards.
public struct HybridLogicalClock: Sendable {
  /// The last timestamp issued or observed.
  public private(set) var last: HLCTimestamp

  public init(last: HLCTimestamp = .zero) {
    self.last = last
  }

  /// A timestamp for a local event at `physicalMillis`, after every timestamp issued or observed so far.
  public mutating func now(physicalMillis: UInt64) -> HLCTimestamp {
    if physicalMillis > last.millis {
      last = HLCTimestamp(millis: physicalMillis, counter: 0)
    } else {
      last = last.successor
    }
    return last
  }

  /// Merges `remote` (received at local time `physicalMillis`); returns the merged timestamp, which is after
  /// both `remote` and everything before.
  @discardableResult
  public mutating func observe(_ remote: HLCTimestamp, physicalMillis: UInt64) -> HLCTimestamp {
    let newest = max(last, remote)
    if physicalMillis > newest.millis {
      last = HLCTimestamp(millis: physicalMillis, counter: 0)
    } else {
      last = newest.successor
    }
    return last
  }
}

extension HLCTimestamp {
  /// The next timestamp: the counter advances; at its limit the milliseconds do. The largest timestamp (a
  /// device may send any time, `"18446744073709551615:4294967295"` included) is its own successor rather than
  /// a trap: a clock pushed there stays there.
  var successor: HLCTimestamp {
    if counter < .max { return HLCTimestamp(millis: millis, counter: counter + 1) }
    return millis < .max ? HLCTimestamp(millis: millis + 1, counter: 0) : self
  }
}

/// The order of last-writer-wins registers: HLC time, then client id (so two writes with the same time still
/// have one winner, the same on every replica).
public struct LWWStamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
  public var time: HLCTimestamp
  public var client: EntityID

  public init(time: HLCTimestamp, client: EntityID) {
    self.time = time
    self.client = client
  }

  public static func < (lhs: LWWStamp, rhs: LWWStamp) -> Bool {
    lhs.time != rhs.time ? lhs.time < rhs.time : lhs.client < rhs.client
  }

  public var description: String { "\(time)@\(client)" }
}
