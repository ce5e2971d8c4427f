/// At most one log line per `interval` for an event a client can cause at will (a connection refused past the
/// limits, a request the server cannot parse): without it a client that connects and closes as fast as it can made
/// the broker write a warning for each, thousands a second, into the journal. The lines held back are counted, and
/// the next line that goes out says how many; metrics count every event anyway.
///
/// Times are milliseconds of any monotonic clock (the loop's `now`). Owned by the loop thread; a value.
public struct LogThrottle: Sendable {
  /// The least time between two lines.
  public let interval: UInt64
  private var lastLine: UInt64?
  private var heldBack = 0

  public init(interval: UInt64) {
    self.interval = interval
  }

  /// Whether the event that happened at `now` gets a line: nil when it is held back, else how many were held back
  /// since the last line (to log with it).
  public mutating func admit(at now: UInt64) -> Int? {
    if let lastLine, now < lastLine + interval {
      heldBack += 1
      return nil
    }
    lastLine = now
    defer { heldBack = 0 }
    return heldBack
  }
}
